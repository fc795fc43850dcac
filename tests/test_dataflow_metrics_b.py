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


# ---- metrics/selection.py ------------------------------------------------------------------------
def _population(n=240, n_labels=4, d=8, noise=0.4, seed=0, annotator=True, unknown=0):
    from conceptlens.metrics import selection as SE

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_labels, n)
    X = rng.normal(size=(n_labels, d))[labels] + noise * rng.normal(size=(n, d))
    factors = {"parity": labels % 2, "noise": rng.integers(0, 3, n)}
    A = np.eye(n_labels)[labels] if annotator else None
    labels = labels.copy()
    labels[:unknown] = -1
    return SE.Population(X, labels, factors, A)


def test_only_the_nulls_asked_for_are_drawn_and_no_describability_row_without_captions():
    from conceptlens.metrics import selection as SE

    pop = _population(annotator=False)
    sel = np.flatnonzero(pop.labels == 1)
    out = SE.score_selection(pop, sel, nulls=("random",), n_null=12, n_null_id=3, seed=0, bootstrap=0)
    for r in out["scores"]:
        assert r["null_same_labels_n"] == 0 and np.isnan(r["pct_same_labels"]), r["score"]
    assert _row(out, "learnability")["null_random_n"] == 12
    assert "describability_top1" not in {r["score"] for r in out["scores"]}


def _row(out, name):
    return next(r for r in out["scores"] if r["score"] == name)


def test_purity_counts_only_known_labels_and_its_interval_holds_it():
    """Unknown labels (-1) are neither a value of K nor a member's label: purity is
    scores.purity of the known labels with K the known values of the whole population."""
    from conceptlens.metrics import selection as SE
    from conceptlens.metrics.scores import purity

    pop = _population(unknown=60, annotator=False)
    sel = np.r_[
        np.arange(0, 60, 3), np.flatnonzero(pop.labels == 2)[:30], np.flatnonzero(pop.labels == 3)[:10]
    ]
    out = SE.score_selection(pop, sel, n_null=5, n_null_id=2, seed=0, bootstrap=200)
    y = pop.labels[np.unique(sel)]
    want = purity(y[y >= 0], 4)[0]
    r = _row(out, "purity_label")
    assert r["value"] == pytest.approx(want, abs=1e-12)
    assert r["lo"] <= r["value"] <= r["hi"] and r["hi"] > r["lo"]
    # Every factor's purity has its own interval around its own value.
    for name in ("purity_parity", "purity_noise"):
        f = _row(out, name)
        assert f["lo"] <= f["value"] <= f["hi"], name
    assert _row(out, "purity_parity")["value"] != pytest.approx(_row(out, "purity_noise")["value"])


def test_a_factor_of_the_wrong_length_is_refused_whichever_it_is():
    from conceptlens.metrics import selection as SE

    X, labels = np.random.default_rng(0).normal(size=(20, 3)), np.zeros(20, np.int64)
    with pytest.raises(ValueError, match="factor 'b'"):
        SE.Population(X, labels, {"a": np.zeros(20), "b": np.zeros(19)})


def test_unknown_nulls_are_named_in_order():
    from conceptlens.metrics import selection as SE

    pop = _population(n=40, annotator=False)
    with pytest.raises(ValueError, match=r"\['aa', 'zz'\]"):
        SE.Scorer(pop, [1, 2], nulls=("zz", "random", "aa"))


def test_coherence_negatives_are_non_members_even_for_a_set_of_most_images():
    """An annotator that sees only membership: a trial is right unless its negative is a
    member (then a tie, decided by a coin). A set of 5/6 of the images needs more draws of
    random negatives than the first batch gives: those must be filtered too."""
    from conceptlens.metrics import selection as SE

    rng = np.random.default_rng(2)
    n = 300
    inside = np.arange(n) < 250
    X = rng.normal(size=(n, 5))
    pop = SE.Population(X, rng.integers(0, 3, n), annotator=np.eye(2)[inside.astype(int)])
    sc = SE.Scorer(pop, np.flatnonzero(inside), trials=60, n_null=3, n_null_id=1, seed=1)
    out = sc.run(bootstrap=0)
    assert _row(out, "coherence_random")["value"] == 1.0
    assert out["coherence_trials"]["random"] == 60


