"""Active trial selection and convergence of a psychological embedding (roads2021 sections
4.3 and 5).

A round selects trials by expected information gain under the current ensemble, people
(or simulated agents) answer them, and the ensemble is inferred again from every answer so
far. Whether more answers still change the embedding is read from three curves over
rounds: the coarse-grained loss on randomly drawn trials, the agreement of the members
within an ensemble, and the agreement of consecutive rounds' ensembles.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .. import rng as rngs
from ..metrics import similarity as S
from .psych import Trials, ensemble_similarity, expected_similarity

Members = list[tuple[np.ndarray, np.ndarray]]  # (mu, sigma) of each member, n x d


def posterior_samples(mu: np.ndarray, sigma: np.ndarray, n_samples: int, seed) -> np.ndarray:
    """`n_samples` draws of the whole embedding from one member's posterior (S x n x d);
    `seed`: an int or a generator (`rng.generator`)."""
    rng = rngs.generator(seed, "seed")
    mu, sigma = np.asarray(mu, np.float64), np.asarray(sigma, np.float64)
    return mu[None] + sigma[None] * rng.standard_normal((n_samples, *mu.shape))


def _outcome_probabilities(Zs: np.ndarray, stimulus_set: np.ndarray, n_select: int, beta: float):
    """p[s, t, o]: probability of every ordered choice o of `n_select` references in trial t
    under embedding sample s (the rank likelihood, Eq. 2), for trials that all have the
    same number of references and none padded."""
    query, refs = stimulus_set[:, 0], stimulus_set[:, 1:]
    log_s = -beta * np.linalg.norm(Zs[:, refs] - Zs[:, query][:, :, None], axis=-1)  # S x T x R
    perms = list(itertools.permutations(range(refs.shape[1]), n_select))
    log_p = np.zeros((*log_s.shape[:2], len(perms)))
    for o, perm in enumerate(perms):
        left = np.ones(refs.shape[1], bool)
        for r in perm:
            # In log space: a far reference's similarity underflows to 0 in plain arithmetic.
            rest = log_s[:, :, left]
            top = rest.max(axis=-1)
            log_p[:, :, o] += log_s[:, :, r] - top - np.log(np.exp(rest - top[..., None]).sum(axis=-1))
            left[r] = False
    return np.exp(log_p)


def _entropy(p: np.ndarray, axis: int = -1) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(p > 0, p * np.log(p), 0.0).sum(axis=axis)


def information_gain(
    members: Members,
    stimulus_set,
    n_select: int,
    beta: float = S.BETA,
    n_samples: int = 32,
    seed: int = 0,
) -> np.ndarray:
    """Expected information gain of each candidate trial (roads2021 Eq. 7), the mean over the
    ensemble's members of the mutual information between the trial's outcome and the
    embedding, from posterior samples: H(E_s p_s(y)) - E_s H(p_s(y)). A trial whose outcome
    every sample agrees on gains nothing."""
    stim = np.asarray(stimulus_set, np.int64)
    if stim.ndim != 2 or stim.shape[1] < 3 or (stim < 0).any():
        raise ValueError("stimulus_set must be (trials, 1 + references >= 2) with no padding")
    if not 1 <= n_select < stim.shape[1] - 1:
        raise ValueError(f"n_select must be in [1, references - 1], got {n_select}")
    gains = []
    for m, (mu, sigma) in enumerate(members):
        draws = posterior_samples(mu, sigma, n_samples, rngs.stream(seed, "information_gain.posterior", m))
        p = _outcome_probabilities(draws, stim, n_select, beta)
        gains.append(_entropy(p.mean(axis=0)) - _entropy(p).mean(axis=0))
    return np.maximum(np.mean(gains, axis=0), 0.0)


def stimulus_uncertainty(members: Members) -> np.ndarray:
    """The ensemble-average posterior entropy of every stimulus, on a positive scale.

    The differential entropy of N(mu, diag(sigma^2)) is sum(log sigma) + const and may be
    negative, so Eq. 8's "in proportion to entropy" is taken on exp(mean log sigma), a
    monotone transform of it that is always positive: the geometric-mean posterior scale."""
    return np.mean([np.exp(np.log(np.asarray(s, np.float64)).mean(axis=1)) for _, s in members], axis=0)


@dataclass(frozen=True)
class Selection:
    stimulus_set: np.ndarray  # trials x (1 + references): query then references, unordered
    information_gain: np.ndarray
    confirmation: np.ndarray  # bool per trial: a confirmation trial, not chosen by gain


def select_trials(
    members: Members,
    n_queries: int,
    n_references: int = 8,
    n_select: int = 2,
    *,
    query_counts: np.ndarray | None = None,
    n_neighbors: int | None = None,
    n_candidates: int = 200,
    keep_per_query: int = 3,
    n_confirmation: int = 0,
    beta: float = S.BETA,
    n_samples: int = 16,
    random_state: int = 0,
) -> Selection:
    """One round of roads2021's trial selection (section 4.3).

    Queries are drawn without replacement in proportion to their uncertainty divided by
    (times already a query + 1) (Eq. 8); each query's references are drawn without
    replacement from its `n_neighbors` nearest stimuli by ensemble-average expected
    similarity, in proportion to that similarity (Eq. 9); of `n_candidates` such trials the
    `keep_per_query` with the highest expected information gain are kept. Confirmation trials
    put two references from the query's neighbourhood among others from outside it, so a
    stimulus embedded among the wrong neighbours can move."""
    rng = rngs.generator(random_state)
    n = len(members[0][0])
    if n_references + 1 > n:
        raise ValueError(f"n_references={n_references} needs more than {n} stimuli")
    n_neighbors = min(n - 1, n_neighbors or max(n_references + 1, n // 10))
    if n_neighbors < n_references:
        raise ValueError(f"n_neighbors={n_neighbors} must be >= n_references={n_references}")
    counts = np.zeros(n) if query_counts is None else np.asarray(query_counts, np.float64)
    sim = ensemble_similarity(members, beta, n_samples=4, seed=random_state)
    np.fill_diagonal(sim, -np.inf)
    near = np.argsort(-sim, axis=1, kind="stable")[:, :n_neighbors]
    unc = stimulus_uncertainty(members)
    w = unc / (counts + 1)
    queries = rng.choice(n, size=min(n_queries, n), replace=False, p=w / w.sum())

    trials, gains, confirm = [], [], []
    for q in queries:
        pool, ps = near[q], np.maximum(sim[q, near[q]], 1e-12)
        cand = np.array(
            [
                [q, *rng.choice(pool, n_references, replace=False, p=ps / ps.sum())]
                for _ in range(n_candidates)
            ]
        )
        cand = np.unique(np.concatenate([cand[:, :1], np.sort(cand[:, 1:], axis=1)], axis=1), axis=0)
        ig = information_gain(members, cand, n_select, beta, n_samples, random_state)
        best = np.argsort(-ig, kind="stable")[:keep_per_query]
        trials.append(cand[best])
        gains.append(ig[best])
        confirm.append(np.zeros(len(best), bool))
    if n_confirmation:
        cq = rng.choice(n, size=n_confirmation, replace=True, p=unc / unc.sum())
        rows = []
        for q in cq:
            two = rng.choice(near[q], 2, replace=False)
            outside = np.setdiff1d(np.arange(n), np.append(near[q], q))
            if len(outside) < n_references - 2:  # few stimuli: the rest of the neighbourhood too
                outside = np.setdiff1d(np.arange(n), np.append(two, q))
            rows.append([q, *two, *rng.choice(outside, n_references - 2, replace=False)])
        rows = np.array(rows)
        trials.append(rows)
        gains.append(information_gain(members, rows, n_select, beta, n_samples, random_state))
        confirm.append(np.ones(len(rows), bool))
    return Selection(np.concatenate(trials), np.concatenate(gains), np.concatenate(confirm))


def random_trials(n: int, n_trials: int, n_references: int = 8, random_state: int = 0) -> np.ndarray:
    """Trials with a random query and random distinct references (the coarse-grained set and
    the random baseline of active selection)."""
    rng = rngs.generator(random_state)
    if n_references + 1 > n:
        raise ValueError(f"n_references={n_references} needs more than {n} stimuli")
    return np.array([rng.choice(n, n_references + 1, replace=False) for _ in range(n_trials)])


def coarse_grained_loss(members: Members, stimulus_set, n_select, beta: float = S.BETA) -> float:
    """Categorical cross-entropy of answered random trials under the ensemble (section 5.1):
    minus the mean log of the members' average probability of each observed outcome."""
    ll = np.stack([S.rank_log_likelihood(mu, stimulus_set, n_select, beta) for mu, _ in members])
    top = ll.max(axis=0)
    return float(-(top + np.log(np.exp(ll - top).mean(axis=0))).mean())


