"""conceptlens/metrics/kmeans.py's faiss engine: refused inputs, the seeded start and the restarts."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from conceptlens import metrics as M

# ---- the faiss engine: refused inputs, seeding and restarts -------------------------------------
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
    seen = []
    original = K.kmeans_plusplus_f32

    def spy(low, k, rng):
        seen.append(low)
        return original(low, k, rng)

    monkeypatch.setattr(K, "kmeans_plusplus_f32", spy)
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


@pytest.mark.parametrize("n_init", [1, 3])
def test_faiss_restarts_are_compared_early_and_only_the_best_goes_on(monkeypatch, n_init):
    """Each start runs FAISS_SCREEN iterations; the one with the lowest objective goes on
    from its own centroids for the rest of FAISS_ITER; one start runs FAISS_ITER at once."""
    faiss = pytest.importorskip("faiss")

    runs = []
    Original = faiss.Kmeans

    class Spy(Original):
        def __init__(self, d, k, **kw):
            super().__init__(d, k, **kw)
            self.niter_, self.seed_ = kw["niter"], kw["seed"]
            runs.append(self)

        def train(self, x, init_centroids=None, **kw):
            self.init_ = np.array(init_centroids)
            return super().train(x, init_centroids=init_centroids, **kw)

    monkeypatch.setattr(faiss, "Kmeans", Spy)
    X = np.random.default_rng(7).normal(size=(900, 12)).astype(np.float32)  # no clusters: starts differ
    fit = M.kmeans(X, 8, n_init=n_init, random_state=1, engine="faiss")
    if n_init == 1:
        assert [r.niter_ for r in runs] == [K.FAISS_ITER]
        assert fit.model is runs[0]
        return
    starts, final = runs[:n_init], runs[n_init:]
    assert [r.niter_ for r in starts] == [K.FAISS_SCREEN] * n_init and len(final) == 1
    best = min(starts, key=lambda r: r.obj[-1])
    assert final[0].niter_ == K.FAISS_ITER - K.FAISS_SCREEN and final[0].seed_ == best.seed_
    np.testing.assert_array_equal(final[0].init_, best.centroids)
    assert fit.model is final[0] and np.array_equal(fit.centres, final[0].centroids)
    assert len({round(float(r.obj[-1]), 3) for r in starts}) > 1  # the starts did differ
