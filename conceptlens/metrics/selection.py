"""Concept scores of any set of images (issue 26), each against a null.

A *selection* is a set of rows of one checkpoint's features. Its scores:

- learnability: how well a held-out kNN separates the set from the rest (laina2020's
  learnability, the held-out kNN variant of lu2022): every image of the *evaluation sample*
  is classified "in the set" or "not" by the weighted 20-NN vote (Caron et al. 2021,
  T = 0.07, as learnability.weighted_knn_predict) of its cosine-nearest OTHER images among
  all of them (leave-one-out, so no image votes for itself); the score is the AUC of the
  vote share of "in the set" between the sample's members and its non-members (0.5 =
  chance whatever the set's size; a majority vote would call everything "rest" for a small
  set). The evaluation sample is the first L rows of a seeded random order of all images,
  L = eval_members x n / size (so that about `eval_members` members are in it), at least
  `eval_min`, at most `eval_max`, at most n. It does not depend on which images the set
  holds, only on its size: its neighbours are searched once per population and kept
  (Population.neighbours), and the selection and every null set are scored on the same
  sample by the same code. Interval: bootstrap over the evaluated images;
- purity against labels and against every factor (1 - H / log K, K the values in the
  whole population: metrics.scores.purity) and their histograms; interval: bootstrap over
  the set's images;
- 2AFC coherence with a proxy annotator (metrics.coherence): M references and a query from
  the set, the negative a random non-member ("random") or one of the HARD_POOL non-members
  of the evaluation sample nearest to the mean feature of the set's members in it ("hard");
  Clopper-Pearson interval;
- TwoNN intrinsic dimension of the set (at most `id_points` of its members, seeded) and
  its size.

The null of every score: the same score for `n_null` uniformly random sets of the same size
and for sets of the same size drawn within the same labels (the selection's label
histogram): the selection's percentile among them. Every set, the selection and the null
draws, goes through one function (Scorer.score_sets) with the same evaluation sample, so a
random selection is exchangeable with the draws of the random null and its percentile is
uniform.
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from .. import rng as rngs
from . import score_names
from .coherence import Trials
from .intrinsic import first_occurrences, twonn_fit
from .neighbors import as_matrix, nearest_cosine, unit_rows
from .scores import clopper_pearson

K_NN = 20
TEMPERATURE = 0.07
SCORES = ("learnability", "coherence_random", "coherence_hard", "intrinsic_dim", "describability_top1")
NULLS = ("random", "same_labels")
NEAR = 1e-4  # squared distance below which TwoNN re-measures from differences
HARD_POOL = 50  # hard negatives are drawn from this many nearest non-members
# Sets scored at once: their membership matrix (sets x n booleans) and vote arrays stay small.
BATCH_CELLS = 20_000_000
# Rows of the evaluation order searched together (Neighbours).
BLOCK = 1024
# The evaluation sample's size (Scorer's defaults): eval_members x n / size, within these.
EVAL_MEMBERS, EVAL_MIN, EVAL_MAX = 300, 1000, 10_000
# Threads the parts of one selection's scores run on (the null's learnability, coherence and
# TwoNN, the intervals): numpy releases the GIL in its loops, so two cores score at once.
THREADS = max(1, min(4, os.cpu_count() or 1))


class Neighbours:
    """The part of the scores that does not depend on the set: a seeded random order of the
    rows and the K_NN cosine-nearest other rows of the first L of them (the evaluation
    sample), extended on demand and kept (one exact search per row, faiss's flat inner
    product when installed, else neighbors.nearest_cosine).

    The order is searched in fixed blocks of BLOCK rows (rows [j BLOCK, (j + 1) BLOCK) of
    it, each block alone): a BLAS search's last bits depend on the rows searched with a
    row, so the neighbours of a row, and every score, would otherwise depend on which
    prefixes were asked for before (and, with `prepare` searching in the background, on
    timing)."""

    def __init__(self, X: np.ndarray, seed: int = 0):
        self.X = X
        self.X32 = np.ascontiguousarray(X, np.float32)  # what faiss searches (no copy if float32)
        n = len(X)
        self.order = rngs.stream(seed, "selection.evaluation_order").permutation(n)
        self.k = min(K_NN, n - 1)
        self._sims: list = []  # one array per block searched, in order
        self._nn: list = []
        self._have = 0
        self._lock = threading.Lock()  # the dashboard's sessions share a kept population

    def searched(self) -> int:
        """Rows of the order whose neighbours are kept."""
        return self._have

    def _extend(self, L: int, blocks: int | None = None) -> None:
        """Search the blocks up to row L (at most `blocks` of them); under the lock."""
        n = len(self.X)
        while self._have < min(L, n) and (blocks is None or blocks > 0):
            a = self._have
            b = min(n, a + BLOCK)
            s, i = _search(self.X, self.order[a:b], self.k, self.X32)
            self._sims.append(s)
            self._nn.append(i)
            self._have = b
            if blocks is not None:
                blocks -= 1
        if len(self._sims) > 1:
            self._sims, self._nn = [np.concatenate(self._sims)], [np.concatenate(self._nn)]

    def prefix(self, L: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, similarities, neighbours) of the first L rows of the order."""
        with self._lock:
            self._extend(L)
            if not self._sims:
                return self.order[:0], np.zeros((0, self.k), np.float32), np.zeros((0, self.k), np.int64)
            return self.order[:L], self._sims[0][:L], self._nn[0][:L]

    def prepare(self, L: int) -> None:
        """Search up to row L one block at a time, releasing the lock between blocks (a
        selection scored meanwhile waits for one block at most, then searches what it
        lacks itself): what Population.prepare runs in the background."""
        while self._have < min(L, len(self.X)):
            with self._lock:
                self._extend(L, blocks=1)


