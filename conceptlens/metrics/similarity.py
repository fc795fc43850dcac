"""Human similarity judgments (roads2021): the rank likelihood, triplets, and how well a
representation agrees with people (triplet accuracy, RSA), with bootstrap intervals.

Trials are numeric here, as psiz stores them: `stimulus_set` (n, 1 + R) of stimulus
indices, column 0 the query, then the chosen references in choice order, then the
others; -1 pads trials with fewer references. `n_select[t]` references were chosen.
"""

from __future__ import annotations

import itertools

import numpy as np

from .. import rng as rngs

DISTANCES = ("l1", "l2", "cosine")
BETA = 10.0


def check_trials(stimulus_set, n_select) -> tuple[np.ndarray, np.ndarray]:
    """`stimulus_set` and `n_select` as int64 arrays; ValueError saying which is malformed."""
    stim = np.asarray(stimulus_set)
    sel = np.asarray(n_select)
    if stim.ndim != 2 or stim.shape[1] < 3:
        raise ValueError(f"stimulus_set must be (trials, 1 + references >= 2), got shape {stim.shape}")
    if sel.shape != (len(stim),):
        raise ValueError(f"n_select must have one value per trial ({len(stim)}), got shape {sel.shape}")
    n_ref = (stim[:, 1:] >= 0).sum(axis=1)
    if len(stim) and ((sel < 1).any() or (sel >= n_ref).any()):
        raise ValueError("n_select must be in [1, references - 1] for every trial")
    if len(stim) and (stim[:, 0] < 0).any():
        raise ValueError("stimulus_set: every trial needs a query (column 0 >= 0)")
    return stim.astype(np.int64, copy=False), sel.astype(np.int64, copy=False)


def rank_log_likelihood(Z: np.ndarray, stimulus_set, n_select, beta: float = BETA) -> np.ndarray:
    """log p(choices | trial, Z) of every trial (roads2021 Eq. 2, any N-rank-K):
    the sum over chosen positions k of log s(q, chosen_k) - log sum of s(q, r) over the
    references r not chosen before k, with s = exp(-beta ||z_q - z_r||) (Eq. 3)."""
    stim, sel = check_trials(stimulus_set, n_select)
    Z = np.asarray(Z, np.float64)
    refs = stim[:, 1:]
    valid = refs >= 0
    d = np.linalg.norm(Z[np.where(valid, refs, 0)] - Z[stim[:, :1]], axis=-1)
    log_s = np.where(valid, -beta * d, -np.inf)
    out = np.zeros(len(stim))
    for k in range(int(sel.max(initial=0))):
        rest = log_s[:, k:]
        top = rest.max(axis=1, keepdims=True)
        lse = top[:, 0] + np.log(np.exp(rest - top).sum(axis=1))
        out += np.where(k < sel, log_s[:, k] - lse, 0.0)
    return out


