"""The one scorer of every kind of concept (metrics.scoreboard) and the `scoreboard`
analysis (issue 41).

Metric: purity, learnability and the percentiles against values computed another way (by
hand, sklearn's AUC of a brute-force weighted 20-NN vote, a direct count); no cross-talk
between concepts scored together (a concept's scores depend on its tag only); seeds and
units; the intervals (order, the value inside, coverage by simulation); the two nulls
(random sets are exchangeable with the concepts drawn like them; the random directions'
leave-one-out percentiles average 50); bad sets named.
Analysis: every source's members recomputed from the tables it reads (features, clusters,
dictionary codes, labels), the matched size, the unscored concepts and their reason,
validation, reruns, a foreign annotator and NaN features.
"""

from __future__ import annotations

import math
import shutil
from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from sklearn.metrics import roc_auc_score

from conceptlens import schema
from conceptlens.analysis import runner
from conceptlens.analysis import scoreboard as A
from conceptlens.db import WorkspaceDB
from conceptlens.metrics import scoreboard as SB
from conceptlens.metrics import selection as S
from conceptlens.metrics.selection import K_NN, TEMPERATURE, Population
from conceptlens.validate import format_problems, validate
from conceptlens.views import scoreboard as V
from harness.factory import make_workspace, write_features

N_POP, DIM, N_LAB, SIZE = 120, 8, 4, 15
# Scores whose value depends on the concept's stream (its tag): the coherence trials and the
# TwoNN subsample (when the set has more than id_points members). Learnability and the
# purities are functions of the set alone.
STREAM_DEPENDENT = ("coherence_random", "coherence_hard", "intrinsic_dim")
STREAM_FREE = ("learnability", "purity_label", "purity_f")
FAST = dict(n_null=30, bootstrap=60, trials=12, refs=4, id_points=10)


def population(seed: int = 0, n: int = N_POP, d: int = DIM, structured: bool = True) -> Population:
    """Labels (4, a few unknown), a factor `f` (3 values) and an annotator; features cluster
    by label when `structured`, else pure Gaussian noise."""
    g = np.random.default_rng(seed)
    lab = g.integers(0, N_LAB, n)
    centres = 2.0 * g.standard_normal((N_LAB, d)) if structured else np.zeros((N_LAB, d))
    X = centres[lab] + g.standard_normal((n, d))
    lab[g.choice(n, 4, replace=False)] = -1
    f = g.integers(0, 3, n)
    ann = X + 0.5 * g.standard_normal((n, d))
    return Population(X, lab, {"f": f}, ann)


def concept_sets(pop: Population, m: int = 5, seed: int = 1) -> np.ndarray:
    """m sets of SIZE rows: top rows of channels (structured), and random sets."""
    g = np.random.default_rng(seed)
    out = [np.sort(A._top(pop.X[:, j], SIZE)) for j in range(m - 2)]
    out += [np.sort(g.choice(len(pop.X), SIZE, replace=False)) for _ in range(2)]
    return np.stack(out)


@pytest.fixture(scope="module")
def pop():
    return population()


@pytest.fixture(scope="module")
def sets(pop):
    return concept_sets(pop)


@pytest.fixture(scope="module")
def scored(pop, sets):
    return SB.score_concepts(pop, sets, 0, unit="ck", **FAST)


def differences(a: SB.Scored, i: int, b: SB.Scored, j: int, keys=None) -> list[str]:
    """Names (score or score:lo/hi) where concept i of a and concept j of b differ."""
    diff = []
    for k in keys or a.scores:
        for part in ("values", "lo", "hi"):
            x, y = getattr(a, part)[k][i], getattr(b, part)[k][j]
            if not (x == y or (math.isnan(x) and math.isnan(y))):
                diff.append(k if part == "values" else f"{k}:{part}")
    return diff


# ---- values computed another way ------------------------------------------------------------
def test_scores_present(scored):
    assert set(scored.scores) == {*STREAM_DEPENDENT, *STREAM_FREE}
    for k in scored.scores:
        assert scored.values[k].shape == scored.pct_random[k].shape == (5,)


def test_purity_is_one_minus_entropy_over_log_k_by_hand(pop, sets, scored):
    for name, codes in (("label", pop.labels), ("f", pop.factors["f"])):
        K = len({int(c) for c in codes if c >= 0})  # values in the whole population
        for i, s in enumerate(sets):
            counts = Counter(int(c) for c in codes[s] if c >= 0)
            tot = sum(counts.values())
            h = -sum(c / tot * math.log(c / tot) for c in counts.values())
            assert scored.values[f"purity_{name}"][i] == pytest.approx(
                max(0.0, 1 - h / math.log(K)), abs=1e-12
            )


def brute_learnability(X: np.ndarray, members: np.ndarray) -> float:
    """sklearn's AUC of the weighted K_NN vote share of every row (all rows evaluated: the
    evaluation sample of a small population is all of it), neighbours by brute force."""
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    S = U @ U.T
    np.fill_diagonal(S, -np.inf)
    member = np.zeros(len(X), bool)
    member[members] = True
    share = np.empty(len(X))
    for i in range(len(X)):
        nn = np.argsort(-S[i], kind="stable")[:K_NN]
        w = np.exp((S[i, nn] - 1) / TEMPERATURE)
        share[i] = (w * member[nn]).sum() / w.sum()
    return float(roc_auc_score(member, share))


