"""The faiss engine's k-means++ start (conceptlens/metrics/kmeans.py kmeans_plusplus_f32)
picks scikit-learn's points, bit for bit, with the same draws: it replaced scikit-learn's
`kmeans_plusplus` for speed (issue 25) and must not change a clustering."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from sklearn.cluster import kmeans_plusplus

from conceptlens import metrics as M

K = importlib.import_module("conceptlens.metrics.kmeans")  # the package exports a function of that name


def points(kind: str, n: int, d: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "blobs":  # clusters: the candidates' potentials differ widely
        X = rng.normal(size=(k, d))[rng.integers(0, k, n)] + 0.05 * rng.normal(size=(n, d))
    elif kind == "noise":  # no clusters: near-tied potentials, where rounding would show
        X = rng.normal(size=(n, d))
    else:  # "duplicates": a tenth of the points repeated, distances of exactly zero
        X = rng.normal(size=(n, d))
        X[rng.integers(0, n, n // 10)] = X[: n // 10]
    return X.astype(np.float32)


@pytest.mark.parametrize(
    "kind, n, d, k",
    [("blobs", 2840, 128, 71), ("noise", 5640, 128, 141), ("duplicates", 600, 16, 12), ("noise", 40, 3, 2)],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_picks_and_the_generators_state_are_scikit_learns(kind, n, d, k, seed):
    X = points(kind, n, d, k, seed)
    theirs, ours = np.random.RandomState(seed), np.random.RandomState(seed)
    centres, expected = kmeans_plusplus(X, k, random_state=theirs)
    got = K.kmeans_plusplus_f32(X, k, ours)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(X[got], centres)
    # The same number of draws: the next restart's sample and seed are unchanged too.
    assert theirs.randint(2**31 - 1) == ours.randint(2**31 - 1)


def test_a_faiss_clustering_is_the_one_scikit_learns_start_gives(monkeypatch):
    """The whole faiss path, its starts from scikit-learn's seeding or from ours."""
    pytest.importorskip("faiss")
    X = points("noise", 3000, 200, 40, 5)  # wider than INIT_DIM: the projected sample
    ours = M.kmeans(X, 40, n_init=3, random_state=4, engine="faiss")
    monkeypatch.setattr(
        K, "kmeans_plusplus_f32", lambda low, k, rng: kmeans_plusplus(low, k, random_state=rng)[1]
    )
    theirs = M.kmeans(X, 40, n_init=3, random_state=4, engine="faiss")
    np.testing.assert_array_equal(ours.labels, theirs.labels)
    np.testing.assert_array_equal(ours.centres, theirs.centres)
