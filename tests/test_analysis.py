"""The cluster analysis on a small synthetic workspace."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from conceptlens import schema
from conceptlens.analysis.clusters import Options, analyze_clusters, factor_matrix
from conceptlens.validate import validate
from conceptlens.workspace import Workspace, WorkspaceError

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SHAPES, COLORS = ("circle", "square", "star"), ("red", "green", "blue", "yellow")
N = 240


def make_workspace(root, n=N, seed=0):
    """images with factor columns + 3 checkpoints whose features cluster by (shape, colour)."""
    from PIL import Image
    rng = np.random.default_rng(seed)
    ws = Workspace.create(root, name="synthetic")
    (ws.root / "thumbs").mkdir()
    Image.new("RGB", (4, 4)).save(ws.root / "thumbs" / "x.png")
    shape = rng.integers(0, 3, n)
    color = rng.integers(0, 4, n)
    size = rng.uniform(0, 1, n)
    label = shape * 4 + color
    ids = [f"img-{i:04d}" for i in range(n)]
    ws.write("images", pa.table({
        "image_id": ids, "dataset": ["toy"] * n, "label": label.astype(np.int64),
        "label_name": [f"{COLORS[c]} {SHAPES[s]}" for s, c in zip(shape, color)],
        "split": np.where(rng.random(n) < 0.25, "test", "train"),
        "thumbnail": ["thumbs/x.png"] * n, "width": np.full(n, 4, np.int32),
        "height": np.full(n, 4, np.int32),
        "shape": [SHAPES[s] for s in shape], "color": [COLORS[c] for c in color], "size": size,
    }))
    ws.write("captions", pa.table({
        "image_id": ids, "captioner": ["groundtruth"] * n,
        "text": [f"a {'big' if z > 0.5 else 'small'} {COLORS[c]} {SHAPES[s]}"
                 for s, c, z in zip(shape, color, size)]}))
    rows = []
    for j, noise in enumerate((0.05, 0.3, 1.5)):
        cid = f"toy-ckpt{j}"
        centres = rng.normal(size=(12, 16))
        X = (centres[label] + noise * rng.normal(size=(n, 16))).astype(np.float32)
        ws.write("features", pa.table({"image_id": ids, "embedding": pa.array(
            list(X), type=pa.list_(pa.float32()))}), checkpoint_id=cid)
        rows.append({"checkpoint_id": cid, "dataset": "toy", "model": "mlp", "method": "synthetic",
                     "epoch": j, "feature_dim": 16, "source": "synthetic:noise"})
    ws.write("checkpoints", pa.Table.from_pylist(rows, schema=schema.arrow_schema("checkpoints",
                                                                                 optional=False)))
    return ws


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("ws"))
    notes = analyze_clusters(ws.root, opts=Options(ks=[12], progress=False, rouge_ablation=True))
    return ws, notes


def test_analysis_writes_valid_tables(analysed):
    ws, notes = analysed
    assert validate(ws.root) == []
    cl = ws.read("clusters").to_pandas()
    assert len(cl) == 3 * N and set(cl["k"]) == {12}
    cm = ws.read("checkpoint_metrics").to_pandas().set_index("checkpoint_id")
    assert list(cm.index) == ["toy-ckpt0", "toy-ckpt1", "toy-ckpt2"]
    # Cleaner features: better clusters, neighbours and learnability.
    assert cm.loc["toy-ckpt0", "anmi"] > 0.9 and cm.loc["toy-ckpt0", "knn_acc"] > 0.95
    assert cm["anmi"].is_monotonic_decreasing and cm["cl"].is_monotonic_decreasing
    assert cm["clid"].notna().all() and cm["wclid"].notna().all()
    assert cm["clid"].sum() == pytest.approx(0, abs=1e-9)
    assert (cm["n_duplicates"] == 0).all() and (cm["n_images"] == N).all()
    pc = ws.read("predictor_correlations").to_pandas()
    assert set(pc["predictor"]) == {"cl", "cl_heldout", "id", "clid", "wclid"}
    assert (pc["n_checkpoints"] == 3).all()
    pr = ws.read("projections").to_pandas()
    assert len(pr) == 3 * N and pr[["x", "y"]].notna().all().all()
    assert any("describability skipped" in n for n in notes)


def test_cluster_metrics_content(analysed):
    ws, _ = analysed
    m = ws.read("cluster_metrics").to_pandas()
    clean = m[m["checkpoint_id"] == "toy-ckpt0"]
    assert len(clean) == 12 and clean["size"].sum() == N
    assert clean["purity"].mean() > 0.9
    big = clean[clean["size"] >= 11]
    assert (big["coherence_random"] > 0.9).all() and (big["annotator"] == "factors").all()
    assert (big["coherence_random_lo"] <= big["coherence_random"]).all()
    assert (big["coherence_trials"] == 20).all()
    assert (clean["hard_negative"] != clean["cluster"]).all()
    assert (clean["caption_source"] == "groundtruth").all()
    # A pure cluster's caption names its top label's colour and shape.
    for _, r in big.iterrows():
        name = ws.read("images").to_pandas().query("label == @r.top_label")["label_name"].iloc[0]
        colour, shape = name.split()
        assert colour in r["caption"] and shape in r["caption"]
        assert isinstance(r["caption_rouge"], str) and isinstance(r["caption_noneg"], str)


def test_resume_skips_done_and_force_recomputes(analysed):
    ws, _ = analysed
    before = ws.table_path("clusters").stat().st_mtime_ns
    analyze_clusters(ws.root, opts=Options(ks=[12], progress=False))
    assert ws.table_path("clusters").stat().st_mtime_ns == before
    analyze_clusters(ws.root, "toy-ckpt1", Options(ks=[5], progress=False, umap=False,
                                                   captions=False))
    cm = ws.read("checkpoint_metrics").to_pandas()
    assert set(zip(cm["checkpoint_id"], cm["k"])) == {
        ("toy-ckpt0", 12), ("toy-ckpt1", 12), ("toy-ckpt2", 12), ("toy-ckpt1", 5)}
    # A lone checkpoint at k=5 has nothing to be compared with.
    assert cm.loc[cm["k"] == 5, "clid"].isna().all()
    assert len(ws.read("clusters").to_pandas()) == 3 * N + N
    assert validate(ws.root) == []


def test_checkpoint_annotator_and_errors(tmp_path):
    ws = make_workspace(tmp_path / "w", n=120)
    opts = Options(ks=[6], annotator="checkpoint:toy-ckpt0", umap=False, captions=False,
                   progress=False)
    notes = analyze_clusters(ws.root, opts=opts)
    m = ws.read("cluster_metrics").to_pandas()
    assert set(m.loc[m["checkpoint_id"] != "toy-ckpt0", "annotator"].dropna()) == \
        {"checkpoint:toy-ckpt0"}
    assert m.loc[m["checkpoint_id"] == "toy-ckpt0", "coherence_random"].isna().all()
    assert any("coherence skipped" in n for n in notes)
    with pytest.raises(WorkspaceError, match="not in checkpoints.parquet"):
        analyze_clusters(ws.root, "nope", Options(progress=False))
    with pytest.raises(ValueError, match="at least 20"):
        analyze_clusters(ws.root, opts=Options(n_trials=5, progress=False))
    os.remove(ws.table_path("features", "toy-ckpt2"))
    with pytest.raises(WorkspaceError, match="features of checkpoint 'toy-ckpt2'"):
        analyze_clusters(ws.root, "toy-ckpt2", Options(ks=[7], progress=False))


def test_describability_with_a_vl_model(tmp_path, monkeypatch):
    """A stand-in VL model that sees colour and shape: captions retrieve their clusters."""
    import sys
    import types
    ws = make_workspace(tmp_path / "w", n=160)
    img = ws.read("images").to_pandas()
    # One thumbnail per image so the stand-in can tell them apart.
    ws.write("images", pa.Table.from_pandas(img.assign(thumbnail=["thumbs/x.png?" + i for i in
                                                                  img["image_id"]])))
    words = list(SHAPES) + list(COLORS)
    by_path = {}

    def vec(text):
        v = np.array([float(w in text.split()) for w in words])
        return v / max(np.linalg.norm(v), 1e-9)

    for _, r in img.iterrows():
        by_path[r["image_id"]] = vec(f"{r['shape']} {r['color']}")

    class FakeVL:
        @classmethod
        def from_workspace(cls, root, dataset):
            assert dataset == "toy"
            return cls()

        def encode_text(self, texts):
            return np.stack([vec(t) for t in texts])

        def encode_images(self, paths):
            return np.stack([by_path[str(p).split("?")[-1]] for p in paths])

    monkeypatch.setitem(sys.modules, "conceptlens.vl", types.SimpleNamespace(VLModel=FakeVL))
    import conceptlens.analysis.clusters as C
    monkeypatch.setattr(C.Workspace, "resolve", lambda self, rel: rel)
    ws.write("vl_models", pa.table({"vl_model_id": ["fake"], "dataset": ["toy"], "spec": ["fake"],
                                    "config": pa.array([None], pa.string()),
                                    "weights": pa.array([None], pa.string()),
                                    "weights_sha256": pa.array([None], pa.string())}))
    analyze_clusters(ws.root, "toy-ckpt0", Options(ks=[12], umap=False, rouge_ablation=False,
                                                   progress=False))
    m = ws.read("cluster_metrics").to_pandas()
    pure = m[m["purity"] > 0.99]
    assert len(pure) >= 6
    assert pure["describability_top1"].all() and (pure["describability_binary"] == 1.0).all()
    assert pure["describability_hits"].between(1, 10).all()


def test_factor_matrix():
    import pandas as pd
    df = pd.DataFrame({"image_id": ["a", "b", "c"], "dataset": "d", "label": [0, 1, 1],
                       "shape": ["x", "y", "x"], "size": [1.0, 2.0, 3.0], "empty": [None] * 3})
    A, cols = factor_matrix(df)
    assert cols == ["label", "shape", "size"] and A.shape == (3, 2 + 2 + 1)


def test_cli_runs(tmp_path):
    from conceptlens.cli import main
    ws = make_workspace(tmp_path / "w", n=100)
    assert main(["analyze", "clusters", "--workspace", str(ws.root), "--k", "4", "--no-umap",
                 "--no-captions", "--quiet"]) == 0
    assert main(["analyze", "clusters", "--workspace", str(ws.root), "--checkpoint", "zz"]) == 2


def test_demo_analysis_stage(tmp_path):
    from conceptlens.demo.analysis import build_analysis
    ws = make_workspace(tmp_path / "w", n=100)
    build_analysis(ws, seed=0, progress=False)
    cm = ws.read("checkpoint_metrics").to_pandas()
    assert len(cm) == 3 and set(cm["k"]) == {10}      # round(sqrt(100))
    assert validate(ws.root) == []
