"""Score this selection in a real browser (issue 26): lasso a group on the Clusters UMAP,
see its scores with their nulls, save it by name, open the saved selection's link in a fresh
browser context and see its scores on every checkpoint. Screenshots in tests/artifacts."""

import time

import pyarrow.parquet as pq
import pytest

from tests.browser import main_text, open_page, query_of, screenshot, serve, wait_for_script
from tests.conftest import copy_ws

pytestmark = pytest.mark.browser
VIEW = {"width": 1400, "height": 2600}
TALLER = {"width": 1400, "height": 2600}  # the reopened selection and its checkpoints table


@pytest.fixture(scope="module")
def selection_ws(factory_template, tmp_path_factory):
    return copy_ws(factory_template, tmp_path_factory.mktemp("browser-selection") / "ws")


def test_lasso_score_save_and_reopen_across_checkpoints(browser, selection_ws):
    started = time.time()
    with serve(selection_ws) as url:  # a loopback server: its visitor is the owner
        print(f"server up: {time.time() - started:.1f} s")
        page = open_page(browser, f"{url}/clusters?ckpt=ck0&nnull=20&score=1", "selection-start", VIEW)
        print(f"page open: {time.time() - started:.1f} s")
        umap = (
            page.get_by_test_id("stPlotlyChart").filter(has=page.locator(".xtitle", has_text="UMAP 1")).first
        )
        umap.scroll_into_view_if_needed()
        umap.hover()
        umap.locator('[data-title="Lasso Select"]').click()
        box = umap.locator(".nsewdrag").first.bounding_box()
        # A lasso around the left half of the plot: a group, not every image.
        x0, y0, w, h = box["x"] + 2, box["y"] + 2, box["width"] * 0.5, box["height"] - 4
        page.mouse.move(x0, y0)
        page.mouse.down()
        for x, y in ((x0 + w, y0), (x0 + w, y0 + h), (x0, y0 + h), (x0, y0 + 2)):
            page.mouse.move(x, y, steps=10)
        page.mouse.up()
        page.wait_for_function(
            "() => new URL(location.href).searchParams.get('sel') === 'region'", timeout=60_000
        )
        wait_for_script(page)
        page.get_by_text("percentile of random sets").first.wait_for(timeout=60_000)
        text = main_text(page)
        assert "Score this selection" in text and "lasso on the Clusters UMAP of checkpoint ck0" in text
        assert "learnability" in text and "of same-label sets" in text
        n = int(page.get_by_test_id("stMetricValue").last.inner_text().replace(",", ""))
        assert 0 < n < 48, n  # a group of the 48 images
        assert f"{n} images" in text
        page.get_by_role("heading", name="Score this selection").scroll_into_view_if_needed()
        screenshot(page, "selection-scored")
        print(f"lassoed and scored: {time.time() - started:.1f} s")

        page.get_by_role("textbox", name="Save as").fill("left group")
        page.get_by_role("button", name="Save selection").click()
        page.wait_for_function(
            "() => new URL(location.href).searchParams.get('saved') === 'left group'", timeout=60_000
        )
        wait_for_script(page)
        assert "Saved as left group" in main_text(page)
        (part,) = (selection_ws / "selections" / "dataset=toy").glob("*.parquet")
        row = pq.read_table(part).to_pylist()[0]
        assert row["name"] == "left group" and row["n_images"] == n == len(row["image_ids"])
        assert row["origin"].startswith("lasso on the Clusters UMAP of checkpoint ck0")
        page.get_by_text("Saved as left group").evaluate("e => e.scrollIntoView({block: 'center'})")
        screenshot(page, "selection-saved")
        link = page.url
        print(f"saved: {time.time() - started:.1f} s")
        assert query_of(page)["ssrc"] == "saved"
        page.close()

        # The link, in a fresh browser context, with the scores on every checkpoint.
        page = open_page(browser, link + "&across=1", "selection-reopened", TALLER)
        page.get_by_text("Which checkpoint learned this group best").wait_for(timeout=120_000)
        wait_for_script(page)
        assert (
            page.get_by_role("combobox", name="Saved selection", exact=True)
            .input_value()
            .startswith("left group")
        )
        text = main_text(page)
        assert f"{n} images" in text and "from: lasso on the Clusters UMAP" in text
        # The figure of the scores per checkpoint, below its table.
        assert page.locator(".js-plotly-plot .subplot").count() >= 3
        grid = page.get_by_test_id("stDataFrame").last
        grid.locator("th").first.wait_for(state="attached", timeout=30_000)
        cells = grid.locator("td").all_inner_texts()
        assert {"ck0", "ck1", "ck2"} <= set(cells), cells
        # The table and the figure of every checkpoint at the top of the screenshot.
        page.get_by_text("Scores on every checkpoint of toy").evaluate(
            "e => e.scrollIntoView({block: 'start'})"
        )
        page.wait_for_timeout(500)
        screenshot(page, "selection-across")
        page.close()
    print(f"lasso, score, save, reopen across 3 checkpoints: {time.time() - started:.1f} s")
