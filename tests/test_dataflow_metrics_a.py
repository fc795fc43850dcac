"""Data-flow properties of the metrics of issue 29's second metrics batch (bootstrap,
learning, compare, compmap, concepts, events): each test is written against a bug that
computes correctly on what it is given but is given the wrong thing (a filter not applied,
the first element reused, two arguments swapped, a sort the other way), and pins values
to something computed another way (a direct loop, a hand count, a known formula).

Small inputs throughout: every test runs well under a second."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from conceptlens.metrics import bootstrap as B
from conceptlens.metrics import compmap as CM
from conceptlens.metrics import concepts as CQ
from conceptlens.metrics import learning as L
from conceptlens.metrics.compare import contingency, pairwise_anmi, purity_bins, runs_with_stages
from conceptlens.metrics.events import concept_events
from conceptlens.metrics.intrinsic import twonn_fit
from conceptlens.metrics.scores import purity


def direct(n: int, n_boot: int, rng) -> list[np.ndarray]:
    """The resamples of the definition: one `rng.integers(0, n, n)` per resample."""
    return [rng.integers(0, n, n) for _ in range(n_boot)]


def q(stats, est):
    lo, hi = np.quantile(stats, [0.025, 0.975])
    return min(lo, est), max(hi, est)


# ---- bootstrap: every resample block is used, not the first one again ------------------------
@pytest.fixture
def small_blocks(monkeypatch):
    """`resamples` cut into blocks of 3 resamples each (at the real MAX_CELLS, a test needs
    millions of index cells for a second block): the stream is the same, so every interval
    must be too; one that reuses a block for the next ones is not."""
    real = B.resamples

    def few_rows(n, n_boot, rng, max_cells=B.MAX_CELLS):
        return real(n, n_boot, rng, max_cells=3 * n)

    monkeypatch.setattr(B, "resamples", few_rows)


def test_a_ratio_interval_over_many_blocks_is_the_direct_loop(small_blocks):
    rng0 = np.random.default_rng(11)
    den = rng0.integers(1, 5, 60)
    num = rng0.binomial(den, 0.5)
    lo, hi = B.ratio_interval(num, den, 200, B.rng_for(2, "cl"))
    est = num.sum() / den.sum()
    ref = q([num[i].sum() / den[i].sum() for i in direct(60, 200, B.rng_for(2, "cl"))], est)
    assert (lo, hi) == pytest.approx(ref, abs=1e-12)
    # the spread of a ratio of 60 images: a few standard errors wide, not a point
    assert hi - lo > 0.1


def test_purity_statistics_over_many_blocks_are_one_per_resample(small_blocks):
    y = np.random.default_rng(12).choice([0, 2, 5], size=50, p=[0.6, 0.3, 0.1])
    stats = B.purity_stats(y, 6, 100, B.rng_for(1, "purity"))
    ref = [purity(y[i], 6)[0] for i in direct(50, 100, B.rng_for(1, "purity"))]
    assert stats == pytest.approx(ref, abs=1e-12)
    assert len(set(np.round(stats, 12))) > 10  # resamples differ, so do their purities


def test_twonn_statistics_over_many_blocks_are_one_per_resample(small_blocks):
    mu = 1 + np.random.default_rng(13).pareto(3.0, 120)  # a TwoNN ratio of dimension 3
    stats = B.twonn_stats(mu, 60, B.rng_for(0, "id"))
    srt = np.sort(mu)
    ref = [twonn_fit(srt[i]) for i in direct(120, 60, B.rng_for(0, "id"))]
    assert stats == pytest.approx(ref, rel=1e-10)
    assert np.std(stats) > 0.05


def test_purity_statistics_at_the_real_block_size_are_n_boot_distinct_resamples():
    """Two real blocks (n = 2,049 labels: 2,047 resamples a block): n_boot statistics, the
    second block's its own."""
    y = np.random.default_rng(14).choice([0, 1, 2, 3], size=2049)
    stats = B.purity_stats(y, 4, 2060, B.rng_for(3, "purity"))
    assert len(stats) == 2060
    tail = [purity(y[i], 4)[0] for i in direct(2049, 2060, B.rng_for(3, "purity"))[-13:]]
    assert stats[-13:] == pytest.approx(tail, abs=1e-12)


