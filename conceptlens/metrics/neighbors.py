"""Exact nearest neighbours without an N x N matrix.

Queries are processed in blocks against the whole base (one block x N matrix
product at a time), keeping only the running best candidates of each row.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

# Rows of queries per block; block x N float32 stays well under a gigabyte for N <= 10^5.
DEFAULT_BLOCK = 1024


# Rows per block of a row-wise operation (by_rows): 1,024 x 2,048 float32 is 8 MB, so a
# block's temporaries stay in cache instead of each being a fresh array of the whole matrix.
ROW_BLOCK = 1024


def by_rows(f, X: np.ndarray, block: int = ROW_BLOCK, threads: int | None = None) -> np.ndarray:
    """f(X) for a function f that treats each row alone (its output's row i depends on X's
    row i only), applied to blocks of rows on as many threads as BLAS may use: the same
    values as f(X), bit for bit.

    On a whole 20,000 x 2,048 matrix, a chain of numpy operations makes a 160 MB
    temporary per step, each written to fresh memory: the distance of every point to its
    centre took 0.78 s that way and 0.04 s in blocks on two threads."""
    return by_spans(lambda s, e: f(X[s:e]), len(X), block, threads)


def by_spans(f, n: int, block: int = ROW_BLOCK, threads: int | None = None) -> np.ndarray:
    """f(0, n) computed as f(s, e) over blocks of rows [s, e), for an f whose rows depend
    on their own row alone (by_rows)."""
    if n <= block:
        return f(0, n)
    spans = list(_blocks(n, block))
    first = f(*spans[0])
    out = np.empty((n,) + first.shape[1:], first.dtype)
    out[: spans[0][1]] = first

    def fill(span):
        out[span[0] : span[1]] = f(*span)

    workers = max(1, min(int(threads or blas_threads()), len(spans) - 1))
    if workers == 1:
        for span in spans[1:]:
            fill(span)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(fill, spans[1:]))
    return out


def as_matrix(X, name: str = "X", dtype=np.float32, finite: bool = True) -> np.ndarray:
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n_samples, n_features), got shape {X.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {X.shape})")
    if not np.issubdtype(X.dtype, np.number):
        raise ValueError(f"{name} must be numeric, got dtype {X.dtype}")
    X = X.astype(dtype, copy=False)
    if finite and not by_rows(lambda B: np.isfinite(B).all(axis=1), X).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return X


def l2_normalize(X, eps: float = 1e-12) -> np.ndarray:
    """Rows scaled to unit length (float32); all-zero rows stay zero."""

    def unit(B):  # as_matrix's check, block by block: one pass over X, not two
        if not np.isfinite(B).all():
            raise ValueError("X contains NaN or infinite values")
        return B / np.maximum(np.linalg.norm(B, axis=1, keepdims=True), eps)

    return by_rows(unit, as_matrix(X, finite=False))


def unit_rows(X: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """l2_normalize of a matrix already checked (as_matrix), any number of rows."""
    return by_rows(lambda B: B / np.maximum(np.linalg.norm(B, axis=1, keepdims=True), eps), X)


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
    # A -1 excludes nothing: queries outside the base (test rows against train) keep all of it.
    excluding = exclude is not None and bool((np.asarray(exclude) >= 0).any())
    n_avail = B.shape[0] - (1 if excluding else 0)
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


def _pairwise_sq_exact(X: np.ndarray, rows: np.ndarray, cols: np.ndarray, chunk: int = 1 << 18) -> np.ndarray:
    """Squared distances of the pairs (rows[i], cols[i]) from differences in float64
    (of X's values, whatever its dtype)."""
    # Bounded memory even for huge candidate sets; blocks of 2 MB (at 2,048 dimensions) on
    # every core: 0.23 s for 100,000 pairs, 0.74 s in blocks of 32 MB on one.
    step = max(1, chunk // X.shape[1])

    def part(s, e):
        diff = X[rows[s:e]].astype(np.float64) - X[cols[s:e]]
        return np.einsum("ij,ij->i", diff, diff)

    return by_spans(part, len(rows), block=step)


# ---- one symmetric pass: the m best other rows of every row ------------------------------
# Row blocks of SELF_BLOCK against column chunks of SELF_CHUNK from the block on: each
# product serves its rows and, read down its columns, the later rows it holds.
SELF_BLOCK = 2048
SELF_CHUNK = 2048
# A point's first threshold is its m-th best among its first FRESH_COLS * m scores (_offer).
FRESH_COLS = 8
# Unit roundoff of float32.
U32 = float(np.finfo(np.float32).eps) / 2


def _merge(best, bidx, thr, rows, cols, vals) -> None:
    """Fold candidates (rows sorted ascending) into each row's list of its m best."""
    if len(rows) == 0:
        return
    m = best.shape[1]
    # The runs of equal rows (sorted already: np.unique would sort them again).
    start = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
    ur, cnt = rows[start], np.diff(np.append(start, len(rows)))
    V = np.full((len(ur), m + int(cnt.max())), -np.inf, np.float32)
    ix = np.full(V.shape, -1, np.int64)
    V[:, :m], ix[:, :m] = best[ur], bidx[ur]
    g = np.repeat(np.arange(len(ur)), cnt)
    pos = m + np.arange(len(rows)) - start[g]
    V[g, pos], ix[g, pos] = vals, cols
    top = np.argpartition(-V, m - 1, axis=1)[:, :m]
    best[ur] = np.take_along_axis(V, top, axis=1)
    bidx[ur] = np.take_along_axis(ix, top, axis=1)
    # A threshold never falls: a list still short of m (-inf entries) keeps the one it was
    # given (top_self's first pass), which its final list's last entry cannot be below.
    thr[ur] = np.maximum(thr[ur], best[ur].min(axis=1))


def _offer(best, bidx, thr, S: np.ndarray, r0: int, c0: int, axis: int) -> None:
    """Offer scores S (rows r0.., columns c0..) to the lists of its rows (axis 1) or of its
    columns (axis 0), without transposing it."""
    m = best.shape[1]
    own, other = (r0, c0) if axis == 1 else (c0, r0)  # whose lists grow, whose indices enter
    t = thr[own : own + S.shape[1 - axis]]
    fresh = np.isneginf(t)
    if fresh.any() and S.shape[axis] > m:
        # A point's first scores (its threshold, -inf, would pass them all): it takes those
        # at least its m-th best among the first FRESH_COLS * m of them, a bound below its
        # m-th best here. A full selection of 2,048 scores per point cost 20 times as much.
        f = np.flatnonzero(fresh)
        w = min(S.shape[axis], FRESH_COLS * m)
        Sf = S[f, :w] if axis == 1 else S[:w, f].T
        kth = -np.partition(-Sf, m - 1, axis=1)[:, m - 1]
        t = t.copy()
        t[f] = np.nextafter(kth, np.float32(-np.inf))  # > this: >= the bound (-inf stays -inf)
    # flatnonzero and divmod: several times faster than nonzero on a sparse mask.
    hit = np.flatnonzero(S > (t[:, None] if axis == 1 else t[None, :]))
    r, c = np.divmod(hit, S.shape[1])
    vals = S[r, c]
    if axis == 0:
        order = np.argsort(c, kind="stable")
        r, c, vals = c[order], r[order], vals[order]
    _merge(best, bidx, thr, r + own, c + other, vals)


_BLAS = []  # the BLAS libraries' threadpoolctl controller, found once per process


def blas_threads() -> int:
    """The threads BLAS may use here now (e.g. 1 inside a `--threads 1` Ray task)."""
    from threadpoolctl import ThreadpoolController

    # Finding the libraries walks every one loaded (3-4 ms in an analysis process, asked for
    # by every row-wise step); asking each its thread count is a call into it.
    if not _BLAS:
        _BLAS.append(ThreadpoolController().select(user_api="blas"))
    return max([1] + [int(lib.num_threads) for lib in _BLAS[0].lib_controllers])


def top_self(
    X: np.ndarray,
    m: int,
    bias: np.ndarray | None = None,
    block_size: int = SELF_BLOCK,
    chunk: int = SELF_CHUNK,
    threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """For every row i of float32 X, the m other rows j with the largest score
    X_i . X_j - bias_j, computed in float32: (scores, indices), best first, ties by index.

    Every row whose score exceeds scores[i, -1] is in row i's list (rows tied with the
    last may be missing): callers use only entries above it. Each pair's score is
    computed once and offered to both of its rows, so the pass costs half of the blocked
    X X^T product; a running threshold per row keeps the selection to about one
    comparison per score.

    `threads` (default: as many as BLAS may use) split the products between them, each
    with single-threaded BLAS and lists of its own, merged at the end: the selection,
    which numpy runs on one core, then runs on all of them too.
    """
    X = np.ascontiguousarray(X, dtype=np.float32)
    n = len(X)
    if not 1 <= m < n:
        raise ValueError(f"m={m} must be in [1, {n - 1}] for {n} points")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    chunk = max(int(chunk), block_size)
    blocks = list(_blocks(n, block_size))
    # Each row block against the column chunks past it; the block against itself comes first.
    tiles = [(s0, e0, c0, min(c0 + chunk, n)) for s0, e0 in blocks for c0 in range(e0, n, chunk)]
    workers = max(1, min(int(threads or blas_threads()), len(blocks)))

    # First pass: every row's m best within its own block (the diagonal tiles), in lists
    # shared by the threads (a block's rows are its own). Their last entries are thresholds
    # every later tile starts from: without them each thread's lists began empty, and a
    # row's first tile on each thread cost a full selection (argpartition of 2,048 x 2,048,
    # transposed when the row was a column there): half the selection's time.
    first = np.full((n, m), -np.inf, np.float32)
    first_idx = np.full((n, m), -1, np.int64)
    start = np.full(n, -np.inf, np.float32)

    def own_block(span):
        s0, e0 = span
        S = X[s0:e0] @ X[s0:e0].T
        S[np.arange(e0 - s0), np.arange(e0 - s0)] = -np.inf  # never the point itself
        _offer(first, first_idx, start, S if bias is None else S - bias[None, s0:e0], s0, s0, axis=1)

    def run(mine):
        best = np.full((n, m), -np.inf, np.float32)
        bidx = np.full((n, m), -1, np.int64)
        thr = start.copy()
        for s0, e0, c0, c1 in mine:
            S = X[s0:e0] @ X[c0:c1].T
            _offer(best, bidx, thr, S if bias is None else S - bias[None, c0:c1], s0, c0, axis=1)
            # Read down its columns: the later rows' lists get this block's rows.
            _offer(best, bidx, thr, S if bias is None else S - bias[s0:e0, None], s0, c0, axis=0)
        return best, bidx

    if workers == 1:
        for span in blocks:
            own_block(span)
        parts = [run(tiles)]
    else:
        from threadpoolctl import threadpool_limits

        # Tile t to thread t % workers: a fixed split, so the same lists on every run.
        with threadpool_limits(1, "blas"), ThreadPoolExecutor(workers) as pool:
            list(pool.map(own_block, blocks))
            parts = list(pool.map(run, [tiles[w::workers] for w in range(workers)]))
    # Each pair was offered once, by one thread; a row a thread never saw has -inf there.
    best = np.hstack([first] + [p[0] for p in parts])
    bidx = np.hstack([first_idx] + [p[1] for p in parts])
    # Each row's m best, ties by index; rows apart, so in blocks on threads.
    order = by_spans(lambda s, e: np.lexsort((bidx[s:e], -best[s:e]), axis=-1)[:, :m], n)
    return np.take_along_axis(best, order, axis=1), np.take_along_axis(bidx, order, axis=1)


def _exact_k(X: np.ndarray, qrows: np.ndarray, S: np.ndarray, J: np.ndarray, k: int, window: np.ndarray):
    """Exact Euclidean k nearest of rows `qrows` among candidate columns J (q, c) with float32
    scores S (-inf: not a candidate; at least k finite per row): every candidate within
    `window` of the k-th best score is re-measured in float64, the k closest kept (ties:
    the lower index)."""
    sk = -np.partition(-S, k - 1, axis=1)[:, k - 1]
    r, c = np.nonzero(S >= (sk - window)[:, None])
    cols = J[r, c]
    exact = _pairwise_sq_exact(X, qrows[r], cols)
    order = np.lexsort((cols, exact, r))
    r, cols, exact = r[order], cols[order], exact[order]
    take = np.searchsorted(r, np.arange(len(qrows)))[:, None] + np.arange(k)[None, :]
    return np.sqrt(exact[take]), cols[take]


def exact_euclidean_from_lists(
    X: np.ndarray,
    scores: np.ndarray,
    idx: np.ndarray,
    k: int,
    window: np.ndarray,
    bias: np.ndarray | None = None,
    allowed: np.ndarray | None = None,
    rows: np.ndarray | None = None,
    block_size: int = DEFAULT_BLOCK,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Exact Euclidean k nearest other rows among `allowed` columns, for `rows` (default all),
    from top_self lists: (distances, indices), nearest first, ties by the lower index.

    window[i] bounds how far the float32 score of a column can sit below row i's k-th
    best and still be among its k nearest (twice the score error, plus the spread of
    |x|^2 / 2 when the lists were ranked without that bias). Rows whose list does not
    reach that far are searched again over every column (their number is returned third).
    """
    n = len(X)
    rows = np.arange(n) if rows is None else np.asarray(rows, np.int64)
    S, J = scores[rows], idx[rows]
    if allowed is not None:
        S = np.where(allowed[J], S, -np.inf).astype(np.float32)
    n_ok = np.isfinite(S).sum(axis=1)
    kth = np.where(n_ok >= k, -np.partition(-S, k - 1, axis=1)[:, k - 1], -np.inf)
    done = (n_ok >= k) & (kth - window[rows] > scores[rows, -1])
    dist = np.empty((len(rows), k))
    out = np.empty((len(rows), k), np.int64)
    if done.any():
        dist[done], out[done] = _exact_k(X, rows[done], S[done], J[done], k, window[rows[done]])
    X32 = np.asarray(X, dtype=np.float32)
    for s, e in _blocks(int((~done).sum()), min(block_size, 512)):  # rows x N scores at a time
        todo = np.flatnonzero(~done)[s:e]
        q = rows[todo]
        F = X32[q] @ X32.T
        if bias is not None:
            F -= bias[None, :]
        F[np.arange(len(q)), q] = -np.inf
        if allowed is not None:
            F[:, ~allowed] = -np.inf
        if (np.isfinite(F).sum(axis=1) < k).any():
            raise ValueError(f"fewer than k={k} allowed other rows")
        J_all = np.broadcast_to(np.arange(n), F.shape)
        dist[todo], out[todo] = _exact_k(X, q, F, J_all, k, window[q])
    return dist, out, int((~done).sum())


def score_error(norms: np.ndarray, d: int, with_bias: bool) -> np.ndarray:
    """Bound, per row i, on |float32 score - exact score| against any row: the float32 dot
    product of d terms (gamma_d |a||b|), the rounding of the inputs to float32 and, with
    the bias |b|^2 / 2, its own dot product and subtraction."""
    g = 1.01 * (d + 8) * U32
    nmax = float(norms.max())
    return g * norms * nmax + (g * nmax**2 if with_bias else 0.0)


def nearest_euclidean_self(X, k: int = 2, block_size: int = SELF_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """Exact Euclidean distances to the k nearest other rows of X: (distances, indices),
    nearest first, ties by the lower index.

    Candidates come from one float32 pass ranking rows j by X_i . X_j - |X_j|^2 / 2
    (top_self); every row whose exact distance can be among the k smallest lies within
    twice the float32 error bound of the k-th best score, and all of those - however many,
    e.g. a blob of near-duplicates - are re-measured from differences in float64. A fixed
    number of re-measured candidates is not enough: near-duplicates more numerous than
    it get the wrong r1 and r2.
    """
    X64 = as_matrix(X, dtype=np.float64)
    n, d = X64.shape
    if not 1 <= k < n:
        raise ValueError(f"k={k} must be in [1, {n - 1}] for {n} points")
    X32 = X64.astype(np.float32)
    bias = np.einsum("ij,ij->i", X32, X32) / 2
    norms = np.sqrt(np.einsum("ij,ij->i", X64, X64))
    window = 2 * score_error(norms, d, with_bias=True)
    scores, idx = top_self(X32, min(n - 1, k + 30), bias=bias, block_size=block_size)
    d, i, _ = exact_euclidean_from_lists(X64, scores, idx, k, window, bias=bias, block_size=block_size)
    return d, i


class SelfNeighbours:
    """The m most cosine-similar other rows of every row of L2-normalised float32 X, from one
    pass (top_self), shared by the metrics that need neighbours of the same points: kNN
    accuracy, 1-NN cluster learnability, TwoNN. Each query falls back to a direct search
    for the rows whose list is too short to answer it exactly."""

    def __init__(self, Xn: np.ndarray, m: int = 64, block_size: int = SELF_BLOCK):
        self.X = np.ascontiguousarray(Xn, dtype=np.float32)
        self.m = min(int(m), len(self.X) - 1)
        self.sims, self.idx = top_self(self.X, self.m, block_size=block_size)
        self.fallback_rows = 0  # rows answered by a direct search (diagnostics)

    def cosine(self, rows: np.ndarray, allowed: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k most similar `allowed` columns of each row (float32 cosine): (sims, indices),
        best first. As nearest_cosine(X[rows], X[allowed], k) with indices into X."""
        rows = np.asarray(rows, np.int64)
        S, J = self.sims[rows], self.idx[rows]
        ok = allowed[J]
        if k <= self.m:
            pos = np.argsort(~ok, axis=1, kind="stable")[:, :k]  # first k allowed, in rank order
            sims = np.take_along_axis(S, pos, axis=1)
            idx = np.take_along_axis(J, pos, axis=1)
            good = (ok.sum(axis=1) >= k) & (sims[:, -1] > S[:, -1])
        else:
            sims, idx = np.empty((len(rows), k), np.float32), np.empty((len(rows), k), np.int64)
            good = np.zeros(len(rows), bool)
        bad = np.flatnonzero(~good)
        if len(bad):
            self.fallback_rows += len(bad)
            base = np.flatnonzero(allowed)
            where = np.full(len(self.X), -1, np.int64)
            where[base] = np.arange(len(base))
            s2, j2 = nearest_cosine(
                self.X[rows[bad]], self.X[base], k=k, exclude=where[rows[bad]], normalized=True
            )
            sims[bad], idx[bad] = s2, base[j2]
        return sims, idx

    def euclidean(self, allowed: np.ndarray, k: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Exact Euclidean k nearest `allowed` other rows of every allowed row:
        (rows, distances, indices), as nearest_euclidean_self(X[allowed]) with indices into X."""
        rows = np.flatnonzero(allowed)
        norms = np.sqrt(np.einsum("ij,ij->i", self.X, self.X, dtype=np.float64))
        sq = norms[rows] ** 2
        # The lists rank by X_i . X_j alone: |X_j|^2 / 2, ~1/2 here, spreads by rounding.
        window = 2 * score_error(norms, self.X.shape[1], with_bias=False) + (sq.max() - sq.min()) / 2
        d, j, n_direct = exact_euclidean_from_lists(
            self.X, self.sims, self.idx, k, window, allowed=allowed, rows=rows
        )
        self.fallback_rows += n_direct
        return rows, d, j
