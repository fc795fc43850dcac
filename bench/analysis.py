"""Analysis seconds of one checkpoint against the floor, measured in the same run.

The floor is one exact k-nearest-neighbour pass over the same data: the blocked
N x N x d float32 product X X^T (1,024 query rows at a time). The analyses are
`clustering` and `cluster_metrics` (k-means with its restarts, purity, 2AFC coherence,
aNMI, kNN accuracies, prequential and held-out CL, TwoNN) of one checkpoint of a
`conceptlens demo scale` workspace, run through the runner as the CLI runs them.
Wall and CPU seconds (all threads) are both reported: the machine may be shared.

    nice -n 19 .venv/bin/python bench/analysis.py --images 50000 --dim 2048 \\
        [--workspace /tmp/scale-1x2048] [--n-init 3] [--repeat 3] [--out bench-analysis.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BLOCK = 1024


class Clock:
    """Wall and CPU seconds per named phase (wrapped functions; nested phases overlap)."""

    def __init__(self):
        self.wall, self.cpu, self.calls = defaultdict(float), defaultdict(float), defaultdict(int)

    def wrap(self, owner, attr: str, name: str) -> None:
        f = getattr(owner, attr)

        def timed(*a, **kw):
            t, c = time.perf_counter(), time.process_time()
            try:
                return f(*a, **kw)
            finally:
                self.wall[name] += time.perf_counter() - t
                self.cpu[name] += time.process_time() - c
                self.calls[name] += 1

        if isinstance(owner, type) or not hasattr(owner, "__dataclass_fields__"):
            setattr(owner, attr, timed)
        else:
            object.__setattr__(owner, attr, timed)  # the analyses are frozen dataclasses


def floor(X: np.ndarray) -> tuple[float, float]:
    """(wall, cpu) seconds of one blocked X X^T (each block's result is discarded)."""
    t, c = time.perf_counter(), time.process_time()
    acc = 0.0
    for s in range(0, len(X), BLOCK):
        acc += float((X[s : s + BLOCK] @ X.T)[0, 0])
    return time.perf_counter() - t, time.process_time() - c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=2_048)
    ap.add_argument("--workspace", help="reuse (or create) this 1-checkpoint scale workspace")
    ap.add_argument("--kmeans", default="auto", help="k-means engine (auto, faiss, sklearn)")
    ap.add_argument("--n-init", type=int, default=3, help="k-means restarts (the clustering's n_init)")
    ap.add_argument("--repeat", type=int, default=3, help="runs, one process each, reported by median")
    ap.add_argument("--out", help="write the numbers as JSON here")
    args = ap.parse_args()
    if args.repeat > 1:
        return repeat(args)

    from conceptlens import metrics as M
    from conceptlens.analysis import by_name, runner
    from conceptlens.analysis.common import Context
    from conceptlens.demo.scale import build_scale
    from conceptlens.workspace import Workspace

    # The k-means engines' first imports (faiss, scikit-learn: about a CPU second) happen
    # once per process, before the clock, as numpy's before the floor's: at 5,000 images
    # they would be most of a k-means.
    t, c = time.perf_counter(), time.process_time()
    from conceptlens.metrics.kmeans import faiss_available

    faiss_available()
    import sklearn.cluster  # noqa: F401
    import threadpoolctl  # noqa: F401

    imports = (time.perf_counter() - t, time.process_time() - c)
    print(f"imports (faiss, scikit-learn) wall {imports[0]:.1f} s   cpu {imports[1]:.1f} s, not counted")

    root = Path(args.workspace or f"/tmp/conceptlens-scale-{args.images}x1x{args.dim}")
    if not (root / "workspace.json").exists():
        t = time.perf_counter()
        build_scale(root, n_images=args.images, n_checkpoints=1, dim=args.dim, analyses="none")
        print(f"generated {root} in {time.perf_counter() - t:.0f} s", flush=True)
    ws = Workspace(root)
    cid = ws.partitions("features")[0]["checkpoint_id"]

    _, Xn = Context(ws, progress=False).normalized(cid)
    print(f"{cid}: {Xn.shape[0]} x {Xn.shape[1]} float32", flush=True)
    f_wall, f_cpu = floor(Xn)
    print(f"floor (blocked X X^T)      wall {f_wall:7.1f} s   cpu {f_cpu:7.1f} s", flush=True)
    del Xn

    clock = Clock()
    import conceptlens.analysis.cluster_metrics as cm
    import conceptlens.analysis.clustering as cl

    reg = by_name()
    clock.wrap(reg["clustering"], "run", "analysis clustering")
    clock.wrap(reg["cluster_metrics"], "run", "analysis cluster_metrics")
    clock.wrap(Context, "read_features", "  read features")
    clock.wrap(cl, "kmeans", "  k-means (all restarts)")
    clock.wrap(M.SelfNeighbours, "__init__", "  shared neighbour pass")
    for fn in (
        "knn_accuracy_shared",
        "twonn_shared",
        "cluster_learnability_shared",
        "cluster_learnability_heldout_shared",
        "hard_negative_clusters",
        "make_trials",
        "annotate",
        "anmi",
        "purity",
    ):
        clock.wrap(M, fn, f"  {fn}")
    clock.wrap(cm, "annotator_features", "  annotator features")
    import conceptlens.metrics.learnability as learn

    clock.wrap(learn, "heldout_clusters", "  k-means on the train split")

    t, c = time.perf_counter(), time.process_time()
    ctx = runner.run(
        root,
        ["clustering", "cluster_metrics"],
        {"kmeans": args.kmeans, "n_init": args.n_init},
        checkpoint=cid,
        force=True,
        progress_bars=False,
        with_dependencies=False,
    )
    a_wall, a_cpu = time.perf_counter() - t, time.process_time() - c
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20

    cmx = ws.read("checkpoint_metrics", checkpoint_id=cid, k=ws.partitions("clusters")[0]["k"]).to_pylist()[0]
    print(f"\n{'phase':<44s} {'wall s':>8s} {'cpu s':>8s} {'cpu/floor':>10s} calls")
    for name in clock.wall:
        w, cp = clock.wall[name], clock.cpu[name]
        print(f"{name:<44s} {w:8.1f} {cp:8.1f} {cp / f_cpu:10.3f} {clock.calls[name]:5d}")
    print(f"{'all (clustering + cluster_metrics)':<44s} {a_wall:8.1f} {a_cpu:8.1f} {a_cpu / f_cpu:10.3f}")
    ratio = f"{a_cpu / f_cpu:.2f} (CPU), {a_wall / f_wall:.2f} (wall)"
    print(f"\nratio to the floor: {ratio}; peak RSS {peak:.1f} GB")
    metrics = {k: cmx[k] for k in ("k", "anmi", "knn_acc", "knn1_acc", "cl", "cl_heldout", "id")}
    print("metrics:", metrics)
    if ctx.notes:
        print("notes:", *ctx.notes, sep="\n  ")
    if args.out:
        run = {
            "floor": {"wall": f_wall, "cpu": f_cpu},
            "analysis": {"wall": a_wall, "cpu": a_cpu},
            "ratio_wall": a_wall / f_wall,
            "ratio_cpu": a_cpu / f_cpu,
            "phases": {
                n: {"wall": w, "cpu": clock.cpu[n], "calls": clock.calls[n]} for n, w in clock.wall.items()
            },
            "loadavg_end": list(os.getloadavg()),
            "peak_rss_gb": peak,
        }
        out = {
            "images": args.images,
            "n_init": args.n_init,
            "dim": args.dim,
            "imports_not_counted": {"wall": imports[0], "cpu": imports[1]},
            "runs": [run],
            "metrics": metrics,
        }
        Path(args.out).write_text(json.dumps(out, indent=1, default=float))


