"""CLID and W-CLID (lu2022) and their correlation with kNN accuracy across checkpoints."""

from __future__ import annotations

import itertools
import math

import numpy as np

from .. import rng as rngs


def _vec(x, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one value per checkpoint)")
    return x


def zscore(x) -> np.ndarray:
    """(x - mean) / std over the compared checkpoints (population std).

    Fewer than 2 finite values or no spread give NaN: there is nothing to compare.
    """
    x = _vec(x, "x")
    ok = np.isfinite(x)
    out = np.full(x.shape, np.nan)
    if ok.sum() < 2:
        return out
    sd = x[ok].std()
    if sd == 0:
        return out
    out[ok] = (x[ok] - x[ok].mean()) / sd
    return out


def clid(cl, id_) -> np.ndarray:
    """CLID = z(CL) + z(ID): lu2022 adds the two (learnable AND expressive is better)."""
    cl, id_ = _vec(cl, "cl"), _vec(id_, "id")
    if cl.shape != id_.shape:
        raise ValueError("cl and id need one value per checkpoint each")
    return zscore(cl) + zscore(id_)


def wclid(cl, id_, knn_acc, leave_one_out: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """W-CLID = w . [CL, ID, 1], w fitted by least squares of knn_acc on [CL, ID, 1].

    Returns (predictions, w). In-sample by default, as in the paper; with
    `leave_one_out` each checkpoint is predicted by a fit on the others (w is
    then the all-checkpoint fit). Needs at least 3 checkpoints (4 for LOO).
    """
    cl, id_, y = _vec(cl, "cl"), _vec(id_, "id"), _vec(knn_acc, "knn_acc")
    if not (cl.shape == id_.shape == y.shape):
        raise ValueError("cl, id and knn_acc need one value per checkpoint each")
    A = np.column_stack([cl, id_, np.ones_like(cl)])
    ok = np.isfinite(A).all(axis=1) & np.isfinite(y)
    pred = np.full(y.shape, np.nan)
    if ok.sum() < (4 if leave_one_out else 3):
        return pred, np.full(3, np.nan)
    w = np.linalg.lstsq(A[ok], y[ok], rcond=None)[0]
    if not leave_one_out:
        pred[ok] = A[ok] @ w
        return pred, w
    for i in np.flatnonzero(ok):
        m = ok.copy()
        m[i] = False
        pred[i] = A[i] @ np.linalg.lstsq(A[m], y[m], rcond=None)[0]
    return pred, w


def fisher_interval(r: float, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """1 - alpha interval of a Pearson r from n pairs by Fisher's z (nan below 4 pairs)."""
    from scipy.stats import norm

    if n < 4 or not np.isfinite(r):
        return math.nan, math.nan
    z, half = np.arctanh(np.clip(r, -1.0, 1.0)), norm.isf(alpha / 2) / math.sqrt(n - 3)
    return float(np.tanh(z - half)), float(np.tanh(z + half))


def _tau_b(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Kendall tau-b of every row pair (X[r], Y[r]): sum sgn dx sgn dy / sqrt(pairs untied in x * in y)."""
    sx = np.sign(X[:, :, None] - X[:, None, :])
    sy = np.sign(Y[:, :, None] - Y[:, None, :])
    with np.errstate(invalid="ignore", divide="ignore"):
        return (sx * sy).sum(axis=(1, 2)) / np.sqrt((sx * sx).sum(axis=(1, 2)) * (sy * sy).sum(axis=(1, 2)))


def kendall_bootstrap_interval(
    x, y, n_boot: int = 2000, alpha: float = 0.05, random_state: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of Kendall's tau-b, resampling the (x, y) pairs.

    A resample's repeated pairs count as ties, as scipy's `kendalltau` counts them.
    Resamples where tau is undefined (a constant series) are left out.
    """
    x, y = _vec(x, "x"), _vec(y, "y")
    rng = rngs.generator(random_state)
    idx = rng.integers(0, len(x), (n_boot, len(x)))
    step = max(1, 2_000_000 // len(x) ** 2)  # bounded memory: B x n x n signs
    vals = np.concatenate(
        [_tau_b(x[idx[s : s + step]], y[idx[s : s + step]]) for s in range(0, n_boot, step)]
    )
    vals = vals[np.isfinite(vals)]
    if len(vals) < n_boot / 2:  # mostly degenerate resamples: no interval worth showing
        return math.nan, math.nan
    lo, hi = np.quantile(vals, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


MIN_CORRELATED = 3  # checkpoints with both values a correlation needs
MIN_STABLE = 10  # below this many checkpoints an interval is unstable: shown with a warning
N_PERMUTATIONS = 10_000


def _pearson_rows(x: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Pearson r of x with every row of Y."""
    xc = x - x.mean()
    Yc = Y - Y.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (Yc @ xc) / np.sqrt((Yc * Yc).sum(axis=1) * (xc @ xc))


def permutation_p(x, y, n_perm: int = N_PERMUTATIONS, random_state: int = 0) -> tuple[float, float]:
    """Two-sided permutation p-values of Pearson's r and Kendall's tau-b of (x, y): y is
    permuted across the points, p is the share of permutations whose |statistic| is at least
    the observed one (up to 1e-12). Every one of the n! permutations when n! <= n_perm
    (exact; the observed order is one of them), else `n_perm` seeded ones counted with the
    observed order, (1 + hits) / (1 + n_perm)."""
    x, y = _vec(x, "x"), _vec(y, "y")
    if x.shape != y.shape:
        raise ValueError("x and y need one value per point each")
    n = len(x)
    if int(n_perm) != n_perm or n_perm < 1:
        raise ValueError(f"n_perm must be a positive integer, got {n_perm!r}")
    exact = math.factorial(n) <= n_perm
    if exact:
        perms = np.array(list(itertools.permutations(range(n))), dtype=np.int64)
    else:
        rng = rngs.generator(random_state)
        perms = rng.permuted(np.tile(np.arange(n), (n_perm, 1)), axis=1)
    r0 = abs(_pearson_rows(x, y[None, :])[0])
    t0 = abs(_tau_b(x[None, :], y[None, :])[0])
    step = max(1, 2_000_000 // n**2)
    hits_r = hits_t = 0
    for s in range(0, len(perms), step):
        Y = y[perms[s : s + step]]
        hits_r += int((np.abs(_pearson_rows(x, Y)) >= r0 - 1e-12).sum())
        X = np.broadcast_to(x, Y.shape)
        hits_t += int((np.abs(_tau_b(X, Y)) >= t0 - 1e-12).sum())
    if exact:
        return hits_r / len(perms), hits_t / len(perms)
    return (1 + hits_r) / (1 + n_perm), (1 + hits_t) / (1 + n_perm)


def correlations(predictor, target, alpha: float = 0.05, n_boot: int = 2000, random_state: int = 0) -> dict:
    """Pearson and Kendall (tau-b) correlation of a predictor with the target.

    With two-sided p-values and 1 - alpha intervals: Fisher's z for Pearson (scipy's
    `pearsonr(...).confidence_interval()`), a seeded percentile bootstrap over the
    checkpoints (`n_boot` resamples) for Kendall; both permutation p-values
    (`permutation_p`), and `unstable` when fewer than MIN_STABLE checkpoints carry it.
    """
    from scipy.stats import kendalltau, pearsonr

    x, y = _vec(predictor, "predictor"), _vec(target, "target")
    if x.shape != y.shape:
        raise ValueError("predictor and target need one value per checkpoint each")
    ok = np.isfinite(x) & np.isfinite(y)
    n = int(ok.sum())
    out = {
        "pearson": math.nan,
        "pearson_p": math.nan,
        "pearson_lo": math.nan,
        "pearson_hi": math.nan,
        "kendall": math.nan,
        "kendall_p": math.nan,
        "kendall_lo": math.nan,
        "kendall_hi": math.nan,
        "pearson_perm_p": math.nan,
        "kendall_perm_p": math.nan,
        "unstable": n < MIN_STABLE,
        "n_checkpoints": n,
    }
    # Fewer than MIN_CORRELATED points or a constant series carry no correlation.
    if n < MIN_CORRELATED or np.ptp(x[ok]) == 0 or np.ptp(y[ok]) == 0:
        return out
    x, y = x[ok], y[ok]
    r = pearsonr(x, y)
    t = kendalltau(x, y)
    lo, hi = fisher_interval(float(r[0]), n, alpha)
    klo, khi = kendall_bootstrap_interval(x, y, n_boot, alpha, random_state)
    pp, kp = permutation_p(x, y, random_state=random_state)
    out.update(
        pearson=float(r[0]),
        pearson_p=float(r[1]),
        pearson_lo=lo,
        pearson_hi=hi,
        kendall=float(t[0]),
        kendall_p=float(t[1]),
        kendall_lo=klo,
        kendall_hi=khi,
        pearson_perm_p=pp,
        kendall_perm_p=kp,
    )
    return out
