"""The Similarity page in a real browser on a tiny analysed workspace: a deep link, a click on
the map (the image and its nearest images for people and a checkpoint), the trial browser,
the export popover."""

import pytest

from tests.browser import main_text, open_export, open_page, query_of, screenshot, serve, wait_for_script

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    from tests.hsj_fixtures import similarity_workspace

    ws = similarity_workspace(tmp_path_factory.mktemp("simb") / "ws")
    with serve(ws.root) as url:
        yield url


def combobox(page, name) -> str:
    return page.get_by_role("combobox", name=name, exact=True).input_value()


def test_deep_link_shows_every_section(browser, app_url):
    q = {"ds": "toy", "ckpt": "ck2", "img": "toy-0004", "dist": "l2", "metric": "rsa", "trial": "3"}
    page = open_page(
        browser, f"{app_url}/similarity?" + "&".join(f"{k}={v}" for k, v in q.items()), "similarity-deep-link"
    )
    text = main_text(page)
    for heading in (
        "People's similarity map",
        "Agreement with people",
        "Per label",
        "Trials",
        "Fit diagnostics",
        "Nearest for people",
        "Nearest for ck2",
    ):
        assert heading in text
    assert {k: query_of(page)[k] for k in q} == q
    assert combobox(page, "Distance") == "L2" and combobox(page, "Score") == "RSA (Spearman)"
    assert page.get_by_test_id("stPlotlyChart").count() == 4
    # The trial's query and 8 references, the person's two choices marked.
    assert "1st choice" in text and "2nd choice" in text
    assert page.locator('[data-testid="stImage"] img').count() >= 1 + 8 + 8 + 9
    page.close()


def test_clicking_a_point_shows_its_neighbours(browser, app_url):
    page = open_page(
        browser,
        f"{app_url}/similarity?ds=toy&ckpt=ck0&img=toy-0000",
        "similarity-before-click",
        viewport={"width": 1400, "height": 1200},
    )
    chart = page.get_by_test_id("stPlotlyChart").first
    chart.scroll_into_view_if_needed()
    points = chart.locator(".scatterlayer .trace .points path")
    assert points.count() >= 40
    before = query_of(page)["img"]
    for k in range(points.count()):  # the first point that is not the selected image
        points.nth(k).click(force=True)
        try:
            page.wait_for_function(
                f"() => new URL(location.href).searchParams.get('img') !== '{before}'", timeout=15_000
            )
            break
        except Exception:
            continue
    wait_for_script(page)
    screenshot(page, "similarity-after-click")
    after = query_of(page)["img"]
    assert after != before and after.startswith("toy-")
    assert combobox(page, "Image").startswith(after)
    assert page.get_by_test_id("stException").count() == 0
    page.close()


def test_trial_browser_and_export(browser, app_url):
    page = open_page(
        browser,
        f"{app_url}/similarity?ds=toy&trial=0&catch=1",
        "similarity-catch-trial",
        viewport={"width": 1400, "height": 1400},
    )
    text = main_text(page)
    assert "catch trials" in combobox(page, "Show") or combobox(page, "Show") == "catch trials"
    assert "1st choice" in text
    # The query itself is among the references of a catch trial.
    imgs = page.locator('[data-testid="stImage"] img')
    assert imgs.count() >= 9
    popover = open_export(page)
    assert popover.get_by_role("button", name="Download PDF").count() == 1
    page.close()
