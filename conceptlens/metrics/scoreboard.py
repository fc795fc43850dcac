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

The random-direction null (percentile among the random-direction concepts of the same
checkpoint) is `percentiles_among`, which leaves a concept out of its own null.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import rng as rngs
from .scores import clopper_pearson
from .selection import Population, Scorer, describability, percentile


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
) -> Scored:
    """Scores of the concepts `sets` (rows of `pop`, all of one size N) and of `n_null` random
    sets of size N; see the module doc. `unit` (JSON-able, e.g. a partition dict) names the
    work, so two checkpoints scored with one seed draw independent streams."""
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
    names = tuple(k for k in vals if np.isfinite(vals[k][:m]).any())
    lo = {k: np.full(m, math.nan) for k in names}
    hi = {k: np.full(m, math.nan) for k in names}
    cap = pop.captions
    for i in range(m):
        out, _ = scorer._intervals(bootstrap, alpha, sel=sets[i], tag=tags[i], coherence=False)
        for kind, (ok, tr) in counts.items():  # the very trials the value was computed from
            if tr[i]:
                out[f"coherence_{kind}"] = clopper_pearson(int(ok[i]), int(tr[i]), alpha)
        if "describability_top1" in names and cap is not None and cap.unavailable is None:
            member = np.zeros(len(pop.X), bool)
            member[sets[i]] = True
            d = describability(cap, member)
            if d is not None:
                out["describability_top1"] = clopper_pearson(int(round(d["correct"])), d["n"], alpha)
        for k, (a, b) in out.items():
            if k in lo:
                lo[k][i], hi[k][i] = a, b
    nulls = {k: vals[k][m:] for k in names}
    pct = {k: np.array([percentile(v, nulls[k]) for v in vals[k][:m]]) for k in names}
    return Scored(names, {k: vals[k][:m] for k in names}, lo, hi, nulls, pct)


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