# ---- learning: neighbours without a scored value do not vote ---------------------------------
def test_neighbours_whose_value_is_not_scored_cast_no_vote():
    """A training image without the factor's value (None) or with a value outside `classes`
    is a neighbour that must not vote: the shares are those of a loop over the scored
    neighbours only."""
    sims = np.array([[0.9, 0.8, 0.7, 0.6], [0.95, 0.5, 0.4, 0.3], [0.2, 0.1, 0.0, -0.1]])
    nb = np.array([["a", None, "b", "z"], [None, "b", "b", "a"], [None, "z", None, "z"]], dtype=object)
    classes = np.array(["a", "b"], dtype=object)
    shares = L.shares_from_neighbours(sims, nb, classes, temperature=0.1)
    ref = np.zeros((3, 2))
    for r in range(3):
        for s, lab in zip(sims[r], nb[r]):
            if lab in ("a", "b"):
                ref[r, ["a", "b"].index(lab)] += np.exp(s / 0.1)
        if ref[r].sum():
            ref[r] /= ref[r].sum()
    assert shares == pytest.approx(ref, abs=1e-12)
    assert shares[2].tolist() == [0.0, 0.0]  # no scored neighbour: no vote at all


# ---- compare: purity bins pool only the clusters with a value --------------------------------
def test_a_bin_without_trials_averages_only_the_clusters_with_a_value():
    """A cluster whose coherence is null is not a cluster with coherence 0 or NaN: the normal
    interval is that of the clusters with a value."""
    m = pd.DataFrame({"purity": [0.3, 0.35, 0.4, 0.32], "coherence_random": [0.5, np.nan, 0.7, 0.6]})
    b = purity_bins(m, edges=(0, 0.5, 1)).iloc[0]
    x = np.array([0.5, 0.7, 0.6])
    half = 1.96 * x.std(ddof=1) / math.sqrt(3)
    assert (b["coherence_random_lo"], b["coherence_random_hi"]) == pytest.approx((0.6 - half, 0.6 + half))
    assert b["coherence_random_n"] == 3 and b["clusters"] == 4


def test_pooled_trials_are_those_of_the_clusters_with_a_value():
    """A cluster with trials but no coherence value (a study not scored yet) adds no trials to
    its bin's pool: 12 of 20 + 16 of 20 = 28 of 40, not of 60."""
    from scipy.stats import beta

    m = pd.DataFrame(
        {
            "purity": [0.31, 0.33, 0.36],
            "coherence_random": [0.6, np.nan, 0.8],
            "coherence_trials": [20, 20, 20],
        }
    )
    b = purity_bins(m, values=("coherence_random",)).iloc[0]
    assert b["interval"] == "clopper-pearson"
    lo, hi = beta.ppf(0.025, 28, 13), beta.isf(0.025, 29, 12)
    assert (b["coherence_random_lo"], b["coherence_random_hi"]) == pytest.approx((lo, hi))


def test_purity_bins_do_not_depend_on_the_index_of_the_cluster_table():
    """Two checkpoints' cluster tables concatenated keep their repeated row labels: each bin's
    trials must still be its own rows', as with a fresh index."""
    one = pd.DataFrame(
        {
            "purity": [0.15, 0.55, 0.95, 0.52],
            "coherence_random": [0.5, 0.7, 0.9, 0.6],
            "coherence_hard": [0.4, 0.6, 0.8, 0.5],
            "coherence_trials": [10, 20, 30, 40],
        }
    )
    two = one.assign(purity=[0.58, 0.12, 0.91, 0.14], coherence_trials=[5, 15, 25, 35])
    repeated = pd.concat([one, two])
    assert repeated.index.has_duplicates
    got = purity_bins(repeated)
    ref = purity_bins(repeated.reset_index(drop=True))
    pd.testing.assert_frame_equal(got, ref)
    assert (got["interval"] == "clopper-pearson").all()


