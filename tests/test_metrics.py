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
    # Our default is lu2022's F_i = i / N, i = 1..n_keep - what the installed skdim build does.
    ours, n_dup = M.twonn(X, discard_fraction=0.1)
    assert n_dup == 0
    assert ours == pytest.approx(ref.dimension_, rel=1e-9)
    # cdf_offset=0: the public skdim code, F_i = (i - 1) / N, on skdim's own log(mu).
    x = ref.x_.ravel()
    y = -np.log(1 - np.arange(len(x)) / len(X))
    assert M.twonn(X, discard_fraction=0.1, cdf_offset=0)[0] == pytest.approx(x @ y / (x @ x), rel=1e-9)


def test_twonn_hyperball_reference_value():
    skdim = pytest.importorskip("skdim")
    X = skdim.datasets.hyperBall(n=30, d=5, random_state=0)
    X = np.hstack([X, np.zeros((30, 5))])
    # 4.63403: F_i = i / N (lu2022; the installed skdim build); 4.11323: the public skdim
    # code's test value, F_i = (i - 1) / N (notes/reference-implementations.md).
    assert M.twonn(X, discard_fraction=0.05)[0] == pytest.approx(4.63403, abs=1e-5)
    assert M.twonn(X, discard_fraction=0.05, cdf_offset=0)[0] == pytest.approx(4.11323, abs=1e-5)


def test_twonn_drops_duplicates():
    X = np.random.default_rng(0).normal(size=(200, 4))
    d0, _ = M.twonn(X)
    d1, n_dup = M.twonn(np.vstack([X, X[:7]]))
    assert n_dup == 7 and d1 == pytest.approx(d0)
    # Without discarding, F = 1 (the largest mu) is never fitted: the value stays finite.
    assert np.isfinite(M.twonn(X, discard_fraction=0.0)[0])


def _blob_case(seed=0, n=2000, d=64, n_blob=40, gap=8e-5):
    """Random unit vectors plus a blob of near-duplicates about `gap` apart (after L2
    normalisation, in float32): more candidates within float32 error than any fixed slack."""
    rng = np.random.default_rng(seed)
    c = rng.normal(size=d)
    c /= np.linalg.norm(c)
    X = np.vstack([rng.normal(size=(n, d)), c + gap / np.sqrt(2 * d) * rng.normal(size=(n_blob, d))])
    return M.l2_normalize(X)


def test_twonn_neighbours_exact_on_near_duplicates():
    from sklearn.neighbors import NearestNeighbors

    X = _blob_case()
    X64 = X.astype(np.float64)
    ref_d, ref_i = NearestNeighbors(n_neighbors=3, algorithm="brute").fit(X64).kneighbors(X64)
    d, i = M.nearest_euclidean_self(X, k=2, block_size=300)
    # Rows of the blob: a float32 ranking re-measured on a few candidates got 38 of 40 wrong.
    assert np.array_equal(i, ref_i[:, 1:])
    # sklearn's float64 |a|^2 + |b|^2 - 2ab is itself off by ~1e-12 here; ours are differences.
    np.testing.assert_allclose(d, ref_d[:, 1:], rtol=1e-6, atol=1e-11)
    mu = np.sort(ref_d[:, 2] / ref_d[:, 1])
    n_keep = int(len(mu) * 0.9)
    x, y = np.log(mu[:n_keep]), -np.log(1 - np.arange(1, n_keep + 1) / len(mu))
    assert M.twonn(X)[0] == pytest.approx(x @ y / (x @ x), rel=1e-6)  # the old search: 8e-4 off


def test_nearest_euclidean_self_exact_with_large_norms():
    # Far from the origin float32 cancellation in |a|^2 + |b|^2 - 2ab is large: the margin grows.
    rng = np.random.default_rng(3)
    X = 1000.0 + rng.normal(size=(300, 8))
    X[150:160] = X[150] + 1e-3 * rng.normal(size=(10, 8))
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    np.fill_diagonal(D, np.inf)
    d, i = M.nearest_euclidean_self(X, k=3, block_size=64)
    assert np.array_equal(i, np.argsort(D, axis=1, kind="stable")[:, :3])
    np.testing.assert_allclose(d, np.sort(D, axis=1)[:, :3], rtol=1e-9)


# ---- Clopper-Pearson -------------------------------------------------------
@pytest.mark.parametrize(
    "k,n,lo,hi",
    [
        (45, 50, 0.781865, 0.966725),
        (7, 10, 0.347547, 0.933260),
        (0, 20, 0.0, 0.168433),
        (20, 20, 0.831567, 1.0),
    ],
)
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
    p, top, share = M.purity([0, 1, 2, 3], 4)  # uniform over all K classes
    assert p == 0.0 and share == 0.25
    p, top, share = M.purity([0, 0, 1, 1], 4)  # H = log 2, K = 4 -> 1 - 1/2
    assert p == pytest.approx(0.5) and top == 0 and share == 0.5
    p, top, _ = M.purity([1, 1, 1, 0], 2)  # 1 - H(3/4, 1/4) / log 2
    h = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert p == pytest.approx(1 - h / math.log(2)) and top == 1
    assert math.isnan(M.purity([0, 0], 1)[0])  # K < 2 undefined
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


