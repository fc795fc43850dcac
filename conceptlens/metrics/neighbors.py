"""Exact nearest neighbours without an N x N matrix.

Queries are processed in blocks against the whole base (one block x N matrix
product at a time), keeping only the running best candidates of each row.
"""

from __future__ import annotations

import numpy as np

# Rows of queries per block; block x N float32 stays well under a gigabyte for N <= 10^5.
DEFAULT_BLOCK = 1024


def as_matrix(X, name: str = "X", dtype=np.float32) -> np.ndarray:
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n_samples, n_features), got shape {X.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {X.shape})")
    if not np.issubdtype(X.dtype, np.number):
        raise ValueError(f"{name} must be numeric, got dtype {X.dtype}")
    X = X.astype(dtype, copy=False)
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return X


def l2_normalize(X, eps: float = 1e-12) -> np.ndarray:
    """Rows scaled to unit length (float32); all-zero rows stay zero."""
    X = as_matrix(X)
    n = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.maximum(n, eps)


def _blocks(n: int, block: int):
    for s in range(0, n, block):
        yield s, min(s + block, n)


def nearest_cosine(
    queries,
    base,
    k: int = 1,
    exclude: np.ndarray | None = None,
    block_size: int = DEFAULT_BLOCK,
    normalized: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The k most cosine-similar base rows of every query: (similarities, indices), best first.

    exclude[i] is a base index that query i must not return (e.g. itself), or -1.
    """
    Q = as_matrix(queries, "queries")
    B = as_matrix(base, "base")
    if Q.shape[1] != B.shape[1]:
        raise ValueError(f"queries have {Q.shape[1]} features but base has {B.shape[1]}")
    n_avail = B.shape[0] - (1 if exclude is not None else 0)
    if not 1 <= k <= n_avail:
        raise ValueError(f"k={k} must be in [1, {n_avail}]")
    if not normalized:
        Q, B = l2_normalize(Q), l2_normalize(B)
    if exclude is not None:
        exclude = np.asarray(exclude, dtype=np.int64)
        if exclude.shape != (Q.shape[0],):
            raise ValueError("exclude must hold one base index (or -1) per query")
    sims = np.empty((Q.shape[0], k), np.float32)
    idx = np.empty((Q.shape[0], k), np.int64)
    for s, e in _blocks(Q.shape[0], block_size):
        S = Q[s:e] @ B.T
        if exclude is not None:
            rows = np.nonzero(exclude[s:e] >= 0)[0]
            S[rows, exclude[s:e][rows]] = -np.inf
        if k == 1:
            top = S.argmax(axis=1)[:, None]
        else:
            top = np.argpartition(-S, k - 1, axis=1)[:, :k]
        v = np.take_along_axis(S, top, axis=1)
        order = np.argsort(-v, axis=1, kind="stable")
        sims[s:e] = np.take_along_axis(v, order, axis=1)
        idx[s:e] = np.take_along_axis(top, order, axis=1)
    return sims, idx


def _pairwise_sq_exact(
    X64: np.ndarray, rows: np.ndarray, cols: np.ndarray, chunk: int = 1 << 22
) -> np.ndarray:
    """Squared distances of the pairs (rows[i], cols[i]) from differences in float64."""
    out = np.empty(len(rows))
    step = max(1, chunk // X64.shape[1])  # bounded memory even for huge candidate sets
    for s, e in _blocks(len(rows), step):
        diff = X64[rows[s:e]] - X64[cols[s:e]]
        out[s:e] = np.einsum("ij,ij->i", diff, diff)
    return out


def nearest_euclidean_self(X, k: int = 2, block_size: int = DEFAULT_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """Exact Euclidean distances to the k nearest other rows of X: (distances, indices).

    Candidates come from a float32 product |a|^2 + |b|^2 - 2ab. Its error on a pair is
    below E = (d + 8) eps32 (|a| + |b|)^2 (summation of d terms, two additions and the
    rounding of X to float32), so every row whose true distance can be among the k
    smallest lies within 2E of the k-th smallest float32 value. All of those - however
    many, e.g. a blob of near-duplicates - are re-measured from differences in float64
    and the k best kept (ties: the lower index). A fixed number of re-measured candidates
    is not enough: near-duplicates more numerous than it get the wrong r1 and r2.
    """
    X64 = as_matrix(X, dtype=np.float64)
    n, d = X64.shape
    if not 1 <= k < n:
        raise ValueError(f"k={k} must be in [1, {n - 1}] for {n} points")
    X = X64.astype(np.float32)
    sq = np.einsum("ij,ij->i", X, X)
    norms = np.sqrt(np.einsum("ij,ij->i", X64, X64))
    margin = 2 * (d + 8) * np.finfo(np.float32).eps * (norms + norms.max()) ** 2
    dist = np.empty((n, k))
    idx = np.empty((n, k), np.int64)
    for s, e in _blocks(n, block_size):
        D = X[s:e] @ X.T
        D *= -2.0  # in place: no further block x N temporaries
        D += sq[None, :]
        D += sq[s:e, None]
        D[np.arange(e - s), np.arange(s, e)] = np.inf  # never the point itself
        kth = np.partition(D, k - 1, axis=1)[:, k - 1]
        rows, cols = np.nonzero(D <= (kth + margin[s:e])[:, None])
        del D
        exact = _pairwise_sq_exact(X64, rows + s, cols)
        order = np.lexsort((cols, exact, rows))  # by row, then distance, then index
        rows, cols, exact = rows[order], cols[order], exact[order]
        first = np.searchsorted(rows, np.arange(e - s))
        take = first[:, None] + np.arange(k)[None, :]  # every row has >= k candidates
        dist[s:e] = np.sqrt(exact[take])
        idx[s:e] = cols[take]
    return dist, idx