# ---- compare: checkpoints over training ------------------------------------------------------
def test_a_checkpoint_without_an_epoch_is_left_out_of_a_run_with_stages():
    """A run's final checkpoint stored without an epoch is not a stage: the run keeps its
    other checkpoints, in epoch order."""
    ck = pd.DataFrame(
        {
            "checkpoint_id": ["a_final", "a3", "a1", "b1", "b2"],
            "model": ["x"] * 5,
            "method": ["s"] * 5,
            "run": ["A", "A", "A", "B", "B"],
            "epoch": [None, 3, 1, 2, 1],
        }
    )
    st = runs_with_stages(ck)
    assert list(st["checkpoint_id"]) == ["a1", "a3", "b2", "b1"]
    assert st["epoch"].tolist() == [1, 3, 1, 2]


@pytest.mark.parametrize("lacking", ["checkpoint_id", "image_id", "cluster"])
def test_every_missing_assignment_column_is_named(lacking):
    """Each required column is checked, not only the first of the list: a table without it
    is refused with its name (not a KeyError from deep inside pandas)."""
    full = pd.DataFrame(
        {"checkpoint_id": ["a", "a", "b", "b"], "image_id": [1, 2, 1, 2], "cluster": [0, 1, 1, 0]}
    )
    with pytest.raises(ValueError, match=f"assignments lacks column '{lacking}'"):
        pairwise_anmi(full.drop(columns=lacking))
    if lacking != "checkpoint_id":
        one = full[full["checkpoint_id"] == "a"].drop(columns="checkpoint_id")
        with pytest.raises(ValueError, match=f"b lacks column '{lacking}'"):
            contingency(one, one.drop(columns=lacking))


def test_a_bin_names_its_interval_methods_in_a_fixed_order():
    """Coherence pooled over trials, describability by the normal interval: the bin names
    both, sorted (a set's order changes from one process to the next)."""
    m = pd.DataFrame(
        {
            "purity": [0.31, 0.33, 0.36],
            "coherence_random": [0.6, 0.7, 0.8],
            "coherence_trials": [20, 20, 20],
            "describability_binary": [0.2, 0.5, 0.4],
        }
    )
    b = purity_bins(m).iloc[0]
    assert b["interval"] == "clopper-pearson, normal"


# ---- compmap ---------------------------------------------------------------------------------
def test_a_few_shot_mean_leaves_out_the_episodes_without_a_value():
    v = np.array([0.2, np.nan, 0.4, 0.9, np.nan, 0.5, 0.6])
    x = v[~np.isnan(v)]
    half = 1.959963984540054 * x.std(ddof=1) / math.sqrt(len(x))
    assert CM.mean_interval(v, (0, 1)) == pytest.approx((x.mean(), x.mean() - half, x.mean() + half))


def test_activation_errors_list_the_bad_values_sorted():
    z = np.zeros((2, 3))
    with pytest.raises(ValueError, match=r"got \['max', 'none'\]$"):
        CM.activations(z, ["a", "a", "b"], ["none", "raw", "max"])
    with pytest.raises(ValueError, match=r"group 'a' mixes normalize values \['raw', 'softmax'\]$"):
        CM.activations(z, ["a", "a", "b"], ["softmax", "raw", "raw"])


# ---- concepts --------------------------------------------------------------------------------
def test_one_vs_rest_auc_skips_classes_absent_from_the_targets():
    """Class 2 has a column but no row: the macro mean is over classes 0, 1 and 3 only."""
    rng = np.random.default_rng(21)
    y = rng.choice([0, 1, 3], 300)
    p = rng.dirichlet(np.ones(4), 300) + 0.3 * np.eye(4)[y]
    want = np.mean([CQ.binary_auc(y == c, p[:, c]) for c in (0, 1, 3)])
    assert CQ.ovr_auc(y, p) == pytest.approx(want, abs=1e-12)
    assert CQ.multiclass_auc(y, p, multiclass="ovr") == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("auc", ["ovo_auc", "ovr_auc"])
def test_auc_errors_list_the_unknown_targets_sorted(auc):
    y = np.array([0, 7, 1, 5, 0, 1])
    with pytest.raises(ValueError, match=r"y_true has values \[5, 7\] that proba"):
        getattr(CQ, auc)(y, np.full((6, 3), 1 / 3))


def test_an_impurity_error_gives_the_shapes_in_argument_order():
    with pytest.raises(ValueError, match=r"got \(3, 3\) and \(2, 2\)$"):
        CQ.ois(np.eye(3), np.eye(2))


