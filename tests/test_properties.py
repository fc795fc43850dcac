"""Property-based tests of the metrics (hypothesis): invariances, bounds, monotonicity.

Each property is one a correct metric has by definition, so it holds on any input:
cosine metrics ignore the length of rows, labels are names (any relabelling gives the
same number), row order does not matter where nothing random depends on it, values stay
in their range, Clopper-Pearson widens as n shrinks. Runs are derandomised (the same
examples every time) and few, so CI is stable and quick.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from conceptlens import metrics as M
from conceptlens.metrics.compare import purity_bins
from conceptlens.workspace import Workspace, parse_partition, partition_value

SETTINGS = settings(
    max_examples=30,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

seeds = st.integers(0, 2**16)


def gaussian(seed: int, n: int, d: int, scale: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)) * scale


def positive_scales(seed: int, n: int) -> np.ndarray:
    """Row lengths over four orders of magnitude."""
    return 10 ** np.random.default_rng(seed + 1).uniform(-2, 2, n)


def relabel(y: np.ndarray, seed: int) -> np.ndarray:
    """The same partition under other names (a random bijection onto other integers)."""
    values = np.unique(y)
    new = np.random.default_rng(seed).permutation(len(values)) * 7 + 100
    return new[np.searchsorted(values, y)]


# ---- kNN accuracy and cluster learnability (cosine) --------------------------------------
@SETTINGS
@given(seed=seeds, n_train=st.integers(4, 40), n_test=st.integers(1, 20), k=st.sampled_from([1, 3, 20]))
def test_knn_accuracy_ignores_row_length_relabelling_and_train_order(seed, n_train, n_test, k):
    X, T = gaussian(seed, n_train, 5), gaussian(seed + 2, n_test, 5)
    rng = np.random.default_rng(seed)
    y, yt = rng.integers(0, 3, n_train), rng.integers(0, 3, n_test)
    acc = M.knn_accuracy(X, y, T, yt, k=k)
    assert 0.0 <= acc <= 1.0 and acc * n_test == pytest.approx(round(acc * n_test))
    scaled = M.knn_accuracy(
        X * positive_scales(seed, n_train)[:, None],
        y,
        T * positive_scales(seed + 3, n_test)[:, None],
        yt,
        k=k,
    )
    assert scaled == pytest.approx(acc)
    both = np.r_[y, yt]
    named = relabel(both, seed)
    assert M.knn_accuracy(X, named[:n_train], T, named[n_train:], k=k) == pytest.approx(acc)
    p = rng.permutation(n_train)
    assert M.knn_accuracy(X[p], y[p], T, yt, k=k) == pytest.approx(acc)


@SETTINGS
@given(seed=seeds, n=st.integers(6, 40), n_clusters=st.integers(2, 5), n_chunks=st.integers(2, 6))
def test_cl_ignores_row_length_and_cluster_names(seed, n, n_clusters, n_chunks):
    X = gaussian(seed, n, 4)
    y = np.random.default_rng(seed).integers(0, n_clusters, n)
    cl = M.cluster_learnability(X, y, n_chunks=n_chunks, n_orders=2, random_state=seed)
    assert 0.0 <= cl <= 1.0
    scaled = X * positive_scales(seed, n)[:, None]
    assert M.cluster_learnability(scaled, y, n_chunks, 2, seed) == pytest.approx(cl)
    assert M.cluster_learnability(X, relabel(y, seed), n_chunks, 2, seed) == pytest.approx(cl)


@SETTINGS
@given(seed=seeds, n_clusters=st.integers(2, 5), per=st.integers(1, 6), n_orders=st.integers(1, 3))
def test_cl_of_separated_clusters_one_image_per_chunk(seed, n_clusters, per, n_orders):
    """Far-apart clusters, one image per chunk: the first image of each cluster after the
    first chunk is the only miss, whatever the order: CL = 1 - (K - 1) / (N - 1)."""
    y = np.random.default_rng(seed).permutation(np.repeat(np.arange(n_clusters), per))
    n = len(y)
    assume(n >= 2)
    X = 10 * np.eye(6)[y] + 0.01 * gaussian(seed, n, 6)
    cl = M.cluster_learnability(X, y, n_chunks=n, n_orders=n_orders, random_state=seed)
    assert cl == pytest.approx(1 - (n_clusters - 1) / (n - 1), abs=1e-12)


@SETTINGS
@given(seed=seeds, n=st.integers(8, 60), m=st.sampled_from([2, 4, 64]), n_chunks=st.integers(2, 6))
def test_shared_neighbour_metrics_equal_the_direct_ones(seed, n, m, n_chunks):
    """The pipeline's one-pass versions (SelfNeighbours) give the direct functions' values,
    however short each row's neighbour list is, and with fewer train rows than k = 20."""
    Xn = M.l2_normalize(gaussian(seed, n, 4))
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    train = rng.random(n) < 0.7
    assume(2 <= train.sum() < n)
    nb = M.SelfNeighbours(Xn, m)
    for k in (1, 20):
        want = M.knn_accuracy(Xn[train], y[train], Xn[~train], y[~train], k=k)
        assert M.knn_accuracy_shared(nb, train, y, ~train, k=k) == pytest.approx(want)
    for orders in (1, 2):
        cl = M.cluster_learnability(Xn, y, n_chunks=n_chunks, n_orders=orders, random_state=seed)
        assert M.cluster_learnability_shared(nb, y, n_chunks, orders, seed) == pytest.approx(cl)
    assert M.twonn_shared(nb)[0] == pytest.approx(M.twonn(Xn)[0], rel=1e-9)


