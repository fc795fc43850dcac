"""Active selection's rounds and its refusals: the wiring mutation testing found untested
(tools/mutate.py, conceptlens/embedding/active.py)."""

from __future__ import annotations

import numpy as np
import pytest

from conceptlens.embedding import active as A
from conceptlens.embedding import psych


def _members(n=30, d=2, m=2, sigma=0.05, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, d)) * 0.3
    return [(base + rng.normal(size=(n, d)) * 0.02, np.full((n, d), sigma)) for _ in range(m)]


def test_random_trials_refuse_more_references_than_stimuli():
    with pytest.raises(ValueError, match="n_references=5 needs more than 5 stimuli"):
        A.random_trials(5, 3, n_references=5)
    t = A.random_trials(6, 40, n_references=5, random_state=1)
    assert t.shape == (40, 6) and all(len(set(row)) == 6 for row in t)


def test_confirmation_trials_never_reuse_the_query_as_a_reference():
    # 30 stimuli, 8 neighbours: 21 strangers, 6 drawn per trial. A query among the strangers
    # would be drawn in most of 20 trials.
    sel = A.select_trials(
        _members(), 1, n_candidates=5, keep_per_query=1, n_confirmation=20, n_neighbors=8, random_state=3
    )
    rows = sel.stimulus_set[sel.confirmation]
    assert len(rows) == 20
    for row in rows:
        assert row[0] not in row[1:] and len(set(row)) == 9


def test_confirmation_trials_with_few_stimuli_show_each_stimulus_once():
    # 12 stimuli, 8 neighbours: 3 strangers for 6 places, so the rest comes from the
    # neighbourhood, never the two neighbours already placed (18 of 20 repeated one).
    sel = A.select_trials(
        _members(n=12), 1, n_candidates=5, keep_per_query=1, n_confirmation=20, n_neighbors=8, random_state=3
    )
    rows = sel.stimulus_set[sel.confirmation]
    assert len(rows) == 20 and all(len(set(row)) == 9 for row in rows)


def test_simulated_rounds_select_with_the_callers_settings(monkeypatch):
    """Round 0 is random (no embedding yet), then each round selects trials from the last
    ensemble with the caller's beta, a quarter of confirmation trials and the query counts
    so far, and refits every member on all answers collected."""
    calls, fits = [], []
    select, fit = A.select_trials, psych.fit_embedding

    def spy_select(ens, n_queries, **kw):
        calls.append({"members": len(ens), "n_queries": n_queries, **kw, "counts": kw["query_counts"].copy()})
        return select(ens, n_queries, **kw)

    def spy_fit(trials, n, dim, **kw):
        fits.append((len(trials), kw["beta"]))
        return fit(trials, n, dim, **kw, max_epochs=40)  # short fits: the test is about wiring

    monkeypatch.setattr(A, "select_trials", spy_select)
    monkeypatch.setattr(psych, "fit_embedding", spy_fit)
    rng = np.random.default_rng(0)
    Z = np.concatenate([c + rng.normal(size=(8, 2)) * 0.05 for c in ([0, 0], [1, 0], [0, 1])])
    rows = A.simulate_rounds(
        Z,
        "active",
        rounds=3,
        trials_per_round=40,
        members=2,
        n_coarse=60,
        beta=5.0,
        n_candidates=40,
        keep_per_query=2,
    )
    # 40 random trials, then (40 - 10) // 2 = 15 queries x 2 kept + 10 confirmation trials.
    assert [r["n_trials"] for r in rows] == [40, 80, 120]
    assert [c["n_queries"] for c in calls] == [15, 15]
    assert all(c["beta"] == 5.0 and c["n_confirmation"] == 10 and c["members"] == 2 for c in calls)
    assert all(c["keep_per_query"] == 2 for c in calls)
    # Query counts: every query so far, the random round's included.
    assert calls[0]["counts"].sum() == 40 and calls[1]["counts"].sum() == 80
    assert fits == [(40, 5.0)] * 2 + [(80, 5.0)] * 2 + [(120, 5.0)] * 2
    assert rows[0]["across_agreement"] is None and all(r["across_agreement"] > 0 for r in rows[1:])
    assert all(0 < r["within_agreement"] <= 1 and r["coarse_loss"] > 0 for r in rows)
    # Three tight, distant clusters: every fit recovers the similarity order.
    assert rows[-1]["recovery"] > 0.5


def test_simulated_random_rounds_draw_random_trials_only(monkeypatch):
    monkeypatch.setattr(A, "select_trials", lambda *a, **k: pytest.fail("random rounds must not select"))
    Z = np.random.default_rng(1).normal(size=(12, 2))
    rows = A.simulate_rounds(Z, "random", rounds=2, trials_per_round=30, members=1, n_coarse=20)
    assert [r["n_trials"] for r in rows] == [30, 60] and rows[0]["within_agreement"] is None
    with pytest.raises(ValueError, match="strategy must be 'active' or 'random'"):
        A.simulate_rounds(Z, "greedy")


def test_simulated_rounds_keep_three_trials_per_query_by_default(monkeypatch):
    fit = psych.fit_embedding
    monkeypatch.setattr(psych, "fit_embedding", lambda *a, **kw: fit(*a, **kw, max_epochs=20))
    Z = np.random.default_rng(2).normal(size=(20, 2))
    rows = A.simulate_rounds(
        Z, "active", rounds=2, trials_per_round=20, members=1, n_coarse=20, n_candidates=20
    )
    # (20 - 5 confirmation) // 3 = 5 queries x 3 kept + 5 confirmation trials.
    assert [r["n_trials"] for r in rows] == [20, 40]
