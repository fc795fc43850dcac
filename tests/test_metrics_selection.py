"""conceptlens/metrics/selection.py: a selection's scores and nulls, each against a value computed
another way. Each test is written against a data-flow bug (issue 29; tools/dataflow_mutants.py): a
filter not applied, the first element used for every one, two arguments swapped, a sort the wrong
way."""

from __future__ import annotations

import numpy as np
import pytest

from conceptlens import rng as R


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


def test_each_null_gets_its_own_intrinsic_dimension_draws():
    """TwoNN is fitted on the first n_null_id sets of EACH null, not of the first one only."""
    from conceptlens.metrics import selection as SE

    pop = _population(annotator=False)
    out = SE.score_selection(pop, np.flatnonzero(pop.labels == 1), n_null=8, n_null_id=3, seed=0, bootstrap=0)
    r = _row(out, "intrinsic_dim")
    assert r["null_random_n"] == 3 and r["null_same_labels_n"] == 3
    assert np.isfinite(r["pct_same_labels"])


# ---- metrics/selection.py ------------------------------------------------------------------------
def _population_parity_only(n=240, n_labels=4, d=8, noise=0.4, seed=0, annotator=True):
    from conceptlens.metrics import selection as SE

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_labels, n)
    X = rng.normal(size=(n_labels, d))[labels] + noise * rng.normal(size=(n, d))
    factors = {"parity": labels % 2}
    A = np.eye(n_labels)[labels] if annotator else None
    return SE.Population(X, labels, factors, A)


def test_every_set_with_a_twonn_fit_gets_its_own_dimension():
    """20 sets with with_id (three jobs of 8): each set's intrinsic dimension is the one
    Scorer.intrinsic_dim gives for it with its own tag's generator. Catches the first chunk
    of 8 fitted again in place of the later ones."""
    from conceptlens.metrics import selection as SE

    pop = _population_parity_only(annotator=False)
    sc = SE.Scorer(pop, np.flatnonzero(pop.labels == 1), n_null=3, n_null_id=1, id_points=30, seed=0)
    rng = np.random.default_rng(5)
    sets = np.stack([np.sort(rng.choice(240, 40, replace=False)) for _ in range(20)])
    tags = [(0, 1, j) for j in range(20)]
    out = sc.score_sets(sets, tags, np.ones(20, bool))
    want = [
        sc.intrinsic_dim(sets[i], R.stream(tags[i][0], "selection.intrinsic_dim", tags[i][1:]))
        for i in range(20)
    ]
    assert np.isfinite(want).all()
    np.testing.assert_allclose(out["intrinsic_dim"], want, rtol=1e-12)


def test_a_failing_part_of_the_scores_is_raised_not_left_missing():
    """A TwoNN fit that raises (here: on purpose) makes score_sets raise, whichever job it
    ran in. Catches only the first job's result being collected (the others' errors would be
    swallowed and their scores left NaN)."""
    from conceptlens.metrics import selection as SE

    pop = _population_parity_only(annotator=False)
    sc = SE.Scorer(pop, np.flatnonzero(pop.labels == 1), n_null=3, n_null_id=1, seed=0)

    def boom(members, tag):
        raise RuntimeError("fit failed")

    sc._intrinsic_dim_of = boom
    sets = np.stack([np.arange(30), np.arange(30, 60)])
    with pytest.raises(RuntimeError, match="fit failed"):
        sc.score_sets(sets, [(0, 1, 0), (0, 1, 1)], np.ones(2, bool))


def test_each_null_fits_twonn_on_its_first_n_null_id_sets():
    """Both nulls, n_null_id of n_null sets each (and n_null when n_null_id exceeds it):
    every null's intrinsic-dimension row counts that many finite fits. Catches the TwoNN
    sets marked for the first null only."""
    from conceptlens.metrics import selection as SE

    pop = _population_parity_only(annotator=False)
    sel = np.flatnonzero(pop.labels == 1)
    for n_null, n_null_id in ((6, 3), (4, 9)):
        out = SE.score_selection(pop, sel, n_null=n_null, n_null_id=n_null_id, seed=0, bootstrap=0)
        r = next(r for r in out["scores"] if r["score"] == "intrinsic_dim")
        for w in SE.NULLS:
            assert r[f"null_{w}_n"] == min(n_null, n_null_id), (w, n_null, n_null_id)


def test_a_nulls_scores_do_not_depend_on_the_other_nulls_asked_for():
    """The same_labels null scored alone and beside the random null: its draws are seeded by
    its own name, and so are its sets' coherence trials and TwoNN subsamples (tags), so its
    null rows are the same either way. Catches the random null's tags given to every null's
    sets."""
    from conceptlens.metrics import selection as SE

    rng = np.random.default_rng(1)
    labels = rng.integers(0, 3, 240)
    X = rng.normal(size=(3, 6))[labels] + 0.8 * rng.normal(size=(240, 6))
    A = X / np.linalg.norm(X, axis=1, keepdims=True)
    pop = SE.Population(X, labels, {}, A)
    sel = np.flatnonzero(labels == 1)
    kw = dict(n_null=8, n_null_id=8, id_points=20, trials=15, seed=0, bootstrap=0)
    alone = SE.score_selection(pop, sel, nulls=("same_labels",), **kw)
    both = SE.score_selection(pop, sel, nulls=("random", "same_labels"), **kw)
    for name in ("coherence_random", "coherence_hard", "intrinsic_dim"):
        a = next(r for r in alone["scores"] if r["score"] == name)
        b = next(r for r in both["scores"] if r["score"] == name)
        assert a["null_same_labels_n"] == 8, name
        cols = [c for c in a if c.startswith("null_same_labels") or c == "pct_same_labels"]
        assert {c: a[c] for c in cols} == pytest.approx({c: b[c] for c in cols}, rel=1e-12), name


def test_trial_picks_are_trials_rows_of_distinct_members():
    """A set large enough for one permutation: _picks gives `trials` rows of refs + 1
    distinct members (its docstring's shape), together distinct. Catches the permutation
    reshaped to (refs + 1) x trials."""
    from conceptlens.metrics import selection as SE

    pop = _population_parity_only()
    sc = SE.Scorer(pop, np.arange(5), n_null=3, n_null_id=1, trials=7, refs=3, seed=0)
    members = np.arange(100, 160)
    pick = sc._picks(members, np.random.default_rng(0))
    assert pick.shape == (7, 4)
    assert len(np.unique(pick)) == pick.size and np.isin(pick, members).all()