def test_learnability_is_the_auc_of_a_brute_force_weighted_knn_vote(pop, sets, scored):
    for i, s in enumerate(sets):
        assert scored.values["learnability"][i] == pytest.approx(brute_learnability(pop.X, s), abs=1e-9)
    # the top rows of a channel of clustered features are learnable; random sets are not
    assert scored.values["learnability"][:3].min() > scored.values["learnability"][3:].max()


def test_percentile_against_random_sets_is_a_direct_count(scored):
    assert len(scored.null["learnability"]) == FAST["n_null"]
    assert np.isfinite(scored.null["intrinsic_dim"]).sum() <= 15  # n_null_id TwoNN fits
    for k in scored.scores:
        null = [x for x in scored.null[k] if np.isfinite(x)]
        for i, v in enumerate(scored.values[k]):
            below = sum(1 for x in null if x < v)
            ties = sum(1 for x in null if x == v)
            assert scored.pct_random[k][i] == pytest.approx(100 * (below + ties / 2) / len(null), abs=1e-12)


# ---- no cross-talk ----------------------------------------------------------------------------
def test_a_concept_alone_equals_the_same_concept_among_others(pop, sets, scored):
    for i in (0, 3):
        alone = SB.score_concepts(pop, sets[i : i + 1], 0, unit="ck", **FAST)
        first = np.concatenate([sets[i : i + 1], np.delete(sets, i, axis=0)])
        among = SB.score_concepts(pop, first, 0, unit="ck", **FAST)
        assert differences(alone, 0, among, 0) == []
        for k in alone.scores:  # the null is drawn from (seed, unit) only
            np.testing.assert_array_equal(alone.null[k], scored.null[k])
            assert alone.pct_random[k][0] == among.pct_random[k][0]
    # The same set at another index: another tag, so only its stream-dependent scores and
    # its intervals may change, and they do (the tag reaches every stream).
    moved = SB.score_concepts(pop, sets[[1, 2, 0]], 0, unit="ck", **FAST)
    diff = differences(scored, 0, moved, 2)
    assert diff, "a concept's streams do not depend on its tag"
    assert {d for d in diff if ":" not in d} <= set(STREAM_DEPENDENT)  # values
    for k in STREAM_FREE:
        assert moved.values[k][2] == scored.values[k][0]
    assert {"coherence_random", "intrinsic_dim", "learnability:lo"} & set(diff)


def test_same_seed_is_bit_identical_other_seed_or_unit_changes_the_draws(pop, sets, scored):
    again = SB.score_concepts(pop, sets, 0, unit="ck", **FAST)
    for i in range(len(sets)):
        assert differences(scored, i, again, i) == []
    for k in scored.scores:
        np.testing.assert_array_equal(scored.null[k], again.null[k])
    other_seed = SB.score_concepts(pop, sets, 1, unit="ck", **FAST)
    other_unit = SB.score_concepts(pop, sets, 0, unit="ck-other", **FAST)
    for other in (other_seed, other_unit):
        assert not np.array_equal(other.null["learnability"], scored.null["learnability"])
        assert not np.array_equal(other.lo["learnability"], scored.lo["learnability"])
        assert not np.array_equal(other.hi["purity_label"], scored.hi["purity_label"])
        for k in ("learnability", "purity_label"):  # functions of the set: unchanged
            np.testing.assert_array_equal(other.values[k], scored.values[k])


# ---- intervals ----------------------------------------------------------------------------------
def test_intervals_are_ordered_and_purity_intervals_hold_the_value(scored):
    for k in scored.scores:
        lo, hi, v = scored.lo[k], scored.hi[k], scored.values[k]
        ok = np.isfinite(lo)
        if k == "intrinsic_dim":
            assert not ok.any()  # TwoNN on N points has no interval
            continue
        assert ok.all(), k
        assert (lo <= hi).all(), k
        if k.startswith("purity_"):
            assert ((lo <= v) & (v <= hi)).all(), k
        if k.startswith("coherence_"):  # Clopper-Pearson of k/trials holds k/trials
            assert ((lo <= v) & (v <= hi)).all(), k


P_A = np.array([0.55, 0.25, 0.15, 0.05])


def _coverage(reps: int, N: int = 40, n: int = 200) -> tuple[float, float]:
    """Coverage of the learnability and purity intervals over `reps` populations of two
    Gaussian blobs (labels of blob A drawn from P_A, of blob B uniform), the concept a
    random N of blob A: the true purity is 1 - H(P_A) / log 4; the true learnability is the
    mean of the estimates over the replicates (its expectation)."""
    out = []
    for r in range(reps):
        g = np.random.default_rng([41, r])
        a = n // 2
        X = g.standard_normal((n, 8))
        X[:a, 0] += 1.5
        lab = np.concatenate([g.choice(4, a, p=P_A), g.integers(0, 4, n - a)])
        s = np.sort(g.choice(a, N, replace=False))[None]
        res = SB.score_concepts(Population(X, lab), s, r, "coverage", n_null=0, bootstrap=200)
        out.append(
            [res.values[k][0] for k in ("learnability",)]
            + [x[k][0] for k in ("learnability", "purity_label") for x in (res.lo, res.hi)]
        )
    out = np.array(out)
    true_l = out[:, 0].mean()
    true_p = 1 + (P_A * np.log(P_A)).sum() / math.log(4)
    cov_l = np.mean((out[:, 1] <= true_l) & (true_l <= out[:, 2]))
    cov_p = np.mean((out[:, 3] <= true_p) & (true_p <= out[:, 4]))
    return float(cov_l), float(cov_p)


