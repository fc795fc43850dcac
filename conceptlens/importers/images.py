"""What every image importer shares: ids, labels and splits checked before anything is
written, thumbnails made in parallel and resumably, and one upsert of `images.parquet`.

A source module turns its input into `Item`s (raising `ImportInputError` that names the
file and row of the first bad one); `import_images` does the rest, in an order that leaves
the workspace as it was when anything fails:

1. every check that needs no decoding (ids, labels, splits, columns, the dataset's rows);
2. thumbnails, each written atomically and recorded in `.partial/import/DATASET/`, so a
   rerun of an interrupted or failed import skips the images already done;
3. one atomic upsert of `images.parquet`, then the import's provenance in workspace.json.
"""

from __future__ import annotations

import hashlib
import io
import json
import multiprocessing
import os
import re
import shutil
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from PIL import Image, ImageStat

from .. import hierarchy as H
from .. import rng as rngs
from .. import schema
from ..cache import cached
from ..errors import ConceptLensError
from ..pixels import DEFAULT_BACKGROUND, background_hex, to_rgb
from ..workspace import Workspace, WorkspaceError, atomic_write_bytes, atomic_write_table, check_id, now_iso
from . import DROPPABLE

# What torchvision's ImageFolder reads, plus GIF; other files in a source folder are ignored.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".pgm", ".bmp", ".tif", ".tiff", ".webp", ".gif")
SPLIT_NAMES = {
    "train": "train",
    "training": "train",
    "val": "val",
    "valid": "val",
    "validation": "val",
    "test": "test",
    "testing": "test",
}
CORE = tuple(c.name for c in schema.TABLES_BY_NAME["images"].columns)
THUMB_FORMATS = {"jpeg": ".jpg", "webp": ".webp"}
# Thumbnail records are saved every this many images: what an interruption can lose.
FLUSH_EVERY = 500
# Below this many images two worker processes cost more to start than they save.
PARALLEL_MIN = 200
# A thumbnail whose grey levels have a standard deviation below this (0..255) is one flat colour.
FLAT_STD = 2.0
# Warn when at least this share of a dataset's images is flat or a pixel-identical repeat.
SUSPECT_SHARE = 0.01


class ImportInputError(ConceptLensError):
    """Bad input to an importer; the message names the file, row and column."""


@dataclass
class Item:
    """One image as a source lists it."""

    key: str  # its path relative to the source: the image id is made from it
    where: str  # how messages name it: a file, or "FILE row N"
    path: Path | None = None  # the original image file
    hf: tuple | None = None  # or (dataset folder, split, row, image column) of a HF dataset
    label: int | None = None
    label_name: str | None = None
    split: str | None = None  # None: --split or --test-fraction decide
    factors: dict = field(default_factory=dict)
    image_id: str | None = None  # given by the source (a manifest's image_id column)


@dataclass
class Listing:
    """What a source module returns."""

    items: list[Item]
    source: str  # the SOURCE argument, for messages and provenance
    format: str
    notes: list[str] = field(default_factory=list)
    # A label hierarchy (table label_hierarchy, conceptlens/hierarchy.py): node -> parent over
    # the values of the images column `hierarchy_column`, with display names of some nodes.
    hierarchy: dict | None = None
    hierarchy_column: str | None = None
    hierarchy_names: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Thumbs:
    size: int = 128  # longest side in pixels (smaller images are not enlarged)
    format: str = "jpeg"
    quality: int = 85
    background: str = DEFAULT_BACKGROUND  # what transparent pixels are composited onto

    def check(self) -> Thumbs:
        """These settings checked, the background spelled one way (`#rrggbb`)."""
        background = background_hex(self.background)
        if self.format not in THUMB_FORMATS:
            raise ValueError(
                f"--thumbnail-format must be one of {', '.join(THUMB_FORMATS)}, got {self.format!r}"
            )
        if not 16 <= self.size <= 1024:
            raise ValueError(f"--thumbnail-size must be in [16, 1024], got {self.size}")
        if not 1 <= self.quality <= 100:
            raise ValueError(f"--quality must be in [1, 100], got {self.quality}")
        return Thumbs(self.size, self.format, self.quality, background)