def outcome_probabilities(
    Z: np.ndarray, query: int, references, n_select: int, beta: float = BETA
) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Every ordered choice of `n_select` references and its probability (they sum to 1).

    Outcomes are listed in the order of itertools.permutations over `references`."""
    references = [int(r) for r in references]
    outcomes = list(itertools.permutations(references, n_select))
    stim = np.array([[query, *o, *[r for r in references if r not in o]] for o in outcomes])
    p = np.exp(rank_log_likelihood(Z, stim, np.full(len(stim), n_select), beta))
    return outcomes, p


def sample_choices(
    Z: np.ndarray, query, references, n_select: int, beta=BETA, rng: np.random.Generator | None = None
) -> np.ndarray:
    """Simulated answers drawn from the rank likelihood: `stimulus_set` rows (query, chosen
    references in choice order, the others in display order).

    Sequential choice in proportion to similarity among the references left is a
    Plackett-Luce draw, which is exactly the top of log s + Gumbel noise, drawn from `rng`
    (required: None is a ValueError, answers are never unseeded). `beta` may
    differ per trial (a less attentive agent has a smaller one)."""
    rng = rngs.generator(rng, "rng")  # required: no unseeded answers
    query = np.asarray(query, np.int64)
    refs = np.asarray(references, np.int64)
    Z = np.asarray(Z, np.float64)
    d = np.linalg.norm(Z[refs] - Z[query][:, None], axis=-1)
    beta = np.broadcast_to(np.asarray(beta, np.float64), (len(query),))[:, None]
    key = -beta * d + rng.gumbel(size=d.shape)
    top = np.argsort(-key, axis=1, kind="stable")[:, :n_select]
    rest = np.ones_like(refs, bool)
    np.put_along_axis(rest, top, False, axis=1)
    chosen = np.take_along_axis(refs, top, axis=1)
    others = refs[rest].reshape(len(refs), -1)
    return np.concatenate([query[:, None], chosen, others], axis=1)


def most_probable_correct(Z: np.ndarray, stimulus_set, n_select) -> np.ndarray:
    """Whether the chosen references, in order, are the most probable outcome.

    Under the rank likelihood that outcome is the n_select nearest references, nearest
    first (swapping a nearer reference in never lowers the probability)."""
    stim, sel = check_trials(stimulus_set, n_select)
    d = query_distances(Z, stim, "l2")
    order = np.argsort(np.where(np.isnan(d), np.inf, d), axis=1, kind="stable")
    # Chosen references sit in columns 0..n_select-1 of the references, in choice order.
    pos = np.arange(d.shape[1])
    return ((order == pos) | (pos >= sel[:, None])).all(axis=1)


def triplets(stimulus_set, n_select) -> np.ndarray:
    """The triplets a trial implies (roads2021 section 6.1): rows (trial, query, a, b) meaning
    "a is more similar to the query than b". The k-th choice beats every reference not
    chosen before it, so an 8-rank-2 trial gives 7 + 6 = 13."""
    stim, sel = check_trials(stimulus_set, n_select)
    refs = stim[:, 1:]
    rows = []
    for k in range(int(sel.max(initial=0))):
        for j in range(k + 1, refs.shape[1]):
            t = np.flatnonzero((k < sel) & (refs[:, j] >= 0))
            rows.append(np.stack([t, stim[t, 0], refs[t, k], refs[t, j]], axis=1))
    if not rows:
        return np.zeros((0, 4), np.int64)
    out = np.concatenate(rows)
    return out[np.lexsort((out[:, 3], out[:, 0]))]


def _rowwise(A: np.ndarray, B: np.ndarray, distance: str) -> np.ndarray:
    if distance == "l1":
        return np.abs(A - B).sum(axis=-1)
    if distance == "l2":
        return np.sqrt(((A - B) ** 2).sum(axis=-1))
    if distance == "cosine":
        na = np.linalg.norm(A, axis=-1)
        nb = np.linalg.norm(B, axis=-1)
        return 1.0 - (A * B).sum(axis=-1) / np.maximum(na * nb, 1e-12)
    raise ValueError(f"distance must be one of {', '.join(DISTANCES)}, got {distance!r}")


def query_distances(X: np.ndarray, stimulus_set, distance: str = "l2", chunk: int = 2048) -> np.ndarray:
    """(trials, references): distance of each reference to the trial's query; NaN = padding.

    Computed in chunks of trials: features can be wide and trials many."""
    stim = np.asarray(stimulus_set, np.int64)
    X = np.asarray(X)
    out = np.full((len(stim), stim.shape[1] - 1), np.nan)
    for s in range(0, len(stim), chunk):
        part = stim[s : s + chunk]
        refs = part[:, 1:]
        valid = refs >= 0
        q = X[part[:, 0]].astype(np.float64)[:, None, :]
        r = X[np.where(valid, refs, 0)].astype(np.float64)
        out[s : s + chunk] = np.where(valid, _rowwise(q, r, distance), np.nan)
    return out


def triplet_scores(dist: np.ndarray, n_select) -> tuple[np.ndarray, np.ndarray]:
    """(correct, total) triplets per trial from `query_distances`: a triplet "a beats b" is
    correct when d(q, a) < d(q, b) (roads2021 Eq. 10); a tie counts 1/2, as a coin would."""
    d = np.asarray(dist, np.float64)
    sel = np.asarray(n_select, np.int64)
    R = d.shape[1]
    valid = ~np.isnan(d)
    correct = np.zeros(len(d))
    total = np.zeros(len(d))
    for k in range(int(sel.max(initial=0))):
        on = (k < sel)[:, None] & valid[:, k + 1 :] if k + 1 < R else np.zeros((len(d), 0), bool)
        a, b = d[:, k : k + 1], d[:, k + 1 :]
        score = np.where(a < b, 1.0, np.where(a == b, 0.5, 0.0))
        correct += np.where(on, score, 0.0).sum(axis=1)
        total += on.sum(axis=1)
    return correct, total


def triplet_accuracy(X: np.ndarray, stimulus_set, n_select, distance: str = "l2", weights=None) -> float:
    """Share of the trials' triplets that representation X ranks as people did; each
    trial's triplets count with the trial's weight (all 1: the paper's plain mean)."""
    stim, sel = check_trials(stimulus_set, n_select)
    c, n = triplet_scores(query_distances(X, stim, distance), sel)
    w = np.ones(len(stim)) if weights is None else np.asarray(weights, np.float64)
    den = float((w * n).sum())
    return float((w * c).sum() / den) if den > 0 else float("nan")


# ---- representational similarity (RSA) -----------------------------------------------------
def similarity_matrix(X: np.ndarray, distance: str) -> np.ndarray:
    """Pairwise similarity of rows: cosine similarity, or the negated L1 / L2 distance
    (only ranks matter to a Spearman correlation)."""
    X = np.asarray(X, np.float64)
    if distance == "cosine":
        Xn = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
        return Xn @ Xn.T
    if distance == "l2":
        sq = (X**2).sum(axis=1)
        return -np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0.0))
    if distance == "l1":
        out = np.empty((len(X), len(X)))
        for s in range(0, len(X), 256):  # blocks: (block, n, dim) stays small
            out[s : s + 256] = -np.abs(X[s : s + 256, None, :] - X[None, :, :]).sum(axis=-1)
        return out
    raise ValueError(f"distance must be one of {', '.join(DISTANCES)}, got {distance!r}")


