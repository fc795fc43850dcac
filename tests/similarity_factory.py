"""Hand-written similarity tables for the factory workspace (dataset `toy`): valid values
that agree with each other, so validation and page tests need no embedding fit."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from conceptlens import schema
from conceptlens.workspace import Workspace


def write_similarity(ws: Workspace, seed: int = 0) -> None:
    rng = np.random.default_rng(seed + 7)
    images = ws.read("images").to_pandas()
    ids = images["image_id"].tolist()[:24]
    trials = []
    for t in range(40):
        pick = rng.choice(len(ids), 9, replace=False)
        refs = [ids[i] for i in pick[1:]]
        trials.append(
            {
                "trial_id": f"t{t:03d}",
                "agent_id": f"a{t % 4}",
                "query": ids[pick[0]],
                "references": refs,
                "chosen": refs[:2],
                "n_select": 2,
                "kind": "8rank2",
                "weight": 1.0,
                "rt_ms": 1500.0,
                "split": "test" if t % 5 == 0 else "train",
                "is_catch": False,
            }
        )
    tables = {"similarity_trials": trials}
    z = rng.standard_normal((len(ids), 2)).astype(np.float32)
    tables["psych_embedding"] = [
        {"member": 0, "image_id": i, "mu": z[j].tolist(), "sigma": [0.1, 0.1]} for j, i in enumerate(ids)
    ]
    tables["similarity_fit"] = [
        {
            "dim": d,
            "member": 0,
            "selected": d == 2,
            "n_train": 32,
            "n_heldout": 8,
            "heldout_loglik": -1.2,
            "heldout_accuracy": 0.6,
            "heldout_triplet_accuracy": 0.7,
            "test_loglik": -1.3,
            "test_accuracy": 0.55,
            "agreement": 0.8,
            "prior_scale": 0.5,
            "epochs": 50,
            "seconds": 0.5,
        }
        for d in (2, 4)
    ]
    ck = ws.read("checkpoints").to_pandas()["checkpoint_id"].tolist()
    tables["human_alignment"] = [
        {
            "checkpoint_id": c,
            "metric": m,
            "distance": d,
            "label": None,
            "label_name": None,
            "value": 0.6,
            "lo": 0.5,
            "hi": 0.7,
            "n": 40,
            "n_units": 40,
        }
        for c in ck
        for m, d in (("triplet_accuracy", "cosine"), ("triplet_accuracy", "l2"), ("rsa", "cosine"))
    ]
    tables["similarity_convergence"] = [
        {
            "round": r,
            "n_trials": 10 * (r + 1),
            "dim": 2,
            "members": 2,
            "coarse_loss": 3.0 - 0.2 * r,
            "within_agreement": 0.5 + 0.1 * r,
            "across_agreement": None if r == 0 else 0.6 + 0.1 * r,
        }
        for r in range(3)
    ]
    for name, rows in tables.items():
        t = pa.Table.from_pylist(rows, schema=schema.arrow_schema(name, partition=False))
        # People's trials are append-only (answers are never rewritten).
        write = ws.append if schema.TABLES_BY_NAME[name].append_only else ws.write
        write(name, t, dataset="toy")
    xy = rng.standard_normal((len(ids), 2))
    ws.write(
        "projections",
        pa.table({"image_id": ids, "x": xy[:, 0], "y": xy[:, 1]}),
        checkpoint_id="psych@toy",
        method="umap",
    )