@dataclass
class Result:
    dataset: str
    n_images: int
    made: int  # thumbnails written by this run
    reused: int  # thumbnails a previous run had written
    skipped: list[tuple[str, str]]  # (where, why) of every image that does not decode
    notes: list[str]
    seconds: float
    warnings: list[str] = field(default_factory=list)  # e.g. many flat or identical images


def open_workspace(workspace) -> Workspace:
    """The workspace to import into; a missing one says how to make it."""
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    if not ws.meta_path.exists():
        raise WorkspaceError(
            f"{ws.meta_path}: not found; create the workspace first: conceptlens init --workspace {ws.root}"
        )
    ws.meta()
    return ws


def is_image_file(name: str) -> bool:
    return name.lower().endswith(IMAGE_EXTENSIONS) and not name.startswith(".")


def split_of(value, where: str) -> str:
    """A split name as the workspace knows it (`valid`, `validation` -> `val`)."""
    s = SPLIT_NAMES.get(str(value).strip().lower()) if value is not None else None
    if s is None:
        raise ImportInputError(f"{where}: split {value!r} is not one of {', '.join(sorted(SPLIT_NAMES))}")
    return s


# ---- ids, labels, splits -----------------------------------------------------------
def _clean(key: str) -> str:
    stem, ext = os.path.splitext(key)
    if ext.lower() in IMAGE_EXTENSIONS:
        key = stem
    key = key.replace("\\", "/").strip("/").replace("/", "-")
    return re.sub(r"[^A-Za-z0-9_.@+-]", "_", key)


def make_ids(dataset: str, items: list[Item]) -> list[str]:
    """`DATASET-relative-path-without-extension`; when two keys clean to the same id (or an
    id grows too long) a hash of the key keeps it unique, the same on every run."""
    base = [it.image_id or f"{dataset}-{_clean(it.key)}" for it in items]
    counts = Counter(base)
    out = []
    for b, it in zip(base, items):
        if it.image_id is None and (counts[b] > 1 or len(b) > 150):
            b = b[:140].rstrip("-._") + "-" + hashlib.sha1(it.key.encode()).hexdigest()[:8]
        out.append(b)
    return out


def check_items(items: list[Item], ids: list[str]) -> None:
    """Ids unique and well formed; labels consistent with their names; factor names free."""
    seen: dict[str, int] = {}
    for i, (iid, it) in enumerate(zip(ids, items)):
        try:
            check_id(iid, "image_id")
        except ConceptLensError as e:
            raise ImportInputError(f"{it.where}: {e}") from None
        if iid in seen:
            raise ImportInputError(f"{it.where}: duplicate image id {iid!r} (also {items[seen[iid]].where})")
        seen[iid] = i
    name_of: dict[int, tuple[str, str]] = {}
    label_of: dict[str, tuple[int, str]] = {}
    for it in items:
        if it.label is None:
            if it.label_name is not None:
                raise ImportInputError(f"{it.where}: label_name {it.label_name!r} without a label")
            continue
        if isinstance(it.label, bool) or not isinstance(it.label, int) or it.label < 0:
            raise ImportInputError(f"{it.where}: label must be an integer >= 0, got {it.label!r}")
        if it.label_name is None:
            raise ImportInputError(f"{it.where}: label {it.label} without a label_name")
        old = name_of.setdefault(it.label, (it.label_name, it.where))
        if old[0] != it.label_name:
            raise ImportInputError(
                f"{it.where}: label {it.label} is named {it.label_name!r} here but {old[0]!r} in {old[1]}"
            )
        old = label_of.setdefault(it.label_name, (it.label, it.where))
        if old[0] != it.label:
            raise ImportInputError(
                f"{it.where}: label_name {it.label_name!r} has label {it.label} here but {old[0]} in {old[1]}"
            )
    for it in items:
        bad = sorted(set(it.factors) & set(CORE))
        if bad:
            raise ImportInputError(
                f"{it.where}: column(s) {', '.join(bad)} are set by the import; "
                "rename them to keep them as factors"
            )