# ---- events ----------------------------------------------------------------------------------
def test_a_merge_gives_each_earlier_cluster_its_own_share():
    """Clusters 2 and 3 (50 images each) merge into 2, except 10 images of cluster 2 that
    scatter (5 to 0, 5 to 1: not significant). By hand: cluster 2 puts 40 of its 50 images
    into the merge, cluster 3 all 50; the merge holds 90 images."""
    before = np.repeat([0, 1, 2, 3], 50)
    after = before.copy()
    after[after == 3] = 2
    after[100:105], after[105:110] = 0, 1
    ev = concept_events(before, after)
    merge = ev[ev["kind"] == "merge"].iloc[0]
    assert merge["before"] == (2, 3) and merge["after"] == (2,)
    assert merge["size_before"] == (50, 50) and merge["size_after"] == (90,)
    assert merge["shares_before"] == (0.8, 1.0) and merge["shares_after"] == (1.0,)
    assert merge["images"] == 90
    # rows by kind (EVENT_KINDS order), then cluster ids
    assert list(zip(ev["kind"], ev["before"], ev["after"])) == [
        ("continuation", (0,), (0,)),
        ("continuation", (1,), (1,)),
        ("merge", (2, 3), (2,)),
    ]


def test_greedy_alignment_keeps_the_concepts_aligned_by_name_and_uses_each_once():
    """ "a" is aligned by name; c1 predicts a best of all (0.99), but a is taken: the greedy
    step chooses among the true concepts left (y) and the learnt ones left (c1, c2), and a
    learnt concept is never used twice (c2 is best for both y and z)."""
    P = np.array(
        [
            [0.90, 0.95, 0.97],  # a: taken by name, even though it predicts y and z best
            [0.99, 0.60, 0.55],  # c1
            [0.50, 0.70, 0.80],  # c2
            [0.50, 0.52, 0.51],  # c3
        ]
    )
    # by hand: z gets c2 (0.80, the best cell left), then y gets c1 (0.60 > c3's 0.52)
    assert CQ.align(P, ["a", "c1", "c2", "c3"], ["a", "y", "z"]) == [0, 1, 2]
    # every concept of the same name is aligned by name, not only the first one
    Q = np.array([[0.9, 0.95], [0.8, 0.6], [0.7, 0.65]])
    assert CQ.align(Q, ["c1", "a", "b"], ["a", "b"]) == [1, 2]
    # the greedy step weighs every learnt concept left, not only the first one
    assert CQ.align(np.array([[0.5, 0.6], [0.9, 0.55], [0.7, 0.8]]), ["c1", "c2", "c3"], ["y", "z"]) == [1, 2]


def test_a_batched_classifier_is_the_adam_loop_of_its_definition(monkeypatch):
    """One pair (3-D input, binary target), trained 25 steps: the probabilities it scores on
    the test rows are those of a plain loop of the documented classifier (the same seeded
    initialisation and minibatches, softmax cross-entropy with L2, Adam with its bias
    corrections at each step t)."""
    rng = np.random.default_rng(31)
    n, H, steps, bs, lr, alpha = 120, 8, 25, 16, 0.02, 1e-4
    X = rng.normal(size=(n, 3))
    y = ((X[:, 0] * X[:, 1] + X[:, 2]) > 0).astype(np.int64)
    train, test = np.arange(80), np.arange(80, n)
    seen = []
    real_auc = CQ.multiclass_auc
    monkeypatch.setattr(
        CQ, "multiclass_auc", lambda yj, p, **kw: seen.append(p.copy()) or real_auc(yj, p, **kw)
    )
    CQ.pairwise_mlp_auc(
        [X], y[:, None], train, test, hidden=H, steps=steps, batch_size=bs, lr=lr, alpha=alpha
    )

    # the loop, in float64
    Xs = X.astype(np.float32).astype(np.float64)
    Xs = (Xs - Xs[train].mean(axis=0)) / Xs[train].std(axis=0)
    r = np.random.default_rng(0)
    l1, l2 = np.sqrt(6 / (3 + H)), np.sqrt(6 / (H + 2))
    params = [r.uniform(-l1, l1, (1, 3, H))[0], r.uniform(-l1, l1, (1, 1, H))[0]]
    params += [r.uniform(-l2, l2, (1, H, 2))[0], r.uniform(-l2, l2, (1, 1, 2))[0]]
    params = [p.astype(np.float32).astype(np.float64) for p in params]
    onehot = np.eye(2)[y]

    def forward(rows):
        W1, c1, W2, c2 = params
        pre = Xs[rows] @ W1 + c1
        h = np.maximum(pre, 0)
        z = h @ W2 + c2
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return pre, h, e / e.sum(axis=1, keepdims=True)

    m1 = [np.zeros_like(p) for p in params]
    m2 = [np.zeros_like(p) for p in params]
    order = np.empty(0, np.int64)
    for t in range(1, steps + 1):
        if len(order) < bs:
            order = np.concatenate([order, r.permutation(train)])
        idx, order = order[:bs], order[bs:]
        pre, h, p = forward(idx)
        W1, _, W2, _ = params
        g = (p - onehot[idx]) / bs
        gh = (g @ W2.T) * (pre > 0)
        grads = [
            Xs[idx].T @ gh + alpha * W1,
            gh.sum(0, keepdims=True),
            h.T @ g + alpha * W2,
            g.sum(0, keepdims=True),
        ]
        for k, gr in enumerate(grads):
            m1[k] = 0.9 * m1[k] + 0.1 * gr
            m2[k] = 0.999 * m2[k] + 0.001 * gr * gr
            params[k] = params[k] - lr * (m1[k] / (1 - 0.9**t)) / (np.sqrt(m2[k] / (1 - 0.999**t)) + 1e-8)
    assert len(seen) == 1
    assert seen[0] == pytest.approx(forward(test)[2], abs=2e-4)