def _check(cov: float, reps: int) -> None:
    tol = 3 * math.sqrt(0.95 * 0.05 / reps)  # three binomial standard deviations
    assert cov >= 0.95 - tol, (cov, tol)


def test_purity_interval_coverage_by_simulation():
    """The purity interval (Jeffreys posterior, low end extended to the basic bootstrap's)
    holds the purity of the population the concept was drawn from in at least 95% of the
    replicates, within three binomial standard deviations. The percentile bootstrap of the
    plug-in purity used before held it in 0.80 of them at N = 40 (0.62 at N = 20)."""
    _check(_coverage(120)[1], 120)


def test_purity_interval_coverage_at_the_edges():
    """Where the percentile bootstrap failed worst: equal shares (purity 0; every resample's
    plug-in purity is above 0) and one dominant label at small N. Pure numpy on the scorer's
    interval function, 300 sets per case; and the interval narrows as N grows."""
    K = 4
    for shares in ([0.25] * 4, [0.9, 0.05, 0.03, 0.02], [0.7, 0.2, 0.07, 0.03]):
        shares = np.asarray(shares)
        truth = 1 + (shares[shares > 0] * np.log(shares[shares > 0])).sum() / math.log(K)
        widths = []
        for N in (12, 40):
            hits, w = 0, []
            for r in range(300):
                g = np.random.default_rng([43, N, r])
                lab = g.choice(K, N, p=shares)
                X = g.standard_normal((N + 20, 3))
                labels = np.concatenate([lab, g.integers(0, K, 20)])
                labels[N : N + K] = np.arange(K)  # every label present in the population
                sc = S.Scorer(Population(X, labels), np.arange(N), n_null=0, seed=r)
                lo, hi = sc._intervals(200, 0.05)[0]["purity_label"]
                hits += lo <= truth <= hi
                w.append(hi - lo)
            _check(hits / 300, 300)
            widths.append(np.mean(w))
        assert widths[1] < widths[0], (shares, widths)


# Measured: learnability 0.83 at N = 40 (0.79 at N = 20, 0.80 at N = 80). The interval
# resamples the evaluated images with the vote shares fixed, missing the members' own
# variability (which images the concept holds): issue 42.
COVERAGE_BUG = "the learnability interval under-covers (issue 41 report): ~0.83 at N = 40"


@pytest.mark.xfail(strict=True, reason=COVERAGE_BUG)
def test_learnability_interval_coverage_by_simulation():
    _check(_coverage(120)[0], 120)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=COVERAGE_BUG)
def test_learnability_interval_coverage_by_simulation_large():
    _check(_coverage(1000)[0], 1000)


# ---- the nulls --------------------------------------------------------------------------------
def test_random_sets_as_concepts_sit_at_the_50th_percentile_of_the_random_set_null():
    """A concept drawn as the null's sets are is exchangeable with them: its percentile is
    uniform. Per population the mean of m concepts against one null of n_null sets has
    variance (1/m + 1/n_null) / 12 (in units of 100^2); over P populations / P."""
    P, m, n_null = 6, 20, 40
    means = {k: [] for k in ("learnability", "purity_label")}
    for s in range(P):
        pop = population(s, n=160, structured=False)
        g = np.random.default_rng([7, s])
        sets = np.stack([np.sort(g.choice(160, SIZE, replace=False)) for _ in range(m)])
        res = SB.score_concepts(pop, sets, s, "null", n_null=n_null, bootstrap=0, trials=8, refs=4)
        for k in means:
            means[k].append(res.pct_random[k].mean())
    sd = 100 * math.sqrt((1 / m + 1 / n_null) / 12 / P)
    for k, v in means.items():
        assert abs(np.mean(v) - 50) <= 4 * sd, (k, v, sd)


def test_random_directions_are_caps_far_above_random_sets_on_structureless_features():
    """Why the random directions are a null of their own: the N largest projections on any
    direction are a spherical cap, learnable even on isotropic noise, so a unit must be read
    against them, not only against random sets. Their leave-one-out percentiles among
    themselves average 50 exactly (each pair counted once each way, ties half)."""
    pop = population(3, n=160, structured=False)
    dirs = A.direction_concepts(pop.X, SIZE, 0, "ck", 16)
    sets = np.stack([np.sort(c.rows) for c in dirs])
    res = SB.score_concepts(pop, sets, 0, "ck", n_null=40, bootstrap=0, trials=8, refs=4)
    assert res.pct_random["learnability"].mean() > 90
    for k in res.scores:
        v = res.values[k]
        if not np.isfinite(v).all():
            continue
        loo = SB.percentiles_among(v, v, np.arange(len(v)))
        assert loo.mean() == pytest.approx(50.0, abs=1e-9), k
        assert SB.percentiles_among(v, v).mean() == pytest.approx(50.0, abs=1e-9)  # with itself: too
        # without leaving out, each value's own tie adds 50 / m: the leave-one-out differs
        with_self = SB.percentiles_among(v, v)
        np.testing.assert_allclose(with_self, loo * (len(v) - 1) / len(v) + 50 / len(v), atol=1e-9)


