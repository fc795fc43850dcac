"""The aligned projections' figures (conceptlens/figures/aligned.py, catalogue entries
`aligned_frames` and `aligned_drift`) on the factory workspace's hand-made frames
(tests/training_factory.py), and their views."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from pypdf import PdfReader

from conceptlens.cli import main
from conceptlens.db import WorkspaceDB
from conceptlens.figures.aligned import aligned_frames, drift_lines
from conceptlens.figures.export import read_provenance
from conceptlens.views import aligned as A


def _stored(root) -> pd.DataFrame:
    return pd.read_parquet(root / "aligned_projections/dataset=toy/run=toy-run")


def test_views_read_the_frames_region_and_drift(factory_template):
    db = WorkspaceDB(factory_template)
    stored = _stored(factory_template)
    frames = A.frames(db, dataset="toy", run="toy-run")
    assert list(frames["epoch"]) == [1, 2, 3] and A.frame_keys(frames) == [1, 2, 3]
    assert A.frame_step(frames, 2) == 1 and A.frame_step(frames, 7) is None
    f0 = stored[stored["step"] == 0]
    box = set(f0.loc[f0["x"].between(-1, 1) & f0["y"].between(0, 2), "image_id"])
    assert set(A.region_ids(db, "toy", "toy-run", 0, "box:-1,1,0,2")) == box
    # a lasso (the same square as a path) keeps the same images
    assert set(A.region_ids(db, "toy", "toy-run", 0, "lasso:-1,0,1,0,1,2,-1,2")) == box
    pts = A.points(db, "toy", "toy-run", colour="shape")
    by = A.drift_by(pts, "shape")
    want = stored[stored["step"] > 0].merge(pts[["image_id", "shape"]].drop_duplicates(), on="image_id")
    mean = want.groupby(["step", "shape"])["drift"].mean()
    got = by[by["value"] != "all images"].set_index(["step", "value"])["mean"]
    assert np.allclose(got.sort_index().to_numpy(), mean.sort_index().to_numpy())
    overall = by[by["value"] == "all images"].set_index("step")["median"]
    assert np.allclose(overall.to_numpy(), want.groupby("step")["drift"].median().to_numpy())
    top = A.top_drift(db, "toy", "toy-run", step=None, limit=5)
    path = stored.groupby("image_id")["drift"].sum().sort_values(ascending=False)
    assert np.allclose(top["drift"], path.iloc[:5].to_numpy())
    assert A.evenly(3) == [0, 1, 2] and A.evenly(24, 6) == [0, 5, 9, 14, 18, 23]


def test_small_multiples_share_axes_and_ring_a_selection_in_every_panel(factory_template):
    db = WorkspaceDB(factory_template)
    pts = A.points(db, "toy", "toy-run", colour="label_name")
    ids = list(pts["image_id"].unique()[:5])
    fig = aligned_frames(pts, colour="label_name", ids=ids)
    assert [a.text for a in fig.layout.annotations] == ["epoch 1", "epoch 2", "epoch 3"]
    ranges = {tuple(fig.layout[k].range) for k in fig.layout if k.startswith(("xaxis", "yaxis"))}
    assert len(ranges) == 2  # one x range and one y range for every panel
    sel = [t for t in fig.data if t.name and t.name.startswith("selected")]
    assert len(sel) == 3 and all(sorted(c[0] for c in t.customdata) == sorted(ids) for t in sel)
    # every image drawn once per panel, in its colour's trace
    drawn = [t for t in fig.data if not (t.name or "").startswith("selected")]
    assert sum(len(t.x) for t in drawn) == len(pts)
    # a numeric colour: one colour scale
    num = aligned_frames(pts.assign(v=np.arange(len(pts), dtype=float)), colour="v")
    assert sum(bool(t.marker.showscale) for t in num.data) == 1
    by = A.drift_by(pts, "label_name")
    lines = drift_lines(by, "label_name")
    assert [t.name for t in lines.data][-1] == "all images" and len(lines.data) == 4


def test_both_figures_export_in_three_formats_with_provenance(factory_template, tmp_path):
    spec = tmp_path / "figures.toml"
    spec.write_text(
        """
formats = ["pdf", "svg", "png"]
[[figure]]
figure = "aligned_frames"
run = "toy-run"
acolor = "shape"
aregion = "box:-1,1,0,2"
aat = 1
width = "single"
file = "frames"
[[figure]]
figure = "aligned_drift"
run = "toy-run"
width = "single"
file = "drift"
"""
    )
    out = tmp_path / "out"
    assert (
        main(["figures", "--workspace", str(factory_template), "--out", str(out), "--spec", str(spec)]) == 0
    )
    m = json.loads((out / "manifest.json").read_text())
    files = {f["path"]: f for f in m["files"]}
    assert set(files) == {f"{n}.{x}" for n in ("frames", "drift") for x in ("pdf", "svg", "png")}
    assert files["frames.pdf"]["params"]["aregion"] == "box:-1,1,0,2"
    prov = read_provenance((out / "frames.pdf").read_bytes(), "pdf")
    assert prov["figure"] == "aligned_frames" and "run=toy-run" in prov["url"]
    box = PdfReader(out / "frames.pdf").pages[0].mediabox
    assert abs(float(box.width) - 3.5 * 72) < 1


def test_a_depth_sequence_is_named_by_layer_and_training_by_epoch():
    """Issue 47: a depth sequence's frames (its `epoch` column holds the depth) were titled
    "epoch 0..3" on the slider, the small multiples and the drift axis. The word follows the
    sequence's axis, read from its name as the analysis makes it."""
    from conceptlens.analysis.base import sequence_name
    from conceptlens.views import training as T

    rng = np.random.default_rng(0)
    pts = pd.DataFrame(
        [
            {
                "step": s,
                "epoch": d,
                "checkpoint_id": f"r-d{d}",
                "image_id": f"i{i}",
                "x": x,
                "y": y,
                "label_name": "ab"[i % 2],
                "drift": np.nan if s == 0 else abs(x),
            }
            for s, d in enumerate((0, 1, 3))
            for i, (x, y) in enumerate(rng.normal(size=(6, 2)))
        ]
    )
    for run, word, other in ((sequence_name("r", "depth", 20), "layer", "epoch"), ("r", "epoch", "layer")):
        axis = T.axis(run)
        titles = [a.text for a in aligned_frames(pts, axis=axis).layout.annotations]
        assert titles == [f"{word} 0", f"{word} 1", f"{word} 3"]
        fig = drift_lines(A.drift_by(pts, "label_name"), axis=axis)
        assert fig.layout.xaxis.title.text.startswith(word) and other not in fig.layout.xaxis.title.text
        assert all(f"{word} %{{x}}" in t.hovertemplate for t in fig.data)
