"""What cluster_metrics' bootstrap intervals add to a 50,000-image checkpoint.

A synthetic checkpoint (Gaussian clusters, `--images` x `--dim` float32, labels = the
generating cluster, a 4:1 train/test split, k-means-like labels = the labels with 10%
flipped) goes through the steps cluster_metrics shares per checkpoint: the one exact
neighbour pass (`SelfNeighbours`), the weighted 20-NN flags, CL's per-image counts and
the TwoNN ratios. Then, with `--bootstrap` resamples each, the four intervals the analysis
stores: kNN accuracy, CL, ID and every cluster's purity. Wall and CPU seconds of each.

    nice -n 10 .venv/bin/python bench/intervals.py --images 50000 --dim 512 --k 100 --bootstrap 1000
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def timed(results: dict, name: str, f, *a, **kw):
    t, c = time.perf_counter(), time.process_time()
    out = f(*a, **kw)
    results[name] = {"wall_s": round(time.perf_counter() - t, 3), "cpu_s": round(time.process_time() - c, 3)}
    print(
        f"{name:>28}: {results[name]['wall_s']:8.2f} s wall, {results[name]['cpu_s']:8.2f} s cpu", flush=True
    )
    return out


def main(argv=None) -> dict:
    from conceptlens import metrics as M
    from conceptlens.analysis.cluster_metrics import NEIGHBOURS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--classes", type=int, default=100)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    n, d = args.images, args.dim
    y = rng.integers(0, args.classes, n)
    centres = rng.normal(size=(args.classes, d)).astype(np.float32)
    X = centres[y] + 1.5 * rng.normal(size=(n, d)).astype(np.float32)
    Xn = M.l2_normalize(X).astype(np.float32)
    del X
    labels = np.where(rng.random(n) < 0.1, rng.integers(0, args.k, n), y % args.k)
    test = rng.random(n) < 0.2
    res: dict = {"images": n, "dim": d, "k": args.k, "bootstrap": args.bootstrap}

    print("-- the steps cluster_metrics already takes", flush=True)
    nb = timed(res, "neighbour pass", M.SelfNeighbours, Xn, NEIGHBOURS)
    flags = timed(res, "kNN 20-NN flags", M.knn_correct_shared, nb, ~test, y, test)
    cl, correct, pred = timed(
        res, "CL (3 orders) + counts", M.cluster_learnability_counts, nb, labels, 10, 3, 0
    )
    mu, _ = timed(res, "TwoNN ratios", M.twonn_ratios_shared, nb)
    id_ = M.twonn_fit(mu)
    purity = []

    def purities():
        for c in range(args.k):
            purity.append(M.purity(y[labels == c], args.classes)[0])

    timed(res, "purity of every cluster", purities)

    B = args.bootstrap
    print(f"-- the intervals, {B} resamples each", flush=True)
    res["knn_acc_ci"] = timed(res, "kNN acc. interval", M.mean_interval, flags, B, M.rng_for(0, "knn_acc"))
    res["cl_ci"] = timed(res, "CL interval", M.ratio_interval, correct, pred, B, M.rng_for(0, "cl"), cl)
    res["id_ci"] = timed(res, "ID interval", M.twonn_interval, mu, id_, B, M.rng_for(0, "id"))

    def purity_intervals():
        r = M.rng_for(0, "purity")
        return [
            M.purity_interval(y[labels == c], args.classes, p, B, r)
            for c, p in enumerate(purity)
            if not math.isnan(p)
        ]

    timed(res, "purity intervals (all)", purity_intervals)
    before = sum(
        res[s]["wall_s"]
        for s in (
            "neighbour pass",
            "kNN 20-NN flags",
            "CL (3 orders) + counts",
            "TwoNN ratios",
            "purity of every cluster",
        )
    )
    added = sum(
        res[s]["wall_s"]
        for s in ("kNN acc. interval", "CL interval", "ID interval", "purity intervals (all)")
    )
    res["added_wall_s"], res["shared_steps_wall_s"] = round(added, 2), round(before, 2)
    print(
        f"intervals add {added:.2f} s to {before:.2f} s of the shared steps (k-means, held-out CL,",
        flush=True,
    )
    print("coherence and the file writes come on top of both)", flush=True)
    print(
        f"kNN acc {flags.mean():.3f} {res['knn_acc_ci']}, CL {cl:.3f} {res['cl_ci']}, "
        f"ID {id_:.2f} {res['id_ci']}"
    )
    if args.out:
        args.out.write_text(json.dumps(res, indent=2))
    return res


if __name__ == "__main__":
    main()
