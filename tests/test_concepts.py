"""Concept quality (the concept-quality paper): the metrics against values computed another
way, and the `concepts` analysis end to end on a workspace whose answers are known by
construction (tests/concepts_factory.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.metrics import roc_auc_score
from sklearn.neural_network import MLPClassifier

from conceptlens.metrics import concepts as CQ
from conceptlens.workspace import Workspace, WorkspaceError
from tests.concepts_factory import TOY_CONCEPTS, concept_workspace


# ---- AUC ----------------------------------------------------------------------------------------
def test_binary_auc_equals_sklearn_with_ties():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300)
    s = np.round(rng.normal(size=300) + y, 1)  # rounding makes ties
    assert CQ.binary_auc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


@pytest.mark.parametrize("m", [3, 4, 6])
def test_one_vs_one_auc_equals_sklearn(m):
    rng = np.random.default_rng(m)
    y = rng.integers(0, m, 400)
    logits = rng.normal(size=(400, m)) + 1.5 * np.eye(m)[y]
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    want = roc_auc_score(y, p, multi_class="ovo", average="macro")
    assert CQ.ovo_auc(y, p) == pytest.approx(want, abs=1e-12)


def test_one_vs_one_auc_of_two_classes_is_the_binary_auc_and_one_class_is_an_error():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 100)
    p1 = rng.uniform(size=100)
    assert CQ.ovo_auc(y, np.column_stack([1 - p1, p1])) == pytest.approx(roc_auc_score(y, p1))
    with pytest.raises(ValueError, match="single class"):
        CQ.ovo_auc(np.zeros(10, int), np.full((10, 2), 0.5))


def test_one_vs_one_auc_skips_classes_absent_from_the_targets():
    # Class 2 has a column but no row: the score is over the pair (0, 1) alone.
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 200)
    p = rng.dirichlet(np.ones(3), 200)
    want = (CQ.binary_auc(y == 0, p[:, 0]) + CQ.binary_auc(y == 1, p[:, 1])) / 2
    assert CQ.ovo_auc(y, p) == pytest.approx(want)


# ---- the batched classifiers against sklearn ----------------------------------------------------
def test_batched_classifiers_match_sklearn_mlps():
    """Each pair is a one-hidden-layer (32 ReLU) classifier: on problems a monotone score
    cannot solve (|z| > t), with three classes and with 2-D inputs, its test AUC is the one
    sklearn's MLPClassifier((32,)) reaches."""
    rng = np.random.default_rng(3)
    n = 1500
    z = rng.normal(size=(n, 3))
    targets = np.column_stack(
        [np.abs(z[:, 0]) > 0.8, np.digitize(z[:, 1], [-0.5, 0.5]), (z[:, 2] + z[:, 0]) > 0]
    ).astype(np.int64)
    reps = [z[:, :1] + 0.2 * rng.normal(size=(n, 1)), z[:, 1:2] + 0.2 * rng.normal(size=(n, 1)), z[:, [0, 2]]]
    train, test = CQ.split_rows(n, 0.2, 0)
    got = CQ.pairwise_mlp_auc(reps, targets, train, test, random_state=0)
    for i in range(3):
        sk = MLPClassifier((32,), max_iter=1000, random_state=0).fit(reps[i][train], targets[train, i])
        want = CQ.ovo_auc(targets[test, i], sk.predict_proba(reps[i][test]))
        assert got[i, i] == pytest.approx(want, abs=0.02), (i, got[i, i], want)
    # |z0| > 0.8 is not monotone in z0: a linear score would sit near 0.5.
    assert got[0, 0] > 0.9 and abs(roc_auc_score(targets[test, 0], reps[0][test, 0]) - 0.5) < 0.1


def test_pairs_are_independent_classifiers():
    """Pair (i, j) must not see concept i' != i: a learnt concept that is pure noise predicts
    nothing even when trained alongside informative ones."""
    rng = np.random.default_rng(4)
    n = 1000
    c = rng.integers(0, 2, (n, 2))
    reps = [c[:, :1] + 0.1 * rng.normal(size=(n, 1)), rng.normal(size=(n, 1))]
    P = CQ.purity_matrix(reps, c, random_state=0)
    assert P[0, 0] > 0.99 and abs(P[1, 0] - 0.5) < 0.1 and abs(P[1, 1] - 0.5) < 0.1


