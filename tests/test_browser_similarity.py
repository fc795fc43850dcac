"""The Similarity page in a real browser on a tiny analysed workspace: a deep link, a click on
the WebGL map (the image and its nearest images for people and a checkpoint), the trial browser,
the export popover."""

import pytest

from harness.browser import (
    main_text,
    open_export,
    open_page,
    projection,
    projection_pixels,
    query_of,
    screenshot,
    serve,
    wait_for_script,
)

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
    # The map is the WebGL view; agreement, per label and the fit are Plotly figures.
    assert page.get_by_test_id("stPlotlyChart").count() == 3
    assert page.locator('iframe[title="components.projection.projection"]').count() == 1
    # The trial's query and 8 references, the person's two choices marked. (Image lists are
    # drawn by a part of Streamlit's frontend fetched on first use: on a loaded machine it
    # can come after the script has finished.)
    page.get_by_text("2nd choice").first.wait_for(timeout=60_000)
    text = main_text(page)
    assert "1st choice" in text and "2nd choice" in text
    assert page.locator('[data-testid="stImage"] img').count() >= 1 + 8 + 8 + 9
    page.close()


def ringed(frame) -> set[str]:
    """The image ids the WebGL map rings (the selected image)."""
    return set(
        frame.evaluate(
            """() => { const S = window.__projection;
                const lines = new TextDecoder().decode(S.textBytes).split('\\n');
                return Array.from(S.ringIdx || [], i => lines[i].split('\\t')[0]); }"""
        )
    )


def test_clicking_a_point_shows_its_neighbours(browser, app_url):
    page = open_page(
        browser,
        f"{app_url}/similarity?ds=toy&ckpt=ck0&img=toy-0000",
        "similarity-before-click",
        viewport={"width": 1400, "height": 1200},
    )
    # The map is the WebGL projection view: a click on a point (in its Pan mode) picks it.
    el, frame = projection(page)
    assert ringed(frame) == {"toy-0000"}
    n = frame.evaluate("() => window.__projection.n")
    assert n >= 40
    before = query_of(page)["img"]
    # The point farthest from the selected one, at its place on the screen.
    xy, ids = frame.evaluate(
        """() => { const S = window.__projection;
            const lines = new TextDecoder().decode(S.textBytes).split('\\n');
            return [Array.from(S.xy), lines.map(l => l.split('\\t')[0])]; }"""
    )
    xy = list(zip(xy[0::2], xy[1::2]))
    at = ids.index(before)
    far = max(range(n), key=lambda i: (xy[i][0] - xy[at][0]) ** 2 + (xy[i][1] - xy[at][1]) ** 2)
    (px,) = projection_pixels(el, frame, [xy[far]])
    page.mouse.click(*px)
    page.wait_for_function(
        f"() => new URL(location.href).searchParams.get('img') !== '{before}'", timeout=60_000
    )
    wait_for_script(page)
    screenshot(page, "similarity-after-click")
    after = query_of(page)["img"]
    assert after == ids[far]
    assert combobox(page, "Image").startswith(after)
    assert ringed(projection(page)[1]) == {after}
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
