"""kNN accuracies on labels and cluster learnability (lu2022).

All neighbours are exact cosine neighbours computed in blocks (neighbors.py).
"""

from __future__ import annotations

import numpy as np

from .. import rng as rngs
from .kmeans import kmeans
from .neighbors import DEFAULT_BLOCK, SelfNeighbours, l2_normalize, nearest_cosine


def _check(X, y, name="y"):
    y = np.asarray(y)
    if y.ndim != 1 or len(y) != len(X):
        raise ValueError(
            f"{name} must be 1-D with one entry per row of the features ({len(X)}), got shape {y.shape}"
        )
    return y


def one_nn_predict(
    train_X, train_y, test_X, block_size: int = DEFAULT_BLOCK, normalized: bool = False
) -> np.ndarray:
    """Labels of the cosine-nearest training row of every test row."""
    train_y = _check(train_X, train_y, "train_y")
    _, idx = nearest_cosine(test_X, train_X, k=1, block_size=block_size, normalized=normalized)
    return train_y[idx[:, 0]]


def weighted_knn_predict(
    train_X, train_y, test_X, k: int = 20, temperature: float = 0.07, block_size: int = DEFAULT_BLOCK
) -> np.ndarray:
    """The weighted kNN classifier of Caron et al. 2021 (DINO's `eval_knn`), which lu2022 uses.

    Each test row's k cosine-nearest training rows vote for their label with weight
    exp(similarity / temperature); the votes are summed per class and the class with
    the largest sum wins (exact ties: the smallest class).
    """
    train_y = _check(train_X, train_y, "train_y")
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    k = min(int(k), len(train_y))
    sims, idx = nearest_cosine(test_X, train_X, k=k, block_size=block_size)
    return _vote(sims, train_y[idx], temperature)


def _vote(sims: np.ndarray, labels: np.ndarray, temperature: float) -> np.ndarray:
    """Each row's neighbours (sims, their labels) vote with weight exp(sim / temperature)."""
    classes, codes = np.unique(labels, return_inverse=True)
    votes = np.zeros((len(sims), len(classes)))
    rows = np.repeat(np.arange(len(sims)), sims.shape[1])
    np.add.at(votes, (rows, codes.ravel()), np.exp(sims.astype(np.float64).ravel() / temperature))
    return classes[np.argmax(votes, axis=1)]


def knn_accuracy(
    train_X, train_y, test_X, test_y, k: int = 20, temperature: float = 0.07, block_size: int = DEFAULT_BLOCK
) -> float:
    """Top-1 accuracy of a cosine kNN classifier fitted on train, scored on test.

    k=20, temperature=0.07 (default): the weighted 20-NN of Caron et al. 2021, lu2022's
    "KNN accuracy". k=1: the plain 1-NN (its weights do not matter).
    """
    test_y = _check(test_X, test_y, "test_y")
    train_y = _check(train_X, train_y, "train_y")
    if len(test_y) == 0 or len(train_y) == 0:
        raise ValueError("knn_accuracy needs a non-empty train and test split")
    if k == 1:
        pred = one_nn_predict(train_X, train_y, test_X, block_size)
    else:
        pred = weighted_knn_predict(train_X, train_y, test_X, k, temperature, block_size)
    return float(np.mean(pred == test_y))


