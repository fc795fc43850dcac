"""The baseline predictors lu2022 compares CLID with (its section 3.2 and Table 1), and the
label-entropy baselines of its transfer study (section 3.5, after Vedantam et al. 2021).

- alignment and uniformity (Wang and Isola 2020) of L2-normalised features: the mean
  squared distance between two augmented views of the same image, and the log of the
  mean Gaussian potential exp(-2 ||zi - zj||^2) over distinct pairs;
- the rate reduction Delta R of MCR2 (Yu et al. 2020) with a k-means partition and
  epsilon^2 = 0.5 on normalised features;
- rotation prediction: a kNN classifier fitted on the features of rotated training
  images predicts the rotation (0, 90, 180, 270 degrees) of rotated held-out images;
- the negative label entropy -H(Y|X) of a linear classifier's predictions.
"""

from __future__ import annotations

import numpy as np

from .. import rng as rngs


def _unit(X) -> np.ndarray:
    X = np.asarray(X, np.float64)
    n = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(n > 0, n, 1.0)


def alignment(view_a, view_b, alpha: float = 2.0) -> float:
    """E ||f(x) - f(y)||^alpha over positive pairs (rows of the two views), normalised."""
    a, b = _unit(view_a), _unit(view_b)
    if a.shape != b.shape or len(a) == 0:
        raise ValueError(f"the two views must have the same non-empty shape, got {a.shape} and {b.shape}")
    return float((np.linalg.norm(a - b, axis=1) ** alpha).mean())


def uniformity(X, t: float = 2.0, max_points: int = 5000, random_state: int = 0) -> float:
    """log E exp(-t ||f(x) - f(y)||^2) over distinct pairs, normalised (on a seeded sample of
    at most `max_points` rows: the pairs grow as n^2)."""
    Z = _unit(X)
    if len(Z) < 2:
        raise ValueError("uniformity needs at least two points")
    if len(Z) > max_points:
        Z = Z[np.sort(rngs.generator(random_state).choice(len(Z), max_points, replace=False))]
    sq = np.maximum(2 - 2 * Z @ Z.T, 0.0)  # unit vectors: ||a - b||^2 = 2 - 2 a.b
    iu = np.triu_indices(len(Z), 1)
    v = -t * sq[iu]
    top = v.max()
    return float(top + np.log(np.exp(v - top).mean()))


def _logdet_term(Z: np.ndarray, eps2: float, m: int) -> float:
    d = Z.shape[1]
    # logdet(I + a Z^T Z) (d x d) equals logdet(I + a Z Z^T) (n x n): the smaller one is used.
    G = Z.T @ Z if d <= len(Z) else Z @ Z.T
    sign, logdet = np.linalg.slogdet(np.eye(len(G)) + (d / (m * eps2)) * G)
    return 0.5 * logdet


def coding_rate(X, eps2: float = 0.5) -> float:
    """R(Z, eps) = 1/2 logdet(I + d / (n eps^2) Z^T Z) of normalised features (MCR2 Eq. 1)."""
    Z = _unit(X)
    return _logdet_term(Z, eps2, len(Z))


def rate_reduction(X, partition, eps2: float = 0.5) -> float:
    """Delta R = R(Z) - sum_j n_j / (2n) logdet(I + d / (n_j eps^2) Z_j^T Z_j) (MCR2 Eq. 2)."""
    Z = _unit(X)
    part = np.asarray(partition)
    if part.shape != (len(Z),):
        raise ValueError(f"partition must have one value per row ({len(Z)}), got shape {part.shape}")
    n = len(Z)
    rc = 0.0
    for c in np.unique(part):
        Zc = Z[part == c]
        rc += len(Zc) / n * _logdet_term(Zc, eps2, len(Zc))
    return _logdet_term(Z, eps2, n) - rc


def rotation_accuracy(
    train_features, train_rotation, test_features, test_rotation, n_neighbors: int = 20
) -> float:
    """Accuracy of a cosine kNN classifier (fitted on rotated training images' features)
    at predicting the rotation of rotated held-out images."""
    from sklearn.neighbors import KNeighborsClassifier

    knn = KNeighborsClassifier(n_neighbors=min(n_neighbors, len(train_features)), metric="cosine")
    knn.fit(np.asarray(train_features, np.float64), np.asarray(train_rotation))
    return float((knn.predict(np.asarray(test_features, np.float64)) == np.asarray(test_rotation)).mean())


def linear_probe(train_x, train_y, test_x, test_y, random_state: int = 0) -> dict:
    """A multinomial logistic regression on standardised features, fitted on train: its test
    accuracy and the negative mean entropy -H(Y|X) of its test predictions (in nats)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from threadpoolctl import threadpool_limits

    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000, random_state=random_state))
    # One BLAS thread: lbfgs on small matrices is 30x slower with two on a busy machine.
    with threadpool_limits(1):
        clf.fit(np.asarray(train_x, np.float64), np.asarray(train_y))
        p = clf.predict_proba(np.asarray(test_x, np.float64))
    ent = -(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)).sum(axis=1)
    acc = float((clf.classes_[p.argmax(axis=1)] == np.asarray(test_y)).mean())
    return {"accuracy": acc, "neg_entropy": float(-ent.mean())}