def test_percentiles_among_leaves_the_direction_out_of_its_own_null():
    ref = np.array([0.1, 0.2, 0.3, 0.4])
    # the largest direction among the three others: 100 (with itself it would be 87.5)
    assert SB.percentiles_among(np.array([0.4]), ref, np.array([3]))[0] == 100.0
    assert SB.percentiles_among(np.array([0.4]), ref, np.array([-1]))[0] == 87.5
    assert SB.percentiles_among(np.array([0.1]), ref, np.array([0]))[0] == 0.0
    assert np.isnan(SB.percentiles_among(np.array([0.1]), np.array([np.nan]))[0])


# ---- bad sets -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sets, words",
    [
        ([[0, 1, 1]], "same row twice"),
        ([[0, 1, 10]], "[0, 10)"),
        ([[-1, 1, 2]], "[0, 10)"),
        (np.zeros((0, 3), np.int64), "non-empty"),
        (np.zeros((2, 0), np.int64), "non-empty"),
        ([0, 1, 2], "non-empty (concepts x members)"),
        ([[0.0, 1.0, 2.0]], "integers"),
        ([[True, False]], "integers"),
        ([list(range(9))], "fewer than 2 of 10 outside"),
    ],
)
def test_check_sets_names_what_is_wrong(sets, words):
    with pytest.raises(ValueError, match="set") as e:
        SB.check_sets(sets, 10)
    assert words in str(e.value)


def test_check_sets_sorts_and_accepts_n_minus_2():
    out = SB.check_sets(np.array([[3, 1, 2], [7, 0, 5]], np.int32), 10)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [[1, 2, 3], [0, 5, 7]])
    assert SB.check_sets([list(range(8))], 10).shape == (1, 8)


# ---- the analysis ---------------------------------------------------------------------------
OPTS = {
    "atoms": 4,
    "units_max": 6,
    "directions": 12,
    "n_null": 20,
    "bootstrap": 30,
    "methods": ["semi_nmf", "convex_nmf"],
    "stability": False,
    "max_iter": 60,
    "sae_epochs": 2,
}
N_IMAGES, CID = 120, "ck0"
N_MATCHED = 12  # 120 / 40 = 3, clipped to [12, 50]


def add_other_dataset(ws) -> None:
    """A second dataset `far` with one checkpoint `far0` (its own images)."""
    img = ws.read("images")
    far = img.slice(0, 10).to_pandas()
    far["image_id"] = [f"far-{i}" for i in range(10)]
    far["dataset"] = "far"
    ws.write("images", pa.concat_tables([img, pa.Table.from_pandas(far, schema=img.schema)]))
    write_features(ws, "far0", far["image_id"], np.random.default_rng(5).standard_normal((10, 8)))
    ck = ws.read("checkpoints").to_pandas()
    row = ck.iloc[0].copy()
    row["checkpoint_id"], row["dataset"] = "far0", "far"
    ck = pd.concat([ck, row.to_frame().T], ignore_index=True)
    ws.write("checkpoints", pa.Table.from_pandas(ck, schema=ws.read("checkpoints").schema))


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    root = tmp_path_factory.mktemp("scoreboard") / "ws"
    ws = make_workspace(root, n_images=N_IMAGES, n_checkpoints=1, dim=8)
    runner.run(root, ["dictionary", "scoreboard"], OPTS, progress_bars=False)
    return ws


def table(ws, name, cid=CID) -> pd.DataFrame:
    return ws.read(name, checkpoint_id=cid).to_pandas()


def members_of(ws, source, concept) -> list[str]:
    m = table(ws, "scoreboard_members")
    g = m[(m["source"] == source) & (m["concept"] == concept)].sort_values("rank")
    assert list(g["rank"]) == list(range(len(g)))
    return list(g["image_id"])


def features(ws, cid=CID) -> tuple[list[str], np.ndarray]:
    t = ws.read("features", checkpoint_id=cid).to_pandas().sort_values("image_id")
    return list(t["image_id"]), np.stack(t["embedding"].to_numpy()).astype(np.float32)


def test_every_scored_concept_has_n_members_and_every_score(analysed):
    con = table(analysed, "scoreboard_concepts")
    mem = table(analysed, "scoreboard_members")
    sc = table(analysed, "scoreboard_scores")
    sizes = mem.groupby(["source", "concept"]).size()
    for _, r in con.iterrows():
        key = (r["source"], r["concept"])
        assert sizes.get(key, 0) == r["size"]
        if r["scored"]:
            assert r["size"] == N_MATCHED and pd.isna(r["reason"])
        else:
            assert r["size"] < N_MATCHED and f"N = {N_MATCHED}" in r["reason"]
    assert (~con["scored"]).any() and con["scored"].any()  # small clusters are listed, unscored
    scored = con[con["scored"]]
    got = set(map(tuple, sc[["source", "concept"]].drop_duplicates().to_numpy()))
    assert got == set(map(tuple, scored[["source", "concept"]].to_numpy()))
    assert set(con["source"]) >= {
        "dictionary:semi_nmf",
        "dictionary:convex_nmf",
        "unit",
        "cluster",
        "random_direction",
        "label",
    }
    assert (con["source"] == "unit").sum() == OPTS["units_max"]
    assert (con["source"] == "random_direction").sum() == OPTS["directions"]
    assert (sc.groupby(["source", "concept"]).size() == len(set(sc["score"]))).all()
    null = table(analysed, "scoreboard_null")
    assert set(null["n"][null["null"] == "random_directions"]) <= {OPTS["directions"]}
    rs = null[(null["null"] == "random_sets") & (null["score"] == "learnability")]
    assert list(rs["n"]) == [OPTS["n_null"]]


