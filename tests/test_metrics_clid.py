"""conceptlens/metrics/clid.py: CLID, W-CLID and their correlations follow their checkpoints, leave out
the ones without a value and count every permutation. Metamorphic properties on a few checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conceptlens.metrics.clid import clid, correlations, wclid, zscore
from tests.helpers_metrics import FAST

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


# ---- checkpoints without a value are left out, not carried along ---------------------------------
def _with_missing(x, at, value=np.nan):
    out = np.asarray(x, float).copy()
    return np.insert(out, at, value)


@FAST
@given(checkpoints(min_size=6), st.integers(0, 6), st.booleans())
def test_a_checkpoint_without_a_value_leaves_every_correlation_unchanged(data, at, in_target):
    """A checkpoint whose predictor (or target) is missing is left out of Pearson, Kendall,
    their intervals and permutation p-values: the result is that of the other checkpoints.
    Catches the finite-pair mask computed but not applied (NaN then reaches scipy)."""
    cl, _, acc, _ = data
    at = min(at, len(cl))
    x, y = (
        (_with_missing(cl, at, 0.3), _with_missing(acc, at))
        if in_target
        else (
            _with_missing(cl, at),
            _with_missing(acc, at, 0.7),
        )
    )
    got, want = correlations(x, y, n_boot=50), correlations(cl, acc, n_boot=50)
    assert got["n_checkpoints"] == len(cl)
    for key, v in want.items():
        assert got[key] == pytest.approx(v, rel=1e-9, abs=1e-12, nan_ok=True), key


@FAST
@given(checkpoints(min_size=5), st.integers(0, 9), st.booleans(), st.sampled_from(["cl", "id", "acc"]))
def test_a_checkpoint_without_a_value_leaves_the_wclid_fit_unchanged(data, at, loo, where):
    """W-CLID's least-squares fit (in-sample and leave-one-out) uses only checkpoints with
    all three values: adding one without a kNN accuracy, a CL or an ID changes no weight
    and no other checkpoint's prediction, and its own prediction is NaN. Catches the
    complete-row mask dropped from the fit (lstsq on a NaN row gives NaN weights)."""
    cl, id_, acc, _ = data
    at = min(at, len(cl))
    fill = {"cl": (np.nan, 1.0, 0.5), "id": (0.1, np.nan, 0.5), "acc": (0.1, 1.0, np.nan)}[where]
    cl2, id2, acc2 = (_with_missing(v, at, f) for v, f in zip((cl, id_, acc), fill))
    pred, w = wclid(cl2, id2, acc2, leave_one_out=loo)
    want_pred, want_w = wclid(cl, id_, acc, leave_one_out=loo)
    assert w == pytest.approx(want_w, rel=1e-7, abs=1e-9)
    assert np.isnan(pred[at])
    assert np.delete(pred, at) == pytest.approx(want_pred, rel=1e-7, abs=1e-9)


@FAST
@given(checkpoints(min_size=3), st.integers(0, 9))
def test_a_missing_value_leaves_the_other_z_scores_and_clid_unchanged(data, at):
    """z-scores (and so CLID) are over the checkpoints with a value: a checkpoint without
    CL or ID leaves every other checkpoint's z-score and CLID as they were."""
    cl, id_, _, _ = data
    at = min(at, len(cl))
    z = zscore(_with_missing(cl, at))
    assert np.isnan(z[at])
    assert np.delete(z, at) == pytest.approx(zscore(cl), rel=1e-9, abs=1e-12)
    got = clid(_with_missing(cl, at), _with_missing(id_, at))
    assert np.isnan(got[at])
    assert np.delete(got, at) == pytest.approx(clid(cl, id_), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("constant", ["predictor", "target"])
def test_a_series_constant_over_the_checkpoints_with_values_has_no_correlation(constant):
    """A predictor (or target) constant over the checkpoints that have both values carries
    no correlation, even when a checkpoint without a value would give it spread: every
    statistic is NaN, as for a series constant throughout. Catches the spread measured on
    all checkpoints instead of the finite pairs."""
    x = np.array([0.4, 0.4, 0.4, 0.4, 0.4, 0.4, np.nan])
    y = np.array([0.1, 0.5, 0.2, 0.9, 0.3, 0.7, 0.8])
    if constant == "target":
        x, y = y, x
    got = correlations(x, y, n_boot=50)
    assert got["n_checkpoints"] == 6
    for key in (
        "pearson",
        "kendall",
        "pearson_lo",
        "kendall_lo",
        "kendall_hi",
        "pearson_perm_p",
        "kendall_perm_p",
    ):
        assert np.isnan(got[key]), key


def test_permutation_p_counts_every_permutation_of_every_block():
    """With more permutations than one memory block holds (n=40: 1250 per block), the
    p-values are the share over all of them, checked on the same seeded permutations with
    numpy's corrcoef and scipy's kendalltau. Catches the first block counted in place of
    the others."""
    from scipy.stats import kendalltau, pearsonr

    from conceptlens.metrics.clid import permutation_p

    rng = np.random.default_rng(5)
    n, n_perm = 40, 2600
    x = rng.normal(size=n)
    y = 0.25 * x + rng.normal(size=n)
    perms = np.random.default_rng(11).permuted(np.tile(np.arange(n), (n_perm, 1)), axis=1)
    r0, t0 = abs(pearsonr(x, y)[0]), abs(kendalltau(x, y)[0])
    rs = np.corrcoef(np.vstack([x, y[perms]]))[0, 1:]  # numpy's r of x with each permuted y
    hits_r = int((np.abs(rs) >= r0 - 1e-12).sum())
    hits_t = sum(abs(kendalltau(x, y[p])[0]) >= t0 - 1e-12 for p in perms[::13])
    pr, pt = permutation_p(x, y, n_perm=n_perm, random_state=11)
    assert pr == pytest.approx((1 + hits_r) / (1 + n_perm))
    # Kendall checked on every 13th permutation (scipy is slow): the share within sampling error.
    assert pt == pytest.approx(hits_t / len(perms[::13]), abs=0.08)
    assert 0.02 < pr < 0.98  # not vacuous: hits in every block
