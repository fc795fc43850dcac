"""`conceptlens extract`: embed every image of a dataset with one model -> one checkpoint.

Writes the checkpoint's `features` partition (`features/checkpoint_id=ID/part-0.parquet`:
image_id, embedding) and upserts its row of `checkpoints.parquet`. Resumable: each
finished batch is saved atomically to `.partial/features/ID/part-NNNNN.parquet`
(outside the table's folder, so no reader sees half a checkpoint); a rerun of the same command skips
the images already there, and only the last step writes the real features file.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import schema
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
        import hashlib

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


class _Images:
    """torch Dataset of (position, preprocessed RGB tensor)."""

    def __init__(self, paths: list[Path], positions: list[int], preprocess):
        self.paths, self.positions, self.preprocess = paths, positions, preprocess

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        from PIL import Image

        try:
            with Image.open(self.paths[i]) as im:
                img = im.convert("RGB")
        except (OSError, ValueError) as e:
            raise WorkspaceError(f"{self.paths[i]}: cannot read image ({e})") from None
        return self.positions[i], self.preprocess(img)


def _features_table(ids: list[str], emb: np.ndarray) -> pa.Table:
    emb = np.ascontiguousarray(emb, dtype=np.float32)
    n, d = emb.shape
    offsets = pa.array(np.arange(0, (n + 1) * d, d, dtype=np.int32))
    lists = pa.ListArray.from_arrays(offsets, pa.array(emb.reshape(-1), type=pa.float32()))
    return pa.Table.from_arrays([pa.array(ids, pa.string()), lists], schema=FEATURES_SCHEMA)


def _write_part(partial: Path, index: int, table: pa.Table) -> None:
    atomic_write_table(partial / f"part-{index:05d}.parquet", table)


def _read_parts(partial: Path) -> tuple[pa.Table | None, int]:
    """All finished parts (None if none) and the next free part index."""
    parts = sorted(partial.glob("part-*.parquet"))
    if not parts:
        return None, 0
    tables = [pq.read_table(p).cast(FEATURES_SCHEMA) for p in parts]
    return pa.concat_tables(tables), int(parts[-1].stem.split("-")[1]) + 1


def _upsert_checkpoint(ws: Workspace, row: dict) -> None:
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


def extract(
    workspace,
    dataset: str,
    spec: str,
    *,
    weights=None,
    layer=None,
    batch_size=64,
    device="cpu",
    checkpoint_id=None,
    metadata: dict | None = None,
    num_workers=0,
    progress=True,
) -> str:
    """Embed every image of `dataset` with the model `spec`; return the checkpoint_id.

    `metadata` overrides or adds columns of the checkpoint's row (model, method, epoch,
    run, ...). Rerunning after an interruption resumes where it stopped.
    """
    import torch
    from torch.utils.data import DataLoader
    from tqdm import tqdm

    from .models import LayerProbe, load_adapter, resolve_path

    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    ws.meta()  # fails early with a clear message if this is not a workspace
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    meta = dict(metadata or {})
    allowed = {c.name for c in schema.TABLES_BY_NAME["checkpoints"].columns} - set(_COMPUTED)
    bad = sorted(set(meta) - allowed)
    if bad:
        raise ValueError(
            f"metadata key(s) {bad} are not columns of checkpoints.parquet; "
            f"allowed: {', '.join(sorted(allowed))}"
        )
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: CUDA is not available on this machine; use --device cpu")

    images = dataset_images(ws, dataset)
    weights_path = weights_rel = weights_sha = None
    if weights is not None:
        weights_path = resolve_path(str(weights), ws.root)
        if weights_path is None or not weights_path.is_file():
            raise FileNotFoundError(f"--weights {str(weights)!r}: file not found")
        weights_sha = sha256_file(weights_path)
        try:
            weights_rel = weights_path.resolve().relative_to(ws.root.resolve()).as_posix()
        except ValueError:
            weights_rel = None  # outside the workspace: only its hash is recorded
    cid = check_id(
        checkpoint_id
        or default_checkpoint_id(dataset, spec, layer, str(weights_path) if weights_path else None),
        "checkpoint_id",
    )

    adapter = load_adapter(spec, weights=weights_path, device=device, root=ws.root)
    embedder = LayerProbe(adapter, layer) if layer else adapter
    preprocessing = adapter.describe_preprocessing()

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
    stamp_path = partial / "run.json"
    if partial.exists():
        try:
            old = json.loads(stamp_path.read_text())
        except (OSError, ValueError):
            old = None
        if old != json.loads(json.dumps(stamp, default=str)):
            # Leftovers of a different model/dataset under the same id: not resumable.
            shutil.rmtree(partial)
    if not partial.exists():
        partial.mkdir(parents=True)
        atomic_write_bytes(stamp_path, json.dumps(stamp, default=str, indent=1).encode())

    done_table, next_part = _read_parts(partial)
    done = set(done_table["image_id"].to_pylist()) if done_table is not None else set()
    todo = [i for i, iid in enumerate(ids) if iid not in done]
    paths = [image_path(ws, thumbs[i], sources[i]) for i in todo]
    loader = DataLoader(
        _Images(paths, todo, adapter.preprocess),
        batch_size=batch_size,
        shuffle=False,
        num_workers=num_workers,
    )
    bar = tqdm(
        total=len(ids),
        initial=len(ids) - len(todo),
        desc=f"extract {cid}",
        unit="img",
        disable=not progress,
        file=sys.stderr,
    )
    try:
        with torch.inference_mode():
            for positions, batch in loader:
                out = embedder.embed(batch.to(device))
                emb = out.detach().float().cpu().numpy()
                if emb.ndim != 2 or emb.shape[0] != len(positions):
                    raise WorkspaceError(
                        f"{spec}: embedding has shape {emb.shape}, expected ({len(positions)}, D)"
                    )
                bad = ~np.isfinite(emb).all(axis=1)
                if bad.any():  # checked before saving, so a rerun does not keep bad rows
                    raise WorkspaceError(
                        f"{spec}: NaN or infinite embedding for {int(bad.sum())} image(s), e.g. "
                        f"{ids[int(positions[int(np.flatnonzero(bad)[0])])]!r}; features not written"
                    )
                _write_part(partial, next_part, _features_table([ids[int(p)] for p in positions], emb))
                next_part += 1
                bar.update(len(positions))
    finally:
        bar.close()

    table, _ = _read_parts(partial)
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
        "weights": weights_rel,
        "weights_sha256": weights_sha,
        "preprocessing": json.dumps(preprocessing, sort_keys=True, default=str),
        "created": now_iso(),
    }
    row.update(meta)
    _upsert_checkpoint(ws, row)
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
        batch_size=args.batch_size,
        device=args.device,
        checkpoint_id=args.checkpoint_id,
        metadata=meta,
        num_workers=args.num_workers,
        progress=not args.quiet,
    )
    print(f"checkpoint {cid}: wrote {Workspace(args.workspace).table_path('features', checkpoint_id=cid)}")
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
    p.add_argument("--weights", help="local weights file (state dict / open_clip checkpoint)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--num-workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--checkpoint-id", help="id of the checkpoint (default: from dataset, spec, layer)")
    p.add_argument("--method", help="training regime stored in checkpoints.method")
    p.add_argument("--epoch", type=int, help="training epoch stored in checkpoints.epoch")
    p.add_argument("--run", help="training run stored in checkpoints.run")
    p.add_argument("--model-name", help="name stored in checkpoints.model (default: from the spec)")
    p.set_defaults(func=_run)
