"""conceptlens/embedding/psych.py: trial weights, duplicates and order, each ensemble member's held-out
trials and fit, agreement between members, and stored embeddings read back. Metamorphic properties
on small inputs. Each test is written against a data-flow bug (issue 29; tools/dataflow_mutants.py):
a filter not applied, the first element used for every one, two arguments swapped, a sort the wrong
way."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from conceptlens import rng as R
from conceptlens.embedding import psych
from conceptlens.metrics import similarity as S
from tests.helpers_metrics import FAST


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
