"""A hand-built workspace for the analysis tests: a few images per dataset, 4-d features, and
checkpoints and clusterings written by hand, so each test reads a Context or runs one analysis in
well under a second, with expected values worked out from how the workspace was built."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from conceptlens import schema
from conceptlens.analysis.common import Context
from conceptlens.workspace import Workspace
from harness.factory import write_features


def build(root, checkpoints: list[dict], datasets=("toy",), n=8, labels=None, features=None, dim=4, seed=0):
    """Images `n` per dataset (ids `<ds>-<i>`, labels i % 2 unless given, split train/test
    alternating), one features file per checkpoint (unless its id is in `features` False),
    and a checkpoints table with the columns the dicts name."""
    rng = np.random.default_rng(seed)
    ws = Workspace.create(root, name="t", description="", provenance={}, created="2026-01-01T00:00:00+00:00")
    rows = []
    for ds in datasets:
        for i in range(n):
            rows.append(
                {
                    "image_id": f"{ds}-{i}",
                    "dataset": ds,
                    "label": (labels[ds][i] if labels else i % 2),
                    "label_name": None,
                    "split": "train" if i % 2 == 0 else "test",
                    "thumbnail": f"thumbnails/{ds}/{i}.png",
                    "width": 8,
                    "height": 8,
                }
            )
    ws.write("images", pa.Table.from_pylist(rows, schema=schema.arrow_schema("images")))
    cks = []
    for c in checkpoints:
        c = {
            "dataset": "toy",
            "model": "m",
            "method": "simclr",
            "feature_dim": dim,
            "source": "plain:toy",
            **c,
        }
        cks.append(c)
        if c.pop("_features", True):
            ids = [r["image_id"] for r in rows if r["dataset"] == c["dataset"]]
            write_features(ws, c["checkpoint_id"], ids, rng.normal(size=(len(ids), dim)))
    names = []
    for c in cks:
        names += [k for k in c if k not in names]
    fields = [f for f in schema.arrow_schema("checkpoints") if f.name in names]
    ws.write(
        "checkpoints",
        pa.Table.from_pylist([{k: c.get(k) for k in names} for c in cks], schema=pa.schema(fields)),
    )
    return ws


def ctx_of(ws) -> Context:
    return Context(ws, progress=False)


def write_clusters(ws, cid, k, labels=None):
    ids = ws.read("features", columns=["image_id"], checkpoint_id=cid)["image_id"].to_pylist()
    lab = np.arange(len(ids)) % k if labels is None else np.asarray(labels)
    ws.write(
        "clusters",
        pa.table({"image_id": ids, "cluster": lab.astype(np.int64), "distance": np.zeros(len(ids))}),
        checkpoint_id=cid,
        k=k,
    )
