"""The Clusters and Checkpoints pages in a real browser on the factory workspace: deep links,
a table row, a box selection on the UMAP, the Sankey's flows, the export popover."""

import pytest

from tests.browser import main_text, open_page, query_of, screenshot, select_grid_row, serve, wait_for_script

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def app_url(factory_template):
    with serve(factory_template) as url:
        yield url


def link(base, path, **q):
    return f"{base}/{path}?" + "&".join(f"{k}={v}" for k, v in q.items())


def combobox(page, name) -> str:
    return page.get_by_role("combobox", name=name, exact=True).input_value()


def test_clusters_deep_link(browser, app_url):
    q = {"ds": "toy", "ckpt": "ck2", "k": "4", "cluster": "2"}
    page = open_page(browser, link(app_url, "clusters", **q), "clusters-deep-link")
    assert "not available" not in main_text(page)
    assert {k: query_of(page)[k] for k in q} == q
    assert combobox(page, "Checkpoint") == "ck2" and combobox(page, "k (clusters)") == "4"
    assert combobox(page, "Cluster").startswith("2 — a blue shape")
    assert "Hard negative: cluster 3" in main_text(page)
    # The cluster's and its hard negative's images.
    assert page.locator('[data-testid="stImage"] img').count() >= 2
    page.close()


def test_clicking_a_table_row_selects_the_cluster(browser, app_url):
    page = open_page(
        browser,
        link(app_url, "clusters", ckpt="ck0", cluster="0"),
        "clusters-before-row-select",
        viewport={"width": 1400, "height": 1400},
    )
    select_grid_row(page, page.get_by_test_id("stDataFrame").first, 3)
    page.wait_for_function("() => new URL(location.href).searchParams.get('cluster') === '3'", timeout=60_000)
    wait_for_script(page)
    screenshot(page, "clusters-after-row-select")
    assert page.get_by_test_id("stException").count() == 0
    assert combobox(page, "Cluster").startswith("3")
    assert "Cluster 3" in main_text(page)
    page.close()


def test_umap_box_selection_shows_its_images(browser, app_url):
    page = open_page(
        browser,
        link(app_url, "clusters", ckpt="ck0"),
        "clusters-umap-before",
        viewport={"width": 1400, "height": 1000},
    )
    umap = page.get_by_test_id("stPlotlyChart").filter(has=page.locator(".scattergl, .gl-container")).last
    umap.scroll_into_view_if_needed()
    # Drag over the whole plot area (Plotly's drag layer), corner to corner.
    box = umap.locator(".nsewdrag").first.bounding_box()
    assert box, "UMAP plot area not found"
    page.mouse.move(box["x"] + 2, box["y"] + 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=8)
    page.mouse.move(box["x"] + box["width"] - 2, box["y"] + box["height"] - 2, steps=8)
    page.mouse.up()
    page.get_by_text("48 selected images").wait_for(timeout=60_000)
    wait_for_script(page)
    screenshot(page, "clusters-umap-selection")
    assert page.get_by_test_id("stException").count() == 0
    # The selection's grid: all 48 factory images, after the two cluster grids.
    assert page.get_by_test_id("stImage").last.locator("img").count() == 48
    page.close()


def test_checkpoints_deep_link_and_flows(browser, app_url):
    q = {"ds": "toy", "k": "4", "a": "ck2", "b": "ck0"}
    page = open_page(browser, link(app_url, "checkpoints", **q), "checkpoints-deep-link")
    assert {k: query_of(page)[k] for k in q} == q
    main = page.get_by_test_id("stMain")
    assert "A clusters that split" in main.inner_text()
    assert main.locator(".js-plotly-plot .sankey").count() == 1
    assert main.locator(".js-plotly-plot .heatmaplayer, .js-plotly-plot .hm").count() >= 1
    significant = main.locator(".sankey-link").count()
    page.get_by_role("radiogroup").get_by_text("all flows").click()
    wait_for_script(page)
    screenshot(page, "checkpoints-all-flows")
    assert page.get_by_test_id("stException").count() == 0
    assert main.locator(".sankey-link").count() >= significant > 0
    page.close()


def test_export_popover_offers_every_format(browser, app_url):
    page = open_page(
        browser, link(app_url, "checkpoints"), "checkpoints-export", viewport={"width": 1400, "height": 1400}
    )
    page.get_by_role("button", name="Export figure").first.click()
    popover = page.get_by_test_id("stPopoverBody")
    popover.wait_for()
    assert popover.get_by_role("button", name="Download PDF").count() == 1
    page.close()
