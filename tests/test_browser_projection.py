"""The WebGL projection view (components/projection.py) on the Clusters page of the demo,
in Chromium: a box and a lasso drawn with the mouse select exactly the points inside the
shape (computed here, from the stored coordinates, with matplotlib's point-in-path), both
in the ids the component sends and in the page's selection (its CSV); hovering, zooming
and panning send the server nothing (no rerun)."""

from __future__ import annotations

import csv

import numpy as np
import pandas as pd
import pytest
from matplotlib.path import Path as MplPath

from harness.browser import (
    ARTIFACTS,
    drag_path,
    projection,
    projection_data,
    projection_pixels,
    query_of,
    screenshot,
    serve,
    wait_for_script,
)

pytestmark = pytest.mark.browser
DS, CKPT = "shapes", "shapes-simclr-e20"
VIEW = {"width": 1400, "height": 1100}


@pytest.fixture(scope="module")
def app(demo_ws):
    with serve(demo_ws) as url:
        yield url, demo_ws


def stored_points(ws) -> pd.DataFrame:
    return pd.read_parquet(ws / "projections" / f"checkpoint_id={CKPT}" / "method=umap")


def open_clusters(browser, url: str, name: str):
    """The Clusters page with every websocket frame the browser sends counted."""
    page = browser.new_page(viewport=VIEW)
    sent, received = [], []

    def on_ws(ws):
        ws.on("framesent", lambda payload: sent.append(len(payload)))
        ws.on("framereceived", lambda payload: received.append(len(payload)))

    page.on("websocket", on_ws)
    page.received = received  # the messages the server sent, for the tests that count them
    # The points come over HTTP (serve.py), one immutable file per data version.
    page.points = []
    page.on("response", lambda r: page.points.append(r) if "/conceptlens/points/" in r.url else None)
    page.goto(f"{url}/clusters?ds={DS}&ckpt={CKPT}")
    page.get_by_test_id("stSidebarNav").wait_for(timeout=120_000)
    wait_for_script(page)
    assert page.get_by_test_id("stException").count() == 0
    el, frame = projection(page)
    screenshot(page, name)
    return page, el, frame, sent


def sent_ids(frame) -> set[str]:
    """The image ids of the indices the component last sent (its hover lines name them)."""
    return set(
        frame.evaluate(
            """() => { const S = window.__projection;
                       const lines = new TextDecoder().decode(S.textBytes).split('\\n');
                       return S.lastCommit.indices.map(i => lines[i].split('\\t')[0]); }"""
        )
    )


def downloaded_ids(page, tmp_path) -> set[str]:
    with page.expect_download(timeout=60_000) as dl:
        page.get_by_role("button", name="Download image ids (CSV)").click()
    path = tmp_path / "ids.csv"
    dl.value.save_as(path)
    return {r["image_id"] for r in csv.DictReader(path.open())}


def selected_count(page) -> int:
    metric = page.get_by_test_id("stMetric").filter(has_text="images selected")
    return int(metric.get_by_test_id("stMetricValue").inner_text().replace(",", ""))


def canvas_box(el, frame) -> dict:
    box = el.bounding_box()
    r = frame.evaluate(
        "() => { const r = document.getElementById('gl').getBoundingClientRect(); "
        "return [r.left, r.top, r.width, r.height]; }"
    )
    return {"x": box["x"] + r[0], "y": box["y"] + r[1], "width": r[2], "height": r[3]}