def assign_splits(items: list[Item], split: str | None, test_fraction: float | None, seed: int) -> list[str]:
    """The source's splits; else `split` for all; else a seeded per-label test share."""
    given = [it for it in items if it.split is not None]
    if given and (split is not None or test_fraction is not None):
        raise ImportInputError(
            f"{given[0].where}: the source already gives splits; drop --split and --test-fraction"
        )
    if split is not None and test_fraction is not None:
        raise ValueError("give --split or --test-fraction, not both")
    if test_fraction is None:
        default = split_of(split, "--split") if split is not None else "train"
        return [it.split or default for it in items]
    if not 0 < test_fraction < 1:
        raise ValueError(f"--test-fraction must be in (0, 1), got {test_fraction}")
    rng = rngs.generator(seed, "seed")
    out = ["train"] * len(items)
    groups: dict = {}
    for i, it in enumerate(items):
        groups.setdefault(it.label_name if it.label is not None else "", []).append(i)
    for name in sorted(groups):  # stratified, so small classes get test images too
        rows = groups[name]
        for j in rng.permutation(len(rows))[: int(round(len(rows) * test_fraction))]:
            out[rows[j]] = "test"
    return out


# ---- thumbnails (runs in worker processes) --------------------------------------------
@cached(reads=(), maxsize=8)
def _hf_dataset(folder: str, split: str | None, column: str):
    """A saved Hugging Face dataset (one split) whose image `column` is left encoded: opened
    once per worker process for all the rows it thumbnails (opening maps its files)."""
    import datasets

    d = datasets.load_from_disk(folder)
    d = d[split] if split is not None else d
    return d.cast_column(column, datasets.Image(decode=False))


def _hf_image(folder: str, split: str | None, row: int, column: str) -> dict:
    """{"bytes", "path"} of one image of a saved Hugging Face dataset, without decoding it."""
    return _hf_dataset(folder, split, column)[row][column]


def _source_ext(fmt: str | None) -> str:
    return {"JPEG": ".jpg", "PNG": ".png", None: ".img"}.get(fmt, "." + str(fmt).lower())


def thumbnail_job(job: tuple) -> tuple:
    """Decode one image and write its thumbnail -> (width, height, source, pixels, flat, error).

    Never raises: a file that does not decode comes back as an error to report. For a
    Hugging Face image (no file of its own) the encoded bytes are also saved unchanged,
    as the full-resolution source extraction reads; `source` is then that file (else None).
    Transparent pixels are composited onto `background` (conceptlens.pixels, as extraction
    does). `pixels`: a hash of the thumbnail's pixels; `flat`: True when it is one colour.
    """
    path, hf, thumb, source_base, size, fmt, quality, background = job

    try:
        source = None
        if hf is not None:
            value = _hf_image(*hf)
            data, path = value.get("bytes"), value.get("path")
            if data is None and not (path and os.path.isfile(path)):
                raise OSError("the dataset holds neither the image's bytes nor an existing file")
        else:
            data = None
        with Image.open(io.BytesIO(data) if data is not None else path) as im:
            if data is not None:
                source = source_base + _source_ext(im.format)
            elif hf is not None:
                source = path
            im.draft("RGB", (size, size))  # JPEG decodes at 1/2..1/8 scale: most of the speed
            rgb = to_rgb(im, background)  # no EXIF rotation: the thumbnail shows what models see
        rgb.thumbnail((size, size))
        buf = io.BytesIO()
        rgb.save(buf, format=fmt.upper(), quality=quality)
        if data is not None:
            atomic_write_bytes(Path(source), data, fsync=False)
        atomic_write_bytes(Path(thumb), buf.getvalue(), fsync=False)
        pixels = hashlib.blake2b(rgb.tobytes() + repr(rgb.size).encode(), digest_size=12).hexdigest()
        return rgb.width, rgb.height, source, pixels, _grey_std(rgb) < FLAT_STD, None
    except Exception as e:  # PIL raises many types for a bad file (OSError, SyntaxError, ...)
        why = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return None, None, None, None, None, f"{type(e).__name__}: {why}"[:300]


def _grey_std(rgb) -> float:
    return float(ImageStat.Stat(rgb.convert("L")).stddev[0])


# ---- the import ------------------------------------------------------------------------
def source_path_of(ws: Workspace, path: Path) -> str:
    """Absolute, or relative to the workspace when the file lies inside it."""
    p = Path(os.path.abspath(path))
    try:
        return p.relative_to(Path(os.path.abspath(ws.root))).as_posix()
    except ValueError:
        return str(p)