def _search(X: np.ndarray, rows: np.ndarray, k: int, X32: np.ndarray | None = None):
    """The k most cosine-similar other rows of X[rows] (X unit rows), best first:
    (similarities, rows). X32: X as contiguous float32, if the caller keeps it."""
    try:
        import faiss
    except ImportError:  # pragma: no cover - faiss-cpu is a dependency
        return nearest_cosine(X[rows], X, k=k, exclude=rows, normalized=True)
    # faiss.knn: IndexFlatIP's exact search (the same bits) without copying X into an index.
    # k + 1: the row itself is (nearly always) among them; dropped by index, not by rank, as
    # an exact duplicate may come first. Where it is missing (more than k duplicates tie
    # with it) the last is dropped.
    D, nn = faiss.knn(
        X32[rows] if X32 is not None else np.ascontiguousarray(X[rows], np.float32),
        X32 if X32 is not None else np.ascontiguousarray(X, np.float32),
        k + 1,
        metric=faiss.METRIC_INNER_PRODUCT,
    )
    own = nn == rows[:, None]
    own[~own.any(axis=1), -1] = True
    own[np.cumsum(own, axis=1) > 1] = False  # only the first match
    keep = ~own
    return D[keep].reshape(len(rows), k), nn[keep].reshape(len(rows), k).astype(np.int64)


@dataclass
class Captions:
    """Per-image captions of a population and the class-level captions a set's caption
    competes with (the current clusters' captions, cluster_captions).

    emb: (n, e) sentence embeddings of the images' captions (rows without a caption: any
    value, masked by `has`); text: (n,) object array; cands: (c, e) embeddings of the
    competing captions, cand_text their texts; source: the captioner; unavailable: the
    reason there is no describability (then everything else may be empty)."""

    emb: np.ndarray | None = None
    has: np.ndarray | None = None
    text: np.ndarray | None = None
    cands: np.ndarray | None = None
    cand_text: list = field(default_factory=list)
    source: str | None = None
    unavailable: str | None = None

    def __post_init__(self):
        if self.unavailable is None:
            self.emb = unit_rows(as_matrix(self.emb, "caption embeddings")).astype(np.float64)
            self.has = np.asarray(self.has, bool)
            self.cands = unit_rows(as_matrix(self.cands, "cluster caption embeddings")).astype(np.float64)
            if self.cands.shape[1] != self.emb.shape[1]:
                raise ValueError("cluster captions and image captions need the same embedding size")


def class_caption(cap: Captions, member: np.ndarray) -> tuple[int, float] | None:
    """laina2020 Eq. 4 for one set against the rest: (row of the set's caption, its score),
    among the captions of the set's images; None when none of them has a caption. d is the
    cosine distance; the score is the mean distance to the set's captions (the sum divided
    by their number, as the paper and metrics.captions.eq4_scores) minus the mean distance
    to the other images' captions."""
    inside = cap.has & member
    if not inside.any():
        return None
    E = cap.emb
    s_in = E[inside].sum(axis=0)
    out = cap.has & ~member
    n_in, n_out = int(inside.sum()), int(out.sum())
    rows = np.flatnonzero(inside)
    own = E[rows] @ s_in
    intra = ((n_in - 1) - (own - 1.0)) / n_in
    if n_out:
        inter = (n_out - E[rows] @ E[out].sum(axis=0)) / n_out
        intra = intra - inter
    j = int(np.argmin(intra))
    return int(rows[j]), float(intra[j])


def describability(cap: Captions, member: np.ndarray) -> dict:
    """The set's class-level caption (class_caption) and its Top-1 retrieval among the
    competing captions: the share of the set's captioned images whose caption is nearer
    (cosine, sentence embeddings) to the set's caption than to every competing one (ties
    split evenly among the tied). {"row", "eq4", "top1", "correct", "n"} or None."""
    pick = class_caption(cap, member)
    if pick is None:
        return None
    row, eq4 = pick
    rows = np.flatnonzero(cap.has & member)
    own = cap.emb[rows] @ cap.emb[row]
    other = cap.emb[rows] @ cap.cands.T if len(cap.cands) else np.zeros((len(rows), 0))
    best_other = other.max(axis=1) if other.shape[1] else np.full(len(rows), -np.inf)
    tied = 1 + np.isclose(other, own[:, None], rtol=0, atol=1e-9).sum(axis=1)
    credit = np.where(np.isclose(own, best_other, rtol=0, atol=1e-9), 1 / tied, (own > best_other) * 1.0)
    return {
        "row": row,
        "eq4": eq4,
        "top1": float(credit.mean()),
        "correct": float(credit.sum()),
        "n": len(rows),
    }