def test_box_and_lasso_select_the_points_inside(browser, app, tmp_path):
    url, ws = app
    pts = stored_points(ws)
    page, el, frame, _ = open_clusters(browser, url, "projection-open")
    # The view's points: one file over HTTP, not a websocket message.
    assert len(page.points) == 1, [r.url for r in page.points]
    view_message = len(page.points[0].body())
    assert view_message > 8 * len(pts)
    assert max(page.received) < view_message
    c = canvas_box(el, frame)

    # ---- a box over the middle of the view -------------------------------------------------
    frame.get_by_role("button", name="Box").click()
    a = (c["x"] + c["width"] * 0.3, c["y"] + c["height"] * 0.25)
    b = (c["x"] + c["width"] * 0.62, c["y"] + c["height"] * 0.7)
    corners = projection_data(el, frame, [a, b])
    before = len(page.received)
    drag_path(page, [a, (a[0] + 40, a[1] + 30), b])
    page.wait_for_function(
        "() => new URL(location.href).searchParams.get('sel') === 'region'", timeout=60_000
    )
    wait_for_script(page)
    # The selection's rerun does not resend the view's points: no second file, and no
    # websocket message anywhere near their size.
    assert len(page.points) == 1
    assert max(page.received[before:]) < view_message / 4
    # The box as the URL keeps it: its corners to 6 significant digits.
    xs = sorted(float(f"{v[0]:.6g}") for v in corners)
    ys = sorted(float(f"{v[1]:.6g}") for v in corners)
    region = query_of(page)["region"]
    assert region.startswith("box:")
    assert np.allclose([float(v) for v in region[4:].split(",")], xs + ys, rtol=1e-5)
    inside = pts[pts.x.between(xs[0], xs[1]) & pts.y.between(ys[0], ys[1])]
    expected = set(inside.image_id)
    assert 20 < len(expected) < len(pts)  # the box holds some points, not all
    assert sent_ids(frame) == expected
    assert selected_count(page) == len(expected)
    assert downloaded_ids(page, tmp_path) == expected
    screenshot(page, "projection-box")
    el.screenshot(path=str(ARTIFACTS / "projection-box-view.png"))

    # ---- a lasso: a triangle, drawn through 12 points ----------------------------------------
    frame.get_by_role("button", name="Lasso").click()
    el.scroll_into_view_if_needed()
    c = canvas_box(el, frame)  # the page may have scrolled
    tri = [
        (c["x"] + c["width"] * 0.2, c["y"] + c["height"] * 0.8),
        (c["x"] + c["width"] * 0.5, c["y"] + c["height"] * 0.15),
        (c["x"] + c["width"] * 0.8, c["y"] + c["height"] * 0.8),
    ]
    path = [
        (p[0] + (q[0] - p[0]) * t, p[1] + (q[1] - p[1]) * t)
        for p, q in zip(tri, tri[1:] + tri[:1])
        for t in (0, 0.25, 0.5, 0.75)
    ]
    drag_path(page, path + [path[0]])
    page.wait_for_function(
        "() => (new URL(location.href).searchParams.get('region') || '').startsWith('lasso:')"
    )
    wait_for_script(page)
    nums = [float(v) for v in query_of(page)["region"][6:].split(",")]
    poly = np.array(nums).reshape(-1, 2)
    # The lasso that reached the URL follows the drawn triangle (within 3 pixels).
    drawn = projection_pixels(el, frame, poly)
    tri_path = MplPath(np.array(tri))
    assert all(tri_path.contains_point(p, radius=6) or tri_path.contains_point(p, radius=-6) for p in drawn)
    expected = set(pts.image_id[MplPath(poly).contains_points(pts[["x", "y"]].to_numpy())])
    assert 20 < len(expected) < len(pts)
    assert sent_ids(frame) == expected
    assert selected_count(page) == len(expected)
    assert downloaded_ids(page, tmp_path) == expected
    screenshot(page, "projection-lasso")
    el.screenshot(path=str(ARTIFACTS / "projection-lasso-view.png"))
    page.close()


