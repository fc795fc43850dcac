"""Score this selection in a real browser (issue 26): lasso a group on the Clusters UMAP (the
WebGL projection view), see its scores with their nulls, save it by name, open the saved
selection's link in a fresh browser context and see its scores on every checkpoint.
Screenshots in tests/artifacts."""

import time

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from matplotlib.path import Path as MplPath

from harness.browser import (
    ARTIFACTS,
    drag_path,
    main_text,
    open_page,
    projection,
    query_of,
    screenshot,
    serve,
    wait_for_script,
)
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
        # The UMAP is the WebGL projection view (components/projection.py): the lasso is drawn
        # on its canvas with the mouse, in its Lasso mode.
        el, frame = projection(page)
        frame.get_by_role("button", name="Lasso").click()
        el.scroll_into_view_if_needed()
        box = el.bounding_box()
        r = frame.evaluate(
            "() => { const r = document.getElementById('gl').getBoundingClientRect(); "
            "return [r.left, r.top, r.width, r.height]; }"
        )
        # A lasso around the left half of the view: a group, not every image.
        x0, y0, w, h = box["x"] + r[0] + 4, box["y"] + r[1] + 4, r[2] * 0.5, r[3] - 8
        corners = [(x0, y0), (x0 + w, y0), (x0 + w, y0 + h), (x0, y0 + h)]
        path = [
            (p[0] + (q[0] - p[0]) * t, p[1] + (q[1] - p[1]) * t)
            for p, q in zip(corners, corners[1:] + corners[:1])
            for t in (0, 0.25, 0.5, 0.75)
        ]
        drag_path(page, path + [path[0]])
        page.wait_for_function(
            "() => new URL(location.href).searchParams.get('sel') === 'region'"
            " && (new URL(location.href).searchParams.get('region') || '').startsWith('lasso:')",
            timeout=60_000,
        )
        wait_for_script(page)
        el.screenshot(path=str(ARTIFACTS / "selection-lasso-view.png"))  # the lasso on the view
        page.get_by_text("percentile of random sets").first.wait_for(timeout=60_000)
        text = main_text(page)
        assert "Score this selection" in text and "lasso on the Clusters UMAP of checkpoint ck0" in text
        assert "learnability" in text and "of same-label sets" in text
        n = int(page.get_by_test_id("stMetricValue").last.inner_text().replace(",", ""))
        assert 0 < n < 48, n  # a group of the 48 images
        assert f"{n} images" in text
        # The images scored are those inside the lasso the URL keeps, on ck0's stored UMAP.
        poly = np.array([float(v) for v in query_of(page)["region"][6:].split(",")]).reshape(-1, 2)
        pts = pd.read_parquet(selection_ws / "projections" / "checkpoint_id=ck0" / "method=umap")
        inside = set(pts.image_id[MplPath(poly).contains_points(pts[["x", "y"]].to_numpy())])
        assert len(inside) == n, (len(inside), n)
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
