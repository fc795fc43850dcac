"""Time the cluster analysis on one large checkpoint (default 50,000 x 2,048 float32).

Every metric is timed separately and printed next to the time of one blocked
N x N x d float32 matrix product: the floor for any exact all-pairs
neighbour search. scikit-dimension's TwoNN is timed on the same data.
UMAP and describability are not included (they need no neighbours of ours).

    nice .venv/bin/python bench/clusters.py [--n 50000] [--dim 2048] [--no-skdim]
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conceptlens import metrics as M  # noqa: E402
from conceptlens.metrics.neighbors import DEFAULT_BLOCK  # noqa: E402


def clustered(n: int, d: int, n_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian blobs around random centres, built in chunks to keep float64 copies small."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, d)).astype(np.float32)
    y = rng.integers(0, n_classes, n)
    X = np.empty((n, d), np.float32)
    for s in range(0, n, 5000):
        e = min(n, s + 5000)
        X[s:e] = centres[y[s:e]] + 0.9 * rng.standard_normal((e - s, d), dtype=np.float32)
    return X, y


def blocked_product(X: np.ndarray, block: int = DEFAULT_BLOCK) -> float:
    """One N x N x d product in query blocks (the result of each block is discarded)."""
    t = time.perf_counter()
    acc = 0.0
    for s in range(0, len(X), block):
        acc += float((X[s : s + block] @ X.T)[0, 0])
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=2_048)
    ap.add_argument("--classes", type=int, default=100)
    ap.add_argument("--n-init", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-skdim", action="store_true")
    args = ap.parse_args()
    times: dict[str, float] = {}

    def timed(name, f, *a, **kw):
        t = time.perf_counter()
        out = f(*a, **kw)
        times[name] = time.perf_counter() - t
        print(f"{name:<34s} {times[name]:9.1f} s   -> {summary(out)}", flush=True)
        return out

    def summary(out):
        if isinstance(out, float):
            return f"{out:.4f}"
        if isinstance(out, tuple) and all(isinstance(v, (int, float)) for v in out):
            return ", ".join(f"{v:.4g}" for v in out)
        return type(out).__name__

    print(f"data: {args.n} x {args.dim} float32, {args.classes} classes; {np.__version__=}", flush=True)
    X, y = timed("generate data", clustered, args.n, args.dim, args.classes, args.seed)
    Xn = timed("l2 normalise", M.l2_normalize, X)
    del X
    k = int(round(math.sqrt(args.n)))
    rng = np.random.default_rng(args.seed)
    test = rng.random(args.n) < 0.2
    train = ~test

    ref = timed("N x N x d product (floor)", blocked_product, Xn)

    def kmeans():
        from sklearn.cluster import KMeans

        km = KMeans(n_clusters=k, n_init=args.n_init, random_state=args.seed).fit(Xn)
        return km.labels_.astype(np.int64)

    labels = timed(f"k-means (k={k}, n_init={args.n_init})", kmeans)

    def purities():
        K = len(np.unique(y))
        return float(np.mean([M.purity(y[labels == c], K)[0] for c in range(k)]))

    timed("purity (all clusters)", purities)
    timed("aNMI", M.anmi, y, labels)

    def two_afc():
        A = np.eye(args.classes, dtype=np.float32)[y]  # annotator: one-hot ground truth
        hard = M.hard_negative_clusters(Xn, labels)
        accs = []
        for kind in ("random", "hard"):
            tr = M.make_trials(labels, 20, 10, kind, hard, args.seed)
            accs.append(float(M.annotate(tr, A, args.seed).mean()))
        return tuple(accs)

    timed("2AFC coherence (random, hard)", two_afc)
    timed("knn_acc (weighted 20-NN, train -> test)", M.knn_accuracy, Xn[train], y[train], Xn[test], y[test])
    timed("knn1_acc (1-NN, train -> test)", M.knn_accuracy, Xn[train], y[train], Xn[test], y[test], 1)
    timed("CL prequential (10 chunks, 3 orders)", M.cluster_learnability, Xn, labels, 10, 3, args.seed)
    timed(
        "CL held-out (k-means on train)",
        M.cluster_learnability_heldout,
        Xn[train],
        Xn[test],
        k,
        args.n_init,
        args.seed,
    )
    timed("TwoNN (ours, exact)", M.twonn, Xn)

    def eq4():
        E = M.l2_normalize(rng.normal(size=(args.n, 384)).astype(np.float32))
        return float(len(M.class_captions(E, labels)))

    timed("Eq. 4 captions (384-d embeddings)", eq4)

    def clid():
        cl = rng.random(20)
        id_ = rng.random(20) * 30
        acc = 0.5 * cl + 0.01 * id_
        M.clid(cl, id_)
        M.wclid(cl, id_, acc)
        return M.correlations(M.clid(cl, id_), acc)["pearson"]

    timed("CLID / W-CLID / correlations (20 ckpts)", clid)

    if not args.no_skdim:
        import skdim

        def sk():
            return float(skdim.id.TwoNN(discard_fraction=0.1).fit(Xn).dimension_)

        timed("TwoNN (scikit-dimension)", sk)

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"\npeak RSS {peak:.1f} GB")
    print(f"\n{'metric':<40s} {'seconds':>9s} {'x product':>10s}")
    for name, t in times.items():
        print(f"{name:<40s} {t:9.1f} {t / ref:10.2f}")


if __name__ == "__main__":
    main()
