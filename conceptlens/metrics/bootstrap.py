"""Seeded percentile bootstrap intervals over images, vectorised.

Every interval here resamples images with replacement: resample b draws
`rng.integers(0, n, size=n)` (a block of resamples is one draw of shape (rows, n), which
is the same stream as one draw per row), computes the statistic on the resampled images,
and the 95% interval is the 2.5th and 97.5th percentiles of the `n_boot` statistics
(`np.quantile`, linear). The percentile interval of a skewed statistic (purity near 1,
TwoNN) can miss the estimate by a hair; such an end is moved to the estimate, so that
lo <= estimate <= hi always holds (the workspace validates it).

`rng_for(seed, what)` (`conceptlens.rng.stream`) gives each quantity its own stream of one
`--seed`: the interval of one metric does not change when another is added or its
resample count changes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import rng as rngs
from .neighbors import blas_threads

ALPHA = 0.05
# Index cells drawn per block (int64: 32 MB): bounds memory at 50,000 images x 1,000 resamples.
MAX_CELLS = 1 << 22
# Index cells a statistic is computed over at a time (by_rows_of): 2 MB of int64.
FIT_CELLS = 1 << 18


def rng_for(seed: int, what: str) -> np.random.Generator:
    """The generator of one quantity's resamples (`what`, e.g. "knn_acc") under `seed`:
    `rng.stream(seed, what)`, the same for every unit."""
    return rngs.stream(seed, what)


def resamples(
    n: int, n_boot: int, rng: np.random.Generator, max_cells: int = MAX_CELLS
) -> Iterator[np.ndarray]:
    """Blocks of resampled row indices, shape (rows, n), `n_boot` rows in all, in order."""
    if n < 1:
        raise ValueError(f"cannot resample {n} images")
    rows = max(1, max_cells // n)
    done = 0
    while done < n_boot:
        b = min(rows, n_boot - done)
        yield rng.integers(0, n, size=(b, n))
        done += b


def percentile_interval(stats: np.ndarray, estimate: float, alpha: float = ALPHA) -> tuple[float, float]:
    """(lo, hi): the alpha/2 and 1 - alpha/2 quantiles of `stats`, widened to hold `estimate`."""
    stats = np.asarray(stats, dtype=np.float64)
    stats = stats[np.isfinite(stats)]
    if stats.size == 0 or not math.isfinite(estimate):
        return math.nan, math.nan
    lo, hi = np.quantile(stats, [alpha / 2, 1 - alpha / 2])
    return float(min(lo, estimate)), float(max(hi, estimate))


def _check(n_boot: int) -> None:
    if int(n_boot) != n_boot or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")


def mean_stats(values, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """The mean of each of `n_boot` resamples of per-item values (mean_interval's)."""
    _check(n_boot)
    v = np.asarray(values, dtype=np.float64)
    return np.concatenate([v[idx].mean(axis=1) for idx in by_rows_of(resamples(len(v), n_boot, rng), len(v))])


def mean_interval(values, n_boot: int, rng: np.random.Generator, alpha: float = ALPHA) -> tuple[float, float]:
    """Interval of the mean of per-image values (an accuracy from per-image correct flags)."""
    v = np.asarray(values, dtype=np.float64)
    return percentile_interval(mean_stats(v, n_boot, rng), float(v.mean()), alpha)


def group_mean_interval(stats, estimate: float, alpha: float = ALPHA) -> tuple[float, float]:
    """Interval of a mean over groups (clusters) of a per-group statistic, each group's
    items resampled within it and the groups held fixed (as each cluster's own interval):
    `stats` is groups x n_boot, row g the statistic of group g on each of its resamples
    (purity_stats, mean_stats); resample b of the mean is the mean of column b."""
    S = np.asarray(stats, dtype=np.float64)
    if S.ndim != 2 or S.shape[0] == 0:
        return math.nan, math.nan
    return percentile_interval(S.mean(axis=0), estimate, alpha)


def ratio_interval(
    num, den, n_boot: int, rng: np.random.Generator, estimate: float | None = None, alpha: float = ALPHA
) -> tuple[float, float]:
    """Interval of sum(num) / sum(den) over resampled images (e.g. correct predictions over
    predictions made, per image); `estimate` defaults to that ratio on all images."""
    _check(n_boot)
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    if num.shape != den.shape:
        raise ValueError("num and den need one value per image each")
    out = []
    for idx in by_rows_of(resamples(len(num), n_boot, rng), len(num)):
        d = den[idx].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append(num[idx].sum(axis=1) / d)
    est = float(num.sum() / den.sum()) if estimate is None else float(estimate)
    return percentile_interval(np.concatenate(out), est, alpha)


def purity_stats(labels_in_cluster, n_classes: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """laina2020 purity 1 - H / log K of each of `n_boot` resamples of one cluster's labels."""
    _check(n_boot)
    _, codes = np.unique(np.asarray(labels_in_cluster), return_inverse=True)
    codes = codes.ravel()
    m, u = len(codes), int(codes.max()) + 1
    out = []
    for idx in resamples(m, n_boot, rng):
        b = len(idx)
        counts = np.bincount((np.arange(b)[:, None] * u + codes[idx]).ravel(), minlength=b * u).reshape(b, u)
        p = counts / m
        with np.errstate(divide="ignore", invalid="ignore"):
            h = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)
        out.append(np.maximum(0.0, 1.0 - h / math.log(n_classes)))
    return np.concatenate(out)


def purity_interval(
    labels_in_cluster,
    n_classes: int,
    estimate: float,
    n_boot: int,
    rng: np.random.Generator,
    alpha: float = ALPHA,
) -> tuple[float, float]:
    """Interval of a cluster's purity (`metrics.scores.purity`), its images resampled."""
    if n_classes < 2 or len(labels_in_cluster) == 0:
        return math.nan, math.nan
    return percentile_interval(purity_stats(labels_in_cluster, n_classes, n_boot, rng), estimate, alpha)


def twonn_stats(
    mu, n_boot: int, rng: np.random.Generator, discard_fraction: float = 0.1, cdf_offset: int = 1
) -> np.ndarray:
    """The TwoNN fit (`intrinsic.twonn_fit`) of each of `n_boot` resamples of the images,
    each keeping its ratio mu = r2 / r1 among all images. Indices are drawn into the sorted
    ratios (resampling is exchangeable with sorting first), so a resample's sorted ratios
    are the sorted ratios repeated by their draw counts; the fit's two sums over its
    `n_keep` smallest are then sums over each ratio's run of positions (cumulative sums),
    with no sort and no loop per resample."""
    _check(n_boot)
    logmu = np.log(np.sort(np.asarray(mu, dtype=np.float64)))
    n = len(logmu)
    n_keep = min(int(n * (1 - discard_fraction)), n - cdf_offset)
    if n_keep < 2:
        raise ValueError("fewer than 2 points left after discarding; lower discard_fraction")
    yv = -np.log(1 - (np.arange(n_keep) + cdf_offset) / n)
    ycum = np.concatenate([[0.0], np.cumsum(yv)])

    def fit(idx):
        b = len(idx)
        counts = np.bincount((np.arange(b)[:, None] * n + idx).ravel(), minlength=b * n).reshape(b, n)
        cum = np.cumsum(counts, axis=1)
        end, start = np.minimum(cum, n_keep), np.minimum(cum - counts, n_keep)  # each ratio's run
        xy = (logmu * (ycum[end] - ycum[start])).sum(axis=1)
        xx = (logmu**2 * (end - start)).sum(axis=1)
        return xy / xx

    return np.concatenate(in_order(fit, by_rows_of(resamples(n, n_boot, rng), n)))


def by_rows_of(blocks: Iterator[np.ndarray], n: int, cells: int | None = None) -> Iterator[np.ndarray]:
    """The drawn blocks of resamples, in runs of rows of about `cells` indices: a
    statistic's temporaries then fit in cache (each of a whole block's is 32 MB of fresh
    memory), and the draws, made by whole blocks, are unchanged."""
    step = max(1, (cells or FIT_CELLS) // n)
    for idx in blocks:
        for s in range(0, len(idx), step):
            yield idx[s : s + step]


def in_order(f, blocks: Iterator, threads: int | None = None) -> list:
    """[f(b) for b in blocks], the blocks drawn in order on this thread (the generator's
    stream is unchanged) and fitted on as many threads as BLAS may use, at most that many
    blocks held at once."""
    workers = int(threads or blas_threads())
    if workers == 1:
        return [f(b) for b in blocks]

    out, pending = [], []
    with ThreadPoolExecutor(workers) as pool:
        for b in blocks:
            pending.append(pool.submit(f, b))
            if len(pending) == workers:
                out.append(pending.pop(0).result())
        out += [p.result() for p in pending]
    return out
