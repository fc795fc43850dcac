"""Metrics against reference implementations and hand-worked cases (fast)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from conceptlens import metrics as M


def clustered(n=300, d=16, k=5, spread=0.05, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d))
    y = rng.integers(0, k, n)
    return (centres[y] + spread * rng.normal(size=(n, d))).astype(np.float32), y


# ---- TwoNN ------------------------------------------------------------------
@pytest.mark.parametrize("seed,d", [(0, 5), (1, 30)])
def test_twonn_matches_skdim(seed, d):
    skdim = pytest.importorskip("skdim")
    X = np.random.default_rng(seed).normal(size=(400, d)).astype(np.float32)
    ref = skdim.id.TwoNN(discard_fraction=0.1).fit(X.astype(np.float64))
    # The installed scikit-dimension build uses F_i = i / N for i = 1..n_keep.
    ours, n_dup = M.twonn(X, discard_fraction=0.1, cdf_offset=1)
    assert n_dup == 0
    assert ours == pytest.approx(ref.dimension_, rel=1e-5)
    # Our default (public skdim code, F_i = (i - 1) / N) on skdim's own log(mu).
    x = ref.x_.ravel()
    y = -np.log(1 - np.arange(len(x)) / len(X))
    assert M.twonn(X, discard_fraction=0.1)[0] == pytest.approx(x @ y / (x @ x), rel=1e-5)


def test_twonn_hyperball_reference_value():
    skdim = pytest.importorskip("skdim")
    X = skdim.datasets.hyperBall(n=30, d=5, random_state=0)
    X = np.hstack([X, np.zeros((30, 5))])
    # 4.11323: the public scikit-dimension test value (notes); 4.63403: the installed build's.
    assert M.twonn(X, discard_fraction=0.05)[0] == pytest.approx(4.11323, abs=1e-5)
    assert M.twonn(X, discard_fraction=0.05, cdf_offset=1)[0] == pytest.approx(4.63403, abs=1e-5)


def test_twonn_drops_duplicates():
    X = np.random.default_rng(0).normal(size=(200, 4))
    d0, _ = M.twonn(X)
    d1, n_dup = M.twonn(np.vstack([X, X[:7]]))
    assert n_dup == 7 and d1 == pytest.approx(d0)


# ---- Clopper-Pearson -------------------------------------------------------
@pytest.mark.parametrize("k,n,lo,hi", [(45, 50, 0.781865, 0.966725), (7, 10, 0.347547, 0.933260),
                                       (0, 20, 0.0, 0.168433), (20, 20, 0.831567, 1.0)])
def test_clopper_pearson_public_values(k, n, lo, hi):
    assert M.clopper_pearson(k, n) == pytest.approx((lo, hi), abs=1e-6)


def test_clopper_pearson_matches_statsmodels():
    from statsmodels.stats.proportion import proportion_confint
    for n in (1, 2, 5, 20, 37, 200):
        for k in range(0, n + 1, max(1, n // 7)):
            for alpha in (0.05, 0.1):
                ref = proportion_confint(k, n, alpha=alpha, method="beta")
                assert M.clopper_pearson(k, n, alpha) == pytest.approx(tuple(map(float, ref)), abs=1e-9)


def test_clopper_pearson_validation():
    with pytest.raises(ValueError, match="k must be"):
        M.clopper_pearson(5, 4)
    with pytest.raises(ValueError, match="n must be"):
        M.clopper_pearson(0, 0)


# ---- aNMI and purity ---------------------------------------------------------
def test_anmi_matches_sklearn():
    from sklearn.metrics import adjusted_mutual_info_score
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 5, 500), rng.integers(0, 7, 500)
    assert M.anmi(a, b) == adjusted_mutual_info_score(a, b, average_method="arithmetic")
    with pytest.raises(ValueError, match="entries"):
        M.anmi(a, b[:10])


def test_purity_hand_cases():
    assert M.purity([3, 3, 3, 3], 4) == (1.0, 3, 1.0)
    p, top, share = M.purity([0, 1, 2, 3], 4)          # uniform over all K classes
    assert p == 0.0 and share == 0.25
    p, top, share = M.purity([0, 0, 1, 1], 4)          # H = log 2, K = 4 -> 1 - 1/2
    assert p == pytest.approx(0.5) and top == 0 and share == 0.5
    p, top, _ = M.purity([1, 1, 1, 0], 2)              # 1 - H(3/4, 1/4) / log 2
    h = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert p == pytest.approx(1 - h / math.log(2)) and top == 1
    assert math.isnan(M.purity([0, 0], 1)[0])         # K < 2 undefined
    with pytest.raises(ValueError, match="n_classes"):
        M.purity([0, 1, 2], 2)


def test_clustering_equal_to_labels_and_shuffled():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 200)
    assert M.anmi(y, y) == pytest.approx(1.0)
    assert all(M.purity(y[y == c], 10)[0] == 1.0 for c in range(10))
    shuffled = rng.permutation(y)
    assert abs(M.anmi(y, shuffled)) < 0.01
    assert np.mean([M.purity(y[shuffled == c], 10)[0] for c in range(10)]) < 0.02


# ---- neighbours, kNN, CL -------------------------------------------------------
def test_chunked_neighbours_equal_brute_force():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(257, 12)).astype(np.float32)
    Q = rng.normal(size=(61, 12)).astype(np.float32)
    Xn, Qn = M.l2_normalize(X), M.l2_normalize(Q)
    sims, idx = M.nearest_cosine(Q, X, k=3, block_size=7)
    full = Qn @ Xn.T
    assert np.array_equal(idx, np.argsort(-full, axis=1)[:, :3])
    assert np.allclose(sims, np.sort(full, axis=1)[:, ::-1][:, :3], atol=1e-6)
    # Self-excluded Euclidean neighbours.
    d, i = M.nearest_euclidean_self(X, k=2, block_size=10)
    D = np.sqrt(((X[:, None].astype(np.float64) - X[None].astype(np.float64)) ** 2).sum(-1))
    np.fill_diagonal(D, np.inf)
    assert np.array_equal(i, np.argsort(D, axis=1)[:, :2])
    assert np.allclose(d, np.sort(D, axis=1)[:, :2])
    # Self-exclusion in the cosine search.
    _, j = M.nearest_cosine(X, X, k=1, exclude=np.arange(len(X)), block_size=50)
    assert not np.any(j[:, 0] == np.arange(len(X)))


def test_knn_acc_matches_sklearn():
    from sklearn.neighbors import KNeighborsClassifier
    X, y = clustered(n=400, spread=0.8, seed=2)
    tr, te = slice(0, 300), slice(300, None)
    ref = KNeighborsClassifier(n_neighbors=1, metric="cosine").fit(X[tr], y[tr]).score(X[te], y[te])
    assert M.knn_accuracy(X[tr], y[tr], X[te], y[te], block_size=17) == pytest.approx(ref)


def test_cl_perfectly_separated_is_one():
    X, y = clustered(n=500, k=6, spread=0.01, seed=3)
    assert M.cluster_learnability(X, y, n_chunks=5, n_orders=2, random_state=0) == 1.0
    assert M.cluster_learnability_heldout(X[:400], y[:400], X[400:], y[400:]) == 1.0


def test_cl_random_labels_is_low_and_seeded():
    X, _ = clustered(n=400, k=6, spread=0.01, seed=3)
    y = np.random.default_rng(0).integers(0, 8, 400)
    a = M.cluster_learnability(X, y, random_state=1)
    assert a < 0.3 and a == M.cluster_learnability(X, y, random_state=1)


# ---- 2AFC -----------------------------------------------------------------------
def test_2afc_invariants_property():
    rng = np.random.default_rng(0)
    for rep in range(60):
        n, k = int(rng.integers(40, 300)), int(rng.integers(2, 12))
        labels = rng.integers(0, k, n)
        X = rng.normal(size=(n, 5))
        hard = M.hard_negative_clusters(X, labels)
        for negative in ("random", "hard"):
            tr = M.make_trials(labels, n_trials=20, n_refs=10, negative=negative, hard=hard,
                               random_state=rep)
            for c, refs, q, neg in zip(tr.cluster, tr.refs, tr.query, tr.negative):
                assert len(set(refs)) == 10 and q not in refs
                assert np.all(labels[refs] == c) and labels[q] == c
                assert labels[neg] != c
                if negative == "hard":
                    assert labels[neg] == hard[c]
            sizes = np.bincount(labels, minlength=k)
            present = set(np.unique(labels).tolist())
            assert set(tr.skipped) == {c for c in present if sizes[c] < 11}
            for c in present - set(tr.skipped):
                assert np.sum(tr.cluster == c) == 20


def test_hard_negative_is_nearest_centroid():
    X = np.array([[0.0], [0.2], [1.0], [1.2], [5.0], [5.2]])
    labels = np.array([0, 0, 1, 1, 2, 2])
    assert M.hard_negative_clusters(X, labels) == {0: 1, 1: 0, 2: 1}


def test_2afc_validation_and_proxy_annotator():
    labels = np.repeat(np.arange(4), 30)
    with pytest.raises(ValueError, match="at least 20"):
        M.make_trials(labels, n_trials=5)
    # An annotator that sees the true groups is always right; a blind one is at chance.
    onehot = np.eye(4)[labels]
    tr = M.make_trials(labels, n_trials=40, random_state=0)
    assert M.annotate(tr, onehot).all()
    coh = M.coherence(tr, M.annotate(tr, onehot))
    assert coh[0][0] == 1.0 and coh[0][3] == 40 and coh[0][1] == pytest.approx(M.clopper_pearson(40, 40)[0])
    blind = np.ones((len(labels), 3))
    acc = M.annotate(tr, blind, random_state=0).mean()
    assert 0.35 < acc < 0.65


# ---- CLID -----------------------------------------------------------------------
def test_clid_and_wclid():
    cl = np.array([0.5, 0.6, 0.7, 0.8])
    id_ = np.array([10.0, 12.0, 11.0, 15.0])
    z = M.clid(cl, id_)
    assert z == pytest.approx(M.zscore(cl) + M.zscore(id_))
    assert abs(M.zscore(cl).mean()) < 1e-12 and M.zscore(cl).std() == pytest.approx(1)
    y = 0.3 * cl + 0.01 * id_ + 0.1
    pred, w = M.wclid(cl, id_, y)
    assert pred == pytest.approx(y) and w == pytest.approx([0.3, 0.01, 0.1])
    assert np.isnan(M.clid([0.5], [3.0])).all()
    c = M.correlations(cl, y)
    assert c["n_checkpoints"] == 4 and -1 <= c["pearson"] <= 1
    assert math.isnan(M.correlations([1, 1, 1], [1, 2, 3])["pearson"])


# ---- captions ---------------------------------------------------------------------
def test_eq4_hand_case():
    # Cluster 0: captions along e1, e1, and one between e1 and e2; cluster 1 along e2.
    s = 1 / math.sqrt(2)
    E = np.array([[1, 0], [1, 0], [s, s], [0, 1], [0, 1]], dtype=float)
    labels = np.array([0, 0, 0, 1, 1])
    scores = M.eq4_scores(E, labels)
    # Row 0: intra (0 + (1 - s)) / 3, inter mean distance to two e2 captions = 1.
    assert scores[0] == pytest.approx((1 - s) / 3 - 1)
    assert scores[2] == pytest.approx(2 * (1 - s) / 3 - (1 - s))
    picked = M.class_captions(E, labels)
    assert picked[0][0] == 0 and picked[1][0] == 3
    # Brute force of the equation.
    D = 1 - E @ E.T / np.outer(np.linalg.norm(E, axis=1), np.linalg.norm(E, axis=1))
    for i in range(5):
        same = labels == labels[i]
        brute = D[i, same].sum() / same.sum() - D[i, ~same].mean()
        assert scores[i] == pytest.approx(brute)
        no_neg = M.eq4_scores(E, labels, negative=False)[i]
        assert no_neg == pytest.approx(D[i, same].sum() / same.sum())


def test_eq4_negative_term_matters():
    # Row 2 is the most central caption of cluster 0 but leans towards cluster 1;
    # the negative term prefers row 1, which is furthest from cluster 1.
    E = np.array([[1, 0, 0.5], [1, 0, -0.5], [1, 0.3, 0], [0.6, 0.8, 0], [0.6, 0.8, 0.1]])
    labels = np.array([0, 0, 0, 1, 1])
    assert M.class_captions(E, labels, negative=False)[0][0] == 2
    assert M.class_captions(E, labels, negative=True)[0][0] == 1


def test_rouge_ablation_hand_case():
    from rouge_score import rouge_scorer
    texts = ["a red circle", "a small red circle", "a red square",
             "a blue square", "a big blue square"]
    labels = np.array([0, 0, 0, 1, 1])
    out = M.class_captions_rouge(texts, labels)
    sc = rouge_scorer.RougeScorer(["rougeL"])
    d = lambda a, b: 1 - sc.score(a, b)["rougeL"].fmeasure  # noqa: E731
    for c in (0, 1):
        inside = [i for i in range(5) if labels[i] == c]
        outside = [i for i in range(5) if labels[i] != c]
        brute = {i: sum(d(texts[i], texts[j]) for j in inside if j != i) / len(inside)
                 - sum(d(texts[i], texts[j]) for j in outside) / len(outside) for i in inside}
        best = min(brute, key=lambda i: (brute[i], i))
        assert out[c][0] == best and out[c][1] == pytest.approx(brute[best])
    assert out[0][0] == 1     # "a small red circle" is the most circle-like, least square-like


def test_describability_proxy():
    # Two clusters on separate axes; caption 0 points at cluster 0.
    I = np.array([[1, 0.05 * i] for i in range(12)] + [[0.05 * i, 1] for i in range(12)], dtype=float)
    clusters = np.array([0] * 12 + [1] * 12)
    T = np.array([[1.0, 0.0], [0.0, 1.0]])
    out = M.describability(T, [0, 1], I, clusters, top_n=10, n_pairs=20)
    for c in (0, 1):
        assert out[c] == {"hits": 10, "top1": True, "top5": True, "binary": 1.0}
    wrong = M.describability(T[::-1], [0, 1], I, clusters)
    assert wrong[0]["hits"] == 0 and wrong[0]["binary"] == 0.0