def test_one_nn_acc_matches_sklearn():
    from sklearn.neighbors import KNeighborsClassifier

    X, y = clustered(n=400, spread=0.8, seed=2)
    tr, te = slice(0, 300), slice(300, None)
    ref = KNeighborsClassifier(n_neighbors=1, metric="cosine").fit(X[tr], y[tr]).score(X[te], y[te])
    assert M.knn_accuracy(X[tr], y[tr], X[te], y[te], k=1, block_size=17) == pytest.approx(ref)


def _unit(s, phi):
    """A unit vector whose cosine with (1, 0, 0) is s."""
    r = math.sqrt(1 - s * s)
    return [s, r * math.cos(phi), r * math.sin(phi)]


def test_weighted_knn_hand_case():
    # Neighbours of q = e1: one of class 0 at cosine 0.9, two of class 1 at 0.87, three of
    # class 2 at 0.5. Votes exp(s / 0.07): class 0 e^12.857, class 1 2 e^12.429 (1.30x more),
    # class 2 3 e^7.14. The weighted 6-NN says 1, the 1-NN 0, a plain majority of 6 says 2.
    train = np.array(
        [
            _unit(0.9, 0),
            _unit(0.87, 1),
            _unit(0.87, 2),
            _unit(0.5, 3),
            _unit(0.5, 4),
            _unit(0.5, 5),
            _unit(-0.9, 0),
        ]
    )
    y = np.array([0, 1, 1, 2, 2, 2, 0])
    q = np.array([[1.0, 0, 0]])
    assert 2 * math.exp((0.87 - 0.9) / 0.07) == pytest.approx(1.3029, abs=1e-4)
    assert M.weighted_knn_predict(train, y, q, k=6).tolist() == [1]
    assert M.weighted_knn_predict(train, y, q, k=1).tolist() == [0]
    assert M.knn_accuracy(train, y, q, [1], k=6) == 1.0
    assert M.knn_accuracy(train, y, q, [1], k=1) == 0.0
    # With the default k = 20 > 7 training rows, all vote: class 1 still wins.
    assert M.knn_accuracy(train, y, q, [1]) == 1.0
    with pytest.raises(ValueError, match="temperature"):
        M.weighted_knn_predict(train, y, q, temperature=0)


def test_weighted_knn_matches_dino_eval_knn():
    """Against the code of Caron et al. 2021 (DINO `eval_knn.knn_classifier`), in torch."""
    torch = pytest.importorskip("torch")
    X, y = clustered(n=600, d=16, k=8, spread=1.2, seed=4)
    tr, te = slice(0, 450), slice(450, None)
    train = torch.nn.functional.normalize(torch.from_numpy(X[tr]).double(), dim=1)
    test = torch.nn.functional.normalize(torch.from_numpy(X[te]).double(), dim=1)
    labels = torch.from_numpy(y[tr])
    k, T, n_classes = 20, 0.07, 8
    sim = test @ train.T
    dist, idx = sim.topk(k, largest=True, sorted=True)
    nb = torch.gather(labels.view(1, -1).expand(len(test), -1), 1, idx)
    one_hot = torch.zeros(len(test) * k, n_classes, dtype=torch.float64)
    one_hot.scatter_(1, nb.view(-1, 1), 1)
    probs = (one_hot.view(len(test), k, n_classes) * dist.div(T).exp().view(len(test), k, 1)).sum(1)
    ref = probs.argmax(1).numpy()
    assert np.array_equal(M.weighted_knn_predict(X[tr], y[tr], X[te]), ref)
    assert M.knn_accuracy(X[tr], y[tr], X[te], y[te]) == pytest.approx(np.mean(ref == y[te]))


def test_cl_perfectly_separated_is_one():
    X, y = clustered(n=500, k=6, spread=0.01, seed=3)
    assert M.cluster_learnability(X, y, n_chunks=5, n_orders=2, random_state=0) == 1.0
    assert M.cluster_learnability_heldout(X[:400], X[400:], k=6) == 1.0


