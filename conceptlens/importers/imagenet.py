"""ImageNet's (ILSVRC2012) validation set as distributed.

Images: the flat folder of `ILSVRC2012_val_00000001.JPEG` ... (`ILSVRC2012_img_val/`, or
Kaggle's `ILSVRC/Data/CLS-LOC/val/`), or the same images sorted into one folder per
WordNet id (then the folder names are the ground truth). Ground truth, one of:

- the devkit's `ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt`: one
  ILSVRC2012_ID (1..1000) per line, line i for image i. These ids are the devkit's own
  numbering, not the usual class indices, so the synsets must be the devkit's `meta.mat`;
- Kaggle's `LOC_val_solution.csv` (`ImageId,PredictionString`, the WordNet id first).

Synsets: the devkit's `data/meta.mat`, or `LOC_synset_mapping.txt` / `synset_words.txt`
(`n01440764 tench, Tinca tinca`). Options name the files; without them they are looked
for in SOURCE and the folders above it.

Labels are 0..K-1 over the synsets' WordNet ids in sorted order: the class indices of
torchvision's and timm's ImageNet models. `label_name` is the synset's first lemma (with
its WordNet id when two synsets share one, e.g. `crane (n02012849)`); the WordNet id is
kept as the factor column `wnid`. Every image is in split `val`.

Label hierarchy: with WordNet's noun database (`--wordnet FILE`, by default
/usr/share/wordnet/data.noun from Debian's `wordnet-base`), the classes' hypernyms become
the table `label_hierarchy` over the column `wnid` (conceptlens/importers/wordnet.py);
without it the import says so and writes none.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from pathlib import Path

from ..hierarchy import HierarchyError
from . import wordnet as wordnet_db
from .images import ImportInputError, Item, Listing, is_image_file
from .wordnet import PACKAGE, imagenet_tree

WNID = re.compile(r"n\d{8}")
VAL_NAME = re.compile(r"ILSVRC2012_val_(\d{8})")
GROUND_TRUTH = ("LOC_val_solution.csv", "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt")
SYNSETS = ("ILSVRC2012_devkit_t12/data/meta.mat", "LOC_synset_mapping.txt", "synset_words.txt")
IMAGE_DIRS = (".", "ILSVRC/Data/CLS-LOC/val", "ILSVRC2012_img_val")


def read_synsets(path: Path) -> tuple[dict[str, str], dict[int, str] | None]:
    """(wnid -> words, ILSVRC2012_ID -> wnid or None) from meta.mat or a synset list."""
    if path.suffix == ".mat":
        from scipy.io import loadmat

        try:
            syn = loadmat(str(path), squeeze_me=True)["synsets"]
        except (OSError, ValueError, KeyError) as e:
            raise ImportInputError(f"{path}: not the devkit's meta.mat ({e})") from None
        words, ids = {}, {}
        for s in syn.ravel():
            if int(s["num_children"]) == 0:  # the 1000 leaf classes; the rest are their ancestors
                words[str(s["WNID"])] = str(s["words"])
                ids[int(s["ILSVRC2012_ID"])] = str(s["WNID"])
        return words, ids
    words = {}
    for n, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        wnid, _, text = line.strip().partition(" ")
        if not WNID.fullmatch(wnid):
            raise ImportInputError(f"{path} line {n}: {wnid!r} is not a WordNet id (n + 8 digits)")
        if wnid in words:
            raise ImportInputError(f"{path} line {n}: synset {wnid} is listed twice")
        words[wnid] = text.strip() or wnid
    return words, None


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ImportInputError(f"{path}: cannot be read ({e})") from None


def read_ground_truth(path: Path, words: dict, ids: dict | None, synsets: Path) -> dict[str, str]:
    """image name (`ILSVRC2012_val_00000001`) -> wnid."""
    out = {}
    if path.suffix.lower() == ".csv":
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if not {"ImageId", "PredictionString"} <= set(reader.fieldnames or ()):
                raise ImportInputError(
                    f"{path}: expected columns ImageId,PredictionString "
                    f"(LOC_val_solution.csv), got {reader.fieldnames}"
                )
            for n, r in enumerate(reader, start=2):
                wnid = (r["PredictionString"] or "").split()[:1]
                if not wnid or wnid[0] not in words:
                    raise ImportInputError(
                        f"{path} line {n}: column PredictionString: "
                        f"{(wnid or [''])[0]!r} is not a synset of {synsets}"
                    )
                out[r["ImageId"].strip()] = wnid[0]
        return out
    if ids is None:
        raise ImportInputError(
            f"{path}: the devkit's ground truth numbers classes by ILSVRC2012_ID, "
            f"which only the devkit's meta.mat maps to synsets; {synsets} does not "
            "(pass --synsets .../data/meta.mat or --devkit)"
        )
    for n, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        try:
            wnid = ids[int(line)]
        except (ValueError, KeyError):
            raise ImportInputError(
                f"{path} line {n}: {line.strip()!r} is not an ILSVRC2012_ID of {synsets}"
            ) from None
        out[f"ILSVRC2012_val_{n:08d}"] = wnid
    return out


def readable_names(words: dict[str, str]) -> dict[str, str]:
    first = {w: t.split(",")[0].strip() or w for w, t in words.items()}
    shared = {n for n, c in Counter(first.values()).items() if c > 1}
    return {w: f"{n} ({w})" if n in shared else n for w, n in first.items()}


def _look_for(source: Path, names) -> Path | None:
    for folder in [source, *list(source.parents)[:4]]:
        for name in names:
            if (folder / name).is_file():
                return folder / name
    return None


def _images_dir(source: Path) -> Path:
    for rel in IMAGE_DIRS:
        d = source / rel
        if d.is_dir() and any(VAL_NAME.match(p.name) or WNID.fullmatch(p.name) for p in d.iterdir()):
            return d
    raise ImportInputError(
        f"{source}: no ILSVRC2012_val_*.JPEG images (nor WordNet id folders) "
        f"here or in {', '.join(IMAGE_DIRS[1:])}"
    )


def scan(source, devkit=None, ground_truth=None, synsets=None, wordnet=None) -> Listing:
    source = Path(source).expanduser()
    if not source.is_dir():
        raise ImportInputError(f"{source}: not a folder")
    images = _images_dir(source)
    if devkit is not None:
        devkit = Path(devkit).expanduser()
        if not (devkit / "data" / "meta.mat").is_file():
            raise ImportInputError(f"--devkit {devkit}: no data/meta.mat (expected ILSVRC2012_devkit_t12)")
        ground_truth = ground_truth or devkit / "data" / "ILSVRC2012_validation_ground_truth.txt"
        synsets = synsets or devkit / "data" / "meta.mat"
    by_folder = [p for p in sorted(images.iterdir()) if p.is_dir() and WNID.fullmatch(p.name)]
    if ground_truth is None and not by_folder:
        ground_truth = _look_for(source, GROUND_TRUTH)
        if ground_truth is None:
            raise ImportInputError(
                f"{source}: no ground truth found; pass --devkit DIR or "
                "--ground-truth FILE (LOC_val_solution.csv or the devkit's "
                "ILSVRC2012_validation_ground_truth.txt)"
            )
    if synsets is None:
        synsets = _look_for(source, SYNSETS)
        if synsets is None:
            raise ImportInputError(
                f"{source}: no synset list found; pass --synsets FILE "
                "(LOC_synset_mapping.txt, synset_words.txt or the devkit's meta.mat)"
            )
    for what, p in (("--ground-truth", ground_truth), ("--synsets", synsets)):
        if p is not None and not Path(p).is_file():
            raise ImportInputError(f"{what} {p}: file not found")
    synsets = Path(synsets)
    words, ids = read_synsets(synsets)
    label = {w: i for i, w in enumerate(sorted(words))}
    names = readable_names(words)
    notes = [f"synsets from {synsets}"]

    found: list[tuple[Path, str, str]] = []  # (file, wnid, where)
    if ground_truth is not None:
        ground_truth = Path(ground_truth)
        truth = read_ground_truth(ground_truth, words, ids, synsets)
        notes.append(f"ground truth from {ground_truth}")
        files = [p for p in sorted(images.rglob("*")) if p.is_file() and is_image_file(p.name)]
        for f in files:
            wnid = truth.get(f.stem)
            if wnid is None:
                raise ImportInputError(f"{f}: not in the ground truth {ground_truth}")
            found.append((f, wnid, str(f)))
        if len(truth) > len(files):
            notes.append(f"{len(truth) - len(files)} image(s) of the ground truth are not in {images}")
    else:
        for d in by_folder:
            if d.name not in words:
                raise ImportInputError(f"{d}: {d.name} is not a synset of {synsets}")
            found += [
                (f, d.name, str(f)) for f in sorted(d.iterdir()) if f.is_file() and is_image_file(f.name)
            ]
    items = [
        Item(
            key=f.name,
            where=w,
            path=f,
            label=label[wnid],
            label_name=names[wnid],
            split="val",
            factors={"wnid": wnid},
        )
        for f, wnid, w in found
    ]
    listing = Listing(items, str(source), "imagenet", notes)
    _hierarchy(listing, sorted({wnid for _, wnid, _ in found}), names, wordnet)
    return listing


def _hierarchy(listing: Listing, wnids: list[str], names: dict, wordnet) -> None:
    """The WordNet tree over the imported classes, when WordNet is at hand (module doc)."""
    # looked up on use: a test (or a caller) may point the module at another file
    path = Path(wordnet).expanduser() if wordnet is not None else wordnet_db.DATA_NOUN
    if not path.is_file():
        if wordnet is not None:
            raise ImportInputError(f"--wordnet {path}: file not found (WordNet's data.noun)")
        listing.notes.append(
            f"no label hierarchy: WordNet's {path} is not installed (Debian package "
            f"{PACKAGE}; or pass --wordnet PATH/data.noun)"
        )
        return

    try:
        parent, node_names = imagenet_tree(wnids, path, names)
    except HierarchyError as e:
        raise ImportInputError(str(e)) from None
    listing.hierarchy, listing.hierarchy_column, listing.hierarchy_names = parent, "wnid", node_names
    listing.notes.append(f"label hierarchy from WordNet's hypernyms ({path})")