# ---- neighbours and intrinsic dimension ------------------------------------------------
@SETTINGS
@given(seed=seeds, n=st.integers(3, 40), k=st.integers(1, 3), offset=st.sampled_from([0.0, 1e3, 1e5]))
@example(seed=0, n=40, k=2, offset=1e5)
def test_euclidean_neighbours_equal_float64_brute_force(seed, n, k, offset):
    """Near-duplicates far from the origin: float32 products alone cannot rank them."""
    assume(k < n)
    X = offset + gaussian(seed, n, 3) * 10 ** np.random.default_rng(seed).uniform(-3, 0)
    dist, idx = M.nearest_euclidean_self(X, k=k)
    D = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2))
    np.fill_diagonal(D, np.inf)
    assert dist == pytest.approx(np.sort(D, axis=1)[:, :k], rel=1e-9, abs=1e-12)
    assert np.take_along_axis(D, idx, axis=1) == pytest.approx(dist, rel=1e-9, abs=1e-12)
    assert (idx != np.arange(n)[:, None]).all()


@SETTINGS
@given(seed=seeds, n=st.integers(8, 60), d=st.integers(2, 6))
def test_twonn_ignores_row_order_scale_translation_and_rotation(seed, n, d):
    X = gaussian(seed, n, d)
    dim, _ = M.twonn(X)
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    moved = 3.7 * X[rng.permutation(n)] @ Q + 5.0
    assert M.twonn(moved)[0] == pytest.approx(dim, rel=1e-6)
    assert dim > 0


@SETTINGS
@given(seed=seeds, n=st.integers(2, 30), k=st.integers(1, 4))
def test_cosine_neighbours_ignore_row_length(seed, n, k):
    assume(k <= n)
    Q, B = gaussian(seed, 5, 4), gaussian(seed + 1, n, 4)
    sims, idx = M.nearest_cosine(Q, B, k=k)
    s2, i2 = M.nearest_cosine(Q * 3.0, B * positive_scales(seed, n)[:, None], k=k)
    assert (idx == i2).all() and s2 == pytest.approx(sims, abs=1e-5)
    assert (np.diff(sims, axis=1) <= 1e-7).all() and (np.abs(sims) <= 1 + 1e-6).all()


# ---- purity, aNMI, Clopper-Pearson -----------------------------------------------------------
@SETTINGS
@given(labels=st.lists(st.integers(0, 5), min_size=1, max_size=40), extra=st.integers(0, 3), seed=seeds)
def test_purity_bounds_and_relabelling(labels, extra, seed):
    y = np.array(labels)
    K = len(set(labels)) + extra
    assume(K >= 2)
    p, top, share = M.purity(y, K)
    assert 0.0 <= p <= 1.0 and 0.0 < share <= 1.0
    assert type(top) is int and share == np.mean(y == top)  # a plain int: it is written to Arrow
    assert (p == 1.0) == (len(set(labels)) == 1)
    p2, _, share2 = M.purity(relabel(y, seed), K)
    assert p2 == pytest.approx(p) and share2 == share
    assert M.purity(np.random.default_rng(seed).permutation(y), K)[0] == pytest.approx(p)
    # A cluster holding every class equally often has purity 0.
    assert M.purity(np.repeat(np.arange(K), 3), K)[0] == pytest.approx(0.0, abs=1e-12)


