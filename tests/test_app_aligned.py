"""AppTest of the aligned projections in the Checkpoints page's 'Along training' section
(components/aligned_section.py) on the factory workspace, whose run `toy-run` has hand-made
aligned projections (tests/training_factory.py: epochs 1, 2, 3; the colours separate)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.test_app import assert_clean, open_app, plain
from tests.test_app_checkpoints import CHECKPOINTS, figures, query
from tests.test_app_clusters import projection_args


def _stored(root) -> pd.DataFrame:
    return pd.read_parquet(root / "aligned_projections/dataset=toy/run=toy-run")


def _frame(at) -> dict:
    """The section's WebGL view (the page has two more: A's and B's linked UMAPs)."""
    n = sum(e.proto.component_name.endswith("projection.projection") for e in at.get("component_instance"))
    views = [projection_args(at, i) for i in range(n)]
    (mine,) = [v for v in views if "|toy-run|" in v.get("data_key", "")]
    return mine


def _xy(frame: dict) -> dict:
    return {i: (float(x), float(y)) for i, x, y in zip(frame["ids"], frame["x"], frame["y"])}


def _ringed(frame: dict) -> set:
    return set() if frame["ring"] is None else {i for i, r in zip(frame["ids"], frame["ring"]) if r}


def test_the_slider_shows_each_frame_and_keeps_it_in_the_url(monkeypatch, factory_template):
    stored = _stored(factory_template)
    at = open_app(monkeypatch, factory_template, CHECKPOINTS, query={"run": "toy-run"})
    assert_clean(at)
    first = stored[stored["epoch"] == 1]
    want = {i: (x, y) for i, x, y in zip(first["image_id"], first["x"], first["y"])}
    got = _xy(_frame(at))
    assert got.keys() == want.keys()
    bad = [(i, got[i], want[i]) for i in want if not np.allclose(got[i], want[i], atol=1e-5)]
    assert not bad, bad[:3]
    at.select_slider(key="ckpts_aframe").set_value(3).run()
    assert_clean(at)
    assert query(at)["aframe"] == "3"
    last = stored[stored["epoch"] == 3]
    got = _xy(_frame(at))
    assert all(
        np.allclose(got[i], (x, y), atol=1e-5) for i, x, y in zip(last["image_id"], last["x"], last["y"])
    )
    # The images that moved most from epoch 2 to 3, largest first, from the stored drift.
    top = last.sort_values(["drift", "image_id"], ascending=[False, True]).head(24)
    shown = [t for t in at.dataframe if "drift" in t.value.columns][-1].value
    assert list(shown["image"]) == list(top["image_id"])
    assert "from epoch 2 to epoch 3" in plain(at.markdown)


def test_a_region_drawn_on_one_frame_rings_the_same_images_in_every_frame(monkeypatch, factory_template):
    stored = _stored(factory_template)
    first = stored[stored["epoch"] == 1]
    # A box around the first frame's points right of x = 0.5 (the colour at angle 0.5 rad).
    inside = set(first.loc[first["x"].between(0.5, 10) & first["y"].between(-10, 10), "image_id"])
    assert 0 < len(inside) < len(first)
    link = {"run": "toy-run", "aframe": "3", "aregion": "box:0.5,10,-10,10", "aat": "1"}
    at = open_app(monkeypatch, factory_template, CHECKPOINTS, query=link)
    assert_clean(at)
    frame = _frame(at)
    assert _ringed(frame) == inside  # the frame shown (epoch 3) rings the images of epoch 1's region
    assert frame["region"] is None  # drawn on another frame: not drawn here
    assert f"{len(inside)} images selected in epoch 1" in plain(at.markdown)
    # The small multiples ring them in every panel.
    (fig,) = [f for f in figures(at) if any(t.name and t.name.startswith("selected") for t in f.data)]
    sel = [t for t in fig.data if t.name and t.name.startswith("selected")]
    assert len(sel) == 3
    assert all({str(c[0]) for c in t.customdata} == inside for t in sel)
    # Back to the frame it was drawn on: the region is drawn there too.
    at.select_slider(key="ckpts_aframe").set_value(1).run()
    assert_clean(at)
    frame = _frame(at)
    assert _ringed(frame) == inside and frame["region"]["kind"] == "box"
    # A selection committed on this frame replaces the link's (the view's on_change).
    second = stored[stored["epoch"] == 1]
    left = set(second.loc[second["x"] < -0.5, "image_id"])
    at.session_state["ckpts_aregion"] = "box:-10,-0.5,-10,10"
    at.session_state["ckpts_aat"] = 1
    at.run()
    assert_clean(at)
    assert _ringed(_frame(at)) == left and query(at)["aregion"] == "box:-10,-0.5,-10,10"


def test_a_run_without_aligned_projections_says_how_to_compute_them(monkeypatch, factory_copy):
    import shutil

    shutil.rmtree(factory_copy / "aligned_projections")
    at = open_app(monkeypatch, factory_copy, CHECKPOINTS, query={"run": "toy-run"})
    assert_clean(at)
    assert any("conceptlens analyze aligned_projections" in c.value for c in at.code)