def _read_records(ws: Workspace, dataset: str, partial: Path, thumbs: Thumbs) -> dict:
    """image_id -> record of every thumbnail an earlier run made with these settings."""
    import pyarrow.parquet as pq

    recs: dict = {}
    stamp = {"thumbnails": asdict(thumbs)}
    prov = ws.meta().get("provenance", {}).get("imports", {}).get(dataset, {})
    if prov.get("thumbnails") == stamp["thumbnails"] and ws.table_path("images").exists():
        t = pq.read_table(ws.table_path("images"))
        if "source_path" in t.column_names:
            for r in t.select(
                ["image_id", "dataset", "thumbnail", "width", "height", "source_path"]
            ).to_pylist():
                if r["dataset"] == dataset:
                    recs[r["image_id"]] = r
    if partial.exists():
        try:
            old = json.loads((partial / "run.json").read_text())
        except (OSError, ValueError):
            old = None
        if old != stamp:  # made with other settings: start over
            shutil.rmtree(partial)
    if not partial.exists():
        partial.mkdir(parents=True)
        atomic_write_bytes(partial / "run.json", json.dumps(stamp).encode())
    for p in sorted(partial.glob("part-*.parquet")):
        for r in pq.read_table(p).to_pylist():
            recs[r["image_id"]] = r
    return recs


def _reusable(ws: Workspace, rec: dict | None, thumb: str, item: Item, source: str | None) -> bool:
    """The thumbnail exists, was made from this source, and is newer than it."""
    if rec is None or rec["thumbnail"] != thumb:
        return False
    try:
        made = (ws.root / thumb).stat().st_mtime_ns
        if item.path is not None:
            return rec["source_path"] == source and made >= item.path.stat().st_mtime_ns
        return bool(rec["source_path"]) and (ws.root / rec["source_path"]).is_file()
    except OSError:
        return False


def _thumbnails(ws, dataset, items, ids, thumbs, workers, progress, partial):
    """Make the missing thumbnails -> ({image_id: record}, skipped, made, reused)."""
    import pyarrow as pa
    from tqdm import tqdm

    recs = _read_records(ws, dataset, partial, thumbs)
    ext = THUMB_FORMATS[thumbs.format]
    done, todo = {}, []
    for iid, it in zip(ids, items):
        thumb = f"thumbnails/{dataset}/{iid}{ext}"
        source = source_path_of(ws, it.path) if it.path is not None else None
        if _reusable(ws, recs.get(iid), thumb, it, source):
            done[iid] = recs[iid]
        else:
            todo.append((iid, it, thumb, source))
    reused = len(done)
    (ws.root / "thumbnails" / dataset).mkdir(parents=True, exist_ok=True)
    if any(it.hf is not None for _, it, _, _ in todo):
        (ws.root / "sources" / dataset).mkdir(parents=True, exist_ok=True)
    jobs = (
        (
            None if it.path is None else str(it.path),
            it.hf,
            str(ws.root / thumb),
            str(ws.root / "sources" / dataset / iid),
            thumbs.size,
            thumbs.format,
            thumbs.quality,
            thumbs.background,
        )
        for iid, it, thumb, _ in todo
    )
    skipped, pending = [], []
    next_part = len(list(partial.glob("part-*.parquet")))

    def flush():
        nonlocal next_part
        if pending:
            atomic_write_table(partial / f"part-{next_part:05d}.parquet", pa.Table.from_pylist(pending))
            next_part += 1
            pending.clear()

    bar = tqdm(
        total=len(items),
        initial=reused,
        desc=f"import {dataset}",
        unit="img",
        disable=not progress,
        file=sys.stderr,
    )
    pool = None
    try:
        if workers > 1 and len(todo) >= PARALLEL_MIN:
            # spawn, not fork: the parent holds Arrow's threads, which a fork would copy half-locked
            pool = multiprocessing.get_context("spawn").Pool(workers)
            results = pool.imap(thumbnail_job, jobs, chunksize=16)
        else:
            results = map(thumbnail_job, jobs)
        for (iid, it, thumb, source), (w, h, written, pixels, flat, err) in zip(todo, results):
            bar.update(1)
            if err is not None:
                skipped.append((it.where, err))
                continue
            if it.hf is not None:
                source = source_path_of(ws, Path(written))
            rec = {
                "image_id": iid,
                "thumbnail": thumb,
                "width": w,
                "height": h,
                "source_path": source,
                "pixels": pixels,
                "flat": flat,
            }
            done[iid] = rec
            pending.append(rec)
            if len(pending) >= FLUSH_EVERY:
                flush()
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()
            pool.join()
        flush()  # also on an interruption: a rerun resumes from here
    return done, skipped, len(done) - reused, reused