@SETTINGS
@given(seed=seeds, n=st.integers(4, 60), a=st.integers(2, 5), b=st.integers(2, 5))
def test_anmi_is_symmetric_and_ignores_names_and_order(seed, n, a, b):
    rng = np.random.default_rng(seed)
    x, y = rng.integers(0, a, n), rng.integers(0, b, n)
    assume(len(np.unique(x)) > 1 and len(np.unique(y)) > 1)
    v = M.anmi(x, y)
    assert v <= 1.0 + 1e-12
    assert M.anmi(y, x) == pytest.approx(v, abs=1e-12)
    assert M.anmi(relabel(x, seed), relabel(y, seed + 1)) == pytest.approx(v, abs=1e-12)
    p = rng.permutation(n)
    assert M.anmi(x[p], y[p]) == pytest.approx(v, abs=1e-12)
    assert M.anmi(x, relabel(x, seed)) == pytest.approx(1.0)


@SETTINGS
@given(n=st.integers(1, 200), data=st.data())
def test_clopper_pearson_bounds_and_monotone_in_k(n, data):
    k = data.draw(st.integers(0, n))
    lo, hi = M.clopper_pearson(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    assert (lo == 0.0) == (k == 0) and (hi == 1.0) == (k == n)
    if k < n:
        lo2, hi2 = M.clopper_pearson(k + 1, n)
        assert lo2 > lo and hi2 > hi
    # A wider confidence level gives a wider interval.
    lo99, hi99 = M.clopper_pearson(k, n, alpha=0.01)
    assert lo99 <= lo and hi99 >= hi


@SETTINGS
@given(k=st.integers(0, 30), extra=st.integers(1, 30), m=st.integers(2, 5))
def test_clopper_pearson_widens_as_n_shrinks(k, extra, m):
    """Same share of successes, fewer trials: a wider interval, containing the other."""
    n = k + extra
    lo, hi = M.clopper_pearson(k, n)
    lo_m, hi_m = M.clopper_pearson(k * m, n * m)
    assert hi - lo > hi_m - lo_m
    assert lo <= lo_m and hi >= hi_m


@SETTINGS
@given(
    clusters=st.lists(st.tuples(st.integers(20, 120), st.floats(0, 1)), min_size=1, max_size=6),
    purity=st.floats(0.05, 0.95),
)
@example(clusters=[(100, 0.29)], purity=0.5)
def test_purity_range_interval_is_clopper_pearson_of_the_pooled_trials(clusters, purity):
    trials = np.array([t for t, _ in clusters])
    wins = np.array([round(t * s) for t, s in clusters])
    m = pd.DataFrame(
        {
            "purity": purity,
            "coherence_random": wins / trials,
            "coherence_hard": wins / trials,
            "coherence_trials": trials,
        }
    )
    (row,) = purity_bins(m).to_dict("records")
    assert (row["coherence_random_lo"], row["coherence_random_hi"]) == M.clopper_pearson(
        int(wins.sum()), int(trials.sum())
    )
    assert row["coherence_random_mean"] == pytest.approx((wins / trials).mean())
    assert row["clusters"] == len(clusters)


# ---- 2AFC coherence -------------------------------------------------------------------------
@SETTINGS
@given(seed=seeds, k=st.integers(2, 5), refs=st.integers(1, 5))
def test_2afc_trials_and_annotator_invariances(seed, k, refs):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, 60)
    assume(len(np.unique(labels)) >= 2)
    X = gaussian(seed, 60, 4)
    hard = M.hard_negative_clusters(X, labels)
    # Never a cluster's own hard negative; the same answer whatever the rows' order.
    assert all(h != c for c, h in hard.items())
    p = rng.permutation(60)
    assert M.hard_negative_clusters(X[p], labels[p]) == hard
    for kind in ("random", "hard"):
        t = M.make_trials(labels, 20, refs, kind, hard, seed)
        assert (labels[t.query] == t.cluster).all() and (labels[t.refs] == t.cluster[:, None]).all()
        if kind == "hard":
            assert all(labels[n] == hard[c] for c, n in zip(t.cluster, t.negative))
        else:
            assert (labels[t.negative] != t.cluster).all()
        assert all(q not in r for q, r in zip(t.query, t.refs))
        A = gaussian(seed + 5, 60, 3)
        answers = M.annotate(t, A, seed)
        assert (M.annotate(t, A * positive_scales(seed, 60)[:, None], seed) == answers).all()
        for acc, lo, hi, n in M.coherence(t, answers).values():
            assert n == 20 and lo <= acc <= hi and acc * 20 == round(acc * 20)


# ---- CLID and W-CLID ---------------------------------------------------------------------------
# Hundredths: differences large enough that float rounding cannot reorder them.
vectors = st.lists(st.integers(-5000, 5000).map(lambda v: v / 100), min_size=3, max_size=12)


