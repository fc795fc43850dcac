"""Intervals and nulls everywhere a number is reported (issue 26 item 4).

Each bootstrap interval against a direct loop over the same seeded resamples (and scipy's
bootstrap, in distribution); the stored intervals of a factory run against the same
intervals recomputed from the per-image quantities; the permutation p-values against an
exact enumeration with scipy; the fewer-than-10-checkpoints warning; the exports.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from conceptlens import metrics as M
from conceptlens.metrics import bootstrap as B
from conceptlens.metrics.clid import permutation_p
from conceptlens.metrics.intrinsic import twonn_fit


def direct(n: int, n_boot: int, rng) -> list[np.ndarray]:
    """The resamples of the definition: one `rng.integers(0, n, n)` per resample."""
    return [rng.integers(0, n, n) for _ in range(n_boot)]


def q(stats, est):
    lo, hi = np.quantile(stats, [0.025, 0.975])
    return min(lo, est), max(hi, est)


# ---- the bootstrap functions -----------------------------------------------------------------
def test_mean_interval_is_the_direct_loop_and_agrees_with_scipy():
    from scipy.stats import bootstrap

    flags = np.random.default_rng(1).random(700) < 0.8
    lo, hi = M.mean_interval(flags, 500, B.rng_for(3, "knn_acc"))
    rng = B.rng_for(3, "knn_acc")
    assert (lo, hi) == pytest.approx(
        q([flags[i].mean() for i in direct(700, 500, rng)], flags.mean()), abs=1e-12
    )
    assert lo <= flags.mean() <= hi
    ref = bootstrap((flags.astype(float),), np.mean, n_resamples=4000, method="percentile", random_state=0)
    assert lo == pytest.approx(ref.confidence_interval.low, abs=0.01)
    assert hi == pytest.approx(ref.confidence_interval.high, abs=0.01)
    # small blocks draw the same stream as one block
    assert B.mean_interval(flags, 500, B.rng_for(3, "knn_acc")) == M.mean_interval(
        flags, 500, B.rng_for(3, "knn_acc")
    )
    blocks = list(B.resamples(700, 500, B.rng_for(3, "x"), max_cells=700 * 7))
    assert np.array_equal(np.concatenate(blocks), np.stack(direct(700, 500, B.rng_for(3, "x"))))


def test_purity_interval_is_a_loop_of_metrics_purity_over_resampled_labels():
    y = np.random.default_rng(2).choice([0, 3, 5], size=80, p=[0.7, 0.2, 0.1])
    p, _, _ = M.purity(y, 6)
    lo, hi = M.purity_interval(y, 6, p, 300, B.rng_for(0, "purity"))
    rng = B.rng_for(0, "purity")
    ref = q([M.purity(y[i], 6)[0] for i in direct(80, 300, rng)], p)
    assert (lo, hi) == pytest.approx(ref, abs=1e-12)
    assert 0 <= lo < p < hi <= 1
    # a pure cluster: every resample is pure
    assert M.purity_interval(np.full(9, 4), 6, 1.0, 50, B.rng_for(0, "purity")) == (1.0, 1.0)
    assert all(math.isnan(v) for v in M.purity_interval(y, 1, math.nan, 50, B.rng_for(0, "p")))


def test_ratio_interval_is_the_direct_loop():
    rng0 = np.random.default_rng(4)
    den = rng0.integers(0, 4, 300)
    num = rng0.binomial(den, 0.6)
    lo, hi = M.ratio_interval(num, den, 400, B.rng_for(1, "cl"))
    rng = B.rng_for(1, "cl")
    est = num.sum() / den.sum()
    assert (lo, hi) == pytest.approx(q([num[i].sum() / den[i].sum() for i in direct(300, 400, rng)], est))
    assert lo <= est <= hi


def test_twonn_interval_refits_on_resampled_images():
    X = np.random.default_rng(5).normal(size=(400, 6))
    nb = M.SelfNeighbours(M.l2_normalize(X), 16)
    mu, dups = M.twonn_ratios_shared(nb)
    est = M.twonn_shared(nb)[0]
    assert twonn_fit(mu) == est and dups == 0
    lo, hi = M.twonn_interval(mu, est, 200, B.rng_for(0, "id"))
    rng, srt = B.rng_for(0, "id"), np.sort(mu)
    assert (lo, hi) == pytest.approx(
        q([twonn_fit(srt[i]) for i in direct(len(mu), 200, rng)], est), rel=1e-10
    )
    assert lo < est < hi
    # on a 5-dimensional Gaussian (normalised: a 5-sphere), the interval is a few units wide
    assert 1 < hi - lo < 4


def test_knn_flags_and_cl_counts_are_the_per_image_quantities_of_the_metrics():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(240, 8)) + np.repeat(np.eye(8)[:3] * 3, 80, axis=0)
    y = np.repeat(np.arange(3), 80)
    Xn = M.l2_normalize(X).astype(np.float32)
    nb = M.SelfNeighbours(Xn, 32)
    train = np.arange(240) % 4 != 0
    flags = M.knn_correct_shared(nb, train, y, ~train)
    assert flags.shape == ((~train).sum(),)
    assert flags.mean() == M.knn_accuracy(Xn[train], y[train], Xn[~train], y[~train])
    labels = (y + (rng.random(240) < 0.2)) % 3
    cl, correct, pred = M.cluster_learnability_counts(nb, labels, 10, 3, 0)
    assert cl == M.cluster_learnability(X, labels, 10, 3, 0)
    # each order predicts every image outside its first chunk (24 images): 3 * 216 predictions
    assert pred.sum() == 3 * 216 and pred.max() <= 3 and (correct <= pred).all()
    assert correct.sum() / pred.sum() == pytest.approx(cl, abs=1e-12)  # equal chunks: pooled = mean


# ---- the analysis stores them ----------------------------------------------------------------
@pytest.fixture(scope="module")
def analysed(tmp_path_factory, factory_template):
    from conceptlens.analysis import runner
    from tests.conftest import copy_ws

    root = copy_ws(factory_template, tmp_path_factory.mktemp("iv") / "ws")
    opts = {"bootstrap": 200, "seed": 2}
    runner.run(root, "cluster_metrics", opts, progress_bars=False, with_dependencies=False, force=True)
    runner.run(root, "comparisons", {}, progress_bars=False, with_dependencies=False, force=True)
    return root


def test_stored_intervals_are_recomputed_from_the_features(analysed):
    from conceptlens.analysis.cluster_metrics import NEIGHBOURS
    from conceptlens.analysis.common import Context
    from conceptlens.validate import validate
    from conceptlens.workspace import Workspace

    assert validate(analysed) == []
    ws = Workspace(analysed)
    ctx = Context(ws)
    ids, Xn = ctx.normalized("ck1")
    meta = ctx.image_meta(ids)
    row = ws.read("checkpoint_metrics", checkpoint_id="ck1", k=4).to_pylist()[0]
    split = meta["split"].astype(str).to_numpy()
    y = meta["label"].to_numpy().astype(np.int64)
    tr, te = split == "train", split == "test"
    # kNN accuracy: the weighted 20-NN's per-test-image flags, without the shared lists
    pred = M.learnability.weighted_knn_predict(Xn[tr], y[tr], Xn[te])
    flags = pred == y[te]
    assert row["knn_acc"] == pytest.approx(flags.mean())
    ref = q([flags[i].mean() for i in direct(len(flags), 200, B.rng_for(2, "knn_acc"))], flags.mean())
    assert (row["knn_acc_lo"], row["knn_acc_hi"]) == pytest.approx(ref)
    # ID: TwoNN ratios from exact Euclidean neighbours, resampled and refitted
    nb = M.SelfNeighbours(Xn, NEIGHBOURS)
    d, _ = M.nearest_euclidean_self(Xn.astype(np.float64), k=2)
    mu = np.sort(d[:, 1] / d[:, 0])
    ref = q([twonn_fit(mu[i]) for i in direct(len(mu), 200, B.rng_for(2, "id"))], row["id"])
    assert (row["id_lo"], row["id_hi"]) == pytest.approx(ref, rel=1e-6)
    # CL: per-image correct and predicted counts of the stored CL's orders
    labels = (
        ws.read("clusters", checkpoint_id="ck1", k=4).to_pandas().set_index("image_id").loc[ids, "cluster"]
    )
    cl, c, p = M.cluster_learnability_counts(nb, labels.to_numpy(), 10, 3, 2)
    assert row["cl"] == cl
    stats = [c[i].sum() / p[i].sum() for i in direct(len(c), 200, B.rng_for(2, "cl"))]
    assert (row["cl_lo"], row["cl_hi"]) == pytest.approx(q(stats, cl))
    for m in ("knn_acc", "cl", "id"):
        assert row[f"{m}_lo"] <= row[m] <= row[f"{m}_hi"]
    assert row["cl_lo"] < row["cl_hi"] and row["id_lo"] < row["id_hi"]  # (ck1's kNN acc. is 1: [1, 1])
    # purity: each cluster's labels resampled, clusters in order on one stream
    cm = ws.read("cluster_metrics", checkpoint_id="ck1", k=4).to_pandas()
    rng = B.rng_for(2, "purity")
    lab = labels.to_numpy()
    for r in cm.itertuples():
        yc = y[lab == r.cluster]
        ref = q([M.purity(yc[i], 3)[0] for i in direct(len(yc), 200, rng)], r.purity)
        assert (r.purity_lo, r.purity_hi) == pytest.approx(ref)
        assert r.purity_lo <= r.purity <= r.purity_hi


def test_a_lower_bound_above_the_value_fails_validation(analysed, tmp_path):
    import pyarrow.parquet as pq

    from conceptlens.validate import validate
    from tests.conftest import copy_ws

    root = copy_ws(analysed, tmp_path / "ws")
    (f,) = (root / "checkpoint_metrics" / "checkpoint_id=ck0" / "k=4").glob("*.parquet")
    t = pq.read_table(f).to_pandas()
    t["cl_lo"] = t["cl"] + 0.01
    f.unlink()  # hard-linked: write a new file, never into the shared one
    pq.write_table(__import__("pyarrow").Table.from_pandas(t, preserve_index=False), f)
    problems = " ".join(map(str, validate(root)))
    assert "cl_lo" in problems and "greater than cl" in problems


def test_the_number_of_resamples_is_part_of_the_result(analysed, tmp_path):
    from conceptlens.analysis import by_name, runner
    from conceptlens.analysis.base import EVERYTHING
    from conceptlens.analysis.common import Context
    from conceptlens.workspace import Workspace
    from tests.conftest import copy_ws

    root = copy_ws(analysed, tmp_path / "ws")
    ctx, a = Context(Workspace(root), progress=False), by_name()["cluster_metrics"]
    units = a.units(ctx, a.option_defaults(), EVERYTHING)
    assert len(units) == 3  # every (checkpoint, k)
    assert all(runner.due(ctx, a, u, {"bootstrap": 200}) is None for u in units)
    why = [runner.due(ctx, a, u, {"bootstrap": 300}) for u in units]
    assert why == ["options changed (bootstrap 200 -> 300)"] * 3
    with pytest.raises(ValueError, match="--bootstrap must be at most"):
        runner.run(
            root, "cluster_metrics", {"bootstrap": 10**6}, progress_bars=False, with_dependencies=False
        )


def test_no_resamples_store_no_intervals_and_stay_valid(factory_copy):
    from conceptlens.analysis import runner
    from conceptlens.validate import validate
    from conceptlens.workspace import Workspace

    runner.run(
        factory_copy,
        "cluster_metrics",
        {"bootstrap": 0},
        progress_bars=False,
        with_dependencies=False,
        force=True,
    )
    row = Workspace(factory_copy).read("checkpoint_metrics", checkpoint_id="ck0", k=4).to_pylist()[0]
    assert row["cl"] is not None and row["cl_lo"] is None and row["id_hi"] is None
    assert validate(factory_copy) == []


# ---- permutation nulls for the correlations --------------------------------------------------
def test_permutation_p_is_the_exact_enumeration_on_five_checkpoints():
    from scipy.stats import kendalltau, pearsonr

    x = np.array([0.61, 0.55, 0.72, 0.48, 0.66])
    y = np.array([0.70, 0.52, 0.81, 0.57, 0.64])
    r0, t0 = abs(pearsonr(x, y)[0]), abs(kendalltau(x, y)[0])
    perms = list(itertools.permutations(y))
    ref_r = np.mean([abs(pearsonr(x, p)[0]) >= r0 - 1e-12 for p in perms])
    ref_t = np.mean([abs(kendalltau(x, p)[0]) >= t0 - 1e-12 for p in perms])
    pp, kp = permutation_p(x, y)
    assert (pp, kp) == pytest.approx((ref_r, ref_t), abs=1e-12)
    assert pp * 120 == pytest.approx(round(pp * 120))  # a count of the 120 orders
    out = M.correlations(x, y)
    assert out["pearson_perm_p"] == pp and out["kendall_perm_p"] == kp
    assert out["unstable"] is True and out["n_checkpoints"] == 5


def test_permutation_p_by_sampling_agrees_with_scipy_and_twelve_checkpoints_are_stable():
    from scipy.stats import PermutationMethod, pearsonr

    rng = np.random.default_rng(8)
    x = rng.normal(size=12)
    y = 0.6 * x + rng.normal(size=12)
    pp, _ = permutation_p(x, y, random_state=1)
    ref = pearsonr(x, y, method=PermutationMethod(n_resamples=20_000, random_state=0)).pvalue
    assert pp == pytest.approx(ref, abs=0.01)
    assert permutation_p(x, y, random_state=1) == (pp, _)  # seeded
    out = M.correlations(x, y)
    assert out["unstable"] is False and out["n_checkpoints"] == 12


def test_stored_correlations_carry_the_null_and_the_flag(analysed):
    from conceptlens.db import WorkspaceDB
    from conceptlens.views import checkpoints as V

    corr = V.predictor_correlations(WorkspaceDB(analysed), "toy", 4)
    ok = corr[corr["pearson"].notna()]
    assert len(ok) and ok["pearson_perm_p"].between(0, 1).all() and ok["unstable"].all()
    # 3 checkpoints: 6 orders, so p is a multiple of 1/6
    assert np.allclose(ok["pearson_perm_p"] * 6, np.round(ok["pearson_perm_p"] * 6))


# ---- the pages' tables and the exports ---------------------------------------------------------
def test_the_correlation_table_warns_under_ten_checkpoints():
    from components.checkpoint_tables import correlation_table, unstable_warning

    corr = pd.DataFrame(
        {
            "predictor": ["cl", "id"],
            "name": ["CL", "ID"],
            **{c: [0.5, -0.2] for c in ("pearson", "kendall")},
            **{c: [0.2, -0.6] for c in ("pearson_lo", "kendall_lo")},
            **{c: [0.8, 0.3] for c in ("pearson_hi", "kendall_hi")},
            **{c: [0.04, 0.5] for c in ("pearson_p", "kendall_p", "pearson_perm_p", "kendall_perm_p")},
            "n_checkpoints": [7, 7],
            "unstable": [True, True],
        }
    )
    table, _ = correlation_table(corr)
    assert list(table["stable"]) == ["no (n < 10)"] * 2
    assert list(table["r perm. p"]) == [0.04, 0.5]
    text = unstable_warning(corr)
    assert "2 of these correlations rest on 7 checkpoints, fewer than 10" in text and "not a finding" in text
    many = corr.assign(n_checkpoints=[12, 12], unstable=[False, False])
    assert unstable_warning(many) is None and list(correlation_table(many)[0]["stable"]) == ["yes"] * 2
    # a workspace older than 2.3: no flag, no permutation p; n decides, the p is missing
    old = corr.drop(columns=["unstable", "pearson_perm_p", "kendall_perm_p"])
    assert unstable_warning(old) is not None and table["r perm. p"].notna().all()
    assert correlation_table(old)[0]["r perm. p"].isna().all()


def test_the_exports_carry_the_new_intervals(analysed):
    from components.cluster_tables import cluster_table
    from conceptlens.db import WorkspaceDB
    from conceptlens.tables import find_intervals, to_csv, to_latex
    from conceptlens.views import checkpoints as V
    from conceptlens.views import clusters as VC

    db = WorkspaceDB(analysed)
    ck = V.checkpoint_table(db, "toy", 4)
    found = find_intervals(ck)
    assert {c: found[c] for c in ("knn_acc", "cl", "id")} == {
        c: (f"{c}_lo", f"{c}_hi") for c in ("knn_acc", "cl", "id")
    }
    r = ck.iloc[0]
    tex = to_latex(ck, {"cl": "%.3f", "cl_lo": "%.3f", "cl_hi": "%.3f"})
    assert f"{r.cl:.3f} [{r.cl_lo:.3f}, {r.cl_hi:.3f}]" in tex
    csv = to_csv(ck).decode().splitlines()[0].split(",")
    assert {"knn_acc_lo", "knn_acc_hi", "cl_lo", "cl_hi", "id_lo", "id_hi"} <= set(csv)
    cm = VC.cluster_table(db, "toy", "ck1", 4)
    table, _ = cluster_table(cm)
    assert find_intervals(table)["purity"] == ("purity CI",)
    row = cm.iloc[0]
    assert table["purity CI"].iloc[0] == f"[{row.purity_lo:.2f}, {row.purity_hi:.2f}]"
    assert "purity_lo" in to_csv(cm).decode().splitlines()[0]


def test_the_checkpoints_page_warns_above_correlations_over_three_checkpoints(monkeypatch, analysed):
    from tests.test_app import assert_clean, open_app

    at = open_app(monkeypatch, analysed, "pages/checkpoints.py", query={"ds": "toy", "k": "4"})
    assert_clean(at)
    warned = [w.value for w in at.warning if "fewer than 10" in w.value]
    assert warned and "rest on 3 checkpoints" in warned[0] and "not a finding" in warned[0]
    tables = [t.value for t in at.dataframe if "stable" in t.value.columns]
    assert tables and set(tables[0]["stable"].dropna()) == {"no (n < 10)"}
    assert tables[0]["r perm. p"].notna().any()
