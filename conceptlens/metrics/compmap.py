"""CompMap (yun2023): primitive concept activations, composition models, interventions,
Delta and the top-k weight accuracies. Pure numpy / scikit-learn; docs/compmap.md has the
definitions and the choices made.

A composition model is a multinomial logistic regression from a primitive vector to the
composite concept (class), scikit-learn's defaults (L2, C = 1) as in the paper. `prim` is
trained on a VL model's activations, `oracle` on the ground-truth primitives. At test time
`prim` is also fed the ground truth (Interv(Full)) or its activations with the ground-truth
positives set to 1 (Interv(Partial)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import rng as rngs

LOGIT_SCALE = 100.0
Z95 = 1.959963984540054
MODELS = ("prim", "interv_full", "interv_partial", "oracle")
# lbfgs' default of 100 iterations stops short on a few hundred classes; the optimum is the same.
MAX_ITER = 2000


def _matrix(a, name: str) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} holds NaN or infinite values")
    return a


# ---- activations ---------------------------------------------------------------------------
def prompt_logits(image_emb, text_emb, scale: float = LOGIT_SCALE) -> np.ndarray:
    """scale x cosine(image, prompt): (n_images, n_prompts)."""
    img, txt = _matrix(image_emb, "image_emb"), _matrix(text_emb, "text_emb")
    if img.shape[1] != txt.shape[1]:
        raise ValueError(f"image_emb has dimension {img.shape[1]} but text_emb {txt.shape[1]}")
    for a, name in ((img, "image_emb"), (txt, "text_emb")):
        if (np.linalg.norm(a, axis=1) == 0).any():
            raise ValueError(f"{name} has a zero row: its cosine is undefined")
    img = img / np.linalg.norm(img, axis=1, keepdims=True)
    txt = txt / np.linalg.norm(txt, axis=1, keepdims=True)
    return scale * np.clip(img @ txt.T, -1.0, 1.0)


def activations(logits, groups, normalize) -> np.ndarray:
    """The composition models' input: per column, the logit (`raw`) or its softmax over the
    columns of the same group (`softmax`)."""
    z = _matrix(logits, "logits")
    groups, normalize = np.asarray(groups, dtype=object), np.asarray(normalize, dtype=object)
    if groups.shape != (z.shape[1],) or normalize.shape != (z.shape[1],):
        raise ValueError(
            f"groups and normalize need one entry per column ({z.shape[1]}), got "
            f"{groups.shape} and {normalize.shape}"
        )
    bad = set(normalize) - {"softmax", "raw"}
    if bad:
        raise ValueError(f"normalize must be 'softmax' or 'raw', got {sorted(map(str, bad))}")
    out = z.copy()
    for g in dict.fromkeys(groups):
        cols = np.flatnonzero(groups == g)
        modes = set(normalize[cols])
        if len(modes) > 1:
            raise ValueError(f"group {g!r} mixes normalize values {sorted(modes)}")
        if modes == {"softmax"}:
            e = np.exp(z[:, cols] - z[:, cols].max(axis=1, keepdims=True))
            out[:, cols] = e / e.sum(axis=1, keepdims=True)
    return out


# ---- ground truth and interventions ---------------------------------------------------------
def class_truth(values, threshold: float = 0.5) -> np.ndarray:
    """Binary class-level ground truth from shares of images (Koh et al.'s majority vote)."""
    return (_matrix(values, "values") >= threshold).astype(np.float64)


def intervene_partial(act, truth) -> np.ndarray:
    """Interv(Partial): the ground-truth positives set to 1, every other dimension keeps the
    VL model's activation."""
    act, truth = _matrix(act, "act"), _matrix(truth, "truth")
    if act.shape != truth.shape:
        raise ValueError(f"act {act.shape} and truth {truth.shape} differ in shape")
    return np.where(truth > 0, 1.0, act)


# ---- composition models ------------------------------------------------------------------
def fit_composition(X, y, seed: int = 0):
    """Multinomial logistic regression, scikit-learn defaults (L2, C = 1)."""
    from sklearn.linear_model import LogisticRegression

    X = _matrix(X, "X")
    y = np.asarray(y)
    if len(y) != len(X):
        raise ValueError(f"X has {len(X)} rows but y {len(y)}")
    if len(np.unique(y)) < 2:
        raise ValueError("a composition model needs at least 2 classes")
    return LogisticRegression(max_iter=MAX_ITER, random_state=seed).fit(X, y)


def class_weights(model) -> tuple[np.ndarray, np.ndarray]:
    """(classes, weights (n_classes, n_primitives)). With 2 classes scikit-learn keeps one row
    w for class 1; the symmetric softmax form is (-w/2, w/2), so class 0's weights are -w/2."""
    W = np.asarray(model.coef_, dtype=np.float64)
    if len(model.classes_) == 2 and len(W) == 1:
        W = np.vstack([-W[0] / 2, W[0] / 2])
    return np.asarray(model.classes_), W


def topk_weight_accuracy(weights, truth) -> tuple[float, float, int, int]:
    """yun2023 Table 4: for each class with k ground-truth primitives, its k largest weights.

    Returns (Acc-Instance, Acc-Class, number of (class, primitive) instances, number of
    classes): Acc-Instance is the share of all top-k slots that hold a ground-truth
    primitive, Acc-Class the share of classes whose top k are exactly their k primitives.
    Classes without a ground-truth primitive are left out. Ties go to the earlier column.
    """
    W, T = _matrix(weights, "weights"), _matrix(truth, "truth") > 0
    if W.shape != T.shape:
        raise ValueError(f"weights {W.shape} and truth {T.shape} differ in shape")
    hits = total = exact = classes = 0
    for w, t in zip(W, T):
        k = int(t.sum())
        if k == 0:
            continue
        top = np.argsort(-w, kind="stable")[:k]
        h = int(t[top].sum())
        hits, total, exact, classes = hits + h, total + k, exact + (h == k), classes + 1
    if classes == 0:
        return math.nan, math.nan, 0, 0
    return hits / total, exact / classes, total, classes


def score_models(
    X_train, G_train, y_train, X_test, G_test, y_test, truth_of, seed: int = 0
) -> tuple[dict, dict, dict]:
    """Train `prim` on activations X and `oracle` on ground truth G, score every model.

    `truth_of` maps a class to its ground-truth vector (for the weight accuracies). Returns
    ({model: per-test-image correctness}, {"prim"/"oracle": `topk_weight_accuracy` of its
    weights}, {"prim"/"oracle": the fitted model}); an accuracy is the mean correctness.
    """
    prim = fit_composition(X_train, y_train, seed)
    oracle = fit_composition(G_train, y_train, seed)
    y_test = np.asarray(y_test)
    correct = {
        "prim": prim.predict(X_test) == y_test,
        "interv_full": prim.predict(G_test) == y_test,
        "interv_partial": prim.predict(intervene_partial(X_test, G_test)) == y_test,
        "oracle": oracle.predict(G_test) == y_test,
    }
    weights = {}
    for name, m in (("prim", prim), ("oracle", oracle)):
        classes, W = class_weights(m)
        weights[name] = topk_weight_accuracy(W, np.stack([truth_of(c) for c in classes]))
    return correct, weights, {"prim": prim, "oracle": oracle}


# ---- episodes ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Episode:
    classes: np.ndarray
    support: np.ndarray  # row indices, `shots` per class
    query: np.ndarray  # row indices, `queries` per class


def eligible_classes(labels, shots: int, queries: int) -> np.ndarray:
    """Classes with at least shots + queries rows."""
    values, counts = np.unique(np.asarray(labels), return_counts=True)
    return values[counts >= shots + queries]


def sample_episodes(
    labels, ways: int, shots: int, queries: int, n_episodes: int, seed: int = 0
) -> list[Episode]:
    """n-way k-shot episodes (Snell et al. 2017): `ways` classes drawn at random, then
    `shots` support and `queries` query rows per class, disjoint."""
    for v, name, lo in (
        (ways, "ways", 2),
        (shots, "shots", 1),
        (queries, "queries", 1),
        (n_episodes, "episodes", 1),
    ):
        if int(v) != v or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    labels = np.asarray(labels)
    pool = eligible_classes(labels, shots, queries)
    if len(pool) < ways:
        raise ValueError(
            f"{ways}-way {shots}-shot episodes with {queries} queries need {ways} "
            f"classes of at least {shots + queries} images; there are {len(pool)}"
        )
    rows = {c: np.flatnonzero(labels == c) for c in pool}
    rng = rngs.generator(seed, "seed")
    out = []
    for _ in range(n_episodes):
        classes = np.sort(rng.choice(pool, size=ways, replace=False))
        support, query = [], []
        for c in classes:
            pick = rng.choice(rows[c], size=shots + queries, replace=False)
            support.append(pick[:shots])
            query.append(pick[shots:])
        out.append(Episode(classes, np.concatenate(support), np.concatenate(query)))
    return out


# ---- intervals ----------------------------------------------------------------------------------
def mean_interval(values, bounds=(-1.0, 1.0)) -> tuple[float, float, float]:
    """Mean over episodes with the usual few-shot 95% interval, mean +- 1.96 sd / sqrt(n),
    clipped to the metric's range. NaNs (episodes without a value) are left out."""
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return math.nan, math.nan, math.nan
    m = float(v.mean())
    half = Z95 * float(v.std(ddof=1)) / math.sqrt(v.size) if v.size > 1 else 0.0
    return m, max(bounds[0], m - half), min(bounds[1], m + half)


def wilson(successes: float, n: int) -> tuple[float, float, float]:
    """A proportion with its Wilson 95% interval (stays inside [0, 1], sensible at 0 and 1)."""
    if n <= 0:
        return math.nan, math.nan, math.nan
    p = successes / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return p, min(p, max(0.0, centre - half)), max(p, min(1.0, centre + half))
