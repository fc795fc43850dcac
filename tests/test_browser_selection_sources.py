"""A lasso drawn with the mouse on the Checkpoints page's UMAP of A and on the Similarity page's
map (both the WebGL projection view) reaches the *Score this selection* panel: the images it
scores are exactly those inside the lasso the URL keeps (counted here with matplotlib on the
stored projection). Screenshots in tests/artifacts (selection-checkpoints-*, selection-similarity-*)."""

import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.path import Path as MplPath

from conceptlens.embedding.psych import psych_id
from harness.browser import (
    ARTIFACTS,
    ab_projection,
    drag_path,
    main_text,
    open_page,
    projection,
    query_of,
    screenshot,
    serve,
    wait_for_script,
)

pytestmark = pytest.mark.browser
VIEW = {"width": 1400, "height": 2400}


@pytest.fixture(scope="module")
def app_url(factory_template):
    with serve(factory_template) as url:
        yield url


def lasso_left_half(page, el, frame) -> None:
    """Lasso the left half of the view with the mouse (a group of its points, not all)."""
    frame.get_by_role("button", name="Lasso").click()
    el.scroll_into_view_if_needed()
    box = el.bounding_box()
    r = frame.evaluate(
        "() => { const r = document.getElementById('gl').getBoundingClientRect(); "
        "return [r.left, r.top, r.width, r.height]; }"
    )
    x0, y0, w, h = box["x"] + r[0] + 4, box["y"] + r[1] + 4, r[2] * 0.5, r[3] - 8
    corners = [(x0, y0), (x0 + w, y0), (x0 + w, y0 + h), (x0, y0 + h)]
    path = [
        (p[0] + (q[0] - p[0]) * t, p[1] + (q[1] - p[1]) * t)
        for p, q in zip(corners, corners[1:] + corners[:1])
        for t in (0, 0.5)
    ]
    drag_path(page, path + [path[0]])


def scored_after_lasso(page, projection_file) -> tuple[int, set[str], str]:
    """(images the panel scored, images inside the URL's lasso on the stored projection, text)."""
    page.wait_for_function(
        "() => (new URL(location.href).searchParams.get('region') || '').startsWith('lasso:')", timeout=60_000
    )
    wait_for_script(page)
    page.get_by_text("percentile of random sets").first.wait_for(timeout=120_000)
    wait_for_script(page)
    text = main_text(page)
    poly = np.array([float(v) for v in query_of(page)["region"][6:].split(",")]).reshape(-1, 2)
    pts = pd.read_parquet(projection_file)
    inside = set(pts.image_id[MplPath(poly).contains_points(pts[["x", "y"]].to_numpy())])
    m = re.search(r"([\d,]+) images from lasso on", text)
    assert m, text[-2000:]
    return int(m.group(1).replace(",", "")), inside, text


def test_a_lasso_on_checkpoint_a_is_scored(browser, app_url, factory_template):
    page = open_page(
        browser, f"{app_url}/checkpoints?a=ck0&b=ck2&score=1&nnull=20", "selection-checkpoints-start", VIEW
    )
    el, frame = ab_projection(page, 0)
    lasso_left_half(page, el, frame)
    n, inside, text = scored_after_lasso(page, factory_template / "projections/checkpoint_id=ck0/method=umap")
    assert 0 < n < 48 and n == len(inside), (n, len(inside))
    assert "lasso on the UMAP of checkpoint A (ck0, k=4)" in text and "scored on checkpoint ck0" in text
    assert f"{n} images selected in A" in text  # the same region B's table counts
    assert page.get_by_test_id("stException").count() == 0
    el.screenshot(path=str(ARTIFACTS / "selection-checkpoints-lasso-view.png"))
    page.get_by_role("heading", name="Score this selection").evaluate(
        "e => e.scrollIntoView({block: 'start'})"
    )
    page.wait_for_timeout(300)
    screenshot(page, "selection-checkpoints-scored")
    page.close()


def test_a_lasso_on_the_similarity_map_is_scored(browser, app_url, factory_template):
    page = open_page(
        browser, f"{app_url}/similarity?ds=toy&ckpt=ck1&score=1&nnull=20", "selection-similarity-start", VIEW
    )
    el, frame = projection(page, 0)
    lasso_left_half(page, el, frame)
    pid = psych_id("toy")
    n, inside, text = scored_after_lasso(
        page, factory_template / f"projections/checkpoint_id={pid}/method=umap"
    )
    assert 0 < n and n == len(inside), (n, len(inside))
    assert "lasso on people's similarity map of toy" in text and "scored on checkpoint ck1" in text
    assert page.get_by_test_id("stException").count() == 0
    el.screenshot(path=str(ARTIFACTS / "selection-similarity-lasso-view.png"))
    page.get_by_role("heading", name="Score this selection").evaluate(
        "e => e.scrollIntoView({block: 'start'})"
    )
    page.wait_for_timeout(300)
    screenshot(page, "selection-similarity-scored")
    page.close()


def test_an_uploaded_csv_of_ids_is_scored(browser, app_url, factory_template, tmp_path):
    """The *list of image ids (CSV)* source: the ids of an uploaded file are those scored,
    and (at most 200) kept in the link."""
    ids = [f"toy-{i:04d}" for i in range(0, 48, 3)]
    csv = tmp_path / "my ids.csv"
    csv.write_text("image_id\n" + "\n".join(ids) + "\n")
    page = open_page(
        browser, f"{app_url}/checkpoints?a=ck1&b=ck2&score=1&nnull=20&ssrc=list", "selection-csv-start", VIEW
    )
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(csv))
    page.get_by_text("percentile of random sets").first.wait_for(timeout=120_000)
    wait_for_script(page)
    text = main_text(page)
    assert f"{len(ids)} images from csv upload (my ids.csv)" in text and "scored on checkpoint ck1" in text
    from conceptlens.selections import decode_ids

    page.wait_for_function("() => new URL(location.href).searchParams.get('ids') !== null", timeout=60_000)
    assert sorted(decode_ids(query_of(page)["ids"])) == sorted(ids)
    assert page.get_by_test_id("stException").count() == 0
    page.close()
