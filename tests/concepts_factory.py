"""Concept-quality workspaces for tests, built so that the right answers are known.

`concept_workspace` is a small workspace of its own: TabularToy-like concept datasets at two
dependency levels (3 latents with correlation delta, concepts 1[z > 0], label = at least two
concepts true) and one checkpoint per kind of concept representation:

- `oracle`: the true concepts themselves (named as them): OIS near 0;
- `swapped`: the latents of concepts 0 and 1 under each other's names: a large OIS;
- `vae`: 2k unnamed latents (`c0`..`c5`), the first three noisy copies of the latents, so
  greedy alignment must find them;
- `vision`: no concept names, an 8-dimensional mix of the latents: probe concepts.

`write_concepts` adds hand-written concept tables to the factory workspace (harness/factory.py,
dataset `toy`): concept labels from its colours and shapes, checkpoint `ck0` declared a
concept model, and output tables that agree with each other, for validation and page tests.
"""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa

from conceptlens import schema
from conceptlens.workspace import Workspace, atomic_write_bytes

TOY_CONCEPTS = ("z0_pos", "z1_pos", "z2_pos")
METHODS = ("oracle", "swapped", "vae", "vision")


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("L", (8, 8), 128).save(buf, format="PNG")
    return buf.getvalue()


def _write(ws: Workspace, name: str, rows: list[dict], **partition) -> None:
    ws.write(name, pa.Table.from_pylist(rows, schema=schema.arrow_schema(name, partition=False)), **partition)


def _features(ws: Workspace, cid: str, ids, X: np.ndarray) -> None:
    arr = pa.array(list(np.asarray(X, np.float32)), type=pa.list_(pa.float32()))
    ws.write(
        "features",
        pa.table({"image_id": pa.array(list(ids), pa.string()), "embedding": arr}),
        checkpoint_id=cid,
    )


def concept_workspace(root, n: int = 600, levels=(0.0, 0.75), seed: int = 0) -> Workspace:
    """The workspace described above: `n` images per level (a third of them test)."""
    rng = np.random.default_rng(seed)
    ws = Workspace.create(root, name="concepts", created="2026-01-01T00:00:00+00:00")
    atomic_write_bytes(ws.root / "thumbnails" / "row.png", _png(), fsync=False)
    images, labels, datasets, ck = [], [], [], []
    for level in levels:
        ds = f"toy-d{level:.2f}"
        datasets.append({"dataset": ds, "family": "tabular_toy", "dependency": "delta", "level": level})
        cov = np.full((3, 3), level) + (1 - level) * np.eye(3)
        z = rng.multivariate_normal(np.zeros(3), cov, size=n)
        c = (z > 0).astype(np.int64)
        y = (c.sum(axis=1) >= 2).astype(np.int64)
        ids = [f"{ds}-{i:04d}" for i in range(n)]
        for i, iid in enumerate(ids):
            images.append(
                {
                    "image_id": iid,
                    "dataset": ds,
                    "label": int(y[i]),
                    "label_name": ("fewer than two", "at least two")[y[i]],
                    "split": "test" if i % 3 == 0 else "train",
                    "thumbnail": "thumbnails/row.png",
                    "width": 8,
                    "height": 8,
                }
            )
            labels += [
                {"image_id": iid, "concept": name, "value": int(c[i, j])}
                for j, name in enumerate(TOY_CONCEPTS)
            ]
        noise = lambda *shape: 0.3 * rng.standard_normal(shape)  # noqa: E731
        reps = {
            "oracle": (c.astype(np.float32), list(TOY_CONCEPTS)),
            "swapped": (z[:, [1, 0, 2]] + noise(n, 3), list(TOY_CONCEPTS)),
            "vae": (np.hstack([z + noise(n, 3), rng.standard_normal((n, 3))]), [f"c{i}" for i in range(6)]),
            "vision": (z @ rng.standard_normal((3, 8)) + noise(n, 8), None),
        }
        for method, (X, names) in reps.items():
            cid = f"{method}-{ds}-s0"
            _features(ws, cid, ids, X)
            ck.append(
                {
                    "checkpoint_id": cid,
                    "dataset": ds,
                    "model": "toy-encoder",
                    "method": method,
                    "epoch": None,
                    "feature_dim": X.shape[1],
                    "source": "test",
                    "run": cid,
                    "concept_names": names,
                    "concept_dim": None if names is None else 1,
                }
            )
    ws.write("images", pa.Table.from_pylist(images, schema=schema.arrow_schema("images", optional=False)))
    ws.write("checkpoints", pa.Table.from_pylist(ck, schema=_checkpoint_schema(ck[0])))
    ws.write("concept_labels", pa.Table.from_pylist(labels, schema=schema.arrow_schema("concept_labels")))
    ws.write(
        "concept_datasets", pa.Table.from_pylist(datasets, schema=schema.arrow_schema("concept_datasets"))
    )
    return ws


