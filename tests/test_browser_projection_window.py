"""The Clusters page's UMAP in a real browser when it has more points than it draws one by
one (CONCEPTLENS_MAX_POINTS=10 on the factory's 48): a box drawn on the binned overview
downloads the ids of every image inside it, and a click on a bin zooms in to its points."""

import csv

import pandas as pd
import pytest

from conceptlens.views import projection_window as W
from harness.browser import open_page, query_of, screenshot, serve, wait_for_script
from tests.conftest import copy_ws
from tests.test_browser_clusters import SHORT, chart, link, wait_for_query

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def big_ws(factory_template, tmp_path_factory):
    return copy_ws(factory_template, tmp_path_factory.mktemp("browser-projection") / "ws")


@pytest.fixture(scope="module")
def app_url(big_ws):
    with serve(big_ws, env={"CONCEPTLENS_MAX_POINTS": "10"}) as url:
        yield url


def projection(ws) -> pd.DataFrame:
    return pd.read_parquet(ws / "projections/checkpoint_id=ck0/method=umap/part-0.parquet")


def traces(page) -> list[dict]:
    """Type, point count and first customdata of each trace of the UMAP chart."""
    return page.evaluate(
        """() => {
            const gd = [...document.querySelectorAll('.js-plotly-plot')]
                .find(g => g._fullLayout.xaxis.title.text === 'UMAP 1');
            return gd.data.map(t => ({type: t.type, n: (t.x || []).length,
                                      ids: Array.from(t.customdata || [], c => String(c[0]))}));
        }"""
    )


def test_box_on_the_overview_downloads_every_id_inside(browser, app_url, big_ws, tmp_path):
    page = open_page(browser, link(app_url, "clusters", ckpt="ck0"), "projection-box", SHORT)
    umap = chart(page, "UMAP 1")
    umap.scroll_into_view_if_needed()
    assert [t["type"] for t in traces(page)] == ["heatmap", "scattergl"]
    umap.hover()
    umap.locator('[data-title="Box Select"]').click()
    box = umap.locator(".nsewdrag").first.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2, steps=8)
    page.mouse.move(box["x"] + box["width"] - 2, box["y"] + box["height"] - 2, steps=8)
    page.mouse.up()
    wait_for_query(page, "sel", "region")
    region = query_of(page)["region"]
    assert region.startswith("box:")
    x0, x1, y0, y1 = (float(v) for v in region[4:].split(","))
    proj = projection(big_ws)
    want = proj[proj.x.between(x0, x1) & proj.y.between(y0, y1)]["image_id"]
    assert 0 < len(want) < 48
    screenshot(page, "projection-box")
    with page.expect_download(timeout=60_000) as dl:
        page.get_by_role("button", name="Download image ids (CSV)").click()
    path = tmp_path / "ids.csv"
    dl.value.save_as(path)
    assert sorted(r["image_id"] for r in csv.DictReader(path.open())) == sorted(want)
    page.close()


def test_clicking_a_bin_zooms_in_to_its_points(browser, app_url, big_ws):
    page = open_page(browser, link(app_url, "clusters", ckpt="ck0"), "projection-zoom", SHORT)
    umap = chart(page, "UMAP 1")
    umap.scroll_into_view_if_needed()
    wait_for_script(page)
    # The bin with the most images: its centre, on screen.
    p = page.evaluate(
        """() => {
            const gd = [...document.querySelectorAll('.js-plotly-plot')]
                .find(g => g._fullLayout.xaxis.title.text === 'UMAP 1');
            const t = gd._fullData[1], xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
            let best = 0;
            for (let i = 0; i < t.x.length; i++) if (t.customdata[i][0] > t.customdata[best][0]) best = i;
            const r = gd.getBoundingClientRect();
            return {x: r.left + xa._offset + xa.d2p(t.x[best]), y: r.top + ya._offset + ya.d2p(t.y[best])};
        }"""
    )
    page.mouse.click(p["x"], p["y"])
    page.wait_for_function("() => new URL(location.href).searchParams.get('view') !== null", timeout=60_000)
    wait_for_script(page)
    vp = W.parse_viewport(query_of(page)["view"])
    proj = projection(big_ws)
    inside = proj[proj.x.between(vp[0], vp[1]) & proj.y.between(vp[2], vp[3])]
    assert 0 < len(inside) <= 10
    page.get_by_text(f"{len(inside)} of 48 points in view").wait_for()
    screenshot(page, "projection-zoomed")
    drawn = [t for t in traces(page) if t["type"] == "scattergl" and t["ids"]]
    assert drawn and all(i.startswith("toy-") for t in drawn for i in t["ids"])
    assert set(inside["image_id"]) <= {i for t in drawn for i in t["ids"]}
    # Show all: the overview again, the viewport gone from the link.
    page.get_by_role("button", name="Show all").click()
    page.wait_for_function("() => new URL(location.href).searchParams.get('view') === null")
    wait_for_script(page)
    assert traces(page)[0]["type"] == "heatmap"
    page.close()