# ---- OIS ----------------------------------------------------------------------------------------
def test_ois_by_hand():
    P = np.array([[0.9, 0.6], [0.5, 1.0]])
    Or = np.array([[1.0, 0.5], [0.5, 1.0]])
    # 2/k * sqrt(0.1^2 + 0.1^2) with k = 2
    assert CQ.ois(P, Or) == pytest.approx(np.sqrt(0.02))
    indep = np.full((3, 3), 0.5) + 0.5 * np.eye(3)
    # Concepts 0 and 1 swapped: four cells off by 0.5, so 2/3 * sqrt(4 * 0.25) = 2/3.
    assert CQ.ois(indep[[1, 0, 2]], indep) == pytest.approx(2 / 3)
    assert CQ.non_oracle_impurity(indep) == 0
    assert CQ.non_oracle_impurity(np.ones((2, 2))) == pytest.approx(2 / 2 * np.sqrt(2 * 0.25))


def _dependent_concepts(n=3000, seed=5):
    rng = np.random.default_rng(seed)
    z = rng.multivariate_normal(np.zeros(3), [[1, 0.6, 0.3], [0.6, 1, 0.45], [0.3, 0.45, 1]], size=n)
    return (z > 0).astype(np.int64)


def _expected_purity(learnt: np.ndarray, C: np.ndarray, seed: int) -> np.ndarray:
    """By hand, without any classifier: a binary input takes two values, so a classifier that
    learnt the train rows' direction scores the rank AUC of the input itself (or of its
    negation) on the evaluation rows."""
    train, test = CQ.split_rows(len(C), 0.2, seed)
    E = np.empty((learnt.shape[1], C.shape[1]))
    for i in range(learnt.shape[1]):
        for j in range(C.shape[1]):
            x = learnt[:, i]
            up = C[train][x[train] == 1, j].mean() > C[train][x[train] == 0, j].mean()
            a = CQ.binary_auc(C[test, j], x[test])
            E[i, j] = a if up else 1 - a
    return E


def test_ois_is_zero_for_the_oracle_representation():
    C = _dependent_concepts()
    Or = CQ.oracle_matrix(C, random_state=0)
    P = CQ.purity_matrix(CQ.concept_inputs(C), C, random_state=0)
    assert np.allclose(np.diag(P), 1.0)
    assert CQ.ois(P, Or) == 0.0
    assert CQ.non_oracle_impurity(P) > 0.1  # dependent concepts look impure without the oracle


def test_ois_of_a_permuted_representation_matches_the_hand_computed_value():
    C = _dependent_concepts()
    perm = [1, 2, 0]
    Or = CQ.oracle_matrix(C, random_state=0)
    P = CQ.purity_matrix(CQ.concept_inputs(C[:, perm]), C, random_state=0)
    E = _expected_purity(C[:, perm], C, 0)
    E_oracle = _expected_purity(C, C, 0)
    np.fill_diagonal(E_oracle, 1.0)
    assert np.allclose(P, E, atol=1e-9) and np.allclose(Or, E_oracle, atol=1e-9)
    want = 2 / 3 * np.sqrt(((E - E_oracle) ** 2).sum())
    # Learnt concept i carries true concept perm[i] under the name of concept i.
    assert CQ.ois(P, Or) == pytest.approx(want, abs=1e-9)
    assert want > 0.3
    # Aligned by AUC instead of by name, the permutation is undone and OIS is 0 again.
    order = CQ.align(P, ["a", "b", "c"], ["x", "y", "z"])
    assert order == [2, 0, 1] and CQ.ois(P[order], Or) == pytest.approx(0, abs=1e-12)


def test_alignment_by_name_first_then_greedy():
    P = np.array(
        [
            [0.9, 0.5, 0.5],  # "a": the true concept of that name
            [0.5, 0.6, 0.95],  # "c1": best for z
            [0.55, 0.8, 0.7],  # "c2": z is taken, so y
            [0.5, 0.5, 0.5],
        ]
    )
    assert CQ.align(P, ["a", "c1", "c2", "c3"], ["a", "y", "z"]) == [0, 2, 1]
    with pytest.raises(ValueError, match="cannot be aligned"):
        CQ.align(P[:2], ["a", "c1"], ["a", "y", "z"])


