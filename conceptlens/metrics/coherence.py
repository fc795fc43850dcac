"""2AFC semantic coherence of clusters (laina2020 Eq. 1-2) with a proxy annotator.

A trial shows M reference images of a cluster and two candidates: a query from
the cluster (never one of the references) and a negative from outside it. The
human of the paper is replaced by an annotator that picks the candidate whose
features are closer (mean cosine similarity) to the references, in a feature
space that is NOT the one the clusters were made in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import rng as rngs
from .neighbors import as_matrix, unit_rows
from .scores import clopper_pearson

MIN_TRIALS = 20


@dataclass
class Trials:
    cluster: np.ndarray  # (n,) cluster of each trial
    refs: np.ndarray  # (n, M) reference rows
    query: np.ndarray  # (n,) the in-cluster candidate
    negative: np.ndarray  # (n,) the out-of-cluster candidate
    skipped: list  # clusters without enough members (or without a negative pool)


def hard_negative_clusters(features, labels) -> dict:
    """Cluster -> cluster whose centroid (mean feature) is nearest (Eq. 2, Euclidean)."""
    X = np.asarray(features)
    labels = np.asarray(labels)
    if X.ndim != 2 or len(X) != len(labels):
        raise ValueError("features must be 2-D with one row per label")
    ids, inv, counts = np.unique(labels, return_inverse=True, return_counts=True)
    if len(ids) < 2:
        return {}
    # The rows of each cluster from one sort (a mask per cluster reads all labels k times).
    order, ends = np.argsort(inv, kind="stable"), np.cumsum(counts)
    C = np.stack([X[order[e - m : e]].astype(np.float64).mean(axis=0) for m, e in zip(counts, ends)])
    d = np.stack([((c - C) ** 2).sum(axis=1) for c in C])  # row by row: no k x k x d array
    np.fill_diagonal(d, np.inf)
    return {c.item(): ids[j].item() for c, j in zip(ids, d.argmin(axis=1))}


def make_trials(
    labels,
    n_trials: int = 20,
    n_refs: int = 10,
    negative: str = "random",
    hard: dict | None = None,
    random_state: int = 0,
) -> Trials:
    """T trials per cluster. negative="random": from any other cluster; "hard": from
    `hard[c]`, the cluster with the nearest centroid (see hard_negative_clusters)."""
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError("labels must be 1-D")
    if n_trials < MIN_TRIALS:
        raise ValueError(f"n_trials must be at least {MIN_TRIALS}, got {n_trials}")
    if n_refs < 1:
        raise ValueError(f"n_refs must be >= 1, got {n_refs}")
    if negative not in ("random", "hard"):
        raise ValueError(f"negative must be 'random' or 'hard', got {negative!r}")
    if negative == "hard" and hard is None:
        raise ValueError("negative='hard' needs `hard` (see hard_negative_clusters)")
    rng = rngs.generator(random_state)
    out = {"cluster": [], "refs": [], "query": [], "negative": []}
    skipped = []
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        pool = (
            np.flatnonzero(labels == hard[c.item()])
            if negative == "hard" and c.item() in hard
            else np.flatnonzero(labels != c)
            if negative == "random"
            else np.array([], int)
        )
        if len(members) < n_refs + 1 or len(pool) == 0:
            skipped.append(c.item())
            continue
        for _ in range(n_trials):
            pick = rng.choice(members, n_refs + 1, replace=False)
            out["cluster"].append(c.item())
            out["refs"].append(pick[:n_refs])
            out["query"].append(pick[n_refs])
            out["negative"].append(rng.choice(pool))
    refs = np.array(out["refs"], dtype=np.int64).reshape(-1, n_refs)
    return Trials(
        np.array(out["cluster"]),
        refs,
        np.array(out["query"], dtype=np.int64),
        np.array(out["negative"], dtype=np.int64),
        skipped,
    )


def annotate(trials: Trials, annotator_features, random_state: int = 0) -> np.ndarray:
    """Proxy answers: True when the query is closer to the references than the negative.

    Closeness = mean cosine similarity to the references; exact ties (common with
    one-hot factors) are decided by a seeded coin, as a guessing human would.
    """
    A = as_matrix(annotator_features, "annotator_features")
    rng = rngs.generator(random_state)

    def unit(rows):  # l2_normalize(A).astype(float64)[rows], normalising only those rows
        return unit_rows(A[rows]).astype(np.float64)

    # The mean of the references added one column of refs at a time, as mean(axis=1) of
    # A[refs] adds them, without its trials x M x d array.
    mean_ref = unit(trials.refs[:, 0])
    for j in range(1, trials.refs.shape[1]):
        mean_ref += unit(trials.refs[:, j])
    mean_ref /= trials.refs.shape[1]
    sq = np.einsum("ij,ij->i", unit(trials.query), mean_ref)
    sn = np.einsum("ij,ij->i", unit(trials.negative), mean_ref)
    tie = np.isclose(sq, sn, rtol=0, atol=1e-9)
    coin = rng.random(len(sq)) < 0.5
    return np.where(tie, coin, sq > sn)


def coherence(trials: Trials, correct, alpha: float = 0.05) -> dict:
    """Cluster -> (accuracy, CI low, CI high, n trials), Clopper-Pearson interval."""
    correct = np.asarray(correct, dtype=bool)
    out = {}
    for c in np.unique(trials.cluster):
        m = trials.cluster == c
        k, n = int(correct[m].sum()), int(m.sum())
        lo, hi = clopper_pearson(k, n, alpha)
        out[c.item()] = (k / n, lo, hi, n)
    return out
