"""The Checkpoints page in a real browser on the factory workspace: a box drawn on A's UMAP
highlights the same images in B's, and the browser's Back button returns to each earlier view."""

import pandas as pd
import pytest

from harness.browser import (
    ab_projection,
    choose,
    drag_path,
    main_text,
    open_page,
    query_of,
    screenshot,
    serve,
    wait_for_script,
)

pytestmark = pytest.mark.browser
VIEW = {"width": 1400, "height": 1600}


@pytest.fixture(scope="module")
def app_url(factory_template):
    with serve(factory_template) as url:
        yield url


def link(base, **q):
    return f"{base}/checkpoints?" + "&".join(f"{k}={v}" for k, v in q.items())


def ab(page, side: int):
    return ab_projection(page, side)


def highlighted(frame) -> set[str]:
    """The image ids a WebGL view rings (B rings the images selected in A)."""
    return set(
        frame.evaluate(
            """() => { const S = window.__projection;
                const lines = new TextDecoder().decode(S.textBytes).split('\\n');
                return Array.from(S.ringIdx || [], i => lines[i].split('\\t')[0]); }"""
        )
    )


def wait_for_query(page, param, value) -> None:
    page.wait_for_function(
        "([p, v]) => new URL(location.href).searchParams.get(p) === v", arg=[param, value], timeout=60_000
    )
    wait_for_script(page)


def combobox(page, name) -> str:
    return page.get_by_role("combobox", name=name, exact=True).input_value()


def test_a_box_on_a_highlights_the_same_images_in_b(browser, app_url, factory_template):
    page = open_page(browser, link(app_url, a="ck0", b="ck2"), "checkpoints-linked-before", VIEW)
    el_a, frame_a = ab(page, 0)
    _, frame_b = ab(page, 1)
    assert highlighted(frame_b) == set()
    frame_a.get_by_role("button", name="Box").click()
    box = frame_a.locator("#gl").bounding_box()
    # A box over the middle of A's plot: some of its points, not all.
    drag_path(
        page,
        [
            (box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.3),
            (box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5),
            (box["x"] + box["width"] * 0.75, box["y"] + box["height"] * 0.8),
        ],
    )
    page.wait_for_function("() => new URL(location.href).searchParams.get('region') !== null", timeout=60_000)
    wait_for_script(page)
    screenshot(page, "checkpoints-linked-after")
    assert page.get_by_test_id("stException").count() == 0
    # The images inside the drawn box, from A's stored projection...
    kind, _, numbers = query_of(page)["region"].partition(":")
    x0, x1, y0, y1 = (float(v) for v in numbers.split(","))
    xy = pd.read_parquet(factory_template / "projections/checkpoint_id=ck0/method=umap/part-0.parquet")
    inside = set(xy.loc[xy.x.between(x0, x1) & xy.y.between(y0, y1), "image_id"])
    assert kind == "box" and 0 < len(inside) < len(xy)
    # ... are exactly those highlighted in B, and named in the table below.
    assert highlighted(ab(page, 1)[1]) == inside
    assert f"{len(inside)} images selected in A" in main_text(page)
    page.close()


def test_back_returns_to_each_earlier_view(browser, app_url):
    page = open_page(browser, link(app_url, a="ck0", b="ck1"), "checkpoints-history", VIEW)
    page.get_by_role("radiogroup").get_by_text("all flows").click()
    wait_for_query(page, "flows", "all flows")
    choose(page, "To checkpoint (B)", "ck2 (toy-run · epoch 1)")
    wait_for_query(page, "b", "ck2")
    choose(page, "Sort by", "kNN acc.")
    wait_for_query(page, "sort", "knn_acc")
    page.go_back()
    page.wait_for_function("() => !new URL(location.href).searchParams.has('sort')", timeout=60_000)
    wait_for_script(page)
    assert combobox(page, "Sort by") == "checkpoint" and combobox(page, "To checkpoint (B)").startswith("ck2")
    page.go_back()
    wait_for_query(page, "b", "ck1")
    assert combobox(page, "To checkpoint (B)").startswith("ck1")
    assert page.get_by_role("radio", name="all flows").is_checked()
    page.go_back()
    page.wait_for_function("() => !new URL(location.href).searchParams.has('flows')", timeout=60_000)
    wait_for_script(page)
    assert page.get_by_role("radio", name="splits and merges only").is_checked()  # the default
    page.go_forward()
    wait_for_query(page, "flows", "all flows")
    assert page.get_by_role("radio", name="all flows").is_checked()
    screenshot(page, "checkpoints-history-forward")
    page.close()