def _pearson_sq(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(S.upper(a), S.upper(b))[0, 1] ** 2)


def within_agreement(members: Members, beta: float = S.BETA, seed: int = 0) -> float | None:
    """Mean squared Pearson correlation between the members' expected similarity matrices
    (section 5.2, as its Figure 3 plots it)."""
    if len(members) < 2:
        return None
    sims = [
        expected_similarity(m, s, beta, 4, rngs.stream(seed, "within_agreement.member", k))
        for k, (m, s) in enumerate(members)
    ]
    pairs = itertools.combinations(range(len(sims)), 2)
    return float(np.mean([_pearson_sq(sims[a], sims[b]) for a, b in pairs]))


def across_agreement(previous: Members, current: Members, beta: float = S.BETA, seed: int = 0) -> float:
    """Squared Pearson correlation between two ensembles' similarity matrices (section 5.3)."""
    return _pearson_sq(
        ensemble_similarity(previous, beta, 4, rngs.int_seed(seed, "across_agreement.previous")),
        ensemble_similarity(current, beta, 4, rngs.int_seed(seed, "across_agreement.current")),
    )


def simulate_rounds(
    Z_true: np.ndarray,
    strategy: str,
    rounds: int = 6,
    trials_per_round: int = 300,
    *,
    dim: int | None = None,
    members: int = 3,
    n_coarse: int = 500,
    beta: float = S.BETA,
    random_state: int = 0,
    progress: bool = False,
    random_rounds: int = 1,
    **select_kw,
) -> list[dict]:
    """Collect similarity judgments in rounds from a simulated agent whose answers follow
    `Z_true` and infer the ensemble again after each: trials chosen by `strategy` "active"
    (`select_trials`, once `random_rounds` rounds of random trials have given a first
    embedding: roads2021 started from a random seed set) or "random". One row per round:
    trials so far, coarse-grained loss on random trials, within- and across-round
    agreement, and recovery (Spearman correlation of the inferred and generating
    similarities, over all pairs and over the fine-grained pairs: each stimulus with its
    nearest 5%)."""
    from scipy.stats import spearmanr

    from .psych import fit_embedding  # local: read at call time, where tests patch it

    if strategy not in ("active", "random"):
        raise ValueError(f"strategy must be 'active' or 'random', got {strategy!r}")
    Z_true = np.asarray(Z_true, np.float64)
    n = len(Z_true)
    dim = dim or Z_true.shape[1]
    rng = rngs.stream(random_state, "simulate_rounds.answers")
    true_sim = expected_similarity(Z_true, np.zeros_like(Z_true), beta, 1, 0)
    truth = S.upper(true_sim)
    # Fine-grained pairs: each stimulus with its nearest 5% (what random trials rarely probe).
    k = max(1, n // 20)
    near = np.argsort(-np.where(np.eye(n, dtype=bool), -np.inf, true_sim), axis=1)[:, :k]
    fine = np.zeros((n, n), bool)
    fine[np.repeat(np.arange(n), k), near.ravel()] = True
    fine = S.upper(fine | fine.T).astype(bool)

    def answer(stim: np.ndarray) -> np.ndarray:
        return S.sample_choices(Z_true, stim[:, 0], stim[:, 1:], 2, beta, rng)

    coarse = answer(
        random_trials(n, n_coarse, random_state=rngs.stream(random_state, "simulate_rounds.coarse"))
    )
    collected = np.zeros((0, 9), np.int64)
    counts = np.zeros(n)
    ens: Members | None = None
    out = []
    for r in range(rounds):
        if strategy == "active" and ens is not None and r >= random_rounds:
            per_query = select_kw.get("keep_per_query", 3)
            n_conf = select_kw.pop("n_confirmation", None)
            n_conf = trials_per_round // 4 if n_conf is None else n_conf
            sel = select_trials(
                ens,
                max(1, (trials_per_round - n_conf) // per_query),
                query_counts=counts,
                n_confirmation=n_conf,
                beta=beta,
                random_state=rngs.int_seed(random_state, "simulate_rounds.select", r),
                **select_kw,
            )
            new = sel.stimulus_set
            select_kw["n_confirmation"] = n_conf
        else:
            new = random_trials(
                n, trials_per_round, random_state=rngs.stream(random_state, "simulate_rounds.random", r)
            )
        np.add.at(counts, new[:, 0], 1)
        collected = np.concatenate([collected, answer(new)])
        trials = Trials(collected, np.full(len(collected), 2), np.ones(len(collected)))
        prev = ens
        ens = []
        for m in range(members):
            seed = rngs.int_seed(random_state, "simulate_rounds.member", [r, m])
            f = fit_embedding(trials, n, dim, beta=beta, seed=seed, progress=progress, member=m)
            ens.append((f.mu.astype(np.float64), f.sigma.astype(np.float64)))
        inferred = S.upper(ensemble_similarity(ens, beta, 4, random_state))
        out.append(
            {
                "strategy": strategy,
                "round": r,
                "n_trials": len(collected),
                "coarse_loss": coarse_grained_loss(ens, coarse, np.full(len(coarse), 2), beta),
                "within_agreement": within_agreement(ens, beta, random_state),
                "across_agreement": None if prev is None else across_agreement(prev, ens, beta, random_state),
                "recovery": float(spearmanr(inferred, truth).statistic),
                "fine_recovery": float(spearmanr(inferred[fine], truth[fine]).statistic),
            }
        )
    return out
