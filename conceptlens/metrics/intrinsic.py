"""TwoNN intrinsic dimension (Facco et al. 2017), as lu2022 and scikit-dimension compute it."""

from __future__ import annotations

import numpy as np

from .. import rng as rngs
from .bootstrap import percentile_interval, twonn_stats
from .neighbors import SELF_BLOCK, SelfNeighbours, as_matrix, by_rows, nearest_euclidean_self


def first_occurrences(X: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows of X not equal to an earlier row (as np.unique(X, axis=0)
    finds them: -0.0 equals 0.0). Each row gets a 64-bit key from its bits; only rows
    whose keys collide are compared, exactly: 50x faster than np.unique's sort of whole
    rows at 50,000 x 2,048, and 10x faster than hashing each row's bytes in Python."""
    X = np.asarray(X)
    keep = np.ones(len(X), bool)
    if len(X) < 2:
        return keep
    key = by_rows(_row_keys, X)
    order = np.argsort(key, kind="stable")  # equal keys stay in row order
    ks = key[order]
    tied = np.concatenate(([False], ks[1:] == ks[:-1]))
    # Runs of equal keys: each row is compared with the distinct rows before it in its run.
    for s in np.flatnonzero(tied[1:] & ~tied[:-1]):
        e = s + 1
        while e < len(ks) and tied[e]:
            e += 1
        firsts: list[int] = []
        for i in order[s:e]:
            if any(np.array_equal(X[j], X[i]) for j in firsts):
                keep[i] = False
            else:
                firsts.append(i)
    return keep


def _row_keys(B: np.ndarray) -> np.ndarray:
    """A 64-bit key per row of B: its bits (-0.0 as 0.0), read as 64-bit words, times fixed
    odd multipliers, summed modulo 2^64. Equal rows get equal keys."""
    B = B + B.dtype.type(0)  # a contiguous copy, -0.0 made 0.0
    if B.shape[1] * B.dtype.itemsize % 8 == 0:
        words = B.view(np.uint64)
    else:
        words = B.view(f"u{B.dtype.itemsize}").astype(np.uint64)
    mults = rngs.fixed("intrinsic.row_key_multipliers", words.shape[1])  # the hash's own constants
    mult = mults.integers(1, 2**63, words.shape[1], dtype=np.uint64)
    return (words * (mult | np.uint64(1))).sum(axis=1, dtype=np.uint64)


def drop_duplicates(X) -> tuple[np.ndarray, int]:
    """Unique rows of X (first occurrence order kept, float64) and how many were dropped."""
    X = as_matrix(X, dtype=np.float64)
    keep = first_occurrences(X)
    return X[keep], int(len(X) - keep.sum())


def twonn(
    X, discard_fraction: float = 0.1, cdf_offset: int = 1, block_size: int = SELF_BLOCK
) -> tuple[float, int]:
    """TwoNN dimension of X (Euclidean) and the number of duplicate rows dropped first.

    mu = r2 / r1 (self excluded, exact neighbours), the int(N (1 - f)) smallest mu
    kept, least squares of -log(1 - F) on log(mu) through the origin, with the
    empirical CDF F_i = (i - 1 + cdf_offset) / N, i = 1..n_keep, and the full N.
    cdf_offset=1 (default) is lu2022's and Facco et al.'s F_i = i / N (also the
    scikit-dimension 0.5.0 build installed here, `np.arange(1, n_keep + 1) / N`);
    cdf_offset=0 is the public scikit-dimension code (`np.arange(n_keep) / N`, its
    hyperBall test value 4.11323).
    """
    _check_options(discard_fraction, cdf_offset)
    X, n_dup = drop_duplicates(X)
    if len(X) < 3:
        raise ValueError(f"TwoNN needs at least 3 distinct points, got {len(X)}")
    d, _ = nearest_euclidean_self(X, k=2, block_size=block_size)
    return _fit(d[:, 1] / d[:, 0], discard_fraction, cdf_offset), n_dup


def twonn_shared(nb: SelfNeighbours, discard_fraction: float = 0.1, cdf_offset: int = 1) -> tuple[float, int]:
    """twonn(nb.X, ...) with the neighbours read from the shared cosine lists: on unit rows
    the nearest in cosine are the nearest in Euclidean distance up to rounding, which the
    exact re-measurement of every candidate within the error bound takes care of."""
    _check_options(discard_fraction, cdf_offset)
    mu, n_dup = twonn_ratios_shared(nb)
    return _fit(mu, discard_fraction, cdf_offset), n_dup


def twonn_ratios_shared(nb: SelfNeighbours) -> tuple[np.ndarray, int]:
    """mu = r2 / r1 of every distinct row of nb.X (what TwoNN fits; `twonn_interval`
    resamples them) and the number of duplicate rows dropped first."""
    keep = first_occurrences(nb.X)
    if keep.sum() < 3:
        raise ValueError(f"TwoNN needs at least 3 distinct points, got {int(keep.sum())}")
    _, d, _ = nb.euclidean(keep, k=2)
    return d[:, 1] / d[:, 0], int(len(keep) - keep.sum())


def twonn_interval(
    mu, estimate: float, n_boot: int, rng, discard_fraction: float = 0.1, cdf_offset: int = 1
) -> tuple[float, float]:
    """95% percentile bootstrap interval of the TwoNN dimension: the images resampled
    (`n_boot` times, `rng`), each with its ratio mu among all images, and the line refitted."""
    _check_options(discard_fraction, cdf_offset)
    stats = twonn_stats(mu, n_boot, rng, discard_fraction, cdf_offset)
    return percentile_interval(stats, estimate)


def twonn_fit(mu, discard_fraction: float = 0.1, cdf_offset: int = 1) -> float:
    """The TwoNN dimension fitted to the ratios mu = r2 / r1 (`twonn_ratios_shared`)."""
    _check_options(discard_fraction, cdf_offset)
    return _fit(np.asarray(mu, dtype=np.float64), discard_fraction, cdf_offset)


def _check_options(discard_fraction: float, cdf_offset: int) -> None:
    if cdf_offset not in (0, 1):
        raise ValueError(f"cdf_offset must be 0 or 1, got {cdf_offset!r}")
    if not 0 <= discard_fraction < 1:
        raise ValueError(f"discard_fraction must be in [0, 1), got {discard_fraction}")


def _fit(mu: np.ndarray, discard_fraction: float, cdf_offset: int) -> float:
    n = len(mu)
    # With F_i = i / N the largest mu would have F = 1 (-log 0): it is never kept.
    n_keep = min(int(n * (1 - discard_fraction)), n - cdf_offset)
    if n_keep < 2:
        raise ValueError("fewer than 2 points left after discarding; lower discard_fraction")
    x = np.log(np.sort(mu)[:n_keep])
    y = -np.log(1 - (np.arange(n_keep) + cdf_offset) / n)
    return float(x @ y / (x @ x))
