"""Row-wise work in blocks on threads (metrics.neighbors.by_rows / by_spans) gives the bits of
the whole-matrix computation it replaced (issue 25: the whole-matrix temporaries cost more
than the arithmetic)."""

from __future__ import annotations

import numpy as np
import pytest

from conceptlens.analysis.clustering import kmeans
from conceptlens.metrics.neighbors import ROW_BLOCK, as_matrix, by_rows, l2_normalize


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [5, ROW_BLOCK, 3 * ROW_BLOCK + 17])
def test_unit_rows_are_the_whole_matrix_division(n, threads):
    rng = np.random.default_rng(n)
    X = (rng.normal(size=(n, 300)) * rng.uniform(0, 50, size=(n, 1))).astype(np.float32)
    X[n // 2] = 0  # an all-zero row stays zero
    whole = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
    got = l2_normalize(X)
    assert got.dtype == np.float32 and np.array_equal(got, whole)
    # float64 rows keep their dtype, in every block
    X64 = X.astype(np.float64)
    got = by_rows(lambda B: B / np.linalg.norm(B, axis=1, keepdims=True).clip(1e-12), X64, threads=threads)
    assert got.dtype == np.float64
    assert np.array_equal(got, X64 / np.linalg.norm(X64, axis=1, keepdims=True).clip(1e-12))


def test_every_block_is_checked_for_nan():
    X = np.ones((3 * ROW_BLOCK + 5, 4), np.float32)
    X[-1, 2] = np.inf  # in the last, short block
    with pytest.raises(ValueError, match="features contains NaN or infinite values"):
        as_matrix(X, "features")
    with pytest.raises(ValueError, match="X contains NaN or infinite values"):
        l2_normalize(X)  # checked as it is normalised, block by block
    X[-1, 2], X[ROW_BLOCK + 3, 0] = 1.0, np.nan
    with pytest.raises(ValueError, match="X contains NaN or infinite values"):
        l2_normalize(X)


def test_distances_to_the_centres_are_the_whole_matrix_norm():
    rng = np.random.default_rng(3)
    X = l2_normalize(rng.normal(size=(2 * ROW_BLOCK + 300, 40)))
    labels, dist = kmeans(X, 6, n_init=1, seed=0, engine="sklearn")
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    with threadpool_limits(2):
        km = KMeans(n_clusters=6, n_init=1, random_state=0).fit(X)
    np.testing.assert_array_equal(labels, km.labels_)
    centres = km.cluster_centers_.astype(np.float32)
    assert dist.dtype == np.float32
    np.testing.assert_array_equal(dist, np.linalg.norm(X - centres[labels], axis=1))