def test_hover_zoom_and_pan_send_the_server_nothing(browser, app):
    url, ws = app
    page, el, frame, sent = open_clusters(browser, url, "projection-hover")
    before = len(sent)
    pts = stored_points(ws)
    # Hover over a stored point: its caption (image id) and thumbnail show.
    target = pts.iloc[len(pts) // 2]
    (px, py) = projection_pixels(el, frame, [(target.x, target.y)])[0]
    px, py = round(px), round(py)  # mouse events carry whole pixels
    page.mouse.move(px - 30, py - 30)
    page.mouse.move(px, py, steps=5)
    tip = frame.get_by_test_id("projection-tip")
    tip.wait_for(state="visible")
    shown = tip.locator("b").inner_text()
    near = projection_pixels(el, frame, pts[pts.image_id == shown][["x", "y"]].to_numpy())[0]
    assert np.hypot(near[0] - px, near[1] - py) <= 9  # the point under the cursor
    frame.wait_for_function(
        "() => { const i = document.querySelector('#tip img');"
        " return i && i.complete && i.naturalWidth > 0; }"
    )
    el.screenshot(path=str(ARTIFACTS / "projection-hover-tip.png"))
    # Wheel-zoom in around the point, then pan by dragging.
    k0 = frame.evaluate("() => window.__projection.view.k")
    for _ in range(5):
        page.mouse.wheel(0, -240)
        page.wait_for_timeout(60)
    k1 = frame.evaluate("() => window.__projection.view.k")
    assert k1 > 2 * k0
    # The point under the cursor stays under it while zooming.
    after = projection_pixels(el, frame, [(target.x, target.y)])[0]
    before_zoom = np.hypot(near[0] - px, near[1] - py) if shown == target.image_id else 1.0
    assert np.hypot(after[0] - px, after[1] - py) < 1 + before_zoom * k1 / k0
    cx0, cy0 = frame.evaluate("() => [window.__projection.view.cx, window.__projection.view.cy]")
    drag_path(page, [(px, py), (px - 120, py - 60)])
    cx, cy = frame.evaluate("() => [window.__projection.view.cx, window.__projection.view.cy]")
    assert np.allclose([cx, cy], [cx0 + 120 / k1, cy0 - 60 / k1], rtol=1e-4, atol=1e-4)
    page.wait_for_timeout(1500)
    el.screenshot(path=str(ARTIFACTS / "projection-zoomed.png"))
    assert len(sent) == before, f"the browser sent {len(sent) - before} messages (a rerun) for hover/zoom/pan"
    assert len(page.points) == 1  # nor fetched the points again
    assert (
        page.evaluate(
            "() => document.querySelector('[data-testid=stApp]').getAttribute('data-test-script-state')"
        )
        != "running"
    )
    # A click on a point is a choice: it reaches Python, which shows that image.
    (qx, qy) = projection_pixels(el, frame, [(target.x, target.y)])[0]
    page.mouse.click(qx, qy)
    page.wait_for_function("() => new URL(location.href).searchParams.get('img') !== null", timeout=60_000)
    wait_for_script(page)
    assert len(sent) > before
    assert query_of(page)["img"] in page.get_by_test_id("stSidebar").inner_text()
    page.close()


def test_a_tip_near_the_bottom_edge_flips_above_the_point_once_its_image_is_in(browser, app):
    """Issue 47: the tip was placed before its thumbnail loaded, then grew past the view's
    bottom edge and was cut. It is placed again at its full height: above the pointer where
    it does not fit below, wholly inside the view, never over the point."""
    url, ws = app
    page, el, frame, _ = open_clusters(browser, url, "projection-tip-edge")
    pts = stored_points(ws)
    pixels = np.array(projection_pixels(el, frame, pts[["x", "y"]].to_numpy()))
    i = int(np.argmax(pixels[:, 1]))  # the lowest point on the screen
    px, py = (round(v) for v in pixels[i])
    page.mouse.move(px - 20, py - 20)
    page.mouse.move(px, py, steps=5)
    frame.get_by_test_id("projection-tip").wait_for(state="visible")
    frame.wait_for_function(
        "() => { const i = document.querySelector('#tip img');"
        " return i && i.complete && i.naturalWidth > 0; }"
    )
    page.wait_for_timeout(100)
    tip, view, cursor = frame.evaluate(
        """() => { const t = document.querySelector('#tip').getBoundingClientRect();
                   const v = document.querySelector('canvas').getBoundingClientRect();
                   return [[t.top, t.bottom, t.left, t.right], [v.top, v.bottom, v.left, v.right],
                           window.__projection.hover]; }"""
    )
    box = el.bounding_box()
    y_in = py - box["y"]  # the pointer in the view's frame
    assert tip[0] >= view[0] - 1 and tip[1] <= view[1] + 1, (tip, view)  # not cut
    assert tip[1] <= y_in or tip[0] >= y_in, (tip, y_in)  # not over the point
    assert cursor >= 0  # a point is hovered
    el.screenshot(path=str(ARTIFACTS / "projection-tip-edge.png"))
    page.close()


@pytest.fixture(scope="module")
def app_captions_apart(demo_ws):
    """A server that sends no view's captions with its points (as for more than 250,000
    points): they come by the block on hover (components/projection.py CaptionSource)."""
    with serve(demo_ws, env={"CONCEPTLENS_COMPONENT_MAX_TEXT": "10"}) as url:
        yield url, demo_ws


def test_a_large_views_captions_come_by_the_block_on_hover(browser, app_captions_apart):
    import urllib.error
    import urllib.request

    url, ws = app_captions_apart
    page, el, frame, sent = open_clusters(browser, url, "projection-captions-apart")
    asked = []
    page.on("response", lambda r: asked.append(r) if "/conceptlens/captions/" in r.url else None)
    assert frame.evaluate("() => window.__projection.textBytes") is None  # none came with the points
    before = len(sent)
    pts = stored_points(ws)
    target = pts.iloc[len(pts) // 3]
    (px, py) = projection_pixels(el, frame, [(target.x, target.y)])[0]
    px, py = round(px), round(py)
    page.mouse.move(px - 30, py - 30)
    page.mouse.move(px, py, steps=5)
    tip = frame.get_by_test_id("projection-tip")
    tip.wait_for(state="visible")
    # The tip names the point at once, then its image and caption once its block came.
    frame.wait_for_function(
        "() => { const b = document.querySelector('#tip b');"
        " return b && !b.textContent.startsWith('point '); }",
        timeout=30_000,
    )
    shown = tip.locator("b").inner_text()
    assert shown in set(pts.image_id)
    near = projection_pixels(el, frame, pts[pts.image_id == shown][["x", "y"]].to_numpy())[0]
    assert np.hypot(near[0] - px, near[1] - py) <= 9  # the point under the cursor
    label = pd.read_parquet(ws / "images.parquet").set_index("image_id").loc[shown, "label_name"]
    assert f"{label} · cluster " in tip.inner_text()  # the image's own caption
    frame.wait_for_function(
        "() => { const i = document.querySelector('#tip img');"
        " return i && i.complete && i.naturalWidth > 0; }"
    )
    el.screenshot(path=str(ARTIFACTS / "projection-captions-apart-tip.png"))
    assert [r.status for r in asked] == [200], [r.url for r in asked]
    assert len(sent) == before, "hovering sent the server a message"
    # Only blocks of a view a page drew, and in range, are served.
    key = asked[0].url.split("/conceptlens/captions/")[1].split("/")[0]
    for path in (f"{key}/100000", f"{'0' * 64}/0"):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{url}/conceptlens/captions/{path}", timeout=30)
        assert e.value.code == 404
    with urllib.request.urlopen(f"{url}/conceptlens/captions/{key}/0", timeout=30) as r:
        assert r.headers["Cache-Control"].endswith("immutable")
        first = r.read().decode().split("\n")
    assert len(first) == min(len(pts), 4096) and {ln.split("\t")[0] for ln in first} <= set(pts.image_id)
    page.close()
