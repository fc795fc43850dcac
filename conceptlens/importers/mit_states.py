"""`conceptlens import mit-states --workspace W DIR`: MIT-States' compositional split (Purushwalkam et al.
2019), as yun2023 uses it.

DIR holds `train_pairs.txt`, `val_pairs.txt` and `test_pairs.txt` (directly or in
`compositional-split-natural/`), one `attribute object` pair per line ("ripe apple"), and
optionally the release's images, one folder per pair named `attribute object`, in
`images/` or `release_dataset/images/`.

Every pair of the three files is a class (labels 0..K-1 over the pairs sorted); its
composition is its attribute and its object (`label_primitives`, value 1). Primitives
are every attribute (group `attribute`, prompt "this is ripe") and every object (group
`object`, prompt "this is apple"), raw 100 x cosine as in the paper. An image's split
is that of the first split file listing its pair (train, then val, then test): the
split's own per-image assignment ships in a Torch file this importer does not read.
Folders of pairs no split lists are skipped, with a note.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..workspace import Workspace, check_id
from .images import ImportInputError, Item, Listing, import_images, is_image_file
from .primitives import find, rows, write_tables

SPLITS = ("train", "val", "test")
SPLIT_DIRS = ("", "compositional-split-natural")
IMAGE_DIRS = ("images", "release_dataset/images")


def read_pairs(root: Path) -> dict[str, list[tuple[str, str]]]:
    """{split: [(attribute, object)]} from the three files, in file order."""
    out = {}
    for s in SPLITS:
        path = find(root, tuple(os.path.join(d, f"{s}_pairs.txt") for d in SPLIT_DIRS), f"{s}_pairs.txt")
        seen, pairs = {}, []
        for n, (attr, obj) in rows(path, (2,), "attribute object"):
            if (attr, obj) in seen:
                raise ImportInputError(
                    f"{path} line {n}: pair '{attr} {obj}' is also on line {seen[attr, obj]}"
                )
            seen[attr, obj] = n
            pairs.append((attr, obj))
        if not pairs:
            raise ImportInputError(f"{path}: no pairs")
        out[s] = pairs
    return out


def read(source) -> tuple[dict, Listing | None]:
    """(pairs per split, the images found or None when DIR has no image folder)."""
    root = Path(source).expanduser()
    if not root.is_dir():
        raise ImportInputError(f"{root}: not a folder")
    pairs = read_pairs(root)
    labels = {p: i for i, p in enumerate(sorted({p for ps in pairs.values() for p in ps}))}
    split_of = {}
    for s in SPLITS:
        for p in pairs[s]:
            split_of.setdefault(p, s)
    img_root = next((root / d for d in IMAGE_DIRS if (root / d).is_dir()), None)
    if img_root is None:
        return pairs, None
    items, unlisted = [], []
    for folder in sorted(p for p in img_root.iterdir() if p.is_dir()):
        words = folder.name.split()
        pair = tuple(words) if len(words) == 2 else None
        if pair not in labels:
            unlisted.append(folder.name)
            continue
        for f in sorted(folder.iterdir()):
            if f.is_file() and is_image_file(f.name):
                items.append(
                    Item(
                        key=f"{folder.name}/{f.name}",
                        where=str(f),
                        path=f,
                        label=labels[pair],
                        label_name=" ".join(pair),
                        split=split_of[pair],
                    )
                )
    notes = (
        [f"skipped {len(unlisted)} image folder(s) of pairs no split lists, e.g. {unlisted[0]!r}"]
        if unlisted
        else []
    )
    return pairs, Listing(items, str(root), "mit-states", notes)


def tables(pairs: dict) -> tuple[list, list]:
    """(primitives, label_primitives) rows."""
    every = sorted({p for ps in pairs.values() for p in ps})
    prims = []
    for group, prefix, values in (
        ("attribute", "attr", sorted({a for a, _ in every})),
        ("object", "obj", sorted({o for _, o in every})),
    ):
        for v in values:
            prims.append(
                {
                    "primitive": f"{prefix}:{v}",
                    "group": group,
                    "value": v,
                    "prompt": f"this is {v}",
                    "position": len(prims),
                    "normalize": "raw",
                }
            )
    label_rows = []
    for i, (a, o) in enumerate(every):
        label_rows += [
            {"label": i, "label_name": f"{a} {o}", "primitive": p, "value": 1.0}
            for p in (f"attr:{a}", f"obj:{o}")
        ]
    return prims, label_rows


def import_mit_states(workspace, source, dataset: str = "mit-states", **image_options):
    """Read the split files (and images, if DIR has them), import the images, then write the
    CompMap tables. Returns the image import's result, or None without images."""
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    ws.meta()
    check_id(dataset, "--dataset")
    pairs, listing = read(source)
    result = import_images(ws, dataset, listing, **image_options) if listing is not None else None
    write_tables(ws, dataset, *tables(pairs), None)
    return result
