"""The Clusters and Checkpoints pages in a real browser: no exception, deep links, UMAP selection.

Screenshots go to tests/artifacts/ (a tall viewport: Streamlit scrolls inside its
main container, so a full-page screenshot only grows with the viewport).
"""
from urllib.parse import parse_qs, urlparse

import pandas as pd
import pytest

from tests.browser import ARTIFACTS, serve, wait_for_script
from tests.cluster_ws import cluster_ws  # noqa: F401  (fixture)
from tests.test_app_clusters import deep_link_choice

pytestmark = pytest.mark.browser
VIEWPORT = {"width": 1400, "height": 4400}


@pytest.fixture(scope="module")
def app_url(cluster_ws):  # noqa: F811
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serve(cluster_ws) as url:
        yield url


def open_page(browser, url, name, viewport=VIEWPORT):
    page = browser.new_page(viewport=viewport)
    page.goto(url)
    # app.py's navigation (page titles, not file names) shows the page ran inside the app's
    # frame, even when it is the server's first request (components/frame.py).
    page.wait_for_selector('[data-testid="stSidebarNav"] >> text=Checkpoints', timeout=120_000)
    page.wait_for_selector('[data-testid="stMain"] h1', timeout=120_000)
    wait_for_script(page)
    nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
    assert "Home" in nav and "app" not in nav.split(), nav
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    return page


def query_of(page) -> dict:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


@pytest.mark.parametrize("name", ["clusters", "checkpoints"])
def test_page_renders(browser, app_url, name):
    page = open_page(browser, f"{app_url}/{name}", name)
    main = page.locator('[data-testid="stMain"]')
    assert name.capitalize() in main.locator("h1").first.inner_text()
    assert main.locator(".js-plotly-plot").count() >= 2
    assert "not computed yet" not in main.inner_text()
    page.close()


def test_clusters_deep_link(browser, app_url, cluster_ws):  # noqa: F811
    q = deep_link_choice(cluster_ws)
    url = f"{app_url}/clusters?" + "&".join(f"{k}={v}" for k, v in q.items())
    page = open_page(browser, url, "clusters-deep-link")
    text = page.locator('[data-testid="stMain"]').inner_text()
    assert f"Cluster {q['cluster']}" in text
    assert "not available" not in text
    got = query_of(page)
    assert all(got[k] == v for k, v in q.items()), got
    # The selectboxes show the linked view.
    assert page.get_by_role("combobox", name="Checkpoint").input_value() == q["ckpt"]
    assert page.get_by_role("combobox", name="k (clusters)").input_value() == q["k"]
    # The cluster and its hard negative show images.
    assert page.locator('[data-testid="stImage"] img').count() >= 2
    page.close()


def test_checkpoints_deep_link(browser, app_url, cluster_ws):  # noqa: F811
    ck = pd.read_parquet(cluster_ws / "checkpoint_metrics.parquet", columns=["checkpoint_id", "k"])
    ids = sorted(ck.loc[ck.k == ck.k.max(), "checkpoint_id"])
    meta = pd.read_parquet(cluster_ws / "checkpoints.parquet").set_index("checkpoint_id")
    ds = meta.loc[ids[0], "dataset"]
    ids = [i for i in ids if meta.loc[i, "dataset"] == ds]
    q = {"ds": ds, "k": str(int(ck.k.max())), "a": ids[-1], "b": ids[0]}
    url = f"{app_url}/checkpoints?" + "&".join(f"{k}={v}" for k, v in q.items())
    page = open_page(browser, url, "checkpoints-deep-link")
    got = query_of(page)
    assert all(got[k] == v for k, v in q.items()), got
    main = page.locator('[data-testid="stMain"]')
    assert "A clusters that split" in main.inner_text()
    # CL vs ID, aNMI heatmap, Sankey (and training curves when a run has stages).
    assert main.locator(".js-plotly-plot").count() >= 3
    assert main.locator(".js-plotly-plot .sankey").count() == 1
    page.close()


def test_umap_box_selection_shows_images(browser, app_url):
    page = open_page(browser, f"{app_url}/clusters", "clusters-umap-before",
                     viewport={"width": 1400, "height": 1000})
    plot = page.locator(".js-plotly-plot").filter(has=page.locator(".scattergl, .gl-container")).last
    plot.scroll_into_view_if_needed()
    drag = plot.locator(".nsewdrag").first
    box = drag.bounding_box()
    assert box, "UMAP plot area not found"
    page.mouse.move(box["x"] + 2, box["y"] + 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=8)
    page.mouse.move(box["x"] + box["width"] - 2, box["y"] + box["height"] - 2, steps=8)
    page.mouse.up()
    page.wait_for_selector("text=selected images", timeout=60_000)
    wait_for_script(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    section = page.locator('[data-testid="stMain"]').inner_text()
    assert "selected images" in section
    page.screenshot(path=str(ARTIFACTS / "clusters-umap-selection.png"), full_page=True)
    page.close()


def test_clicking_a_table_row_selects_the_cluster(browser, app_url, cluster_ws):  # noqa: F811
    q = deep_link_choice(cluster_ws)
    url = f"{app_url}/clusters?" + "&".join(f"{k}={v}" for k, v in q.items())
    page = open_page(browser, url, "clusters-before-row-click", viewport={"width": 1400, "height": 1400})
    grid = page.locator('[data-testid="stDataFrame"]').first.bounding_box()
    # The grid is a canvas: click the selection checkbox of the second row (35 px rows + header).
    page.mouse.click(grid["x"] + 14, grid["y"] + 35 + 35 * 1 + 17)
    page.wait_for_function("() => new URL(location.href).searchParams.get('cluster') === '1'",
                           timeout=60_000)
    wait_for_script(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.get_by_role("combobox", name="Cluster", exact=True).input_value().startswith("1")
    assert "Cluster 1" in page.locator('[data-testid="stMain"]').inner_text()
    page.close()