def test_heldout_clusters_come_from_train_only():
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score

    X, _ = clustered(n=400, d=8, k=4, spread=0.3, seed=5)
    tr, te = X[:320], X[320:]
    a_tr, a_te = M.heldout_clusters(tr, te, k=4, n_init=2, random_state=1)
    km = KMeans(n_clusters=4, n_init=2, random_state=1).fit(tr)
    # scikit-learn's partition of the train rows, up to the clusters' numbering (the
    # faiss engine numbers them its own way).
    assert adjusted_rand_score(a_tr, km.labels_) == 1.0
    # Test rows get their nearest centroid: the mean of its train rows.
    means = np.stack([tr[a_tr == c].mean(axis=0) for c in range(4)])
    d = ((te[:, None, :] - means[None]) ** 2).sum(-1)
    assert np.array_equal(a_te, d.argmin(axis=1))
    # Moving the test rows anywhere leaves the train clusters as they were.
    far = te + 50.0
    b_tr, _ = M.heldout_clusters(tr, far, k=4, n_init=2, random_state=1)
    assert np.array_equal(a_tr, b_tr)
    with pytest.raises(ValueError, match="k=500"):
        M.heldout_clusters(tr, te, k=500)


def test_cl_heldout_ignores_where_test_points_lie():
    # Four directions; test rows either near their train blob or pushed far from every
    # train row (mostly along a fifth axis) while keeping their nearest centroid and
    # their nearest train row. Clusters fitted on all rows would give the far test rows
    # a cluster of their own that no train row can teach.
    rng = np.random.default_rng(6)
    y = np.repeat(np.arange(4), 60)
    E = np.eye(5)
    train = E[y] + 0.05 * rng.normal(size=(240, 5))
    ty = np.repeat(np.arange(4), 15)
    near = E[ty] + 0.05 * rng.normal(size=(60, 5))
    far = E[ty] + 3 * E[4] + 0.05 * rng.normal(size=(60, 5))
    a = M.cluster_learnability_heldout(M.l2_normalize(train), M.l2_normalize(near), k=4)
    b = M.cluster_learnability_heldout(M.l2_normalize(train), M.l2_normalize(far), k=4)
    assert a == b == 1.0


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
            tr = M.make_trials(labels, n_trials=20, n_refs=10, negative=negative, hard=hard, random_state=rep)
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


def test_hard_negative_centroids_match_a_float64_mask_per_cluster():
    # Catches a wrong grouping of the sorted rows (clusters of unequal sizes, labels not 0..k-1).
    rng = np.random.default_rng(3)
    labels = rng.choice([7, 2, 40, 11, 5], size=400, p=[0.5, 0.2, 0.15, 0.1, 0.05])
    X = (
        rng.normal(size=(400, 16)).astype(np.float32)
        + labels[:, None] * rng.normal(size=16).astype(np.float32) / 9
    )
    ids = np.unique(labels)
    C = np.stack([X.astype(np.float64)[labels == c].mean(axis=0) for c in ids])
    d = ((C[:, None] - C[None]) ** 2).sum(axis=2)
    np.fill_diagonal(d, np.inf)
    assert M.hard_negative_clusters(X, labels) == {int(c): int(ids[j]) for c, j in zip(ids, d.argmin(axis=1))}


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


def test_proxy_annotator_compares_with_the_mean_of_every_reference():
    """Each answer against a direct computation: the query's and the negative's cosine with
    the mean of all M normalised references (a data-flow mutant that added the second
    reference M - 1 times survived the tests above, whose annotators are one-hot)."""
    rng = np.random.default_rng(5)
    A = rng.normal(size=(60, 8))
    labels = np.repeat(np.arange(3), 20)
    tr = M.make_trials(labels, n_trials=30, n_refs=5, random_state=1)
    U = A / np.linalg.norm(A, axis=1, keepdims=True)
    mean_ref = U[tr.refs].mean(axis=1)
    want = np.einsum("ij,ij->i", U[tr.query], mean_ref) > np.einsum("ij,ij->i", U[tr.negative], mean_ref)
    got = M.annotate(tr, A)
    assert (got == want).all() and 0.2 < want.mean() < 0.8  # both answers occur


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
    pred, _ = M.wclid(cl, id_, y + np.array([0.01, -0.02, 0.0, 0.015]), leave_one_out=True)
    assert np.isfinite(pred).all()


