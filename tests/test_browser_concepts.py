"""The Concepts page in a real browser on an analysed concept workspace: a deep link with every
choice, choosing another method (the URL follows), the beta slider from the keyboard, and
exporting a figure."""

import pytest

from harness.browser import (
    choose,
    main_text,
    open_export,
    open_page,
    query_of,
    screenshot,
    serve,
    wait_for_script,
)

pytestmark = pytest.mark.browser

VIEW = {"width": 1400, "height": 3000}


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    from conceptlens.analysis import runner
    from tests.concepts_factory import concept_workspace

    ws = concept_workspace(tmp_path_factory.mktemp("cqb") / "ws", n=300)
    runner.run(ws.root, "concepts", {"concept_seeds": 2}, progress_bars=False, with_dependencies=False)
    with serve(ws.root) as url:
        yield url


def link(url, **q) -> str:
    return f"{url}/concepts?" + "&".join(f"{k}={v}" for k, v in q.items())


def combobox(page, name) -> str:
    return page.get_by_role("combobox", name=name, exact=True).input_value()


def wait_for_query(page, param, value) -> None:
    page.wait_for_function(
        "([p, v]) => new URL(location.href).searchParams.get(p) === v", arg=[param, value], timeout=60_000
    )
    wait_for_script(page)


DEEP = {"family": "tabular_toy", "level": "0.75", "method": "vae", "seed": "vae-toy-d0.75-s0", "beta": "0.3"}


def test_deep_link_shows_every_section(browser, app_url):
    page = open_page(browser, link(app_url, **DEEP), "concepts-deep-link", VIEW)
    text = main_text(page)
    for heading in ("Purity matrices", "Impurity against dependency", "Concept niches", "Scores"):
        assert heading in text
    assert {k: query_of(page)[k] for k in DEEP} == DEEP
    assert combobox(page, "Method") == "vae" and combobox(page, "Dependency (delta)") == "delta = 0.75"
    assert page.get_by_test_id("stPlotlyChart").count() == 4
    # Heatmap cells carry the concepts' names (SVG tick labels of the purity figure).
    purity = page.get_by_test_id("stPlotlyChart").first
    ticks = purity.locator(".xtick text, .ytick text").evaluate_all("els => els.map(e => e.textContent)")
    assert {"z0_pos", "z1_pos", "z2_pos", "c0 → z0_pos"} <= set(ticks)
    assert "OIS" in text and "[" in page.get_by_test_id("stMetric").first.inner_text()
    page.close()


def test_choosing_a_method_and_beta_updates_the_url(browser, app_url):
    page = open_page(browser, link(app_url, family="tabular_toy", level="0.0"), "concepts-before", VIEW)
    choose(page, "Method", "swapped")
    wait_for_query(page, "method", "swapped")
    # The first seed is the default: left out of the link (docs/dashboard.md), shown on the page.
    assert "seed" not in query_of(page)
    assert "swapped-toy-d0.00-s0" in main_text(page)
    thumb = page.get_by_role("slider").first
    thumb.focus()
    page.keyboard.press("ArrowRight")
    wait_for_query(page, "beta", "0.25")
    screenshot(page, "concepts-after")
    assert page.get_by_test_id("stException").count() == 0
    page.close()


def test_every_figure_exports(browser, app_url):
    page = open_page(browser, link(app_url, **DEEP), "concepts-export", {"width": 1400, "height": 1400})
    buttons = page.get_by_role("button", name="Export figure")
    assert buttons.count() == 4
    for k in range(4):
        popover = open_export(page, k)
        assert popover.get_by_role("button", name="Download PDF").count() == 1, k
        page.keyboard.press("Escape")
        popover.wait_for(state="hidden")
    assert page.get_by_test_id("stException").count() == 0
    page.close()
