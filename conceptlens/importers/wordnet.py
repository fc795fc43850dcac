"""ImageNet's label hierarchy from WordNet: the hypernyms of its synsets.

WordNet's noun database (`data.noun`, Debian package `wordnet-base`:
/usr/share/wordnet/data.noun) has one line per synset:

    OFFSET LEX_FILENUM n W_CNT WORD LEX_ID [WORD LEX_ID ...] P_CNT [PTR ...] | GLOSS

(W_CNT two hex digits, P_CNT three decimal ones, each pointer `SYMBOL OFFSET POS
SOURCE/TARGET`). An ImageNet class's WordNet id is `n` + its 8-digit offset. A hypernym
pointer is `@` (or `@i`, an instance's); a synset may have several, and the tree keeps the
first `@` (else the first `@i`), so every class has one path up to `entity`.

Of the whole of WordNet the tree keeps the classes and their ancestors, then drops every
ancestor with a single child (`physical entity` -> `object` -> `whole` -> ... chains say
nothing about how the classes group): each level left is a real branching, and an
ancestor's name is its first lemma.
"""

from __future__ import annotations

from pathlib import Path

from ..hierarchy import HierarchyError, check_tree

DATA_NOUN = Path("/usr/share/wordnet/data.noun")
PACKAGE = "wordnet-base"


def read_data_noun(path: Path) -> tuple[dict[str, str | None], dict[str, str]]:
    """(wnid -> the wnid of its first hypernym or None, wnid -> first lemma) of every noun
    synset of a WordNet `data.noun`; a malformed line is an error naming its line."""
    parent: dict[str, str | None] = {}
    lemma: dict[str, str] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as e:
        raise HierarchyError(f"{path}: cannot be read ({e})") from None
    for n, line in enumerate(lines, start=1):
        if not line or line.startswith(" "):  # the licence header is indented
            continue
        fields = line.split(" | ", 1)[0].split()
        try:
            offset, pos, w_cnt = fields[0], fields[2], int(fields[3], 16)
            words = fields[4 : 4 + 2 * w_cnt : 2]
            at = 4 + 2 * w_cnt
            p_cnt = int(fields[at])
            ptrs = [fields[at + 1 + 4 * i : at + 5 + 4 * i] for i in range(p_cnt)]
            if (
                len(offset) != 8
                or not offset.isdigit()
                or len(words) != w_cnt
                or any(len(p) != 4 for p in ptrs)
            ):
                raise ValueError
        except (IndexError, ValueError):
            raise HierarchyError(f"{path} line {n}: not a WordNet data line") from None
        if pos != "n":
            continue
        wnid = "n" + offset
        hyper = [p[1] for p in ptrs if p[0] == "@" and p[2] == "n"]
        hyper = hyper or [p[1] for p in ptrs if p[0] == "@i" and p[2] == "n"]
        parent[wnid] = "n" + hyper[0] if hyper else None
        lemma[wnid] = words[0].replace("_", " ") if words else wnid
    return parent, lemma


def imagenet_tree(
    wnids, path: Path = DATA_NOUN, names: dict[str, str] | None = None
) -> tuple[dict[str, str | None], dict[str, str]]:
    """(node -> parent, node -> name) of the tree over the classes `wnids` (module doc):
    every class and its ancestors, single-child ancestors dropped. `names` (wnid -> the
    class's label_name) name the classes; ancestors get their first lemma, with the wnid
    when two nodes would share a name."""
    full, lemma = read_data_noun(path)
    wnids = list(dict.fromkeys(wnids))
    missing = [w for w in wnids if w not in full]
    if missing:
        raise HierarchyError(
            f"{path}: {len(missing)} synset(s) of the classes are not in WordNet, e.g. {missing[0]}"
        )
    parent: dict[str, str | None] = {}
    for w in wnids:
        n = w
        while n is not None and n not in parent:
            p = full.get(n)
            parent[n] = p if p in full else None
            n = parent[n]
    check_tree(parent, str(path))
    classes = set(wnids)
    children: dict[str | None, list[str]] = {}
    for n, p in parent.items():
        children.setdefault(p, []).append(n)
    # Drop single-child ancestors (top down, so a chain collapses in one pass).
    for n in _top_down(parent, children):
        if n in classes or len(children.get(n, ())) != 1:
            continue
        (child,) = children[n]
        up = parent[n]
        parent[child] = up
        children[up] = [c for c in children[up] if c != n] + [child]
        del parent[n], children[n]
    out_names = {}
    for n in parent:
        out_names[n] = (names or {}).get(n) or lemma.get(n, n)
    seen: dict[str, list[str]] = {}
    for n, name in out_names.items():
        seen.setdefault(name, []).append(n)
    for name, nodes in seen.items():
        if len(nodes) > 1:
            for n in nodes:
                if n not in classes:  # classes keep the importer's (already unique) names
                    out_names[n] = f"{name} ({n})"
    return parent, out_names


def _top_down(parent, children) -> list[str]:
    out, todo = [], list(children.get(None, ()))
    while todo:
        n = todo.pop()
        out.append(n)
        todo += children.get(n, ())
    return out