@dataclass
class Population:
    """Everything of one dataset on one checkpoint a selection is scored against.

    X: features (n, d); labels: (n,) int codes, -1 where unknown; factors: name -> (n,) int
    codes (-1 unknown); annotator: (n, a) proxy annotator features or None."""

    X: np.ndarray
    labels: np.ndarray
    factors: dict = field(default_factory=dict)
    annotator: np.ndarray | None = None
    label_names: dict = field(default_factory=dict)  # code -> shown name
    factor_names: dict = field(default_factory=dict)  # factor -> {code: value}
    captions: Captions | None = None

    def __post_init__(self):
        self.X = unit_rows(as_matrix(self.X, "features"))
        n = len(self.X)
        self.labels = np.asarray(self.labels, np.int64)
        if self.labels.shape != (n,):
            raise ValueError(f"labels must have one entry per feature row ({n}), got {self.labels.shape}")
        for name, v in self.factors.items():
            if np.shape(v) != (n,):
                raise ValueError(f"factor {name!r} must have one entry per feature row ({n})")
        self.factors = {k: np.asarray(v, np.int64) for k, v in self.factors.items()}
        if self.annotator is not None:
            if len(self.annotator) != n:
                raise ValueError(f"annotator features must have one row per feature row ({n})")
            self.annotator = unit_rows(as_matrix(self.annotator, "annotator features")).astype(np.float64)
        self._neighbours: dict = {}
        self._lock = threading.Lock()

    def neighbours(self, seed: int) -> Neighbours:
        """The evaluation order and its neighbours for this seed, kept for the next set."""
        with self._lock:
            if seed not in self._neighbours:
                self._neighbours[seed] = Neighbours(self.X, seed)
            return self._neighbours[seed]

    def prepare(self, seed: int = 0, upto: int = EVAL_MAX, background: bool = True) -> threading.Thread:
        """Do what a first selection on this population would otherwise wait for: the
        neighbour search of the evaluation order up to row `upto` (default: the largest
        evaluation sample, that of the smallest selections; 1.0 s of two cores per 3,000
        rows at 50,000 x 512) and the import of scipy.special (clopper_pearson's), in a
        daemon thread (joined before returning unless `background`). The scores are the
        same whether or not it ran, or ran to its end (Neighbours searches fixed blocks)."""
        nb = self.neighbours(seed)

        def work():
            import scipy.special  # noqa: F401 - clopper_pearson's import, 0.2 s

            nb.prepare(upto)

        t = threading.Thread(target=work, name="conceptlens-selection-prepare", daemon=True)
        t.start()
        if not background:
            t.join()
        return t

    def codes(self) -> dict:
        """Name -> (codes, K): the labels ("label") and every factor, their codes renumbered
        0..K-1 in order (K the values present; -1 unknown stays -1): purities count by code,
        so codes {0, 1, 3} would otherwise put the third value among the unknown."""
        out = {"label": self.labels}
        out.update(self.factors)
        res = {}
        for k, v in out.items():
            known = np.unique(v[v >= 0])
            res[k] = (np.where(v >= 0, np.searchsorted(known, v), -1).astype(np.int64), int(len(known)))
        return res


def percentile(value: float, null: np.ndarray) -> float:
    """Percentage of the null below `value` (ties count half); nan without a null."""
    null = np.asarray(null, np.float64)
    null = null[np.isfinite(null)]
    if len(null) == 0 or not np.isfinite(value):
        return math.nan
    return float(100 * (np.sum(null < value) + 0.5 * np.sum(null == value)) / len(null))


def purities(codes: np.ndarray, K: int) -> np.ndarray:
    """1 - H / log K of every row of `codes` (sets x members, -1 unknown and not counted),
    as metrics.scores.purity; nan for K < 2 or a row without a known code."""
    b = len(codes)
    if K < 2:
        return np.full(b, math.nan)
    c = np.where(codes >= 0, codes, K)
    counts = np.bincount((c + (K + 1) * np.arange(b)[:, None]).ravel(), minlength=b * (K + 1))
    return purity_of_counts(counts.reshape(b, K + 1)[:, :K], K)


def purity_of_counts(counts: np.ndarray, K: int) -> np.ndarray:
    """1 - H / log K of every row of a sets x K histogram (nan for an empty row)."""
    counts = counts.astype(np.float64)
    tot = counts.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = counts / tot
        h = -np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0).sum(axis=1)
    out = np.maximum(0.0, 1.0 - h / math.log(K))
    out[tot[:, 0] == 0] = math.nan
    return out