# ---- niches -----------------------------------------------------------------------------------
def test_niche_correlations_are_absolute_pearson_and_take_the_best_dimension():
    rng = np.random.default_rng(6)
    y = rng.integers(0, 3, 500)
    r0 = rng.normal(size=(500, 1)) - 0.8 * (y == 2)[:, None]
    r1 = np.column_stack([rng.normal(size=500), (y == 1) + rng.normal(size=500)])
    corr = CQ.niche_correlations([r0, r1, np.ones((500, 1))], y, [0, 1, 2])
    assert corr[0, 2] == pytest.approx(abs(stats.pearsonr(r0[:, 0], y == 2)[0]))
    want = max(abs(stats.pearsonr(r1[:, d], y == 1)[0]) for d in range(2))
    assert corr[1, 1] == pytest.approx(want)
    assert (corr[2] == 0).all()  # a constant concept correlates with nothing


def test_niches_on_a_constructed_case():
    """Label 1 = concept 0 + concept 1 > 0; concept 2 is noise. At beta = 0.2 the niche is
    {0, 1}: it predicts the label (NPS ~ task AUC), its complement cannot (NIS ~ 0.5). As beta
    grows the niche empties, its purity falls to 0.5 and its impurity rises."""
    rng = np.random.default_rng(7)
    n = 3000
    r = rng.normal(size=(n, 3))
    y = (r[:, 0] + r[:, 1] > 0).astype(np.int64)
    reps = [r[:, i : i + 1] for i in range(3)]
    tr, te = np.arange(2000), np.arange(2000, n)
    corr = CQ.niche_correlations([x[tr] for x in reps], y[tr], [0, 1])
    inside = CQ.niches(corr, 0.2)
    assert inside[:, 1].tolist() == [True, True, False] and inside[:, 0].tolist() == [True, True, False]
    f = CQ.fit_label_predictor(r[tr], y[tr], random_state=0)
    rows = pd.DataFrame(CQ.niche_scores(f, r[te], y[te], CQ.concept_columns(reps), corr, (0.2, 0.7)))
    at = rows[rows["beta"] == 0.2].set_index("label")
    assert at.loc[1, "niche_size"] == 2
    assert at.loc[1, "nps"] > 0.97 and abs(at.loc[1, "nis"] - 0.5) < 0.05
    high = rows[rows["beta"] == 0.7].set_index("label")
    assert high.loc[1, "niche_size"] == 0 and high.loc[1, "nps"] == 0.5 and high.loc[1, "nis"] > 0.97
    assert CQ.task_auc(f, r[te], y[te]) > 0.97


def test_area_over_beta_and_intervals():
    assert CQ.area_over_beta([0, 0.5, 1.0], [0.5, 0.7, 0.9]) == pytest.approx(0.7)
    assert CQ.area_over_beta([0, 0.1], [1.0, 0.0]) == pytest.approx(0.5)
    v = np.array([0.2, 0.25, 0.31])
    m, lo, hi = CQ.mean_interval(v)
    want = stats.t.interval(0.95, 2, loc=v.mean(), scale=stats.sem(v))
    assert m == pytest.approx(v.mean()) and (lo, hi) == pytest.approx(want)
    assert np.isnan(CQ.mean_interval([0.3])[1])


# ---- the analysis end to end --------------------------------------------------------------------
@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    from conceptlens.analysis import runner

    ws = concept_workspace(tmp_path_factory.mktemp("cq") / "ws")
    runner.run(ws.root, "concepts", {"concept_seeds": 2}, progress_bars=False, with_dependencies=False)
    return ws


def _read(ws: Workspace, table: str) -> pd.DataFrame:
    parts = ws.partitions(table)
    return pd.concat([ws.read(table, **p).to_pandas() for p in parts], ignore_index=True)


