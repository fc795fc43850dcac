"""kNN accuracies on labels and cluster learnability (lu2022).

All neighbours are exact cosine neighbours computed in blocks (neighbors.py).
"""

from __future__ import annotations

import numpy as np

from .neighbors import DEFAULT_BLOCK, l2_normalize, nearest_cosine


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
    classes, codes = np.unique(train_y, return_inverse=True)
    votes = np.zeros((len(sims), len(classes)))
    rows = np.repeat(np.arange(len(sims)), k)
    np.add.at(votes, (rows, codes[idx].ravel()), np.exp(sims.astype(np.float64).ravel() / temperature))
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
    rng = np.random.default_rng(random_state)
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
    train_X, test_X, k: int, n_init: int = 3, random_state: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """k-means fitted on the train rows only; test rows get their nearest centroid.

    Returns (train cluster labels, test cluster labels). Test rows never move a centroid.
    """
    from sklearn.cluster import KMeans

    train_X = np.asarray(train_X, dtype=np.float32)
    if not 2 <= k <= len(train_X):
        raise ValueError(f"k={k} must be in [2, {len(train_X)}] (train rows)")
    km = KMeans(n_clusters=k, n_init=n_init, random_state=random_state).fit(train_X)
    return km.labels_.astype(np.int64), km.predict(np.asarray(test_X, dtype=np.float32)).astype(np.int64)


def cluster_learnability_heldout(
    train_X, test_X, k: int, n_init: int = 3, random_state: int = 0, block_size: int = DEFAULT_BLOCK
) -> float:
    """Held-out CL (the journal version of lu2022): k-means on the train split only, test
    points labelled by their nearest centroid, then the accuracy on the test split of a
    cosine 1-NN trained on the train split's cluster labels."""
    tr, te = heldout_clusters(train_X, test_X, k, n_init, random_state)
    return knn_accuracy(train_X, tr, test_X, te, k=1, block_size=block_size)
