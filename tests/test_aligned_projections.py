"""The `aligned_projections` analysis (issue 27) on a hand-built sequence whose right answer is
known: run `toy-run` (ck2 -> ck1 -> ck0 by epoch) with six groups of images; ck1's features
are ck2's exactly, and at ck0 one group (red squares) moves onto another group's place
(blue circles). So the first step moves nothing and the second moves that group most."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conceptlens.analysis import aligned_projections as AP
from conceptlens.analysis import by_name, runner
from conceptlens.analysis.base import EVERYTHING, Unit
from conceptlens.analysis.common import Context
from conceptlens.analysis.runner import due, missing, run
from conceptlens.validate import validate
from conceptlens.workspace import Workspace
from harness.factory import make_workspace, write_features
from tests.helpers_analysis_workspace import build, ctx_of

N, DIM, GROUPS = 120, 16, 6
OPTS = {"aligned_neighbors": 10}


def _group(i: int) -> int:
    """The factory's image i is colour i % 3 and shape (i // 3) % 2: six groups."""
    return (i % 3) * 2 + (i // 3) % 2


def _features(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((GROUPS, DIM)) * 4
    group = np.array([_group(i) for i in range(N)])
    X1 = centres[group] + rng.standard_normal((N, DIM))
    X3 = X1.copy()
    moved = group == 0
    X3[moved] = centres[5] + rng.standard_normal((int(moved.sum()), DIM))
    return X1, X3, group


def _sequence(root) -> tuple[Workspace, np.ndarray]:
    ws = make_workspace(root, n_images=N, n_checkpoints=3, dim=DIM)
    ids = sorted(ws.read("images")["image_id"].to_pylist())
    X1, X3, group = _features()
    write_features(ws, "ck2", ids, X1)  # epoch 1
    write_features(ws, "ck1", ids, X1)  # epoch 2: the same features
    write_features(ws, "ck0", ids, X3)  # epoch 3: group 0 moved onto group 5
    return ws, group


def _table(ws: Workspace) -> pd.DataFrame:
    return ws.read("aligned_projections", dataset="toy", run="toy-run").to_pandas()


@pytest.fixture(scope="module")
def seq_ws(tmp_path_factory):
    ws, group = _sequence(tmp_path_factory.mktemp("aligned") / "ws")
    run(ws.root, ["aligned_projections"], options=OPTS, progress_bars=False, with_dependencies=False)
    return ws, group


def _by_step(t: pd.DataFrame, step: int) -> pd.DataFrame:
    return t[t["step"] == step].sort_values("image_id").reset_index(drop=True)


def test_frames_follow_the_run_in_epoch_order_with_every_image(seq_ws):
    ws, _ = seq_ws
    t = _table(ws)
    frames = t.groupby("step").agg(
        ck=("checkpoint_id", "first"), epoch=("epoch", "first"), n=("image_id", "size")
    )
    assert list(frames["ck"]) == ["ck2", "ck1", "ck0"]
    assert list(frames["epoch"]) == [1, 2, 3]
    assert set(frames["n"]) == {N}
    assert t["drift"][t["step"] == 0].isna().all()
    assert set(t["method"]) == {"aligned_umap"}
    # drift is the distance to the image's own place in the frame before
    a, b = _by_step(t, 1), _by_step(t, 2)
    assert np.allclose(b["drift"], np.hypot(b["x"] - a["x"], b["y"] - a["y"]))
    assert [p for p in validate(ws.root) if "aligned_projections" in str(p)] == []


def test_an_unchanged_checkpoint_barely_moves_and_the_moved_group_drifts_most(seq_ws):
    ws, group = seq_ws
    t = _table(ws)
    f0, f1, f2 = (_by_step(t, s) for s in range(3))
    g = np.array([group[int(i.split("-")[1])] for i in f0["image_id"]])
    spread = np.hypot(f1["x"] - f1["x"].mean(), f1["y"] - f1["y"].mean()).mean()
    # The same features: AlignedUMAP's alignment keeps each image near its place.
    assert f1["drift"].median() < 0.05 * spread
    per_group = pd.Series(f2["drift"].to_numpy()).groupby(g).mean()
    assert per_group.idxmax() == 0, per_group
    # The moved group moved further than any image moved between the identical checkpoints.
    assert per_group[0] > 3 * f1["drift"].quantile(0.95)
    # ... and ends next to the group it joined (its mean place among group 5's points).
    centre = lambda f, k: f[["x", "y"]].to_numpy()[g == k].mean(axis=0)  # noqa: E731
    assert np.linalg.norm(centre(f2, 0) - centre(f2, 5)) < np.linalg.norm(centre(f1, 0) - centre(f1, 5)) / 3


def test_procrustes_frames_of_identical_features_are_identical():
    """Each frame is its checkpoint's seeded UMAP moved rigidly onto the previous frame:
    the same features give the same frame (zero drift), and a frame keeps its UMAP's
    distances (a rigid motion)."""
    X1, X3, _ = _features()
    norm = lambda X: (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)  # noqa: E731
    frames = AP.aligned_frames([norm(X1), norm(X1), norm(X3)], "procrustes", 10, 0.1, 0)
    assert np.allclose(frames[0], frames[1], atol=1e-8)
    assert np.allclose(AP.drifts(frames)[1], 0.0, atol=1e-8)
    own = AP._umap(norm(X3), 10, 0.1, 0)
    d = lambda Y: np.linalg.norm(Y[:, None] - Y[None], axis=-1)  # noqa: E731
    assert np.allclose(d(frames[2]), d(own), atol=1e-6)


def test_procrustes_onto_undoes_a_rotation_reflection_and_shift():
    rng = np.random.default_rng(3)
    ref = rng.standard_normal((50, 2))
    theta = 1.1
    rot = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]]) @ np.diag([1, -1])
    moved = ref @ rot + np.array([5.0, -2.0])
    assert np.allclose(AP.procrustes_onto(moved, ref), ref, atol=1e-10)


