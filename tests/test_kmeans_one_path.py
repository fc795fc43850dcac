"""One k-means path at every size (issue 25, item 4; conceptlens/metrics/kmeans.py): the
engine `auto` picks does not change at a row count, its answer is scikit-learn's where
scikit-learn's best restart is known, and it is the same on every run with the seed."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from conceptlens import metrics as M

K = importlib.import_module("conceptlens.metrics.kmeans")  # the package exports a function of that name
faiss = pytest.importorskip("faiss")


def blobs(n: int, k: int, d: int, seed: int, spread: float = 0.05):
    """k well-separated clusters: every k-means++ start of scikit-learn ends in them."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % k
    rng.shuffle(y)
    centres = rng.normal(size=(k, d))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    return (centres[y] + spread * rng.normal(size=(n, d)) / np.sqrt(d)).astype(np.float32), y


@pytest.mark.parametrize("n, k, d, seed", [(300, 4, 8, 0), (600, 8, 32, 1), (1200, 16, 96, 2)])
def test_the_partition_is_scikit_learns_where_its_best_restart_is_known(n, k, d, seed):
    from sklearn.cluster import KMeans

    X, y = blobs(n, k, d, seed)
    # scikit-learn's answer (3 k-means++ restarts to convergence, as `auto` gave below
    # 20,000 rows) is the generating partition: each of its restarts finds it.
    runs = [KMeans(n_clusters=k, n_init=1, random_state=r).fit(X) for r in range(3)]
    assert all(adjusted_rand_score(y, r.labels_) == 1.0 for r in runs)
    today = KMeans(n_clusters=k, n_init=3, random_state=seed).fit(X)
    fit = M.kmeans(X, k, n_init=3, random_state=seed)  # engine auto
    assert fit.model.__class__ is faiss.Kmeans
    assert adjusted_rand_score(today.labels_, fit.labels) == 1.0
    # The centres are the clusters' means (every point used), as scikit-learn's are.
    order = [int(np.bincount(today.labels_[fit.labels == c]).argmax()) for c in range(k)]
    np.testing.assert_allclose(fit.centres, today.cluster_centers_[order], atol=1e-5)


@pytest.mark.parametrize("n", [50, 19_999, 20_001])
def test_auto_takes_the_same_engine_at_every_size(monkeypatch, n):
    """No row count where the method (and so the cost per point) changes: until issue 25
    `auto` ran scikit-learn below 20,000 rows and faiss from there."""
    calls = []
    Original = faiss.Kmeans

    class Spy(Original):
        def __init__(self, d, k, **kw):
            super().__init__(d, k, **kw)
            self.niter_ = kw["niter"]

        def train(self, x, **kw):
            calls.append((len(x), self.niter_))
            return super().train(x, **kw)

    monkeypatch.setattr(faiss, "Kmeans", Spy)
    X, _ = blobs(n, 3, 4, 0)
    assert K.pick_engine("auto", n) == "faiss"
    fit = M.kmeans(X, 3, n_init=3, random_state=0)
    # Every restart ran on all n points for FAISS_SCREEN iterations, the best on to FAISS_ITER.
    assert calls == [(n, K.FAISS_SCREEN)] * 3 + [(n, K.FAISS_ITER - K.FAISS_SCREEN)]
    assert len(fit.labels) == n
    # Held-out CL's train-split k-means (cluster_metrics) takes the same path.
    calls.clear()
    M.heldout_clusters(X[: n - n // 5], X[n - n // 5 :], 3, n_init=2, random_state=0)
    assert [c[0] for c in calls] == [n - n // 5] * 3


def test_auto_falls_back_to_scikit_learn_without_faiss(monkeypatch):
    def missing():
        raise ImportError("no faiss")

    monkeypatch.setattr(K, "_faiss", missing)
    X, y = blobs(200, 4, 8, 3)
    assert K.pick_engine("auto", 10**6) == "sklearn"
    fit = M.kmeans(X, 4, n_init=2, random_state=0)
    assert fit.model.__class__.__name__ == "KMeans" and adjusted_rand_score(y, fit.labels) == 1.0
    with pytest.raises(ValueError, match="faiss-cpu"):
        M.kmeans(X, 4, engine="faiss")


def test_the_answer_is_the_same_on_every_run_with_the_seed():
    # No clusters: the answer depends on the start, so a seed that did not reach faiss
    # (or an unseeded draw) would show as a different partition.
    X = np.random.default_rng(4).normal(size=(600, 16)).astype(np.float32)
    a, b = (M.kmeans(X, 8, n_init=3, random_state=5) for _ in range(2))
    assert np.array_equal(a.labels, b.labels) and np.array_equal(a.centres, b.centres)
    c = M.kmeans(X, 8, n_init=3, random_state=6)
    assert not np.array_equal(a.labels, c.labels)


def test_the_answer_does_not_depend_on_the_number_of_threads():
    """A unit's tables are the same on any machine and engine (a Ray task runs on one
    thread, the local engine on all: docs/scale.md, "Identical output"); scikit-learn's
    k-means needed a fixed thread count for that, the path `auto` now takes at every size
    must not."""
    from threadpoolctl import threadpool_limits

    X = np.random.default_rng(8).normal(size=(800, 16)).astype(np.float32)
    before = faiss.omp_get_max_threads()
    try:
        faiss.omp_set_num_threads(2)
        a = M.kmeans(X, 12, n_init=3, random_state=0)
        faiss.omp_set_num_threads(1)
        with threadpool_limits(1):
            b = M.kmeans(X, 12, n_init=3, random_state=0)
    finally:
        faiss.omp_set_num_threads(before)
    assert np.array_equal(a.labels, b.labels) and np.array_equal(a.centres, b.centres)