def test_random_directions_percentiles_among_themselves_leave_each_out(analysed):
    """Through the analysis: a random direction's pct_directions is its percentile among the
    OTHER directions, so over the directions they average 50 exactly; any other concept's
    is its percentile among all of them."""
    sc = table(analysed, "scoreboard_scores")
    for k, g in sc.groupby("score"):
        d = g[g["source"] == "random_direction"]
        if d["value"].isna().any():
            continue
        assert len(d) == OPTS["directions"]
        assert d["pct_directions"].mean() == pytest.approx(50.0, abs=1e-9), k  # (with itself too)
        ref = d["value"].to_numpy(float)
        for j in range(len(d)):  # each among the others only
            others = np.delete(ref, j)
            want = 100 * ((others < ref[j]).sum() + 0.5 * (others == ref[j]).sum()) / len(others)
            assert d["pct_directions"].iloc[j] == pytest.approx(want, abs=1e-9), k
        for _, r in g[g["source"] != "random_direction"].head(5).iterrows():
            want = 100 * ((ref < r["value"]).sum() + 0.5 * (ref == r["value"]).sum()) / len(ref)
            assert r["pct_directions"] == pytest.approx(want, abs=1e-9)


def test_unit_concepts_are_the_top_n_rows_of_their_channel(analysed):
    ids, X = features(analysed)
    units = table(analysed, "scoreboard_concepts").query("source == 'unit'")["concept"]
    for j in map(int, units):
        order = sorted(range(len(ids)), key=lambda i: (-float(X[i, j]), i))[:N_MATCHED]
        assert members_of(analysed, "unit", str(j)) == [ids[i] for i in order]


def test_top_breaks_ties_by_image_order():
    v = np.array([1.0, 3.0, 3.0, 2.0, 3.0, -1.0])
    np.testing.assert_array_equal(A._top(v, 4), [1, 2, 4, 3])
    np.testing.assert_array_equal(A._top(v, 10, positive=True), [1, 2, 4, 3, 0])


def test_cluster_concepts_are_the_n_nearest_members(analysed):
    ks = [p["k"] for p in analysed.partitions("clusters") if p["checkpoint_id"] == CID]
    cl = analysed.read("clusters", checkpoint_id=CID, k=min(ks)).to_pandas().sort_values("image_id")
    con = table(analysed, "scoreboard_concepts").query("source == 'cluster'")
    assert len(con) == min(ks)
    for _, r in con.iterrows():
        g = cl[cl["cluster"] == int(r["concept"])].reset_index(drop=True)
        order = sorted(range(len(g)), key=lambda i: (g["distance"][i], i))[:N_MATCHED]
        assert members_of(analysed, "cluster", r["concept"]) == [g["image_id"][i] for i in order]
        assert r["scored"] == (len(g) >= N_MATCHED)


def test_label_concepts_are_n_images_of_their_label(analysed):
    img = analysed.read("images").to_pandas().set_index("image_id")
    con = table(analysed, "scoreboard_concepts").query("source == 'label'")
    assert sorted(con["concept"]) == ["0", "1", "2"]
    for c in con["concept"]:
        m = members_of(analysed, "label", c)
        assert len(m) == len(set(m)) == N_MATCHED
        assert {str(img.loc[i, "label"]) for i in m} == {c}
        assert m == sorted(m)  # a sample, in image order


def test_dictionary_concepts_are_the_first_n_ranks_of_the_codes(analysed):
    codes = table(analysed, "dictionary_codes")
    for (method, atom), g in codes.groupby(["method", "atom"]):
        first = list(g.sort_values("rank")["image_id"])[:N_MATCHED]
        assert members_of(analysed, f"dictionary:{method}", str(atom)) == first


def test_the_result_validates(analysed):
    assert validate(analysed.root) == [], format_problems(validate(analysed.root))


def _files(ws, name):
    return {p: p.read_bytes() for p in sorted(ws.partition_files(name, checkpoint_id=CID))}


