"""k-means with fixed restarts: faiss's at every size (scikit-learn's when faiss is absent).

faiss runs the same Lloyd iterations as scikit-learn, ~15x faster at 50,000 x 2,048,
from a k-means++ start (scikit-learn's, on a sample); it stops after a fixed number of
iterations where scikit-learn iterates to convergence, and its restarts are compared
after a few iterations, the best one alone going on. By default faiss trains on a
sample of at most 256 points per centroid: here every point is used.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from .. import rng as rngs
from .neighbors import by_spans

ENGINES = ("auto", "faiss", "sklearn")
# `auto` is faiss at every number of points (when installed), scikit-learn only without it.
# Until 2026-11 `auto` took scikit-learn below 20,000 points: three k-means++ restarts, each
# iterated to convergence, so that held-out CL's k-means on the 16,000-row train split of a
# 20,000-image checkpoint cost 8.99x the floor by wall time against 1.39x at 50,000 (issue
# 25). One path now: the cost is FAISS_SCREEN iterations per restart plus the rest of
# FAISS_ITER for the best, at any size. Where scikit-learn's answer is the best of its
# restarts and the starts are told apart after FAISS_SCREEN iterations (separated
# clusters), both give the same partition (tests/test_kmeans_one_path.py). The demo's
# stored clusterings were made by scikit-learn under `auto`: still valid k-means answers of
# the same options, they are not made due (docs/analysis.md, "k-means").
# scikit-learn sums each cluster's points in chunks, one per OpenMP thread: another thread
# count can move a near-tied point (9 of the demo's 36 clusterings differ between 1 and 2
# threads). A fixed count makes a clustering the same on every machine and engine; the
# demo's were made with 2. (faiss's k-means gave the same output on 1 and 2 threads.)
SKLEARN_THREADS = 2
# Lloyd iterations of each faiss restart; scikit-learn iterates to convergence. On the
# 50,000 x 2,048 scale checkpoint (k = 224) the objective after 15 is 0.07 % above that
# after 25 and 0.16 % above that after 40, for 60 % of the cost of 25 (faiss's default).
FAISS_ITER = 15
# Iterations after which restarts are compared: on that checkpoint the start that led after
# 5 iterations led after 15 too, and the clustering was the same as the best of three full
# runs (objective 11,335.18 both), for 58 % of the Lloyd iterations' time.
FAISS_SCREEN = 5
# The k-means++ start of a faiss restart: points per cluster it is drawn from, and the
# dimension of the random projection its distances are measured in (Johnson-Lindenstrauss).
INIT_PER_CLUSTER = 40
INIT_DIM = 128


def kmeans_plusplus_f32(low: np.ndarray, k: int, rng: np.random.RandomState) -> np.ndarray:
    """The indices scikit-learn's `kmeans_plusplus(low, k, random_state=rng)` picks from
    float32 points (unit weights; 2 + log k candidates per step), bit for bit, with the
    same draws from `rng`, in about half its time.

    scikit-learn measures float32 points in float64 chunks it converts anew at every step
    (and their norms), then rounds the distances to float32; the points are converted and
    their norms taken once here, and each step's product is one (candidates x points)
    float64 product. The rest is scikit-learn's own arithmetic, in its order
    (tests/test_kmeans_seeding.py compares the picks)."""
    X = np.ascontiguousarray(low, dtype=np.float32)
    n = len(X)
    w = np.ones(n, np.float32)
    trials = 2 + int(np.log(k))
    X64 = X.astype(np.float64)
    sq = np.einsum("ij,ij->i", X64, X64)
    X64t = np.ascontiguousarray(X64.T)  # the product reads it in order: a third faster

    def squared(ids: np.ndarray) -> np.ndarray:
        d = -2 * (X64[ids] @ X64t)
        d += sq[ids][:, None]
        d += sq[None, :]
        d = d.astype(np.float32)
        np.maximum(d, 0, out=d)
        return d

    picked = np.full(k, -1, dtype=np.int64)
    picked[0] = rng.choice(n, p=w / w.sum())
    closest = squared(picked[:1])
    pot = closest @ w
    for c in range(1, k):
        cand = np.searchsorted(np.cumsum(w * closest), rng.uniform(size=trials) * pot)
        np.clip(cand, None, closest.size - 1, out=cand)
        d = squared(cand)
        np.minimum(closest, d, out=d)
        pots = d @ w.reshape(-1, 1)
        b = int(np.argmin(pots))
        pot, closest, picked[c] = pots[b], d[b], cand[b]
    return picked


def _faiss():
    # faiss's OpenMP threads otherwise spin between parallel regions: on a shared machine
    # they burn CPU time (4x the work itself at 10,000 x 256) that others could use. Read
    # once, when the OpenMP runtime loads.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import faiss

    return faiss


def faiss_available() -> bool:
    try:
        _faiss()
    except ImportError:
        return False
    return True


def pick_engine(engine: str, n: int) -> str:
    if engine not in ENGINES:
        raise ValueError(f"k-means engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "auto":
        # The same at every n: no row count where the cost or the method changes.
        return "faiss" if faiss_available() else "sklearn"
    if engine == "faiss" and not faiss_available():
        raise ValueError("k-means engine `faiss` needs faiss-cpu: pip install 'conceptlens[pipeline]'")
    return engine


@dataclass
class KMeansFit:
    labels: np.ndarray  # (n,) int64, the cluster of every training point
    centres: np.ndarray  # (k, d) float32
    model: object  # the fitted scikit-learn KMeans or faiss Kmeans

    def predict(self, Y) -> np.ndarray:
        """The nearest centre of every row of Y (Euclidean)."""
        Y = np.ascontiguousarray(Y, dtype=np.float32)
        if hasattr(self.model, "predict"):
            return self.model.predict(Y).astype(np.int64)
        return self.model.index.search(Y, 1)[1][:, 0].astype(np.int64)


def kmeans(X, k: int, n_init: int = 3, random_state: int = 0, engine: str = "auto") -> KMeansFit:
    """The best (lowest inertia) of `n_init` k-means runs on the rows of X (with faiss: the
    lowest objective at its last assignment)."""
    X = np.ascontiguousarray(X, dtype=np.float32)
    if X.ndim != 2 or len(X) == 0:
        raise ValueError(f"X must be a non-empty 2-D array, got shape {X.shape}")
    if not 2 <= k <= len(X):
        raise ValueError(f"k={k} must be in [2, {len(X)}] (number of points)")
    if n_init < 1:
        raise ValueError(f"n_init must be >= 1, got {n_init}")
    if pick_engine(engine, len(X)) == "sklearn":
        from sklearn.cluster import KMeans
        from threadpoolctl import threadpool_limits

        with threadpool_limits(SKLEARN_THREADS):
            km = KMeans(n_clusters=k, n_init=n_init, random_state=random_state).fit(X)
        return KMeansFit(km.labels_.astype(np.int64), km.cluster_centers_.astype(np.float32), km)
    faiss = _faiss()

    # A k-means++ start for each restart (faiss's own is uniformly random, which leaves
    # clusters split and merged): scikit-learn's seeding (kmeans_plusplus_f32) of a sample of INIT_PER_CLUSTER
    # points per cluster, its distances measured in an INIT_DIM-d random projection. Each
    # of its k steps reads every point it seeds from: on all points in full dimension it
    # costs more than the Lloyd iterations.
    from threadpoolctl import threadpool_limits

    rng = rngs.legacy_random_state(random_state)

    def lloyd(init, seed: int, niter: int):
        km = faiss.Kmeans(
            X.shape[1],
            k,
            niter=niter,
            seed=seed,
            # Never subsample (faiss's default keeps 256 points per centroid), never warn.
            max_points_per_centroid=math.ceil(len(X) / k) + 1,
            min_points_per_centroid=1,
            verbose=False,
        )
        km.train(X, init_centroids=np.ascontiguousarray(init, dtype=np.float32))
        return km

    # With restarts, each start runs FAISS_SCREEN iterations and only the best by objective
    # goes on to FAISS_ITER: the returned clustering is still FAISS_ITER Lloyd iterations
    # from one k-means++ start, for 25 iterations' cost instead of 3 x 15.
    screen = FAISS_ITER if n_init == 1 else min(FAISS_SCREEN, FAISS_ITER)
    best, best_obj, best_seed = None, np.inf, 0
    for _ in range(n_init):
        m = min(len(X), INIT_PER_CLUSTER * k)
        rows = np.arange(len(X)) if m == len(X) else np.sort(rng.choice(len(X), m, replace=False))
        if X.shape[1] > INIT_DIM:
            P = (rng.normal(size=(X.shape[1], INIT_DIM)) / np.sqrt(INIT_DIM)).astype(np.float32)
            # Projected a block of sampled rows at a time: the same bits as projecting the
            # whole sample, without a copy of it in fresh memory (46 MB at 20,000 x 2,048,
            # 0.1 s of page faults here).
            low = by_spans(lambda s, e, rows=rows, P=P: X[rows[s:e]] @ P, m, threads=1)
        else:
            low = X if m == len(X) else X[rows]
        # One BLAS thread: the seeding's k small products (2 + log k candidates against
        # INIT_PER_CLUSTER * k points each) gain nothing from threads, and on a loaded
        # machine each waits for a descheduled one: 20 s of wall for 5 s of CPU at 4,000 x
        # 2,048 (k = 71) on 2 busy cores, 0.7 s on one thread.
        with threadpool_limits(1):
            picked = kmeans_plusplus_f32(low, k, rng)
        seed = int(rng.randint(2**31 - 1))
        km = lloyd(X[rows[picked]], seed, screen)
        # The objective of the last assignment ranks the starts (the first of equals wins).
        if km.obj[-1] < best_obj:
            best, best_obj, best_seed = km, float(km.obj[-1]), seed
    if screen < FAISS_ITER:
        best = lloyd(best.centroids, best_seed, FAISS_ITER - screen)
    labels = best.index.search(X, 1)[1][:, 0]
    return KMeansFit(labels.astype(np.int64), np.asarray(best.centroids, np.float32), best)
