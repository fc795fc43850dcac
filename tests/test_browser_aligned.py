"""The aligned projections of 'Along training' (components/aligned_section.py) in a real
browser on the factory workspace: a box drawn on one frame lands in the URL with its frame,
and the slider's next frame rings the same images."""

import pandas as pd
import pytest

from harness.browser import drag_path, main_text, open_page, projection, query_of, screenshot, wait_for_script
from tests.test_browser_checkpoints import highlighted, wait_for_query

pytestmark = pytest.mark.browser
VIEW = {"width": 1400, "height": 5200}


@pytest.fixture(scope="module")
def app_url(factory_template):
    from harness.browser import serve

    with serve(factory_template) as url:
        yield url


def test_a_box_on_one_frame_rings_the_same_images_in_the_next(browser, app_url, factory_template):
    page = open_page(browser, f"{app_url}/checkpoints?run=toy-run", "checkpoints-aligned-before", VIEW)
    assert "Aligned projections" in main_text(page)
    el, frame = projection(page, 0)  # the section comes before A's and B's linked UMAPs
    assert highlighted(frame) == set()
    frame.get_by_role("button", name="Box").click()
    box = frame.locator("#gl").bounding_box()
    drag_path(
        page,
        [
            (box["x"] + box["width"] * 0.05, box["y"] + box["height"] * 0.05),
            (box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.4),
            (box["x"] + box["width"] * 0.55, box["y"] + box["height"] * 0.95),
        ],
    )
    page.wait_for_function(
        "() => new URL(location.href).searchParams.get('aregion') !== null", timeout=60_000
    )
    wait_for_script(page)
    q = query_of(page)
    assert q["aat"] == "1"
    x0, x1, y0, y1 = (float(v) for v in q["aregion"].partition(":")[2].split(","))
    stored = pd.read_parquet(factory_template / "aligned_projections/dataset=toy/run=toy-run")
    first = stored[stored["epoch"] == 1]
    inside = set(first.loc[first.x.between(x0, x1) & first.y.between(y0, y1), "image_id"])
    assert 0 < len(inside) < len(first)
    assert highlighted(projection(page, 0)[1]) == inside
    # The next frame (the slider, moved with the keyboard) rings the same images.
    page.get_by_role("slider").first.focus()
    page.keyboard.press("ArrowRight")
    wait_for_query(page, "aframe", "2")
    assert highlighted(projection(page, 0)[1]) == inside
    assert f"{len(inside)} images selected in epoch 1" in main_text(page)
    screenshot(page, "checkpoints-aligned-after")
    assert page.get_by_test_id("stException").count() == 0
    page.close()
