"""End-to-end wiring of the analyses on tiny synthetic workspaces whose right answers are
known by construction (issue 17).

Each scenario is built so that a wiring mistake changes a number checked here: clusters
far apart (purity 1, coherence 1, kNN accuracy 1, CL known exactly), a planted hard
negative, train and test splits that differ on purpose, an annotator space that
disagrees with the clustered one, and kNN accuracy exactly linear in CL and ID.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from PIL import Image
from scipy.stats import zscore as scipy_zscore
from sklearn.metrics import adjusted_rand_score

from conceptlens import metrics as M
from conceptlens import schema
from conceptlens.analysis import runner
from conceptlens.analysis.comparisons import clid_and_correlations
from conceptlens.db import WorkspaceDB
from conceptlens.metrics.compare import purity_bins
from conceptlens.validate import format_problems, validate
from conceptlens.views import clusters as clusters_view
from conceptlens.workspace import Workspace

DIM = 8


def build(root, labels, splits, features: dict[str, np.ndarray]) -> Workspace:
    """A workspace of one dataset `syn`: images with `labels` and `splits` (no factor
    columns, so the `factors` annotator sees the label only) and one checkpoint per entry
    of `features`."""
    n = len(labels)
    ws = Workspace.create(root, name="wiring", created="2026-01-01T00:00:00+00:00")
    (ws.root / "thumbs").mkdir()
    Image.new("RGB", (4, 4)).save(ws.root / "thumbs" / "x.png")
    ids = [f"im-{i:03d}" for i in range(n)]
    ws.write(
        "images",
        pa.table(
            {
                "image_id": ids,
                "dataset": ["syn"] * n,
                "label": pa.array([int(v) for v in labels], pa.int64()),
                "label_name": [f"class{v}" for v in labels],
                "split": list(splits),
                "thumbnail": ["thumbs/x.png"] * n,
                "width": np.full(n, 4, np.int32),
                "height": np.full(n, 4, np.int32),
            }
        ),
    )
    rows = []
    for cid, X in features.items():
        ws.write(
            "features",
            pa.table(
                {"image_id": ids, "embedding": pa.array(list(X.astype(np.float32)), pa.list_(pa.float32()))}
            ),
            checkpoint_id=cid,
        )
        rows.append(
            {
                "checkpoint_id": cid,
                "dataset": "syn",
                "model": "synthetic",
                "method": "planted",
                "epoch": None,
                "feature_dim": X.shape[1],
                "source": "synthetic:planted",
            }
        )
    ws.write(
        "checkpoints", pa.Table.from_pylist(rows, schema=schema.arrow_schema("checkpoints", optional=False))
    )
    return ws


def blobs(directions: np.ndarray, groups, noise: float, seed: int) -> np.ndarray:
    """One row per entry of `groups`: its group's direction plus Gaussian noise, the whole
    row scaled by a random length over two orders of magnitude. Every metric here is a
    cosine one: lengths must not matter, and they would for a dot product."""
    rng = np.random.default_rng(seed)
    X = directions[np.asarray(groups)] + noise * rng.standard_normal((len(groups), directions.shape[1]))
    return X * 10 ** rng.uniform(-1, 1, (len(groups), 1))


def fan(n: int) -> np.ndarray:
    """n directions at cosine 0.5 from each other (e_0 + e_i): far apart by cosine, yet a
    long row of one has a larger dot product with a short row of another than its own."""
    return np.eye(DIM)[0] + np.eye(DIM)[1 : n + 1]


def analyse(ws, names, checkpoint=None, force=False, **opts):
    return runner.run(ws.root, names, opts, checkpoint=checkpoint, force=force, progress_bars=False)


def read(ws, name, **partition) -> pd.DataFrame:
    return ws.read(name, **partition).to_pandas()


def assignments(ws, cid: str, k: int) -> np.ndarray:
    """Cluster of every image, in image order."""
    c = read(ws, "clusters", checkpoint_id=cid, k=k).sort_values("image_id")
    return c["cluster"].to_numpy()


# ---- clusters far apart: every metric at its best, and CL exactly --------------------------
K_SEP, PER_SEP = 4, 24
N_SEP = K_SEP * PER_SEP


@pytest.fixture(scope="module")
def separated(tmp_path_factory):
    labels = np.repeat(np.arange(K_SEP), PER_SEP)
    splits = np.where(np.arange(N_SEP) % 4 == 3, "test", "train")
    X = blobs(fan(K_SEP), labels, 0.01, seed=1)
    ws = build(tmp_path_factory.mktemp("sep") / "ws", labels, splits, {"sep": X})
    # cl_chunks above N: one image per chunk, which makes CL known exactly (see below).
    analyse(ws, ["clustering", "cluster_metrics"], k=[K_SEP], cl_chunks=10_000)
    return ws, labels


def test_separated_clusters_are_found_and_the_workspace_stays_valid(separated):
    ws, labels = separated
    assert adjusted_rand_score(labels, assignments(ws, "sep", K_SEP)) == 1.0
    assert validate(ws.root) == [], format_problems(validate(ws.root))


def test_separated_clusters_have_purity_1_and_coherence_1(separated):
    ws, _ = separated
    m = read(ws, "cluster_metrics", checkpoint_id="sep", k=K_SEP)
    assert list(m["size"]) == [PER_SEP] * K_SEP
    assert (m["purity"] == 1.0).all() and (m["top_label_share"] == 1.0).all()
    # The annotator (the label, one-hot) always picks the query: 20 of 20 trials right.
    for kind in ("random", "hard"):
        assert (m[f"coherence_{kind}"] == 1.0).all(), kind
        # Clopper-Pearson for 20 of 20 by hand: lower bound (alpha/2)^(1/n), upper 1.
        assert m[f"coherence_{kind}_lo"].to_numpy() == pytest.approx(0.025 ** (1 / 20), abs=1e-12)
        assert (m[f"coherence_{kind}_hi"] == 1.0).all()
    assert (m["coherence_trials"] == 20).all() and (m["annotator"] == "factors").all()
    assert (m["hard_negative"] != m["cluster"]).all()


def test_separated_clusters_have_perfect_neighbours_and_exact_cl(separated):
    ws, _ = separated
    (row,) = read(ws, "checkpoint_metrics", checkpoint_id="sep", k=K_SEP).to_dict("records")
    assert row["anmi"] == pytest.approx(1.0)
    assert row["knn_acc"] == 1.0 and row["knn1_acc"] == 1.0
    # k-means on the train split alone finds the same 4 blobs: held-out CL is 1.
    assert row["cl_heldout"] == 1.0
    # One image per chunk, clusters far apart: an image is mispredicted exactly when it is
    # the first of its cluster, whatever the order, so K - 1 of the N - 1 predictions fail.
    assert row["cl"] == pytest.approx(1 - (K_SEP - 1) / (N_SEP - 1), abs=1e-12)
    assert row["n_images"] == N_SEP and row["n_duplicates"] == 0


# ---- a planted hard negative -----------------------------------------------------------
PER_HARD = 30


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """Four blobs in two pairs: 0 next to 1, 2 next to 3, the pairs far apart. The label is
    the pair, so the annotator cannot tell a blob from its neighbour: against its hard
    negative (the neighbour) it guesses, against a random one it is right 2 times in 3."""
    d = np.eye(DIM)
    directions = np.stack([d[0], d[0] + 0.6 * d[1], d[2], d[2] + 0.6 * d[3]])
    blob = np.repeat(np.arange(4), PER_HARD)
    X = blobs(directions, blob, 0.02, seed=2)
    ws = build(tmp_path_factory.mktemp("hard") / "ws", blob // 2, ["train"] * len(blob), {"hard": X})
    analyse(ws, ["clustering", "cluster_metrics"], k=[4])
    return ws, blob


def test_the_hard_negative_is_the_planted_neighbour(planted):
    ws, blob = planted
    found = assignments(ws, "hard", 4)
    assert adjusted_rand_score(blob, found) == 1.0
    blob_of = {int(c): int(np.bincount(blob[found == c]).argmax()) for c in np.unique(found)}
    m = read(ws, "cluster_metrics", checkpoint_id="hard", k=4)
    partner = {0: 1, 1: 0, 2: 3, 3: 2}
    for c, h in zip(m["cluster"], m["hard_negative"]):
        assert blob_of[int(h)] == partner[blob_of[int(c)]], (c, h)
    assert (m["purity"] == 1.0).all()


def test_hard_negatives_are_harder_than_random_ones(planted):
    ws, _ = planted
    m = read(ws, "cluster_metrics", checkpoint_id="hard", k=4)
    # Expected: 0.5 (pure guesses) against 1/3 * 0.5 + 2/3 = 0.83, over 80 trials each.
    assert m["coherence_hard"].mean() < 0.7 < m["coherence_random"].mean()


def test_the_clusters_view_shows_the_planted_neighbour(planted):
    ws, blob = planted
    found = assignments(ws, "hard", 4)
    c0 = int(found[0])  # the cluster of blob 0
    db = WorkspaceDB(ws.root)
    try:
        pair = clusters_view.cluster_and_hard_negative(db, dataset="syn", checkpoint="hard", k=4, cluster=c0)
    finally:
        db.close()
    assert list(pair["role"]) == ["cluster", "hard negative"]
    assert pair["cluster"].iloc[0] == c0
    assert set(blob[found == pair["cluster"].iloc[1]]) == {1}


# ---- train and test splits that differ on purpose ------------------------------------------
@pytest.fixture(scope="module")
def splits(tmp_path_factory):
    """Three far-apart classes; train holds all three (30 each), test only classes 0 and 1
    (10 each). Fitted on train and scored on test, kNN is always right; the other way
    round, the 30 train images of class 2 could never be (accuracy at most 2/3)."""
    labels = np.r_[np.repeat([0, 1, 2], 30), np.repeat([0, 1], 10)]
    split = ["train"] * 90 + ["test"] * 20
    X = blobs(fan(3), labels, 0.01, seed=3)
    ws = build(tmp_path_factory.mktemp("split") / "ws", labels, split, {"split": X})
    analyse(ws, ["clustering", "cluster_metrics"], k=[3])
    return ws


def test_knn_accuracy_is_fitted_on_train_and_scored_on_test(splits):
    (row,) = read(splits, "checkpoint_metrics", checkpoint_id="split", k=3).to_dict("records")
    assert row["knn_acc"] == 1.0 and row["knn1_acc"] == 1.0
    assert row["cl_heldout"] == 1.0


def test_knn_accuracy_the_other_way_round_is_at_most_two_thirds(splits):
    """The check above can fail: the same data scored on train gives 2/3 exactly."""
    db = WorkspaceDB(splits.root)
    try:
        ids, X = db.features("split")
    finally:
        db.close()
    y = read(splits, "images").set_index("image_id").loc[ids, "label"].to_numpy()
    test = np.arange(len(ids)) >= 90
    assert M.knn_accuracy(X[test], y[test], X[~test], y[~test], k=1) == pytest.approx(2 / 3)


def test_knn_accuracy_with_fewer_train_images_than_neighbours(tmp_path):
    """12 train images and k = 20: the weighted kNN votes with all 12 (and is right)."""
    labels = np.tile([0, 1, 2], 6)
    split = ["train"] * 12 + ["test"] * 6
    ws = build(tmp_path / "ws", labels, split, {"few": blobs(fan(3), labels, 0.01, seed=6)})
    analyse(ws, ["clustering", "cluster_metrics"], k=[3])
    (row,) = read(ws, "checkpoint_metrics", checkpoint_id="few", k=3).to_dict("records")
    assert row["knn_acc"] == 1.0 and row["knn1_acc"] == 1.0


# ---- an annotator space that disagrees with the clustered one -----------------------------
@pytest.fixture(scope="module")
def disagreeing(tmp_path_factory):
    """Checkpoint `shape` clusters the images in 4 far-apart groups; the label (a colour,
    3 values) is spread evenly over each group, and checkpoint `colour` clusters by it.
    In the annotator's space (the label, or `colour`'s features) the shape clusters are
    no more coherent than chance, while in their own space they are perfect."""
    group = np.repeat(np.arange(4), 30)
    colour = np.tile(np.arange(3), 40)
    feats = {
        "shape": blobs(np.eye(DIM)[:4], group, 0.01, seed=4),
        "colour": blobs(np.eye(DIM)[4:7], colour, 0.01, seed=5),
    }
    ws = build(tmp_path_factory.mktemp("ann") / "ws", colour, ["train"] * 120, feats)
    analyse(ws, ["clustering"], k=[4])
    return ws, group


@pytest.mark.parametrize("annotator", ["factors", "checkpoint:colour"])
def test_coherence_is_measured_in_the_annotator_space(disagreeing, annotator):
    ws, group = disagreeing
    analyse(ws, ["cluster_metrics"], checkpoint="shape", annotator=annotator, force=True)
    assert adjusted_rand_score(group, assignments(ws, "shape", 4)) == 1.0
    m = read(ws, "cluster_metrics", checkpoint_id="shape", k=4)
    assert (m["annotator"] == annotator).all()
    # In the checkpoint's own space every trial would be right (coherence 1).
    assert m["coherence_random"].mean() < 0.75, m["coherence_random"].tolist()
    # Every cluster holds the 3 colours 10 times each: purity 1 - log 3 / log 3 = 0.
    assert m["purity"].to_numpy() == pytest.approx(0.0, abs=1e-12)
    assert m["top_label_share"].to_numpy() == pytest.approx(1 / 3)


# ---- comparisons: CLID and W-CLID ------------------------------------------------------------
@pytest.fixture(scope="module")
def three_checkpoints(tmp_path_factory):
    labels = np.repeat(np.arange(3), 20)
    split = np.where(np.arange(60) % 3 == 0, "test", "train")
    feats = {
        f"ck{j}": blobs(np.eye(DIM)[:3], labels, noise, seed=10 + j)
        for j, noise in enumerate((0.1, 0.6, 1.2))
    }
    ws = build(tmp_path_factory.mktemp("cmp") / "ws", labels, split, feats)
    analyse(ws, ["comparisons"], k=[3])
    metrics = pd.concat(
        [read(ws, "checkpoint_metrics", checkpoint_id=c, k=3) for c in sorted(feats)], ignore_index=True
    )
    scores = read(ws, "clid_scores", dataset="syn").sort_values("checkpoint_id").reset_index(drop=True)
    return metrics, scores


def test_clid_is_the_sum_of_z_scores_of_cl_and_id(three_checkpoints):
    metrics, scores = three_checkpoints
    assert list(scores["checkpoint_id"]) == list(metrics["checkpoint_id"])
    assert metrics["cl"].nunique() == 3 and metrics["id"].nunique() == 3
    want = scipy_zscore(metrics["cl"].to_numpy()) + scipy_zscore(metrics["id"].to_numpy())
    assert scores["clid"].to_numpy() == pytest.approx(want, abs=1e-9)


def test_wclid_interpolates_three_checkpoints_exactly(three_checkpoints):
    """Three checkpoints, three weights (CL, ID, intercept): the least-squares fit passes
    through every point, so W-CLID equals kNN accuracy. Dropping ID leaves two weights."""
    metrics, scores = three_checkpoints
    assert metrics["knn_acc"].nunique() > 1
    assert scores["wclid"].to_numpy() == pytest.approx(metrics["knn_acc"].to_numpy(), abs=1e-9)


def test_wclid_recovers_a_linear_law_of_cl_and_id():
    """kNN accuracy = 0.5 CL - 0.02 ID + 0.3 exactly: W-CLID and its leave-one-out version
    (fitted without the checkpoint predicted) both return it; CL and ID are uncorrelated,
    so a fit on either alone cannot."""
    cl = np.array([0.2, 0.4, 0.6, 0.8, 0.3, 0.7])
    id_ = np.array([8.0, 3.0, 6.0, 4.0, 2.0, 9.0])
    acc = 0.5 * cl - 0.02 * id_ + 0.3
    metrics = pd.DataFrame(
        {
            "checkpoint_id": [f"c{i}" for i in range(6)],
            "k": 5,
            "image_set": "same",
            "n_images": 100,
            "cl": cl,
            "id": id_,
            "knn_acc": acc,
            "cl_heldout": cl,
        }
    )
    scores, corr, notes = clid_and_correlations(metrics)
    got = pd.DataFrame(scores).set_index("checkpoint_id").loc[metrics["checkpoint_id"]]
    assert got["wclid"].to_numpy() == pytest.approx(acc, abs=1e-12)
    assert got["wclid_loo"].to_numpy() == pytest.approx(acc, abs=1e-12)
    assert notes == []
    r = {c["predictor"]: c for c in corr}
    assert r["wclid"]["pearson"] == pytest.approx(1.0)


# ---- metrics whose answer is known by construction ---------------------------------------
def test_cl_with_one_image_per_chunk_counts_first_sightings():
    """K far-apart clusters, one image per chunk: exactly the K - 1 first images of a
    cluster after the first chunk are mispredicted, in every order."""
    y = np.repeat(np.arange(3), 2)
    X = blobs(fan(3), y, 0.01, seed=0)
    for seed in range(4):
        assert M.cluster_learnability(X, y, n_chunks=6, random_state=seed) == pytest.approx(1 - 2 / 5)


def test_cl_and_knn_use_cosine_not_dot_product():
    """Short rows of class 0 and long rows of class 1 along nearby directions: by cosine the
    nearest neighbour keeps the class, by dot product the long rows win every vote."""
    a, b = np.array([1.0, 0.3]), np.array([0.3, 1.0])
    rng = np.random.default_rng(0)
    tr = np.r_[np.tile(a, (10, 1)) * 0.1, np.tile(b, (10, 1)) * 100] + 1e-4 * rng.standard_normal((20, 2))
    ytr = np.repeat([0, 1], 10)
    te = np.r_[np.tile(a, (5, 1)), np.tile(b, (5, 1))]
    yte = np.repeat([0, 1], 5)
    assert M.knn_accuracy(tr, ytr, te, yte, k=1) == 1.0
    assert M.knn_accuracy(tr, ytr, te, yte) == 1.0  # weighted 20-NN
    X = np.r_[tr, te]
    y = np.r_[ytr, yte]
    assert M.cluster_learnability(X, y, n_chunks=len(y)) == pytest.approx(1 - 1 / (len(y) - 1))


def test_describability_ties_are_not_hits():
    """Two clusters whose images are all equally far from either mean and all equally
    similar to both captions: `binary` counts each tie 1/2, `2afc` counts no tie as a win."""
    F = np.array([[1.0, 0], [-1, 0], [0, 1], [0, -1]])  # cluster means both at the origin
    ic = np.array([0, 0, 1, 1])
    V = np.ones((4, 2))  # every image the same in the VL space
    T = np.array([[1.0, 0.5], [0.5, 1.0]])
    out = M.describability(T, [0, 1], V, ic, features=F, top_n=2)
    for c in (0, 1):
        assert out[c]["binary"] == 0.5 and out[c]["2afc"] == 0.0


def test_purity_range_interval_pools_rounded_successes():
    """0.29 x 100 is 28.999999999999996 in floating point: the pooled successes are 29."""
    m = pd.DataFrame(
        {
            "purity": [0.95, 0.97],
            "coherence_random": [0.29, 0.6],
            "coherence_hard": [0.29, 0.6],
            "coherence_trials": [100, 20],
        }
    )
    (row,) = purity_bins(m).to_dict("records")
    lo, hi = M.clopper_pearson(29 + 12, 120)
    assert (row["coherence_random_lo"], row["coherence_random_hi"]) == (lo, hi)
    assert row["interval"] == "clopper-pearson"


def test_clopper_pearson_reference_values():
    """statsmodels' `proportion_confint(method="beta")`, the reference implementation."""
    from statsmodels.stats.proportion import proportion_confint

    for k, n in [(0, 20), (7, 20), (20, 20), (29, 100), (1, 1)]:
        assert M.clopper_pearson(k, n) == pytest.approx(proportion_confint(k, n, 0.05, "beta"), abs=1e-12)
    assert not math.isnan(M.clopper_pearson(0, 1)[1])
