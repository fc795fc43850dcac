"""The Scoreboard page sends its overview figure first (components/defer.py): on a
session's first load the script sends the controls and the purity-coherence scatter and
stops; the figure's first draw reruns the page, which then sends the ranking, the other
figures and the rest. In Chromium, on the demo: when the note, the drawn figure and the
first table appeared, timed in the page itself; the link's choices survive the early stop;
a second visit in the session sends the page whole."""

from __future__ import annotations

import pytest

from components.defer import DEFERRED_NOTE, PLOTLY_DRAWN
from harness.browser import (
    clear_marks,
    main_text,
    marks,
    open_marked,
    query_of,
    screenshot,
    serve,
    wait_for_script,
)

pytestmark = pytest.mark.browser
VIEW = {"width": 1400, "height": 1100}


@pytest.fixture(scope="module")
def app(demo_ws):
    with serve(demo_ws) as url:
        yield url


def _open(browser, url: str, query: str):
    drawn = f"document.querySelector({PLOTLY_DRAWN!r})"
    return open_marked(browser, f"{url}/scoreboard?{query}", drawn, VIEW)


def test_the_overview_draws_before_the_rest_is_sent(browser, app):
    query = "ds=fashion&ckpt=fashion-effnet-lite0&score=coherence_random&concept=dictionary%3Aconvex_nmf%2F3"
    ctx, page = _open(browser, app, query)
    try:
        got = marks(page)
        assert {"drawn", "table", "note"} <= set(got), got
        assert got["note"] < got["drawn"] < got["table"], got
        # The draw itself brought the rest, not the report's 15 s fallback.
        assert got["table"] - got["drawn"] < 10_000, got
        # The whole page now: the ranking, every figure, no note.
        text = main_text(page)
        assert DEFERRED_NOTE not in text
        for header in ("Ranking", "Coherence (random neg.) by source", "One concept", "Per source"):
            assert header in text, header
        assert page.get_by_test_id("stPlotlyChart").count() >= 3
        # The link's choices survived the run that stopped after the figure.
        q = query_of(page)
        assert q.get("score") == "coherence_random" and q.get("concept") == "dictionary:convex_nmf/3", q
        assert q.get("ckpt") == "fashion-effnet-lite0", q
        screenshot(page, "scoreboard_overview_first")
    finally:
        ctx.close()


def test_a_second_visit_in_the_session_sends_the_whole_page_at_once(browser, app):
    ctx, page = _open(browser, app, "")
    try:
        assert "note" in marks(page)  # the first visit stopped early
        page.get_by_test_id("stSidebarNav").get_by_role("link", name="Home").click()
        wait_for_script(page)
        clear_marks(page)
        page.get_by_test_id("stSidebarNav").get_by_role("link", name="Scoreboard").click()
        wait_for_script(page)
        assert page.get_by_test_id("stDataFrame").count() >= 1
        assert "note" not in marks(page)
    finally:
        ctx.close()
