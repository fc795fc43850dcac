"""AppTest of the Clusters page's UMAP when it has more points than it draws one by one
(CONCEPTLENS_MAX_POINTS=10 on the factory's 48): the binned overview, a viewport from the
link that shows its points, zooming to a drawn region and back, and the selection."""

import numpy as np
import pandas as pd
import pytest

from conceptlens.views import projection_window as W
from tests.test_app import assert_clean, open_app, plain
from tests.test_app_clusters import array, figures, metrics

CLUSTERS = "pages/clusters.py"


@pytest.fixture
def big(monkeypatch):
    monkeypatch.setenv("CONCEPTLENS_MAX_POINTS", "10")


def projection(ws) -> pd.DataFrame:
    return pd.read_parquet(ws / "projections/checkpoint_id=ck0/method=umap/part-0.parquet")


def umap(at):
    return next(f for f in figures(at) if f.layout.xaxis.title.text == "UMAP 1")


def test_overview_bins_every_point(monkeypatch, factory_template, big):
    at = open_app(monkeypatch, factory_template, CLUSTERS, query={"ckpt": "ck0"})
    assert_clean(at)
    fig = umap(at)
    heat, targets = fig.data
    assert (heat.type, targets.type) == ("heatmap", "scattergl")
    z = array(heat.z)
    assert np.nansum(np.round(10**z)) == 48  # log10 of each bin's count, all 48 images
    assert "48 of 48 points in view" in plain(at.caption)
    assert "view" not in at.query_params
    assert at.selectbox(key="clusters_density").value == "images"
    at.selectbox(key="clusters_density").set_value("purity").run()
    assert at.query_params["density"] == "purity"
    assert np.nanmax(array(umap(at).data[0].z)) <= 1.0


def test_a_viewport_link_shows_its_points_and_show_all_returns(monkeypatch, factory_template, big):
    proj = projection(factory_template)
    vp = (-0.5, 0.5, -0.4, 0.6)
    inside = proj[proj.x.between(vp[0], vp[1]) & proj.y.between(vp[2], vp[3])]
    assert 0 < len(inside) <= 10
    at = open_app(monkeypatch, factory_template, CLUSTERS, query={"ckpt": "ck0", "view": "-0.5,0.5,-0.4,0.6"})
    assert_clean(at)
    fig = umap(at)
    assert {t.type for t in fig.data} == {"scattergl"}
    ids = {c[0] for t in fig.data if t.customdata is not None for c in t.customdata}
    assert ids == set(inside["image_id"])
    assert tuple(fig.layout.xaxis.range) == vp[:2]
    assert f"{len(inside)} of 48 points in view" in plain(at.caption)
    at.button(key="clusters_zoom_out").click().run()
    assert "view" not in at.query_params and umap(at).data[0].type == "heatmap"


def test_a_region_selects_from_every_point_and_zooms_in(monkeypatch, factory_template, big):
    proj = projection(factory_template)
    q = {"ckpt": "ck0", "region": "box:-0.2,0.6,-1,0.3", "sel": "region"}
    at = open_app(monkeypatch, factory_template, CLUSTERS, query=q)
    assert_clean(at)
    inside = proj[proj.x.between(-0.2, 0.6) & proj.y.between(-1, 0.3)]
    assert metrics(at)["images selected"] == str(len(inside))
    (box,) = umap(at).layout.selections  # drawn again on the overview
    assert (box.x0, box.x1) == (-0.2, 0.6)
    at.button(key="clusters_zoom_region").click().run()
    assert W.parse_viewport(at.query_params["view"]) == (-0.2, 0.6, -1.0, 0.3)
    assert metrics(at)["images selected"] == str(len(inside))  # the selection stays
    assert umap(at).data[0].type == ("scattergl" if len(inside) <= 10 else "heatmap")


def test_a_bad_viewport_link_warns_and_shows_the_overview(monkeypatch, factory_template, big):
    at = open_app(monkeypatch, factory_template, CLUSTERS, query={"ckpt": "ck0", "view": "1,0,**x**,2"})
    assert not at.exception
    assert "1,0,**x**,2" in plain(at.warning)
    assert umap(at).data[0].type == "heatmap" and "view" not in at.query_params


def test_another_checkpoint_forgets_the_viewport(monkeypatch, factory_template, big):
    at = open_app(monkeypatch, factory_template, CLUSTERS, query={"ckpt": "ck0", "view": "-0.5,0.5,-0.4,0.6"})
    at.selectbox(key="clusters_ckpt").set_value("ck1").run()
    assert_clean(at)
    assert "view" not in at.query_params and umap(at).data[0].type == "heatmap"


def test_under_the_limit_the_page_draws_every_point(monkeypatch, factory_template):
    from tests.test_app_clusters import projection_args

    monkeypatch.setenv("CONCEPTLENS_MAX_POINTS", "48")
    at = open_app(monkeypatch, factory_template, CLUSTERS, query={"ckpt": "ck0"})
    assert_clean(at)
    # The WebGL view draws every point (no binned Plotly figure, no zoom buttons).
    assert not [f for f in figures(at) if f.layout.xaxis.title.text == "UMAP 1"]
    assert "clusters_zoom_out" not in [b.key for b in at.button]
    assert sorted(projection_args(at)["ids"]) == sorted(projection(factory_template)["image_id"])
