"""One factory for the tiny workspaces tests build (format 2.0, every table valid).

`make_workspace` writes the base tables (images with real PNG thumbnails, checkpoints,
features with planted clusters, ground-truth captions); with `derived=True` it also
writes every analysis table by hand, with values consistent with each other, so
validation and page tests do not depend on the analysis pipeline. Tests of the
pipeline run the real analyses on the base workspace instead (`analyzed_workspace`).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from conceptlens import schema
from conceptlens.workspace import Workspace, atomic_write_bytes

COLORS = ("red", "green", "blue")
SHAPES = ("circle", "square")
RGB = {"red": (220, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 220)}


def _png(color: str, shape: str, side: int = 8) -> bytes:
    from PIL import Image

    img = np.full((side, side, 3), 255, np.uint8)
    if shape == "square":
        img[2:6, 2:6] = RGB[color]
    else:
        yy, xx = np.mgrid[:side, :side]
        img[(yy - 3.5) ** 2 + (xx - 3.5) ** 2 <= 6] = RGB[color]
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG")
    return buf.getvalue()


def write_features(ws: Workspace, cid: str, ids, emb: np.ndarray) -> None:
    arr = pa.array(list(np.asarray(emb, np.float32)), type=pa.list_(pa.float32()))
    ws.write(
        "features",
        pa.table({"image_id": pa.array(list(ids), pa.string()), "embedding": arr}),
        checkpoint_id=cid,
    )


def make_workspace(
    root: Path,
    n_images: int = 48,
    n_checkpoints: int = 3,
    dim: int = 8,
    derived: bool = False,
    ks: tuple[int, ...] = (4,),
    seed: int = 0,
) -> Workspace:
    """A tiny workspace of one dataset `toy`: labels = colour (3), factor `shape` (2).

    Checkpoint `ck0` separates the colours well, later ones less and less (noise grows),
    so metrics differ between checkpoints in a known direction.
    """
    rng = np.random.default_rng(seed)
    ws = Workspace.create(
        root,
        name="tiny",
        description="factory workspace",
        provenance={"generator": "harness.factory", "seed": seed},
        created="2026-01-01T00:00:00+00:00",
    )
    rows, caps = [], []
    for i in range(n_images):
        color, shape = COLORS[i % 3], SHAPES[(i // 3) % 2]
        rel = f"thumbnails/toy/{i:04d}.png"
        atomic_write_bytes(ws.root / rel, _png(color, shape), fsync=False)
        rows.append(
            {
                "image_id": f"toy-{i:04d}",
                "dataset": "toy",
                "label": i % 3,
                "label_name": color,
                "split": "test" if i % 4 == 3 else "train",
                "thumbnail": rel,
                "width": 8,
                "height": 8,
                "shape": shape,
            }
        )
        caps.append({"image_id": f"toy-{i:04d}", "captioner": "groundtruth", "text": f"a {color} {shape}"})
    ws.write(
        "images",
        pa.Table.from_pylist(
            rows, schema=pa.schema(list(schema.arrow_schema("images")) + [pa.field("shape", pa.string())])
        ),
    )
    ws.write("captions", pa.Table.from_pylist(caps, schema=schema.arrow_schema("captions")))
    ids = [r["image_id"] for r in rows]
    labels = np.array([r["label"] for r in rows])
    centers = rng.standard_normal((3, dim)) * 3
    ck = []
    for c in range(n_checkpoints):
        noise = 0.3 + 1.5 * c
        emb = centers[labels] + noise * rng.standard_normal((n_images, dim))
        write_features(ws, f"ck{c}", ids, emb)
        ck.append(
            {
                "checkpoint_id": f"ck{c}",
                "dataset": "toy",
                "model": "toy-net",
                "method": "simclr",
                "epoch": n_checkpoints - c,
                "feature_dim": dim,
                "source": "plain:toy",
                "run": "toy-run",
            }
        )
    ws.write(
        "checkpoints",
        pa.Table.from_pylist(
            ck, schema=pa.schema([f for f in schema.arrow_schema("checkpoints") if f.name in ck[0]])
        ),
    )
    if derived:
        write_derived(ws, ids, labels, [r["checkpoint_id"] for r in ck], ks, seed)
    return ws


def write_derived(ws: Workspace, ids, labels, cids, ks, seed: int = 0) -> None:
    """Every analysis table, by hand: valid values that agree with each other."""
    rng = np.random.default_rng(seed + 1)
    n = len(ids)
    assign = {}
    for cid in cids:
        for k in ks:
            cl = (labels + rng.integers(0, 2, n) * (int(cid[2:]) > 0)) % k
            cl[:k] = np.arange(k)  # every cluster non-empty
            assign[cid, k] = cl
            ws.write(
                "clusters",
                pa.table(
                    {"image_id": list(ids), "cluster": cl.astype(np.int64), "distance": rng.uniform(0, 1, n)}
                ),
                checkpoint_id=cid,
                k=k,
            )
            sizes = np.bincount(cl, minlength=k)
            pur = rng.uniform(0.2, 1.0, k)
            coh = rng.uniform(0.5, 1.0, k)
            ws.write(
                "cluster_metrics",
                pa.table(
                    {
                        "cluster": np.arange(k, dtype=np.int64),
                        "size": sizes.astype(np.int64),
                        "purity": pur,
                        "purity_lo": pur - 0.2,
                        "purity_hi": np.minimum(1.0, pur + 0.1),
                        "top_label": np.arange(k, dtype=np.int64) % 3,
                        "top_label_share": rng.uniform(0.4, 1.0, k),
                        "coherence_random": coh,
                        "coherence_random_lo": coh - 0.2,
                        "coherence_random_hi": np.minimum(1.0, coh + 0.1),
                        "coherence_hard": coh - 0.1,
                        "coherence_hard_lo": coh - 0.3,
                        "coherence_hard_hi": coh,
                        "hard_negative": (np.arange(k, dtype=np.int64) + 1) % k,
                        "annotator": ["factors"] * k,
                        "coherence_trials": np.full(k, 20, np.int64),
                    },
                    schema=schema.arrow_schema("cluster_metrics", partition=False),
                ),
                checkpoint_id=cid,
                k=k,
            )
            ws.write(
                "cluster_captions",
                pa.table(
                    {
                        "cluster": np.arange(k, dtype=np.int64),
                        "caption": [f"a {COLORS[c % 3]} shape" for c in range(k)],
                        "caption_score": rng.uniform(0, 1, k),
                        "caption_source": ["groundtruth"] * k,
                        "caption_noneg": [f"a {COLORS[c % 3]} circle" for c in range(k)],
                        "caption_noneg_score": rng.uniform(0, 1, k),
                        "describability_hits": np.full(k, 3, np.int64),
                        "describability_top1": [True] * k,
                        "describability_top5": [True] * k,
                        "describability_binary": rng.uniform(0.5, 1, k),
                    },
                    schema=schema.arrow_schema("cluster_captions", optional=False, partition=False),
                ),
                checkpoint_id=cid,
                k=k,
            )
            ws.write(
                "checkpoint_metrics",
                pa.table(
                    {
                        "anmi": [0.5],
                        "knn_acc": [0.9 - 0.1 * int(cid[2:])],
                        "knn_acc_lo": [0.8 - 0.1 * int(cid[2:])],
                        "knn_acc_hi": [0.95 - 0.1 * int(cid[2:])],
                        "knn1_acc": [0.85 - 0.1 * int(cid[2:])],
                        "knn1_acc_lo": [0.75 - 0.1 * int(cid[2:])],
                        "knn1_acc_hi": [0.9 - 0.1 * int(cid[2:])],
                        "cl": [0.8],
                        "cl_lo": [0.7],
                        "cl_hi": [0.9],
                        "id": [5.0 + int(cid[2:])],
                        "id_lo": [4.0 + int(cid[2:])],
                        "id_hi": [6.5 + int(cid[2:])],
                        "cl_heldout": [0.7],
                        "cl_heldout_lo": [0.6],
                        "cl_heldout_hi": [0.8],
                        "n_images": [n],
                        "n_duplicates": [0],
                    },
                    schema=schema.arrow_schema("checkpoint_metrics", partition=False),
                ),
                checkpoint_id=cid,
                k=k,
            )
        xy = rng.standard_normal((n, 2))
        ws.write(
            "projections",
            pa.table({"image_id": list(ids), "x": xy[:, 0], "y": xy[:, 1]}),
            checkpoint_id=cid,
            method="umap",
        )
    from conceptlens.metrics.compare import contingency
    from conceptlens.metrics.scores import anmi

    clid, corr, sim, links = [], [], [], []
    for k in ks:
        for j, cid in enumerate(cids):
            clid.append({"k": k, "checkpoint_id": cid, "clid": float(j) - 1, "wclid": 0.5})
        for p in ("cl", "cl_heldout", "id", "clid", "wclid"):
            corr.append(
                {
                    "k": k,
                    "predictor": p,
                    "pearson": 0.5,
                    "pearson_p": 0.2,
                    "kendall": 0.3,
                    "kendall_p": 0.4,
                    "n_checkpoints": len(cids),
                }
            )
        for i, a in enumerate(cids):
            for b in cids[i + 1 :]:
                sim.append(
                    {
                        "k": k,
                        "checkpoint_a": a,
                        "checkpoint_b": b,
                        "anmi": anmi(assign[a, k], assign[b, k]),
                        "n_shared": n,
                    }
                )
                import pandas as pd

                t = contingency(
                    pd.DataFrame({"image_id": ids, "cluster": assign[a, k]}),
                    pd.DataFrame({"image_id": ids, "cluster": assign[b, k]}),
                )
                for r in t.itertuples(index=False):
                    links.append(
                        {
                            "k": k,
                            "checkpoint_a": a,
                            "checkpoint_b": b,
                            "a": r.a,
                            "b": r.b,
                            "count": r.count,
                            "size_a": r.size_a,
                            "size_b": r.size_b,
                        }
                    )
    for name, rows in (
        ("clid_scores", clid),
        ("predictor_correlations", corr),
        ("clustering_similarity", sim),
        ("cluster_links", links),
    ):
        ws.write(
            name, pa.Table.from_pylist(rows, schema=schema.arrow_schema(name, partition=False)), dataset="toy"
        )
    ws.append(
        "analysis_runs",
        pa.table(
            {
                "unit": ["dataset=toy"],
                "inputs": pa.array([None], pa.string()),
                # Its tables carry no stored options: over every checkpoint, the legacy
                # `--population both` (conceptlens/analysis/comparisons.py).
                "options": [json.dumps({"seed": seed, "population": "both"})],
                "version": ["test"],
                "started": ["2026-01-01T00:00:00+00:00"],
                "seconds": [0.1],
            }
        ),
        analysis="comparisons",
    )
    for c, cid in enumerate(cids):
        # lu2022's baselines: plausible values that worsen with the checkpoint's noise.
        ws.write(
            "baseline_scores",
            pa.Table.from_pylist(
                [
                    {
                        "k": k,
                        "alignment": 0.2 + 0.3 * c,
                        "uniformity": -3.0 + 0.5 * c,
                        "mcr2": 5.0 - c,
                        "rotation": None if c == 2 else 0.9 - 0.2 * c,
                        "source_neg_entropy": -0.2 - 0.3 * c,
                    }
                    for k in ks
                ],
                schema=schema.arrow_schema("baseline_scores", partition=False),
            ),
            checkpoint_id=cid,
        )
        # One dataset only: nothing to transfer to (an empty, valid partition).
        ws.write(
            "transfer_scores",
            schema.arrow_schema("transfer_scores", partition=False).empty_table(),
            checkpoint_id=cid,
        )
    ws.write(
        "transfer_correlations",
        schema.arrow_schema("transfer_correlations", partition=False).empty_table(),
        dataset="toy",
    )
    from tests.compmap_factory import write_compmap
    from tests.concepts_factory import write_concepts
    from tests.similarity_factory import write_similarity

    write_compmap(ws, seed)
    write_similarity(ws, seed)
    write_concepts(ws, seed)
    from tests.training_factory import write_training

    write_training(ws, ids, assign, cids, ks)
    # A table no writer above knows (a new analysis'): rows made from its declaration.
    write_undeclared_by_hand(ws, ks)


def shapes_workspace(root: Path, n: int = 40, dims: tuple[int, ...] = (), seed: int = 0) -> Workspace:
    """`n` rendered shapes images (64x64 PNGs, the demo's generator) with their ground-truth
    captions, for tests that run real models; one random checkpoint `rand{i}` per entry of
    `dims`."""
    from conceptlens.demo.build import build_shapes, images_table

    ws = Workspace.create(root, name="shapes", created="2026-01-01T00:00:00+00:00")
    rows, caps = build_shapes(ws, seed=seed, n=n, progress=False)
    ws.write("images", images_table(rows))
    ws.write("captions", pa.Table.from_pylist(caps, schema=schema.arrow_schema("captions")))
    ids = [r["image_id"] for r in rows]
    rng = np.random.default_rng(seed)
    ck = []
    for i, d in enumerate(dims):
        write_features(ws, f"rand{i}", ids, rng.standard_normal((n, d)))
        ck.append(
            {
                "checkpoint_id": f"rand{i}",
                "dataset": "shapes",
                "model": "none",
                "method": "random",
                "epoch": None,
                "feature_dim": d,
                "source": "test",
            }
        )
    ws.write(
        "checkpoints", pa.Table.from_pylist(ck, schema=schema.arrow_schema("checkpoints", optional=False))
    )
    return ws


def snapshot(root: Path) -> dict[str, object]:
    """Every entry under `root`: file bytes, symlink targets (not followed), folders; to
    prove a command changed nothing."""
    import os

    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir",)
            else:
                out[rel] = ("file", p.read_bytes())
    return out


FACTOR_SHAPES, FACTOR_COLORS = ("circle", "square", "star"), ("red", "green", "blue", "yellow")


def factor_workspace(root, n: int = 240, seed: int = 0) -> Workspace:
    """Images with factor columns (shape, colour, size) and label = shape x colour (12 labels),
    plus 3 checkpoints whose features cluster by label with growing noise (0.05, 0.3, 1.5):
    analyses must rank them in that order."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    ws = Workspace.create(root, name="synthetic")
    (ws.root / "thumbs").mkdir()
    Image.new("RGB", (4, 4)).save(ws.root / "thumbs" / "x.png")
    shape = rng.integers(0, 3, n)
    color = rng.integers(0, 4, n)
    size = rng.uniform(0, 1, n)
    label = shape * 4 + color
    ids = [f"img-{i:04d}" for i in range(n)]
    ws.write(
        "images",
        pa.table(
            {
                "image_id": ids,
                "dataset": ["toy"] * n,
                "label": label.astype(np.int64),
                "label_name": [f"{FACTOR_COLORS[c]} {FACTOR_SHAPES[s]}" for s, c in zip(shape, color)],
                "split": np.where(rng.random(n) < 0.25, "test", "train"),
                "thumbnail": ["thumbs/x.png"] * n,
                "width": np.full(n, 4, np.int32),
                "height": np.full(n, 4, np.int32),
                "shape": [FACTOR_SHAPES[s] for s in shape],
                "color": [FACTOR_COLORS[c] for c in color],
                "size": size,
            }
        ),
    )
    ws.write(
        "captions",
        pa.table(
            {
                "image_id": ids,
                "captioner": ["groundtruth"] * n,
                "text": [
                    f"a {'big' if z > 0.5 else 'small'} {FACTOR_COLORS[c]} {FACTOR_SHAPES[s]}"
                    for s, c, z in zip(shape, color, size)
                ],
            }
        ),
    )
    rows = []
    for j, noise in enumerate((0.05, 0.3, 1.5)):
        cid = f"toy-ckpt{j}"
        centres = rng.normal(size=(12, 16))
        X = (centres[label] + noise * rng.normal(size=(n, 16))).astype(np.float32)
        ws.write(
            "features",
            pa.table({"image_id": ids, "embedding": pa.array(list(X), type=pa.list_(pa.float32()))}),
            checkpoint_id=cid,
        )
        rows.append(
            {
                "checkpoint_id": cid,
                "dataset": "toy",
                "model": "mlp",
                "method": "synthetic",
                "epoch": j,
                "feature_dim": 16,
                "source": "synthetic:noise",
            }
        )
    ws.write(
        "checkpoints", pa.Table.from_pylist(rows, schema=schema.arrow_schema("checkpoints", optional=False))
    )
    return ws


# ---- rows of a table the factory has never seen, from its declaration --------------------
# A new analysis' table gets valid rows in the factory workspace without an edit here: its
# columns' types, bounds, allowed values and references say what a valid row holds. The
# tables written by hand above keep their hand-made values (which agree with each other
# beyond what a declaration says: a cluster's size is its images' count).
DECLARED_ROWS = 6  # rows per partition when the key goes beyond the partition columns


def _referenced(ws: Workspace, ref: str) -> list:
    """The distinct values of `table.column` in `ws`, sorted (none when it is absent)."""
    import pyarrow.parquet as pq

    table, column = ref.split(".")
    if column in schema.TABLES_BY_NAME[table].partition:
        values = [p[column] for p in ws.partitions(table)]
    else:
        values = [v for f in ws.files(table) for v in pq.read_table(f, columns=[column])[column].to_pylist()]
    return sorted({v for v in values if v is not None})


def _partition_values(ws: Workspace, col: schema.Column, ks) -> list:
    """The values a partition column takes: those it references, the factory's k, its
    first allowed value, or one made-up name."""
    if col.references and (values := _referenced(ws, col.references)):
        return values
    if col.name == "k":
        return list(ks)
    if col.allowed:
        return [col.allowed[0]]
    return [0] if col.type == schema.INT else [f"{col.name}-0"]


def _number(col: schema.Column, i: int) -> float:
    """A value inside the column's declared range, a little different in each row."""
    lo, hi = col.bounds or (None, None)
    if lo is not None and hi is not None:
        v = lo + (hi - lo) * (0.3 + 0.4 * (i % 5) / 4)
    elif lo is not None:
        v = lo + 1.0 + 0.5 * i
    elif hi is not None:
        v = hi - 1.0 - 0.5 * i
    else:
        v = 0.5 + 0.25 * i
    if col.positive and v <= 0:
        v = 1.0 + 0.5 * i
    return v


def _values(ws: Workspace, table: schema.Table, col: schema.Column, n: int) -> list:
    """`n` valid values of one column (rows 0..n-1); key columns get distinct values where
    they can. Two columns referencing the same column (checkpoint_a, checkpoint_b) start
    at different values, so a pair of them is a pair."""
    refs = _referenced(ws, col.references) if col.references else []
    if refs:
        same = [c.name for c in table.file_columns if c.references == col.references]
        shift = same.index(col.name)
        return [refs[(i + shift) % len(refs)] for i in range(n)]
    if col.type == schema.STRING:
        if col.allowed:
            return [col.allowed[i % len(col.allowed)] for i in range(n)]
        if col.is_path:
            return [ws.read("images")["thumbnail"][0].as_py()] * n
        return [f"{col.name}-{i}" for i in range(n)]
    if col.type == schema.INT:
        if col.name in table.key:
            start = int(col.bounds[0]) if col.bounds and col.bounds[0] is not None else 0
            return [start + i + int(col.positive and start <= 0) for i in range(n)]
        values = [int(round(_number(col, i))) for i in range(n)]
        return [i + 1 if col.positive and v <= 0 else v for i, v in enumerate(values)]
    if col.type == schema.FLOAT:
        return [float(_number(col, i)) for i in range(n)]
    if col.type == schema.BOOL:
        return [i % 2 == 0 for i in range(n)]
    if col.type == schema.FLOAT_LIST:
        return [[0.25 * (i + 1), -0.5] for i in range(n)]
    if col.type == schema.STRING_LIST:
        return [[f"{col.name}-{i}"] for i in range(n)]
    if col.type == schema.TIMESTAMP:
        import datetime as dt

        return [dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i) for i in range(n)]
    raise AssertionError(f"{table.name}.{col.name}: no generator for type {col.type}")


