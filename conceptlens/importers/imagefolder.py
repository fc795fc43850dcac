"""A folder in the ImageFolder layout: one subfolder per class, optionally inside split
folders (`train/`, `val/` or `valid/` or `validation/`, `test/`).

    SOURCE/cat/001.jpg                SOURCE/train/cat/001.jpg
    SOURCE/dog/002.png        or      SOURCE/val/dog/002.png

Labels are 0..K-1 over the class folder names in sorted order (torchvision's ImageFolder
convention), taken across every split; images in deeper subfolders of a class belong to
it. Files that are not images by extension, and hidden files, are ignored.

Nested folders are a label hierarchy: when some image lies deeper than its class folder
(`SOURCE/animals/mammals/big_cats/lion.png`), every image gets the factor column
`category_path` (its folder below SOURCE or the split folder: `animals/mammals/big_cats`)
and the table `label_hierarchy` holds the tree those paths spell (`animals` the root,
`animals/mammals` its child, ...). With `labels="leaf"` (`--labels leaf`) the label is
the image's own folder path instead of its top folder, and the tree is over `label_name`.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..hierarchy import from_paths
from .images import SPLIT_NAMES, ImportInputError, Item, Listing, is_image_file

LABELS = ("top", "leaf")
PATH_COLUMN = "category_path"


def _walk(folder: Path) -> list[Path]:
    """Image files below `folder`, sorted (the order is the same on every file system)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out += [Path(dirpath) / f for f in sorted(filenames) if is_image_file(f)]
    return out


def _subfolders(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def scan(source, labels: str = "top") -> Listing:
    if labels not in LABELS:
        raise ValueError(f"--labels must be one of {', '.join(LABELS)}, got {labels!r}")
    root = Path(source).expanduser()
    if not root.is_dir():
        raise ImportInputError(f"{root}: not a folder (ImageFolder layout: one subfolder per class)")
    top = _subfolders(root)
    split_dirs = [p for p in top if p.name.lower() in SPLIT_NAMES]
    notes = []
    if split_dirs:
        other = [p.name for p in top if p not in split_dirs]
        if other:
            raise ImportInputError(
                f"{root}: mixes split folders ({', '.join(p.name for p in split_dirs)}) "
                f"with other folders ({', '.join(other[:5])}); put every class "
                "folder inside a split folder"
            )
        splits = [(p, SPLIT_NAMES[p.name.lower()]) for p in split_dirs]
    else:
        splits = [(root, None)]
    found = []
    for folder, split in splits:
        stray = [f for f in sorted(os.listdir(folder)) if is_image_file(f) and (folder / f).is_file()]
        if stray:
            notes.append(f"ignored {len(stray)} image(s) outside a class folder, e.g. {folder / stray[0]}")
        for cls in _subfolders(folder):
            files = _walk(cls)
            if not files:
                notes.append(f"ignored empty class folder {cls}")
            found += [(f, f.parent.relative_to(folder).as_posix(), split) for f in files]
    nested = any("/" in c for _, c, _ in found)
    name_of = {c: (c if labels == "leaf" else c.split("/")[0]) for _, c, _ in found}
    classes = sorted(set(name_of.values()))
    label = {c: i for i, c in enumerate(classes)}
    items = [
        Item(
            key=f.relative_to(root).as_posix(),
            where=str(f),
            path=f,
            label=label[name_of[c]],
            label_name=name_of[c],
            split=s,
            factors={PATH_COLUMN: c} if nested and labels == "top" else {},
        )
        for f, c, s in found
    ]
    listing = Listing(items, str(root), "imagefolder", notes)
    if nested:
        listing.hierarchy = from_paths(c for _, c, _ in found)
        listing.hierarchy_column = PATH_COLUMN if labels == "top" else "label_name"
    return listing