def test_analysis_writes_valid_tables(analysed):
    from conceptlens.validate import validate

    assert validate(analysed.root, deep=True) == []
    scores = _read(analysed, "concept_scores")
    assert len(scores) == 8 * 2 and set(scores["seed"]) == {0, 1}
    oracle = _read(analysed, "oracle_purity")
    assert set(oracle["dataset"]) == {"toy-d0.00", "toy-d0.75"}
    diag = oracle[oracle["concept_i"] == oracle["concept_j"]]
    assert (diag["auc"] == 1).all() and len(diag) == 2 * 2 * 3


def test_analysis_separates_the_representations_as_constructed(analysed):
    s = _read(analysed, "concept_scores").groupby("checkpoint_id").mean(numeric_only=True)
    for lvl in ("0.00", "0.75"):
        ds = f"toy-d{lvl}"
        assert s.loc[f"oracle-{ds}-s0", "ois"] == 0
        assert s.loc[f"swapped-{ds}-s0", "ois"] > 0.3
        assert s.loc[f"swapped-{ds}-s0", "ois"] > 2 * s.loc[f"vae-{ds}-s0", "ois"]
    # Dependency makes even the true concepts look impure without the oracle.
    assert (
        s.loc["oracle-toy-d0.75-s0", "non_oracle_impurity"]
        > s.loc["oracle-toy-d0.00-s0", "non_oracle_impurity"] + 0.1
    )
    # The label is a function of the concepts.
    assert s.loc["oracle-toy-d0.00-s0", "task_auc"] > 0.99


def test_unnamed_concepts_are_aligned_greedily_and_probes_by_name(analysed):
    p = _read(analysed, "purity_matrices")
    vae = p[(p["checkpoint_id"] == "vae-toy-d0.00-s0") & p["aligned"]]
    for _, g in vae.groupby("seed"):
        assert dict(zip(g["true_concept"], g["learnt_concept"])) == dict(
            zip(TOY_CONCEPTS, ["c0", "c1", "c2"])
        )
    vision = p[p["checkpoint_id"] == "vision-toy-d0.00-s0"]
    assert set(vision["learnt_concept"]) == set(TOY_CONCEPTS)
    assert (vision["aligned"] == (vision["learnt_concept"] == vision["true_concept"])).all()


def test_niche_size_falls_with_beta(analysed):
    n = _read(analysed, "niche_scores")
    for _, g in n.groupby(["checkpoint_id", "seed", "label"]):
        sizes = g.sort_values("beta")["niche_size"].to_numpy()
        assert (np.diff(sizes) <= 0).all()
    niches = _read(analysed, "concept_niches")
    assert set(np.round(niches["beta"], 2)) == set(CQ.BETAS)
    assert (niches["in_niche"] == (niches["corr"] > niches["beta"])).all()


def test_units_done_are_skipped_and_changed_options_recompute(analysed, tmp_path):
    import shutil

    from conceptlens.analysis import runner

    root = shutil.copytree(analysed.root, tmp_path / "ws")
    ws = Workspace(root)
    done = ws.table_path("concept_scores", checkpoint_id="vae-toy-d0.00-s0")
    before = done.stat().st_mtime_ns
    runner.run(root, "concepts", {"concept_seeds": 2}, progress_bars=False, with_dependencies=False)
    assert done.stat().st_mtime_ns == before, "a unit already done was computed again"
    # Another beta is another analysis: only the checkpoint asked for is recomputed.
    runner.run(
        root,
        "concepts",
        {"concept_seeds": 2, "niche_beta": 0.3},
        checkpoint="vae-toy-d0.00-s0",
        progress_bars=False,
        with_dependencies=False,
    )
    new = ws.read("concept_scores", checkpoint_id="vae-toy-d0.00-s0").to_pandas()
    assert (new["beta"] == 0.3).all()
    assert ws.read("concept_scores", checkpoint_id="vae-toy-d0.75-s0").to_pandas()["beta"].eq(0.2).all()


def test_analysis_is_deterministic(analysed, tmp_path):
    import shutil

    from conceptlens.analysis import runner

    root = shutil.copytree(analysed.root, tmp_path / "ws")
    cid = "vision-toy-d0.75-s0"
    runner.run(
        root,
        "concepts",
        {"concept_seeds": 2},
        checkpoint=cid,
        force=True,
        progress_bars=False,
        with_dependencies=False,
    )
    a = Workspace(root).read("purity_matrices", checkpoint_id=cid).to_pandas()
    b = analysed.read("purity_matrices", checkpoint_id=cid).to_pandas()
    pd.testing.assert_frame_equal(a, b)


