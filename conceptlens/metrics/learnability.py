"""1-NN accuracies: kNN evaluation on labels and cluster learnability (lu2022).

All neighbours are exact cosine neighbours computed in blocks (neighbors.py).
"""
from __future__ import annotations

import numpy as np

from .neighbors import DEFAULT_BLOCK, l2_normalize, nearest_cosine


def _check(X, y, name="y"):
    y = np.asarray(y)
    if y.ndim != 1 or len(y) != len(X):
        raise ValueError(f"{name} must be 1-D with one entry per row of the features "
                         f"({len(X)}), got shape {y.shape}")
    return y


def one_nn_predict(train_X, train_y, test_X, block_size: int = DEFAULT_BLOCK,
                   normalized: bool = False) -> np.ndarray:
    """Labels of the cosine-nearest training row of every test row."""
    train_y = _check(train_X, train_y, "train_y")
    _, idx = nearest_cosine(test_X, train_X, k=1, block_size=block_size, normalized=normalized)
    return train_y[idx[:, 0]]


def knn_accuracy(train_X, train_y, test_X, test_y, block_size: int = DEFAULT_BLOCK) -> float:
    """Top-1 accuracy of a cosine 1-NN classifier fitted on train, scored on test."""
    test_y = _check(test_X, test_y, "test_y")
    if len(test_y) == 0 or len(train_y) == 0:
        raise ValueError("knn_accuracy needs a non-empty train and test split")
    return float(np.mean(one_nn_predict(train_X, train_y, test_X, block_size) == test_y))


def cluster_learnability(X, cluster_labels, n_chunks: int = 10, n_orders: int = 3,
                         random_state: int = 0, block_size: int = DEFAULT_BLOCK) -> float:
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
            seen, chunk = order[:bounds[j]], order[bounds[j]:bounds[j + 1]]
            pred = one_nn_predict(X[seen], y[seen], X[chunk], block_size, normalized=True)
            accs.append(np.mean(pred == y[chunk]))
        scores.append(np.mean(accs))
    return float(np.mean(scores))


def cluster_learnability_heldout(train_X, train_clusters, test_X, test_clusters,
                                 block_size: int = DEFAULT_BLOCK) -> float:
    """Held-out CL: 1-NN trained on the train split's cluster labels, scored on the test split."""
    return knn_accuracy(train_X, train_clusters, test_X, test_clusters, block_size)
