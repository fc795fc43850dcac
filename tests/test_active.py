"""Active trial selection and convergence measures (roads2021 sections 4.3 and 5)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from conceptlens import rng as R
from conceptlens.embedding import active as A
from conceptlens.embedding import psych
from conceptlens.metrics import similarity as S


def _members(n=30, d=2, m=3, sigma=0.05, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, d)) * 0.3
    return [(base + rng.normal(size=(n, d)) * 0.02, np.full((n, d), sigma)) for _ in range(m)]


def test_gain_of_a_trial_with_a_certain_outcome_is_zero():
    # One reference sits on the query, one at distance 1 and six far away, and beta is
    # large: every posterior sample predicts the same ordered choice (1 then 2), so the
    # answer teaches nothing, although the embedding is uncertain.
    Z = np.zeros((9, 2))
    Z[2] = [1, 0]
    Z[3:] = 5 + np.arange(6)[:, None]
    members = [(Z, np.full_like(Z, 0.05))]
    trial = np.array([[0, 1, 2, 3, 4, 5, 6, 7, 8]])
    assert A.information_gain(members, trial, 2, beta=50) == pytest.approx(0, abs=1e-9)
    # The same uncertainty on an ambiguous trial (two references equally near) does teach.
    Z2 = Z.copy()
    Z2[2] = [0, 0.01]
    assert A.information_gain([(Z2, np.full_like(Z, 0.05))], trial, 2, beta=50)[0] > 0.1


def test_gain_of_an_exactly_known_embedding_is_zero_however_ambiguous():
    members = _members(sigma=0.0)
    trials = A.random_trials(30, 20, random_state=1)
    assert np.allclose(A.information_gain(members, trials, 2), 0, atol=1e-12)


def test_gain_matches_a_brute_force_mutual_information():
    members = _members(n=12, m=2, sigma=0.2)
    trials = A.random_trials(12, 4, n_references=4, random_state=3)
    got = A.information_gain(members, trials, 2, beta=3, n_samples=5, seed=7)
    want = []
    for t in trials:
        per_member = []
        for k, (mu, sigma) in enumerate(members):
            Zs = A.posterior_samples(mu, sigma, 5, R.stream(7, "information_gain.posterior", k))
            p = np.array([S.outcome_probabilities(Z, t[0], t[1:], 2, beta=3)[1] for Z in Zs])
            mean = p.mean(axis=0)
            h = lambda q: -(q * np.log(q)).sum(axis=-1)
            per_member.append(h(mean) - h(p).mean())
        want.append(np.mean(per_member))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_uncertain_stimuli_make_informative_trials():
    members = _members(n=20, sigma=0.02)
    loose = [(mu, s.copy()) for mu, s in members]
    for _, s in loose:
        s[0] = 0.5  # stimulus 0 is barely known
    t = np.array([[0, *range(1, 9)], [10, *range(11, 19)]])
    ig = A.information_gain(loose, t, 2, n_samples=64)
    assert ig[0] > ig[1]


def test_selection_prefers_uncertain_queries_and_near_references():
    members = _members(n=40, sigma=0.01)
    for _, s in members:
        s[:5] = 1.0  # five uncertain stimuli
    sel = A.select_trials(members, n_queries=5, n_candidates=30, keep_per_query=2, random_state=0)
    assert sel.stimulus_set.shape == (10, 9)
    assert len(set(sel.stimulus_set[:, 0])) == 5
    assert (sel.stimulus_set[:, 0] < 5).mean() >= 0.6  # 5 of 40 stimuli hold most of the weight
    for row in sel.stimulus_set:
        assert len(set(row)) == 9  # query and references all distinct
    again = A.select_trials(members, n_queries=5, n_candidates=30, keep_per_query=2, random_state=0)
    np.testing.assert_array_equal(sel.stimulus_set, again.stimulus_set)


def test_kept_trials_are_the_most_informative_candidates():
    members = _members(n=30, sigma=0.1)
    sel = A.select_trials(members, n_queries=1, n_candidates=40, keep_per_query=3, random_state=2)
    rng_sel = A.select_trials(members, n_queries=1, n_candidates=40, keep_per_query=40, random_state=2)
    # The three kept are the top three of the same candidate pool.
    np.testing.assert_allclose(np.sort(sel.information_gain), np.sort(rng_sel.information_gain)[-3:])


def test_confirmation_trials_mix_neighbours_and_strangers():
    members = _members(n=60, sigma=0.05)
    sel = A.select_trials(members, 2, n_candidates=10, keep_per_query=1, n_confirmation=4, n_neighbors=10)
    assert sel.confirmation.sum() == 4 and (~sel.confirmation).sum() == 2
    from conceptlens.embedding.psych import ensemble_similarity

    sim = ensemble_similarity(members, S.BETA, 4, 0)
    np.fill_diagonal(sim, -np.inf)
    near = np.argsort(-sim, axis=1, kind="stable")[:, :10]
    for row in sel.stimulus_set[sel.confirmation]:
        assert np.isin(row[1:], near[row[0]]).sum() >= 2
        assert (~np.isin(row[1:], near[row[0]])).sum() >= 6 - 0  # six from outside


def test_coarse_grained_loss_of_one_member_is_its_mean_negative_log_likelihood():
    (mu, sigma), *_ = _members()
    t = A.random_trials(30, 50, random_state=4)
    want = -S.rank_log_likelihood(mu, t, np.full(50, 2)).mean()
    assert A.coarse_grained_loss([(mu, sigma)], t, np.full(50, 2)) == pytest.approx(want)
    # The true embedding explains its own answers better than a shuffled one.
    rng = np.random.default_rng(0)
    answers = S.sample_choices(mu, t[:, 0], t[:, 1:], 2, rng=rng)
    wrong = mu[rng.permutation(len(mu))]
    assert A.coarse_grained_loss([(mu, sigma)], answers, np.full(50, 2)) < A.coarse_grained_loss(
        [(wrong, sigma)], answers, np.full(50, 2)
    )


def test_agreement_is_one_for_identical_members_and_lower_for_unrelated_ones():
    (mu, sigma), *_ = _members(sigma=1e-6)
    assert A.within_agreement([(mu, sigma), (mu.copy(), sigma)]) == pytest.approx(1.0)
    other = np.random.default_rng(9).normal(size=mu.shape) * 0.3
    assert A.within_agreement([(mu, sigma), (other, sigma)]) < 0.5
    assert A.across_agreement([(mu, sigma)], [(mu, sigma)]) == pytest.approx(1.0)


def test_bad_trials_are_refused():
    members = _members()
    with pytest.raises(ValueError, match="n_select"):
        A.information_gain(members, A.random_trials(30, 2), 8)
    with pytest.raises(ValueError, match="padding"):
        A.information_gain(members, np.array([[0, 1, 2, -1]]), 1)


def test_convergence_analysis_fits_growing_shares_in_collection_order(factory_copy):
    from conceptlens.analysis.runner import run
    from conceptlens.workspace import Workspace

    opts = {"rounds": 3, "convergence_members": 2, "max_epochs": 15}
    ctx = run(factory_copy, ["convergence"], options=opts, with_dependencies=False, progress_bars=False)
    ws = Workspace(factory_copy)
    t = ws.read("similarity_trials", dataset="toy").to_pandas()
    n_train = int(((t["split"] == "train") & ~t["is_catch"]).sum())
    c = ws.read("similarity_convergence", dataset="toy").to_pandas().sort_values("round")
    assert list(c["round"]) == [0, 1, 2]
    assert list(c["n_trials"]) == [round(n_train / 3), round(2 * n_train / 3), n_train]
    assert c["across_agreement"].isna().tolist() == [True, False, False]
    assert c["within_agreement"].between(0, 1).all() and (c["coarse_loss"] > 0).all()
    assert (c["dim"] == 2).all()  # the embedding's chosen dimensionality
    # The factory has `test` trials: they are the coarse set, nothing is held out of train.
    assert not any("coarse set" in n for n in ctx.notes)


# ---- values computed another way ----------------------------------------------------------------
def _two_members(n=30, d=2, m=2, sigma=0.05, seed=0):
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
    members = _two_members(n=30, sigma=1e-4)
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


# ---- trial selection: references, confirmations and simulated rounds ---------------------------
def test_random_trials_refuse_more_references_than_stimuli():
    with pytest.raises(ValueError, match="n_references=5 needs more than 5 stimuli"):
        A.random_trials(5, 3, n_references=5)
    t = A.random_trials(6, 40, n_references=5, random_state=1)
    assert t.shape == (40, 6) and all(len(set(row)) == 6 for row in t)


def test_confirmation_trials_never_reuse_the_query_as_a_reference():
    # 30 stimuli, 8 neighbours: 21 strangers, 6 drawn per trial. A query among the strangers
    # would be drawn in most of 20 trials.
    sel = A.select_trials(
        _two_members(), 1, n_candidates=5, keep_per_query=1, n_confirmation=20, n_neighbors=8, random_state=3
    )
    rows = sel.stimulus_set[sel.confirmation]
    assert len(rows) == 20
    for row in rows:
        assert row[0] not in row[1:] and len(set(row)) == 9


def test_confirmation_trials_with_few_stimuli_show_each_stimulus_once():
    # 12 stimuli, 8 neighbours: 3 strangers for 6 places, so the rest comes from the
    # neighbourhood, never the two neighbours already placed (18 of 20 repeated one).
    sel = A.select_trials(
        _two_members(n=12),
        1,
        n_candidates=5,
        keep_per_query=1,
        n_confirmation=20,
        n_neighbors=8,
        random_state=3,
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
