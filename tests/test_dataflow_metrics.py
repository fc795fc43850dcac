"""Metamorphic properties of the metrics the analyses call (issue 29, item 1): relations
between two runs on related inputs that hold for any input, each written against a
data-flow bug that computes correctly on what it is given but is given the wrong thing.

Small inputs throughout (a few checkpoints, a few dozen trials): each property runs in
well under a second."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from conceptlens import rng as R
from conceptlens.embedding import psych
from conceptlens.metrics import similarity as S
from conceptlens.metrics.clid import clid, correlations, wclid, zscore

FAST = settings(max_examples=40, deadline=None)

values = st.floats(-3, 3, allow_nan=False, width=64)


@st.composite
def checkpoints(draw, min_size=5, max_size=9):
    """CL, ID and kNN accuracy of n checkpoints, with spread (a fit is defined)."""
    n = draw(st.integers(min_size, max_size))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    cl, id_ = rng.normal(size=n), rng.normal(size=n) * 5 + 20
    acc = 0.5 + 0.1 * cl - 0.01 * id_ + 0.05 * rng.normal(size=n)
    return cl, id_, acc, rng


# ---- CLID, W-CLID ------------------------------------------------------------------------------
@FAST
@given(checkpoints(), values)
def test_leave_one_out_wclid_of_a_checkpoint_ignores_its_own_accuracy(data, new):
    """Each checkpoint's leave-one-out W-CLID is predicted by a fit on the others: its own
    kNN accuracy changed, its prediction is the same (and the others' change). Catches a
    leave-one-out fit that still contains the left-out checkpoint (its mask not applied,
    or the all-checkpoint weights used for every prediction)."""
    cl, id_, acc, rng = data
    i = int(rng.integers(len(cl)))
    before = wclid(cl, id_, acc, leave_one_out=True)[0]
    acc2 = acc.copy()
    acc2[i] = acc[i] + 1.0 + abs(new)
    after = wclid(cl, id_, acc2, leave_one_out=True)[0]
    assert after[i] == pytest.approx(before[i], rel=1e-9, abs=1e-9)
    # Not vacuous: the in-sample fit does move with it.
    assert wclid(cl, id_, acc2)[0][i] != pytest.approx(wclid(cl, id_, acc)[0][i], abs=1e-9)


@FAST
@given(checkpoints())
def test_leave_one_out_wclid_is_the_fit_on_the_others(data):
    """The same value computed another way: an ordinary least squares fit on the other
    checkpoints (numpy.polyfit-free normal equations), evaluated at the left-out one."""
    cl, id_, acc, _ = data
    pred = wclid(cl, id_, acc, leave_one_out=True)[0]
    A = np.column_stack([cl, id_, np.ones_like(cl)])
    for i in range(len(cl)):
        m = np.arange(len(cl)) != i
        w = np.linalg.solve(A[m].T @ A[m], A[m].T @ acc[m])
        assert pred[i] == pytest.approx(A[i] @ w, rel=1e-6, abs=1e-9)


@FAST
@given(checkpoints(), st.booleans())
def test_clid_and_wclid_follow_their_checkpoints_when_rows_are_permuted(data, loo):
    """Permuting the checkpoints permutes CLID and W-CLID with them. Catches a score
    aligned by position with another order (one argument sorted, the others not)."""
    cl, id_, acc, rng = data
    p = rng.permutation(len(cl))
    assert clid(cl[p], id_[p]) == pytest.approx(clid(cl, id_)[p])
    got = wclid(cl[p], id_[p], acc[p], leave_one_out=loo)[0]
    assert got == pytest.approx(wclid(cl, id_, acc, leave_one_out=loo)[0][p])


def test_correlations_ignore_the_order_of_the_checkpoints():
    """Pearson, Kendall and their intervals do not depend on the checkpoints' order."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=8)
    y = x + rng.normal(size=8)
    p = rng.permutation(8)
    a, b = correlations(x, y, n_boot=200), correlations(x[p], y[p], n_boot=200)
    for key in ("pearson", "kendall", "pearson_lo", "pearson_hi"):
        assert a[key] == pytest.approx(b[key])


# ---- similarity trials: weights, duplicates, order ---------------------------------------------------
@st.composite
def trials(draw, min_trials=3, max_trials=12):
    """A 2-D embedding of 8 stimuli and trials of 2 to 4 references, 1 or 2 chosen."""
    n = draw(st.integers(min_trials, max_trials))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(8, 2))
    stim = np.full((n, 5), -1, np.int64)
    sel = np.ones(n, np.int64)
    for t in range(n):
        r = int(rng.integers(2, 5))
        stim[t, : r + 1] = rng.choice(8, r + 1, replace=False)
        sel[t] = int(rng.integers(1, min(2, r - 1) + 1))
    w = draw(arrays(np.float64, n, elements=st.floats(0.25, 3)))
    return Z, psych.Trials(stim, sel, w), rng


