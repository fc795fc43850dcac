"""Concept scores of a selection (issue 26 item 1): each score against a value computed
another way, hand-built sets whose answer is known, and the nulls."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from sklearn.neighbors import KNeighborsClassifier

from conceptlens.metrics import selection as S


def _population(n=300, n_labels=6, d=12, noise=0.3, seed=0, annotator=True):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_labels, n)
    centres = rng.normal(size=(n_labels, d))
    X = centres[labels] + noise * rng.normal(size=(n, d))
    factors = {"parity": labels % 2, "noise": rng.integers(0, 3, n)}
    A = np.eye(n_labels)[labels] if annotator else None
    return S.Population(X, labels, factors, A)


def _row(out, name):
    return next(r for r in out["scores"] if r["score"] == name)


def test_learnability_equals_a_leave_one_out_sklearn_knn():
    pop = _population(n=200, noise=1.2, seed=1)
    sel = np.flatnonzero(pop.labels <= 1)
    sc = S.Scorer(pop, sel, probe=120, eval_members=40, seed=3)
    member = np.zeros(len(pop.X), bool)
    member[sel] = True

    def share(q):  # sklearn's weighted 20-NN on every other image: P(in the set)
        others = np.delete(np.arange(len(pop.X)), q)
        knn = KNeighborsClassifier(
            n_neighbors=S.K_NN, metric="cosine", weights=lambda d: np.exp((1 - d) / S.TEMPERATURE)
        )
        knn.fit(pop.X[others], member[others])
        return knn.predict_proba(pop.X[q : q + 1])[0, list(knn.classes_).index(True)]

    pos = [share(q) for q in sc.sel_eval]
    neg = [share(q) for q in sc.probe if not member[q]]
    want = roc_auc_score([1] * len(pos) + [0] * len(neg), pos + neg)
    got = sc.learnability(member, sc.sel_eval)
    assert got == pytest.approx(want, abs=1e-9)
    assert 0.6 < got < 1  # neither chance nor trivial on this input


def test_intrinsic_dimension_equals_scikit_dimension():
    skdim = pytest.importorskip("skdim")
    rng = np.random.default_rng(0)
    # A 3-d linear patch in 12 dimensions, away from the origin (the rows are unit-normalised).
    Z = rng.normal(size=(400, 3)) @ rng.normal(size=(3, 12)) * 0.1 + 5 * np.ones(12)
    pop = S.Population(Z, np.zeros(400, np.int64))
    sel = np.arange(300)
    sc = S.Scorer(pop, sel, id_points=300, seed=0)
    got = sc.intrinsic_dim(sel, np.random.default_rng(0))
    want = skdim.id.TwoNN(discard_fraction=0.1).fit(pop.X[sel].astype(np.float64)).dimension_
    assert got == pytest.approx(want, rel=1e-6)
    assert 2 < got < 4.5


def test_a_set_equal_to_one_label_is_pure_learnable_coherent_and_far_above_random_sets():
    pop = _population(seed=2)
    sel = np.flatnonzero(pop.labels == 3)
    out = S.score_selection(pop, sel, n_null=100, seed=0)
    r = {x["score"]: x for x in out["scores"]}
    assert r["purity_label"]["value"] == pytest.approx(1.0)
    assert r["purity_parity"]["value"] == pytest.approx(1.0)
    assert r["learnability"]["value"] > 0.97
    assert r["learnability"]["lo"] <= r["learnability"]["value"] <= r["learnability"]["hi"]
    # One-hot label annotator: the query always wins against a non-member.
    assert r["coherence_random"]["value"] == 1 and r["coherence_hard"]["value"] == 1
    assert r["coherence_random"]["lo"] == pytest.approx(S.clopper_pearson(20, 20)[0])
    for name in ("learnability", "purity_label", "coherence_random"):
        assert r[name]["pct_random"] > 97, name
    # Within the same labels every draw IS that label: identical purity, the 50th percentile.
    assert r["purity_label"]["pct_same_labels"] == 50
    assert out["size"] == len(sel) and out["label_histogram"] == [(3, len(sel))]


def test_a_random_set_sits_near_the_middle_of_its_null():
    pcts = {"learnability": [], "purity_label": [], "coherence_random": []}
    for seed in range(16):
        pop = _population(n=600, seed=100 + seed)
        sel = np.random.default_rng([seed, 7]).choice(600, 80, replace=False)
        # Probe and evaluated members far fewer than the images, as on a real dataset.
        out = S.score_selection(
            pop, sel, probe=200, eval_members=40, n_null=60, n_null_id=0, seed=seed, bootstrap=50
        )
        for k in pcts:
            pcts[k].append(_row(out, k)["pct_random"])
    for k, v in pcts.items():
        # Uniform percentiles: the mean of 16 has sd ~7; a label set scores > 97 (above).
        assert 30 < np.mean(v) < 70, (k, v)


def test_nulls_keep_the_size_and_the_label_histogram():
    pop = _population(seed=4)
    sel = np.flatnonzero((pop.labels == 1) | (pop.labels == 2))[:70]
    sc = S.Scorer(pop, sel, probe=150, eval_members=30, seed=0)
    rng = np.random.default_rng(0)
    for within in (False, True):
        members, ev = sc.draw(rng, within)
        assert len(np.unique(members)) == len(sel)
        # Within labels the reserve may hold fewer of a label than its share: never more.
        assert len(ev) == sc.m if not within else 0 < len(ev) <= sc.m
        assert np.isin(ev, sc.reserve).all() and np.isin(ev, members).all()
        if within:
            got = np.bincount(pop.labels[members], minlength=6)
            assert (got == np.bincount(pop.labels[sel], minlength=6)).all()


def test_percentile_counts_ties_half():
    assert S.percentile(0.5, np.array([0.1, 0.5, 0.9, 0.2])) == pytest.approx(62.5)
    assert np.isnan(S.percentile(0.5, np.array([np.nan])))


def test_bad_selections_are_named():
    pop = _population(n=50)
    with pytest.raises(ValueError, match="empty"):
        S.Scorer(pop, [])
    with pytest.raises(ValueError, match=r"\[0, 50\)"):
        S.Scorer(pop, [60])
    with pytest.raises(ValueError, match="fewer than 2"):
        S.Scorer(pop, np.arange(49))


# ---- the view and the command line on a workspace -------------------------------------------------
@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    from tests.factory import factor_workspace

    return factor_workspace(tmp_path_factory.mktemp("sel") / "ws")


def test_view_selects_by_ids_label_and_factor(ws):
    from conceptlens.db import WorkspaceDB
    from conceptlens.views import selection as V

    db = WorkspaceDB(ws.root)
    ids, meta, pop = V.population(db, "toy-ckpt0")
    assert "size" not in V.factor_columns(meta)  # continuous: no purity
    by_shape = V.select(ids, meta, factor=("shape", str(meta["shape"].iloc[0])))
    assert (meta["shape"].iloc[by_shape] == meta["shape"].iloc[0]).all()
    lab = V.select(ids, meta, label=str(meta["label"].iloc[0]))
    assert (pop.labels[lab] == pop.labels[lab[0]]).all()
    assert V.select(ids, meta, image_ids=[ids[3], ids[1], ids[3]]).tolist() == [1, 3]
    with pytest.raises(V.SelectionError, match="no features"):
        V.select(ids, meta, image_ids=["nope"])
    with pytest.raises(V.SelectionError, match="no factor column 'nope'"):
        V.select(ids, meta, factor=("nope", "x"))
    out = V.score(db, "toy-ckpt0", label=str(meta["label"].iloc[0]), n_null=30, seed=0)
    assert _row(out, "purity_label")["value"] == pytest.approx(1.0)
    db.close()


def test_cli_score_prints_scores_with_percentiles(ws, tmp_path, capsys):
    from conceptlens.cli import main

    f = tmp_path / "ids.csv"
    f.write_text("image_id\n" + "\n".join(f"img-{i:04d}" for i in range(0, 240, 3)) + "\n")
    assert (
        main(
            [
                "score",
                "--workspace",
                str(ws.root),
                "--checkpoint",
                "toy-ckpt0",
                "--ids",
                str(f),
                "--null",
                "20",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "80 images" in out and "learnability" in out and "percentile" in out and "purity_shape" in out
    with pytest.raises(SystemExit):
        main(["score", "--workspace", str(ws.root), "--checkpoint", "toy-ckpt0", "--factor", "shape"])
    assert "expected column=value" in capsys.readouterr().err
    assert main(["score", "--workspace", str(ws.root), "--checkpoint", "nope", "--label", "1"]) == 1
    assert "no checkpoint 'nope'" in capsys.readouterr().err
