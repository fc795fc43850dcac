"""Properties of the one scorer (metrics.scoreboard, issue 41), for every input hypothesis
draws: percentiles_among's range, order-invariance, monotonicity, leave-one-out and
duplicated references; purity under renamed label codes; score_concepts under a
permutation of its concepts (every output permuted alike, except the scores drawn from a
concept's own stream, whose stream follows its index: the coherence trials, the TwoNN
subsample and the bootstrap intervals); the members of `_top`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conceptlens.analysis import scoreboard as A
from conceptlens.metrics import scoreboard as SB
from conceptlens.metrics.selection import Population

PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW_PROPS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Values with ties (a small grid) and without: both are what scores look like.
value = st.one_of(st.integers(-4, 4).map(lambda i: i / 4), st.floats(-10, 10, allow_nan=False))
values = st.lists(value, min_size=1, max_size=30)


def direct(v: float, ref: list[float]) -> float:
    ref = [r for r in ref if math.isfinite(r)]
    if not ref:
        return math.nan
    return 100 * (sum(r < v for r in ref) + 0.5 * sum(r == v for r in ref)) / len(ref)


@PROPS
@given(values, values, st.randoms(use_true_random=False))
def test_percentiles_among_range_order_and_duplicates(vals, ref, rnd):
    v, r = np.array(vals), np.array(ref)
    p = SB.percentiles_among(v, r)
    assert ((p >= 0) & (p <= 100)).all()
    np.testing.assert_allclose(p, [direct(x, ref) for x in vals], atol=1e-9)
    shuffled = r.copy()
    rnd.shuffle(shuffled)
    np.testing.assert_array_equal(SB.percentiles_among(v, shuffled), p)
    # duplicating the null doubles nothing
    np.testing.assert_allclose(SB.percentiles_among(v, np.concatenate([r, r, r])), p, atol=1e-9)


@PROPS
@given(values, value, value)
def test_percentiles_among_is_monotone_in_the_value(ref, a, b):
    lo, hi = min(a, b), max(a, b)
    p = SB.percentiles_among(np.array([lo, hi]), np.array(ref))
    assert p[0] <= p[1]


@PROPS
@given(st.lists(value, min_size=2, max_size=30), st.data())
def test_percentiles_among_leaves_the_own_entry_out(ref, data):
    r = np.array(ref)
    same = np.array(data.draw(st.lists(st.integers(-1, len(ref) - 1), min_size=len(ref), max_size=len(ref))))
    v = np.array(data.draw(st.lists(value, min_size=len(ref), max_size=len(ref))))
    p = SB.percentiles_among(v, r, same)
    want = [direct(x, ref if s < 0 else ref[:s] + ref[s + 1 :]) for x, s in zip(v, same)]
    np.testing.assert_allclose(p, want, atol=1e-9)
    # every direction among the others: the mean is 50, ties or not
    assert SB.percentiles_among(r, r, np.arange(len(r))).mean() == pytest.approx(50.0, abs=1e-9)
    # order-invariant with the index moved along
    perm = np.array(data.draw(st.permutations(range(len(ref)))))
    inv = np.argsort(perm)
    moved = SB.percentiles_among(r, r[perm], inv)
    np.testing.assert_allclose(moved, SB.percentiles_among(r, r, np.arange(len(r))), atol=1e-9)


@PROPS
@given(st.lists(value, min_size=1, max_size=40), st.integers(1, 45), st.booleans())
def test_top_is_the_n_largest_ties_by_lower_row(vals, N, positive):
    v = np.array(vals)
    want = sorted(range(len(v)), key=lambda i: (-v[i], i))
    if positive:
        want = [i for i in want if v[i] > 0]
    np.testing.assert_array_equal(A._top(v, N, positive), want[:N])


# ---- score_concepts ------------------------------------------------------------------------
N_POP, SIZE = 48, 10


def _pop(labels, seed=0, factor=None):
    g = np.random.default_rng(seed)
    X = g.standard_normal((N_POP, 5))
    return Population(X, labels, {} if factor is None else {"f": factor}, X + g.standard_normal((N_POP, 5)))


BASE_LABELS = np.random.default_rng(1).integers(0, 4, N_POP)
SETS = np.stack([np.sort(np.random.default_rng([2, i]).choice(N_POP, SIZE, replace=False)) for i in range(4)])
POP = _pop(BASE_LABELS)


@SLOW_PROPS
@given(st.permutations(range(4)), st.lists(st.integers(0, 3), min_size=N_POP, max_size=N_POP))
def test_a_permutation_of_label_codes_leaves_every_purity_unchanged(perm, factor):
    factor = np.array(factor)
    a = SB.score_concepts(_pop(BASE_LABELS, factor=factor), SETS, 0, "u", n_null=10, bootstrap=0)
    relabel = np.array(perm)
    b = SB.score_concepts(
        _pop(relabel[BASE_LABELS], factor=relabel[factor]), SETS, 0, "u", n_null=10, bootstrap=0
    )
    for k in ("purity_label", "purity_f"):
        if k in a.scores:
            np.testing.assert_allclose(b.values[k], a.values[k], atol=1e-12)
            np.testing.assert_allclose(b.null[k], a.null[k], atol=1e-12)


@SLOW_PROPS
@given(st.lists(st.integers(0, 1000), min_size=4, max_size=4, unique=True))
def test_any_renaming_of_label_codes_leaves_every_purity_unchanged(names):
    a = SB.score_concepts(_pop(BASE_LABELS), SETS, 0, "u", n_null=0, bootstrap=0)
    b = SB.score_concepts(_pop(np.array(names)[BASE_LABELS]), SETS, 0, "u", n_null=0, bootstrap=0)
    np.testing.assert_allclose(b.values["purity_label"], a.values["purity_label"], atol=1e-12)


# Scores drawn from a concept's own stream (its tag holds its index).
STREAM_DEPENDENT = ("coherence_random", "coherence_hard", "intrinsic_dim")
KW = dict(n_null=12, bootstrap=20, trials=8, refs=4, id_points=6)
BASE = SB.score_concepts(POP, SETS, 0, "u", **KW)


@SLOW_PROPS
@given(st.permutations(range(4)))
def test_permuting_the_concepts_permutes_every_stream_free_output(perm):
    perm = np.array(perm)
    res = SB.score_concepts(POP, SETS[perm], 0, "u", **KW)
    assert res.scores == BASE.scores
    for k in res.scores:
        np.testing.assert_array_equal(res.null[k], BASE.null[k])  # the null: (seed, unit) only
        if k in STREAM_DEPENDENT:
            continue
        np.testing.assert_array_equal(res.values[k], BASE.values[k][perm])
        np.testing.assert_array_equal(res.pct_random[k], BASE.pct_random[k][perm])
    # The concept at index i keeps index i's streams: its intervals are those of BASE's
    # index i only if the set there is the same.
    fixed = perm == np.arange(4)
    for k in res.scores:
        for part in ("lo", "hi"):
            got, base = getattr(res, part)[k], getattr(BASE, part)[k]
            np.testing.assert_array_equal(got[fixed], base[fixed])
        if k in STREAM_DEPENDENT:
            np.testing.assert_array_equal(res.values[k][fixed], BASE.values[k][fixed])
