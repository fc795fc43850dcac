"""Small workspaces made in tests."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from conceptlens import schema
from conceptlens.demo.build import build_data
from conceptlens.workspace import Workspace


def tiny_workspace(root: Path, n_shapes: int = 40, dims=(8,), seed: int = 0) -> Workspace:
    """Demo data with `n_shapes` shapes images and one random checkpoint per entry of `dims`."""
    ws = build_data(root, seed=seed, n_shapes=n_shapes, progress=False)
    imgs = ws.read("images").to_pandas()
    ids = imgs.loc[imgs.dataset == "shapes", "image_id"].tolist()
    rng = np.random.default_rng(seed)
    rows = []
    for i, d in enumerate(dims):
        cid = f"rand{i}"
        emb = rng.standard_normal((len(ids), d)).astype(np.float32)
        write_features(ws, cid, ids, emb)
        rows.append({"checkpoint_id": cid, "dataset": "shapes", "model": "none", "method": "random",
                     "epoch": None, "feature_dim": d, "source": "test"})
    ws.write("checkpoints", pa.Table.from_pylist(rows, schema=schema.arrow_schema("checkpoints", optional=False)))
    return ws


def write_features(ws: Workspace, cid: str, ids, emb: np.ndarray) -> None:
    arr = pa.array(list(emb), type=pa.list_(pa.float32()))
    ws.write("features", pa.table({"image_id": pa.array(ids, pa.string()), "embedding": arr}),
             checkpoint_id=cid)


def snapshot(root: Path) -> dict:
    """Every file's bytes, to prove a command changed nothing."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(Path(root).rglob("*")) if p.is_file()}