def repeat(args) -> None:
    """`--repeat` runs, each in a process of its own (the floor, then the analyses, as the
    CLI runs them once per process: repeated in one process they slowed by 10 % a run, its
    heap grown to 1.9 GB), and their medians. The machine's speed drifts (this virtual
    machine's by 10 % between runs a minute apart): each ratio is of a floor and analyses
    measured next to each other."""
    import subprocess
    import tempfile

    runs, last = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeat):
            out = Path(tmp) / f"run-{r}.json"
            cmd = [sys.executable, __file__, "--images", str(args.images), "--dim", str(args.dim)]
            cmd += ["--kmeans", args.kmeans, "--n-init", str(args.n_init), "--repeat", "1", "--out", str(out)]
            cmd += ["--workspace", args.workspace] if args.workspace else []
            subprocess.run(cmd, check=True)
            last = json.loads(out.read_text())
            runs += last["runs"]
    walls = [x["ratio_wall"] for x in runs]
    cpus = [x["ratio_cpu"] for x in runs]
    print(f"\n{args.images} images x {args.dim}, {len(runs)} processes:")
    for i, x in enumerate(runs, 1):
        f, a = x["floor"], x["analysis"]
        print(
            f"run {i}: floor {f['wall']:.1f} s wall ({f['cpu']:.1f} CPU s), analyses {a['wall']:.1f} s "
            f"({a['cpu']:.1f}): {x['ratio_wall']:.2f}x wall, {x['ratio_cpu']:.2f}x CPU"
        )
    print(
        f"ratio to the floor, median of {len(runs)}: {float(np.median(walls)):.2f}x wall "
        f"({min(walls):.2f}-{max(walls):.2f}), {float(np.median(cpus)):.2f}x CPU "
        f"({min(cpus):.2f}-{max(cpus):.2f})"
    )
    if args.out:
        last.update(
            runs=runs,
            ratio_wall_median=float(np.median(walls)),
            ratio_cpu_median=float(np.median(cpus)),
        )
        Path(args.out).write_text(json.dumps(last, indent=1, default=float))


if __name__ == "__main__":
    main()
