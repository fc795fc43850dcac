"""k-means's refusals and the k-means++ start of its faiss engine: what mutation testing
found untested (tools/mutate.py, conceptlens/metrics/kmeans.py)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from conceptlens import metrics as M

K = importlib.import_module("conceptlens.metrics.kmeans")  # the package exports a function of that name


@pytest.mark.parametrize("shape", [(0, 3), (6,)])
def test_empty_or_flat_points_are_refused_with_their_shape(shape):
    with pytest.raises(ValueError, match=rf"X must be a non-empty 2-D array, got shape \({shape[0]},"):
        M.kmeans(np.zeros(shape), 2)
    with pytest.raises(ValueError, match="n_init must be >= 1, got 0"):
        M.kmeans(np.zeros((6, 2)), 2, n_init=0)


@pytest.mark.parametrize("d, init_dim", [(16, 16), (150, K.INIT_DIM)])
def test_faiss_start_is_seeded_from_a_sample_of_distinct_points(monkeypatch, d, init_dim):
    """Each restart's k-means++ start reads INIT_PER_CLUSTER distinct points per cluster (in
    a random projection to INIT_DIM dimensions when the features are wider), not all of them."""
    pytest.importorskip("faiss")
    import sklearn.cluster

    seen = []
    original = sklearn.cluster.kmeans_plusplus

    def spy(low, k, **kw):
        seen.append(low)
        return original(low, k, **kw)

    monkeypatch.setattr(sklearn.cluster, "kmeans_plusplus", spy)
    X = np.random.default_rng(0).normal(size=(300, d)).astype(np.float32)
    fit = M.kmeans(X, 3, n_init=2, random_state=0, engine="faiss")
    assert len(seen) == 2
    # New points go to their nearest centre, as integer cluster numbers like the labels.
    Y = X[:20] + 0.5
    nearest = ((Y[:, None, :] - fit.centres[None]) ** 2).sum(axis=-1).argmin(axis=1)
    got = fit.predict(Y)
    assert got.dtype == np.int64 and np.array_equal(got, nearest)
    for low in seen:
        assert low.shape == (K.INIT_PER_CLUSTER * 3, init_dim)
        assert len(np.unique(low, axis=0)) == len(low)
        if d == init_dim:  # no projection: the sample is rows of X
            assert np.isin(low.view([("", low.dtype)] * d), X.view([("", X.dtype)] * d)).all()
    assert not np.array_equal(seen[0], seen[1])  # each restart draws its own sample
