"""The factory's `concept_events` and `learning_curves` (harness/factory.py `write_derived`):
the events of its run `toy-run` (ck2 -> ck1 -> ck0, by epoch) from its hand-made
clusterings through the analysis' own per-step function, and learning curves by hand
(AUC rising with the epoch: everything learned at the last one), and aligned projections by
hand (the colours separate along training)."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from conceptlens import schema
from conceptlens.analysis.concept_events import step_rows
from conceptlens.workspace import Workspace

OPTS = {"event_share": 0.2, "event_images": 5, "event_alpha": 0.01}


def write_training(ws: Workspace, ids, assign: dict, cids, ks) -> None:
    ck = ws.read("checkpoints").to_pandas()
    seq = ck.sort_values("epoch")[["checkpoint_id", "epoch"]]
    seq = seq[seq["checkpoint_id"].isin(cids)].reset_index(drop=True)
    images = ws.read("images").to_pandas()
    k = ks[0]
    rows = []
    for step in range(1, len(seq)):
        a, b = seq["checkpoint_id"][step - 1], seq["checkpoint_id"][step]
        before = pd.DataFrame({"image_id": list(ids), "cluster": assign[a, k]})
        after = pd.DataFrame({"image_id": list(ids), "cluster": assign[b, k]})
        caps = tuple({c: f"a cluster {c} of {x}" for c in range(k)} for x in (a, b))
        head = {
            "step": step,
            "checkpoint_from": a,
            "checkpoint_to": b,
            "epoch_from": int(seq["epoch"][step - 1]),
            "epoch_to": int(seq["epoch"][step]),
            "k": k,
        }
        rows += [{**head, **r} for r in step_rows(before, after, images, OPTS, caps)]
    ws.write(
        "concept_events",
        pa.Table.from_pylist(rows, schema=schema.arrow_schema("concept_events", partition=False)),
        dataset="toy",
        run="toy-run",
    )
    curves = []
    factors = {"label": sorted(set(images["label_name"])), "shape": sorted(set(images["shape"]))}
    for j, (cid, epoch) in enumerate(zip(seq["checkpoint_id"], seq["epoch"])):
        for f, values in factors.items():
            for v in [None, *values]:
                auc = 0.6 + 0.15 * j + (0.05 if v is None else 0.0)
                curves.append(
                    {
                        "checkpoint_id": cid,
                        "epoch": int(epoch),
                        "factor": f,
                        "value": v,
                        "n_test": 12,
                        "n_positive": None if v is None else 4,
                        "auc": auc,
                        "auc_lo": auc - 0.05,
                        "auc_hi": min(1.0, auc + 0.05),
                        "accuracy": 0.5 + 0.1 * j if v is None else None,
                        "accuracy_lo": 0.4 + 0.1 * j if v is None else None,
                        "accuracy_hi": 0.6 + 0.1 * j if v is None else None,
                        "chance": 0.34 if v is None else None,
                        "k": None if v is None else k,
                        "best_cluster": None if v is None else 0,
                        "cluster_purity": None if v is None else 0.5,
                        "cluster_recall": None if v is None else 0.4,
                        "threshold": 0.8,
                        "learned": auc - 0.05 > 0.8,
                        "learned_at": int(seq["epoch"][2]) if len(seq) > 2 else None,
                        "lost_at": None,
                    }
                )
    ws.write(
        "learning_curves",
        pa.Table.from_pylist(curves, schema=schema.arrow_schema("learning_curves", partition=False)),
        dataset="toy",
        run="toy-run",
    )
    write_aligned(ws, ids, seq)


def write_aligned(ws: Workspace, ids, seq: pd.DataFrame) -> None:
    """Aligned projections of `toy-run` by hand: each colour's images around a corner of a
    triangle that grows with the epoch (the colours separate along training), each image
    at a fixed offset from its colour's corner; drift from the frame before."""
    import numpy as np

    images = ws.read("images").to_pandas().set_index("image_id").loc[list(ids)]
    corner = {
        c: np.array([np.cos(a), np.sin(a)])
        for c, a in zip(sorted(set(images["label_name"])), (0.5, 2.6, 4.7))
    }
    rng = np.random.default_rng(27)
    offset = rng.standard_normal((len(ids), 2))
    rows, prev = [], None
    for step, (cid, epoch) in enumerate(zip(seq["checkpoint_id"], seq["epoch"])):
        xy = np.stack([corner[c] for c in images["label_name"]]) * (1.0 + 2.0 * step) + offset
        drift = np.linalg.norm(xy - prev, axis=1) if prev is not None else [None] * len(ids)
        rows += [
            {
                "checkpoint_id": cid,
                "step": step,
                "epoch": int(epoch),
                "image_id": i,
                "x": float(p[0]),
                "y": float(p[1]),
                "drift": None if d is None else float(d),
                "method": "aligned_umap",
            }
            for i, p, d in zip(ids, xy, drift)
        ]
        prev = xy
    ws.write(
        "aligned_projections",
        pa.Table.from_pylist(rows, schema=schema.arrow_schema("aligned_projections", partition=False)),
        dataset="toy",
        run="toy-run",
    )


def add_depth_sequence(ws: Workspace, layers: dict, run: str, epoch, base: str | None = None) -> None:
    """Hand-built depth sequence: for each new checkpoint id -> (source checkpoint, layer,
    depth) of `layers`, a copy of the source's features as a checkpoint of `run` at `epoch`
    with that layer and depth; `base` (an existing checkpoint) gets depth len(layers), the
    deepest, as `conceptlens.demo.real.build_layers` gives the embedding it probes."""
    ck = ws.read("checkpoints").to_pandas()
    rows = []
    for cid, (src, layer, depth) in layers.items():
        feats = ws.read("features", checkpoint_id=src)
        feats = feats.drop_columns([c for c in ("checkpoint_id",) if c in feats.column_names])
        ws.write("features", feats, checkpoint_id=cid)
        row = ck[ck["checkpoint_id"] == src].iloc[0].to_dict()
        rows.append({**row, "checkpoint_id": cid, "run": run, "epoch": epoch, "layer": layer, "depth": depth})
    ck = pd.concat([ck, pd.DataFrame(rows)], ignore_index=True)
    if "depth" not in ck:
        ck["depth"] = None
    if base is not None:
        ck.loc[ck["checkpoint_id"] == base, "depth"] = len(layers)
    ck["depth"] = ck["depth"].astype("Int64")
    ck["epoch"] = ck["epoch"].astype("Int64")
    ws.write("checkpoints", pa.Table.from_pandas(ck, preserve_index=False))