def test_both_coherence_scores_get_their_trials_and_interval():
    from conceptlens.metrics import selection as SE
    from conceptlens.metrics.scores import clopper_pearson

    pop = _population(seed=3)
    sel = np.flatnonzero(pop.labels == 0)
    out = SE.score_selection(pop, sel, n_null=5, n_null_id=2, seed=0, bootstrap=0, trials=15)
    assert out["coherence_trials"] == {"random": 15, "hard": 15}
    for kind in ("random", "hard"):
        r = _row(out, f"coherence_{kind}")
        k = int(round(r["value"] * 15))
        assert (r["lo"], r["hi"]) == pytest.approx(clopper_pearson(k, 15, 0.05)), kind


def test_evaluated_members_and_probe_images_partition_the_evaluation_sample():
    from conceptlens.metrics import selection as SE

    pop = _population(n=300, annotator=False)
    sel = np.flatnonzero(pop.labels == 2)
    sc = SE.Scorer(pop, sel, eval_members=20, eval_min=100, n_null=3, n_null_id=1, seed=0)
    out = sc.run(bootstrap=0)
    members = int(np.isin(sc.eval, sel).sum())
    assert out["evaluation_sample"] == len(sc.eval) == 100
    assert out["evaluated_members"] == members and out["probe"] == 100 - members
    assert 0 < members < len(sel)  # a sample: neither none nor all of the set


def test_intrinsic_dimension_of_a_large_set_is_that_of_a_subsample_of_its_members():
    """A set larger than id_points is subsampled: the dimension of a 2-d patch is still 2,
    whichever `id_points` of its members are drawn."""
    from conceptlens.metrics import selection as SE

    rng = np.random.default_rng(0)
    plane = rng.normal(size=(500, 2)) @ rng.normal(size=(2, 10)) * 0.1 + 3.0
    pop = SE.Population(plane, np.zeros(500, np.int64))
    sel = np.arange(400)
    sc = SE.Scorer(pop, sel, id_points=150, n_null=3, n_null_id=1, seed=0)
    dims = [sc.intrinsic_dim(sel, np.random.default_rng(s)) for s in range(3)]
    assert all(1.4 < v < 2.8 for v in dims), dims
    assert len(set(dims)) == 3  # a different subsample per generator


def test_sets_scored_in_batches_get_the_scores_they_get_alone(monkeypatch):
    """Many sets are scored in batches (memory): each set's learnability and purities do
    not depend on which batch it fell in."""
    from conceptlens.metrics import selection as SE

    pop = _population(n=200, annotator=False)
    sc = SE.Scorer(pop, np.flatnonzero(pop.labels == 1), n_null=3, n_null_id=1, seed=0)
    rng = np.random.default_rng(4)
    sets = np.stack([np.sort(rng.choice(200, 30, replace=False)) for _ in range(9)])
    tags = [(0, 1, j) for j in range(9)]
    alone = [sc.score_sets(sets[j : j + 1], tags[j : j + 1], np.zeros(1, bool)) for j in range(9)]
    # Batches of about 2 sets: as many cells as two membership rows or two vote arrays.
    monkeypatch.setattr(SE, "BATCH_CELLS", 2 * max(200, len(sc.eval) * SE.K_NN), raising=False)
    batched = sc.score_sets(sets, tags, np.zeros(9, bool))
    for name in ("learnability", "purity_label", "purity_parity"):
        np.testing.assert_allclose(batched[name], [a[name][0] for a in alone], rtol=1e-12, err_msg=name)
    assert np.isfinite(batched["learnability"]).all()


