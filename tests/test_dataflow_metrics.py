"""Metamorphic properties of the metrics the analyses call (issue 29, item 1): relations
between two runs on related inputs that hold for any input, each written against a
data-flow bug that computes correctly on what it is given but is given the wrong thing.

Small inputs throughout (a few checkpoints, a few dozen trials): each property runs in
well under a second."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from conceptlens.embedding import psych
from conceptlens.metrics import similarity as S
from conceptlens.metrics.clid import clid, correlations, wclid

FAST = settings(max_examples=40, deadline=None)

values = st.floats(-3, 3, allow_nan=False, width=64)


@st.composite
def checkpoints(draw, min_size=5, max_size=9):
    """CL, ID and kNN accuracy of n checkpoints, with spread (a fit is defined)."""
    n = draw(st.integers(min_size, max_size))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    cl, id_ = rng.normal(size=n), rng.normal(size=n) * 5 + 20
    acc = 0.5 + 0.1 * cl - 0.01 * id_ + 0.05 * rng.normal(size=n)
    return cl, id_, acc, rng


# ---- CLID, W-CLID ------------------------------------------------------------------------------
@FAST
@given(checkpoints(), values)
def test_leave_one_out_wclid_of_a_checkpoint_ignores_its_own_accuracy(data, new):
    """Each checkpoint's leave-one-out W-CLID is predicted by a fit on the others: its own
    kNN accuracy changed, its prediction is the same (and the others' change). Catches a
    leave-one-out fit that still contains the left-out checkpoint (its mask not applied,
    or the all-checkpoint weights used for every prediction)."""
    cl, id_, acc, rng = data
    i = int(rng.integers(len(cl)))
    before = wclid(cl, id_, acc, leave_one_out=True)[0]
    acc2 = acc.copy()
    acc2[i] = acc[i] + 1.0 + abs(new)
    after = wclid(cl, id_, acc2, leave_one_out=True)[0]
    assert after[i] == pytest.approx(before[i], rel=1e-9, abs=1e-9)
    # Not vacuous: the in-sample fit does move with it.
    assert wclid(cl, id_, acc2)[0][i] != pytest.approx(wclid(cl, id_, acc)[0][i], abs=1e-9)


@FAST
@given(checkpoints())
def test_leave_one_out_wclid_is_the_fit_on_the_others(data):
    """The same value computed another way: an ordinary least squares fit on the other
    checkpoints (numpy.polyfit-free normal equations), evaluated at the left-out one."""
    cl, id_, acc, _ = data
    pred = wclid(cl, id_, acc, leave_one_out=True)[0]
    A = np.column_stack([cl, id_, np.ones_like(cl)])
    for i in range(len(cl)):
        m = np.arange(len(cl)) != i
        w = np.linalg.solve(A[m].T @ A[m], A[m].T @ acc[m])
        assert pred[i] == pytest.approx(A[i] @ w, rel=1e-6, abs=1e-9)


@FAST
@given(checkpoints(), st.booleans())
def test_clid_and_wclid_follow_their_checkpoints_when_rows_are_permuted(data, loo):
    """Permuting the checkpoints permutes CLID and W-CLID with them. Catches a score
    aligned by position with another order (one argument sorted, the others not)."""
    cl, id_, acc, rng = data
    p = rng.permutation(len(cl))
    assert clid(cl[p], id_[p]) == pytest.approx(clid(cl, id_)[p])
    got = wclid(cl[p], id_[p], acc[p], leave_one_out=loo)[0]
    assert got == pytest.approx(wclid(cl, id_, acc, leave_one_out=loo)[0][p])


def test_correlations_ignore_the_order_of_the_checkpoints():
    """Pearson, Kendall and their intervals do not depend on the checkpoints' order."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=8)
    y = x + rng.normal(size=8)
    p = rng.permutation(8)
    a, b = correlations(x, y, n_boot=200), correlations(x[p], y[p], n_boot=200)
    for key in ("pearson", "kendall", "pearson_lo", "pearson_hi"):
        assert a[key] == pytest.approx(b[key])


# ---- similarity trials: weights, duplicates, order ---------------------------------------------------
@st.composite
def trials(draw, min_trials=3, max_trials=12):
    """A 2-D embedding of 8 stimuli and trials of 2 to 4 references, 1 or 2 chosen."""
    n = draw(st.integers(min_trials, max_trials))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(8, 2))
    stim = np.full((n, 5), -1, np.int64)
    sel = np.ones(n, np.int64)
    for t in range(n):
        r = int(rng.integers(2, 5))
        stim[t, : r + 1] = rng.choice(8, r + 1, replace=False)
        sel[t] = int(rng.integers(1, min(2, r - 1) + 1))
    w = draw(arrays(np.float64, n, elements=st.floats(0.25, 3)))
    return Z, psych.Trials(stim, sel, w), rng