def _suspects(items, ids, done, background: str) -> list[str]:
    """Warnings when many thumbnails are one flat colour or pixel-identical to another (a
    broken export, or transparency lost); counted over the thumbnails this import decoded."""
    where = {iid: it.where for iid, it in zip(ids, items)}
    recs = [(iid, r) for iid, r in done.items() if r.get("pixels")]
    n = len(recs)
    if not n:
        return []
    out = []

    def listed(group):
        return ", ".join(where[i] for i in group[:3]) + (", ..." if len(group) > 3 else "")

    flat = [iid for iid, r in recs if r.get("flat")]
    if len(flat) >= 2 and len(flat) >= SUSPECT_SHARE * n:
        out.append(
            f"{len(flat)} of {n} image(s) are a single flat colour after compositing transparency "
            f"onto {background} (e.g. {listed(flat)}); check them, or choose another --background"
        )
    groups: dict[str, list[str]] = {}
    for iid, r in recs:
        groups.setdefault(r["pixels"], []).append(iid)
    repeats = sorted((g for g in groups.values() if len(g) > 1), key=len, reverse=True)
    n_rep = sum(len(g) for g in repeats)
    if n_rep >= 2 and n_rep >= SUSPECT_SHARE * n:
        out.append(
            f"{n_rep} of {n} image(s) have the same pixels as another image ({len(repeats)} group(s), "
            f"the largest of {len(repeats[0])}: {listed(repeats[0])}); models cannot tell them apart"
        )
    return out


def _drop(items, ids, done, drop) -> tuple[dict, list[str]]:
    """`done` without the images `drop` names, and a note per kind dropped. `flat`: every
    flat image. `duplicates`: of each group of pixel-identical images the first by id stays
    when they share a label; a group spanning labels goes whole (which label would be right
    is unknown, and a duplicate across labels caps purity)."""
    unknown = [d for d in drop if d not in DROPPABLE]
    if unknown:
        raise ValueError(f"--drop: {', '.join(unknown)} is not one of {', '.join(DROPPABLE)}")
    label = {iid: it.label_name if it.label_name is not None else it.label for iid, it in zip(ids, items)}
    gone: dict[str, str] = {}
    notes = []
    if "flat" in drop:
        flat = sorted(iid for iid, r in done.items() if r.get("flat"))
        gone |= dict.fromkeys(flat, "flat")
        notes.append(f"{len(flat)} flat image(s) left out (--drop flat)")
    if "duplicates" in drop:
        groups: dict[str, list[str]] = {}
        for iid, r in done.items():
            if r.get("pixels") and iid not in gone:
                groups.setdefault(r["pixels"], []).append(iid)
        same = mixed = 0
        for g in groups.values():
            if len(g) < 2:
                continue
            g = sorted(g)
            if len({label[i] for i in g}) > 1:
                gone |= dict.fromkeys(g, "duplicates")
                mixed += len(g)
            else:
                gone |= dict.fromkeys(g[1:], "duplicates")
                same += len(g) - 1
        notes.append(
            f"{same + mixed} pixel-identical image(s) left out (--drop duplicates): {same} repeat(s) "
            f"of an image kept, {mixed} in groups spanning labels (left out whole)"
        )
    return {iid: r for iid, r in done.items() if iid not in gone}, notes


