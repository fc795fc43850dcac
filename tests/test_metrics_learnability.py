"""conceptlens/metrics/learnability.py: the shared-neighbour held-out CL."""

from __future__ import annotations

import numpy as np


# ---- metrics/learnability.py ---------------------------------------------------------------------
def test_shared_heldout_cl_is_the_heldout_cl_of_the_train_and_test_rows():
    """The shared-neighbour held-out CL (what cluster_metrics reports) equals
    cluster_learnability_heldout on X[train], X[test]: the split and the features are
    handed on in their places."""
    from conceptlens import metrics as M

    rng = np.random.default_rng(5)
    centres = rng.normal(size=(4, 6))
    X = centres[rng.integers(0, 4, 240)] + 0.6 * rng.normal(size=(240, 6))
    Xn = (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)
    nb = M.SelfNeighbours(Xn, m=16)
    test = rng.random(240) < 0.3
    train = ~test
    # scikit-learn's k-means: the same split whichever engine; faiss's first import is slow.
    want = M.cluster_learnability_heldout(Xn[train], Xn[test], 4, 2, 0, engine="sklearn")
    got = M.cluster_learnability_heldout_shared(nb, train, test, 4, 2, 0, engine="sklearn")
    assert got == want
    assert 0.5 < got < 1.0