@FAST
@given(trials())
def test_doubling_a_trials_weight_equals_duplicating_it(data):
    """The held-out scores of an embedding (weighted log-likelihood, accuracy, triplet
    accuracy) are the same whether a trial counts twice by weight or is there twice.
    Catches a score that ignores the weights (a plain mean) or applies them to the wrong
    trials (an index taken from the unweighted order)."""
    Z, t, rng = data
    i = int(rng.integers(len(t)))
    w2 = t.weight.copy()
    w2[i] *= 2
    doubled = psych.scores(Z, psych.Trials(t.stimulus_set, t.n_select, w2))
    idx = np.r_[np.arange(len(t)), i]
    duplicated = psych.scores(Z, t.subset(idx))
    for key in ("loglik", "accuracy", "triplet_accuracy"):
        assert doubled[key] == pytest.approx(duplicated[key], rel=1e-9, abs=1e-12)


@FAST
@given(trials())
def test_weights_are_used(data):
    """The weighted log-likelihood is sum w * ll / sum w, computed here from
    rank_log_likelihood: a score that drops the weights fails."""
    Z, t, _ = data
    ll = S.rank_log_likelihood(Z, t.stimulus_set, t.n_select)
    assert psych.scores(Z, t)["loglik"] == pytest.approx((t.weight * ll).sum() / t.weight.sum())


@FAST
@given(trials())
def test_permuting_trials_leaves_the_scores_unchanged(data):
    """Trials are a set: their order changes no score."""
    Z, t, rng = data
    a = psych.scores(Z, t)
    b = psych.scores(Z, t.subset(rng.permutation(len(t))))
    for key in a:
        assert a[key] == pytest.approx(b[key], rel=1e-9, abs=1e-12)


@FAST
@given(trials())
def test_a_zero_weight_trial_counts_as_absent(data):
    """A trial of weight 0 (an excluded row kept in the table) changes no score."""
    Z, t, rng = data
    i = int(rng.integers(len(t)))
    w0 = t.weight.copy()
    w0[i] = 0.0
    keep = np.arange(len(t)) != i
    a = psych.scores(Z, psych.Trials(t.stimulus_set, t.n_select, w0))
    b = psych.scores(Z, t.subset(keep))
    for key in a:
        assert a[key] == pytest.approx(b[key], rel=1e-9, abs=1e-12)


# ---- held-out splits of an ensemble's members ------------------------------------------------------
@FAST
@given(st.integers(40, 300), st.integers(2, 5), st.integers(0, 2**31))
def test_each_member_holds_out_its_own_trials(n, members, seed):
    """Members of one ensemble hold out different trials (each its own seeded share), and
    another seed gives other splits. Catches a split seeded without the member (every
    member then fits and is scored on the same trials) or without the seed."""
    a = psych.heldout_split(n, members, 0.2, seed)
    b = psych.heldout_split(n, members, 0.2, seed + 1)
    k = round(0.2 * n)
    for m in range(members):
        assert len(a[m]) == k and len(np.unique(a[m])) == k and a[m].min() >= 0 and a[m].max() < n
        assert not np.array_equal(a[m], b[m])
        for o in range(m):
            assert not np.array_equal(a[m], a[o])
    # Same seed, same splits (reproducible).
    again = psych.heldout_split(n, members, 0.2, seed)
    assert all(np.array_equal(a[m], again[m]) for m in range(members))


# ---- checkpoints without a value are left out, not carried along ---------------------------------
def _with_missing(x, at, value=np.nan):
    out = np.asarray(x, float).copy()
    return np.insert(out, at, value)


