"""conceptlens/metrics/similarity.py: distances in chunks and blocks, bootstraps and RSA, against
values computed another way."""

from __future__ import annotations

import numpy as np
import pytest

from conceptlens.metrics import similarity as S


# ---- metrics/similarity.py -----------------------------------------------------------------------
def test_query_distances_in_chunks_are_every_trials_own_distances():
    """Trials are measured in chunks: every chunk's rows, not the first chunk's again."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(25, 4))
    stim = np.stack([rng.choice(25, 6, replace=False) for _ in range(40)])
    stim[::5, -1] = -1  # padding
    want = np.array([[np.linalg.norm(X[r] - X[t[0]]) if r >= 0 else np.nan for r in t[1:]] for t in stim])
    for chunk in (7, 40, 2048):
        np.testing.assert_allclose(S.query_distances(X, stim, "l2", chunk=chunk), want, rtol=1e-12)


def test_l1_similarity_of_more_rows_than_a_block_is_minus_the_cityblock_distance():
    from scipy.spatial.distance import cdist

    X = np.random.default_rng(1).normal(size=(300, 3))
    np.testing.assert_allclose(
        S.similarity_matrix(X, "l1"), -cdist(X, X, "cityblock"), rtol=1e-12, atol=1e-12
    )


def test_bootstrap_ratio_fills_every_resample_of_a_large_sample():
    """Resamples are drawn in chunks when the units are many (2e6 indices at a time): every
    resample of a sample whose ratio is the same in every unit is that ratio."""
    den = np.random.default_rng(2).integers(1, 5, 4000).astype(np.float64)
    out = S.bootstrap_ratio(2 * den, den, n_boot=520, seed=0)  # chunks of 500 resamples
    assert out.shape == (520, 1) and (out == 2.0).all()


def test_rsa_bootstrap_is_the_spearman_correlation_of_the_two_matrices_pairs():
    """`rsa_bootstrap(sim_a, sim_b, groups)` scores sim_a against the reference sim_b. Bug
    caught: the reference and the groups passed the other way round. Checked against scipy's
    Spearman correlation of the two matrices' upper triangles, overall and for a group (its
    pairs: those with at least one of its images)."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(5)
    a = rng.normal(size=(12, 12))
    a = a + a.T
    b = a + rng.normal(scale=1.5, size=(12, 12))
    b = b + b.T
    groups = {"first four": np.arange(4)}
    out = S.rsa_bootstrap(a, b, groups, n_boot=50, seed=0)
    iu = np.triu_indices(12, 1)
    assert out[None][0] == pytest.approx(spearmanr(a[iu], b[iu])[0], abs=1e-12)
    pair = (iu[0] < 4) | (iu[1] < 4)
    assert out["first four"][0] == pytest.approx(spearmanr(a[iu][pair], b[iu][pair])[0], abs=1e-12)
