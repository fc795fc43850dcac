"""Per-label learning curves along training (issue 27, item 3).

For one checkpoint and one factor of the images (the label, a shape, a colour...), how
well do the features separate each value of the factor from the others?

* `vote_shares`: a weighted cosine kNN (DINO's `eval_knn`, the one `knn_accuracy` uses):
  each held-out image's k nearest training images vote for their value with weight
  exp(similarity / temperature); the share of the votes each value gets is its score.
* `bootstrap_auc`: for every value, the one-vs-rest ROC AUC of that score (0.5 = chance,
  1 = every image of the value ranked above every other), and a percentile interval
  from resampling the held-out images (one set of seeded resamples shared by every
  value, so a factor's macro mean has an interval too).
* `best_cluster`: the cluster that best matches a value (largest F1 of "in the cluster"
  against "has the value") with its precision (the share of the cluster with the value:
  its purity for that value) and recall.
* `learned_epochs`: the first epoch whose lower interval bound exceeds a threshold
  ("learned at") and the first later epoch where it no longer does ("lost at").
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import rng as rngs
from .neighbors import nearest_cosine


def vote_shares(
    train_X, train_y, test_X, k: int = 20, temperature: float = 0.07, classes=None
) -> tuple[np.ndarray, np.ndarray]:
    """(classes, shares): shares[i, j] is the share of test row i's weighted kNN votes that
    go to classes[j] (rows sum to 1, or 0 when no neighbour has a scored class).
    `classes`: the values scored (default: those of train_y, sorted)."""
    train_y = np.asarray(train_y)
    if train_y.ndim != 1 or len(train_y) != len(train_X):
        raise ValueError(f"train_y must be 1-D with one entry per training row ({len(train_X)})")
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    sims, idx = nearest_cosine(test_X, train_X, k=min(int(k), len(train_y)))
    classes = np.unique(train_y) if classes is None else np.asarray(classes)
    return classes, shares_from_neighbours(sims, train_y[idx], classes, temperature)


def shares_from_neighbours(sims, neighbour_labels, classes, temperature: float = 0.07) -> np.ndarray:
    """The vote shares of `vote_shares` from neighbours found once (sims and the labels of
    the neighbours, both rows x k): one neighbour search serves every factor."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    sims = np.asarray(sims, np.float64)
    lab_in = np.asarray(neighbour_labels)
    if sims.shape != lab_in.shape:
        raise ValueError(
            f"sims and neighbour_labels must have one shape, got {sims.shape} and {lab_in.shape}"
        )
    classes = np.asarray(classes)
    w = np.exp((sims - 1.0) / temperature)  # shifted by the largest cosine: same shares, no overflow
    code = {c: j for j, c in enumerate(classes.tolist())}
    lab = np.array([code.get(v, -1) for v in lab_in.ravel().tolist()], np.int64)
    votes = np.zeros((len(sims), len(classes)))
    rows = np.repeat(np.arange(len(sims)), sims.shape[1] if sims.ndim == 2 else 1)
    keep = lab >= 0
    np.add.at(votes, (rows[keep], lab[keep]), w.ravel()[keep])
    total = votes.sum(axis=1, keepdims=True)
    return votes / np.where(total > 0, total, 1.0)


def auc_rows(positive: np.ndarray, score: np.ndarray) -> np.ndarray:
    """ROC AUC of every row (Mann-Whitney U / (n_pos n_neg), ties counted half); NaN for a
    row without both classes. positive, score: arrays of the same shape (rows x items)."""
    positive = np.atleast_2d(np.asarray(positive, bool))
    score = np.atleast_2d(np.asarray(score, np.float64))
    from scipy.stats import rankdata  # deferred: scipy.stats costs seconds to import on a page

    ranks = rankdata(score, axis=1)  # average ranks: ties count half
    n_pos = positive.sum(axis=1)
    n_neg = positive.shape[1] - n_pos
    u = (ranks * positive).sum(axis=1) - n_pos * (n_pos + 1) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n_pos > 0) & (n_neg > 0), u / (n_pos * n_neg), np.nan)


def bootstrap_indices(n: int, n_boot: int, random_state: int = 0) -> np.ndarray:
    """n_boot resamples (with replacement) of n items, seeded: shape (n_boot, n)."""
    if n < 1 or n_boot < 1:
        raise ValueError(f"bootstrap needs n >= 1 and n_boot >= 1, got n={n}, n_boot={n_boot}")
    return rngs.generator(random_state).integers(0, n, size=(int(n_boot), int(n)))