def cluster_learnability(
    X,
    cluster_labels,
    n_chunks: int = 10,
    n_orders: int = 3,
    random_state: int = 0,
    block_size: int = DEFAULT_BLOCK,
) -> float:
    """Prequential cluster learnability CL (lu2022 Eq. 3, chunked).

    The data are put in a random order and cut into `n_chunks` chunks; every
    chunk after the first is predicted by a cosine 1-NN that has seen all the
    earlier chunks, and CL is the mean of those chunk accuracies. The result
    is averaged over `n_orders` random orders because a single order makes
    the score depend on the data order.
    """
    X = l2_normalize(X)
    y = _check(X, cluster_labels, "cluster_labels")
    n = len(y)
    if n_chunks < 2 or n_chunks > n:
        raise ValueError(f"n_chunks must be in [2, {n}], got {n_chunks}")
    if n_orders < 1:
        raise ValueError(f"n_orders must be >= 1, got {n_orders}")
    rng = rngs.generator(random_state)
    scores = []
    for _ in range(n_orders):
        order = rng.permutation(n)
        bounds = np.linspace(0, n, n_chunks + 1).astype(int)
        accs = []
        for j in range(1, n_chunks):
            seen, chunk = order[: bounds[j]], order[bounds[j] : bounds[j + 1]]
            pred = one_nn_predict(X[seen], y[seen], X[chunk], block_size, normalized=True)
            accs.append(np.mean(pred == y[chunk]))
        scores.append(np.mean(accs))
    return float(np.mean(scores))


def heldout_clusters(
    train_X, test_X, k: int, n_init: int = 3, random_state: int = 0, engine: str = "auto"
) -> tuple[np.ndarray, np.ndarray]:
    """k-means fitted on the train rows only; test rows get their nearest centroid.

    Returns (train cluster labels, test cluster labels). Test rows never move a centroid.
    `engine`: see metrics.kmeans (faiss at every size by default, as the clustering).
    """
    train_X = np.asarray(train_X, dtype=np.float32)
    if not 2 <= k <= len(train_X):
        raise ValueError(f"k={k} must be in [2, {len(train_X)}] (train rows)")
    fit = kmeans(train_X, k, n_init, random_state, engine)
    return fit.labels, fit.predict(test_X)


def cluster_learnability_heldout(
    train_X,
    test_X,
    k: int,
    n_init: int = 3,
    random_state: int = 0,
    block_size: int = DEFAULT_BLOCK,
    engine: str = "auto",
) -> float:
    """Held-out CL (the journal version of lu2022): k-means on the train split only, test
    points labelled by their nearest centroid, then the accuracy on the test split of a
    cosine 1-NN trained on the train split's cluster labels."""
    tr, te = heldout_clusters(train_X, test_X, k, n_init, random_state, engine)
    return knn_accuracy(train_X, tr, test_X, te, k=1, block_size=block_size)


# ---- the same metrics from one shared neighbour pass (SelfNeighbours) -------------------
# Each equals its function above on the rows it names (the kNN ones on the normalised rows):
# the neighbours are the same exact float32 cosine neighbours, found once for all of them.


def knn_accuracy_shared(nb: SelfNeighbours, train, y, test, k: int = 20, temperature: float = 0.07) -> float:
    """knn_accuracy(X[train], y[train], X[test], y[test], k, temperature); train and test
    are boolean masks over the rows of nb.X."""
    return float(np.mean(knn_correct_shared(nb, train, y, test, k, temperature)))


def knn_correct_shared(
    nb: SelfNeighbours, train, y, test, k: int = 20, temperature: float = 0.07
) -> np.ndarray:
    """Per test row (in row order), whether the kNN classifier of `knn_accuracy_shared` gets
    its label right: the accuracy is their mean, its bootstrap resamples them."""
    y = _check(nb.X, y, "y")
    train, test = np.asarray(train, bool), np.asarray(test, bool)
    if not train.any() or not test.any():
        raise ValueError("knn_accuracy needs a non-empty train and test split")
    k = min(int(k), int(train.sum()))
    sims, idx = nb.cosine(np.flatnonzero(test), train, k)
    pred = y[idx[:, 0]] if k == 1 else _vote(sims, y[idx], temperature)
    return pred == y[test]


def cluster_learnability_shared(
    nb: SelfNeighbours, cluster_labels, n_chunks: int = 10, n_orders: int = 3, random_state: int = 0
) -> float:
    """cluster_learnability(nb.X, cluster_labels, n_chunks, n_orders, random_state): the same
    random orders; each point's nearest among the earlier chunks read from its list (ties:
    the earliest in the order, as a search over the seen rows in order finds it)."""
    return cluster_learnability_counts(nb, cluster_labels, n_chunks, n_orders, random_state)[0]


