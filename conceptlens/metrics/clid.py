"""CLID and W-CLID (lu2022) and their correlation with kNN accuracy across checkpoints."""
from __future__ import annotations

import math

import numpy as np


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


def correlations(predictor, target) -> dict:
    """Pearson and Kendall (tau-b) correlation of a predictor with the target, with p-values."""
    from scipy.stats import kendalltau, pearsonr
    x, y = _vec(predictor, "predictor"), _vec(target, "target")
    if x.shape != y.shape:
        raise ValueError("predictor and target need one value per checkpoint each")
    ok = np.isfinite(x) & np.isfinite(y)
    n = int(ok.sum())
    out = {"pearson": math.nan, "pearson_p": math.nan, "kendall": math.nan,
           "kendall_p": math.nan, "n_checkpoints": n}
    # Fewer than 3 points or a constant series carry no correlation.
    if n < 3 or np.ptp(x[ok]) == 0 or np.ptp(y[ok]) == 0:
        return out
    r = pearsonr(x[ok], y[ok])
    t = kendalltau(x[ok], y[ok])
    out.update(pearson=float(r[0]), pearson_p=float(r[1]),
               kendall=float(t[0]), kendall_p=float(t[1]))
    return out
