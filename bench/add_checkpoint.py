"""Seconds to add and analyse one checkpoint in a workspace of many, before and after format 2.0.

Builds a seeded synthetic workspace (default 50,000 images of one dataset, 100 classes in
10 super-classes, 27 checkpoints already analysed at k = round(sqrt(N)) = 224), then times
adding a 28th: writing its features and its `checkpoints` row, then analysing it.

* `--version after` uses this repository (format 2.0: partitioned tables) and runs
  `conceptlens analyze cluster_metrics` + `analyze comparisons` (clustering comes first as
  their dependency) with `--checkpoint NEW --k 224 --n-init 1`;
* `--version before` uses a checkout of 0353b4e (format 1.0: one Parquet file per table,
  rewritten by `Workspace.upsert` for every (checkpoint, k)) and runs `conceptlens analyze
  clusters --checkpoint NEW --k 224 --n-init 1 --no-umap --no-captions --no-describability`.
  Format 1.0 has no `comparisons` (aNMI and contingency of every pair of checkpoints):
  its time is printed apart, so the two can be compared with and without it.

Captions, describability and UMAP are left out of both (they need models and cost the
same in both formats). The analyses are called in-process, as the CLI calls them, so
that storage calls can be timed. The 27 analysed checkpoints' derived tables are written
directly (realistic sizes, plausible values) rather than computed: 27 real analyses
would take hours. Their features are not written: analysing one checkpoint never
reads another's features in either version, and they would only cost disk (so
`conceptlens validate` reports them missing, and nothing else).

    .venv/bin/python bench/add_checkpoint.py --version after
    git worktree add /tmp/old 0353b4e
    .venv/bin/python bench/add_checkpoint.py --version before --old-src /tmp/old

Default feature dim is 128 (not a real backbone's 512-2048) so one run fits in minutes on
two cores; compute grows with --dim, storage does not (features are written once).
Times are wall and CPU seconds (CPU: every thread of this process, the steadier measure
when other processes share the cores).
Results: a table on stdout and OUT/workspace-VERSION.json next to OUT/workspace-VERSION/.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
N_CLASSES, N_SUPER, N_THUMBS = 100, 10, 8
DATASET = "synth"
# Tables read as inputs of an analysis (the same in both formats); any other table read
# is a derived table: reading it back is part of the storage cost.
INPUTS = {"images", "checkpoints", "features", "captions", "vl_models"}
# Tables whose 1.0 file holds rows of every checkpoint.
PER_CHECKPOINT = {"clusters", "cluster_metrics", "checkpoint_metrics", "projections"}


def load(version: str, old_src: str | None):
    """Import the library under test: this repository, or the 1.0 checkout given."""
    if version == "before" and not old_src:
        raise SystemExit("--version before needs --old-src (a checkout of 0353b4e)")
    src = Path(old_src).resolve() if version == "before" else REPO
    sys.path.insert(0, str(src))
    import conceptlens
    from conceptlens import schema

    if Path(conceptlens.__file__).resolve().parents[1] != src:
        raise SystemExit(f"imported {conceptlens.__file__}, not the library in {src}")
    want = "1" if version == "before" else "2"
    if schema.SCHEMA_MAJOR != want:
        raise SystemExit(f"{src} writes format {schema.SCHEMA_VERSION}; --version {version} needs {want}.x")
    import subprocess

    rev = subprocess.run(
        ["git", "-C", str(src), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    return schema, rev or "unknown"


# ---- synthetic data ----------------------------------------------------------------------
def png(rgb) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), rgb).save(buf, format="PNG")
    return buf.getvalue()


def table(schema, name: str, cols: dict) -> pa.Table:
    """The columns of `name` in the format under test, picked from a superset of both
    (an optional column this script does not know is left out; a required one is an error)."""
    t = schema.TABLES_BY_NAME[name]
    s = pa.schema([f for f in schema.arrow_schema(name) if f.name in cols or t.column(f.name).required])
    return pa.table({f.name: cols[f.name] for f in s}, schema=s)


def features(ids, label, dim: int, seed: int) -> pa.Table:
    """Gaussian blobs: a super-class centre plus a class centre plus noise."""
    r = np.random.default_rng(seed)
    sup = 2 * r.standard_normal((N_SUPER, dim), dtype=np.float32)
    cls = r.standard_normal((N_CLASSES, dim), dtype=np.float32)
    X = sup[label // (N_CLASSES // N_SUPER)] + cls[label]
    X += 1.2 * r.standard_normal(X.shape, dtype=np.float32)
    offsets = pa.array(np.arange(0, X.size + 1, dim, dtype=np.int32))
    emb = pa.ListArray.from_arrays(offsets, pa.array(X.ravel()))
    return pa.table({"image_id": pa.array(ids, pa.string()), "embedding": emb})


def clustering(label, k: int, j: int, n_ck: int, rng) -> np.ndarray:
    """A clustering that follows the classes, with more noise for later checkpoints; its
    contingency tables with the others have about as many cells as real ones."""
    n = len(label)
    cl = (label * k) // N_CLASSES + rng.integers(0, 2, n)
    noisy = rng.random(n) < 0.05 + 0.4 * j / max(1, n_ck - 1)
    cl[noisy] = rng.integers(0, k, noisy.sum())
    cl = rng.permutation(k)[cl % k]
    cl[:k] = np.arange(k)  # every cluster non-empty
    return cl.astype(np.int64)


def derived(cid: str, cl: np.ndarray, ids, k: int, rng) -> dict[str, dict]:
    """Every per-checkpoint analysis table of one analysed checkpoint (superset of columns)."""
    n = len(ids)
    coh = rng.uniform(0.55, 0.95, k)
    caps = [f"a photo of a class-{c % N_CLASSES:02d} thing" for c in range(k)]
    per_cluster = {
        "checkpoint_id": [cid] * k,
        "k": np.full(k, k, np.int64),
        "cluster": np.arange(k, dtype=np.int64),
        "size": np.bincount(cl, minlength=k).astype(np.int64),
        "purity": rng.uniform(0.2, 1, k),
        "top_label": rng.integers(0, N_CLASSES, k),
        "top_label_share": rng.uniform(0.3, 1, k),
        "coherence_random": coh,
        "coherence_random_lo": coh - 0.2,
        "coherence_random_hi": np.minimum(1, coh + 0.05),
        "coherence_hard": coh - 0.1,
        "coherence_hard_lo": coh - 0.3,
        "coherence_hard_hi": coh,
        "hard_negative": (np.arange(k, dtype=np.int64) + 1) % k,
        "annotator": ["factors"] * k,
        "coherence_trials": np.full(k, 20, np.int64),
        "caption": caps,
        "caption_score": rng.uniform(0, 1, k),
        "caption_source": ["groundtruth"] * k,
        "caption_noneg": caps,
        "caption_noneg_score": rng.uniform(0, 1, k),
        "caption_rouge": caps,
        "caption_rouge_score": rng.uniform(0, 1, k),
        "describability_hits": rng.integers(0, 11, k),
        "describability_top1": rng.random(k) < 0.5,
        "describability_top5": rng.random(k) < 0.8,
        "describability_binary": rng.uniform(0.5, 1, k),
    }
    xy = rng.standard_normal((n, 2))
    out = {
        "clusters": {
            "checkpoint_id": [cid] * n,
            "k": np.full(n, k, np.int64),
            "image_id": ids,
            "cluster": cl,
            "distance": rng.uniform(0.2, 1.2, n),
        },
        "cluster_metrics": per_cluster,
        "cluster_captions": per_cluster,
        "checkpoint_metrics": {
            "checkpoint_id": [cid],
            "k": [k],
            "anmi": [rng.uniform(0.3, 0.8)],
            "knn_acc": [rng.uniform(0.4, 0.9)],
            "cl": [rng.uniform(0.3, 0.9)],
            "id": [rng.uniform(8, 30)],
            "clid": [rng.normal()],
            "cl_heldout": [rng.uniform(0.3, 0.9)],
            "wclid": [rng.uniform(0.4, 0.9)],
            "n_images": [n],
            "n_duplicates": [0],
        },
        "projections": {
            "checkpoint_id": [cid] * n,
            "method": ["umap"] * n,
            "image_id": ids,
            "x": xy[:, 0],
            "y": xy[:, 1],
        },
    }
    out["checkpoint_metrics"]["knn1_acc"] = [out["checkpoint_metrics"]["knn_acc"][0] - 0.03]
    return out


def build(schema, root: Path, n: int, n_ck: int, dim: int, seed: int, k: int) -> dict:
    """The workspace before the add: base tables, and n_ck - 1 checkpoints analysed."""
    from conceptlens.workspace import Workspace

    rng = np.random.default_rng(seed)
    ws = Workspace.create(
        root,
        name="bench",
        description="bench/add_checkpoint.py",
        provenance={"generator": "bench/add_checkpoint.py", "seed": seed},
    )
    for t in range(N_THUMBS):
        p = root / f"thumbnails/t{t}.png"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(png(tuple(int(v) for v in rng.integers(0, 256, 3))))
    label = rng.integers(0, N_CLASSES, n)
    ids = np.array([f"img-{i:06d}" for i in range(n)], dtype=object)
    img = {
        "image_id": ids,
        "dataset": [DATASET] * n,
        "label": label,
        "label_name": [f"class-{v:02d}" for v in label],
        "split": np.where(rng.random(n) < 0.8, "train", "test"),
        "thumbnail": [f"thumbnails/t{v % N_THUMBS}.png" for v in label],
        "width": np.full(n, 8),
        "height": np.full(n, 8),
    }
    factors = {
        "superclass": [f"super-{v // (N_CLASSES // N_SUPER)}" for v in label],
        "brightness": rng.uniform(0, 1, n),
    }
    base = table(schema, "images", img)
    for c, v in factors.items():
        base = base.append_column(c, pa.array(v))
    ws.write("images", base)
    cids = [f"ck{j:02d}" for j in range(n_ck)]
    ck_rows = [
        {
            "checkpoint_id": c,
            "dataset": DATASET,
            "model": "resnet-synth",
            "method": "simclr",
            "epoch": 10 * (j + 1),
            "feature_dim": dim,
            "source": "plain:synth",
            "run": "run-0",
        }
        for j, c in enumerate(cids)
    ]
    ck_schema = pa.schema([f for f in schema.arrow_schema("checkpoints") if f.name in ck_rows[0]])
    ws.write("checkpoints", pa.Table.from_pylist(ck_rows[:-1], schema=ck_schema))

    partitioned = hasattr(ws, "partition_dir")
    single: dict[str, list] = defaultdict(list)
    clusterings = {}
    for j, cid in enumerate(cids[:-1]):
        cl = clusterings[cid] = clustering(label, k, j, n_ck, rng)
        for name, cols in derived(cid, cl, ids, k, rng).items():
            if name not in schema.TABLES_BY_NAME:
                continue  # cluster_captions is new in 2.0
            t = table(schema, name, cols)
            if not partitioned:
                single[name].append(t)  # 1.0: one file per table, every checkpoint's rows
                continue
            part = {"checkpoint_id": cid, **({"method": "umap"} if name == "projections" else {"k": k})}
            md = None
            if name == "checkpoint_metrics":  # as cluster_metrics writes it: the clustering's fingerprint
                from conceptlens.workspace import files_signature

                md = {"inputs": files_signature(ws.partition_files("clusters", checkpoint_id=cid, k=k))}
            ws.write(name, t, metadata=md, **part)
    for name, ts in single.items():
        ws.write(name, pa.concat_tables(ts))

    # Per-dataset tables of the 27 compared with each other.
    preds = ("cl", "cl_heldout", "id", "clid", "wclid")
    corr = {
        "dataset": [DATASET] * len(preds),
        "k": [k] * len(preds),
        "predictor": list(preds),
        "pearson": rng.uniform(-1, 1, len(preds)),
        "pearson_p": rng.uniform(0, 1, len(preds)),
        "kendall": rng.uniform(-1, 1, len(preds)),
        "kendall_p": rng.uniform(0, 1, len(preds)),
        "n_checkpoints": [n_ck - 1] * len(preds),
    }
    if not partitioned:
        ws.write("predictor_correlations", table(schema, "predictor_correlations", corr))
        return {"ids": ids, "label": label, "new": cids[-1], "ck_row": ck_rows[-1], "ck_schema": ck_schema}
    from conceptlens.workspace import files_signature

    m = n_ck - 1
    ws.write(
        "clid_scores",
        table(
            schema,
            "clid_scores",
            {
                "dataset": [DATASET] * m,
                "k": [k] * m,
                "checkpoint_id": cids[:-1],
                "clid": rng.normal(size=m),
                "wclid": rng.uniform(0.4, 0.9, m),
            },
        ),
        dataset=DATASET,
    )
    # Pairs: aNMI values are placeholders (the run reuses them, never checks them); the
    # contingency tables are the real ones, since their size is what the run reads back.
    sim, links = defaultdict(list), []
    for i, a in enumerate(cids[:-1]):
        for b in cids[i + 1 : -1]:
            ca, cb = clusterings[a], clusterings[b]
            cnt = np.bincount(ca * k + cb, minlength=k * k)
            nz = np.flatnonzero(cnt)
            sa, sb = np.bincount(ca, minlength=k), np.bincount(cb, minlength=k)
            links.append(
                pa.table(
                    {
                        "dataset": [DATASET] * len(nz),
                        "k": np.full(len(nz), k, np.int64),
                        "checkpoint_a": [a] * len(nz),
                        "checkpoint_b": [b] * len(nz),
                        "a": nz // k,
                        "b": nz % k,
                        "count": cnt[nz],
                        "size_a": sa[nz // k],
                        "size_b": sb[nz % k],
                    },
                    schema=schema.arrow_schema("cluster_links"),
                )
            )
            for c, v in (
                ("dataset", DATASET),
                ("k", k),
                ("checkpoint_a", a),
                ("checkpoint_b", b),
                ("anmi", float(rng.uniform(0.2, 0.8))),
                ("n_shared", n),
            ):
                sim[c].append(v)
    ws.write("clustering_similarity", table(schema, "clustering_similarity", sim), dataset=DATASET)
    sig = {
        f"{c}/{k}": files_signature(ws.partition_files("clusters", checkpoint_id=c, k=k)) for c in cids[:-1]
    }
    ws.write("cluster_links", pa.concat_tables(links), metadata={"clusterings": sig}, dataset=DATASET)
    ws.write(
        "predictor_correlations",
        table(schema, "predictor_correlations", corr),
        metadata={"inputs": "bench"},
        dataset=DATASET,
    )
    return {"ids": ids, "label": label, "new": cids[-1], "ck_row": ck_rows[-1], "ck_schema": ck_schema}


# ---- timing ----------------------------------------------------------------------------------
def now() -> np.ndarray:
    """(wall, CPU) seconds. The machine may be shared: CPU time (all threads of this
    process) is the steadier measure of work when other processes compete for the cores."""
    return np.array([time.perf_counter(), time.process_time()])


def pair(v) -> dict:
    return {"wall": float(v[0]), "cpu": float(v[1])}


class Clock:
    """Wall and CPU time of wrapped calls, per category. Categories are exclusive: a call made
    inside another timed call (upsert -> write) is charged to the outer one only.
    Phases (k-means, one analysis...) are timed on their own, whatever they contain."""

    def __init__(self):
        self.seconds: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(2))
        self.calls: dict[str, int] = defaultdict(int)
        self.phases: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(2))
        self._inside = False

    @staticmethod
    def _set(owner, attr, f):
        try:
            setattr(owner, attr, f)
        except AttributeError:  # frozen dataclass (an Analysis)
            object.__setattr__(owner, attr, f)

    def charge(self, owner, attr: str, category):
        f = getattr(owner, attr)

        def timed(*a, **kw):
            if self._inside:
                return f(*a, **kw)
            self._inside, t = True, now()
            try:
                return f(*a, **kw)
            finally:
                cat = category(*a, **kw) if callable(category) else category
                self.seconds[cat] += now() - t
                self.calls[cat] += 1
                self._inside = False

        self._set(owner, attr, timed)

    def phase(self, owner, attr: str, name: str):
        f = getattr(owner, attr)
        self.phases[name] = np.zeros(2)  # printed in the order registered

        def timed(*a, **kw):
            t = now()
            try:
                return f(*a, **kw)
            finally:
                self.phases[name] += now() - t
                self.calls[name] += 1

        self._set(owner, attr, timed)


def by_table(self, name, *a, **kw) -> str:
    return "input reads" if name in INPUTS else "derived reads"


def instrument(version: str) -> Clock:
    """Wrap every call that reads or writes a table (and the phases worth naming)."""
    from conceptlens import metrics, workspace

    clock = Clock()
    W = workspace.Workspace
    for attr in ("write", "upsert", "append"):
        if hasattr(W, attr):
            clock.charge(W, attr, "writes")  # upsert's read of the old file counts here
    for attr in ("read", "read_metadata", "files", "partition_files"):
        if hasattr(W, attr):
            clock.charge(W, attr, by_table)
    # Phases, in the order printed; the metrics are the same functions in both versions,
    # called as `M.name`, so patching the package reaches them.
    metric = [
        (metrics, fn, f"  metrics.{fn}")
        for fn in (
            "knn_accuracy",
            "twonn",
            "cluster_learnability",
            "cluster_learnability_heldout",
            # The analysis reads them from one shared neighbour pass (issue 14).
            "SelfNeighbours",
            "knn_accuracy_shared",
            "twonn_shared",
            "cluster_learnability_shared",
            "cluster_learnability_heldout_shared",
            "hard_negative_clusters",
            "annotate",
            "anmi",
        )
    ]
    if version == "before":
        from conceptlens import db
        from conceptlens.analysis import clusters

        clock.charge(db.WorkspaceDB, "features", "input reads")
        phases = [
            (clusters, "_kmeans", "  k-means"),
            *metric,
            (clusters, "update_clid", "  update_clid (rewrites checkpoint_metrics)"),
        ]
    else:
        from conceptlens.analysis import by_name, clustering
        from conceptlens.metrics import compare, scores

        # Fingerprints hash the bytes of derived files: a read of them.
        for mod in ("workspace", "analysis.cluster_metrics", "analysis.comparisons"):
            m = importlib.import_module(f"conceptlens.{mod}")
            clock.charge(m, "files_signature", "derived reads")
        a = by_name()
        # comparisons imports anmi and contingency when it runs: new pairs are compared,
        # pairs of two unchanged clusterings are copied from the stored tables.
        phases = [
            (a["clustering"], "run", "analysis clustering"),
            (clustering, "kmeans", "  k-means"),
            (a["cluster_metrics"], "run", "analysis cluster_metrics"),
            *metric,
            (a["comparisons"], "run", "analysis comparisons"),
            (scores, "anmi", "  aNMI of the new pairs"),
            (compare, "contingency", "  contingency tables of the new pairs"),
        ]
    for owner_, attr, name in phases:
        clock.phase(owner_, attr, name)
    return clock


def snapshot(root: Path) -> dict[str, tuple]:
    return {
        str(p.relative_to(root)): (s.st_size, s.st_mtime_ns, s.st_ino)
        for p in root.rglob("*")
        if p.is_file() and (s := p.stat())
    }


def owner(rel: str, new: str) -> str:
    """Whose data a written file holds: the added checkpoint's, other checkpoints', or the
    dataset's / workspace's (checkpoints, comparisons, logs)."""
    parts = Path(rel).parts
    for p in parts:
        if p.startswith("checkpoint_id="):
            return "added" if p == f"checkpoint_id={new}" else "other checkpoints"
    if parts[0] == "features":
        return "added" if Path(rel).stem == new else "other checkpoints"
    if Path(rel).stem in PER_CHECKPOINT and len(parts) == 1:
        return "other checkpoints"  # 1.0: the file holds every checkpoint's rows
    return "shared"


def add_and_analyse(
    version: str, schema, root: Path, info: dict, dim: int, seed: int, k: int, clock: Clock
) -> dict:
    from conceptlens.workspace import Workspace

    ws, new = Workspace(root), info["new"]
    feats = features(info["ids"], info["label"], dim, seed + 1)  # generated before the clock starts
    row = pa.Table.from_pylist([info["ck_row"]], schema=info["ck_schema"])
    t0 = now()
    ws.write("features", feats, checkpoint_id=new)
    ws.upsert("checkpoints", row, {"checkpoint_id": new})
    t1 = now()
    if version == "before":
        from conceptlens.analysis.clusters import Options, analyze_clusters

        notes = analyze_clusters(
            root,
            new,
            Options(
                ks=[k], n_init=1, seed=0, umap=False, captions=False, describability=False, progress=False
            ),
        )
    else:
        from conceptlens.analysis import runner

        notes = runner.run(
            root,
            ["cluster_metrics", "comparisons"],
            {"k": [k], "n_init": 1, "seed": 0},
            checkpoint=new,
            progress_bars=False,
        ).notes
    t2 = now()
    return {
        "register_seconds": t1 - t0,
        "analyse_seconds": t2 - t1,
        "total_seconds": t2 - t0,
        "notes": list(notes),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", choices=("before", "after"), required=True)
    ap.add_argument("--old-src", help="checkout of 0353b4e (format 1.0), for --version before")
    ap.add_argument("--images", type=int, default=50_000)
    ap.add_argument("--checkpoints", type=int, default=28, help="including the one added")
    ap.add_argument("--dim", type=int, default=128, help="feature dim (default 128 to fit the time budget)")
    ap.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "conceptlens-add-checkpoint"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.checkpoints < 2:
        raise SystemExit("--checkpoints must be at least 2 (one is the one added)")
    schema, source = load(args.version, args.old_src)
    k = max(2, int(round(math.sqrt(args.images))))
    root = Path(args.out) / f"workspace-{args.version}"
    shutil.rmtree(root, ignore_errors=True)

    t = time.perf_counter()
    info = build(schema, root, args.images, args.checkpoints, args.dim, args.seed, k)
    setup = time.perf_counter() - t
    before = snapshot(root)
    clock = instrument(args.version)
    res = add_and_analyse(args.version, schema, root, info, args.dim, args.seed, k, clock)
    after = snapshot(root)

    written = {rel: after[rel][0] for rel in after if before.get(rel) != after[rel]}
    by_owner: dict[str, dict] = defaultdict(lambda: {"files": 0, "bytes": 0})
    for rel, size in written.items():
        o = by_owner[owner(rel, info["new"])]
        o["files"] += 1
        o["bytes"] += size
    sec = clock.seconds
    storage = sec["writes"] + sec["derived reads"]
    compute = res["total_seconds"] - storage - sec["input reads"]
    out = {
        "version": args.version,
        "source": source,
        "schema_version": schema.SCHEMA_VERSION,
        "images": args.images,
        "checkpoints": args.checkpoints,
        "dim": args.dim,
        "k": k,
        "seed": args.seed,
        "setup_seconds": setup,
        **{k_: v for k_, v in res.items() if k_ != "notes"},
        "compute_seconds": compute,
        "storage_seconds": storage,
        "seconds": dict(sec),
        "calls": dict(clock.calls),
        "phases": dict(clock.phases),
        "bytes_written": sum(written.values()),
        "files_written": len(written),
        "by_owner": dict(by_owner),
        "written": written,
        "workspace_bytes": sum(v[0] for v in after.values()),
        "notes": res["notes"],
    }
    Path(f"{root}.json").write_text(json.dumps(out, indent=2, default=pair) + "\n")

    mb, ph = 1 / 1e6, clock.phases
    print(
        f"{args.version} ({source}, format {schema.SCHEMA_VERSION}): {args.images} images, "
        f"{args.checkpoints} checkpoints (1 added), dim {args.dim}, k {k}; setup {setup:.0f} s, workspace "
        f"{out['workspace_bytes'] * mb:.0f} MB"
    )
    rows = [
        ("add one checkpoint, total", res["total_seconds"]),
        ("  write features + checkpoints row", res["register_seconds"]),
        ("  analyse", res["analyse_seconds"]),
        *[(f"    {p}", s) for p, s in clock.phases.items() if clock.calls[p]],
        *(
            [
                (
                    "      rest (copy stored pairs, CLID, I/O)",
                    ph["analysis comparisons"]
                    - ph["  aNMI of the new pairs"]
                    - ph["  contingency tables of the new pairs"],
                )
            ]
            if "analysis comparisons" in ph
            else []
        ),
        ("compute", compute),
        ("storage", storage),
        ("  writes (incl. upsert's read-back)", sec["writes"]),
        ("  derived-table reads", sec["derived reads"]),
        ("input reads (images, features)", sec["input reads"]),
    ]
    print(f"{'seconds':<48s} {'wall':>8s} {'CPU':>8s}")
    for name, s in rows:
        print(f"{name:<48s} {s[0]:8.1f} {s[1]:8.1f}")
    print(f"{'written':<48s} {out['bytes_written'] * mb:8.1f} MB in {len(written)} files")
    for o, v in sorted(by_owner.items()):
        print(f"  {o:<46s} {v['bytes'] * mb:8.1f} MB in {v['files']} files")
    print(f"results: {root}.json")


if __name__ == "__main__":
    main()
