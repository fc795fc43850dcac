"""The Clusters page sends its projection view first (components/defer.py `defer_rest`):
on a session's first load the script sends the view and stops; the view's first draw (or
its failure to draw) reruns the page, which then sends the table, the figures and the
rest. In Chromium, on the demo: when the view drew and when the table appeared, timed in
the page itself; a view that cannot draw (no WebGL2) still lets the rest follow; a link's
choices survive the run that stopped early."""

from __future__ import annotations

import pytest

from components.defer import DEFERRED_NOTE
from harness.browser import (
    clear_marks,
    main_text,
    marks,
    open_marked,
    projection,
    query_of,
    screenshot,
    serve,
    wait_for_script,
)

pytestmark = pytest.mark.browser
DS, CKPT = "shapes", "shapes-simclr-e20"
VIEW = {"width": 1400, "height": 1100}

# The view's frame says it drew its points (body[data-drawn]).
VIEW_DRAWN = """(() => {
    const view = document.querySelector('iframe[title="components.projection.projection"]');
    const inner = view && view.contentDocument && view.contentDocument.body;
    return Boolean(inner && inner.dataset.drawn);
  })()"""
NO_WEBGL2 = """
(() => {
  const get = HTMLCanvasElement.prototype.getContext;
  HTMLCanvasElement.prototype.getContext = function (kind, ...rest) {
    return kind === "webgl2" ? null : get.call(this, kind, ...rest);
  };
})();
"""


@pytest.fixture(scope="module")
def app(demo_ws):
    with serve(demo_ws) as url:
        yield url


def _open(browser, url: str, query: str, *scripts: str):
    return open_marked(browser, f"{url}/clusters?{query}", VIEW_DRAWN, VIEW, *scripts)


def test_the_view_draws_before_the_table_is_sent(browser, app):
    query = f"ds={DS}&ckpt={CKPT}&cluster=3&color=label_name&sort=purity&desc=1"
    ctx, page = _open(browser, app, query)
    try:
        projection(page)  # drawn
        got = marks(page)
        # The first run sent the view and the note, not the table; the view drew, then the
        # table came.
        assert {"drawn", "table", "note"} <= set(got), got
        assert got["note"] < got["drawn"] < got["table"], got
        # The whole page is there now, the note gone.
        assert page.get_by_test_id("stDataFrame").count() >= 1
        assert DEFERRED_NOTE not in main_text(page)
        assert page.get_by_test_id("stPlotlyChart").count() >= 1
        # The link's choices survived the run that stopped after the view.
        q = query_of(page)
        for key, value in (("ds", DS), ("ckpt", CKPT), ("cluster", "3"), ("color", "label_name")):
            assert q.get(key) == value, (key, q)
        assert q.get("sort") == "purity" and q.get("desc") == "1", q
        chosen = page.get_by_role("combobox", name="Cluster", exact=True).input_value()
        assert chosen.split(" ")[0] == "3", chosen
        assert page.get_by_role("combobox", name="Colour by", exact=True).input_value() == "label_name"
        screenshot(page, "view_first_clusters")
    finally:
        ctx.close()


def test_a_view_that_cannot_draw_lets_the_rest_follow(browser, app):
    ctx, page = _open(browser, app, f"ds={DS}&ckpt={CKPT}", NO_WEBGL2)
    try:
        frame = (
            page.locator('iframe[title="components.projection.projection"]').element_handle().content_frame()
        )
        frame.get_by_text("This browser has no WebGL2").wait_for(timeout=60_000)
        # The table and figures came all the same: the failure reported back too.
        page.get_by_test_id("stDataFrame").first.wait_for(timeout=60_000)
        assert DEFERRED_NOTE not in main_text(page)
    finally:
        ctx.close()


def test_a_second_visit_in_the_session_sends_the_whole_page_at_once(browser, app):
    # The view already drew in this session: going to another page and back runs the page
    # whole (no run that stops after the view).
    ctx, page = _open(browser, app, f"ds={DS}&ckpt={CKPT}")
    try:
        projection(page)
        assert "note" in marks(page)  # the first visit did stop early
        page.get_by_test_id("stSidebarNav").get_by_role("link", name="Home").click()
        wait_for_script(page)
        clear_marks(page)
        page.get_by_test_id("stSidebarNav").get_by_role("link", name="Clusters").click()
        wait_for_script(page)
        projection(page)
        assert page.get_by_test_id("stDataFrame").count() >= 1
        assert "note" not in marks(page)
    finally:
        ctx.close()