def declared_rows(
    ws: Workspace, table: schema.Table, partition: dict | None = None, n: int = DECLARED_ROWS
) -> pa.Table:
    """Rows of one file of `table` (its file columns, the optional ones too) that
    `validate` accepts, from the declaration alone: values inside their bounds, among their
    allowed values, referencing what is in `ws`, each no greater than the columns it must
    be at most (an interval's low end below its value) and below those it must be less
    than; rows that still break a rule between columns, or repeat a key, are left out."""
    part = dict(partition or {})
    free_key = [c for c in table.key if c not in table.partition]
    n = n if free_key else 1
    cols = {c.name: _values(ws, table, c, n) for c in table.file_columns}

    def other(name: str) -> list:
        return cols[name] if name in cols else [part[name]] * n

    numeric = (schema.INT, schema.FLOAT)
    for _ in cols:  # chains (lo <= value <= hi): settle them, one link a pass
        for c in table.file_columns:
            if c.type not in numeric:
                continue
            for name in c.at_most:
                cols[c.name] = [min(a, b) for a, b in zip(cols[c.name], other(name))]
            if c.less_than in cols or c.less_than in part:
                step = 1 if c.type == schema.INT else 1e-3
                cols[c.name] = [min(a, b - step) for a, b in zip(cols[c.name], other(c.less_than))]
    keep, seen = [], set()
    for i in range(n):
        key = tuple(cols[k][i] for k in free_key)
        ok = key not in seen
        for c in table.file_columns:
            if c.less_than in cols or c.less_than in part:
                ok = ok and cols[c.name][i] < other(c.less_than)[i]
            if c.differs_from in cols or c.differs_from in part:
                ok = ok and cols[c.name][i] != other(c.differs_from)[i]
        if ok:
            seen.add(key)
            keep.append(i)
    assert keep, f"{table.name}: no row made from its declaration keeps its rules ({part})"
    rows = {name: [v[i] for i in keep] for name, v in cols.items()}
    return pa.table(rows, schema=schema.arrow_schema(table.name, partition=False))


def write_declared(ws: Workspace, table: schema.Table, ks=(4,)) -> None:
    """Write `table` into every partition its partition columns take in `ws`."""
    import itertools

    columns = [table.column(p) for p in table.partition]
    for values in itertools.product(*(_partition_values(ws, c, ks) for c in columns)):
        part = dict(zip(table.partition, values))
        rows = declared_rows(ws, table, part)
        if table.append_only:
            ws.append(table.name, rows, **part)
        else:
            ws.write(table.name, rows, **part)


def write_undeclared_by_hand(ws: Workspace, ks=(4,)) -> list[str]:
    """Every table an analysis writes that `write_derived` wrote no file of, from its
    declaration; the names of those written."""
    from conceptlens.analysis import registered

    done = []
    for a in registered():
        for name in a.writes:
            if name not in done and not ws.files(name):
                write_declared(ws, schema.TABLES_BY_NAME[name], ks)
                done.append(name)
    return done