def _edit_checkpoints(ws: Workspace, cid: str, **values) -> None:
    t = ws.read("checkpoints").to_pandas()
    for k, v in values.items():
        t[k] = t[k].astype(object)
        t.loc[t["checkpoint_id"] == cid, k] = pd.Series(
            [v] * (t["checkpoint_id"] == cid).sum(), dtype=object
        ).values
    from conceptlens import schema

    fields = [f for f in schema.arrow_schema("checkpoints") if f.name in t.columns]
    ws.write(
        "checkpoints",
        pa.Table.from_pandas(t[[f.name for f in fields]], schema=pa.schema(fields), preserve_index=False),
    )


def test_declared_concepts_must_fit_the_features(tmp_path):
    from conceptlens.analysis import runner

    ws = concept_workspace(tmp_path / "ws", n=90, levels=(0.0,))
    _edit_checkpoints(ws, "vae-toy-d0.00-s0", concept_dim=2)
    with pytest.raises(
        WorkspaceError,
        match=r"checkpoints.parquet: checkpoint 'vae-toy-d0.00-s0' declares 6 concepts x concept_dim 2",
    ):
        runner.run(
            ws.root,
            "concepts",
            {"concept_seeds": 1},
            checkpoint="vae-toy-d0.00-s0",
            progress_bars=False,
            with_dependencies=False,
        )


def test_a_concept_with_one_value_is_named(tmp_path):
    from conceptlens import schema
    from conceptlens.analysis import runner

    ws = concept_workspace(tmp_path / "ws", n=90, levels=(0.0,))
    t = ws.read("concept_labels").to_pandas()
    t.loc[t["concept"] == "z1_pos", "value"] = 1
    ws.write(
        "concept_labels",
        pa.Table.from_pandas(t, schema=schema.arrow_schema("concept_labels"), preserve_index=False),
    )
    with pytest.raises(
        WorkspaceError, match=r"concept_labels.parquet: concept\(s\) \['z1_pos'\].*single value"
    ):
        runner.run(ws.root, "concepts", {"concept_seeds": 1}, progress_bars=False, with_dependencies=False)


# ---- properties (hypothesis) -------------------------------------------------------------------

PROPS = settings(
    max_examples=30,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@PROPS
@given(st.integers(0, 2**16), st.integers(3, 5))
def test_ovo_auc_is_blind_to_monotone_rescaling_and_class_names(seed, m):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(m), 8)
    p = rng.dirichlet(np.ones(m), len(y))
    a = CQ.ovo_auc(y, p)
    assert 0 <= a <= 1
    # Each AUC reads ranks only: a monotone map of the scores changes nothing.
    assert CQ.ovo_auc(y, np.sqrt(p)) == pytest.approx(a)
    # Renaming the classes (their columns follow) changes nothing either.
    perm = rng.permutation(m)
    assert CQ.ovo_auc(perm[y], p[:, np.argsort(perm)]) == pytest.approx(a)


@PROPS
@given(st.integers(0, 2**16), st.integers(2, 8))
def test_impurity_is_a_bounded_distance_blind_to_concept_order(seed, k):
    rng = np.random.default_rng(seed)
    P, Q = rng.uniform(0.5, 1, (k, k)), rng.uniform(0.5, 1, (k, k))
    np.fill_diagonal(Q, 1)
    v = CQ.ois(P, Q)
    assert 0 <= v <= 1 + 1e-12  # AUCs >= 0.5: every cell differs by at most 0.5
    assert CQ.ois(Q, Q) == 0 and CQ.ois(Q, P) == pytest.approx(v)
    perm = rng.permutation(k)  # the same concepts in another order
    assert CQ.ois(P[np.ix_(perm, perm)], Q[np.ix_(perm, perm)]) == pytest.approx(v)


