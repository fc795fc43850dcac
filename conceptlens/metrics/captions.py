"""Class-level captions (laina2020 Eq. 4) and the describability proxy (its Table 3)."""

from __future__ import annotations

import numpy as np

from .. import rng as rngs
from .neighbors import l2_normalize


def _labels(labels, n: int) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) != n:
        raise ValueError(f"labels must be 1-D with {n} entries (one per caption), got {labels.shape}")
    return labels


def eq4_scores(embeddings, labels, negative: bool = True) -> np.ndarray:
    """Eq. 4 objective of every caption with d = cosine distance (lower is better).

    mean distance to the other captions of its cluster (divided by |S_c| as in
    the paper) minus, if `negative`, the mean distance to all other clusters'
    captions. Computed from per-cluster sums of embeddings: O(N d), no N x N.
    """
    E = l2_normalize(embeddings).astype(np.float64)
    labels = _labels(labels, len(E))
    ids, inv = np.unique(labels, return_inverse=True)
    sums = np.zeros((len(ids), E.shape[1]))
    np.add.at(sums, inv, E)
    n_c = np.bincount(inv).astype(np.float64)[inv]
    own = np.einsum("ij,ij->i", E, sums[inv])
    self_sim = np.einsum("ij,ij->i", E, E)
    # sum over s+ != s of (1 - s.s+) = (n_c - 1) - (s.S_c - s.s)
    intra = ((n_c - 1) - (own - self_sim)) / n_c
    if not negative:
        return intra
    n_out = len(E) - n_c
    other = np.einsum("ij,ij->i", E, sums.sum(axis=0)[None, :] - sums[inv])
    with np.errstate(invalid="ignore", divide="ignore"):
        inter = np.where(n_out > 0, (n_out - other) / n_out, 0.0)
    return intra - inter