@SETTINGS
@given(x=vectors, a=st.floats(0.1, 10), b=st.floats(-10, 10))
def test_zscore_keeps_order_and_ignores_affine_maps(x, a, b):
    x = np.array(x)
    assume(np.ptp(x) > 1e-3)
    z = M.zscore(x)
    assert z.mean() == pytest.approx(0, abs=1e-9) and z.std() == pytest.approx(1)
    # Larger values get larger z: the order of the checkpoints is kept, not reversed.
    assert (np.sign(np.diff(z)) == np.sign(np.diff(x))).all()
    assert M.zscore(a * x + b) == pytest.approx(z, abs=1e-6)
    assert M.zscore(-a * x + b) == pytest.approx(-z, abs=1e-6)


def test_zscore_of_two_values_and_of_missing_ones():
    """Two checkpoints are enough to compare; a missing value (None or NaN) stays missing."""
    assert M.zscore([1.0, 3.0]) == pytest.approx([-1.0, 1.0])
    z = M.zscore([1.0, None, 3.0, math.nan])
    assert z[[0, 2]] == pytest.approx([-1.0, 1.0]) and np.isnan(z[[1, 3]]).all()
    assert np.isnan(M.zscore([2.0, None])).all() and np.isnan(M.zscore([2.0, 2.0, 2.0])).all()


@SETTINGS
@given(seed=seeds, n=st.integers(4, 12), w=st.tuples(st.floats(-1, 1), st.floats(-1, 1), st.floats(-1, 1)))
def test_wclid_recovers_an_exact_linear_law_and_ignores_units(seed, n, w):
    rng = np.random.default_rng(seed)
    cl, id_ = rng.uniform(0, 1, n), rng.uniform(2, 20, n)
    assume(abs(np.corrcoef(cl, id_)[0, 1]) < 0.95)
    acc = w[0] * cl + w[1] * id_ + w[2]
    pred, weights = M.wclid(cl, id_, acc)
    assert pred == pytest.approx(acc, abs=1e-8)
    assert weights == pytest.approx(np.array(w), abs=1e-6)
    if n >= 5:
        assert M.wclid(cl, id_, acc, leave_one_out=True)[0] == pytest.approx(acc, abs=1e-7)
    # Predictions do not depend on the units CL and ID are measured in.
    noisy = acc + rng.normal(0, 0.1, n)
    base = M.wclid(cl, id_, noisy)[0]
    # In-sample by default: the least-squares fit of all the checkpoints (scikit-learn's).
    from sklearn.linear_model import LinearRegression

    X = np.column_stack([cl, id_])
    assert base == pytest.approx(LinearRegression().fit(X, noisy).predict(X), abs=1e-8)
    assert M.wclid(100 * cl + 3, 0.01 * id_ - 1, noisy)[0] == pytest.approx(base, abs=1e-7)
    clid = M.clid(cl, id_)
    assert M.clid(2 * cl + 1, 5 * id_) == pytest.approx(clid, abs=1e-9)


@SETTINGS
@given(seed=seeds, n=st.integers(4, 12))
def test_correlations_ignore_increasing_maps_and_flip_with_decreasing(seed, n):
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    r = M.correlations(x, y, n_boot=200, random_state=seed)
    assert -1 <= r["pearson"] <= 1 and -1 <= r["kendall"] <= 1
    assert r["pearson_lo"] <= r["pearson"] <= r["pearson_hi"]
    up = M.correlations(3 * x + 1, y, n_boot=200, random_state=seed)
    assert up["pearson"] == pytest.approx(r["pearson"]) and up["kendall"] == pytest.approx(r["kendall"])
    few = M.correlations(x[:2], y[:2], n_boot=200)
    assert set(few) == set(r) and few["n_checkpoints"] == 2
    assert all(math.isnan(v) for k, v in few.items() if k not in ("n_checkpoints", "unstable"))
    assert few["unstable"] is True and r["unstable"] is (n < 10)
    # an affine map of the predictor keeps every permutation's r and tau: the same p
    assert up["pearson_perm_p"] == pytest.approx(r["pearson_perm_p"])
    assert up["kendall_perm_p"] == pytest.approx(r["kendall_perm_p"])
    down = M.correlations(-x, y, n_boot=200, random_state=seed)
    assert down["pearson"] == pytest.approx(-r["pearson"]) and down["kendall"] == pytest.approx(-r["kendall"])