def test_correlation_intervals():
    from scipy.stats import bootstrap, kendalltau, pearsonr

    rng = np.random.default_rng(0)
    x = rng.normal(size=25)
    y = x + rng.normal(size=25)
    c = M.correlations(x, y, random_state=3)
    # Pearson: Fisher z, as scipy computes it.
    ci = pearsonr(x, y).confidence_interval(0.95)
    assert (c["pearson_lo"], c["pearson_hi"]) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert c["pearson_lo"] < c["pearson"] < c["pearson_hi"]
    # Kendall: seeded percentile bootstrap over the pairs; scipy's agrees up to resampling noise.
    ref = bootstrap(
        (x, y),
        lambda a, b: kendalltau(a, b)[0],
        paired=True,
        vectorized=False,
        n_resamples=2000,
        method="percentile",
        random_state=1,
    ).confidence_interval
    assert c["kendall_lo"] == pytest.approx(ref.low, abs=0.05)
    assert c["kendall_hi"] == pytest.approx(ref.high, abs=0.05)
    assert c["kendall_lo"] < c["kendall"] < c["kendall_hi"]
    assert M.correlations(x, y, random_state=3) == c  # seeded
    # A resample's repeated pairs are ties, as scipy counts them.
    from conceptlens.metrics.clid import _tau_b

    idx = rng.integers(0, 25, (20, 25))
    assert _tau_b(x[idx], y[idx]) == pytest.approx([kendalltau(x[i], y[i])[0] for i in idx])
    # Fisher z needs 4 pairs.
    three = M.correlations([1.0, 2, 3], [1.0, 3, 2])
    assert three["n_checkpoints"] == 3 and math.isnan(three["pearson_lo"])


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

    texts = ["a red circle", "a small red circle", "a red square", "a blue square", "a big blue square"]
    labels = np.array([0, 0, 0, 1, 1])
    out = M.class_captions_rouge(texts, labels)
    sc = rouge_scorer.RougeScorer(["rougeL"])
    d = lambda a, b: 1 - sc.score(a, b)["rougeL"].fmeasure  # noqa: E731
    for c in (0, 1):
        inside = [i for i in range(5) if labels[i] == c]
        outside = [i for i in range(5) if labels[i] != c]
        brute = {
            i: sum(d(texts[i], texts[j]) for j in inside if j != i) / len(inside)
            - sum(d(texts[i], texts[j]) for j in outside) / len(outside)
            for i in inside
        }
        best = min(brute, key=lambda i: (brute[i], i))
        assert out[c][0] == best and out[c][1] == pytest.approx(brute[best])
    assert out[0][0] == 1  # "a small red circle" is the most circle-like, least square-like


def test_describability_proxy():
    # Two clusters on separate axes; caption 0 points at cluster 0.
    img = np.array([[1, 0.05 * i] for i in range(12)] + [[0.05 * i, 1] for i in range(12)], dtype=float)
    clusters = np.array([0] * 12 + [1] * 12)
    T = np.array([[1.0, 0.0], [0.0, 1.0]])
    out = M.describability(T, [0, 1], img, clusters, features=img, top_n=10, n_pairs=20)
    for c in (0, 1):
        assert out[c] == {"hits": 10, "top1": 1.0, "top5": 1.0, "binary": 1.0, "2afc": 1.0}
    wrong = M.describability(T[::-1], [0, 1], img, clusters, features=img)
    assert wrong[0]["hits"] == 0 and wrong[0]["top1"] == 0.0 and wrong[0]["2afc"] == 0.0
    # Without the checkpoint's features, nothing about how the clustering classifies.
    assert math.isnan(M.describability(T, [0, 1], img, clusters)[0]["binary"])


def test_describability_table3_hand_case():
    # Six images in clusters [0, 0, 0, 1, 1, 2]; the checkpoint's (1-D) features give
    # cluster means 0.1, 0.75, 3.0. The VL model retrieves images 0 and 3 for caption 0
    # and images 4 and 5 for caption 1 (top_n = 2).
    img = np.eye(6)
    T = np.array([[1, 0, 0, 0.9, 0, 0], [0, 0, 0, 0, 1, 0.9]])
    clusters = np.array([0, 0, 0, 1, 1, 2])
    F = np.array([[0.0], [0.1], [0.2], [1.0], [0.5], [3.0]])
    out = M.describability(T, [0, 1], img, clusters, features=F, top_n=2, top=2)
    # Top-1: one of the two retrieved images is in the cluster.
    assert out[0]["hits"] == 1 and out[0]["top1"] == 0.5 and out[1]["top1"] == 0.5
    # Top-2: image 3 (own cluster 1) has cluster 0 as its nearest other mean (0.81 < 4);
    # image 5 (own cluster 2) has cluster 1 nearest (5.0625 < 8.41).
    assert out[0]["top5"] == 1.0 and out[1]["top5"] == 1.0
    assert M.describability(T, [0, 1], img, clusters, features=F, top_n=2, top=1)[0]["top5"] == 0.5
    # Binary, caption 0: positives 0 (0.01 from mean 0.1), 3 (0.81) vs negatives 4 (0.16),
    # 5 (8.41): 3 of 4 pairs. Caption 1 (mean 0.75): positives 4 (0.0625), 5 (5.0625) vs
    # negatives 0 (0.5625), 3 (0.0625, a tie): (1 + 1/2 + 0 + 0) / 4.
    assert out[0]["binary"] == 0.75 and out[1]["binary"] == 0.375
    assert 0 <= out[0]["2afc"] <= 1