def test_rerun_is_a_no_op_and_another_seed_recomputes(analysed, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(analysed.root, root)
    from conceptlens.workspace import Workspace

    ws = Workspace(root)
    before = {n: _files(ws, n) for n in A.ANALYSIS.writes}
    ctx = runner.run(root, ["scoreboard"], OPTS, progress_bars=False)
    assert {n: _files(ws, n) for n in A.ANALYSIS.writes} == before
    assert not any("scoreboard" in n for n in ctx.notes)
    null0 = table(ws, "scoreboard_null")
    ctx = runner.run(root, ["scoreboard"], {**OPTS, "seed": 1}, progress_bars=False, with_dependencies=False)
    assert any("seed 0 -> 1" in n for n in ctx.notes)
    null1 = table(ws, "scoreboard_null")
    assert not np.array_equal(null0["median"].to_numpy(float), null1["median"].to_numpy(float))
    units0 = set(table(analysed, "scoreboard_concepts").query("source == 'unit'")["concept"])
    units1 = set(table(ws, "scoreboard_concepts").query("source == 'unit'")["concept"])
    assert len(units1) == OPTS["units_max"] and units0 != units1  # the sampled channels: seeded
    assert validate(root) == [], format_problems(validate(root))


def test_an_annotator_of_another_dataset_is_named(analysed, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(analysed.root, root)
    from conceptlens.workspace import Workspace

    add_other_dataset(Workspace(root))
    with pytest.raises(Exception) as e:
        runner.run(
            root,
            ["scoreboard"],
            {**OPTS, "annotator": "checkpoint:far0"},
            checkpoint=CID,
            force=True,
            progress_bars=False,
            with_dependencies=False,
        )
    assert "far0" in str(e.value) and "annotator" in str(e.value), str(e.value)


def test_nan_features_are_an_error_naming_the_checkpoint_and_nothing_is_written(tmp_path):
    ws = make_workspace(tmp_path / "ws", n_images=48, n_checkpoints=2, dim=8)
    ids, X = features(ws, "ck1")
    X[5, 2] = np.nan
    write_features(ws, "ck1", ids, X)
    with pytest.raises(ValueError, match="'ck1'.*NaN"):
        runner.run(
            ws.root, ["scoreboard"], OPTS, checkpoint="ck1", progress_bars=False, with_dependencies=False
        )
    for name in A.ANALYSIS.writes:
        assert not ws.has(name, checkpoint_id="ck1")


def test_matched_size():
    assert A.matched_size(120, 0) == 12
    assert A.matched_size(4000, 0) == 50
    assert A.matched_size(1000, 0) == 25
    assert A.matched_size(1000, 7) == 7
    assert A.matched_size(10, 0) == 7  # below n - 2
    assert {s.name for s in A.SOURCES} == set(A.SOURCE_NAMES)
    assert schema.arrow_schema("scoreboard_scores", partition=False) is not None


# ---- niche membership (concept quality, Definition 3) -----------------------------------------
def brute_niche(member_rows, codes) -> float:
    """max over values of np.corrcoef(member indicator, value indicator) divided by the
    np.corrcoef of the most associated set of as many known members (it holds as many of
    the value's images as it can), over the rows whose code is known; nan when nothing
    varies."""
    codes = np.asarray(codes)
    known = np.flatnonzero(codes >= 0)
    inside = np.zeros(len(codes), bool)
    inside[member_rows] = True
    N = int(inside[known].sum())
    best = math.nan
    for v in sorted(set(codes[known].tolist())):
        val = (codes[known] == v).astype(float)
        ind = inside[known].astype(float)
        order = np.argsort(-val, kind="stable")  # the value's images first
        most = np.zeros(len(known))
        most[order[:N]] = 1
        if ind.std() == 0 or val.std() == 0:
            continue
        r = np.corrcoef(ind, val)[0, 1] / np.corrcoef(most, val)[0, 1]
        best = r if math.isnan(best) else max(best, r)
    return best


def test_niche_correlation_is_the_largest_pearson_over_its_maximum_over_known_rows():
    g = np.random.default_rng(3)
    n = 90
    for K, missing in ((2, 0.0), (3, 0.2), (5, 0.5)):
        codes = g.integers(0, K, n)
        codes[g.random(n) < missing] = -1
        sets = np.stack([np.sort(g.choice(n, 15, replace=False)) for _ in range(40)])
        corr, best, N, a, Kv, nk = SB.niche_correlations(sets, codes, K)
        want = [brute_niche(s, codes) for s in sets]
        np.testing.assert_allclose(corr, want, atol=1e-12)
        assert nk == (codes >= 0).sum()
        np.testing.assert_array_equal(N, (codes[sets] >= 0).sum(axis=1))
        np.testing.assert_array_equal(a, (codes[sets] == best[:, None]).sum(axis=1))


def test_niche_closed_forms_and_invariances():
    codes = np.repeat([0, 1, 2], 20)
    exact = np.arange(20, 40)[None]  # every image of value 1, nothing else
    corr, best, *_ = SB.niche_correlations(exact, codes, 3)
    assert corr[0] == pytest.approx(1.0) and best[0] == 1
    # renaming the values, or flipping a binary concept, changes nothing
    renamed = np.array([2, 0, 1])[codes]
    sets = np.stack([np.sort(np.random.default_rng(i).choice(60, 12, replace=False)) for i in range(20)])
    np.testing.assert_allclose(
        SB.niche_correlations(sets, codes, 3)[0], SB.niche_correlations(sets, renamed, 3)[0], atol=1e-12
    )
    binary = (codes == 1).astype(int)
    np.testing.assert_allclose(
        SB.niche_correlations(sets, binary, 2)[0], SB.niche_correlations(sets, 1 - binary, 2)[0], atol=1e-12
    )
    # a concept every image shares, or none known: nan, never an error
    assert np.isnan(SB.niche_correlations(sets, np.zeros(60, int), 1)[0]).all()
    assert np.isnan(SB.niche_correlations(sets, np.full(60, -1), 0)[0]).all()
    # bounds; at the base rate of every value, 0; more members than the value has: all of
    # them inside is the most there is
    c = SB.niche_correlations(sets, codes, 3)[0]
    assert ((c >= 0) & (c <= 1)).all()
    base = np.array([[0, 1, 20, 21, 40, 41]])
    assert SB.niche_correlations(base, codes, 3)[0][0] == pytest.approx(0.0, abs=1e-12)
    over = np.arange(15, 45)[None]  # 30 members, all 20 of value 1 among them
    assert SB.niche_correlations(over, codes, 3)[0][0] == pytest.approx(1.0)


def test_niche_interval_holds_the_value_and_covers_by_simulation():
    """Sets of N images drawn with a share q of a binary concept's value 1 (population of
    n = 400, K = 120 with it): the interval holds the concept's phi / phi_max at share q
    (N, K, n fixed; the larger of its two values' as the score takes) in at least 95% of the
    sets, within three binomial standard deviations, at every share from none to all; it
    narrows as N grows."""
    n, K, reps = 400, 120, 300
    codes = np.zeros(n, int)
    codes[:K] = 1
    widths = {}
    for N in (12, 40):
        for q in (0.0, 0.1, 0.3, 0.6, 0.95):
            g = np.random.default_rng([int(N), int(100 * q)])
            true = max(
                float(SB.phi_over_max(N * q, N, K, n)), float(SB.phi_over_max(N * (1 - q), N, n - K, n))
            )
            hits, w = 0, []
            for _ in range(reps):
                a = g.binomial(N, q)
                rows = np.concatenate(
                    [g.choice(K, a, replace=False), K + g.choice(n - K, N - a, replace=False)]
                )
                out = SB.niche_scores(np.sort(rows)[None], {"c": (codes, 2)})["niche_c"]
                v, lo, hi = out[0][0], out[1][0], out[2][0]
                assert lo - 1e-12 <= v <= hi + 1e-12
                hits += lo <= true <= hi
                w.append(hi - lo)
            _check(hits / reps, reps)
            widths[N, q] = np.median(w)
    for q in (0.1, 0.6, 0.95):
        assert widths[40, q] < 0.8 * widths[12, q]


def _hashed(texts, model=None) -> np.ndarray:
    """A sentence model stand-in: a seeded vector per text (distinct texts, distinct rows)."""
    import hashlib

    rows = []
    for t in texts:
        v = np.random.default_rng(int(hashlib.sha1(t.encode()).hexdigest()[:8], 16)).normal(size=6)
        rows.append(v / np.linalg.norm(v))
    return np.asarray(rows, np.float32).reshape(len(rows), 6)


def brute_top1(members, ids, text_of, competitors) -> tuple[float, str]:
    """laina2020: the set's caption is the member caption whose mean cosine distance to the
    members' captions minus that to the other images' is least (first in image order on a
    tie); Top-1 is the share of captioned members whose caption is nearer to it than to
    every competing caption (a tie with k of them: 1 / (k + 1)). (Top-1, the caption)."""
    emb = {t: _hashed([t])[0].astype(np.float64) for t in set(text_of.values()) | set(competitors)}
    inside = [text_of[i] for i in ids if i in members and i in text_of]
    outside = [text_of[i] for i in ids if i not in members and i in text_of]

    def dist(a, b):
        return 1 - float(emb[a] @ emb[b])

    def eq4(c):
        return np.mean([dist(c, t) for t in inside]) - (
            np.mean([dist(c, t) for t in outside]) if outside else 0
        )

    scores = [eq4(c) for c in inside]
    chosen = inside[int(np.argmin(scores))]
    credit = []
    for t in inside:
        own = float(emb[t] @ emb[chosen])
        other = np.array([float(emb[t] @ emb[c]) for c in competitors])
        tied = np.isclose(other, own, rtol=0, atol=1e-9).sum()
        if (other > own + 1e-9).any():
            credit.append(0.0)  # a competitor is nearer
        else:
            credit.append(1 / (tied + 1))
    return float(np.mean(credit)), chosen


@pytest.fixture(scope="module")
def with_concepts(tmp_path_factory):
    """A workspace with ground-truth concepts (binary `is_red` known for all but 10 images,
    three-valued `tri` of seeded values) analysed with a stand-in sentence model."""
    from conceptlens import text

    root = tmp_path_factory.mktemp("scoreboard-concepts") / "ws"
    ws = make_workspace(root, n_images=N_IMAGES, n_checkpoints=1, dim=8)
    img = ws.read("images").to_pandas()
    g = np.random.default_rng(11)
    rows = [
        {"image_id": i, "concept": "is_red", "value": int(lab == 0)}
        for k, (i, lab) in enumerate(zip(img["image_id"], img["label"]))
        if k % 12 != 5
    ] + [{"image_id": i, "concept": "tri", "value": int(g.integers(0, 3))} for i in img["image_id"]]
    ws.write("concept_labels", pa.Table.from_pylist(rows, schema=schema.arrow_schema("concept_labels")))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(text, "embed_sentences", _hashed)
        mp.setattr(text, "unavailable", lambda: None)
        ctx = runner.run(root, ["scoreboard"], OPTS, progress_bars=False)
    return ws, ctx, pd.DataFrame(rows)


def test_niche_scores_of_every_concept_recomputed_from_its_members(with_concepts):
    ws, _, truth = with_concepts
    ids, _ = features(ws)
    sc = table(ws, "scoreboard_scores")
    assert {"niche_is_red", "niche_tri"} <= set(sc["score"])
    for name in ("is_red", "tri"):
        value = dict(truth[truth["concept"] == name][["image_id", "value"]].itertuples(index=False))
        codes = np.array([value.get(i, -1) for i in ids])
        got = sc[sc["score"] == f"niche_{name}"]
        assert len(got) == len(table(ws, "scoreboard_concepts").query("scored"))
        for r in got.itertuples(index=False):
            members = set(members_of(ws, r.source, r.concept))
            rows = [j for j, i in enumerate(ids) if i in members]
            assert r.value == pytest.approx(brute_niche(rows, codes), abs=1e-9), (r.source, r.concept)
            assert r.lo - 1e-12 <= r.value <= r.hi + 1e-12
    # the label concept of colour 0 is the is_red concept itself: at the top of its niche
    red = sc[(sc["score"] == "niche_is_red") & (sc["source"] == "label") & (sc["concept"] == "0")]
    assert red["value"].iloc[0] == pytest.approx(1.0)


def test_niche_scores_do_not_depend_on_how_the_values_are_numbered(with_concepts, tmp_path):
    """Renaming a concept's values (tri's 0, 1, 2 as 2_000_000_000, 7, 0: order reversed,
    gaps, a huge code) changes no niche score, interval or percentile, and the unit is due
    again because concept_labels changed. Catches codes taken as positions (a huge value
    allocating per-value arrays that size) and values mapped by their number, not by
    identity."""
    from conceptlens import text
    from conceptlens.workspace import Workspace

    root = tmp_path / "renamed"
    shutil.copytree(with_concepts[0].root, root)
    ws = Workspace(root)
    rows = with_concepts[2].copy()
    tri = rows["concept"] == "tri"
    rows.loc[tri, "value"] = rows.loc[tri, "value"].map({0: 2_000_000_000, 1: 7, 2: 0})
    ws.write(
        "concept_labels",
        pa.Table.from_pandas(rows, schema=schema.arrow_schema("concept_labels"), preserve_index=False),
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(text, "embed_sentences", _hashed)
        mp.setattr(text, "unavailable", lambda: None)
        runner.run(root, ["scoreboard"], OPTS, progress_bars=False, with_dependencies=False)
    key = ["source", "concept", "score"]

    def niche(w):
        t = table(w, "scoreboard_scores")
        return t[t["score"].str.startswith("niche_")].sort_values(key).reset_index(drop=True)

    after, before = niche(ws), niche(with_concepts[0])
    assert len(before) and set(after["score"]) == {"niche_is_red", "niche_tri"}
    pd.testing.assert_frame_equal(after, before)

    # done again (its recorded inputs changed), not kept from before the renaming
    def inputs(w):
        return w.read_metadata("scoreboard_scores", checkpoint_id=CID).get("inputs")

    assert inputs(ws) and inputs(with_concepts[0]) and inputs(ws) != inputs(with_concepts[0])


def test_describability_of_every_concept_recomputed_from_its_captions(with_concepts):
    ws, _, _ = with_concepts
    ids, _ = features(ws)
    caps = ws.read("captions").to_pandas()
    text_of = dict(caps[caps["captioner"] == "groundtruth"][["image_id", "text"]].itertuples(index=False))
    k = min(int(p["k"]) for p in ws.partitions("clusters") if p["checkpoint_id"] == CID)
    clus = ws.read("cluster_captions", checkpoint_id=CID, k=k).to_pandas().sort_values("cluster")
    competitors = clus["caption"].dropna().astype(str).tolist()
    sc = table(ws, "scoreboard_scores").query("score == 'describability_top1'")
    assert len(sc) == len(table(ws, "scoreboard_concepts").query("scored")) and competitors
    said = table(ws, "scoreboard_concepts").set_index(["source", "concept"])["caption"]
    db = WorkspaceDB(ws.root)
    for r in sc.itertuples(index=False):
        members = set(members_of(ws, r.source, r.concept))
        top1, chosen = brute_top1(members, ids, text_of, competitors)
        assert r.value == pytest.approx(top1, abs=1e-9)
        assert r.lo <= r.value <= r.hi
        # The caption the page shows is the one the value was scored from, of this concept.
        assert said[(r.source, r.concept)] == chosen
        assert V.caption(db, CID, r.source, r.concept) == chosen
    unscored = ~table(ws, "scoreboard_concepts").set_index(["source", "concept"])["scored"]
    assert said[unscored].isna().all()


def test_without_the_sentence_model_describability_is_noted_and_done_again_once_installed(
    with_concepts, tmp_path
):
    from conceptlens import text
    from conceptlens.workspace import Workspace

    root = tmp_path / "copy"
    shutil.copytree(with_concepts[0].root, root)
    ws = Workspace(root)
    for name in A.ANALYSIS.writes:
        shutil.rmtree(ws.partition_dir(name, checkpoint_id=CID))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(text, "unavailable", lambda: "needs the package sentence-transformers")
        ctx = runner.run(root, ["scoreboard"], OPTS, progress_bars=False, with_dependencies=False)
    assert any("describability" in n and "sentence-transformers" in n for n in ctx.notes), ctx.notes
    assert "describability_top1" not in set(table(ws, "scoreboard_scores")["score"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(text, "embed_sentences", _hashed)
        mp.setattr(text, "unavailable", lambda: None)
        runner.run(root, ["scoreboard"], OPTS, progress_bars=False, with_dependencies=False)
    after = table(ws, "scoreboard_scores")
    assert "describability_top1" in set(after["score"])
    before = table(with_concepts[0], "scoreboard_scores")
    pd.testing.assert_frame_equal(
        after.sort_values(["source", "concept", "score"]).reset_index(drop=True),
        before.sort_values(["source", "concept", "score"]).reset_index(drop=True),
    )
