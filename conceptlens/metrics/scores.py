"""Cluster purity, Clopper-Pearson intervals and adjusted NMI."""

from __future__ import annotations

import math

import numpy as np


def _labels(a, name: str) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    return a


def purity(labels_in_cluster, n_classes: int) -> tuple[float, object, float]:
    """laina2020 purity 1 - H(labels) / log K, plus the top label and its share.

    `n_classes` is K, the number of classes in the whole dataset (not in the
    cluster). Returns (nan, None, nan) for an empty cluster; purity is nan for K < 2
    (log K would be 0).
    """
    y = _labels(labels_in_cluster, "labels_in_cluster")
    if int(n_classes) != n_classes or n_classes < 1:
        raise ValueError(f"n_classes must be a positive integer, got {n_classes!r}")
    if y.size == 0:
        return math.nan, None, math.nan
    values, counts = np.unique(y, return_counts=True)
    if len(values) > n_classes:
        raise ValueError(f"{len(values)} distinct labels in the cluster but n_classes={n_classes}")
    top = int(np.argmax(counts))  # ties: the smallest label, as np.unique sorts
    share = float(counts[top] / y.size)
    top_label = values[top].item() if hasattr(values[top], "item") else values[top]
    if n_classes < 2:
        return math.nan, top_label, share
    p = counts / y.size
    h = float(-(p * np.log(p)).sum())
    # Rounding can push 1 - H/log K a hair below 0 (uniform clusters): clip.
    return max(0.0, 1.0 - h / math.log(n_classes)), top_label, share


def clopper_pearson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Exact (Clopper-Pearson) 1 - alpha interval for k successes in n trials.

    Same values as statsmodels `proportion_confint(k, n, alpha, method="beta")`.
    """
    # The beta quantiles by scipy.special's inverse incomplete beta functions, what
    # scipy.stats.beta.ppf / .isf call (the same bits on 4,227 (k, n, alpha) checked): the
    # Clusters page's intervals then need no scipy.stats, a third of a cold page's imports.
    from scipy.special import betainccinv, betaincinv

    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if int(k) != k or not 0 <= k <= n:
        raise ValueError(f"k must be an integer in [0, n={n}], got {k!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    lo = 0.0 if k == 0 else float(betaincinv(k, n - k + 1, alpha / 2))  # beta.ppf(alpha / 2, ...)
    hi = 1.0 if k == n else float(betainccinv(k + 1, n - k, alpha / 2))  # beta.isf(alpha / 2, ...)
    return lo, hi


def anmi(labels_true, labels_pred) -> float:
    """Adjusted mutual information with arithmetic-mean normalisation (set explicitly)."""
    from sklearn.metrics import adjusted_mutual_info_score

    a, b = _labels(labels_true, "labels_true"), _labels(labels_pred, "labels_pred")
    if a.shape != b.shape:
        raise ValueError(f"labels_true has {a.size} entries but labels_pred has {b.size}")
    if a.size == 0:
        raise ValueError("no labels to compare")
    return float(adjusted_mutual_info_score(a, b, average_method="arithmetic"))
