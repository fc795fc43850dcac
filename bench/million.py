"""The Clusters page's UMAP at 1,000,000 points: the binned overview and a zoomed-in view.

`conceptlens demo scale` cannot make this workspace cheaply (a million thumbnail files,
and UMAP and the cluster metrics' exact neighbour pass of a million images take hours),
so this script writes its own, documented here and in its workspace.json, for the view
benchmark only:

- `images`: N images of `demo scale`'s generator (1,000 classes in 20 super-classes,
  factor columns, a 20 % test split); the images of a class share one 16-pixel thumbnail
  (1,000 files, not N);
- `projections` (method `umap`): a synthetic 2-D layout standing in for a UMAP, each
  super-class a blob on a circle, each class a blob inside it, each image Gaussian
  noise around its class (classes overlap, as a UMAP's do);
- `features`: the 2-D points themselves (`feature_dim` 2);
- `clusters`: k-means (faiss) of those 2-D points, k = 1,000: centres from a 100,000-point
  sample, every point assigned to its nearest centre;
- `cluster_metrics`: each cluster's size and laina2020 purity (`metrics.scores.purity`),
  top label and its share; coherence is not computed (missing, as the schema allows);
- `checkpoint_metrics`: TwoNN ID and prequential CL of a 10,000-image sample (the page
  needs the row), the rest missing.

Measured, each the median of `--repeat` runs: the Clusters page's script run (AppTest, as
bench/pages.py: cold = caches cleared, warm = a rerun) for the overview, a zoomed-in view
with at most half the page's limit of points, and a box over a quarter of the plot selected;
the bytes of the Plotly figure JSON each run sends (the UMAP's and all charts') and of all
its elements' messages; and the library's view functions alone (binning, zoomed points, a
box's and a lasso's ids over the whole table, the lasso's labels and one page in DuckDB).
Nothing is asserted.

    nice -n 19 .venv/bin/python bench/million.py [--out /tmp/million-ws] [--images 1000000] \\
        [--repeat 5] [--json million.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from apptest import open_page, run_once, sent  # noqa: E402  (bench/ is this script's folder)

CKPT, K, DATASET = "synthetic-umap", 1000, "million"


def build(out: Path, n: int, seed: int = 0) -> None:
    """Write the benchmark workspace at `out` (kept if it exists with the same size)."""
    import faiss
    import pyarrow as pa
    from scipy.spatial import cKDTree

    from conceptlens import schema
    from conceptlens.demo import scale
    from conceptlens.extract import features_table
    from conceptlens.metrics.intrinsic import twonn
    from conceptlens.metrics.learnability import cluster_learnability
    from conceptlens.metrics.scores import purity
    from conceptlens.workspace import Workspace, atomic_write_bytes

    meta = out / "workspace.json"
    if meta.exists() and json.loads(meta.read_text()).get("provenance", {}).get("images") == n:
        return
    t = time.perf_counter()
    ws = Workspace.create(
        out,
        name=f"ConceptLens million-point benchmark ({n} images)",
        description="bench/million.py: a synthetic 2-D layout standing in for a UMAP, k-means "
        "of it, purity from the labels; for the projection view benchmark only.",
        provenance={"generator": "bench/million.py", "seed": seed, "images": n, "k": K},
        created=scale.CREATED,
    )
    rng = np.random.default_rng([seed, 1])
    n_classes = 1000
    f = scale._images(n, n_classes, rng)
    width = len(str(n - 1))
    ids = np.array([f"img-{i:0{width}d}" for i in range(n)], dtype=object)
    first = {}  # a class's first image draws its thumbnail
    for i, y in enumerate(f["label"]):
        first.setdefault(int(y), i)
    for y, i in first.items():
        atomic_write_bytes(
            ws.root / f"thumbnails/class-{y:04d}.png",
            scale._png(scale._thumbnail(f, i, n_classes)),
            fsync=False,
        )
    sup = f["super"]
    names = np.array(
        [f"{scale.SUPER[s % len(scale.SUPER)]} {y}" for s, y in zip(sup, f["label"])], dtype=object
    )
    ws.write(
        "images",
        pa.table(
            {
                "image_id": pa.array(ids, pa.string()),
                "dataset": pa.array(np.full(n, DATASET, dtype=object), pa.string()),
                "label": pa.array(f["label"], pa.int64()),
                "label_name": pa.array(names, pa.string()),
                "split": pa.array(np.where(f["test"], "test", "train"), pa.string()),
                "thumbnail": pa.array([f"thumbnails/class-{y:04d}.png" for y in f["label"]], pa.string()),
                "width": pa.array(np.full(n, scale.THUMB), pa.int32()),
                "height": pa.array(np.full(n, scale.THUMB), pa.int32()),
                "superclass": pa.array(
                    np.array(scale.SUPER, dtype=object)[sup % len(scale.SUPER)], pa.string()
                ),
                "background": pa.array(
                    np.array(scale.BACKGROUNDS, dtype=object)[f["background"]], pa.string()
                ),
            }
        ),
    )
    ck = [{"checkpoint_id": CKPT, "dataset": DATASET, "model": "synthetic", "method": "synthetic",
           "epoch": None, "feature_dim": 2, "source": "bench/million.py"}]  # fmt: skip
    fields = [x for x in schema.arrow_schema("checkpoints") if x.name in ck[0]]
    ws.write("checkpoints", pa.Table.from_pylist(ck, schema=pa.schema(fields)))
    # The layout: super-classes on a circle, classes around them, images around those.
    n_super = int(sup.max()) + 1
    angle = 2 * np.pi * np.arange(n_super) / n_super
    sup_c = 12 * np.column_stack([np.cos(angle), np.sin(angle)])
    cls_sup = np.arange(n_classes) * n_super // n_classes
    cls_c = sup_c[cls_sup] + 2.5 * rng.standard_normal((n_classes, 2))
    xy = cls_c[f["label"]] + 0.6 * rng.standard_normal((n, 2))
    ws.write(
        "projections",
        pa.table({"image_id": pa.array(ids, pa.string()), "x": xy[:, 0], "y": xy[:, 1]}),
        checkpoint_id=CKPT,
        method="umap",
    )
    x32 = np.ascontiguousarray(xy, dtype=np.float32)
    # The checkpoint's features are the 2-D points themselves (feature_dim 2): the page's
    # nearest neighbours of an image are then its neighbours on the plot.
    ws.write("features", features_table(list(ids), x32), checkpoint_id=CKPT)
    # Centres from a 100,000-point sample (k-means of 2-D points on every point would take
    # minutes here), then every point assigned to its nearest centre.
    km = faiss.Kmeans(2, K, niter=20, seed=seed, max_points_per_centroid=100)
    km.train(x32)
    dist, cl = cKDTree(km.centroids).query(x32)
    cl = cl.astype(np.int64)
    ws.write(
        "clusters",
        pa.table({"image_id": pa.array(ids, pa.string()), "cluster": cl, "distance": dist}),
        checkpoint_id=CKPT,
        k=K,
    )
    order = np.argsort(cl, kind="stable")
    starts = np.searchsorted(cl[order], np.arange(K + 1))
    rows = []
    for c in range(K):
        members = f["label"][order[starts[c] : starts[c + 1]]]
        pur, top, share = purity(members, n_classes) if len(members) else (None, None, None)
        rows.append(
            {"cluster": c, "size": len(members), "purity": pur, "top_label": top, "top_label_share": share}
        )
    ws.write(
        "cluster_metrics",
        pa.Table.from_pylist(rows, schema=schema.arrow_schema("cluster_metrics", partition=False)),
        checkpoint_id=CKPT,
        k=K,
    )
    # The page needs the checkpoint's row: ID (TwoNN) and CL of a 10,000-image sample.
    sample = np.random.default_rng([seed, 2]).choice(n, min(n, 10_000), replace=False)
    dim, dups = twonn(xy[sample])
    cl_score = cluster_learnability(x32[sample], cl[sample], random_state=seed)
    row = {"cl": cl_score, "id": dim, "n_images": n, "n_duplicates": dups}
    metric_fields = schema.arrow_schema("checkpoint_metrics", partition=False)
    ws.write(
        "checkpoint_metrics",
        pa.Table.from_pylist([row], schema=metric_fields),  # the others missing
        checkpoint_id=CKPT,
        k=K,
    )
    print(f"built {out} ({n:,} images) in {time.perf_counter() - t:.1f} s", flush=True)


def measure_page(workspace: Path, query: dict, repeat: int) -> dict:
    cold, warm = [], []
    for _ in range(repeat):
        at = open_page(workspace, "pages/clusters.py", query, timeout=900)
        cold.append(run_once(at))
        warm.append(run_once(at))
    errors = [e.message for e in at.exception] + [e.value for e in at.error]
    kinds = [
        json.loads(s)["data"][0]["type"]
        for s in (c.proto.spec for c in at.get("plotly_chart"))
        if '"UMAP 1"' in s
    ]
    return {
        "cold_s": statistics.median(r[0] for r in cold),
        "warm_s": statistics.median(r[0] for r in warm),
        "cold_cpu_s": statistics.median(r[1] for r in cold),
        "warm_cpu_s": statistics.median(r[1] for r in warm),
        "drawn": kinds[0] if kinds else None,
        "selected": {m.label: m.value for m in at.metric}.get("images selected"),
        **sent(at),
        "errors": errors[:3],
    }


def timed(fn, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", default="/tmp/conceptlens-million", help="benchmark workspace (built if missing)"
    )
    ap.add_argument("--images", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="write the numbers here")
    args = ap.parse_args()
    os.chdir(ROOT)
    out = Path(args.out).resolve()
    build(out, args.images)

    from conceptlens.db import WorkspaceDB
    from conceptlens.views import clusters as C
    from conceptlens.views import projection_window as W

    db = WorkspaceDB(out)
    whole, n = W.whole_viewport(db, CKPT, "umap")
    x0, x1, y0, y1 = whole
    # A zoomed-in view: around the densest bin, narrowed until at most half the page's
    # limit of points is in it (what a few clicks on the overview lead to).
    bins = W.binned(db, CKPT, K, whole, "umap", W.BINS)
    top = bins.sort_values("count").iloc[-1]
    factor = 2.0
    while W.count_in(db, CKPT, zoom := W.zoom_at(whole, top["x"], top["y"], factor)) > W.MAX_POINTS // 2:
        factor *= 1.25
    box = f"box:{x0:.6g},{(x0 + x1) / 2:.6g},{y0:.6g},{(y0 + y1) / 2:.6g}"
    t = np.linspace(0, 2 * np.pi, 60, endpoint=False)
    cx, cy, r = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 4
    lasso = C.region_text("lasso", cx + r * np.cos(t) * (1 + 0.3 * np.cos(5 * t)), cy + r * np.sin(t))
    views = {
        "extent + count": lambda: W.whole_viewport(db, CKPT, "umap"),
        "overview (binned, 160x160)": lambda: W.window(db, CKPT, K, viewport=None),
        "zoomed points": lambda: W.window(db, CKPT, K, viewport=zoom),
        "box ids (whole table)": lambda: C.region_images(db, CKPT, K, box),
        "lasso ids (whole table)": lambda: C.region_images(db, CKPT, K, lasso),
        "lasso ids in DuckDB alone": lambda: W.region_images(db, CKPT, K, lasso),
        "lasso labels in DuckDB": lambda: W.region_labels(db, CKPT, K, lasso),
        "lasso, one page in DuckDB": lambda: W.region_images(db, CKPT, K, lasso, offset=48, limit=48),
    }
    print(f"{out}: {n:,} points; median of {args.repeat}")
    results = {"workspace": str(out), "points": n, "views": {}, "page": {}}
    for name, fn in views.items():
        s = timed(fn, args.repeat)
        rows = fn()
        size = len(rows[0]) if isinstance(rows, tuple) else len(rows)
        results["views"][name] = {"seconds": s, "rows": size}
        print(f"  view {name:<28s} {s:7.3f} s  ({size:,} rows)", flush=True)
    pages = {
        "overview": {"ds": DATASET, "ckpt": CKPT},
        "zoomed": {"ds": DATASET, "ckpt": CKPT, "view": W.viewport_text(zoom)},
        "box selection": {"ds": DATASET, "ckpt": CKPT, "region": box, "sel": "region"},
    }
    print(
        f"  {'page run':<20s} {'cold s':>7s} {'warm s':>7s} {'UMAP JSON':>10s} {'all charts':>10s} "
        f"{'all msgs':>10s}"
    )
    for name, q in pages.items():
        r = measure_page(out, q, args.repeat)
        results["page"][name] = r
        print(
            f"  {name:<20s} {r['cold_s']:7.2f} {r['warm_s']:7.2f} "
            f"({r['cold_cpu_s']:.2f} / {r['warm_cpu_s']:.2f} cpu) "
            f"{r['umap_bytes'] / 1e6:8.2f}MB "
            f"{r['charts_bytes'] / 1e6:8.2f}MB {r['elements_bytes'] / 1e6:8.2f}MB  drawn: {r['drawn']}"
            + (f", selected {r['selected']}" if name == "box selection" else "")
            + (f"   errors: {r['errors']}" if r["errors"] else ""),
            flush=True,
        )
    results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"peak RSS of this process {results['peak_rss_mb']:.0f} MB")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