@FAST
@given(checkpoints(min_size=6), st.integers(0, 6), st.booleans())
def test_a_checkpoint_without_a_value_leaves_every_correlation_unchanged(data, at, in_target):
    """A checkpoint whose predictor (or target) is missing is left out of Pearson, Kendall,
    their intervals and permutation p-values: the result is that of the other checkpoints.
    Catches the finite-pair mask computed but not applied (NaN then reaches scipy)."""
    cl, _, acc, _ = data
    at = min(at, len(cl))
    x, y = (
        (_with_missing(cl, at, 0.3), _with_missing(acc, at))
        if in_target
        else (
            _with_missing(cl, at),
            _with_missing(acc, at, 0.7),
        )
    )
    got, want = correlations(x, y, n_boot=50), correlations(cl, acc, n_boot=50)
    assert got["n_checkpoints"] == len(cl)
    for key, v in want.items():
        assert got[key] == pytest.approx(v, rel=1e-9, abs=1e-12, nan_ok=True), key


@FAST
@given(checkpoints(min_size=5), st.integers(0, 9), st.booleans(), st.sampled_from(["cl", "id", "acc"]))
def test_a_checkpoint_without_a_value_leaves_the_wclid_fit_unchanged(data, at, loo, where):
    """W-CLID's least-squares fit (in-sample and leave-one-out) uses only checkpoints with
    all three values: adding one without a kNN accuracy, a CL or an ID changes no weight
    and no other checkpoint's prediction, and its own prediction is NaN. Catches the
    complete-row mask dropped from the fit (lstsq on a NaN row gives NaN weights)."""
    cl, id_, acc, _ = data
    at = min(at, len(cl))
    fill = {"cl": (np.nan, 1.0, 0.5), "id": (0.1, np.nan, 0.5), "acc": (0.1, 1.0, np.nan)}[where]
    cl2, id2, acc2 = (_with_missing(v, at, f) for v, f in zip((cl, id_, acc), fill))
    pred, w = wclid(cl2, id2, acc2, leave_one_out=loo)
    want_pred, want_w = wclid(cl, id_, acc, leave_one_out=loo)
    assert w == pytest.approx(want_w, rel=1e-7, abs=1e-9)
    assert np.isnan(pred[at])
    assert np.delete(pred, at) == pytest.approx(want_pred, rel=1e-7, abs=1e-9)


