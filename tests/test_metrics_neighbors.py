"""conceptlens/metrics/neighbors.py: the BLAS thread count and neighbours computed in blocks, against
brute force."""

from __future__ import annotations

import numpy as np
import pytest


# ---- neighbours: the BLAS thread count ---------------------------------------------------------
def test_blas_threads_counts_blas_pools_only():
    """`blas_threads` is what BLAS may use: an OpenMP pool allowed more threads (sklearn's,
    torch's) does not count. Catches the user_api filter dropped."""
    import sklearn.cluster  # noqa: F401  (loads an OpenMP runtime)
    from threadpoolctl import threadpool_info, threadpool_limits

    from conceptlens.metrics.neighbors import blas_threads

    if not any(p["user_api"] == "openmp" for p in threadpool_info()):
        pytest.skip("no OpenMP runtime loaded here")
    with threadpool_limits(limits=1, user_api="blas"), threadpool_limits(limits=3, user_api="openmp"):
        blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
        if any(p.get("threading_layer") == "openmp" for p in blas):
            # Once a BLAS that threads through OpenMP is loaded (the full suite's order), its
            # own pool follows the OpenMP limit: BLAS may then really use 3 threads.
            pytest.skip("a BLAS here threads through OpenMP")
        assert blas_threads() == 1


def test_blas_threads_follows_a_limit_set_after_its_first_call():
    """The libraries are found once, their thread counts asked each time: a count cached
    from the first call would run a `--threads 1` task's blocks on every core."""
    from threadpoolctl import threadpool_limits

    from conceptlens.metrics.neighbors import blas_threads

    before = blas_threads()
    if before == 1:
        pytest.skip("BLAS has one thread here already")
    with threadpool_limits(limits=1, user_api="blas"):
        assert blas_threads() == 1
    assert blas_threads() == before


@pytest.mark.parametrize("chunk", [7, 16, 1 << 22])
def test_pair_distances_are_those_of_every_pair_in_every_block(chunk):
    """Squared distances of candidate pairs, computed in memory-bounded blocks (`chunk`
    values at a time), are scipy's for every pair, whatever the block size. Catches the
    first block's distances reused for the others."""
    from scipy.spatial.distance import cdist

    from conceptlens.metrics.neighbors import _pairwise_sq_exact

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4)).astype(np.float32)
    rows, cols = rng.integers(0, 30, 50), rng.integers(0, 30, 50)
    want = cdist(X.astype(np.float64), X.astype(np.float64), "sqeuclidean")[rows, cols]
    assert _pairwise_sq_exact(X, rows, cols, chunk=chunk) == pytest.approx(want, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(("block", "chunk", "threads"), [(4, 4, 1), (5, 11, 1), (3, 6, 2), (64, 64, 1)])
def test_top_self_lists_are_the_brute_force_best_of_every_tile(block, chunk, threads):
    """The one-pass lists of `top_self`, built from row blocks against column chunks, hold
    each row's m best other rows by X_i . X_j - bias_j, as a brute-force sort of the full
    score matrix finds them. Catches tiles skipped or reused (a chunk loop that never
    runs is hidden downstream by the exact fallback search, so it is checked here)."""
    from conceptlens.metrics.neighbors import top_self

    rng = np.random.default_rng(1)
    X = rng.normal(size=(23, 3)).astype(np.float32)
    bias = (np.einsum("ij,ij->i", X, X) / 2).astype(np.float32)
    m = 4
    S = X @ X.T - bias[None, :]
    np.fill_diagonal(S, -np.inf)
    want = -np.sort(-S, axis=1)[:, :m]
    scores, idx = top_self(X, m, bias=bias, block_size=block, chunk=chunk, threads=threads)
    assert scores == pytest.approx(want, rel=1e-5, abs=1e-5)
    assert np.take_along_axis(S, idx, axis=1) == pytest.approx(scores, rel=1e-5, abs=1e-5)
    assert (idx != np.arange(23)[:, None]).all()


# ---- values computed another way ----------------------------------------------------------------
def test_exact_euclidean_neighbours_are_right_past_the_first_block_of_pairs():
    """The candidate pairs are measured again in float64 in blocks of 4M / d pairs (1,024 at
    d = 4,096); 500 rows x their candidates are several blocks. Bug caught: every block
    measured as the first one (the first reused for the rest), which gave the later rows the
    first rows' distances. Checked against scikit-learn's brute-force neighbours in float64."""
    from sklearn.neighbors import NearestNeighbors

    from conceptlens import metrics as M

    rng = np.random.default_rng(7)
    centres = rng.normal(size=(10, 4096))
    X = M.l2_normalize(
        (centres[rng.integers(0, 10, 500)] + 0.6 * rng.normal(size=(500, 4096))).astype(np.float32)
    )
    rows, d, j = M.SelfNeighbours(X, m=16).euclidean(np.ones(len(X), bool), k=5)
    X64 = X.astype(np.float64)
    rd, rj = NearestNeighbors(n_neighbors=6, algorithm="brute").fit(X64).kneighbors(X64)
    assert np.array_equal(rows, np.arange(500))
    np.testing.assert_array_equal(j, rj[:, 1:])
    np.testing.assert_allclose(d, rd[:, 1:], rtol=1e-9)