def _table(dataset, items, ids, splits, done):
    import pyarrow as pa

    factor_names: list[str] = []
    for it in items:
        factor_names += [k for k in it.factors if k not in factor_names]
    rows = [(iid, it, s) for iid, it, s in zip(ids, items, splits) if iid in done]
    cols = {
        "image_id": pa.array([iid for iid, _, _ in rows], pa.string()),
        "dataset": pa.array([dataset] * len(rows), pa.string()),
        "label": pa.array([it.label for _, it, _ in rows], pa.int64()),
        "label_name": pa.array([it.label_name for _, it, _ in rows], pa.string()),
        "split": pa.array([s for _, _, s in rows], pa.string()),
        "thumbnail": pa.array([done[iid]["thumbnail"] for iid, _, _ in rows], pa.string()),
        "width": pa.array([done[iid]["width"] for iid, _, _ in rows], pa.int64()),
        "height": pa.array([done[iid]["height"] for iid, _, _ in rows], pa.int64()),
        "source_path": pa.array([done[iid]["source_path"] for iid, _, _ in rows], pa.string()),
    }
    for name in factor_names:
        values = [it.factors.get(name) for _, it, _ in rows]
        try:
            cols[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise ImportInputError(f"factor column {name!r} mixes types ({e})") from None
    return pa.table(cols)


def _fit_to(ws: Workspace, table):
    """Cast the new rows to the types images.parquet already has (e.g. int32 widths)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = ws.table_path("images")
    if not path.exists():
        return table
    old = pq.read_schema(path)
    fields = [
        pa.field(f.name, old.field(f.name).type if f.name in old.names else f.type) for f in table.schema
    ]
    for f, want in zip(table.schema, fields):
        if f.type != want.type:
            try:
                table = table.set_column(
                    table.schema.get_field_index(f.name), want, table[f.name].cast(want.type)
                )
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise ImportInputError(
                    f"{path}: column {f.name!r} holds {want.type} there, but this "
                    f"import's values are {f.type}; rename the column"
                ) from None
    return table


def _existing(ws: Workspace, dataset: str):
    """(rows of `dataset`, every other dataset's image ids) of images.parquet as it is."""
    import pyarrow.parquet as pq

    path = ws.table_path("images")
    if not path.exists():
        return 0, {}
    t = pq.read_table(path, columns=["image_id", "dataset"])
    mine = sum(1 for d in t["dataset"].to_pylist() if d == dataset)
    others = {i: d for i, d in zip(t["image_id"].to_pylist(), t["dataset"].to_pylist()) if d != dataset}
    return mine, others


def _features_kept(ws: Workspace, dataset: str, keep: set, notes: list[str]) -> None:
    """A re-import must not drop images that a checkpoint has features of."""
    import pyarrow.parquet as pq

    if not ws.table_path("checkpoints").exists():
        return
    ck = pq.read_table(ws.table_path("checkpoints"), columns=["checkpoint_id", "dataset"]).to_pylist()
    for r in ck:
        if r["dataset"] != dataset or not ws.has("features", checkpoint_id=r["checkpoint_id"]):
            continue
        have = ws.read("features", columns=["image_id"], checkpoint_id=r["checkpoint_id"])
        have = set(have["image_id"].to_pylist())
        lost = sorted(have - keep)
        if lost:
            raise ImportInputError(
                f"checkpoint {r['checkpoint_id']} has features of {len(lost)} image(s) this import no "
                f"longer has (e.g. {lost[0]!r}); import them too, or remove the checkpoint first"
            )
        if keep - have:
            notes.append(
                f"checkpoint {r['checkpoint_id']} has no features of {len(keep - have)} new "
                "image(s): run `conceptlens extract` for it again"
            )


def _tree(dataset: str, listing: Listing, table):
    """The listing's label hierarchy, checked against the imported rows (None: none)."""
    if listing.hierarchy is None:
        return None
    try:
        return H.Hierarchy(
            dataset, listing.hierarchy_column, dict(listing.hierarchy), listing.hierarchy_names
        )
    except H.HierarchyError as e:
        raise ImportInputError(f"{listing.source}: {e}") from None


def _write_tree(ws: Workspace, dataset: str, tree, table, notes: list[str]) -> None:
    """Write the dataset's label hierarchy; a re-import without one drops an old one its
    images no longer fit (an old one they fit is kept: `conceptlens import hierarchy`'s)."""
    if tree is not None:
        values = table[tree.column].to_pylist()
        H.write(ws, tree, [None if v is None else str(v) for v in values])
        notes.append(
            f"label hierarchy over column {tree.column}: {len(tree.parent)} nodes on {tree.levels} levels"
        )
        return
    old = H.load(ws, dataset)
    if old is None:
        return
    values = table[old.column].to_pylist() if old.column in table.column_names else None
    if values is None or H.missing_values(old.parent, values):
        H.remove(ws, dataset)
        notes.append(f"the old label hierarchy of {dataset} no longer fits its images: removed")


def import_images(
    workspace,
    dataset: str,
    listing: Listing,
    *,
    split: str | None = None,
    test_fraction: float | None = None,
    seed: int = 0,
    thumbs: Thumbs = Thumbs(),
    workers: int = 2,
    strict: bool = False,
    replace: bool = False,
    progress: bool = True,
    drop: tuple[str, ...] = (),
) -> Result:
    """Add `listing`'s images to the workspace as dataset `dataset` (see the module doc);
    `drop` leaves out flat images and pixel-identical repeats (`_drop`)."""
    import pyarrow.compute as pc

    t0 = time.perf_counter()
    ws = open_workspace(workspace)
    check_id(dataset, "--dataset")
    thumbs = thumbs.check()
    items = listing.items
    if not items:
        raise ImportInputError(
            f"{listing.source}: no images found ({listing.format} layout)"
            + "".join(f"; {n}" for n in listing.notes)
        )
    mine, others = _existing(ws, dataset)
    if mine and not replace:
        raise ImportInputError(
            f"{ws.table_path('images')}: dataset {dataset!r} already has {mine} "
            "image(s); pass --replace to import it again (its thumbnails are reused)"
        )
    ids = make_ids(dataset, items)
    check_items(items, ids)
    clash = next(((iid, it) for iid, it in zip(ids, items) if iid in others), None)
    if clash:
        raise ImportInputError(
            f"{clash[1].where}: image id {clash[0]!r} is already used by dataset "
            f"{others[clash[0]]!r}; choose another --dataset name"
        )
    splits = assign_splits(items, split, test_fraction, seed)

    partial = ws.root / ".partial" / "import" / dataset
    done, skipped, made, reused = _thumbnails(ws, dataset, items, ids, thumbs, workers, progress, partial)
    if skipped and strict:
        raise ImportInputError(
            f"{len(skipped)} image(s) do not decode (--strict), e.g. "
            f"{skipped[0][0]}: {skipped[0][1]}; nothing was written to images.parquet"
        )
    if not done:
        raise ImportInputError(
            f"{listing.source}: none of the {len(items)} image(s) decodes, e.g. "
            f"{skipped[0][0]}: {skipped[0][1]}"
        )
    done, dropped = _drop(items, ids, done, drop)
    if not done:
        raise ImportInputError(f"{listing.source}: --drop {' '.join(drop)} leaves no image")
    table = _fit_to(ws, _table(dataset, items, ids, splits, done))
    tree = _tree(dataset, listing, table)  # checked before anything is written
    notes = list(listing.notes) + dropped
    warnings = _suspects(items, ids, done, thumbs.background)
    if mine:
        _features_kept(ws, dataset, set(table["image_id"].to_pylist()), notes)
    ws.upsert("images", table, {"dataset": dataset})
    _write_tree(ws, dataset, tree, table, notes)
    meta = ws.meta()
    prov = meta.setdefault("provenance", {})
    prov.setdefault("imports", {})[dataset] = {
        "format": listing.format,
        "source": os.path.abspath(listing.source),
        "images": table.num_rows,
        "skipped": len(skipped),
        "thumbnails": asdict(thumbs),
        "imported": now_iso(),
    }
    ws.write_meta(meta)
    shutil.rmtree(partial, ignore_errors=True)
    for d in (partial.parent, partial.parent.parent):  # .partial/import, .partial when empty
        try:
            d.rmdir()
        except OSError:
            pass
    n_test = pc.sum(pc.equal(table["split"], "test")).as_py() or 0
    if test_fraction is not None:
        notes.append(f"{n_test} image(s) marked `test` (seed {seed})")
    return Result(dataset, table.num_rows, made, reused, skipped, notes, time.perf_counter() - t0, warnings)