# ---- captions and describability -----------------------------------------------------------------
@SETTINGS
@given(seed=seeds, n=st.integers(3, 30), k=st.integers(1, 4))
def test_eq4_scores_ignore_row_length_and_follow_the_rows(seed, n, k):
    E = gaussian(seed, n, 5)
    labels = np.random.default_rng(seed).integers(0, k, n)
    s = M.eq4_scores(E, labels)
    assert M.eq4_scores(E * positive_scales(seed, n)[:, None], labels) == pytest.approx(s, abs=1e-6)
    p = np.random.default_rng(seed + 1).permutation(n)
    assert M.eq4_scores(E[p], labels[p]) == pytest.approx(s[p], abs=1e-9)
    intra = M.eq4_scores(E, labels, negative=False)
    assert ((intra >= -1e-9) & (intra <= 2 + 1e-9)).all()


@SETTINGS
@given(seed=seeds, n=st.integers(4, 30), k=st.integers(2, 4))
def test_describability_bounds_and_cosine_invariance(seed, n, k):
    rng = np.random.default_rng(seed)
    ic = rng.integers(0, k, n)
    assume(len(np.unique(ic)) >= 2)
    have = sorted(set(ic.tolist()))
    T, V, F = gaussian(seed, len(have), 6), gaussian(seed + 1, n, 6), gaussian(seed + 2, n, 3)
    out = M.describability(T, have, V, ic, features=F, top_n=3, random_state=seed)
    scaled = M.describability(
        T * 5.0, have, V * positive_scales(seed, n)[:, None], ic, features=F, top_n=3, random_state=seed
    )
    assert scaled == out
    for r in out.values():
        assert 0 <= r["hits"] <= 3 and r["top1"] == r["hits"] / 3
        for key in ("top5", "binary", "2afc"):
            assert 0.0 <= r[key] <= 1.0 or math.isnan(r[key])


# ---- storage ---------------------------------------------------------------------------------
ids = st.text(alphabet="abcXYZ019-_.@+", min_size=1, max_size=20).filter(lambda s: not s.startswith("."))


@SETTINGS
@given(cid=ids, k=st.integers(-5, 10**6))
def test_partition_folder_names_round_trip(cid, k):
    from conceptlens import schema

    t = schema.TABLES_BY_NAME["clusters"]
    parts = [f"{c}={partition_value(t, c, v)}" for c, v in (("checkpoint_id", cid), ("k", k))]
    assert parse_partition(t, parts) == {"checkpoint_id": cid, "k": k}
    assert Workspace("/ws").partition_dir("clusters", checkpoint_id=cid, k=k).parts[-2:] == tuple(parts)


# ---- bad input: the error names the parameter ------------------------------------------------
X3, y3 = np.eye(3), np.arange(3)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: M.knn_accuracy(X3, y3, X3, y3[:2]), "test_y must be 1-D"),
        (lambda: M.knn_accuracy(X3, y3[:2], X3, y3), "train_y must be 1-D"),
        (lambda: M.cluster_learnability(X3, y3, n_chunks=1), "n_chunks must be in [2, 3]"),
        (lambda: M.cluster_learnability(X3, y3, n_chunks=2, n_orders=0), "n_orders must be >= 1"),
        (lambda: M.hard_negative_clusters(X3, y3[:2]), "features must be 2-D with one row per label"),
        (lambda: M.make_trials(y3, n_trials=5), "n_trials must be at least 20"),
        (lambda: M.make_trials(y3, n_refs=0), "n_refs must be >= 1"),
        (lambda: M.make_trials(y3, negative="near"), "negative must be 'random' or 'hard'"),
        (lambda: M.make_trials(y3, negative="hard"), "negative='hard' needs `hard`"),
        (lambda: M.wclid([1.0, 2], [1.0], [1.0, 2]), "cl, id and knn_acc need one value per checkpoint each"),
        (lambda: M.clid([1.0, 2], [1.0]), "cl and id need one value per checkpoint each"),
        (lambda: M.kendall_bootstrap_interval([1.0, 2], [[1.0, 2]]), "y must be 1-D"),
        (lambda: M.correlations([1.0, 2], [1.0]), "predictor and target need one value per checkpoint each"),
        (lambda: M.purity(y3, 0), "n_classes must be a positive integer"),
        (lambda: M.purity(y3, 2), "3 distinct labels in the cluster but n_classes=2"),
        (lambda: M.clopper_pearson(1, 0), "n must be a positive integer"),
        (lambda: M.clopper_pearson(4, 3), "k must be an integer in [0, n=3]"),
        (lambda: M.clopper_pearson(1, 3, alpha=1), "alpha must be in (0, 1)"),
        (lambda: M.anmi(y3, y3[:2]), "labels_true has 3 entries but labels_pred has 2"),
    ],
)
def test_bad_input_is_named_in_the_error(call, message):
    with pytest.raises(ValueError) as e:
        call()
    assert str(e.value).startswith(message), str(e.value)
