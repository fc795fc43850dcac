"""The Clusters page sends its projection view first (components/projection.py `defer_rest`):
on a session's first load the script sends the view and stops; the view's first draw (or
its failure to draw) reruns the page, which then sends the table, the figures and the
rest. In Chromium, on the demo: when the view drew and when the table appeared, timed in
the page itself; a view that cannot draw (no WebGL2) still lets the rest follow; a link's
choices survive the run that stopped early."""

from __future__ import annotations

import pytest

from components.projection import DEFERRED_NOTE
from harness.browser import main_text, projection, query_of, screenshot, serve, wait_for_script

pytestmark = pytest.mark.browser
DS, CKPT = "shapes", "shapes-simclr-e20"
VIEW = {"width": 1400, "height": 1100}

# Polled every 10 ms in the page: the first time (ms since navigation) the view's frame says
# it drew its points (body[data-drawn]), the page shows a data grid, and the page shows the
# note of a run that sent the view alone. In window.__marks.
MARKS = """
(() => {
  if (window.top !== window) return;
  const marks = (window.__marks = {});
  const mark = (name) => {
    if (!(name in window.__marks)) window.__marks[name] = performance.now();
  };
  setInterval(() => {
    const view = document.querySelector('iframe[title="components.projection.projection"]');
    const inner = view && view.contentDocument && view.contentDocument.body;
    if (inner && inner.dataset.drawn) mark("drawn");
    if (document.querySelector('[data-testid="stDataFrame"]')) mark("table");
    if (document.body && document.body.innerText.includes(NOTE)) mark("note");
  }, 10);
})();
"""
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
    ctx = browser.new_context(viewport=VIEW)
    for s in scripts:
        ctx.add_init_script(s)
    page = ctx.new_page()
    page.goto(f"{url}/clusters?{query}")
    page.get_by_test_id("stSidebarNav").wait_for(timeout=120_000)
    wait_for_script(page)
    assert page.get_by_test_id("stException").count() == 0
    return ctx, page


def test_the_view_draws_before_the_table_is_sent(browser, app):
    query = f"ds={DS}&ckpt={CKPT}&cluster=3&color=label_name&sort=purity&desc=1"
    ctx, page = _open(browser, app, query, MARKS.replace("NOTE", repr(DEFERRED_NOTE)))
    try:
        projection(page)  # drawn
        marks = page.evaluate("() => window.__marks")
        # The first run sent the view and the note, not the table; the view drew, then the
        # table came.
        assert {"drawn", "table", "note"} <= set(marks), marks
        assert marks["note"] < marks["drawn"] < marks["table"], marks
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
    ctx, page = _open(browser, app, f"ds={DS}&ckpt={CKPT}", MARKS.replace("NOTE", repr(DEFERRED_NOTE)))
    try:
        projection(page)
        assert "note" in page.evaluate("() => window.__marks")  # the first visit did stop early
        page.get_by_test_id("stSidebarNav").get_by_role("link", name="Home").click()
        wait_for_script(page)
        page.evaluate("() => { window.__marks = {}; }")  # the app stays one document
        page.get_by_test_id("stSidebarNav").get_by_role("link", name="Clusters").click()
        wait_for_script(page)
        projection(page)
        assert page.get_by_test_id("stDataFrame").count() >= 1
        assert "note" not in page.evaluate("() => window.__marks")
    finally:
        ctx.close()
