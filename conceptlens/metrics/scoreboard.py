"""One scorer for every kind of concept (issue 41): many equally large sets of images of one
population scored alike, each with its 95% interval and its percentile against the same
null.

Every concept of a checkpoint (a dictionary atom, a unit, a cluster, a label, a saved
selection, a random direction) is a set of N rows of the population, N the same for all
(compared at matched size). They go through `selection.Scorer.score_sets` in one batch with
`n_null` uniformly random sets of size N (the random-set null, drawn once and shared by
every concept), so a concept's percentile against that null means the same whatever its
source. Each concept's scores and intervals come from the streams of its own tag
(seed, unit, "concept", i): scoring one concept alone or among a thousand gives the same
numbers. Intervals: bootstrap over the evaluated images (learnability), over the set's
images (purities), as for a selection (`selection.Scorer._intervals`), Clopper-Pearson
of the very 2AFC trials the coherence was computed from (coherence; describability);
intrinsic dimension has none (TwoNN on N points).

Niche membership (concept quality's Definition 3, the concept-correlation nicher, with a
set's member indicator as the learnt concept): `niche_NAME` is the largest correlation
between the set and a value of the ground-truth concept NAME, as a share of the largest a
set of N images could reach (phi / phi_max): the raw phi of N members among n images is
at most about sqrt(N / K) (0.1 for 50 of 5,000 against a half), so no set would be in
any niche at the paper's betas. A concept is in the niche of NAME at beta when it exceeds
beta. Its interval maps Jeffreys' interval of the share of members holding that value
through it (the population's counts fixed; the value chosen by the maximum taken as
given).

The random-direction null (percentile among the random-direction concepts of the same
checkpoint) is `percentiles_among`, which leaves a concept out of its own null.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import rng as rngs
from . import score_names
from .scores import clopper_pearson
from .selection import Population, Scorer, percentile


@dataclass
class Scored:
    """values/lo/hi: score -> (m,) arrays; null: score -> (n_null,) values of the random
    sets; pct_random: score -> (m,) percentiles of each concept against them."""

    scores: tuple[str, ...]
    values: dict
    lo: dict
    hi: dict
    null: dict
    pct_random: dict
    caption_row: np.ndarray | None = None  # (m,) row of each concept's class-level caption, -1: none


def check_sets(sets, n: int) -> np.ndarray:
    """(m, N) int64 rows: every row N distinct rows of [0, n), sorted; ValueError otherwise."""
    sets = np.asarray(sets)
    if sets.ndim != 2 or sets.shape[0] == 0 or sets.shape[1] == 0:
        raise ValueError(f"sets must be a non-empty (concepts x members) array, got shape {sets.shape}")
    if not np.issubdtype(sets.dtype, np.integer):
        raise ValueError(f"sets must hold row numbers (integers), got {sets.dtype}")
    sets = np.sort(sets.astype(np.int64), axis=1)
    if sets[:, 0].min() < 0 or sets[:, -1].max() >= n:
        raise ValueError(f"sets' rows must be in [0, {n})")
    if (np.diff(sets, axis=1) == 0).any():
        raise ValueError("a set holds the same row twice")
    if sets.shape[1] > n - 2:
        raise ValueError(f"sets of {sets.shape[1]} images leave fewer than 2 of {n} outside them")
    return sets


def score_concepts(
    pop: Population,
    sets,
    seed: int,
    unit=None,
    *,
    n_null: int = 200,
    n_null_id: int = 15,
    bootstrap: int = 200,
    alpha: float = 0.05,
    trials: int = 20,
    refs: int = 10,
    id_points: int = 400,
    concepts: dict | None = None,
) -> Scored:
    """Scores of the concepts `sets` (rows of `pop`, all of one size N) and of `n_null` random
    sets of size N; see the module doc. `unit` (JSON-able, e.g. a partition dict) names the
    work, so two checkpoints scored with one seed draw independent streams. `concepts`:
    name -> (codes, K) of ground-truth concepts, scored as niche membership (niche_scores)."""
    sets = check_sets(sets, len(pop.X))
    m = len(sets)
    scorer = Scorer(
        pop,
        sets[0],
        n_null=n_null,
        n_null_id=n_null_id,
        id_points=id_points,
        trials=trials,
        refs=refs,
        nulls=("random",),
        seed=seed,
    )
    null = scorer.draws("random", rngs.stream(seed, "scoreboard.null_random", unit)) if n_null else sets[:0]
    tags = [(seed, unit, "concept", i) for i in range(m)] + [
        (seed, unit, "null", j) for j in range(len(null))
    ]
    everything = np.concatenate([sets, null])
    with_id = np.zeros(len(everything), bool)
    with_id[:m] = True
    with_id[m : m + min(n_null_id, len(null))] = True
    counts: dict = {}
    vals = scorer.score_sets(everything, tags, with_id, counts=counts)
    niche = niche_scores(everything, concepts or {}, alpha)
    vals.update({k: v for k, (v, _, _) in niche.items()})
    names = tuple(k for k in vals if np.isfinite(vals[k][:m]).any())
    lo = {k: np.full(m, math.nan) for k in names}
    hi = {k: np.full(m, math.nan) for k in names}
    for k, (_, a, b) in niche.items():
        if k in lo:
            lo[k], hi[k] = a[:m], b[:m]
    told = counts.pop("describability_top1", None)
    for i in range(m):
        out, _ = scorer._intervals(bootstrap, alpha, sel=sets[i], tag=tags[i], coherence=False)
        for kind, (ok, tr) in counts.items():  # the very trials the value was computed from
            if tr[i]:
                out[f"coherence_{kind}"] = clopper_pearson(int(ok[i]), int(tr[i]), alpha)
        if told is not None and told[1][i]:  # the very retrieval the value was computed from
            out["describability_top1"] = clopper_pearson(int(round(told[0][i])), int(told[1][i]), alpha)
        for k, (a, b) in out.items():
            if k in lo:
                lo[k][i], hi[k][i] = a, b
    nulls = {k: vals[k][m:] for k in names}
    pct = {k: np.array([percentile(v, nulls[k]) for v in vals[k][:m]]) for k in names}
    cap_row = told[2][:m].copy() if told is not None else None
    return Scored(names, {k: vals[k][:m] for k in names}, lo, hi, nulls, pct, cap_row)


def phi(a, N, K, n):
    """Pearson correlation of two indicators over n items: N in the set, K with the value,
    a in both (phi = (n a - N K) / sqrt(N (n - N) K (n - K))); nan where one is constant."""
    a, N, K, n = (np.asarray(x, np.float64) for x in (a, N, K, n))
    den = N * (n - N) * K * (n - K)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (n * a - N * K) / np.sqrt(np.where(den > 0, den, 1.0)), math.nan)


def phi_over_max(a, N, K, n):
    """phi divided by the largest phi N and K allow (a = min(N, K)): (n a - N K) /
    (n min(N, K) - N K), at most 1; for N <= K it is (a / N - K / n) / (1 - K / n), the share
    of the set with the value above its base rate, over the most it could be. nan where one
    indicator is constant."""
    a, N, K, n = (np.asarray(x, np.float64) for x in (a, N, K, n))
    den = n * np.minimum(N, K) - N * K
    ok = (N > 0) & (N < n) & (K > 0) & (K < n) & (den > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, (n * a - N * K) / np.where(ok, den, 1.0), math.nan)


def niche_correlations(sets: np.ndarray, codes: np.ndarray, K: int) -> tuple[np.ndarray, ...]:
    """For each set (rows of `sets`), over the items whose code is known (codes >= 0, values
    0..K-1): the largest phi / phi_max (`phi_over_max`) between the set and a value (ties:
    the lower value), that value, the set's known members N and those of them with the value
    a, the value's count Kv and the known items n; nan (value -1) where no value varies.
    Values over one set sum to no more than their base rates, so the largest is >= 0."""
    codes = np.asarray(codes, np.int64)
    known = codes >= 0
    n = int(known.sum())
    K = max(int(K), 1)
    pop = np.bincount(codes[known], minlength=K)[:K]
    c = codes[np.asarray(sets)]
    N = (c >= 0).sum(axis=1)
    counts = np.stack([(c == v).sum(axis=1) for v in range(K)], axis=1)
    r = phi_over_max(counts, N[:, None], pop[None, :], n)
    fin = np.isfinite(r)
    best = np.where(fin.any(axis=1), np.argmax(np.where(fin, r, -np.inf), axis=1), -1)
    rows = np.arange(len(c))
    take = np.maximum(best, 0)
    corr = np.where(best >= 0, r[rows, take], math.nan)
    return corr, best, N, counts[rows, take], pop[take], n


def niche_interval(a: int, N: int, Kv: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """phi / phi_max's interval: Jeffreys' interval of the share a / N (Beta(a + 1/2,
    N - a + 1/2) quantiles; 0 and 1 at the ends) mapped through it with N, Kv and n fixed
    (it rises with a, so ends map to ends)."""
    from scipy.special import betaincinv

    if N < 1 or not 0 <= a <= N:
        return math.nan, math.nan
    # Jeffreys' interval with its ends at 0 and 1 when a is 0 or N (Brown, Cai and DasGupta
    # 2001): otherwise it would leave out the share it was computed from
    qlo = 0.0 if a == 0 else float(betaincinv(a + 0.5, N - a + 0.5, alpha / 2))
    qhi = 1.0 if a == N else float(betaincinv(a + 0.5, N - a + 0.5, 1 - alpha / 2))
    lo, hi = (float(phi_over_max(N * q, N, Kv, n)) for q in (qlo, qhi))
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return math.nan, math.nan
    return lo, min(hi, 1.0)


def niche_scores(sets: np.ndarray, concepts: dict, alpha: float = 0.05) -> dict:
    """name -> (values, lo, hi) of `niche_NAME` for each set; `concepts`: name -> (codes, K)
    of the ground-truth concepts (codes over the population's rows, -1 unknown)."""
    out = {}
    for name, (codes, K) in concepts.items():
        corr, best, N, a, Kv, n = niche_correlations(sets, codes, K)
        lo, hi = np.full(len(corr), math.nan), np.full(len(corr), math.nan)
        for i in np.flatnonzero(best >= 0):
            lo[i], hi[i] = niche_interval(int(a[i]), int(N[i]), int(Kv[i]), n, alpha)
        out[score_names.niche(name)] = (corr, lo, hi)
    return out


def percentiles_among(
    values: np.ndarray, reference: np.ndarray, same: np.ndarray | None = None
) -> np.ndarray:
    """Each value's percentile (ties half) among the finite `reference` values; where
    `same[i]` is an index into `reference`, that entry is left out (a random direction is
    not its own null). nan without a reference."""
    values = np.asarray(values, np.float64)
    reference = np.asarray(reference, np.float64)
    out = np.full(len(values), math.nan)
    for i, v in enumerate(values):
        ref = reference
        if same is not None and same[i] >= 0:
            ref = np.delete(reference, same[i])
        out[i] = percentile(v, ref)
    return out