def twonn_small(X: np.ndarray, discard_fraction: float = 0.1) -> float:
    """intrinsic.twonn(X)[0] for a few hundred rows (Euclidean, duplicates dropped, lu2022's
    F_i = i / N) from one Gram matrix, the 4 nearest candidates re-measured exactly from
    differences (Gram distances lose the nearest neighbours of near-duplicates); nan with
    fewer than 3 distinct rows."""
    X = np.asarray(X, np.float64)
    d = _two_nearest(X)
    if d is None or (d[:, 0] == 0).any():  # duplicates: dropped first, as twonn does
        X = X[first_occurrences(X)]
        d = _two_nearest(X)
    if d is None:
        return math.nan
    try:
        return twonn_fit(d[:, 1] / d[:, 0], discard_fraction, 1)
    except ValueError:
        return math.nan


def _two_nearest(X: np.ndarray) -> np.ndarray | None:
    """Distances of every row to its 2 nearest other rows (None under 3 rows): squared
    distances from the float64 Gram matrix (absolute error ~1e-15), re-measured from
    differences for the rows whose nearest is closer than NEAR (there the Gram's error
    would matter) among their 4 nearest candidates."""
    if len(X) < 3:
        return None
    sq = (X * X).sum(axis=1)
    D = sq[:, None] + sq[None, :] - 2 * X @ X.T
    np.fill_diagonal(D, np.inf)
    c = min(4, len(X) - 1)
    cand = np.argpartition(D, c - 1, axis=1)[:, :c]
    d2 = np.sort(np.take_along_axis(D, cand, axis=1), axis=1)
    near = np.flatnonzero(d2[:, 0] < NEAR)
    if len(near):
        diff = X[near, None, :] - X[cand[near]]
        d2[near] = np.sort(np.einsum("ijk,ijk->ij", diff, diff), axis=1)
    return np.sqrt(np.maximum(d2[:, :2], 0))


def answers(trials: Trials, A: np.ndarray, coins: np.ndarray) -> np.ndarray:
    """coherence.annotate's proxy answers on unit annotator rows A (float64), the exact ties
    decided by the given coins (one per trial, drawn with the trial's set, so that a set's
    answers do not depend on the sets scored with it)."""
    mean_ref = A[trials.refs].mean(axis=1)
    sq = np.einsum("ij,ij->i", A[trials.query], mean_ref)
    sn = np.einsum("ij,ij->i", A[trials.negative], mean_ref)
    tie = np.isclose(sq, sn, rtol=0, atol=1e-9)
    return np.where(tie, coins, sq > sn)


