"""Data-flow properties (issue 29) of metrics/learnability.py, metrics/similarity.py,
metrics/selection.py and embedding/active.py: each test is written against a data-flow
mutant of tools/dataflow_mutants.py that the other tests let through (a mask not applied,
the first item reused, two arguments swapped), with values computed another way."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from conceptlens.embedding import active as A
from conceptlens.embedding import psych
from conceptlens.metrics import similarity as S


def _members(n=30, d=2, m=2, sigma=0.05, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, d)) * 0.3
    return [(base + rng.normal(size=(n, d)) * 0.02, np.full((n, d), sigma)) for _ in range(m)]


# ---- embedding/active.py ------------------------------------------------------------------------
def test_within_agreement_is_the_squared_correlation_of_each_members_own_similarities():
    """Members known exactly (sigma ~ 0): each one's expected similarity is exp(-beta d) of
    its own mu's distances (scipy's pdist lists the pairs in upper-triangle order)."""
    from scipy.spatial.distance import pdist

    rng = np.random.default_rng(4)
    base = rng.normal(size=(15, 2)) * 0.3
    mus = [base + rng.normal(size=(15, 2)) * 0.1 for _ in range(3)]
    sigma = np.full((15, 2), 1e-9)
    got = A.within_agreement([(m, sigma) for m in mus], beta=S.BETA)
    sims = [np.exp(-S.BETA * pdist(m)) for m in mus]
    want = np.mean([np.corrcoef(sims[a], sims[b])[0, 1] ** 2 for a, b in itertools.combinations(range(3), 2)])
    assert got == pytest.approx(want, rel=1e-6)
    assert 0.05 < got < 0.95  # related but different members: neither 0 nor 1


def test_confirmation_queries_are_drawn_by_uncertainty_one_per_trial():
    """Eq. 8 for confirmation trials: queries drawn with replacement in proportion to the
    stimuli's uncertainty; with two stimuli far less certain than the rest, the queries are
    (almost) only those two, and both of them, each trial its own draw."""
    members = _members(n=30, sigma=1e-4)
    for _, s in members:
        s[[3, 17]] = 1.0
    sel = A.select_trials(
        members, 1, n_candidates=5, keep_per_query=1, n_confirmation=30, n_neighbors=8, random_state=0
    )
    q = sel.stimulus_set[sel.confirmation][:, 0]
    assert len(q) == 30
    assert np.isin(q, [3, 17]).mean() >= 0.9
    assert 5 <= (q == 3).sum() <= 25 and 5 <= (q == 17).sum() <= 25  # binomial(30, 1/2): both drawn


def test_simulated_rounds_fit_every_member_with_its_own_seed(monkeypatch):
    """Each round's ensemble has `members` distinct fits (member index and seed), so the
    members disagree somewhat: an ensemble of one fit repeated has agreement exactly 1.
    The fit is a stand-in (an embedding drawn from the seed): the test is about wiring."""
    from types import SimpleNamespace

    seen = []

    def fake_fit(trials, n, dim, **kw):
        seen.append((len(trials), kw["member"], kw["seed"]))
        mu = np.random.default_rng(kw["seed"]).normal(size=(n, dim))
        return SimpleNamespace(mu=mu, sigma=np.full((n, dim), 0.01))

    monkeypatch.setattr(psych, "fit_embedding", fake_fit)
    Z = np.random.default_rng(1).normal(size=(12, 2))
    rows = A.simulate_rounds(Z, "random", rounds=2, trials_per_round=30, members=3, n_coarse=20)
    for n_trials in (30, 60):
        mine = [s for s in seen if s[0] == n_trials]
        assert sorted(m for _, m, _ in mine) == [0, 1, 2]
        assert len({seed for *_, seed in mine}) == 3
    assert all(r["within_agreement"] < 0.9 for r in rows)  # three unrelated stand-in fits


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
