"""Concept scores of any set of images (issue 26), each against a null.

A *selection* is a set of rows of one checkpoint's features. Its scores:

- learnability: how well a held-out kNN separates the set from the rest (laina2020's
  learnability, the held-out kNN variant of lu2022): every evaluated image is classified
  "in the set" or "not" by the weighted 20-NN vote (Caron et al. 2021, T = 0.07, as
  learnability.weighted_knn_predict) of its cosine-nearest OTHER images (leave-one-out, so
  no image votes for itself); the score is the AUC of the vote share of "in the set"
  between the set's members and the rest (0.5 = chance whatever the set's size; a majority
  vote would call everything "rest" for a small set). The evaluated images
  are at most `eval_members` members of the set and the `probe` rows (a seeded random
  sample of the population) not in it; interval: bootstrap over the evaluated images;
- purity against labels and against every factor (1 - H / log K, K the values in the
  whole population: metrics.scores.purity) and their histograms;
- 2AFC coherence with a proxy annotator (metrics.coherence): M references and a query from
  the set, the negative a random non-member ("random") or one of the HARD_POOL non-members
  nearest to the mean feature of the set's evaluated members by the checkpoint's features
  ("hard"; among the probe
  rows and the evaluated members' 20 nearest neighbours);
  Clopper-Pearson interval;
- TwoNN intrinsic dimension of the set (at most `id_points` of its members, seeded) and
  its size.

The null of every score: the same score for `n_null` random sets of the same size and for
sets of the same size drawn within the same labels (the selection's label histogram):
the selection's percentile among them. A null set is built like the selection: as many
evaluated members, drawn from a reserve of 2 x that many random rows (independent of the
probe, whose neighbours are known), the rest from outside it; so one neighbour search (the
probe, the reserve and the selection's evaluated members against everything) serves the
selection and every draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .coherence import Trials, annotate
from .intrinsic import twonn
from .neighbors import as_matrix, nearest_cosine, unit_rows
from .scores import clopper_pearson, purity

K_NN = 20
TEMPERATURE = 0.07
SCORES = ("learnability", "coherence_random", "coherence_hard", "intrinsic_dim")
NULLS = ("random", "same_labels")
HARD_POOL = 50  # hard negatives are drawn from this many nearest non-members


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

    def __post_init__(self):
        self.X = unit_rows(as_matrix(self.X, "features"))
        n = len(self.X)
        self.labels = np.asarray(self.labels, np.int64)
        if self.labels.shape != (n,):
            raise ValueError(f"labels must have one entry per feature row ({n}), got {self.labels.shape}")
        for name, v in self.factors.items():
            if np.shape(v) != (n,):
                raise ValueError(f"factor {name!r} must have one entry per feature row ({n})")
        if self.annotator is not None and len(self.annotator) != n:
            raise ValueError(f"annotator features must have one row per feature row ({n})")


def percentile(value: float, null: np.ndarray) -> float:
    """Percentage of the null below `value` (ties count half); nan without a null."""
    null = np.asarray(null, np.float64)
    null = null[np.isfinite(null)]
    if len(null) == 0 or not np.isfinite(value):
        return math.nan
    return float(100 * (np.sum(null < value) + 0.5 * np.sum(null == value)) / len(null))


def _purity(codes: np.ndarray, K: int) -> float:
    codes = codes[codes >= 0]
    if K < 2 or len(codes) == 0:
        return math.nan
    return float(purity(codes, K)[0])


class Scorer:
    """Scores of selections of one Population, sharing one neighbour search."""

    def __init__(
        self,
        pop: Population,
        selection,
        probe: int = 1000,
        eval_members: int = 300,
        n_null: int = 200,
        n_null_id: int = 20,
        id_points: int = 500,
        trials: int = 20,
        refs: int = 10,
        seed: int = 0,
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
        self.sel = sel
        self.n_null, self.n_null_id, self.id_points = n_null, n_null_id, id_points
        self.trials, self.refs = trials, refs
        rng = np.random.default_rng(seed)
        self.probe = np.sort(rng.choice(n, min(probe, n), replace=False))
        self.m = min(eval_members, len(sel))
        self.sel_eval = np.sort(rng.choice(sel, self.m, replace=False))
        # The rows null draws take their evaluated members from: a random sample independent
        # of the probe (as the selection's evaluated members are), twice their number.
        self.reserve = np.sort(rng.choice(n, min(2 * self.m, n), replace=False))
        # One search: probe, reserve and the selection's evaluated rows against everything.
        self.rows = np.union1d(np.union1d(self.probe, self.sel_eval), self.reserve)
        k = min(K_NN, n - 1)
        self.sims, self.nn = nearest_cosine(pop.X[self.rows], pop.X, k=k, exclude=self.rows, normalized=True)
        self.w = np.exp((self.sims.astype(np.float64) - 1) / TEMPERATURE)  # weights of the votes
        self.pos = np.full(n, -1, np.int64)  # row -> its place in self.rows (-1: not searched)
        self.pos[self.rows] = np.arange(len(self.rows))
        self.label_K = int(len(np.unique(pop.labels[pop.labels >= 0])))
        self.factor_K = {f: int(len(np.unique(v[v >= 0]))) for f, v in pop.factors.items()}
        self._prepare_draws()

    # ---- one set --------------------------------------------------------------------------
    def _learn_parts(self, member: np.ndarray, evaluated: np.ndarray):
        """(vote shares of "in" of the evaluated members, of the probe non-members)."""
        share = (self.w * member[self.nn]).sum(axis=1) / self.w.sum(axis=1)
        return share[self.pos[evaluated]], share[self.pos[self.probe[~member[self.probe]]]]

    def learnability(self, member, evaluated) -> float:
        return _auc(*self._learn_parts(member, evaluated))

    def _trials(self, members: np.ndarray, member: np.ndarray, evaluated: np.ndarray, kind: str, rng):
        if len(members) < self.refs + 1:
            return None
        if kind == "random":
            pool = None
        else:
            # The non-members nearest (cosine) to the set's mean feature: laina2020's Eq. 2
            # (the nearest other cluster by centroid) for a set with no neighbour cluster.
            # Candidates: the probe rows and the evaluated members' neighbours (searched
            # already), not all n rows, so that every null draw stays cheap.
            cand = np.union1d(self.probe, self.nn[self.pos[evaluated]].ravel())
            cand = cand[~member[cand]]
            if len(cand) == 0:
                return None
            sim = self.pop.X[cand] @ self.pop.X[evaluated].mean(axis=0)
            size = min(HARD_POOL, len(cand))
            pool = cand[np.argpartition(-sim, size - 1)[:size]]
        # refs + 1 distinct members per trial: the smallest of a random key per member (one
        # vectorised draw; a choice without replacement per trial permutes all members).
        keys = rng.random((self.trials, len(members)))
        pick = members[np.argpartition(keys, self.refs, axis=1)[:, : self.refs + 1]]
        refs, query, neg = list(pick[:, : self.refs]), list(pick[:, self.refs]), []
        n = len(member)
        for _ in range(self.trials):
            if pool is None:
                while True:  # a random non-member (the set leaves at least 2 out)
                    j = int(rng.integers(n))
                    if not member[j]:
                        break
                neg.append(j)
            else:
                neg.append(int(rng.choice(pool)))
        t = len(query)
        return Trials(np.zeros(t, np.int64), np.array(refs), np.array(query), np.array(neg), [])

    def coherence(self, members, member, evaluated, kind, rng) -> tuple[float, int, int]:
        """(accuracy, correct, trials) or (nan, 0, 0)."""
        if self.pop.annotator is None:
            return math.nan, 0, 0
        tr = self._trials(members, member, evaluated, kind, rng)
        if tr is None:
            return math.nan, 0, 0
        # Only the rows the trials show (checking all of the annotator's rows on every call
        # would cost more than the trials).
        used, inv = np.unique(np.concatenate([tr.refs.ravel(), tr.query, tr.negative]), return_inverse=True)
        nr, nq = tr.refs.size, len(tr.query)
        local = Trials(tr.cluster, inv[:nr].reshape(tr.refs.shape), inv[nr : nr + nq], inv[nr + nq :], [])
        ok = annotate(local, self.pop.annotator[used], int(rng.integers(2**31)))
        return float(ok.mean()), int(ok.sum()), len(ok)

    def intrinsic_dim(self, members, rng) -> float:
        pts = (
            members if len(members) <= self.id_points else rng.choice(members, self.id_points, replace=False)
        )
        try:
            return twonn(self.pop.X[pts])[0]
        except ValueError:
            return math.nan

    def _purities(self, members) -> dict:
        out = {"label": _purity(self.pop.labels[members], self.label_K)}
        for f, v in self.pop.factors.items():
            out[f] = _purity(v[members], self.factor_K[f])
        return out

    def _scores(self, members, evaluated, rng, with_id: bool, coherence: bool = True) -> dict:
        member = np.zeros(len(self.pop.X), bool)
        member[members] = True
        s = {"learnability": self.learnability(member, evaluated)}
        for kind in ("random", "hard"):
            s[f"coherence_{kind}"] = (
                self.coherence(members, member, evaluated, kind, rng)[0] if coherence else math.nan
            )
        s["intrinsic_dim"] = self.intrinsic_dim(members, rng) if with_id else math.nan
        s.update({f"purity_{k}": v for k, v in self._purities(members).items()})
        return s

    # ---- null sets ------------------------------------------------------------------------
    def draw(self, rng, within_labels: bool) -> tuple[np.ndarray, np.ndarray]:
        """(members, evaluated members) of one null set: as many members and evaluated
        members as the selection, the evaluated ones from the reserve rows (a random sample
        independent of the probe, as the selection's are), the rest from outside it.
        Within labels, a label the reserve holds fewer of than its share gets fewer
        evaluated members (and more of the rest)."""
        size, m = len(self.sel), self.m
        if not within_labels:
            ev = rng.choice(self.reserve, m, replace=False)
            extra = rng.choice(self.rest, min(size - m, len(self.rest)), replace=False)
            return np.concatenate([ev, extra]), ev
        members, ev = [], []
        for c, cnt, e in zip(self.sel_codes, self.sel_counts, self.ev_counts):
            p, others = self.by_label[c]
            pick = rng.choice(p, min(e, len(p)), replace=False)
            extra = rng.choice(others, min(cnt - len(pick), len(others)), replace=False)
            ev.append(pick)
            members += [pick, extra]
        return np.concatenate(members), np.concatenate(ev)

    def _prepare_draws(self) -> None:
        n, size, m = len(self.pop.X), len(self.sel), self.m
        in_probe = np.zeros(n, bool)  # in the reserve (the draws' evaluated members come from it)
        in_probe[self.reserve] = True
        self.rest = np.flatnonzero(~in_probe)
        y = self.pop.labels
        self.sel_codes, self.sel_counts = np.unique(y[self.sel], return_counts=True)
        # Evaluated members per label: the selection's histogram scaled to m (largest remainders).
        want = self.sel_counts * m / size
        ev = np.floor(want).astype(int)
        ev[np.argsort(-(want - ev), kind="stable")[: m - ev.sum()]] += 1
        self.ev_counts = ev
        order = np.argsort(y, kind="stable")
        starts = np.searchsorted(y[order], self.sel_codes)
        ends = np.searchsorted(y[order], self.sel_codes, side="right")
        self.by_label = {}
        for c, a, b in zip(self.sel_codes, starts, ends):
            rows = order[a:b]
            self.by_label[c] = (rows[in_probe[rows]], rows[~in_probe[rows]])

    # ---- everything -----------------------------------------------------------------------
    def run(self, bootstrap: int = 1000, alpha: float = 0.05) -> dict:
        rng = np.random.default_rng(self.seed + 1)
        sel = self._scores(self.sel, self.sel_eval, rng, with_id=True)
        member = np.zeros(len(self.pop.X), bool)
        member[self.sel] = True
        a, b = self._learn_parts(member, self.sel_eval)
        boot = []
        if len(a) and len(b):
            boot = [
                _auc(a[rng.integers(len(a), size=len(a))], b[rng.integers(len(b), size=len(b))])
                for _ in range(bootstrap)
            ]
        intervals = {
            "learnability": tuple(np.quantile(boot, [alpha / 2, 1 - alpha / 2]))
            if len(boot)
            else (math.nan,) * 2
        }
        trials = {}
        for kind in ("random", "hard"):
            acc, k, t = self.coherence(
                self.sel, member, self.sel_eval, kind, np.random.default_rng(self.seed + 2)
            )
            sel[f"coherence_{kind}"] = acc
            intervals[f"coherence_{kind}"] = clopper_pearson(k, t, alpha) if t else (math.nan,) * 2
            trials[kind] = t
        nulls = {}
        for which in NULLS:
            r = np.random.default_rng([self.seed, NULLS.index(which) + 3])
            draws = [
                self._scores(*self.draw(r, which == "same_labels"), r, with_id=i < self.n_null_id)
                for i in range(self.n_null)
            ]
            nulls[which] = {k: np.array([d[k] for d in draws], np.float64) for k in sel}
        rows = []
        for name, value in sel.items():
            lo, hi = intervals.get(name, (math.nan, math.nan))
            row = {"score": name, "value": value, "lo": lo, "hi": hi}
            for which in NULLS:
                v = nulls[which][name]
                v = v[np.isfinite(v)]
                row[f"pct_{which}"] = percentile(value, v)
                row[f"null_{which}_median"] = float(np.median(v)) if len(v) else math.nan
                row[f"null_{which}_n"] = len(v)
            rows.append(row)
        return {
            "size": len(self.sel),
            "evaluated_members": self.m,
            "probe": len(self.probe),
            "coherence_trials": trials,
            "scores": rows,
            "label_histogram": _histogram(self.pop.labels[self.sel], self.pop.label_names),
            "factor_histograms": {
                f: _histogram(v[self.sel], self.pop.factor_names.get(f, {}))
                for f, v in self.pop.factors.items()
            },
        }


def _auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(a member's score > a non-member's), ties half (the ROC AUC); nan if a side is empty."""
    if len(pos) == 0 or len(neg) == 0:
        return math.nan
    neg = np.sort(neg)
    below = np.searchsorted(neg, pos, side="left")
    tied = np.searchsorted(neg, pos, side="right") - below
    return float((below.sum() + 0.5 * tied.sum()) / (len(pos) * len(neg)))


def _histogram(codes: np.ndarray, names: dict) -> list[tuple]:
    """[(value, count)] most frequent first; unknown (-1) last as None."""
    vals, counts = np.unique(codes, return_counts=True)
    order = np.lexsort((vals, -counts))
    return [(names.get(int(vals[i]), int(vals[i])) if vals[i] >= 0 else None, int(counts[i])) for i in order]


def score_selection(pop: Population, selection, **kw) -> dict:
    """Scorer(pop, selection, **kw).run(): see the module doc."""
    boot = kw.pop("bootstrap", 1000)
    return Scorer(pop, selection, **kw).run(bootstrap=boot)
