"""Concept scores of a selection (issue 26 item 1): each score against a value computed
another way, hand-built sets whose answer is known, and the nulls."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from sklearn.neighbors import KNeighborsClassifier

from conceptlens.metrics import selection as S
from conceptlens.metrics.scores import purity


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
    sc = S.Scorer(pop, sel, eval_members=30, eval_min=120, seed=3)
    assert len(sc.eval) == 120  # a sample, not every image
    member = np.zeros(len(pop.X), bool)
    member[sel] = True

    def share(q):  # sklearn's weighted 20-NN on every other image: P(in the set)
        others = np.delete(np.arange(len(pop.X)), q)
        knn = KNeighborsClassifier(
            n_neighbors=S.K_NN, metric="cosine", weights=lambda d: np.exp((1 - d) / S.TEMPERATURE)
        )
        knn.fit(pop.X[others], member[others])
        return knn.predict_proba(pop.X[q : q + 1])[0, list(knn.classes_).index(True)]

    want = roc_auc_score(member[sc.eval], [share(q) for q in sc.eval])
    got = sc.learnability(member[None])[0]
    assert got == pytest.approx(want, abs=1e-9)
    assert 0.6 < got < 1  # neither chance nor trivial on this input


def test_the_neighbour_search_matches_the_exact_numpy_one_and_is_kept():
    from conceptlens.metrics.neighbors import nearest_cosine

    pop = _population(n=400, d=16, noise=1.0, seed=5)
    nb = pop.neighbours(0)
    rows, sims, nn = nb.prefix(150)
    want_s, want_i = nearest_cosine(pop.X[rows], pop.X, k=S.K_NN, exclude=rows, normalized=True)
    assert (nn == want_i).mean() > 0.99 and np.allclose(sims, want_s, atol=1e-5)
    assert not (nn == rows[:, None]).any()  # never the image itself
    rows2, _, nn2 = pop.neighbours(0).prefix(100)  # the kept search: a prefix of it
    assert pop.neighbours(0) is nb and (nn2 == nn[:100]).all() and (rows2 == rows[:100]).all()


def test_bootstrap_auc_equals_sklearn_with_sample_weights():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 6, 40) / 5, rng.integers(0, 6, 70) / 5  # many ties
    wa, wb = S._draw_counts(rng, len(a), 5), S._draw_counts(rng, len(b), 5)
    got = S.weighted_aucs(a, b, wa, wb)
    for r in range(5):
        y = np.r_[np.ones(len(a)), np.zeros(len(b))]
        want = roc_auc_score(y, np.r_[a, b], sample_weight=np.r_[wa[r], wb[r]])
        assert got[r] == pytest.approx(want, abs=1e-12)
    assert (wa.sum(axis=1) == len(a)).all()


def test_vectorised_purities_and_answers_equal_the_per_set_functions():
    from conceptlens.metrics.coherence import Trials, annotate

    rng = np.random.default_rng(1)
    codes = rng.integers(-1, 4, (7, 30))
    got = S.purities(codes, 5)
    for i, row in enumerate(codes):
        assert got[i] == pytest.approx(purity(row[row >= 0], 5)[0], abs=1e-12)
    A = rng.normal(size=(50, 6))
    tr = Trials(
        np.zeros(40, int), rng.integers(0, 50, (40, 10)), rng.integers(0, 50, 40), rng.integers(0, 50, 40), []
    )
    unit = A / np.linalg.norm(A, axis=1, keepdims=True)
    assert (S.answers(tr, unit, np.zeros(40, bool)) == annotate(tr, A, 0)).all()


def test_intrinsic_dimension_equals_scikit_dimension_and_twonn():
    skdim = pytest.importorskip("skdim")
    from conceptlens.metrics.intrinsic import twonn

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
    dup = np.concatenate([pop.X[:200], pop.X[:20]])  # duplicates are dropped first
    assert S.twonn_small(dup) == pytest.approx(twonn(dup)[0], rel=1e-6)


def test_a_set_equal_to_one_label_is_pure_learnable_coherent_and_far_above_random_sets():
    pop = _population(seed=2)
    sel = np.flatnonzero(pop.labels == 3)
    out = S.score_selection(pop, sel, n_null=100, seed=0)
    r = {x["score"]: x for x in out["scores"]}
    assert r["purity_label"]["value"] == pytest.approx(1.0)
    # Every image is that label, but the population it came from may hold others unseen: the
    # interval (Jeffreys posterior of the shares) ends at 1 and starts below, the nearer 1
    # the more images were seen.
    assert r["purity_label"]["hi"] == pytest.approx(1.0) and 0.5 < r["purity_label"]["lo"] < 1.0
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


def _calibration(pop, n_sets, size, **kw):
    """Percentiles among random sets of `n_sets` random selections."""
    pcts: dict = {}
    for s in range(n_sets):
        sel = np.random.default_rng([s, 7]).choice(len(pop.X), size, replace=False)
        # One evaluation sample (one neighbour search), fresh null draws for each selection.
        out = S.score_selection(pop, sel, nulls=("random",), seed=s, eval_seed=0, bootstrap=0, **kw)
        for r in out["scores"]:
            pcts.setdefault(r["score"], []).append(r["pct_random"])
    return {k: np.array(v) for k, v in pcts.items()}


def _uniform(v, name):
    v = v[np.isfinite(v)]
    # Uniform percentiles: the mean of 30 has sd ~5; about 10 % at 5 or less or 95 or more.
    assert 35 < v.mean() < 65, (name, np.sort(v))
    assert np.mean((v <= 5) | (v >= 95)) <= 0.25, (name, np.sort(v))


def test_random_sets_have_uniform_percentiles_among_their_null():
    # Tight pairs of near-duplicates within labels: a kNN vote there hinges on one neighbour,
    # which made the old null (evaluated members from a fixed reserve) far narrower than the
    # spread of random selections (percentiles piling up at 0 and 100).
    rng = np.random.default_rng(3)
    base = _population(n=400, noise=0.5, seed=9, annotator=False)
    X = np.repeat(base.X, 2, axis=0) + 0.01 * rng.normal(size=(800, base.X.shape[1]))
    pop = S.Population(X, np.repeat(base.labels, 2), annotator=np.eye(6)[np.repeat(base.labels, 2)])
    pcts = _calibration(pop, 30, 60, eval_members=20, eval_min=200, n_null=60, n_null_id=10)
    for name in ("learnability", "purity_label", "coherence_random", "intrinsic_dim"):
        _uniform(pcts[name], name)


def test_random_selections_of_the_demo_are_distributed_as_their_null(demo_ws):
    from conceptlens.db import WorkspaceDB
    from conceptlens.views import selection as V

    db = WorkspaceDB(demo_ws)
    try:
        _, _, pop = V.population(db, "shapes-simclr-e20", annotator="none")
    finally:
        db.close()
    n, size = len(pop.X), 500
    # Learnability, the score whose null was off here: 150 random selections of 500 images
    # against 400 random-set draws (one evaluation sample, as for one seed). The previous
    # null (evaluated members of a draw from a fixed reserve) ran a quarter of its sd above
    # random selections on these inputs: percentiles averaged 42 with this very procedure.
    sc = S.Scorer(pop, np.arange(size), n_null=400, nulls=("random",), seed=0)
    null = sc.learnability(_members(sc.draws("random", np.random.default_rng(1)), n))
    sels = _members(
        np.stack([np.random.default_rng([s, 5]).choice(n, size, replace=False) for s in range(150)]), n
    )
    vals = sc.learnability(sels)
    pct = np.array([S.percentile(v, null) for v in vals])
    assert 45 < pct.mean() < 55, pct.mean()
    assert abs(vals.mean() - null.mean()) < 0.1 * null.std()
    _uniform(pct, "learnability")


def _members(sets, n):
    m = np.zeros((len(sets), n), bool)
    m[np.arange(len(sets))[:, None], sets] = True
    return m


def test_the_selection_is_scored_like_any_set_of_the_batch():
    pop = _population(n=500, noise=0.8, seed=6)
    sel = np.flatnonzero(pop.labels == 2)[:50]
    sc = S.Scorer(pop, sel, n_null=30, seed=4)
    out = sc.run(bootstrap=0)
    alone = sc.score_sets(sel[None, :], [(4, 0, 0)], np.array([True]))
    for r in out["scores"]:
        assert alone[r["score"]][0] == pytest.approx(r["value"], nan_ok=True), r["score"]


def test_nulls_keep_the_size_and_the_label_histogram():
    pop = _population(seed=4)
    sel = np.flatnonzero((pop.labels == 1) | (pop.labels == 2))[:70]
    sc = S.Scorer(pop, sel, n_null=25, seed=0)
    rng = np.random.default_rng(0)
    for which in S.NULLS:
        sets = sc.draws(which, rng)
        assert sets.shape == (25, len(sel))
        assert all(len(np.unique(s)) == len(sel) for s in sets)
        if which == "same_labels":
            for s in sets:
                assert (
                    np.bincount(pop.labels[s], minlength=6) == np.bincount(pop.labels[sel], minlength=6)
                ).all()
    assert len({tuple(s) for s in sets}) == 25  # different draws


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
    with pytest.raises(ValueError, match="nulls must be among"):
        S.Scorer(pop, [1, 2], nulls=("nope",))


# ---- the view and the command line on a workspace -------------------------------------------------
@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    from harness.factory import factor_workspace

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
    assert out["describability"]["available"] is False  # not asked
    # Asked, with a stand-in embedder (no sentence model): the workspace says what is missing.
    out = V.score(db, "toy-ckpt0", label=str(meta["label"].iloc[0]), n_null=5, describe=True, embed=len)
    d = out["describability"]
    assert d["available"] or "cluster_captions" in d["reason"], d
    db.close()


def test_across_scores_every_checkpoint_of_the_dataset_and_draws_it(ws):
    from conceptlens.db import WorkspaceDB
    from conceptlens.figures.selection import across_figure
    from conceptlens.views import selection as V

    db = WorkspaceDB(ws.root)
    try:
        ds = db.query("SELECT dataset FROM checkpoints WHERE checkpoint_id = 'toy-ckpt0'")["dataset"][0]
        cks = V.dataset_checkpoints(db, ds)
        ids, meta, _ = V.population(db, "toy-ckpt0")
        value = str(meta["shape"].iloc[0])
        t = V.across(db, ds, factor=("shape", value), n_null=20, seed=0)
        with pytest.raises(V.SelectionError, match="no checkpoint 'nope'"):
            V.across(db, ds, checkpoints=["nope"], label="1")
        one = V.score(db, "toy-ckpt0", factor=("shape", value), n_null=20, seed=0)
    finally:
        db.close()
    scored = set(t["checkpoint_id"]) | set(t.attrs["skipped"])
    assert scored == set(cks["checkpoint_id"]) and len(set(t["checkpoint_id"])) >= 2
    assert list(t.columns[: len(V.ACROSS_COLUMNS)]) == list(V.ACROSS_COLUMNS)
    # Each checkpoint's rows are that checkpoint's own scores.
    mine = t[t["checkpoint_id"] == "toy-ckpt0"].set_index("score")["value"]
    for r in one["scores"]:
        assert mine[r["score"]] == pytest.approx(r["value"], nan_ok=True), r["score"]
    assert (t.loc[t["score"] == "purity_shape", "value"] == 1.0).all()
    fig = across_figure(t)
    titles = [a.text for a in fig.layout.annotations]
    assert "learnability" in titles  # readable names, not column names
    # Purity is the images' own, the same on every checkpoint: the table keeps it, the figure not.
    assert not any(a.startswith("purity") for a in titles), titles
    assert t.loc[t["score"] == "purity_label", "value"].nunique() == 1
    assert "purity (labels)" in [
        a.text for a in across_figure(t, ("learnability", "purity_label")).layout.annotations
    ]
    # Checkpoints of one run are joined by a line, those outside any run are points alone.
    for tr in fig.data:
        if tr.name != "random sets (median)":
            assert tr.mode == ("markers" if tr.name == "checkpoints outside a run" else "lines+markers"), (
                tr.name
            )
    ys = [tr.y for tr in fig.data if tr.name != "random sets (median)" and tr.xaxis == "x"]
    assert sum(len(y) for y in ys) == len(set(t["checkpoint_id"]))  # one point per checkpoint


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


def test_cli_score_across_prints_writes_the_table_and_the_figure(ws, tmp_path, capsys):
    import pandas as pd

    from conceptlens.cli import main

    csv, html = tmp_path / "across.csv", tmp_path / "across.html"
    args = ["score", "--workspace", str(ws.root), "--across", "toy", "--label", "1", "--null", "10"]
    assert main([*args, "--csv", str(csv), "--figure", str(html)]) == 0
    out = capsys.readouterr().out
    assert "learnability" in out and "toy-ckpt0" in out and "pct random" in out
    t = pd.read_csv(csv)
    assert {"checkpoint_id", "epoch", "value", "lo", "hi", "pct_random"} <= set(t.columns)
    page = html.read_text()
    assert "plotly" in page and 'src="https://cdn.plot.ly' not in page  # plotly.js inlined: works offline
    # Another format, with its provenance (the dataset and what was selected) read back.
    from conceptlens.figures.export import read_provenance

    svg = tmp_path / "across.svg"
    assert main([*args, "--figure", str(svg)]) == 0
    prov = read_provenance(svg.read_bytes(), "svg")
    assert prov["dataset"] == "toy" and prov["selection"] == "1" and prov["figure"] == "selection_across"
    assert main(["score", "--workspace", str(ws.root), "--across", "nope", "--label", "1"]) == 1
    assert "no checkpoint of dataset 'nope'" in capsys.readouterr().err


def _captions(n=60, seed=0):
    """Captions of three topics (orthogonal directions plus noise): rows 0-19 topic 0."""
    rng = np.random.default_rng(seed)
    topic = np.repeat([0, 1, 2], n // 3)
    E = np.eye(8)[topic] + 0.2 * rng.normal(size=(n, 8))
    has = np.ones(n, bool)
    has[[5, 30]] = False  # two images without a caption
    text = np.array([f"caption {i}" for i in range(n)], dtype=object)
    return topic, E, has, text


def test_class_caption_is_eq4_of_the_set_against_the_rest_and_top1_retrieval():
    from conceptlens.metrics.captions import class_captions

    topic, E, has, text = _captions()
    member = topic == 0
    cap = S.Captions(E, has, text, np.eye(8)[[1, 2]], ["topic one", "topic two"], "groundtruth")
    row, score = S.class_caption(cap, member)
    want = class_captions(E[has], member[has].astype(int))[1]  # Eq. 4 on the captioned images
    # (eq4_scores normalises in float32: equal to 1e-7)
    assert row == np.flatnonzero(has)[want[0]] and score == pytest.approx(want[1], abs=1e-6)
    d = S.describability(cap, member)
    assert d["n"] == 19 and d["top1"] == 1.0  # every member's caption is nearest its own topic
    # A competing caption identical to the set's: every member ties, half a hit each.
    tied = S.Captions(E, has, text, np.r_[E[[row]], np.eye(8)[[1]]], ["same", "one"], "groundtruth")
    assert S.describability(tied, member)["top1"] == pytest.approx(0.5)
    # A set whose caption describes a topic the clusters' captions own better: few hits.
    mixed = S.Captions(E, has, text, np.eye(8)[[0, 1, 2]], ["0", "1", "2"], "groundtruth")
    assert S.describability(mixed, member)["top1"] < 0.5


def test_describability_in_the_scores_with_its_null():
    topic, E, has, text = _captions(n=90, seed=1)
    pop = S.Population(np.eye(3)[topic] + 0.3 * np.random.default_rng(0).normal(size=(90, 3)), topic)
    pop.captions = S.Captions(E, has, text, np.eye(8)[[1, 2]], ["one", "two"], "groundtruth")
    out = S.score_selection(pop, np.flatnonzero(topic == 0), n_null=30, n_null_id=30, seed=0)
    r = _row(out, "describability_top1")
    assert r["value"] == 1.0 and r["pct_random"] > 95 and r["null_random_n"] == 30
    assert out["describability"]["caption"].startswith("caption ") and out["describability"]["available"]
    pop.captions = S.Captions(unavailable="no captions here")
    out = S.score_selection(pop, np.flatnonzero(topic == 0), n_null=5, seed=0)
    assert out["describability"] == {"available": False, "reason": "no captions here"}
    assert "describability_top1" not in {x["score"] for x in out["scores"]}


def test_purity_interval_holds_the_value_for_a_random_set():
    # 40 labels, 500 random images: purity near 0, where every resample's plug-in purity is
    # higher than the set's (the percentile interval missed it from above, the basic one
    # from below).
    pop = _population(n=5000, n_labels=40, seed=8, annotator=False)
    sel = np.random.default_rng(0).choice(5000, 500, replace=False)
    out = S.score_selection(pop, sel, n_null=5, n_null_id=0, seed=0)
    for name in ("purity_label", "purity_parity", "purity_noise"):
        r = _row(out, name)
        assert 0 <= r["lo"] <= r["value"] <= r["hi"] <= 1, r
    assert _row(out, "purity_label")["hi"] > _row(out, "purity_label")["value"]


def test_across_figure_names_at_most_twelve_checkpoints_without_their_shared_prefix():
    """29 checkpoint names along one column ran into each other: every n-th is named, the
    dataset prefix they share left out, every point kept (its name in the hover)."""
    import pandas as pd

    from conceptlens.figures.selection import MAX_TICKS, across_figure

    ids = [f"shapes-run{j // 3}-e{j % 3}" for j in range(29)]
    t = pd.DataFrame(
        {
            "checkpoint_id": ids,
            "run": [i.rsplit("-", 1)[0] for i in ids],
            "epoch": [j % 3 for j in range(29)],
            "score": "learnability",
            "value": 0.8,
            "lo": 0.7,
            "hi": 0.9,
            "pct_random": 99.0,
            "null_random_median": 0.5,
        }
    )
    fig = across_figure(t)
    axis = fig.layout.xaxis
    assert len(axis.ticktext) <= MAX_TICKS and axis.ticktext[0] == "run0-e0 (e0)"
    assert sum(len(tr.x) for tr in fig.data if tr.name != "random sets (median)") == 29


def test_across_figure_joins_a_runs_checkpoints_only():
    """Two unrelated models (no run) and a run of three epochs: the run's checkpoints are one
    line, the unrelated ones points with no line between them (issue 47: MobileNetV2 and
    Lite0 were joined)."""
    import pandas as pd

    from conceptlens.figures.selection import across_figure

    ids = ["mobilenet", "lite0", "r-e0", "r-e1", "r-e2"]
    t = pd.DataFrame(
        {
            "checkpoint_id": ids,
            "run": [None, None, "r", "r", "r"],
            "epoch": [None, None, 0, 1, 2],
            "score": "learnability",
            "value": [0.6, 0.7, 0.5, 0.6, 0.8],
            "lo": 0.4,
            "hi": 0.9,
            "pct_random": 90.0,
            "null_random_median": 0.5,
        }
    )
    traces = {tr.name: tr for tr in across_figure(t).data if tr.name != "random sets (median)"}
    assert set(traces) == {"r", "checkpoints outside a run"}
    assert traces["r"].mode == "lines+markers" and list(traces["r"].x) == ids[2:]
    alone = traces["checkpoints outside a run"]
    assert alone.mode == "markers" and list(alone.x) == ids[:2]


def test_neighbours_do_not_depend_on_the_prefixes_asked_before():
    """The evaluation sample's neighbours are searched in fixed blocks of the order: asked
    in one go, in small steps, or by prepare (the background search), they are the same
    bits, so no score depends on which selections came before (a BLAS search's last bits
    depend on the rows searched together: here one search of 2,500 rows and one of 10 then
    2,490 give other similarities)."""
    pop = _population(n=3000, d=64, noise=1.0, seed=11)
    once = S.Neighbours(pop.X, 0).prefix(2500)
    steps = S.Neighbours(pop.X, 0)
    for L in (10, 1100, 1500, 2500):
        got = steps.prefix(L)
    prepared = S.Neighbours(pop.X, 0)
    prepared.prepare(2500)
    assert prepared.searched() == 3000  # whole blocks: 1024, 2048, then the last 952
    for other in (got, prepared.prefix(2500)):
        assert all(np.array_equal(a, b) for a, b in zip(once, other))


def test_scores_do_not_depend_on_threads_or_a_background_search(monkeypatch):
    """The parts of one selection's scores run on threads and the neighbour search may run
    in the background (Population.prepare): the scores are those of one thread and no
    search before."""
    rng = np.random.default_rng(3)
    sel = rng.choice(1500, 200, replace=False)
    monkeypatch.setattr(S, "THREADS", 1)
    want = S.score_selection(_population(n=1500, seed=8), sel, n_null=40)
    monkeypatch.setattr(S, "THREADS", 4)
    pop = _population(n=1500, seed=8)
    pop.prepare(seed=0, upto=1500)  # running while the selection is scored
    got = S.score_selection(pop, sel, n_null=40)
    assert got["scores"] == want["scores"]
    assert np.isfinite([r["value"] for r in got["scores"]]).all()


def test_a_kept_population_is_read_again_when_its_features_or_labels_change(tmp_path):
    """The view keeps a checkpoint's population (and its neighbour search) for the next
    selection; rewriting its features or images.parquet must not leave the old one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from conceptlens.db import WorkspaceDB
    from conceptlens.views import selection as V
    from harness.factory import factor_workspace, write_features

    ws = factor_workspace(tmp_path / "ws")
    db = WorkspaceDB(ws.root)
    ids, meta, pop = V.population(db, "toy-ckpt0")
    assert V.population(db, "toy-ckpt0")[2] is pop  # kept
    label = str(meta["label"].iloc[0])
    before = _row(V.score(db, "toy-ckpt0", label=label, n_null=10), "learnability")["value"]
    rng = np.random.default_rng(0)
    write_features(ws, "toy-ckpt0", list(ids), rng.normal(size=(len(ids), pop.X.shape[1])))
    _, _, pop2 = V.population(db, "toy-ckpt0")
    assert pop2 is not pop and not np.allclose(pop2.X, pop.X)
    after = _row(V.score(db, "toy-ckpt0", label=label, n_null=10), "learnability")["value"]
    assert after != before and after < 0.8  # random features: the label is not learnable
    # views.selection.prepare (the panel's, before a selection): the kept population's
    # evaluation order searched in the background, up to the largest sample
    V.prepare(db, "toy-ckpt1").join()
    ids1, _, kept = V.population(db, "toy-ckpt1")
    assert kept.neighbours(0).searched() == len(ids1)  # no selection scored there
    images = pq.read_table(ws.table_path("images")).to_pandas()
    images.loc[images["image_id"] == ids[0], "label"] = 99
    ws.write("images", pa.Table.from_pandas(images, preserve_index=False))
    db.close()
    db = WorkspaceDB(ws.root)  # as the pages: a changed workspace is opened again
    _, _, pop3 = V.population(db, "toy-ckpt0")
    assert pop3 is not pop2 and len(np.unique(pop3.labels)) == len(np.unique(pop2.labels)) + 1
    db.close()