def upper(M: np.ndarray) -> np.ndarray:
    """The upper triangle (`np.triu_indices(n, 1)`) of a square matrix, as a vector."""
    M = np.asarray(M)
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"expected a square matrix, got shape {M.shape}")
    return M[np.triu_indices(len(M), 1)]


def _ranks(v: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(v, method="average")


def _weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Pearson r of x and y under weights w (rows of w: one weighting each)."""
    sw = w.sum(axis=-1, keepdims=True)
    mx = (w * x).sum(axis=-1, keepdims=True) / sw
    my = (w * y).sum(axis=-1, keepdims=True) / sw
    dx, dy = x - mx, y - my
    cov = (w * dx * dy).sum(axis=-1)
    var = np.sqrt((w * dx * dx).sum(axis=-1) * (w * dy * dy).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(var > 0, cov / var, np.nan)


def rsa(sim_a: np.ndarray, sim_b: np.ndarray) -> float:
    """Spearman correlation of the upper triangles of two similarity matrices."""
    a, b = upper(sim_a), upper(sim_b)
    if a.shape != b.shape:
        raise ValueError(f"similarity matrices differ in size: {sim_a.shape} vs {sim_b.shape}")
    r = _weighted_pearson(_ranks(a), _ranks(b), np.ones_like(a, np.float64))
    return float(r)


class RSABootstrap:
    """RSA against one reference similarity matrix (the people's), with percentile bootstrap
    intervals over images, overall and per group of images (e.g. a label).

    `score(sim)` returns {None: overall, key: group} -> (value, lo, hi, n_pairs). A group's
    pairs are those with at least one of its images; its value is the Spearman correlation
    over those pairs (ranked among themselves). A resample draws the n images with
    replacement: a pair (i, j) then counts w_i * w_j times (w: how often each was drawn),
    and the resampled value is the weighted Pearson correlation of the pairs' ranks.
    Weighted sums over pairs are matrix products with the weights, so resampling costs a
    few matrix multiplications; the reference's share is computed once, and every
    representation scored is resampled with the same draws.
    """

    def __init__(
        self,
        reference: np.ndarray,
        groups: dict | None = None,
        n_boot: int = 1000,
        seed: int = 0,
        level: float = 0.95,
    ):
        ref = np.asarray(reference, np.float64)
        n = len(ref)
        if ref.shape != (n, n):
            raise ValueError(f"expected a square matrix, got shape {ref.shape}")
        if n_boot < 0:
            raise ValueError(f"n_boot must be >= 0, got {n_boot}")
        self.n, self.level = n, level
        rng = rngs.generator(seed, "seed")
        # Row 0 weighs every image once: the point estimate.
        self.W = np.vstack([np.ones((1, n)), rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot)])
        self.groups = []
        for key, items in [(None, np.arange(n)), *(groups or {}).items()]:
            g = _Group(np.unique(np.asarray(items, np.int64)), n, self.W)
            if g.n_pairs >= 2:
                rb = _centered_ranks(ref[g.r, g.c])
                g.S = {k: g.sums(v) for k, v in (("one", np.ones_like(rb)), ("b", rb), ("bb", rb * rb))}
                g.rb = rb
            self.groups.append((key, g))

    def score(self, sim: np.ndarray) -> dict:
        sim = np.asarray(sim, np.float64)
        if sim.shape != (self.n, self.n):
            raise ValueError(f"expected a {self.n} x {self.n} similarity matrix, got {sim.shape}")
        out = {}
        for key, g in self.groups:
            if g.n_pairs < 2:
                out[key] = (float("nan"), float("nan"), float("nan"), g.n_pairs)
                continue
            ra = _centered_ranks(sim[g.r, g.c])
            S = {**g.S, "a": g.sums(ra), "ab": g.sums(ra * g.rb), "aa": g.sums(ra * ra)}
            sw = S["one"]
            with np.errstate(invalid="ignore", divide="ignore"):
                mx, my = S["a"] / sw, S["b"] / sw
                cov = S["ab"] / sw - mx * my
                var = (S["aa"] / sw - mx * mx) * (S["bb"] / sw - my * my)
                r = np.where(var > 0, cov / np.sqrt(np.maximum(var, 0)), np.nan)
            lo, hi = percentile_interval(r[1:], self.level)
            out[key] = (float(r[0]), lo, hi, g.n_pairs)
        return out


class _Group:
    """The pairs of one group of images and how to sum values over them under weights."""

    def __init__(self, items: np.ndarray, n: int, W: np.ndarray):
        inside = np.zeros(n, bool)
        inside[items] = True
        # Every pair once: (i in items, j outside), and (i < j) with both inside.
        rows, cols = np.meshgrid(items, np.arange(n), indexing="ij")
        keep = ~inside[cols] | (cols > rows)
        self.r, self.c = rows[keep], cols[keep]
        self.n_pairs = int(len(self.r))
        self.pos = np.full(n, -1)
        self.pos[items] = np.arange(len(items))
        self.both = inside[self.c]
        self.shape = (len(items), n)
        self.items = items
        self.U = W[:, items]
        self.W = W

    def sums(self, v: np.ndarray) -> np.ndarray:
        """sum over pairs of w_i w_j v_ij, for every row of weights: u^T M (v + u / 2), with
        M over (items, all images); a pair inside the group fills both its cells."""
        M = np.zeros(self.shape)
        M[self.pos[self.r], self.c] = v
        M[self.pos[self.c[self.both]], self.r[self.both]] = v[self.both]
        UM = self.U @ M
        inner = UM[:, self.items]
        return np.einsum("bj,bj->b", UM, self.W) - 0.5 * np.einsum("bj,bj->b", inner, self.U)


def _centered_ranks(v: np.ndarray) -> np.ndarray:
    # Centred: the weighted sums of squares then cancel less in the variance.
    r = _ranks(v)
    return r - r.mean()


def rsa_bootstrap(
    sim_a: np.ndarray,
    sim_b: np.ndarray,
    groups: dict | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """`RSABootstrap(sim_b, groups, n_boot, seed, level).score(sim_a)`."""
    return RSABootstrap(sim_b, groups, n_boot, seed, level).score(sim_a)


def rsa_vectors(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman correlation of two vectors (NaN when one is constant)."""
    return float(_weighted_pearson(_ranks(a), _ranks(b), np.ones(len(a))))


# ---- bootstrap over trials -----------------------------------------------------------------
def bootstrap_ratio(num: np.ndarray, den: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Resampled values of sum(num) / sum(den), resampling rows (units) with replacement.

    `num` may have several columns (e.g. one per distance), resampled together: returns
    (n_boot, columns)."""
    num = np.asarray(num, np.float64)
    num = num[:, None] if num.ndim == 1 else num
    den = np.asarray(den, np.float64)
    rng = rngs.generator(seed, "seed")
    n = len(den)
    out = np.empty((n_boot, num.shape[1]))
    chunk = max(1, 2_000_000 // max(1, n))  # bounds the (chunk, n) resample indices
    for s in range(0, n_boot, chunk):
        m = min(chunk, n_boot - s)
        idx = rng.integers(0, n, size=(m, n))
        d = den[idx].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[s : s + m] = num[idx].sum(axis=1) / d[:, None]
    return out


def percentile_interval(samples: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The percentile bootstrap interval (NaN resamples dropped; (nan, nan) if none are left)."""
    s = np.asarray(samples, np.float64)
    s = s[~np.isnan(s)]
    if len(s) == 0:
        return float("nan"), float("nan")
    a = (1 - level) / 2
    lo, hi = np.quantile(s, [a, 1 - a])
    return float(lo), float(hi)
