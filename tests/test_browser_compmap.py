"""The CompMap page in a real browser on the demo workspace (as a fresh clone has it): a deep
link, choosing a class and a setting, the figures drawn, an export actually downloaded."""

import pytest

from harness.browser import main_text, open_export, open_page, query_of, screenshot, serve, wait_for_script

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def app_url(demo_ws):
    with serve(demo_ws) as url:
        yield url


def combobox(page, name) -> str:
    return page.get_by_role("combobox", name=name, exact=True).input_value()


def choose(page, name: str, option: str) -> None:
    page.get_by_role("combobox", name=name, exact=True).click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_for_script(page)


def test_deep_link_class_and_setting(browser, app_url):
    q = {
        "ds": "shapes",
        "vl": "vl-shapes",
        "setting": "5w1s",
        "model": "prim",
        "sort": "recovered",
        "cls": "3",
    }
    page = open_page(
        browser, f"{app_url}/compmap?" + "&".join(f"{k}={v}" for k, v in q.items()), "compmap-deep-link"
    )
    assert {k: query_of(page)[k] for k in q} == q
    assert combobox(page, "Class") == "3 — red star"
    assert combobox(page, "Setting") == "5-way 1-shot"
    text = main_text(page)
    assert "Accuracy and interventions" in text and "Where the VL model's primitives go wrong" in text
    main = page.get_by_test_id("stMain")
    assert main.get_by_test_id("stPlotlyChart").count() == 4
    assert main.locator(".js-plotly-plot .heatmaplayer, .js-plotly-plot .hm").count() >= 1
    assert page.locator('[data-testid="stImage"] img').count() == 24

    choose(page, "Class", "7 — green triangle")
    page.wait_for_function("() => new URL(location.href).searchParams.get('cls') === '7'", timeout=60_000)
    choose(page, "Setting", "full shot (30-way)")
    # full shot is the first setting, the default: the link leaves it out (docs/dashboard.md).
    page.wait_for_function(
        "() => [null, 'full'].includes(new URL(location.href).searchParams.get('setting'))", timeout=60_000
    )
    assert combobox(page, "Setting") == "full shot (30-way)"
    screenshot(page, "compmap-green-triangle-full-shot")
    assert page.get_by_test_id("stException").count() == 0
    assert "Images of green triangle" in main_text(page)
    page.close()


def test_figure_export_downloads_a_png(browser, app_url, tmp_path):
    page = open_page(
        browser, f"{app_url}/compmap", "compmap-export", viewport={"width": 1400, "height": 1400}
    )
    popover = open_export(page)
    popover.get_by_role("combobox").first.click()
    page.get_by_role("option", name="png", exact=True).click()
    with page.expect_download(timeout=120_000) as dl:
        popover.get_by_role("button", name="Download PNG").click()
    path = tmp_path / dl.value.suggested_filename
    dl.value.save_as(path)
    assert path.name == "compmap-accuracy_by_setting-shapes-vl-shapes.png"  # `conceptlens figures`' name
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    page.close()
