"""`conceptlens import cub --workspace W DIR`: Caltech-UCSD Birds-200-2011 with its 312 attributes.

DIR is the `CUB_200_2011` folder of the release:

    images.txt                 <image_id> <image_name>          (a path below images/)
    image_class_labels.txt     <image_id> <class_id>
    train_test_split.txt       <image_id> <is_training_image>    (1 train, 0 test)
    classes.txt                <class_id> <class_name>           (001.Black_footed_Albatross)
    attributes/image_attribute_labels.txt
                               <image_id> <attribute_id> <is_present> <certainty_id> <time>
    attributes.txt             <attribute_id> <group>::<value>   (has_bill_shape::dagger);
                               also found in attributes/ or next to DIR, where the release has it

Images become the dataset's rows of images.parquet (label = class_id - 1). Every
attribute becomes a primitive of its group (`bill shape`), prompted as in yun2023: "a
photo of bird whose bill shape is dagger", softmax within the group. `image_primitives`
keeps every image's present attributes; `label_primitives` the share of a class's
images showing each attribute (the class-level truth is a majority, as Koh et al. 2020).
A malformed line is an error naming its file and line, raised before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..workspace import Workspace
from .images import ImportInputError, Item, Listing, import_images, make_ids
from .primitives import find, integer, kept_ids, rows, write_tables

PROMPT = "a photo of bird whose {group} is {value}"


@dataclass
class Cub:
    listing: Listing
    cub_ids: list[int]  # CUB image id of each item
    attributes: list[tuple[int, str]]
    present: dict[int, set[int]]  # CUB image id -> attribute ids present
    annotated: set[int]  # image ids with any attribute row


def _words(s: str) -> str:
    return " ".join(s.replace("_", " ").split())


def group_value(name: str, where: str) -> tuple[str, str]:
    """`has_bill_shape::dagger` -> ("bill shape", "dagger")."""
    group, sep, value = name.partition("::")
    if not sep or not group or not value:
        raise ImportInputError(f"{where}: attribute {name!r} is not `group::value`")
    if group.startswith("has_"):
        group = group[4:]
    return _words(group), _words(value)


def _pairs(
    path: Path, layout: str, value_int: bool = True, lo: int | None = None, hi: int | None = None
) -> dict[int, object]:
    out: dict[int, object] = {}
    first, second = (c.strip("<>") for c in layout.split())
    for n, (a, b) in rows(path, (2,), layout):
        key = integer(path, n, a, first, lo=1)
        if key in out:
            raise ImportInputError(f"{path} line {n}: {first} {key} is listed twice")
        out[key] = integer(path, n, b, second, lo, hi) if value_int else b
    return out


def read(source) -> Cub:
    root = Path(source).expanduser()
    if not root.is_dir():
        raise ImportInputError(f"{root}: not a folder (the CUB_200_2011 folder of the release)")
    images = _pairs(find(root, ("images.txt",), "images.txt"), "<image_id> <image_name>", False)
    labels_path = find(root, ("image_class_labels.txt",), "image_class_labels.txt")
    labels = _pairs(labels_path, "<image_id> <class_id>", lo=1)
    split_path = find(root, ("train_test_split.txt",), "train_test_split.txt")
    split = _pairs(split_path, "<image_id> <is_training_image>", lo=0, hi=1)
    classes_path = find(root, ("classes.txt",), "classes.txt")
    classes = _pairs(classes_path, "<class_id> <class_name>", False)
    for path, table in ((labels_path, labels), (split_path, split)):
        missing = sorted(set(images) - set(table))
        if missing:
            raise ImportInputError(f"{path}: no line for image_id {missing[0]} of images.txt")
    unknown = sorted(set(labels.values()) - set(classes))
    if unknown:
        raise ImportInputError(f"{labels_path}: class_id {unknown[0]} is not in {classes_path}")

    attr_path = find(
        root, ("attributes.txt", "attributes/attributes.txt", "../attributes.txt"), "attributes.txt"
    )
    attributes = []
    for n, (a, name) in rows(attr_path, (2,), "<attribute_id> <group>::<value>"):
        attributes.append((integer(attr_path, n, a, "attribute_id", lo=1), name))
        group_value(name, f"{attr_path} line {n}")
    if len({a for a, _ in attributes}) != len(attributes):
        raise ImportInputError(f"{attr_path}: an attribute_id is listed twice")
    known = {a for a, _ in attributes}
    lab_path = find(
        root,
        ("attributes/image_attribute_labels.txt", "image_attribute_labels.txt"),
        "image_attribute_labels.txt",
    )
    present: dict[int, set[int]] = {}
    annotated: set[int] = set()
    layout = "<image_id> <attribute_id> <is_present> <certainty_id> <time>"
    # Some copies of the release carry a sixth field on a few lines; only the first three are read.
    for n, parts in rows(lab_path, (5, 6), layout):
        img = integer(lab_path, n, parts[0], "image_id", lo=1)
        attr = integer(lab_path, n, parts[1], "attribute_id", lo=1)
        is_present = integer(lab_path, n, parts[2], "is_present", 0, 1)
        if img not in images:
            raise ImportInputError(f"{lab_path} line {n}: image_id {img} is not in images.txt")
        if attr not in known:
            raise ImportInputError(f"{lab_path} line {n}: attribute_id {attr} is not in {attr_path}")
        annotated.add(img)
        if is_present:
            present.setdefault(img, set()).add(attr)

    img_root = root / "images"
    items, cub_ids = [], []
    for iid in sorted(images):
        rel = str(images[iid])
        cls = labels[iid]
        items.append(
            Item(
                key=rel,
                where=f"{root / 'images.txt'} image_id {iid}",
                path=img_root / rel,
                label=cls - 1,
                label_name=_words(str(classes[cls]).split(".", 1)[-1]),
                split="train" if split[iid] else "test",
            )
        )
        cub_ids.append(iid)
    notes = []
    if len(annotated) < len(images):
        notes.append(f"{len(images) - len(annotated)} image(s) have no attribute labels")
    return Cub(Listing(items, str(root), "cub", notes), cub_ids, sorted(attributes), present, annotated)


def tables(cub: Cub, dataset: str, kept_ids: set[str]) -> tuple[list, list, list]:
    """(primitives, label_primitives, image_primitives) rows for the images imported."""
    ids = make_ids(dataset, cub.listing.items)
    prims = []
    for pos, (_, name) in enumerate(cub.attributes):
        g, v = group_value(name, "attributes.txt")
        prims.append(
            {
                "primitive": name,
                "group": g,
                "value": v,
                "prompt": PROMPT.format(group=g, value=v),
                "position": pos,
                "normalize": "softmax",
            }
        )
    # Groups contiguous in `position` (they are in the release's order already).
    order = list(dict.fromkeys(p["group"] for p in prims))
    prims.sort(key=lambda p: (order.index(p["group"]), p["position"]))
    for pos, p in enumerate(prims):
        p["position"] = pos
    name_of = dict(cub.attributes)
    col = {aid: j for j, (aid, _) in enumerate(cub.attributes)}
    image_rows, counts, sizes, label_name = [], {}, {}, {}
    for iid, it, cub_id in zip(ids, cub.listing.items, cub.cub_ids):
        if iid not in kept_ids:
            continue
        attrs = sorted(cub.present.get(cub_id, ()))
        image_rows += [{"image_id": iid, "primitive": name_of[a], "value": 1.0} for a in attrs]
        if cub_id not in cub.annotated:
            continue
        c = counts.setdefault(it.label, np.zeros(len(cub.attributes)))
        c[[col[a] for a in attrs]] += 1
        sizes[it.label] = sizes.get(it.label, 0) + 1
        label_name[it.label] = it.label_name
    label_rows = []
    for lab in sorted(counts):
        share = counts[lab] / sizes[lab]
        label_rows += [
            {
                "label": int(lab),
                "label_name": label_name[lab],
                "primitive": name_of[aid],
                "value": float(share[j]),
            }
            for j, (aid, _) in enumerate(cub.attributes)
            if share[j] > 0
        ]
    return prims, label_rows, image_rows


def import_cub(workspace, source, dataset: str = "cub", **image_options):
    """Read DIR (every check first), import its images, then write the CompMap tables.
    `image_options` go to `images.import_images` (thumbs, workers, strict, replace, progress)."""
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    cub = read(source)
    result = import_images(ws, dataset, cub.listing, **image_options)
    write_tables(ws, dataset, *tables(cub, dataset, kept_ids(ws, dataset)))
    return result
