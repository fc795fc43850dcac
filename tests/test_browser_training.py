"""The Checkpoints page's 'Along training' section in a real browser on the factory
workspace: the timeline and the learning curves are drawn, and a choice lands in the URL."""

import pytest

from harness.browser import choose, main_text, open_page, query_of, wait_for_script

pytestmark = pytest.mark.browser
VIEW = {"width": 1400, "height": 5200}


@pytest.fixture(scope="module")
def app_url(factory_template):
    from harness.browser import serve

    with serve(factory_template) as url:
        yield url


def test_timeline_curves_and_factor_in_the_url(browser, app_url):
    page = open_page(browser, f"{app_url}/checkpoints?run=toy-run&cap=15", "checkpoints-training", VIEW)
    text = main_text(page)
    assert "Along training" in text and "Concept events" in text and "Learning curves" in text
    charts = page.get_by_test_id("stPlotlyChart")
    titles = " ".join(charts.nth(i).inner_text() for i in range(charts.count()))
    assert "events" in titles.lower() or "birth" in titles.lower()  # the timeline's legend
    choose(page, "Curves of", "the values of shape")
    page.wait_for_function(
        "() => new URL(location.href).searchParams.get('factor') === 'shape'", timeout=60_000
    )
    wait_for_script(page)
    q = query_of(page)
    assert q["factor"] == "shape" and q["run"] == "toy-run" and q["cap"] == "15"
    assert page.get_by_test_id("stException").count() == 0
    page.close()