@PROPS
@given(st.integers(0, 2**16))
def test_niches_shrink_as_beta_grows_and_correlations_ignore_scale(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, 60)
    reps = [rng.normal(size=(60, int(rng.integers(1, 3)))) + (y == i % 3)[:, None] for i in range(4)]
    corr = CQ.niche_correlations(reps, y, [0, 1, 2])
    scaled = CQ.niche_correlations([5 * r - 2 for r in reps], y, [0, 1, 2])
    assert np.allclose(corr, scaled) and ((0 <= corr) & (corr <= 1)).all()
    sizes = [CQ.niches(corr, b).sum() for b in CQ.BETAS]
    assert all(a >= b for a, b in zip(sizes, sizes[1:]))


def test_each_input_dimension_is_standardised_on_its_own():
    """Inputs are standardised per dimension (like sklearn's StandardScaler), so rescaling one
    dimension changes nothing, even a noise dimension 1000 times larger than the signal."""
    rng = np.random.default_rng(6)
    n = 600
    c = rng.integers(0, 2, (n, 1))
    x = np.column_stack([c[:, 0] + 0.3 * rng.normal(size=n), rng.normal(size=n)])
    train, test = CQ.split_rows(n, 0.2, 0)
    plain = CQ.pairwise_mlp_auc([x], c, train, test, random_state=0)
    loud = CQ.pairwise_mlp_auc([x * [1.0, 1000.0]], c, train, test, random_state=0)
    assert plain[0, 0] > 0.9 and loud[0, 0] == pytest.approx(plain[0, 0], abs=0.01)


def test_two_training_rows_are_enough_and_one_is_refused():
    x = np.array([[0.0], [1.0], [0.1], [0.9], [0.2], [0.8]])
    c = np.array([[0], [1], [0], [1], [0], [1]])
    P = CQ.pairwise_mlp_auc([x], c, np.array([0, 1]), np.arange(2, 6), random_state=0)
    assert P.shape == (1, 1) and 0 <= P[0, 0] <= 1
    with pytest.raises(ValueError, match="at least 2 rows each, got 1 and 4"):
        CQ.pairwise_mlp_auc([x], c, np.array([0]), np.arange(2, 6))


def test_mean_niche_size_counts_the_niches_at_the_chosen_beta(analysed):
    scores = _read(analysed, "concept_scores").dropna(subset=["mean_niche_size"])
    niches = _read(analysed, "concept_niches")
    assert len(scores)
    for _, r in scores.iterrows():
        at = niches[
            (niches["checkpoint_id"] == r["checkpoint_id"])
            & (niches["seed"] == r["seed"])
            & np.isclose(niches["beta"], r["beta"])
        ]
        want = at.groupby("label")["in_niche"].sum().mean()
        assert r["mean_niche_size"] == pytest.approx(want), r["checkpoint_id"]


# ---- issue 26 item 5: the public code's readings, side by side with the paper's ---------------
@pytest.mark.parametrize("m", [3, 4, 6])
def test_one_vs_rest_auc_equals_sklearn_and_differs_from_one_vs_one(m):
    rng = np.random.default_rng(10 + m)
    y = rng.integers(0, m, 400)
    logits = rng.normal(size=(400, m)) + 1.5 * np.eye(m)[y] + rng.normal(size=(400, 1)) * np.arange(m)
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    ovr = roc_auc_score(y, p, multi_class="ovr", average="macro")
    ovo = roc_auc_score(y, p, multi_class="ovo", average="macro")
    assert CQ.multiclass_auc(y, p, multiclass="ovr") == pytest.approx(ovr, abs=1e-12)
    assert CQ.multiclass_auc(y, p, multiclass="ovo") == pytest.approx(ovo, abs=1e-12)
    # The code's one-hot call is the same number as multi_class="ovr".
    assert CQ.ovr_auc(y, p) == pytest.approx(roc_auc_score(np.eye(m)[y], p, average="macro"), abs=1e-12)
    assert abs(ovr - ovo) > 1e-4  # the two readings are told apart on this input
    with pytest.raises(ValueError, match="multiclass"):
        CQ.multiclass_auc(y, p, multiclass="ovx")


def test_purity_matrix_follows_the_multiclass_option():
    rng = np.random.default_rng(3)
    n = 300
    C = np.column_stack([rng.integers(0, 4, n), rng.integers(0, 2, n)])
    reps = [C[:, :1] + rng.normal(scale=0.8, size=(n, 1)), rng.normal(size=(n, 2))]
    a = CQ.purity_matrix(reps, C, random_state=0, steps=50, multiclass="ovo")
    b = CQ.purity_matrix(reps, C, random_state=0, steps=50, multiclass="ovr")
    assert a[:, 1] == pytest.approx(b[:, 1], abs=1e-12)  # binary concept: the same AUC
    assert not np.allclose(a[:, 0], b[:, 0])