def test_concept_columns_follow_each_concepts_own_width():
    """Concepts of widths 1, 3 and 2 (a 3-D one given as (n, 3, 1)) occupy these columns of
    `np.hstack`: each width is its own concept's, not the first one's."""
    reps = [np.zeros((4, 1)), np.ones((4, 3, 1)), np.full((4, 2), 2.0)]
    cols = CQ.concept_columns(reps)
    assert [c.tolist() for c in cols] == [[0], [1, 2, 3], [4, 5]]
    flat = np.hstack([r.reshape(4, -1) for r in reps])
    assert [set(flat[:, c].ravel().tolist()) for c in cols] == [{0.0}, {1.0}, {2.0}]


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_blocks_fitted_on_threads_come_back_in_the_order_drawn(threads):
    """bootstrap.in_order: a block that finishes first is not put first, and the blocks
    are drawn lazily (never more than `threads` held at once)."""
    import time

    held, drawn = [], []

    def blocks():
        for b in range(7):
            drawn.append(b)
            held.append(len(drawn) - len(done))
            yield b

    done = []

    def f(b):
        time.sleep(0.03 if b % 2 == 0 else 0.0)  # even blocks finish after the odd ones
        done.append(b)
        return b * 10

    assert B.in_order(f, blocks(), threads=threads) == [0, 10, 20, 30, 40, 50, 60]
    assert max(held) <= threads + 1


@pytest.mark.parametrize("fit_cells", [1, 7 * 50, 1 << 30])
def test_statistics_computed_by_runs_of_rows_are_those_of_whole_blocks(monkeypatch, fit_cells):
    """bootstrap.by_rows_of: the statistics of resamples fitted a run of rows at a time
    (one row, several, the whole block) are the same numbers, and as many."""
    rng = np.random.default_rng(21)
    mu = 1 + rng.pareto(3.0, 50)
    flags = (rng.random(50) < 0.7).astype(float)
    den = rng.integers(1, 4, 50).astype(float)

    def run():
        return (
            B.twonn_stats(mu, 33, B.rng_for(2, "id")),
            B.mean_stats(flags, 33, B.rng_for(2, "knn_acc")),
            B.ratio_interval(flags * den, den, 33, B.rng_for(2, "cl")),
        )

    monkeypatch.setattr(B, "FIT_CELLS", 1 << 30)
    whole = run()
    monkeypatch.setattr(B, "FIT_CELLS", fit_cells)
    got = run()
    assert len(got[0]) == len(got[1]) == 33
    np.testing.assert_array_equal(got[0], whole[0])
    np.testing.assert_array_equal(got[1], whole[1])
    assert got[2] == whole[2]
