"""Issue 8 corrections, end to end through the runner on tiny workspaces whose right
answer is known by construction: purity's K, kNN accuracies, held-out CL, CLID's
comparable checkpoints and the describability flags."""

from __future__ import annotations

import math
import os

import numpy as np
import pyarrow as pa
import pytest

from conceptlens import metrics as M
from conceptlens import schema
from conceptlens.analysis import comparisons, runner
from conceptlens.analysis.common import Context
from conceptlens.validate import validate
from conceptlens.workspace import Workspace

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def make_ws(root, labels, splits, features: dict, subsets: dict | None = None):
    """Dataset `toy` with the given labels and splits; checkpoint -> features (rows of all
    images, or of `subsets[cid]` only)."""
    from PIL import Image

    ws = Workspace.create(root, name="corrections")
    (ws.root / "thumbs").mkdir()
    Image.new("RGB", (4, 4)).save(ws.root / "thumbs" / "x.png")
    n = len(labels)
    ids = np.array([f"img-{i:04d}" for i in range(n)])
    ws.write(
        "images",
        pa.table(
            {
                "image_id": ids,
                "dataset": ["toy"] * n,
                "label": np.asarray(labels, np.int64),
                "label_name": [f"class {y}" for y in labels],
                "split": list(splits),
                "thumbnail": ["thumbs/x.png"] * n,
                "width": np.full(n, 4, np.int32),
                "height": np.full(n, 4, np.int32),
            }
        ),
    )
    rows = []
    for cid, X in features.items():
        keep = (subsets or {}).get(cid, np.arange(n))
        ws.write(
            "features",
            pa.table(
                {
                    "image_id": ids[keep],
                    "embedding": pa.array(list(np.asarray(X, np.float32)), type=pa.list_(pa.float32())),
                }
            ),
            checkpoint_id=cid,
        )
        rows.append(
            {
                "checkpoint_id": cid,
                "dataset": "toy",
                "model": "m",
                "method": "synthetic",
                "epoch": 0,
                "feature_dim": int(np.shape(X)[1]),
                "source": "synthetic",
            }
        )
    ws.write(
        "checkpoints", pa.Table.from_pylist(rows, schema=schema.arrow_schema("checkpoints", optional=False))
    )
    return ws


def analyse(ws, names, **opts):
    return runner.run(ws.root, names, opts, progress_bars=False)


def metrics_of(ws, cid, k):
    return ws.read("checkpoint_metrics", checkpoint_id=cid, k=k).to_pylist()[0]


def test_purity_k_counts_the_labels_of_the_whole_dataset(tmp_path):
    # 4 labels in the dataset; the checkpoint embeds only the images of labels 0 and 1, and
    # its two clusters are half label 0, half label 1: 1 - log 2 / log 4 = 0.5 (with K = 2,
    # the labels among its own images, it would be 0).
    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1, 2, 3], 40)
    splits = np.where(np.arange(160) % 5 == 0, "test", "train")
    sub = np.flatnonzero(labels < 2)
    blob = np.arange(len(sub)) % 2  # independent of the label
    X = np.eye(4)[blob] + 0.01 * rng.normal(size=(len(sub), 4))
    ws = make_ws(tmp_path / "w", labels, splits, {"sub": X}, {"sub": sub})
    analyse(ws, ["cluster_metrics"], k=[2])
    cm = ws.read("cluster_metrics", checkpoint_id="sub", k=2).to_pandas()
    assert cm["size"].tolist() == [40, 40]
    assert cm["purity"].tolist() == pytest.approx([0.5, 0.5])
    assert validate(ws.root) == []


def _blobs(seed=0, n_per=60, n_test=15):
    """Four train blobs along e1..e4 (of R^5); test images near them or pushed far away,
    mostly along e5, keeping their nearest centroid and nearest train image."""
    rng = np.random.default_rng(seed)
    E = np.eye(5)
    ty, sy = np.repeat(np.arange(4), n_per), np.repeat(np.arange(4), n_test)
    train = E[ty] + 0.05 * rng.normal(size=(len(ty), 5))
    near = E[sy] + 0.05 * rng.normal(size=(len(sy), 5))
    far = E[sy] + 3 * E[4] + 0.05 * rng.normal(size=(len(sy), 5))
    labels = np.concatenate([ty, sy])
    splits = ["train"] * len(ty) + ["test"] * len(sy)
    return labels, splits, np.vstack([train, near]), np.vstack([train, far])


def test_cl_heldout_unchanged_when_test_points_move_far_away(tmp_path):
    labels, splits, near, far = _blobs()
    ws = make_ws(tmp_path / "w", labels, splits, {"near": near, "far": far})
    analyse(ws, ["cluster_metrics"], k=[4], n_init=2)
    # Clustered together with the train images, the far test images take a cluster of
    # their own that no train image carries: the old cl_heldout was 0 here.
    assert metrics_of(ws, "near", 4)["cl_heldout"] == 1.0
    assert metrics_of(ws, "far", 4)["cl_heldout"] == 1.0