def pick_per_cluster(scores, labels) -> dict:
    """Cluster -> (row index of the lowest score, that score); ties: the first row."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = _labels(labels, len(scores))
    out = {}
    for c in np.unique(labels):
        rows = np.flatnonzero(labels == c)
        j = rows[int(np.argmin(scores[rows]))]
        out[c.item()] = (int(j), float(scores[j]))
    return out


def class_captions(embeddings, labels, negative: bool = True) -> dict:
    """Cluster -> (row of the chosen caption, Eq. 4 score) with sentence embeddings."""
    return pick_per_cluster(eq4_scores(embeddings, labels, negative), labels)


def class_captions_rouge(
    texts,
    labels,
    negative: bool = True,
    max_candidates: int = 30,
    max_compare: int = 200,
    random_state: int = 0,
) -> dict:
    """Eq. 4 with d = 1 - ROUGE-L F-measure (the Table 3 ablation).

    ROUGE needs every pair of sentences, so on large clusters the candidates and
    the captions compared against are random samples (at most `max_candidates`
    and `max_compare` of each, seeded); below those sizes it is exact.
    Returns cluster -> (row of the chosen caption, score).
    """
    from rouge_score import rouge_scorer

    texts = list(texts)
    labels = _labels(labels, len(texts))
    tok = rouge_scorer.RougeScorer(["rougeL"])._tokenizer
    uniq, inv = np.unique(np.asarray(texts, dtype=object).astype(str), return_inverse=True)
    tokens = [tok.tokenize(t) for t in uniq]
    cache: dict = {}

    def dist(a: int, b: int) -> float:
        key = (a, b) if a < b else (b, a)
        if key not in cache:
            cache[key] = 1.0 - rouge_scorer._score_lcs(tokens[a], tokens[b]).fmeasure
        return cache[key]

    rng = rngs.generator(random_state)
    out = {}
    for c in np.unique(labels):
        inside = np.flatnonzero(labels == c)
        outside = np.flatnonzero(labels != c)
        cands = (
            inside
            if len(inside) <= max_candidates
            else np.sort(rng.choice(inside, max_candidates, replace=False))
        )
        pos = inside if len(inside) <= max_compare else rng.choice(inside, max_compare, replace=False)
        neg = outside if len(outside) <= max_compare else rng.choice(outside, max_compare, replace=False)
        best = None
        for i in cands:
            others = [j for j in pos if j != i]
            intra = sum(dist(inv[i], inv[j]) for j in others) / len(pos)
            score = intra
            if negative and len(neg):
                score -= sum(dist(inv[i], inv[j]) for j in neg) / len(neg)
            if best is None or score < best[1]:
                best = (int(i), float(score))
        out[c.item()] = best
    return out


def describability(
    text_embeddings,
    text_clusters,
    image_embeddings,
    image_clusters,
    features=None,
    top_n: int = 10,
    top: int = 5,
    n_pairs: int = 20,
    random_state: int = 0,
) -> dict:
    """Describability by retrieval (laina2020 Table 3, the dataset standing in for web search).

    Each cluster's caption retrieves the `top_n` images nearest to it in the VL model's
    space (cosine). Table 3 then asks how the clustering itself classifies them, with
    `features` (the checkpoint's, one row per image) and the clusters' mean features:
      top1   share of the retrieved images that are in the cluster (Top-1 accuracy);
      top5   share with the cluster among their `top` classes: their own cluster first,
             then the other clusters by nearest mean (Top-5 accuracy);
      binary each retrieved image against each image retrieved for another caption:
             share of pairs where it is nearer the cluster's mean (ties count 1/2) -
             the exact mean over the paper's random negatives.
    Also `hits` (retrieved images in the cluster) and, needing no features, `2afc`:
    over `n_pairs` random pairs (one image of the cluster, one outside) how often the
    caption is more similar to the one inside (Eq. 3 with the VL model as annotator).
    Without `features`, top5 and binary are nan.
    """
    T = l2_normalize(text_embeddings).astype(np.float64)
    V = l2_normalize(image_embeddings).astype(np.float64)
    if T.shape[1] != V.shape[1]:
        raise ValueError(f"text embeddings have {T.shape[1]} dims but image embeddings {V.shape[1]}")
    tc = _labels(text_clusters, len(T))
    ic = np.asarray(image_clusters)
    if ic.shape != (len(V),):
        raise ValueError("image_clusters needs one entry per image embedding")
    top_n = min(top_n, len(V))
    sims = V @ T.T
    retrieved = np.argsort(-sims, axis=0, kind="stable")[:top_n].T  # caption -> images
    dist = None
    if features is not None:
        F = np.asarray(features, dtype=np.float64)
        if F.shape[0] != len(V):
            raise ValueError(f"features need one row per image ({len(V)}), got {F.shape[0]}")
        ids, inv = np.unique(ic, return_inverse=True)
        means = np.zeros((len(ids), F.shape[1]))
        np.add.at(means, inv, F)
        means /= np.bincount(inv)[:, None]
        # image x cluster squared distances, without an image x cluster x dim array
        dist = (F * F).sum(axis=1)[:, None] - 2 * F @ means.T + (means * means).sum(axis=1)[None, :]
        col = {c.item(): j for j, c in enumerate(ids)}
    rng = rngs.generator(random_state)
    out = {}
    for t, c in enumerate(tc):
        top_imgs = retrieved[t]
        hit = ic[top_imgs] == c
        r = {
            "hits": int(hit.sum()),
            "top1": float(hit.mean()),
            "top5": float("nan"),
            "binary": float("nan"),
            "2afc": float("nan"),
        }
        if dist is not None:
            d = dist[top_imgs].copy()
            d[np.arange(len(top_imgs)), inv[top_imgs]] = -np.inf  # own cluster ranks first
            rank = (d < d[:, [col[c.item()]]]).sum(axis=1)
            r["top5"] = float(np.mean(rank < top))
            neg = retrieved[np.arange(len(tc)) != t].ravel()
            if len(neg):
                p, n = -dist[top_imgs, col[c.item()]], -dist[neg, col[c.item()]]
                r["binary"] = float(np.mean((p[:, None] > n[None, :]) + 0.5 * (p[:, None] == n[None, :])))
        inside, outside = np.flatnonzero(ic == c), np.flatnonzero(ic != c)
        if len(inside) and len(outside):
            a, b = rng.choice(inside, n_pairs), rng.choice(outside, n_pairs)
            r["2afc"] = float(np.mean(sims[a, t] > sims[b, t]))
        out[c.item()] = r
    return out
