"""A manifest: a CSV, TSV or Parquet table with one row per image.

Columns: `path` (required; relative paths are read from the manifest's folder, or from
`--root`), `label` (integer) and/or `label_name` (one of them is required unless
`--unlabeled`), `split` (optional: train, val, test), `image_id` (optional: else made
from the path). Every other column becomes a factor column of images.parquet.

With only `label_name`, labels are 0..K-1 over the names in sorted order; with only
`label`, its name is the number.

A `parent` column (optional) makes a label hierarchy (table `label_hierarchy` over
`label_name`): each row's label is a child of its parent, the same parent on every row of
a label, and a parent never listed as a label is a root. A separate hierarchy file
(`--hierarchy FILE`: CSV/TSV/Parquet with columns `node`, `parent` and optionally `name`)
adds the levels above (`mammals,animals`) or the whole tree.
"""

from __future__ import annotations

from pathlib import Path

from ..hierarchy import HierarchyError, from_pairs
from .images import CORE, ImportInputError, Item, Listing, split_of

KNOWN = ("path", "label", "label_name", "split", "image_id", "parent")


def read_table(path: Path):
    """A CSV/TSV/Parquet file as a DataFrame, and how to name its row i in messages."""
    import pandas as pd

    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            df = pd.read_parquet(path)
            return df, lambda i: f"{path} row {i + 1}"
        if suffix in (".csv", ".tsv", ".txt"):
            df = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", skipinitialspace=True)
            return df, lambda i: f"{path} row {i + 1} (line {i + 2})"
    except (OSError, ValueError) as e:
        raise ImportInputError(f"{path}: cannot be read as a table ({str(e).splitlines()[0]})") from None
    raise ImportInputError(f"{path}: a manifest must be .csv, .tsv or .parquet")


def _value(v):
    """A plain Python value (numpy scalars become int/float/str; NaN and NA become None)."""
    import pandas as pd

    if v is None or (not isinstance(v, (list, tuple, dict)) and pd.isna(v)):
        return None
    return v.item() if hasattr(v, "item") else v


def scan(source, root=None, unlabeled: bool = False, hierarchy=None) -> Listing:
    path = Path(source).expanduser()
    if not path.is_file():
        raise ImportInputError(f"{path}: manifest not found")
    df, where = read_table(path)
    base = Path(root).expanduser() if root is not None else path.parent
    cols = list(df.columns)
    if "path" not in cols:
        raise ImportInputError(f"{path}: no `path` column (columns: {', '.join(map(str, cols))})")
    has_label, has_name = "label" in cols, "label_name" in cols
    if not (has_label or has_name or unlabeled):
        raise ImportInputError(
            f"{path}: no `label` or `label_name` column (columns: "
            f"{', '.join(map(str, cols))}); pass --unlabeled to import without labels"
        )
    clash = [c for c in cols if c in CORE and c not in KNOWN]
    if clash:
        raise ImportInputError(f"{path}: column(s) {', '.join(clash)} are set by the import; rename them")
    factors = [c for c in cols if c not in KNOWN]

    rows = df.to_dict("records")
    names = {}
    if has_name and not has_label:  # labels from the sorted names
        present = sorted({str(_value(r["label_name"])) for r in rows if _value(r["label_name"]) is not None})
        names = {n: i for i, n in enumerate(present)}
    items, missing = [], []
    for i, r in enumerate(rows):
        w = where(i)
        p = _value(r["path"])
        if p is None or not str(p).strip():
            raise ImportInputError(f"{w}: column path is empty")
        f = Path(str(p)).expanduser()
        f = f if f.is_absolute() else base / f
        if not f.is_file():
            missing.append(f"{w}: column path: {f} not found")
            continue
        try:
            key = f.resolve().relative_to(base.resolve()).as_posix()
        except ValueError:
            key = str(p)
        label = name = None
        if has_label and _value(r["label"]) is not None:
            v = _value(r["label"])
            if isinstance(v, float) and v.is_integer():
                v = int(v)  # a column with empty cells is read as floats
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ImportInputError(f"{w}: column label: {v!r} is not an integer >= 0")
            label = v
            name = _value(r["label_name"]) if has_name else None
            name = str(label) if name is None else str(name)
        elif has_name and _value(r["label_name"]) is not None:
            if has_label:
                raise ImportInputError(
                    f"{w}: column label is empty but label_name is {_value(r['label_name'])!r}"
                )
            name = str(_value(r["label_name"]))
            label = names[name]
        elif not unlabeled:
            raise ImportInputError(
                f"{w}: no label (columns label/label_name are empty); "
                "pass --unlabeled to import images without labels"
            )
        split = None
        if "split" in cols:
            s = _value(r["split"])
            if s is None:
                raise ImportInputError(f"{w}: column split is empty")
            split = split_of(s, f"{w}: column split")
        iid = _value(r["image_id"]) if "image_id" in cols else None
        if "image_id" in cols and iid is None:
            raise ImportInputError(f"{w}: column image_id is empty")
        items.append(
            Item(
                key=key,
                where=w,
                path=f,
                label=label,
                label_name=name,
                split=split,
                factors={c: _value(r[c]) for c in factors},
                image_id=None if iid is None else str(iid),
            )
        )
    if missing:
        more = f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""
        raise ImportInputError(
            "; ".join(missing[:3])
            + more
            + ("" if root else "; relative paths are read from the manifest's folder (--root to change it)")
        )
    _no_duplicate_paths(items)
    listing = Listing(items, str(path), "manifest")
    pairs = []
    if "parent" in cols:
        if not (has_label or has_name):
            raise ImportInputError(f"{path}: a `parent` column needs labels (label_name) to be the children")
        # Every row became an item (a missing file stops the import above).
        for r, it in zip(rows, items):
            if it.label_name is not None:
                p = _value(r["parent"])
                pairs.append((it.label_name, None if p is None else str(p)))
    names = {}
    if hierarchy is not None:
        more, names = read_hierarchy(Path(hierarchy).expanduser())
        pairs += more
    if pairs:
        try:
            listing.hierarchy = from_pairs(
                pairs, f"{path} (column parent)" if hierarchy is None else str(hierarchy)
            )
        except HierarchyError as e:
            raise ImportInputError(str(e)) from None
        listing.hierarchy_column, listing.hierarchy_names = "label_name", names
    return listing


def read_hierarchy(path: Path) -> tuple[list[tuple], dict]:
    """(node, parent) pairs and node names of a hierarchy file (columns node, parent, name)."""
    if not path.is_file():
        raise ImportInputError(f"--hierarchy {path}: file not found")
    df, where = read_table(path)
    missing = [c for c in ("node", "parent") if c not in df.columns]
    if missing:
        raise ImportInputError(
            f"{path}: no column {', '.join(missing)} (a hierarchy file has node, parent and optionally name)"
        )
    pairs, names = [], {}
    for i, r in enumerate(df.to_dict("records")):
        node = _value(r["node"])
        if node is None or not str(node).strip():
            raise ImportInputError(f"{where(i)}: column node is empty")
        p = _value(r["parent"])
        pairs.append((str(node), None if p is None else str(p)))
        if "name" in df.columns and _value(r["name"]) is not None:
            names[str(node)] = str(_value(r["name"]))
    return pairs, names


def _no_duplicate_paths(items: list[Item]) -> None:
    seen: dict[str, str] = {}
    for it in items:
        k = str(it.path.resolve())
        if k in seen:
            raise ImportInputError(f"{it.where}: column path: {it.path} is listed twice (also {seen[k]})")
        seen[k] = it.where