def test_knn_acc_is_weighted_20nn_and_knn1_acc_is_1nn(tmp_path):
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 5, 300)
    X = rng.normal(size=(5, 8))[labels] + 1.3 * rng.normal(size=(300, 8))
    splits = np.where(rng.random(300) < 0.3, "test", "train")
    ws = make_ws(tmp_path / "w", labels, splits, {"a": X})
    analyse(ws, ["cluster_metrics"], k=[5])
    m = metrics_of(ws, "a", 5)
    Xn, tr, te = M.l2_normalize(X), splits == "train", splits == "test"
    assert m["knn_acc"] == pytest.approx(M.knn_accuracy(Xn[tr], labels[tr], Xn[te], labels[te], k=20))
    assert m["knn1_acc"] == pytest.approx(M.knn_accuracy(Xn[tr], labels[tr], Xn[te], labels[te], k=1))
    assert m["knn_acc"] != m["knn1_acc"]  # the data are noisy enough to tell them apart


def test_clid_leaves_out_a_checkpoint_embedded_on_other_images(tmp_path):
    rng = np.random.default_rng(2)
    labels = np.repeat(np.arange(4), 30)
    splits = np.where(np.arange(120) % 4 == 0, "test", "train")
    centres = rng.normal(size=(4, 6))
    feats = {
        f"ck{j}": centres[labels] + s * rng.normal(size=(120, 6)) for j, s in enumerate((0.2, 0.5, 0.9, 1.4))
    }
    sub = np.arange(0, 120, 2)
    feats["half"] = centres[labels[sub]] + 0.3 * rng.normal(size=(len(sub), 6))
    ws = make_ws(tmp_path / "w", labels, splits, feats, {"half": sub})
    ctx = analyse(ws, ["comparisons"], k=[4])
    cs = ws.read("clid_scores", dataset="toy").to_pandas().set_index("checkpoint_id")
    assert len(cs) == 5
    assert cs.loc["half", ["clid", "wclid", "wclid_loo"]].isna().all()
    four = [f"ck{j}" for j in range(4)]
    cm = {c: metrics_of(ws, c, 4) for c in four}
    expect = M.clid([cm[c]["cl"] for c in four], [cm[c]["id"] for c in four])
    assert cs.loc[four, "clid"].to_numpy() == pytest.approx(expect)
    assert cs.loc[four, "wclid_loo"].notna().all()
    pc = ws.read("predictor_correlations", dataset="toy").to_pandas()
    assert set(pc["predictor"]) == set(comparisons.PREDICTORS)
    # The baselines analysis did not run: its predictors have no checkpoint.
    base = pc["predictor"].isin(["alignment", "uniformity", "mcr2", "rotation", "source_entropy"])
    assert (pc.loc[~base, "n_checkpoints"] == 4).all() and (pc.loc[base, "n_checkpoints"] == 0).all()
    assert any("half embedded other images" in n for n in ctx.notes)
    assert validate(ws.root) == []


def test_describability_self_flags_the_vl_models_own_tower(tmp_path):
    from conceptlens.analysis.cluster_captions import describability_self, vl_is_checkpoint

    vl = {
        "vl_model_id": "vl-toy",
        "spec": "open_clip:models/vl.json",
        "weights": "models/vl.pt",
        "weights_sha256": "ab" * 32,
    }
    assert vl_is_checkpoint({"weights_sha256": "ab" * 32}, vl)
    assert not vl_is_checkpoint({"weights_sha256": "cd" * 32, "weights": "models/vl.pt"}, vl)
    assert vl_is_checkpoint(
        {"source": "open_clip:models/vl.json", "weights": "models/vl.pt"}, {**vl, "weights_sha256": None}
    )
    assert not vl_is_checkpoint({"source": "torch:x", "weights": None}, vl)
    labels, splits, near, _ = _blobs()
    ws = make_ws(tmp_path / "w", labels, splits, {"a": near})
    ctx = Context(ws, progress=False)
    assert describability_self(ctx, "a", "toy") is None  # no VL model at all
    ck = ws.read("checkpoints").to_pandas()
    ck.loc[len(ck)] = {
        **ck.iloc[0].to_dict(),
        "checkpoint_id": "toy-clip",
        "source": "open_clip:models/vl.json",
    }
    ck["weights"], ck["weights_sha256"] = [None, "models/vl.pt"], [None, "ab" * 32]
    ws.write("checkpoints", pa.Table.from_pandas(ck, preserve_index=False))
    ws.write(
        "vl_models",
        pa.Table.from_pylist(
            [{**vl, "dataset": "toy", "config": "models/vl.json"}], schema=schema.arrow_schema("vl_models")
        ),
    )
    ctx = Context(ws, progress=False)
    assert describability_self(ctx, "toy-clip", "toy") is True
    assert describability_self(ctx, "a", "toy") is False


def test_correlations_carry_intervals_and_loo(tmp_path):
    """predictor_correlations rows have 95% intervals around the estimate."""
    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(4), 30)
    splits = np.where(np.arange(120) % 4 == 0, "test", "train")
    centres = rng.normal(size=(4, 6))
    feats = {
        f"ck{j}": centres[labels] + s * rng.normal(size=(120, 6))
        for j, s in enumerate((0.2, 0.4, 0.6, 0.9, 1.2, 1.6))
    }
    ws = make_ws(tmp_path / "w", labels, splits, feats)
    analyse(ws, ["comparisons"], k=[4])
    pc = ws.read("predictor_correlations", dataset="toy").to_pandas().set_index("predictor")
    for p in ("cl", "clid", "wclid", "wclid_loo"):
        r = pc.loc[p]
        assert r["n_checkpoints"] == 6
        assert r["pearson_lo"] <= r["pearson"] <= r["pearson_hi"]
        assert -1 <= r["kendall_lo"] <= r["kendall_hi"] <= 1
    assert not math.isnan(pc.loc["wclid_loo", "pearson"])