def average_ranks(a: np.ndarray) -> np.ndarray:
    """scipy.stats.rankdata(a, axis=1) (1-based ranks, ties given their average) for finite
    rows, in numpy: the scores need no scipy.stats, whose import was 1 s of CPU of a cold
    selection's 5.6 s (bench/selection.py). Each rank is a whole or half number, so the
    ranks are the same floats."""
    a = np.asarray(a)
    if a.ndim != 2:
        raise ValueError(f"average_ranks takes rows (2-d), got shape {a.shape}")
    n = a.shape[1]
    # Any sort: tied values share their average rank whichever order they come in (numpy's
    # default sort is twice as fast as its stable one here).
    order = np.argsort(a, axis=1)
    s = np.take_along_axis(a, order, axis=1)
    pos = np.broadcast_to(np.arange(n), a.shape)
    first = np.ones(a.shape, bool)  # the first of its run of equal values
    first[:, 1:] = s[:, 1:] != s[:, :-1]
    last = np.ones(a.shape, bool)  # the last of its run
    last[:, :-1] = first[:, 1:]
    start = np.maximum.accumulate(np.where(first, pos, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, pos, n)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty(a.shape, np.float64)
    np.put_along_axis(ranks, order, (start + end) / 2 + 1, axis=1)
    return ranks


def auc_rows(shares: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """ROC AUC of every row: P(a positive's share > a negative's), ties half; nan where a
    side is empty (the Mann-Whitney U over average ranks)."""
    pos = np.broadcast_to(pos, shares.shape)
    if np.isfinite(shares).all():
        ranks = average_ranks(shares)
    else:  # nan ranks propagate as scipy's do
        from scipy.stats import rankdata

        ranks = rankdata(shares, axis=1)
    npos = pos.sum(axis=1).astype(np.float64)
    nneg = pos.shape[1] - npos
    u = (ranks * pos).sum(axis=1) - npos * (npos + 1) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((npos > 0) & (nneg > 0), u / (npos * nneg), math.nan)


class Scorer:
    """Scores of one selection of a Population and of its null sets (see the module doc)."""

    def __init__(
        self,
        pop: Population,
        selection,
        eval_members: int = EVAL_MEMBERS,
        eval_min: int = EVAL_MIN,
        eval_max: int = EVAL_MAX,
        n_null: int = 200,
        n_null_id: int = 15,
        id_points: int = 400,
        trials: int = 20,
        refs: int = 10,
        nulls: tuple = NULLS,
        seed: int = 0,
        eval_seed: int | None = None,
    ):
        self.pop, self.seed = pop, seed
        n = len(pop.X)
        sel = np.unique(np.asarray(selection, np.int64))
        if len(sel) == 0:
            raise ValueError("the selection is empty")
        if sel[0] < 0 or sel[-1] >= n:
            raise ValueError(f"selection rows must be in [0, {n})")
        if len(sel) > n - 2:
            raise ValueError(f"the selection ({len(sel)} images) leaves fewer than 2 of {n} outside it")
        unknown = set(nulls) - set(NULLS)
        if unknown:
            raise ValueError(f"nulls must be among {NULLS}, got {sorted(unknown)}")
        self.sel, self.nulls = sel, tuple(w for w in NULLS if w in nulls)
        self.n_null, self.n_null_id, self.id_points = n_null, n_null_id, id_points
        self.trials, self.refs = trials, refs
        L = int(math.ceil(eval_members * n / len(sel)))
        L = min(n, max(L, eval_min), max(eval_max, eval_min))
        # The evaluation sample's order: `eval_seed` (default: seed); the null draws, trials
        # and subsamples: `seed`.
        order = pop.neighbours(seed if eval_seed is None else eval_seed)
        self.eval, self.sims, self.nn = order.prefix(L)
        self.w = np.exp((self.sims.astype(np.float64) - 1) / TEMPERATURE)  # weights of the votes
        self.wsum = self.w.sum(axis=1)
        self.codes = pop.codes()
        self.XE = pop.X[self.eval]

    # ---- every set through one function ------------------------------------------------------
    def shares(self, member: np.ndarray) -> np.ndarray:
        """Vote shares of "in the set" of the evaluation sample (sets x L) for membership
        rows (sets x n booleans)."""
        return self._shares_t(np.ascontiguousarray(np.asarray(member, bool).T))

    def _shares_t(self, member_t: np.ndarray) -> np.ndarray:
        """shares from the membership transposed (n x sets): the gather by neighbour then
        copies rows of it (a tenth of the time of gathering single booleans), and the einsum
        runs on the same values in the same order (the same bits)."""
        v = member_t[self.nn]  # L x k x sets
        return np.einsum("blk,lk->bl", v.transpose(2, 0, 1), self.w) / self.wsum

    def learnability(self, member: np.ndarray) -> np.ndarray:
        member = np.asarray(member, bool)
        return auc_rows(self.shares(member), member[:, self.eval])

    def _learnability_t(self, member_t: np.ndarray) -> np.ndarray:
        return auc_rows(self._shares_t(member_t), member_t[self.eval].T)

    def score_sets(
        self, sets: np.ndarray, tags: list, with_id: np.ndarray, pool=None, counts: dict | None = None
    ) -> dict:
        """Scores of equally large sets (rows of `sets`, member rows): name -> (sets,) array.
        tags[i] seeds set i's trials and subsamples; with_id[i]: fit its TwoNN. The parts
        run on `pool` (a ThreadPoolExecutor; default: one of THREADS threads): each writes
        its own entries and draws from its own seeds, so the scores do not depend on it.
        `counts` (a dict): filled with kind -> (correct, trials) arrays of the 2AFC answers,
        and "describability_top1" -> (correct, captioned images, the row of the class-level
        caption, -1 for none) of the sets with_id, so that an interval needs no second draw
        of the trials or retrieval."""
        if pool is None:
            with ThreadPoolExecutor(THREADS) as pool:
                return self.score_sets(sets, tags, with_id, pool, counts)
        b, n = len(sets), len(self.pop.X)
        out: dict = {k: np.full(b, math.nan) for k in SCORES}
        if counts is not None:
            for kind in ("random", "hard"):
                counts[kind] = (np.zeros(b, np.int64), np.zeros(b, np.int64))
        step = max(1, BATCH_CELLS // max(n, len(self.eval) * self.nn.shape[1]))
        # At least two batches per thread, of equal sizes, so that the threads finish together.
        batches = max(-(-b // step), 2 * THREADS)
        step = max(1, -(-b // batches))
        jobs = []

        def put(name, sl, fn, *args):
            def job():
                out[name][sl] = fn(*args)

            jobs.append(pool.submit(job))

        for s in range(0, b, step):
            part = sets[s : s + step]
            member_t = np.zeros((n, len(part)), bool)
            member_t[part.T, np.arange(len(part))] = True
            sl = slice(s, s + step)
            put("learnability", sl, self._learnability_t, member_t)
            if self.pop.annotator is not None:
                for kind in ("random", "hard"):
                    put(
                        f"coherence_{kind}",
                        sl,
                        self._coherence_job(counts, sl),
                        part,
                        member_t,
                        tags[sl],
                        kind,
                    )
        ids = np.flatnonzero(with_id)
        for c in range(0, len(ids), 8):  # TwoNN fits, 8 to a job
            chunk = ids[c : c + 8]
            put(
                "intrinsic_dim",
                chunk,
                lambda ch: [self._intrinsic_dim_of(sets[i], tags[i]) for i in ch],
                chunk,
            )
        for name, (codes, K) in self.codes.items():
            out[score_names.purity(name)] = purities(codes[sets], K)
        cap = self.pop.captions
        if cap is not None and cap.unavailable is None:
            told = (np.zeros(b), np.zeros(b, np.int64), np.full(b, -1)) if counts is not None else None
            for i in ids:
                member = np.zeros(n, bool)
                member[sets[i]] = True
                d = describability(cap, member)
                out["describability_top1"][i] = d["top1"] if d else math.nan
                if told is not None and d:
                    told[0][i], told[1][i], told[2][i] = d["correct"], d["n"], d["row"]
            if told is not None:
                counts["describability_top1"] = told
        for j in jobs:
            j.result()
        return out

    def _coherence_job(self, counts: dict | None, sl: slice):
        """A job's function: the accuracies of its sets, their counts kept in `counts`."""

        def job(part, member_t, tags, kind):
            acc, ok, tr = self._coherence(part, member_t, tags, kind)
            if counts is not None:
                counts[kind][0][sl], counts[kind][1][sl] = ok, tr
            return acc

        return job

    def _intrinsic_dim_of(self, members, tag) -> float:
        return self.intrinsic_dim(members, rngs.stream(tag[0], "selection.intrinsic_dim", tag[1:]))

    def _coherence(self, sets, member_t, tags, kind: str):
        """(accuracy, correct, trials) of every set: arrays. member_t: n x sets membership."""
        b, size = sets.shape
        acc = np.full(b, math.nan)
        ok_n, tr_n = np.zeros(b, np.int64), np.zeros(b, np.int64)
        if size < self.refs + 1:
            return acc, ok_n, tr_n
        pools = None
        if kind == "hard":
            # The non-members of the evaluation sample nearest (cosine) to the mean feature of
            # the set's members in it: laina2020's Eq. 2 (the nearest other cluster by
            # centroid) for a set with no neighbour cluster.
            inE = np.ascontiguousarray(member_t[self.eval].T)
            mean = inE.astype(np.float32) @ self.XE
            sim = mean @ self.XE.T
            sim[inE] = -np.inf
            size_pool = min(HARD_POOL, len(self.eval) - 1)
            pools = np.argpartition(-sim, size_pool - 1, axis=1)[:, :size_pool]
            pools = [
                self.eval[p[np.isfinite(sim[i, p])]] if inE[i].any() else np.zeros(0, np.int64)
                for i, p in enumerate(pools)
            ]
        refs, query, neg, which, coins = [], [], [], [], []
        n = member_t.shape[0]
        for i in range(b):
            rng = rngs.stream(tags[i][0], f"selection.coherence_{kind}", tags[i][1:])
            if pools is not None and len(pools[i]) == 0:
                continue
            pick = self._picks(sets[i], rng)
            if pools is None:  # random non-members: more candidates than needed, then the first
                cand = rng.integers(n, size=4 * self.trials + 16)
                cand = cand[~member_t[cand, i]]
                while len(cand) < self.trials:
                    more = rng.integers(n, size=4 * self.trials + 16)
                    cand = np.concatenate([cand, more[~member_t[more, i]]])
                negs = cand[: self.trials]
            else:
                negs = rng.choice(pools[i], self.trials)
            refs.append(pick[:, : self.refs])
            query.append(pick[:, self.refs])
            neg.append(negs)
            which.append(np.full(self.trials, i))
            coins.append(rng.random(self.trials) < 0.5)
        if not which:
            return acc, ok_n, tr_n
        which = np.concatenate(which)
        tr = Trials(which, np.concatenate(refs), np.concatenate(query), np.concatenate(neg), [])
        ok = answers(tr, self.pop.annotator, np.concatenate(coins))
        ok_n = np.bincount(which, weights=ok, minlength=b).astype(np.int64)
        tr_n = np.bincount(which, minlength=b)
        with np.errstate(invalid="ignore", divide="ignore"):
            acc = np.where(tr_n > 0, ok_n / np.maximum(tr_n, 1), math.nan)
        return acc, ok_n, tr_n

    def _picks(self, members: np.ndarray, rng) -> np.ndarray:
        """trials x (refs + 1) members, distinct within a trial: consecutive chunks of one
        permutation when the set is large enough, else one draw per trial."""
        need = self.refs + 1
        if len(members) >= need * self.trials:
            return rng.permutation(members)[: need * self.trials].reshape(self.trials, need)
        return np.stack([rng.choice(members, need, replace=False) for _ in range(self.trials)])

    def intrinsic_dim(self, members, rng) -> float:
        pts = (
            members if len(members) <= self.id_points else rng.choice(members, self.id_points, replace=False)
        )
        return twonn_small(self.pop.X[pts])

    # ---- null sets ------------------------------------------------------------------------
    def draws(self, which: str, rng) -> np.ndarray:
        """n_null sets (rows) of the selection's size: uniformly random, or within the same
        labels (the selection's label histogram; unknown labels form one more group)."""
        n, size = len(self.pop.X), len(self.sel)
        if which == "random":
            return np.stack([np.sort(rng.choice(n, size, replace=False)) for _ in range(self.n_null)])
        y = self.pop.labels
        parts = []
        for c, cnt in zip(*np.unique(y[self.sel], return_counts=True)):
            rows = np.flatnonzero(y == c)
            if cnt == len(rows):
                parts.append(np.broadcast_to(rows, (self.n_null, cnt)))
            else:
                keys = rng.random((self.n_null, len(rows)))
                parts.append(rows[np.argpartition(keys, cnt - 1, axis=1)[:, :cnt]])
        return np.sort(np.concatenate(parts, axis=1), axis=1)

    # ---- everything -----------------------------------------------------------------------
    def run(self, bootstrap: int = 1000, alpha: float = 0.05) -> dict:
        with ThreadPoolExecutor(THREADS) as pool:  # the intervals beside the draws and their scores
            interval_job = pool.submit(self._intervals, bootstrap, alpha)
            draws = [
                pool.submit(self.draws, w, rngs.stream(self.seed, f"selection.null_{w}")) for w in self.nulls
            ]
            sets = [self.sel[None, :]] + [d.result() for d in draws]
            tags = [(self.seed, 0, 0)]
            for w in self.nulls:
                i = NULLS.index(w) + 1
                tags += [(self.seed, i, 1 + j) for j in range(self.n_null)]
            sets = np.concatenate(sets)
            with_id = np.zeros(len(sets), bool)
            with_id[0] = True
            for w in self.nulls:
                a = 1 + self.nulls.index(w) * self.n_null
                with_id[a : a + min(self.n_null_id, self.n_null)] = True
            vals = self.score_sets(sets, tags, with_id, pool)
            intervals, trials = interval_job.result()
        sel = {k: float(v[0]) for k, v in vals.items()}
        nulls = {}
        for w in self.nulls:
            a = 1 + self.nulls.index(w) * self.n_null
            nulls[w] = {k: v[a : a + self.n_null] for k, v in vals.items()}
        described = self._describe(intervals, alpha)
        rows = []
        for name, value in sel.items():
            lo, hi = intervals.get(name, (math.nan, math.nan))
            row = {"score": name, "value": value, "lo": lo, "hi": hi}
            for w in NULLS:
                v = nulls[w][name] if w in nulls else np.zeros(0)
                v = v[np.isfinite(v)]
                row[f"pct_{w}"] = percentile(value, v)
                row[f"null_{w}_median"] = float(np.median(v)) if len(v) else math.nan
                row[f"null_{w}_lo"], row[f"null_{w}_hi"] = (
                    tuple(float(q) for q in np.quantile(v, [alpha / 2, 1 - alpha / 2]))
                    if len(v)
                    else (math.nan, math.nan)
                )
                row[f"null_{w}_n"] = len(v)
            rows.append(row)
        member = np.isin(self.eval, self.sel)
        if self.pop.captions is None or self.pop.captions.unavailable is not None:
            rows = [r for r in rows if r["score"] != "describability_top1"]
        return {
            "describability": described,
            "size": len(self.sel),
            "evaluated_members": int(member.sum()),
            "evaluation_sample": len(self.eval),
            "probe": int((~member).sum()),
            "coherence_trials": trials,
            "scores": rows,
            "label_histogram": _histogram(self.pop.labels[self.sel], self.pop.label_names),
            "factor_histograms": {
                f: _histogram(v[self.sel], self.pop.factor_names.get(f, {}))
                for f, v in self.pop.factors.items()
            },
        }

    def _describe(self, intervals: dict, alpha: float) -> dict:
        """The selection's class-level caption and describability (or why there is none)."""
        cap = self.pop.captions
        if cap is None:
            return {"available": False, "reason": "no captions were given"}
        if cap.unavailable is not None:
            return {"available": False, "reason": cap.unavailable}
        member = np.zeros(len(self.pop.X), bool)
        member[self.sel] = True
        d = describability(cap, member)
        if d is None:
            return {"available": False, "reason": "no image of the selection has a caption"}
        k = int(round(d["correct"]))
        intervals["describability_top1"] = clopper_pearson(k, d["n"], alpha)
        return {
            "available": True,
            "caption": str(cap.text[d["row"]]),
            "eq4_score": d["eq4"],
            "top1": d["top1"],
            "captioned_images": d["n"],
            "competing_captions": len(cap.cands),
            "captioner": cap.source,
        }

    def _intervals(
        self, bootstrap: int, alpha: float, sel=None, tag=None, coherence: bool = True
    ) -> tuple[dict, dict]:
        """Intervals of the selection's scores: bootstrap for learnability (over the evaluated
        images) and purities (over the set's images), Clopper-Pearson for coherence. `sel`
        and `tag`: another set of the same size and the tag `score_sets` scored it with (its
        streams are then drawn for that tag: metrics.scoreboard); default the selection."""
        q = [alpha / 2, 1 - alpha / 2]
        sel = self.sel if sel is None else np.asarray(sel, np.int64)

        def stream(purpose):
            if tag is None:
                return rngs.stream(self.seed, purpose)
            return rngs.stream(tag[0], purpose, list(tag[1:]))

        member = np.zeros((1, len(self.pop.X)), bool)
        member[0, sel] = True
        share, pos = self.shares(member)[0], member[0, self.eval]
        a, b = share[pos], share[~pos]
        out: dict = {}
        if len(a) and len(b) and bootstrap:
            rng = stream("selection.learnability")
            wa, wb = _draw_counts(rng, len(a), bootstrap), _draw_counts(rng, len(b), bootstrap)
            boot = weighted_aucs(a, b, wa, wb)
            out["learnability"] = tuple(float(x) for x in np.quantile(boot, q))
        if bootstrap:
            # The label shares of the population the set was drawn from, given its histogram:
            # Jeffreys' posterior, Dirichlet(counts + 1/2), `bootstrap` draws, each mapped to a
            # purity; the interval is their 2.5-97.5% range, its low end extended to the
            # basic bootstrap's (2 x value - the multinomial resamples' 97.5%) so that it holds
            # a purity of 0 (equal shares, where every posterior draw is above 0), and its high
            # end to the value. Coverage in simulation (4 labels, 500 sets per case, shares
            # from equal to one label only, N = 12 to 80): 0.93 to 1.00, where the percentile
            # bootstrap of the plug-in purity used before covered 0.01 to 0.94 (its entropy
            # runs low: 0.65 at shares .9/.05/.03/.02 and N = 20); tests/test_scoreboard.py.
            for name, (codes, K) in self.codes.items():
                c = codes[sel]
                c = c[c >= 0]
                if K < 2 or len(c) == 0:
                    continue
                hist = np.bincount(c, minlength=K)
                rng = stream(f"selection.{score_names.purity(name)}")  # one stream per interval
                theta = float(purity_of_counts(hist[None, :], K)[0])
                post = purity_of_counts(rng.dirichlet(hist + 0.5, size=bootstrap), K)
                resampled = purity_of_counts(rng.multinomial(len(c), hist / len(c), size=bootstrap), K)
                lo_q, hi_q = np.quantile(post, q)
                basic_lo = 2 * theta - float(np.quantile(resampled, q[1]))
                out[score_names.purity(name)] = (
                    float(max(0.0, min(lo_q, basic_lo))),
                    float(max(hi_q, theta)),
                )
        trials = {}
        if self.pop.annotator is not None and coherence:  # else from score_sets' counts
            for kind in ("random", "hard"):
                _, k, t = self._coherence(sel[None, :], member.T.copy(), [tag or (self.seed, 0, 0)], kind)
                trials[kind] = int(t[0])
                if t[0]:
                    out[f"coherence_{kind}"] = clopper_pearson(int(k[0]), int(t[0]), alpha)
        return out, trials


def weighted_aucs(a: np.ndarray, b: np.ndarray, wa: np.ndarray, wb: np.ndarray) -> np.ndarray:
    """AUC of positives `a` against negatives `b` weighted by each row of wa (r x len(a)) and
    wb (r x len(b)): a bootstrap resample's AUC when the weights count the draws of each
    image. Sums, over the positives, their weight times the weight of the negatives below
    them (ties half), read from cumulative weights in the negatives' fixed order: no sort
    per resample."""
    order = np.argsort(b, kind="stable")
    below = np.searchsorted(b[order], a, side="left")
    upto = np.searchsorted(b[order], a, side="right")
    cw = np.zeros((len(wb), len(b) + 1))
    np.cumsum(wb[:, order], axis=1, out=cw[:, 1:])
    wins = 0.5 * (cw[:, below] + cw[:, upto])
    return np.einsum("rj,rj->r", wa, wins) / (wa.sum(axis=1) * wb.sum(axis=1))


def _draw_counts(rng, n: int, times: int) -> np.ndarray:
    """times x n: how often each of n items is drawn in each of `times` resamples of n."""
    idx = rng.integers(n, size=(times, n)) + n * np.arange(times)[:, None]
    return np.bincount(idx.ravel(), minlength=times * n).reshape(times, n)


def _histogram(codes: np.ndarray, names: dict) -> list[tuple]:
    """[(value, count)] most frequent first; unknown (-1) last as None."""
    vals, counts = np.unique(codes, return_counts=True)
    order = np.lexsort((vals, -counts))
    return [(names.get(int(vals[i]), int(vals[i])) if vals[i] >= 0 else None, int(counts[i])) for i in order]


def score_selection(pop: Population, selection, **kw) -> dict:
    """Scorer(pop, selection, **kw).run(): see the module doc."""
    boot = kw.pop("bootstrap", 1000)
    return Scorer(pop, selection, **kw).run(bootstrap=boot)
