"""Concept quality (the concept-quality paper): purity matrices, the oracle impurity score,
the concept-correlation nicher and niche purity / impurity.

A concept representation is a list of k arrays, one per learnt concept, each (n, d_i).
Ground-truth concepts are an (n, k_true) integer array (binary 0/1 or 0..m-1).

The purity matrix needs k_learnt x k_true fresh one-hidden-layer classifiers per seed.
They are trained together: all pairs share the split and the minibatch order (each pair
still has its own weights), so one batched matrix product per layer trains them all in
numpy. sklearn's MLPClassifier would fit them one at a time, orders of magnitude slower.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import rng as rngs

HIDDEN = 32
BETAS = tuple(round(0.05 * i, 2) for i in range(20))  # 0, 0.05, ..., 0.95 (the public code's grid)
PAPER_BETA = 0.2
# Multiclass purity AUC: "ovo" macro one-vs-one over the classes present (the default),
# "ovr" macro one-vs-rest (what the public code's one-hot `roc_auc_score` computes).
MULTICLASS = ("ovo", "ovr")


# ---- AUC ---------------------------------------------------------------------------------
def binary_auc(y_true, score) -> float:
    """ROC AUC of a binary target (Mann-Whitney U with average ranks for ties, as sklearn)."""
    y = np.asarray(y_true).astype(bool)
    s = np.asarray(score, np.float64)
    if y.shape != s.shape or y.ndim != 1:
        raise ValueError(f"y_true and score must be 1-D of one length, got {y.shape} and {s.shape}")
    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError("y_true has a single class: AUC is undefined")
    # scipy.stats here, not at import: the dashboard's page registry imports this module, and
    # scipy.stats was a third of the app's first import (issue 25; docs/scale.md).
    from scipy.stats import rankdata

    r = rankdata(s)
    return float((r[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def ovo_auc(y_true, proba, classes=None) -> float:
    """Macro one-vs-one AUC (Hand & Till 2001, sklearn's `multi_class="ovo"`) over the classes
    present in `y_true`; `proba[:, c]` scores class `classes[c]` (default: c). Two classes:
    the binary AUC of the second column."""
    y = np.asarray(y_true)
    P = np.asarray(proba, np.float64)
    classes = np.arange(P.shape[1]) if classes is None else np.asarray(classes)
    if P.ndim != 2 or len(P) != len(y) or len(classes) != P.shape[1]:
        raise ValueError(f"proba must be (n={len(y)}, {len(classes)} classes), got {P.shape}")
    col = {c: i for i, c in enumerate(classes.tolist())}
    present = [c for c in classes.tolist() if (y == c).any()]
    unknown = set(np.unique(y).tolist()) - set(col)
    if unknown:
        raise ValueError(f"y_true has values {sorted(unknown)} that proba has no column for")
    if len(present) < 2:
        raise ValueError("y_true has a single class: AUC is undefined")
    if len(classes) == 2 and len(present) == 2:
        return binary_auc(y == classes[1], P[:, 1])
    scores = []
    for a_i, a in enumerate(present):
        for b in present[a_i + 1 :]:
            m = (y == a) | (y == b)
            ab = binary_auc(y[m] == a, P[m, col[a]])
            ba = binary_auc(y[m] == b, P[m, col[b]])
            scores.append((ab + ba) / 2)
    return float(np.mean(scores))


def ovr_auc(y_true, proba, classes=None) -> float:
    """Macro one-vs-rest AUC over the classes present in `y_true` (the public code's
    `roc_auc_score(one_hot(y), proba)`, sklearn's `multi_class="ovr"`): the mean of each
    class's binary AUC of its column. Two classes: the binary AUC of the second column."""
    y = np.asarray(y_true)
    P = np.asarray(proba, np.float64)
    classes = np.arange(P.shape[1]) if classes is None else np.asarray(classes)
    if P.ndim != 2 or len(P) != len(y) or len(classes) != P.shape[1]:
        raise ValueError(f"proba must be (n={len(y)}, {len(classes)} classes), got {P.shape}")
    unknown = set(np.unique(y).tolist()) - set(classes.tolist())
    if unknown:
        raise ValueError(f"y_true has values {sorted(unknown)} that proba has no column for")
    present = [i for i, c in enumerate(classes.tolist()) if (y == c).any()]
    if len(present) < 2:
        raise ValueError("y_true has a single class: AUC is undefined")
    if len(classes) == 2:
        return binary_auc(y == classes[1], P[:, 1])
    return float(np.mean([binary_auc(y == classes[i], P[:, i]) for i in present]))


def multiclass_auc(y_true, proba, classes=None, multiclass: str = "ovo") -> float:
    """ovo_auc or ovr_auc by name (see MULTICLASS); equal for two classes."""
    if multiclass not in MULTICLASS:
        raise ValueError(f"multiclass must be one of {', '.join(MULTICLASS)}, got {multiclass!r}")
    return (ovo_auc if multiclass == "ovo" else ovr_auc)(y_true, proba, classes)


# ---- the batched one-hidden-layer classifiers --------------------------------------------
def _stack(reps: list[np.ndarray], n: int) -> np.ndarray:
    """(k, n, D) float32, each representation zero-padded to the widest D."""
    reps = [np.asarray(r, np.float32).reshape(n, -1) for r in reps]
    D = max(r.shape[1] for r in reps)
    out = np.zeros((len(reps), n, D), np.float32)
    for i, r in enumerate(reps):
        out[i, :, : r.shape[1]] = r
    return out


def _bmm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a[i] @ b[i] for every i, one BLAS call each: numpy's stacked matmul falls back to a
    slow loop for some strides (about 15x slower here)."""
    out = np.empty((a.shape[0], a.shape[1], b.shape[2]), np.result_type(a, b))
    for i in range(a.shape[0]):
        np.matmul(a[i], b[i], out=out[i])
    return out


def pairwise_mlp_auc(*args, **kwargs) -> np.ndarray:
    """AUC[i, j] on rows `test` of a fresh one-hidden-layer ReLU classifier (softmax output,
    cross-entropy, L2 `alpha`, Adam) trained on rows `train` to predict `targets[:, j]` from
    `reps[i]` (standardised on `train`). Multiclass targets: macro one-vs-one AUC, or
    one-vs-rest with multiclass="ovr" (multiclass_auc).

    Arguments: reps, targets, train, test, hidden, steps, batch_size, lr, alpha, random_state,
    multiclass."""
    from threadpoolctl import threadpool_limits

    # The products are small: BLAS threads only wait on each other (40x slower on a busy machine).
    with threadpool_limits(limits=1, user_api="blas"):
        return _pairwise_mlp_auc(*args, **kwargs)


def _pairwise_mlp_auc(
    reps: list[np.ndarray],
    targets: np.ndarray,
    train: np.ndarray,
    test: np.ndarray,
    hidden: int = HIDDEN,
    steps: int = 200,
    batch_size: int = 128,
    lr: float = 0.02,
    alpha: float = 1e-4,
    random_state: int = 0,
    multiclass: str = "ovo",
) -> np.ndarray:
    if multiclass not in MULTICLASS:
        raise ValueError(f"multiclass must be one of {', '.join(MULTICLASS)}, got {multiclass!r}")
    Y = np.asarray(targets)
    if Y.ndim != 2:
        raise ValueError(f"targets must be (n, k_true), got shape {Y.shape}")
    n, kt = Y.shape
    if not len(reps):
        raise ValueError("reps: no representation given")
    if (Y < 0).any() or not np.issubdtype(Y.dtype, np.integer):
        raise ValueError("targets must be non-negative integers (concept values)")
    train, test = np.asarray(train), np.asarray(test)
    if len(train) < 2 or len(test) < 2:
        raise ValueError(f"train and test need at least 2 rows each, got {len(train)} and {len(test)}")
    X = _stack(reps, n)
    kl, _, D = X.shape
    mu = X[:, train].mean(axis=1, keepdims=True)
    sd = X[:, train].std(axis=1, keepdims=True)
    X = (X - mu) / np.where(sd > 0, sd, 1)
    m = Y.max(axis=0) + 1  # classes of each target
    M = max(2, int(m.max()))
    onehot = np.zeros((kt, n, M), np.float32)
    onehot[np.arange(kt)[:, None], np.arange(n)[None, :], Y.T] = 1
    # Logits of classes a target does not have are pushed to -inf (they never win mass).
    invalid = (np.arange(M)[None, :] >= np.maximum(m, 2)[:, None]).astype(np.float32) * -1e9

    # Layout (kl, rows, kt * hidden): the kt networks reading learnt concept i share its
    # input, so layer 1 is one matrix product per i; layer 2 is block-diagonal (pair (i, j)
    # connects hidden block j to output block j only), again one product per i.
    rng = rngs.generator(random_state)
    lim1 = np.sqrt(6 / (D + hidden))
    lim2 = np.sqrt(6 / (hidden + M))
    block = np.kron(np.eye(kt, dtype=np.float32), np.ones((hidden, M), np.float32))
    params = [
        rng.uniform(-lim1, lim1, (kl, D, kt * hidden)).astype(np.float32),
        rng.uniform(-lim1, lim1, (kl, 1, kt * hidden)).astype(np.float32),
        rng.uniform(-lim2, lim2, (kl, kt * hidden, kt * M)).astype(np.float32) * block,
        rng.uniform(-lim2, lim2, (kl, 1, kt * M)).astype(np.float32),
    ]
    mask = invalid.reshape(1, 1, kt * M)
    target = onehot.transpose(1, 0, 2).reshape(n, kt * M)

    def forward(rows):
        W1, c1, W2, c2 = params
        # One input dimension (the usual concept): the product is an outer product.
        pre = X[:, rows] * W1 if D == 1 else _bmm(X[:, rows], W1)
        pre += c1
        h = np.maximum(pre, 0)
        logits = (_bmm(h, W2) + c2 + mask).reshape(kl, len(rows), kt, M)
        logits -= logits.max(axis=-1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=-1, keepdims=True)
        return pre, h, p

    first = [np.zeros_like(p) for p in params]
    second = [np.zeros_like(p) for p in params]
    b1, b2, eps = 0.9, 0.999, 1e-8
    bs = min(batch_size, len(train))
    order = np.empty(0, np.int64)
    for t in range(1, steps + 1):
        if len(order) < bs:
            order = np.concatenate([order, rng.permutation(train)])
        idx, order = order[:bs], order[bs:]
        pre, h, p = forward(idx)
        W1, _, W2, _ = params
        g = (p.reshape(kl, bs, kt * M) - target[idx]) / (bs * 1.0)  # d loss / d logits
        gW2 = _bmm(h.swapaxes(-1, -2), g)
        gW2 *= block
        gW2 += alpha * W2
        gc2 = g.sum(axis=1, keepdims=True)
        gh = _bmm(g, W2.swapaxes(-1, -2))
        np.multiply(gh, pre > 0, out=gh)
        gW1 = _bmm(X[:, idx].swapaxes(-1, -2), gh) + alpha * W1
        gc1 = gh.sum(axis=1, keepdims=True)
        for q, grad, f, s in zip(params, (gW1, gc1, gW2, gc2), first, second):
            f *= b1
            f += (1 - b1) * grad
            s *= b2
            s += (1 - b2) * grad * grad
            q -= lr * (f / (1 - b1**t)) / (np.sqrt(s / (1 - b2**t)) + eps)
    proba = forward(test)[2]  # (kl, n_test, kt, M)
    out = np.empty((kl, kt))
    for j in range(kt):
        yj = Y[test, j]
        for i in range(kl):
            out[i, j] = multiclass_auc(yj, proba[i, :, j, : max(int(m[j]), 2)], multiclass=multiclass)
    return out


# ---- purity matrices and oracle impurity ------------------------------------------------
# The share of rows the purity matrices are scored on (the paper's appendix 6.3: 80/20).
TEST_SHARE = 0.2


class UnsplittableConcept(ValueError):
    """No split holds both values of concept column `column` on each side (split_rows)."""

    def __init__(self, message: str, column: int):
        super().__init__(message)
        self.column = column


def split_rows(
    n: int, test_share: float = TEST_SHARE, random_state: int = 0, C=None, tries: int = 1000
) -> tuple[np.ndarray, np.ndarray]:
    """The shared 80/20 split of the purity matrices (the paper's appendix 6.3).

    With `C` (n x k concepts), a split leaving some concept with one value on either side
    (its AUC undefined, its classifier trained on one class) is drawn again from the same
    stream, up to `tries` times: the first draw is the plain permutation, so data whose
    concepts are all common split exactly as before; rare concepts (one's own images) get
    the first split that holds both values on each side. ValueError naming the concept's
    column when none does."""
    if not 0 < test_share < 1:
        raise ValueError(f"test_share must be in (0, 1), got {test_share}")
    rng = rngs.generator(random_state)
    k = int(round(n * test_share))
    C = None if C is None else np.asarray(C)
    bad = -1
    for _ in range(max(int(tries), 1)):
        perm = rng.permutation(n)
        train, test = np.sort(perm[k:]), np.sort(perm[:k])
        if C is None:
            return train, test
        one_sided = (j for j in range(C.shape[1]) if min(len(set(C[train, j])), len(set(C[test, j]))) < 2)
        bad = next(one_sided, -1)
        if bad < 0:
            return train, test
    raise UnsplittableConcept(
        f"concept column {bad} keeps a single value on one side of every one of {tries} random "
        f"{1 - test_share:.0%}/{test_share:.0%} splits of its {n} rows: too few rows hold its other value(s)",
        bad,
    )


def concept_inputs(C: np.ndarray) -> list[np.ndarray]:
    """Ground-truth concepts as representations: a binary concept as its value, a
    multiclass one one-hot (an MLP reads categories, not their order)."""
    C = np.asarray(C)
    out = []
    for j in range(C.shape[1]):
        m = int(C[:, j].max()) + 1
        out.append(C[:, j : j + 1].astype(np.float32) if m <= 2 else np.eye(m, dtype=np.float32)[C[:, j]])
    return out


def purity_matrix(reps, C, random_state: int = 0, test_share: float = TEST_SHARE, **mlp) -> np.ndarray:
    """pi(reps, C): (k_learnt, k_true) AUC of predicting true concept j from learnt concept i,
    on a random `test_share` of the rows after training on the rest (Definition 1).
    `multiclass` (in **mlp): "ovo" (default) or "ovr", see multiclass_auc."""
    C = np.asarray(C)
    train, test = split_rows(len(C), test_share, random_state, C=C)
    return pairwise_mlp_auc(list(reps), C, train, test, random_state=random_state, **mlp)


def oracle_matrix(C, random_state: int = 0, test_share: float = TEST_SHARE, **mlp) -> np.ndarray:
    """pi(C, C) with its diagonal set to 1: how well the true concepts predict each other."""
    P = purity_matrix(concept_inputs(C), C, random_state, test_share, **mlp)
    np.fill_diagonal(P, 1.0)
    return P


def align(P: np.ndarray, learnt: list[str], true: list[str]) -> list[int]:
    """For each true concept, the learnt concept aligned to it: the one of the same name
    where there is one, the rest greedily by AUC (the paper's appendix 6.4: repeatedly the
    best remaining (learnt, true) pair), each learnt concept used once."""
    P = np.asarray(P, np.float64)
    if P.shape != (len(learnt), len(true)):
        raise ValueError(f"P must be (len(learnt)={len(learnt)}, len(true)={len(true)}), got {P.shape}")
    if len(learnt) < len(true):
        raise ValueError(f"{len(learnt)} learnt concepts cannot be aligned to {len(true)} true ones")
    out = [-1] * len(true)
    used = set()
    pos = {name: i for i, name in enumerate(learnt)}
    for j, name in enumerate(true):
        if name in pos:
            out[j] = pos[name]
            used.add(pos[name])
    while -1 in out:
        best, pick = -np.inf, None
        for j in (j for j, a in enumerate(out) if a < 0):
            for i in (i for i in range(len(learnt)) if i not in used):
                if P[i, j] > best:
                    best, pick = P[i, j], (i, j)
        i, j = pick
        out[j] = i
        used.add(i)
    return out


def impurity(P_aligned: np.ndarray, reference: np.ndarray) -> float:
    """2/k ||P - reference||_F for k x k matrices (Definition 2)."""
    P, R = np.asarray(P_aligned, np.float64), np.asarray(reference, np.float64)
    if P.ndim != 2 or P.shape[0] != P.shape[1] or P.shape != R.shape:
        raise ValueError(f"purity matrices must be square and of one shape, got {P.shape} and {R.shape}")
    return float(2 * np.linalg.norm(P - R) / len(P))


def ois(P_aligned, oracle) -> float:
    """Oracle impurity score: 0 = the learnt concepts predict each true concept exactly as
    well as the true concepts predict one another."""
    return impurity(P_aligned, oracle)


def non_oracle_impurity(P_aligned) -> float:
    """The same distance to the purity of independent concepts: 1 on the diagonal, 0.5 off it."""
    k = len(P_aligned)
    return impurity(P_aligned, np.full((k, k), 0.5) + 0.5 * np.eye(k))


# ---- concept niches ------------------------------------------------------------------------
def niche_correlations(reps: list[np.ndarray], y: np.ndarray, labels) -> np.ndarray:
    """(k, L) |Pearson| between learnt concept i (the largest over its d dimensions) and the
    indicator of label `labels[j]` (Definition 3's concept-correlation nicher); a constant
    dimension correlates 0."""
    y = np.asarray(y)
    Yl = np.stack([(y == lab).astype(np.float64) for lab in labels], axis=1)
    Yc = Yl - Yl.mean(axis=0)
    ny = np.sqrt((Yc**2).sum(axis=0))
    out = np.zeros((len(reps), len(labels)))
    for i, r in enumerate(reps):
        R = np.asarray(r, np.float64).reshape(len(y), -1)
        Rc = R - R.mean(axis=0)
        nr = np.sqrt((Rc**2).sum(axis=0))
        with np.errstate(invalid="ignore", divide="ignore"):
            c = (Rc.T @ Yc) / np.outer(nr, ny)
        out[i] = np.nanmax(np.abs(np.where(np.isfinite(c), c, 0.0)), axis=0)
    return np.clip(out, 0.0, 1.0)


def niches(corr: np.ndarray, beta: float) -> np.ndarray:
    """(k, L) bool: learnt concept i is in label j's niche (|corr| > beta)."""
    if not 0 <= beta <= 1:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    return np.asarray(corr) > beta


def concept_columns(reps: list[np.ndarray]) -> list[np.ndarray]:
    """Column indices of each learnt concept in the flattened matrix `np.hstack(reps)`."""
    out, start = [], 0
    for r in reps:
        d = np.asarray(r).reshape(len(r), -1).shape[1]
        out.append(np.arange(start, start + d))
        start += d
    return out


def fit_label_predictor(Xtr: np.ndarray, ytr: np.ndarray, random_state: int = 0):
    """The label predictor f: a ReLU MLP 20-20 on every concept (the paper's and its code's),
    inputs standardised inside the model so that a zeroed concept means a raw value of 0."""
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    f = make_pipeline(
        StandardScaler(),
        MLPClassifier(
            hidden_layer_sizes=(20, 20),
            learning_rate_init=0.01,
            max_iter=300,
            random_state=random_state,
        ),
    )

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        f.fit(Xtr, ytr)
    return f


def _label_auc(proba: np.ndarray, y: np.ndarray, col: int, label) -> float:
    target = y == label
    if target.all() or not target.any():
        return float("nan")
    return binary_auc(target, proba[:, col])


def niche_scores(
    f, X: np.ndarray, y: np.ndarray, columns: list[np.ndarray], corr: np.ndarray, betas=BETAS
) -> list[dict]:
    """Per beta and label: niche size, NPS (f with every concept outside the niche zeroed:
    its connections pruned, Definition 5) and NIS (every concept inside it zeroed: the
    public code's curve, and Definition 6) as one-vs-rest test AUCs of that label."""
    labels = list(f.classes_)
    if corr.shape != (len(columns), len(labels)):
        raise ValueError(f"corr must be (k={len(columns)}, labels={len(labels)}), got {corr.shape}")
    y = np.asarray(y)
    kept = {}  # which concepts are kept -> f's probabilities: niches repeat across betas

    def proba(keep: np.ndarray) -> np.ndarray:
        key = keep.tobytes()
        if key not in kept:
            Xz = X.copy()
            for i in np.flatnonzero(~keep):
                Xz[:, columns[i]] = 0
            kept[key] = f.predict_proba(Xz)
        return kept[key]

    rows = []
    for beta in betas:
        inside = niches(corr, beta)
        for j, lab in enumerate(labels):
            rows.append(
                {
                    "beta": float(beta),
                    "label": lab,
                    "niche_size": int(inside[:, j].sum()),
                    "nps": _label_auc(proba(inside[:, j]), y, j, lab),
                    "nis": _label_auc(proba(~inside[:, j]), y, j, lab),
                }
            )
    return rows


def niche_impurity_code(
    f, X: np.ndarray, y: np.ndarray, columns: list[np.ndarray], corr: np.ndarray, betas=BETAS
) -> dict[float, float]:
    """beta -> niche impurity as the public code computes it (`niching.niche_impurity`) for a
    task of three or more labels: each label's probability column with its niche zeroed,
    stacked, a softmax ACROSS labels, then the mean over labels present of the one-vs-rest
    AUC of each column. (niche_scores scores each raw column instead: Definitions 5-6.)
    Binary tasks: the code scores the raw column, so this is niche_scores' `nis`."""
    labels = list(f.classes_)
    if corr.shape != (len(columns), len(labels)):
        raise ValueError(f"corr must be (k={len(columns)}, labels={len(labels)}), got {corr.shape}")
    y = np.asarray(y)
    out = {}
    for beta in betas:
        inside = niches(corr, beta)
        cols = []
        for j in range(len(labels)):
            Xz = X.copy()
            for i in np.flatnonzero(inside[:, j]):
                Xz[:, columns[i]] = 0
            cols.append(f.predict_proba(Xz)[:, j])
        P = np.stack(cols, axis=1).astype(np.float64)
        if len(labels) > 2:
            P = np.exp(P - P.max(axis=1, keepdims=True))
            P /= P.sum(axis=1, keepdims=True)
        vals = [_label_auc(P, y, j, lab) for j, lab in enumerate(labels)]
        out[float(beta)] = float(np.nanmean(vals))
    return out


def task_auc(f, X: np.ndarray, y: np.ndarray) -> float:
    """Mean one-vs-rest test AUC of f over the labels present."""
    proba = f.predict_proba(X)
    vals = [_label_auc(proba, np.asarray(y), j, lab) for j, lab in enumerate(f.classes_)]
    return float(np.nanmean(vals))


def area_over_beta(betas, values) -> float:
    """Trapezoidal area under `values` over `betas`, divided by the range: a mean level."""
    b, v = np.asarray(betas, np.float64), np.asarray(values, np.float64)
    if len(b) < 2:
        return float(v.mean())
    return float(np.trapezoid(v, b) / (b[-1] - b[0]))


def mean_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, lo, hi): Student-t interval of the mean over seeds; a single value has none."""
    from scipy import stats

    v = np.asarray(values, np.float64)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return (float("nan"),) * 3
    m = float(v.mean())
    if len(v) < 2:
        return m, float("nan"), float("nan")
    half = float(stats.t.ppf((1 + level) / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))
    return m, m - half, m + half