# ---- metrics/similarity.py -----------------------------------------------------------------------
def test_query_distances_in_chunks_are_every_trials_own_distances():
    """Trials are measured in chunks: every chunk's rows, not the first chunk's again."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(25, 4))
    stim = np.stack([rng.choice(25, 6, replace=False) for _ in range(40)])
    stim[::5, -1] = -1  # padding
    want = np.array([[np.linalg.norm(X[r] - X[t[0]]) if r >= 0 else np.nan for r in t[1:]] for t in stim])
    for chunk in (7, 40, 2048):
        np.testing.assert_allclose(S.query_distances(X, stim, "l2", chunk=chunk), want, rtol=1e-12)


def test_l1_similarity_of_more_rows_than_a_block_is_minus_the_cityblock_distance():
    from scipy.spatial.distance import cdist

    X = np.random.default_rng(1).normal(size=(300, 3))
    np.testing.assert_allclose(
        S.similarity_matrix(X, "l1"), -cdist(X, X, "cityblock"), rtol=1e-12, atol=1e-12
    )


def test_bootstrap_ratio_fills_every_resample_of_a_large_sample():
    """Resamples are drawn in chunks when the units are many (2e6 indices at a time): every
    resample of a sample whose ratio is the same in every unit is that ratio."""
    den = np.random.default_rng(2).integers(1, 5, 4000).astype(np.float64)
    out = S.bootstrap_ratio(2 * den, den, n_boot=520, seed=0)  # chunks of 500 resamples
    assert out.shape == (520, 1) and (out == 2.0).all()


def test_each_null_gets_its_own_intrinsic_dimension_draws():
    """TwoNN is fitted on the first n_null_id sets of EACH null, not of the first one only."""
    from conceptlens.metrics import selection as SE

    pop = _population(annotator=False)
    out = SE.score_selection(pop, np.flatnonzero(pop.labels == 1), n_null=8, n_null_id=3, seed=0, bootstrap=0)
    r = _row(out, "intrinsic_dim")
    assert r["null_random_n"] == 3 and r["null_same_labels_n"] == 3
    assert np.isfinite(r["pct_same_labels"])


def test_exact_euclidean_neighbours_are_right_past_the_first_block_of_pairs():
    """The candidate pairs are measured again in float64 in blocks of 4M / d pairs (1,024 at
    d = 4,096); 500 rows x their candidates are several blocks. Bug caught: every block
    measured as the first one (the first reused for the rest), which gave the later rows the
    first rows' distances. Checked against scikit-learn's brute-force neighbours in float64."""
    from sklearn.neighbors import NearestNeighbors

    from conceptlens import metrics as M

    rng = np.random.default_rng(7)
    centres = rng.normal(size=(10, 4096))
    X = M.l2_normalize(
        (centres[rng.integers(0, 10, 500)] + 0.6 * rng.normal(size=(500, 4096))).astype(np.float32)
    )
    rows, d, j = M.SelfNeighbours(X, m=16).euclidean(np.ones(len(X), bool), k=5)
    X64 = X.astype(np.float64)
    rd, rj = NearestNeighbors(n_neighbors=6, algorithm="brute").fit(X64).kneighbors(X64)
    assert np.array_equal(rows, np.arange(500))
    np.testing.assert_array_equal(j, rj[:, 1:])
    np.testing.assert_allclose(d, rd[:, 1:], rtol=1e-9)


def test_rsa_bootstrap_is_the_spearman_correlation_of_the_two_matrices_pairs():
    """`rsa_bootstrap(sim_a, sim_b, groups)` scores sim_a against the reference sim_b. Bug
    caught: the reference and the groups passed the other way round. Checked against scipy's
    Spearman correlation of the two matrices' upper triangles, overall and for a group (its
    pairs: those with at least one of its images)."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(5)
    a = rng.normal(size=(12, 12))
    a = a + a.T
    b = a + rng.normal(scale=1.5, size=(12, 12))
    b = b + b.T
    groups = {"first four": np.arange(4)}
    out = S.rsa_bootstrap(a, b, groups, n_boot=50, seed=0)
    iu = np.triu_indices(12, 1)
    assert out[None][0] == pytest.approx(spearmanr(a[iu], b[iu])[0], abs=1e-12)
    pair = (iu[0] < 4) | (iu[1] < 4)
    assert out["first four"][0] == pytest.approx(spearmanr(a[iu][pair], b[iu][pair])[0], abs=1e-12)