def cluster_learnability_counts(
    nb: SelfNeighbours, cluster_labels, n_chunks: int = 10, n_orders: int = 3, random_state: int = 0
) -> tuple[float, np.ndarray, np.ndarray]:
    """(CL, correct, predicted) of `cluster_learnability_shared`: per image, how many of the
    orders predicted it (every order but those that put it in the first chunk) and how
    many of those predictions were right. sum(correct) / sum(predicted) is CL up to the
    chunks' sizes differing by one image; a bootstrap over images resamples these pairs."""
    y = _check(nb.X, cluster_labels, "cluster_labels")
    n = len(y)
    if n_chunks < 2 or n_chunks > n:
        raise ValueError(f"n_chunks must be in [2, {n}], got {n_chunks}")
    if n_orders < 1:
        raise ValueError(f"n_orders must be >= 1, got {n_orders}")
    rng = rngs.generator(random_state)
    S, J = nb.sims, nb.idx
    scores = []
    n_correct, n_pred = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for _ in range(n_orders):
        order = rng.permutation(n)
        bounds = np.linspace(0, n, n_chunks + 1).astype(int)
        rank = np.empty(n, np.int64)
        rank[order] = np.arange(n)
        chunk = np.searchsorted(bounds, rank, side="right") - 1
        q = np.flatnonzero(chunk >= 1)
        ok = chunk[J[q]] < chunk[q][:, None]
        first = np.argmax(ok, axis=1)
        s1 = S[q, first]
        good = ok.any(axis=1) & (s1 > S[q, -1])
        tied = ok & (S[q] == s1[:, None])
        nn = J[q, np.where(tied, rank[J[q]], n).argmin(axis=1)]
        for j in np.unique(chunk[q[~good]]):
            bad = np.flatnonzero(~good & (chunk[q] == j))
            seen = order[: bounds[j]]
            _, i = nearest_cosine(nb.X[q[bad]], nb.X[seen], k=1, normalized=True)
            nn[bad] = seen[i[:, 0]]
            nb.fallback_rows += len(bad)
        correct = y[nn] == y[q]
        n_correct[q] += correct
        n_pred[q] += 1
        accs = [correct[chunk[q] == j].mean() for j in range(1, n_chunks)]
        scores.append(np.mean(accs))
    return float(np.mean(scores)), n_correct, n_pred


def cluster_learnability_heldout_shared(
    nb: SelfNeighbours, train, test, k: int, n_init: int = 3, random_state: int = 0, engine: str = "auto"
) -> float:
    """cluster_learnability_heldout(X[train], X[test], k, ...): the test rows' nearest train
    rows are read from the shared lists."""
    return float(
        np.mean(cluster_learnability_heldout_correct(nb, train, test, k, n_init, random_state, engine))
    )


def cluster_learnability_heldout_correct(
    nb: SelfNeighbours,
    train,
    test,
    k: int,
    n_init: int = 3,
    random_state: int = 0,
    engine: str = "auto",
    clusters: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Per test row (in row order), whether its nearest train row's cluster is its own
    nearest-centroid cluster: held-out CL is their mean, its bootstrap resamples them (the
    train split's clustering held fixed). `clusters`: heldout_clusters(X[train], X[test],
    k, n_init, random_state, engine), when computed already (cluster_metrics runs it beside
    other work)."""
    train, test = np.asarray(train, bool), np.asarray(test, bool)
    if clusters is None:
        clusters = heldout_clusters(nb.X[train], nb.X[test], k, n_init, random_state, engine)
    tr, te = clusters
    labels = np.full(len(nb.X), -1, np.int64)
    labels[train] = tr
    _, idx = nb.cosine(np.flatnonzero(test), train, 1)
    return labels[idx[:, 0]] == te
