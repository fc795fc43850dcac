"""`conceptlens analyze baselines` and the correlations built on it, end to end on a tiny
workspace with a real (random) conv encoder."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from conceptlens import schema
from conceptlens.analysis import comparisons
from conceptlens.analysis.runner import run
from conceptlens.metrics import baselines as B
from conceptlens.workspace import Workspace
from harness.factory import shapes_workspace

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    """shapes images as dataset `shapes` (labels: shape) and again as `colours` (labels:
    colour); checkpoint `enc` has a loadable random encoder, `lost` names a model that
    does not exist."""
    from conceptlens.demo.encoders import random_encoder, save_weights
    from conceptlens.extract import extract

    root = tmp_path_factory.mktemp("bl") / "ws"
    ws = shapes_workspace(root, n=48)
    img = ws.read("images").to_pandas()
    other = img.assign(
        image_id="c-" + img["image_id"],
        dataset="colours",
        label=img["color"].astype("category").cat.codes.astype("int64"),
        label_name=img["color"],
    )
    both = pd.concat([img, other], ignore_index=True)
    ws.write("images", pa.Table.from_pandas(both, preserve_index=False))
    pre = {"size": 64, "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}
    save_weights(root / "models" / "enc.pt", random_encoder(64, seed=3), {"in_size": 64}, pre)
    spec = "torch:conceptlens.demo.encoders:ConvEncoder"
    extract(ws, "shapes", spec, weights=root / "models" / "enc.pt", checkpoint_id="enc", progress=False)
    extract(ws, "shapes", spec, weights=root / "models" / "enc.pt", checkpoint_id="lost", progress=False)
    ck = ws.read("checkpoints").to_pandas()
    ck.loc[ck["checkpoint_id"] == "lost", "source"] = "torch:conceptlens.nowhere:Missing"
    ws.write("checkpoints", pa.Table.from_pandas(ck, schema=schema.arrow_schema("checkpoints")))
    ctx = run(root, ["baselines"], options={"k": [4], "baseline_images": 16}, progress_bars=False)
    return Workspace(root), ctx, spec


def _features(ws, cid):
    t = ws.read("features", checkpoint_id=cid).to_pandas().sort_values("image_id")
    return t["image_id"].to_numpy(), np.stack(t["embedding"].to_numpy()).astype(np.float64)


def test_rate_reduction_and_uniformity_are_those_of_the_stored_features_and_clusters(analysed):
    ws, _, _ = analysed
    ids, X = _features(ws, "enc")
    cl = ws.read("clusters", checkpoint_id="enc", k=4).to_pandas().set_index("image_id").loc[ids, "cluster"]
    row = ws.read("baseline_scores", checkpoint_id="enc").to_pandas().iloc[0]
    assert row["k"] == 4
    assert row["mcr2"] == pytest.approx(B.rate_reduction(X, cl.to_numpy(), 0.5), rel=1e-5)
    assert row["uniformity"] == pytest.approx(B.uniformity(X, max_points=16, random_state=0), rel=1e-5)
    assert 0 <= row["alignment"] <= 4 and 0 <= row["rotation"] <= 1


def test_transfer_is_a_linear_probe_on_the_other_dataset(analysed):
    from conceptlens.extract import extract

    ws, _, spec = analysed
    t = ws.read("transfer_scores", checkpoint_id="enc").to_pandas()
    assert list(t["target_dataset"]) == ["colours"]  # never its own dataset
    # The same probe, computed from the target's features extracted the ordinary way.
    extract(ws, "colours", spec, weights=ws.root / "models" / "enc.pt", checkpoint_id="probe", progress=False)
    ids, X = _features(ws, "probe")
    meta = ws.read("images").to_pandas().set_index("image_id").loc[ids]
    tr = (meta["split"] == "train").to_numpy()
    y = meta["label"].to_numpy()
    want = B.linear_probe(X[tr], y[tr], X[~tr], y[~tr])
    assert t["accuracy"].iloc[0] == pytest.approx(want["accuracy"])
    assert t["target_neg_entropy"].iloc[0] == pytest.approx(want["neg_entropy"], rel=1e-4)
    assert (t["n_train"].iloc[0], t["n_test"].iloc[0]) == (tr.sum(), (~tr).sum())


def test_transfer_reads_the_features_of_the_same_model_on_the_target(analysed):
    """A checkpoint of the target dataset extracted with the very model (source, weights
    SHA-256, layer, preprocessing) stands for embedding the target again; another model's
    features never do."""
    from conceptlens.analysis import baselines as BL
    from conceptlens.analysis.common import Context
    from conceptlens.extract import extract

    ws, _, spec = analysed
    extract(ws, "colours", spec, weights=ws.root / "models" / "enc.pt", checkpoint_id="twin", progress=False)
    ctx = Context(ws, progress=False)
    row = ctx.checkpoint_row("enc")
    twin = BL._twin(ctx, row, "colours")
    assert twin in ("probe", "twin")  # (`probe`: another test's extraction of the same model)
    assert BL._twin(ctx, ctx.checkpoint_row("lost"), "colours") is None  # another source
    ids, X = _features(ws, twin)
    pick = list(ids[::3])
    got = BL._target_features(ctx, None, row, "colours", pick)  # no model: read, not run
    assert np.array_equal(got, X[::3].astype(np.float32))
    kept = ws.read("checkpoints")
    ck = kept.to_pandas()
    ck.loc[ck["dataset"] == "colours", "weights_sha256"] = "0" * 64  # other weights
    ws.write("checkpoints", pa.Table.from_pandas(ck, schema=schema.arrow_schema("checkpoints")))
    try:
        assert BL._twin(Context(ws, progress=False), row, "colours") is None
    finally:
        ws.write("checkpoints", kept)


def test_a_model_that_cannot_be_loaded_skips_its_checkpoint_until_it_can(analysed, tmp_path):
    """Not done with missing values (issue 28): skipped with its reason, nothing written,
    and computed by the next run once its model loads."""
    import shutil

    from conceptlens.analysis import runner

    ws, ctx, spec = analysed
    assert any("baselines checkpoint_id=lost: skipped: model" in n for n in ctx.notes)
    assert not ws.has("baseline_scores", checkpoint_id="lost")
    assert not ws.has("transfer_scores", checkpoint_id="lost")
    why = runner.skipped(ws.root)["baselines"]["checkpoint_id=lost"]
    assert why.startswith("model 'torch:conceptlens.nowhere:Missing' could not be loaded")
    assert runner.missing(ws.root, ["baselines"])["baselines"] == ["checkpoint_id=lost"]

    root = Path(shutil.copytree(ws.root, tmp_path / "ws"))
    copy = Workspace(root)
    ck = copy.read("checkpoints").to_pandas()
    ck.loc[ck["checkpoint_id"] == "lost", "source"] = spec  # its model is back
    copy.write("checkpoints", pa.Table.from_pandas(ck, schema=schema.arrow_schema("checkpoints")))
    run(root, ["baselines"], options={"baseline_images": 16}, progress_bars=False, with_dependencies=False)
    row = copy.read("baseline_scores", checkpoint_id="lost").to_pandas().iloc[0]
    assert np.isfinite(row["alignment"]) and np.isfinite(row["rotation"])
    assert runner.skipped(root) == {} and runner.missing(root, ["baselines"])["baselines"] == []


def test_imported_features_get_only_their_model_free_baselines(analysed, tmp_path):
    """A source that is no model spec (features imported without their model): there is no
    model to wait for, so the unit is done with the model-based baselines missing."""
    import shutil

    ws, _, _ = analysed
    root = Path(shutil.copytree(ws.root, tmp_path / "ws"))
    copy = Workspace(root)
    ck = copy.read("checkpoints").to_pandas()
    ck.loc[ck["checkpoint_id"] == "lost", "source"] = "import:lost.npz"
    copy.write("checkpoints", pa.Table.from_pandas(ck, schema=schema.arrow_schema("checkpoints")))
    ctx = run(
        root, ["baselines"], options={"baseline_images": 16}, progress_bars=False, with_dependencies=False
    )
    row = copy.read("baseline_scores", checkpoint_id="lost").to_pandas().iloc[0]
    assert pd.isna(row["alignment"]) and pd.isna(row["rotation"])
    assert np.isfinite(row["mcr2"]) and np.isfinite(row["uniformity"])
    assert copy.read("transfer_scores", checkpoint_id="lost").num_rows == 0
    assert any("lost: source 'import:lost.npz' is no model spec" in n for n in ctx.notes)


def test_baselines_join_the_predictor_table_with_their_own_values():
    m = pd.DataFrame(
        {
            "checkpoint_id": [f"c{i}" for i in range(6)],
            "k": 4,
            "image_set": "same",
            "n_images": 10,
            "cl": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
            "cl_heldout": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
            "id": [5.0, 4, 6, 3, 7, 2],
            "knn_acc": [0.5, 0.6, 0.55, 0.7, 0.65, 0.8],
            "rotation": [0.9, 0.1, 0.5, 0.3, 0.2, 0.4],
            "mcr2": [1.0, 2, 3, 4, 5, 6],
        }
    )
    _, corr, _ = comparisons.clid_and_correlations(m)
    got = {r["predictor"]: r for r in corr}
    from scipy.stats import pearsonr

    assert got["rotation"]["pearson"] == pytest.approx(pearsonr(m["rotation"], m["knn_acc"])[0])
    assert got["mcr2"]["pearson"] == pytest.approx(pearsonr(m["mcr2"], m["knn_acc"])[0])
    assert got["alignment"]["pearson"] is None and got["alignment"]["n_checkpoints"] == 0
    assert set(got) == set(comparisons.PREDICTORS)


def test_transfer_correlations_use_each_targets_accuracy(tmp_path):
    ws = Workspace.create(tmp_path / "w", name="t")
    acc = {"c0": 0.2, "c1": 0.5, "c2": 0.4, "c3": 0.9}
    for cid, a in acc.items():
        ws.write(
            "transfer_scores",
            pa.Table.from_pylist(
                [
                    {
                        "target_dataset": "far",
                        "accuracy": a,
                        "target_neg_entropy": -a,
                        "n_train": 5,
                        "n_test": 5,
                    },
                    {
                        "target_dataset": "near",
                        "accuracy": 1 - a,
                        "target_neg_entropy": -1.0,
                        "n_train": 5,
                        "n_test": 5,
                    },
                ],
                schema=schema.arrow_schema("transfer_scores", partition=False),
            ),
            checkpoint_id=cid,
        )
    sub = pd.DataFrame({"checkpoint_id": list(acc), "cl": [0.1, 0.3, 0.2, 0.8], "knn_acc": [1, 2, 3, 4.0]})
    for p in comparisons.TRANSFER_PREDICTORS:
        if p not in sub:
            sub[p] = math.nan

    class Ctx:
        pass

    ctx = Ctx()
    ctx.ws = ws
    rows = pd.DataFrame(comparisons.transfer_correlations(ctx, {4: sub}, seed=0)).set_index(
        ["target_dataset", "predictor"]
    )
    from scipy.stats import pearsonr

    a = np.array(list(acc.values()))
    assert rows.loc[("far", "cl"), "pearson"] == pytest.approx(pearsonr(sub["cl"], a)[0])
    assert rows.loc[("near", "cl"), "pearson"] == pytest.approx(pearsonr(sub["cl"], 1 - a)[0])
    assert rows.loc[("far", "target_entropy"), "pearson"] == pytest.approx(-1.0)
    assert pd.isna(rows.loc[("near", "target_entropy"), "pearson"])  # constant: no correlation


# ---- the Checkpoints page ------------------------------------------------------------------------
def test_checkpoints_page_without_baselines_says_how_to_compute_them(factory_template, monkeypatch):
    from tests.test_app import assert_clean, open_app

    at = open_app(monkeypatch, factory_template, "pages/checkpoints.py")
    assert_clean(at)
    assert "Transfer to other datasets" in [h.value for h in at.header]
    # The factory has baselines but no second dataset: nothing to transfer to.
    assert any("conceptlens analyze baselines" in c.value for c in at.code)


def test_checkpoints_page_shows_baselines_and_transfer_of_the_demo(demo_ws, monkeypatch):
    import plotly.io

    from conceptlens.db import WorkspaceDB
    from conceptlens.views import checkpoints as V
    from tests.test_app import assert_clean, open_app

    db = WorkspaceDB(demo_ws)
    # The shipped demo has them (its shapes encoder's layers also transfer to the real datasets).
    assert "digits" in V.transfer_targets(db, "shapes")
    at = open_app(monkeypatch, demo_ws, "pages/checkpoints.py", {"ds": "shapes", "target": "digits"})
    assert_clean(at)
    figs = {
        c.proto.spec and plotly.io.from_json(c.proto.spec).layout.xaxis.title.text
        for c in at.get("plotly_chart")
    }
    assert any(t and "transfer acc. (digits)" in t for t in figs)
    assert any(t and "kNN acc." in t for t in figs)
    # The transfer correlations shown are the stored ones, baselines included.
    k = int(V.ks(db, "shapes")["k"].iloc[0])
    tc = V.transfer_correlations(db, "shapes", k, "digits")
    assert {"mcr2", "rotation", "knn_acc", "target_entropy", "clid"} <= set(tc["predictor"])
    corr = V.predictor_correlations(db, "shapes", k)
    assert {"alignment", "uniformity", "mcr2", "rotation"} <= set(corr["predictor"])


def test_the_source_probe_learns_from_the_same_capped_sample_for_every_checkpoint(
    analysed, monkeypatch, tmp_path
):
    """Past `probe_images` train images the probe of -H(Y|X) learns from a seeded sample
    (ImageNet-sized datasets), the same images for every checkpoint; below it from all."""
    import shutil

    ws, _, spec = analysed
    root = tmp_path / "ws"
    shutil.copytree(ws.root, root)
    ck = ws.read("checkpoints").to_pandas()
    ck.loc[ck["checkpoint_id"] == "lost", "source"] = spec  # a model that loads: not skipped
    Workspace(root).write("checkpoints", pa.Table.from_pandas(ck, schema=schema.arrow_schema("checkpoints")))
    seen = []

    def probe(train_x, train_y, test_x, test_y, random_state=0):
        seen.append((len(train_x), tuple(np.asarray(train_y).tolist())))
        return {"accuracy": 0.5, "neg_entropy": -1.0}

    from conceptlens.analysis import baselines as analysis

    monkeypatch.setattr(B, "linear_probe", probe)
    monkeypatch.setattr(analysis, "_targets", lambda *a: [])  # no transfer probes
    opts = {"k": [4], "baseline_images": 16}
    shapes = dict(force=True, progress_bars=False, dataset="shapes")  # other tests add checkpoints
    run(root, ["baselines"], options={**opts, "probe_images": 10}, **shapes)
    ws = Workspace(root)
    train = (ws.read("images").to_pandas().query("dataset == 'shapes'")["split"] == "train").sum()
    n_ckpts = (ws.read("checkpoints").to_pandas()["dataset"] == "shapes").sum()
    assert [n for n, _ in seen] == [10] * n_ckpts and n_ckpts >= 2 and train > 10
    # One sample of images for every checkpoint: the same labels in the same order.
    assert len({labels for _, labels in seen}) == 1
    seen.clear()
    run(root, ["baselines"], options=opts, **shapes)
    assert [n for n, _ in seen] == [train] * n_ckpts