def _checkpoint_schema(row: dict) -> pa.Schema:
    return pa.schema([f for f in schema.arrow_schema("checkpoints") if f.name in row])


# ---- hand-written tables for the factory workspace -------------------------------------------
FACTORY_CONCEPTS = ("red", "square", "colour")  # binary, binary, multiclass (3)


def write_concepts(ws: Workspace, seed: int = 0) -> None:
    """Concept tables on the factory's dataset `toy` (see the module's docstring)."""
    rng = np.random.default_rng(seed + 9)
    img = ws.read("images").to_pandas().sort_values("image_id")
    shapes = img["shape"].to_numpy()
    rows = []
    for iid, lab, shape in zip(img["image_id"], img["label"], shapes):
        values = (int(lab == 0), int(shape == "square"), int(lab))
        rows += [{"image_id": iid, "concept": c, "value": v} for c, v in zip(FACTORY_CONCEPTS, values)]
    ws.write("concept_labels", pa.Table.from_pylist(rows, schema=schema.arrow_schema("concept_labels")))
    _write_single(
        ws, "concept_datasets", [{"dataset": "toy", "family": "factory", "dependency": "delta", "level": 0.0}]
    )
    # ck0 becomes a concept model: 4 concepts x 2 dimensions (8 = its feature_dim).
    ck = ws.read("checkpoints").to_pandas().to_dict("records")
    learnt = {"ck0": ["red", "square", "colour", "c3"]}
    for r in ck:
        r["concept_names"] = learnt.get(r["checkpoint_id"])
        r["concept_dim"] = 2 if r["checkpoint_id"] in learnt else None
    ws.write("checkpoints", pa.Table.from_pylist(ck, schema=_checkpoint_schema(ck[0])))

    seeds = (0, 1)
    oracle = []
    for s in seeds:
        for a in FACTORY_CONCEPTS:
            for b in FACTORY_CONCEPTS:
                auc = 1.0 if a == b else (0.9 if {a, b} == {"red", "colour"} else 0.5 + 0.02 * s)
                oracle.append({"seed": s, "concept_i": a, "concept_j": b, "auc": auc})
    _write(ws, "oracle_purity", oracle, dataset="toy")
    labels = sorted(img["label"].unique().tolist())
    for k, cid in enumerate(r["checkpoint_id"] for r in ck):
        names = learnt.get(cid, list(FACTORY_CONCEPTS))
        purity, niches, curve, scores = [], [], [], []
        for s in seeds:
            for a in names:
                for b in FACTORY_CONCEPTS:
                    auc = (0.95 - 0.1 * k) if a == b else float(rng.uniform(0.45, 0.7))
                    purity.append(
                        {"seed": s, "learnt_concept": a, "true_concept": b, "auc": auc, "aligned": a == b}
                    )
            for beta in (0.0, 0.1, 0.2, 0.3):
                for lab in labels:
                    corr = rng.uniform(0, 0.6, len(names))
                    niches += [
                        {
                            "seed": s,
                            "beta": beta,
                            "label": int(lab),
                            "learnt_concept": a,
                            "corr": float(v),
                            "in_niche": bool(v > beta),
                        }
                        for a, v in zip(names, corr)
                    ]
                    curve.append(
                        {
                            "seed": s,
                            "beta": beta,
                            "label": int(lab),
                            "niche_size": int((corr > beta).sum()),
                            "nps": 0.9 - beta / 2,
                            "nis": 0.5 + beta / 2,
                        }
                    )
            scores.append(
                {
                    "seed": s,
                    "ois": 0.1 + 0.1 * k + 0.01 * s,
                    "non_oracle_impurity": 0.3 + 0.05 * k,
                    "nis_area": 0.6,
                    "nps_beta": 0.8,
                    "nis_beta": 0.6,
                    "mean_niche_size": 1.5,
                    "beta": 0.2,
                    "task_auc": 0.9,
                }
            )
        for name, rows_ in (
            ("purity_matrices", purity),
            ("concept_niches", niches),
            ("niche_scores", curve),
            ("concept_scores", scores),
        ):
            _write(ws, name, rows_, checkpoint_id=cid)


def _write_single(ws: Workspace, name: str, rows: list[dict]) -> None:
    ws.write(name, pa.Table.from_pylist(rows, schema=schema.arrow_schema(name)))