def bootstrap_auc(
    y, shares: np.ndarray, classes, resamples: np.ndarray, level: float = 0.95
) -> dict[str, np.ndarray]:
    """One-vs-rest AUC of every class (its column of `shares` as the score), its percentile
    interval over `resamples` (rows of indices into y), and the same for the macro mean
    over the classes. Returns arrays `auc`, `lo`, `hi` (one per class) and scalars
    `macro`, `macro_lo`, `macro_hi`; a class absent from y has NaN."""
    y = np.asarray(y)
    classes = np.asarray(classes)
    if shares.shape != (len(y), len(classes)):
        raise ValueError(
            f"shares must be (len(y), len(classes)) = ({len(y)}, {len(classes)}), got {shares.shape}"
        )
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    q = [(1 - level) / 2 * 100, (1 + level) / 2 * 100]
    point = np.empty(len(classes))
    boots = np.empty((len(resamples), len(classes)))
    for j, c in enumerate(classes.tolist()):
        pos = y == c
        point[j] = auc_rows(pos[None, :], shares[None, :, j])[0]
        boots[:, j] = auc_rows(pos[resamples], shares[:, j][resamples])
    ok = ~np.isnan(point)
    # A class missing from every resample (or a resample with no class of both kinds) is a
    # NaN column (row): its interval is NaN, said by the result, not by numpy's "All-NaN
    # slice" / "Mean of empty slice" warnings on the console.
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "All-NaN slice encountered", RuntimeWarning)
        warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
        lo, hi = (np.nanpercentile(boots, qq, axis=0) if len(resamples) else point for qq in q)
        macro_b = np.nanmean(boots, axis=1)
        macro = float(np.nanmean(point)) if ok.any() else np.nan
        macro_lo = float(min(np.nanpercentile(macro_b, q[0]), macro)) if ok.any() else np.nan
        macro_hi = float(max(np.nanpercentile(macro_b, q[1]), macro)) if ok.any() else np.nan
    return {
        "auc": point,
        "lo": np.where(ok, np.minimum(lo, point), np.nan),
        "hi": np.where(ok, np.maximum(hi, point), np.nan),
        "macro": macro,
        "macro_lo": macro_lo,
        "macro_hi": macro_hi,
    }


def bootstrap_accuracy(correct, resamples: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """Accuracy (mean of `correct`) and its percentile interval over `resamples`."""
    correct = np.asarray(correct, np.float64)
    acc = float(correct.mean())
    b = correct[resamples].mean(axis=1)
    lo, hi = np.percentile(b, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return acc, float(min(lo, acc)), float(max(hi, acc))


def best_cluster(clusters, has_value) -> tuple[int | None, float, float]:
    """(cluster, precision, recall) of the cluster with the largest F1 against `has_value`
    (ties: the smaller cluster id); (None, nan, nan) when no image has the value."""
    clusters = np.asarray(clusters)
    has_value = np.asarray(has_value, bool)
    if clusters.shape != has_value.shape:
        raise ValueError("clusters and has_value must have one entry per image")
    n_pos = int(has_value.sum())
    if n_pos == 0:
        return None, float("nan"), float("nan")
    ids, size = np.unique(clusters, return_counts=True)
    inter = np.array([int(has_value[clusters == c].sum()) for c in ids])
    f1 = 2 * inter / (size + n_pos)
    j = int(np.argmax(f1))
    return ids[j].item(), float(inter[j] / size[j]), float(inter[j] / n_pos)


def learned_epochs(epochs, lower, threshold: float) -> tuple[object, object]:
    """(learned_at, lost_at): the first epoch whose lower bound exceeds `threshold`, and the
    first later epoch where it does not (None when never learned / never lost). `epochs`
    ascending; a NaN bound counts as not learned."""
    epochs = list(epochs)
    ok = [bool(v > threshold) if v == v else False for v in lower]
    if len(ok) != len(epochs):
        raise ValueError("epochs and lower must have the same length")
    first = next((i for i, v in enumerate(ok) if v), None)
    if first is None:
        return None, None
    lost = next((i for i in range(first + 1, len(ok)) if not ok[i]), None)
    return epochs[first], (epochs[lost] if lost is not None else None)