def _four_label_task(seed=0):
    rng = np.random.default_rng(seed)
    n = 800
    y = rng.integers(0, 4, n)
    # Concept i is label i's evidence (plus noise): every label has a niche of its own.
    reps = [(y == i)[:, None] * 1.0 + rng.normal(scale=0.9, size=(n, 1)) for i in range(4)]
    reps.append(rng.normal(size=(n, 1)))  # one concept of no label
    return reps, y


def test_nis_area_code_is_the_softmax_then_one_hot_auc_of_the_public_code():
    reps, y = _four_label_task()
    flat = np.hstack(reps)
    tr, te = np.arange(600), np.arange(600, 800)
    f = CQ.fit_label_predictor(flat[tr], y[tr], random_state=0)
    labels = [int(v) for v in f.classes_]
    corr = CQ.niche_correlations([r[tr] for r in reps], y[tr], labels)
    columns = CQ.concept_columns(reps)
    code = CQ.niche_impurity_code(f, flat[te], y[te], columns, corr, CQ.BETAS)
    # Independent re-implementation of niching.niche_impurity: zero, predict, softmax, one-hot AUC.
    want = {}
    for beta in CQ.BETAS:
        inside = np.abs(corr) > beta
        cols = []
        for j in range(4):
            Xz = flat[te].copy()
            Xz[:, np.flatnonzero(inside[:, j])] = 0  # one column per concept here
            cols.append(f.predict_proba(Xz)[:, j])
        P = np.stack(cols, axis=1)
        P = np.exp(P) / np.exp(P).sum(axis=1, keepdims=True)
        want[beta] = roc_auc_score(np.eye(4)[y[te]], P, average="macro")
    assert list(code) == pytest.approx(list(want))
    assert list(code.values()) == pytest.approx(list(want.values()), abs=1e-12)
    area_code = CQ.area_over_beta(list(code), list(code.values()))
    # nis_area (the paper's reading, today's number): each raw column's one-vs-rest AUC.
    rows = pd.DataFrame(CQ.niche_scores(f, flat[te], y[te], columns, corr, CQ.BETAS))
    grid = rows.groupby("beta")["nis"].mean()
    raw = {
        b: np.mean(
            [
                roc_auc_score(
                    y[te] == j,
                    f.predict_proba(np.where(np.abs(corr[:, j]) > b, 0, 1)[None, :] * flat[te])[:, j],
                )
                for j in range(4)
            ]
        )
        for b in CQ.BETAS
    }
    assert grid.to_numpy() == pytest.approx(list(raw.values()), abs=1e-12)
    area = CQ.area_over_beta(grid.index.to_numpy(), grid.to_numpy())
    assert abs(area - area_code) > 1e-3  # the two readings differ on a 4-label task


def test_nis_area_code_equals_nis_area_on_a_binary_task():
    reps, y = _four_label_task(1)
    y = (y >= 2).astype(int)
    flat = np.hstack(reps)
    tr, te = np.arange(600), np.arange(600, 800)
    f = CQ.fit_label_predictor(flat[tr], y[tr], random_state=0)
    corr = CQ.niche_correlations([r[tr] for r in reps], y[tr], [0, 1])
    columns = CQ.concept_columns(reps)
    code = CQ.niche_impurity_code(f, flat[te], y[te], columns, corr, CQ.BETAS)
    curve = pd.DataFrame(CQ.niche_scores(f, flat[te], y[te], columns, corr, CQ.BETAS))
    grid = curve.groupby("beta")["nis"].mean()
    assert list(code.values()) == pytest.approx(grid.to_numpy(), abs=1e-12)


def test_analysis_stores_nis_area_code_next_to_nis_area(analysed):
    s = _read(analysed, "concept_scores")
    assert "nis_area_code" in s.columns
    has = s["nis_area"].notna()
    assert has.any() and s.loc[has, "nis_area_code"].notna().all()