def test_the_sample_is_seeded_and_capped():
    ids = np.array([f"i{j:03d}" for j in range(300)], dtype=object)
    a, b = AP.sample_ids(ids, 50, 0), AP.sample_ids(ids, 50, 0)
    assert len(a) == 50 and list(a) == list(b) and list(a) == sorted(a)
    assert list(AP.sample_ids(ids, 50, 1)) != list(a)
    assert list(AP.sample_ids(ids, 500, 0)) == list(ids)


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="--align"):
        AP.aligned_frames([np.eye(3), np.eye(3)], "tsne", 5, 0.1, 0)
    opt = {o.name: o for o in AP.ANALYSIS.options}
    with pytest.raises(ValueError, match="--aligned-min-dist"):
        opt["aligned_min_dist"].check(1.5)
    with pytest.raises(ValueError, match="--align"):
        opt["align"].check("tsne")


def test_seeded_rerun_is_identical_and_options_and_inputs_make_it_due(tmp_path):
    """Determinism: the same workspace analysed again (--force) writes the same coordinates.
    Done until an option that changes the result changes, or a checkpoint's features are
    extracted again; re-clustering (not an input) leaves it done."""
    ws, _ = _sequence(tmp_path / "ws")
    opts = {**OPTS, "aligned_max_images": 90}
    run(ws.root, ["aligned_projections"], options=opts, progress_bars=False, with_dependencies=False)
    first = _table(ws)
    assert first.groupby("step").size().tolist() == [90, 90, 90]
    run(
        ws.root,
        ["aligned_projections"],
        options=opts,
        force=True,
        progress_bars=False,
        with_dependencies=False,
    )
    again = _table(ws)
    pd.testing.assert_frame_equal(first, again)
    assert missing(ws.root, ["aligned_projections"])["aligned_projections"] == []
    ctx = Context(ws)
    a = AP.ANALYSIS
    unit = a.units(ctx, {}, EVERYTHING)[0]
    assert due(ctx, a, unit) is None
    assert "options changed" in due(ctx, a, unit, {"aligned_min_dist": 0.3})
    assert "options changed" in due(ctx, a, unit, {"seed": 1})
    assert "options changed" in due(ctx, a, unit, {"align": "procrustes"})
    # re-clustering a checkpoint is no input of this analysis
    from tests.test_training_analyses import _write_clusters

    ids = sorted(ws.read("images")["image_id"].to_pylist())
    _write_clusters(ws, "ck1", ids, np.arange(N) % 4, k=4)
    assert due(Context(ws), a, unit) is None
    # features extracted again (other values) make it due
    X1, _, _ = _features(seed=1)
    write_features(ws, "ck1", ids, X1)
    assert due(Context(ws), a, unit) == "inputs changed"


