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
from conceptlens.metrics import scoreboard as SB
from conceptlens.metrics import selection as S
from conceptlens.metrics.selection import K_NN, TEMPERATURE, Population
from conceptlens.validate import format_problems, validate
from tests.factory import make_workspace, write_features

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
