"""The `cluster_captions` analysis (conceptlens/analysis/cluster_captions.py): captions come from the
chosen captioner and each cluster's own images. Each test is written against a data-flow bug (issue
29; tools/dataflow_mutants.py): a filter not applied, the first element used for every one, two
arguments swapped, a sort the wrong way."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from conceptlens import schema
from conceptlens.analysis.base import EVERYTHING
from conceptlens.analysis.common import Context
from tests.helpers_analysis_workspace import build, ctx_of


# ---- cluster_captions.py -------------------------------------------------------------------
def _hash_vec(key: str, dim: int = 6) -> np.ndarray:
    import hashlib

    seed = int(hashlib.sha1(key.encode()).hexdigest()[:8], 16)
    return np.random.default_rng(seed).normal(size=dim)


@pytest.fixture
def fake_text(monkeypatch):
    import conceptlens.text as text

    monkeypatch.setattr(
        text, "embed_sentences", lambda texts, model=None: np.stack([_hash_vec("t:" + t) for t in texts])
    )


def _caption_ctx(tmp_path):
    """Checkpoint a of 8 images, clusters [0,0,0,0,1,1,1,1]. Captions: `blip` for images 0-6
    (image 7 has none), ground truth for all (written after blip's), and `git` with more
    captions than any, but of images this checkpoint does not have."""
    ws = build(tmp_path / "ws", [{"checkpoint_id": "a"}], datasets=("toy", "far"))
    ids = [f"toy-{i}" for i in range(8)]
    rows = [(i, "blip", f"blip {i}") for i in ids[:7]]
    rows += [(i, "groundtruth", f"gt {i}") for i in ids]
    rows += [(f"far-{j % 8}", "git", f"git {j}") for j in range(20)]
    caps = pa.Table.from_pylist(
        [{"image_id": i, "captioner": c, "text": t} for i, c, t in rows],
        schema=schema.arrow_schema("captions"),
    )
    ctx = ctx_of(ws)
    ctx._small["captions"] = caps.to_pandas()
    return ws, ctx, np.array(ids, dtype=object), np.array([0, 0, 0, 0, 1, 1, 1, 1])


def test_cluster_captions_come_from_the_chosen_captioner_and_each_clusters_images(tmp_path, fake_text):
    from conceptlens.analysis import cluster_captions as cc

    ws, ctx, ids, labels = _caption_ctx(tmp_path)
    out = cc.caption_columns(ctx, ids, labels, 2, {"sentence_model": None, "rouge_ablation": True, "seed": 0})
    assert out["caption_source"] == ["blip", "blip"]
    own = {0: {f"blip toy-{i}" for i in range(4)}, 1: {f"blip toy-{i}" for i in range(4, 7)}}
    for col in ("caption", "caption_noneg", "caption_rouge"):
        for c in (0, 1):
            assert out[col][c] in own[c], (col, c, out[col][c])
            assert out[col + "_score"][c] is not None


def test_describability_self_is_judged_on_the_checkpoints_own_datasets_vl_model(tmp_path):
    from conceptlens.analysis import cluster_captions as cc

    ws = build(tmp_path / "ws", [{"checkpoint_id": "a", "weights_sha256": "s1"}])
    ctx = ctx_of(ws)
    ctx._small["vl_models"] = pd.DataFrame(
        {
            "dataset": ["other", "toy"],
            "spec": ["x", "y"],
            "weights": [None, None],
            "weights_sha256": ["s1", "s2"],
        }
    )
    assert cc.describability_self(ctx, "a", "toy") is False
    ctx._small["vl_models"] = pd.DataFrame(
        {
            "dataset": ["other", "toy"],
            "spec": ["x", "y"],
            "weights": [None, None],
            "weights_sha256": ["s2", "s1"],
        }
    )
    assert cc.describability_self(ctx, "a", "toy") is True
    # Without hashes: the same weights file and the same spec.
    ws = build(tmp_path / "ws2", [{"checkpoint_id": "a", "weights": "w.pt", "source": "plain:toy"}])
    ctx = ctx_of(ws)
    ctx._small["vl_models"] = pd.DataFrame(
        {"dataset": ["toy"], "spec": ["open_clip:A"], "weights": ["w.pt"], "weights_sha256": [None]}
    )
    assert cc.describability_self(ctx, "a", "toy") is False
    ctx._small["vl_models"]["spec"] = ["plain:toy"]
    assert cc.describability_self(ctx, "a", "toy") is True


def test_vl_is_checkpoint_needs_the_same_spec_without_hashes():
    from conceptlens.analysis.cluster_captions import vl_is_checkpoint

    ck = {"weights": "w.pt", "source": "open_clip:A"}
    assert vl_is_checkpoint(ck, {"weights": "w.pt", "spec": "open_clip:A"})
    assert not vl_is_checkpoint(ck, {"weights": "w.pt", "spec": "open_clip:B"})
    assert not vl_is_checkpoint(ck, {"weights": "v.pt", "spec": "open_clip:A"})


# ---- cluster_captions ---------------------------------------------------------------------------
def test_describability_only_for_clusters_with_a_caption(tmp_path, monkeypatch):
    """Describability scores the clusters that have a caption: only their captions go to the
    VL model, a cluster without one keeps empty describability columns, the others get
    theirs. Catches the `caption is not None` filter dropped. (Captioning stubbed: cluster 1
    has none; the VL model is a stand-in.)"""
    import conceptlens.vl as vl
    from conceptlens.analysis import cluster_captions as cc
    from conceptlens.analysis.base import Unit
    from tests.helpers_analysis_workspace import build, write_clusters

    texts_seen = []

    class Fake:
        def encode_images(self, paths):
            return np.array([[1.0, float(p.name.split(".")[0]) % 3, 0.5] for p in paths])

        def encode_text(self, texts):
            texts_seen.extend(texts)
            assert all(isinstance(t, str) for t in texts), texts
            return np.array([[1.0, float(len(t) % 3), 0.5] for t in texts])

    monkeypatch.setattr(vl.VLModel, "from_workspace", classmethod(lambda cls, root, ds: Fake()))
    monkeypatch.setattr(
        cc, "caption_columns", lambda ctx, ids, labels, k, opts: {"caption": ["c0", None, "cc2"]}
    )
    ws = build(tmp_path / "ws", [{"checkpoint_id": "a"}], n=9)
    write_clusters(ws, "a", 3)
    ctx = Context(ws, progress=False)
    ctx._small["vl_models"] = pd.DataFrame({"dataset": ["toy"], "vl_model_id": ["v"]})
    opts = {**cc.ANALYSIS.option_defaults(), "describability": True}
    cc._run(ctx, Unit({"checkpoint_id": "a", "k": 3}, "a"), opts, EVERYTHING)
    assert texts_seen == ["c0", "cc2"]
    out = ws.read("cluster_captions", checkpoint_id="a", k=3).to_pandas().set_index("cluster")
    assert out.loc[1, "describability_hits"] is None or pd.isna(out.loc[1, "describability_hits"])
    assert out.loc[[0, 2], "describability_hits"].notna().all()