def test_a_run_whose_checkpoints_share_too_few_images_is_skipped_with_reason(tmp_path):
    ws = make_workspace(tmp_path / "ws", n_images=12, n_checkpoints=2, dim=4)
    ids = sorted(ws.read("images")["image_id"].to_pylist())
    rng = np.random.default_rng(0)
    write_features(ws, "ck0", ids[:6], rng.standard_normal((6, 4)))
    write_features(ws, "ck1", ids[4:], rng.standard_normal((8, 4)))
    run(ws.root, ["aligned_projections"], progress_bars=False, with_dependencies=False)
    assert not ws.has("aligned_projections")
    log = pd.concat(pd.read_parquet(f) for f in ws.files("analysis_runs"))
    assert list(log["status"]) == ["skipped"]
    assert "share 2 image(s)" in log["reason"].iloc[0]


# ---- aligned_projections.py (UMAP stood in for by the first two coordinates) --------------------
def test_aligned_frames_are_each_checkpoints_own_on_the_shared_images(tmp_path, monkeypatch):
    from conceptlens.analysis import aligned_projections as ap
    from conceptlens.metrics import l2_normalize

    monkeypatch.setattr(ap, "_umap", lambda X, nn, md, seed: np.asarray(X[:, :2], np.float64))
    cks = [{"checkpoint_id": f"e{e}", "run": "r", "epoch": e} for e in (3, 1, 2)]
    ws = build(tmp_path / "ws", cks)
    rng = np.random.default_rng(7)
    write_features(ws, "e3", [f"toy-{i}" for i in range(1, 8)], rng.normal(size=(7, 4)))  # no toy-0
    a = by_name()["aligned_projections"]
    unit = Unit({"dataset": "toy", "run": "r"})
    opts = {**a.option_defaults(), "align": "procrustes"}
    a.run(ctx_of(ws), unit, opts, EVERYTHING)
    t = ws.read("aligned_projections", dataset="toy", run="r").to_pandas()
    keep = [f"toy-{i}" for i in range(1, 8)]
    prev = None
    for step, e in enumerate((1, 2, 3)):
        f = t[t["step"] == step]
        assert set(f["checkpoint_id"]) == {f"e{e}"} and set(f["epoch"]) == {e}
        assert f["image_id"].tolist() == keep
        ids, X = ctx_of(ws).features(f"e{e}")
        Xn = l2_normalize(X)[[list(ids).index(i) for i in keep]][:, :2].astype(np.float64)
        want = Xn - Xn.mean(axis=0) if prev is None else ap.procrustes_onto(Xn, prev)
        np.testing.assert_allclose(f[["x", "y"]].to_numpy(), want, rtol=1e-5, atol=1e-6)
        if prev is not None:
            np.testing.assert_allclose(
                f["drift"].to_numpy(float), np.linalg.norm(want - prev, axis=1), rtol=1e-5, atol=1e-6
            )
        prev = want
    # A later checkpoint's features rewritten: the unit is due.
    ctx = ctx_of(ws)
    assert runner.due(ctx, a, unit) is None
    write_features(ws, "e3", keep, rng.normal(size=(7, 4)))
    assert runner.due(ctx_of(ws), a, unit) == "inputs changed"