@FAST
@given(checkpoints(min_size=3), st.integers(0, 9))
def test_a_missing_value_leaves_the_other_z_scores_and_clid_unchanged(data, at):
    """z-scores (and so CLID) are over the checkpoints with a value: a checkpoint without
    CL or ID leaves every other checkpoint's z-score and CLID as they were."""
    cl, id_, _, _ = data
    at = min(at, len(cl))
    z = zscore(_with_missing(cl, at))
    assert np.isnan(z[at])
    assert np.delete(z, at) == pytest.approx(zscore(cl), rel=1e-9, abs=1e-12)
    got = clid(_with_missing(cl, at), _with_missing(id_, at))
    assert np.isnan(got[at])
    assert np.delete(got, at) == pytest.approx(clid(cl, id_), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("constant", ["predictor", "target"])
def test_a_series_constant_over_the_checkpoints_with_values_has_no_correlation(constant):
    """A predictor (or target) constant over the checkpoints that have both values carries
    no correlation, even when a checkpoint without a value would give it spread: every
    statistic is NaN, as for a series constant throughout. Catches the spread measured on
    all checkpoints instead of the finite pairs."""
    x = np.array([0.4, 0.4, 0.4, 0.4, 0.4, 0.4, np.nan])
    y = np.array([0.1, 0.5, 0.2, 0.9, 0.3, 0.7, 0.8])
    if constant == "target":
        x, y = y, x
    got = correlations(x, y, n_boot=50)
    assert got["n_checkpoints"] == 6
    for key in (
        "pearson",
        "kendall",
        "pearson_lo",
        "kendall_lo",
        "kendall_hi",
        "pearson_perm_p",
        "kendall_perm_p",
    ):
        assert np.isnan(got[key]), key


def test_permutation_p_counts_every_permutation_of_every_block():
    """With more permutations than one memory block holds (n=40: 1250 per block), the
    p-values are the share over all of them, checked on the same seeded permutations with
    numpy's corrcoef and scipy's kendalltau. Catches the first block counted in place of
    the others."""
    from scipy.stats import kendalltau, pearsonr

    from conceptlens.metrics.clid import permutation_p

    rng = np.random.default_rng(5)
    n, n_perm = 40, 2600
    x = rng.normal(size=n)
    y = 0.25 * x + rng.normal(size=n)
    perms = np.random.default_rng(11).permuted(np.tile(np.arange(n), (n_perm, 1)), axis=1)
    r0, t0 = abs(pearsonr(x, y)[0]), abs(kendalltau(x, y)[0])
    rs = np.corrcoef(np.vstack([x, y[perms]]))[0, 1:]  # numpy's r of x with each permuted y
    hits_r = int((np.abs(rs) >= r0 - 1e-12).sum())
    hits_t = sum(abs(kendalltau(x, y[p])[0]) >= t0 - 1e-12 for p in perms[::13])
    pr, pt = permutation_p(x, y, n_perm=n_perm, random_state=11)
    assert pr == pytest.approx((1 + hits_r) / (1 + n_perm))
    # Kendall checked on every 13th permutation (scipy is slow): the share within sampling error.
    assert pt == pytest.approx(hits_t / len(perms[::13]), abs=0.08)
    assert 0.02 < pr < 0.98  # not vacuous: hits in every block


# ---- captions: sampled comparisons on large clusters -----------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rouge_captions_of_clusters_larger_than_the_sample_are_their_own(seed):
    """Clusters larger than `max_compare` are compared on seeded samples of their own
    captions and of the others': the chosen caption is a row of its cluster, and where all
    but one caption of a cluster say the same thing, one of those is chosen. Catches the
    sample drawn from the wrong population (the sample size and the rows swapped)."""
    from conceptlens.metrics.captions import class_captions_rouge

    texts = (
        ["a red bird on a branch"] * 5
        + ["an engine part"]
        + ["a blue car parked outside"] * 4
        + ["a yellow flower"] * 3
    )
    labels = [0] * 6 + [1] * 7
    out = class_captions_rouge(texts, labels, max_compare=3, max_candidates=4, random_state=seed)
    assert set(out) == {0, 1}
    row0, score0 = out[0]
    assert row0 in range(5) and np.isfinite(score0)
    row1, _ = out[1]
    assert labels[row1] == 1


def test_rouge_intra_distance_leaves_the_candidate_itself_out():
    """Eq. 4's intra-cluster term of a candidate is over the *other* captions of its cluster.
    A caption with no words is at distance 1 from everything, itself included (ROUGE-L of
    two empty token lists is 0), so counting it against itself shows: by hand, each of
    the three captions below is at distance 1 from each other one, so every candidate
    scores 2/3 and the first is kept."""
    from conceptlens.metrics.captions import class_captions_rouge

    texts = ["!!!", "...", "a dog", "a cat", "a cat"]
    out = class_captions_rouge(texts, [0, 0, 0, 1, 1], negative=False)
    assert out[0][0] == 0 and out[0][1] == pytest.approx(2 / 3)


# ---- neighbours: the BLAS thread count ---------------------------------------------------------
def test_blas_threads_counts_blas_pools_only():
    """`blas_threads` is what BLAS may use: an OpenMP pool allowed more threads (sklearn's,
    torch's) does not count. Catches the user_api filter dropped."""
    import sklearn.cluster  # noqa: F401  (loads an OpenMP runtime)
    from threadpoolctl import threadpool_info, threadpool_limits

    from conceptlens.metrics.neighbors import blas_threads

    if not any(p["user_api"] == "openmp" for p in threadpool_info()):
        pytest.skip("no OpenMP runtime loaded here")
    with threadpool_limits(limits=1, user_api="blas"), threadpool_limits(limits=3, user_api="openmp"):
        blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
        if any(p.get("threading_layer") == "openmp" for p in blas):
            # Once a BLAS that threads through OpenMP is loaded (the full suite's order), its
            # own pool follows the OpenMP limit: BLAS may then really use 3 threads.
            pytest.skip("a BLAS here threads through OpenMP")
        assert blas_threads() == 1


def test_blas_threads_follows_a_limit_set_after_its_first_call():
    """The libraries are found once, their thread counts asked each time: a count cached
    from the first call would run a `--threads 1` task's blocks on every core."""
    from threadpoolctl import threadpool_limits

    from conceptlens.metrics.neighbors import blas_threads

    before = blas_threads()
    if before == 1:
        pytest.skip("BLAS has one thread here already")
    with threadpool_limits(limits=1, user_api="blas"):
        assert blas_threads() == 1
    assert blas_threads() == before


@pytest.mark.parametrize("chunk", [7, 16, 1 << 22])
def test_pair_distances_are_those_of_every_pair_in_every_block(chunk):
    """Squared distances of candidate pairs, computed in memory-bounded blocks (`chunk`
    values at a time), are scipy's for every pair, whatever the block size. Catches the
    first block's distances reused for the others."""
    from scipy.spatial.distance import cdist

    from conceptlens.metrics.neighbors import _pairwise_sq_exact

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4)).astype(np.float32)
    rows, cols = rng.integers(0, 30, 50), rng.integers(0, 30, 50)
    want = cdist(X.astype(np.float64), X.astype(np.float64), "sqeuclidean")[rows, cols]
    assert _pairwise_sq_exact(X, rows, cols, chunk=chunk) == pytest.approx(want, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(("block", "chunk", "threads"), [(4, 4, 1), (5, 11, 1), (3, 6, 2), (64, 64, 1)])
def test_top_self_lists_are_the_brute_force_best_of_every_tile(block, chunk, threads):
    """The one-pass lists of `top_self`, built from row blocks against column chunks, hold
    each row's m best other rows by X_i . X_j - bias_j, as a brute-force sort of the full
    score matrix finds them. Catches tiles skipped or reused (a chunk loop that never
    runs is hidden downstream by the exact fallback search, so it is checked here)."""
    from conceptlens.metrics.neighbors import top_self

    rng = np.random.default_rng(1)
    X = rng.normal(size=(23, 3)).astype(np.float32)
    bias = (np.einsum("ij,ij->i", X, X) / 2).astype(np.float32)
    m = 4
    S = X @ X.T - bias[None, :]
    np.fill_diagonal(S, -np.inf)
    want = -np.sort(-S, axis=1)[:, :m]
    scores, idx = top_self(X, m, bias=bias, block_size=block, chunk=chunk, threads=threads)
    assert scores == pytest.approx(want, rel=1e-5, abs=1e-5)
    assert np.take_along_axis(S, idx, axis=1) == pytest.approx(scores, rel=1e-5, abs=1e-5)
    assert (idx != np.arange(23)[:, None]).all()


# ---- psychological embedding: members kept apart ---------------------------------------------
def _fit(mu, sigma, member=0):
    return psych.Fit(mu.shape[1], member, mu, sigma, 1.0, 1, 0.0)


def test_agreement_is_each_members_mean_spearman_with_every_other():
    """Agreement of 3 members: each one's mean Spearman correlation (scipy) with the other
    two members' expected similarity matrices. Catches the pair loop stuck on its first
    member (the correlation of members 1 and 2 then never computed)."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(4)
    base = rng.normal(size=(9, 2))
    fits = [
        _fit(base + s * rng.normal(size=(9, 2)), np.full((9, 2), 0.05), m)
        for m, s in enumerate((0.1, 0.5, 1.5))
    ]
    # member k's matrix from its own stream (conceptlens.rng): (seed 0, "agreement.member", [None, k])
    tri = [
        S.upper(
            psych.expected_similarity(f.mu, f.sigma, S.BETA, 4, R.stream(0, "agreement.member", [None, k]))
        )
        for k, f in enumerate(fits)
    ]
    r = {(a, b): spearmanr(tri[a], tri[b])[0] for a in range(3) for b in range(3) if a != b}
    want = [np.mean([r[a, b] for b in range(3) if b != a]) for a in range(3)]
    assert psych.agreement(fits) == pytest.approx(want, rel=1e-9)


def test_each_member_of_a_stored_embedding_reads_back_as_its_own():
    """`read_embedding` returns every member's own (mu, sigma), rows in image order,
    whatever the order of the stored rows. Catches the first member's rows reused."""
    import pyarrow as pa

    rng = np.random.default_rng(2)
    ids = ["b", "a", "c"]
    want = {m: (rng.normal(size=(3, 2)), rng.uniform(0.1, 1, size=(3, 2))) for m in range(3)}
    rows = [
        {"member": m, "image_id": i, "mu": list(want[m][0][j]), "sigma": list(want[m][1][j])}
        for m in (2, 0, 1)
        for j, i in enumerate(ids)
    ]

    class Stored:  # the one call read_embedding makes of a workspace
        def read(self, name, dataset):
            assert (name, dataset) == ("psych_embedding", "toy")
            return pa.Table.from_pylist(rows)

    got_ids, members = psych.read_embedding(Stored(), "toy")
    order = np.argsort(ids)
    assert got_ids == sorted(ids)
    for m, (mu, sigma) in enumerate(members):
        assert mu == pytest.approx(want[m][0][order]) and sigma == pytest.approx(want[m][1][order])


@pytest.mark.slow  # 8 short fits: about 4 s of CPU
@pytest.mark.parametrize("screen", [2])
def test_every_member_is_fitted_once_and_agrees_only_with_its_own_dimensionality(screen):
    """An ensemble of 4 members at 2 dimensionalities (short fits): each member is fitted
    once per dimensionality it is screened at, every member at the chosen one, each on
    all trials but its own held-out share; a member's agreement is with the other members
    of its dimensionality only. Catches the members past the screen fitted as the first
    of them, and the agreement computed over the members of every dimensionality."""
    rng = np.random.default_rng(6)
    n, m = 12, 120
    Z = rng.normal(size=(n, 2))
    q = rng.integers(0, n, m)
    refs = np.stack([rng.choice(np.setdiff1d(np.arange(n), [x]), 4, replace=False) for x in q])
    trials = psych.Trials(S.sample_choices(Z, q, refs, 1, 5.0, rng), np.ones(m, np.int64), np.ones(m))
    ens = psych.fit_ensemble(
        trials, n, dims=(1, 3), members=4, screen=screen, seed=0, progress=False, max_epochs=2, batch_size=64
    )
    best = ens.selected_dim
    for dim in (1, 3):
        got = sorted(r["member"] for r in ens.rows if r["dim"] == dim)
        assert got == ([0, 1, 2, 3] if dim == best or screen is None else [0, 1])
        fits = ens.members(dim)
        assert [f.member for f in fits] == got
        want = psych.agreement(fits, unit=dim)
        mine = sorted((r for r in ens.rows if r["dim"] == dim), key=lambda r: r["member"])
        assert [r["agreement"] for r in mine] == pytest.approx(want)
    for r in ens.rows:
        assert r["n_heldout"] == len(ens.heldout[r["member"]]) and r["n_train"] == m - r["n_heldout"]
    # the members' held-out shares differ, so their fits do
    a, b = ens.members(best)[:2]
    assert not np.allclose(a.mu, b.mu)


def test_each_epoch_fits_on_every_trial_once(monkeypatch):
    """An epoch's minibatches hold every trial exactly once (50 trials in batches of 16:
    16, 16, 16, 2), whatever their order. Catches the first minibatch used for all of
    them (the fit then sees a random share of the trials per epoch, slower but still
    converging, which no recovery test notices)."""
    rng = np.random.default_rng(0)
    n, m = 10, 50
    stim = np.full((m, 5), -1, np.int64)
    for t in range(m):
        r = 2 + t % 3  # the number of references tells the trials apart below
        stim[t, : r + 1] = rng.choice(n, r + 1, replace=False)
    trials = psych.Trials(stim, np.ones(m, np.int64), np.ones(m))
    seen: list[np.ndarray] = []
    real = psych.torch_rank_loglik

    def spy(z, valid, chosen, beta):
        seen.append(valid.numpy().sum(axis=1))
        return real(z, valid, chosen, beta)

    monkeypatch.setattr(psych, "torch_rank_loglik", spy)
    psych.fit_embedding(trials, n, 2, max_epochs=2, batch_size=16, progress=False)
    assert [len(s) for s in seen] == [16, 16, 16, 2] * 2
    for epoch in (seen[:4], seen[4:]):
        assert sorted(np.concatenate(epoch)) == sorted(2 + t % 3 for t in range(m))


def test_agreement_on_a_sample_of_stimuli_uses_the_documented_seeded_sample():
    """Above `max_items` stimuli, agreement is computed on a seeded sample of that many
    (the stream (seed, "agreement.items") of conceptlens.rng, sorted): the value is the hand
    computation on those rows. Catches the sample size and the population swapped."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(8)
    fits = [_fit(rng.normal(size=(9, 2)), np.full((9, 2), 0.05), m) for m in range(2)]
    items = np.sort(R.stream(0, "agreement.items").choice(9, 5, replace=False))
    tri = [
        S.upper(
            psych.expected_similarity(
                f.mu[items], f.sigma[items], S.BETA, 4, R.stream(0, "agreement.member", [None, k])
            )
        )
        for k, f in enumerate(fits)
    ]
    r = spearmanr(tri[0], tri[1])[0]
    assert psych.agreement(fits, max_items=5) == pytest.approx([r, r], rel=1e-9)


def test_a_dimensionality_below_one_is_refused_wherever_it_is_listed():
    """`dims` are checked whatever their order. Catches the check reading the largest."""
    t = psych.Trials(np.array([[0, 1, 2]]), np.ones(1, np.int64), np.ones(1))
    for dims in ((0, 2), (2, 0), (3, -1, 2)):
        with pytest.raises(ValueError, match="dims must be positive"):
            psych.fit_ensemble(t, 3, dims=dims, progress=False)