@FAST
@given(trials())
def test_doubling_a_trials_weight_equals_duplicating_it(data):
    """The held-out scores of an embedding (weighted log-likelihood, accuracy, triplet
    accuracy) are the same whether a trial counts twice by weight or is there twice.
    Catches a score that ignores the weights (a plain mean) or applies them to the wrong
    trials (an index taken from the unweighted order)."""
    Z, t, rng = data
    i = int(rng.integers(len(t)))
    w2 = t.weight.copy()
    w2[i] *= 2
    doubled = psych.scores(Z, psych.Trials(t.stimulus_set, t.n_select, w2))
    idx = np.r_[np.arange(len(t)), i]
    duplicated = psych.scores(Z, t.subset(idx))
    for key in ("loglik", "accuracy", "triplet_accuracy"):
        assert doubled[key] == pytest.approx(duplicated[key], rel=1e-9, abs=1e-12)


@FAST
@given(trials())
def test_weights_are_used(data):
    """The weighted log-likelihood is sum w * ll / sum w, computed here from
    rank_log_likelihood: a score that drops the weights fails."""
    Z, t, _ = data
    ll = S.rank_log_likelihood(Z, t.stimulus_set, t.n_select)
    assert psych.scores(Z, t)["loglik"] == pytest.approx((t.weight * ll).sum() / t.weight.sum())


@FAST
@given(trials())
def test_permuting_trials_leaves_the_scores_unchanged(data):
    """Trials are a set: their order changes no score."""
    Z, t, rng = data
    a = psych.scores(Z, t)
    b = psych.scores(Z, t.subset(rng.permutation(len(t))))
    for key in a:
        assert a[key] == pytest.approx(b[key], rel=1e-9, abs=1e-12)


@FAST
@given(trials())
def test_a_zero_weight_trial_counts_as_absent(data):
    """A trial of weight 0 (an excluded row kept in the table) changes no score."""
    Z, t, rng = data
    i = int(rng.integers(len(t)))
    w0 = t.weight.copy()
    w0[i] = 0.0
    keep = np.arange(len(t)) != i
    a = psych.scores(Z, psych.Trials(t.stimulus_set, t.n_select, w0))
    b = psych.scores(Z, t.subset(keep))
    for key in a:
        assert a[key] == pytest.approx(b[key], rel=1e-9, abs=1e-12)


# ---- held-out splits of an ensemble's members ------------------------------------------------------
@FAST
@given(st.integers(40, 300), st.integers(2, 5), st.integers(0, 2**31))
def test_each_member_holds_out_its_own_trials(n, members, seed):
    """Members of one ensemble hold out different trials (each its own seeded share), and
    another seed gives other splits. Catches a split seeded without the member (every
    member then fits and is scored on the same trials) or without the seed."""
    a = psych.heldout_split(n, members, 0.2, seed)
    b = psych.heldout_split(n, members, 0.2, seed + 1)
    k = round(0.2 * n)
    for m in range(members):
        assert len(a[m]) == k and len(np.unique(a[m])) == k and a[m].min() >= 0 and a[m].max() < n
        assert not np.array_equal(a[m], b[m])
        for o in range(m):
            assert not np.array_equal(a[m], a[o])
    # Same seed, same splits (reproducible).
    again = psych.heldout_split(n, members, 0.2, seed)
    assert all(np.array_equal(a[m], again[m]) for m in range(members))
