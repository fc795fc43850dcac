"""The Clusters page (and the Checkpoints page's basics) in a real browser on the factory
workspace: deep links, linked views (table row, purity point, UMAP point and box), the
selection's CSV, the image panel, the Back button, URLs that restore filters and sort,
and no request leaving the server."""

import csv
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.browser import (
    drag_path,
    main_text,
    open_export,
    open_page,
    projection,
    projection_pixels,
    query_of,
    screenshot,
    serve,
    server_log,
    wait_for_script,
)
from tests.conftest import copy_ws

pytestmark = pytest.mark.browser
SHORT = {"width": 1400, "height": 1000}
# ck1's clusters get their own captions, so a stale caption of ck0 shows (bug 3).
CK1_CAPTIONS = ["a checkered square", "a tiny circle", "a wide red square", "a big blue star"]


@pytest.fixture(scope="module")
def clusters_ws(factory_template, tmp_path_factory):
    root = copy_ws(factory_template, tmp_path_factory.mktemp("browser-clusters") / "ws")
    p = root / "cluster_captions/checkpoint_id=ck1/k=4/part-0.parquet"
    t = pq.read_table(p)
    p.unlink()  # a hard link to the template's file: replace it, never write into it
    pq.write_table(t.set_column(t.column_names.index("caption"), "caption", pa.array(CK1_CAPTIONS)), p)
    return root


@pytest.fixture(scope="module")
def app_url(clusters_ws):
    with serve(clusters_ws) as url:
        yield url


def link(base, path, **q):
    return f"{base}/{path}?" + "&".join(f"{k}={v}" for k, v in q.items())


def combobox(page, name) -> str:
    return page.get_by_role("combobox", name=name, exact=True).input_value()


def choose(page, name, option) -> None:
    box = page.get_by_role("combobox", name=name, exact=True)
    # Scrolled to first: a click that scrolls the page opens the list and the scroll closes it.
    box.scroll_into_view_if_needed()
    box.click()
    page.get_by_role("option", name=option).click()
    wait_for_script(page)


def wait_for_query(page, key, value) -> None:
    page.wait_for_function(
        f"() => new URL(location.href).searchParams.get({key!r}) === {value!r}", timeout=60_000
    )
    wait_for_script(page)


def click_row(page, grid, row: int) -> None:
    """Click row `row`'s tick box. The grid is a canvas: the row's place follows from the
    canvas and the number of rows its accessible table holds (header + rows, one height)."""
    # The grid fills its accessible table late: counted before, no rows gave one tall row
    # and a click below the grid (a CI flake).
    wait_for_script(page)  # a click while the grid is redrawn by a rerun is lost
    grid.locator("tbody tr").first.wait_for(state="attached", timeout=30_000)
    # ... and row by row: a count taken while it fills gave too tall rows and a click on
    # another row (CI and a full local run, once each). The count must reach the row and
    # hold still for 300 ms.
    rows, since = -1, time.monotonic()
    deadline = since + 30
    while time.monotonic() < deadline:
        n = grid.locator("tbody tr").count()
        if n != rows:
            rows, since = n, time.monotonic()
        elif n > row and time.monotonic() - since >= 0.3:
            break
        page.wait_for_timeout(50)
    assert rows > row, f"the clusters table shows {rows} rows; row {row} cannot be clicked"
    grid.scroll_into_view_if_needed()  # the UMAP above it may push it below the fold
    box = grid.get_by_test_id("data-grid-canvas").bounding_box()
    height = box["height"] / (rows + 1)
    page.mouse.click(box["x"] + 15, box["y"] + height * (row + 1.5))


def table_rows(page) -> list[list[str]]:
    """The clusters table's cells as the grid's accessible table holds them."""
    grid = page.get_by_test_id("stDataFrame").first
    grid.locator("th").first.wait_for(
        state="attached", timeout=30_000
    )  # the grid fills its accessible table late
    n = grid.locator("th").count()
    cells = grid.locator("td").all_inner_texts()
    return [cells[i : i + n] for i in range(0, len(cells), n)]


def point_position(page, axis: str, trace: int = 0, point: int | None = None) -> dict:
    """Screen position and customdata of one point of the figure whose x axis title starts
    with `axis` (a title may say where its axis starts): point `point` of trace `trace`, or
    its point farthest from every other one (a click there hits no neighbour). Plotly's axes
    convert data to pixels."""
    return page.evaluate(
        """([axis, ti, pi]) => {
            const gd = [...document.querySelectorAll('.js-plotly-plot')]
                .find(g => (g._fullLayout.xaxis.title.text || '').startsWith(axis));
            const data = gd._fullData, xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
            const t = data[ti];
            const px = (u, i) => xa._offset + xa.d2p(u.x[i]), py = (u, i) => ya._offset + ya.d2p(u.y[i]);
            let best = pi;
            if (best === null) {
                let far = -1;
                const all = data.flatMap(u =>
                    Array.from({length: u.x.length}, (_, i) => [px(u, i), py(u, i)]));
                for (let i = 0; i < t.x.length; i++) {
                    const d = Math.min(...all.map(([x, y]) =>
                        (x - px(t, i)) ** 2 + (y - py(t, i)) ** 2 || Infinity));
                    if (d > far) { far = d; best = i; }
                }
            }
            const r = gd.getBoundingClientRect();
            return {x: r.left + px(t, best), y: r.top + py(t, best), data: Array.from(t.customdata[best])};
        }""",
        [axis, trace, point],
    )


def chart(page, axis: str):
    """The Plotly chart whose x axis is titled `axis`."""
    return page.get_by_test_id("stPlotlyChart").filter(has=page.locator(".xtitle", has_text=axis)).first


# ---- deep links and the table ---------------------------------------------------------------
def test_clusters_deep_link(browser, app_url):
    q = {"ds": "toy", "ckpt": "ck2", "k": "4", "cluster": "2"}
    page = open_page(browser, link(app_url, "clusters", **q), "clusters-deep-link", SHORT)
    assert "not available" not in main_text(page)
    assert {k: query_of(page)[k] for k in q} == q
    assert combobox(page, "Checkpoint") == "ck2" and combobox(page, "k (clusters)") == "4"
    assert combobox(page, "Cluster").startswith("2 — a blue shape")
    assert "Hard negative: cluster 3" in main_text(page)
    assert page.locator('[data-testid="stImage"] img').count() >= 2
    page.close()


def test_table_tick_follows_the_chosen_cluster(browser, app_url):
    """Bug 2: after choosing in the selectbox the old row stayed ticked, and clicking it
    (to choose that cluster again) only removed the tick."""
    page = open_page(
        browser,
        link(app_url, "clusters", ckpt="ck0", cluster="0"),
        "clusters-before-row-select",
        viewport={"width": 1400, "height": 1400},
    )
    grid = page.get_by_test_id("stDataFrame").first
    click_row(page, grid, 3)
    wait_for_query(page, "cluster", "3")
    assert combobox(page, "Cluster").startswith("3") and "Cluster 3" in main_text(page)
    choose(page, "Cluster", "1 — a green shape")
    wait_for_query(page, "cluster", "1")
    click_row(page, grid, 3)
    wait_for_query(page, "cluster", "3")
    click_row(page, grid, 3)  # the ticked row again: it stays chosen
    page.wait_for_timeout(1000)
    wait_for_script(page)
    assert query_of(page)["cluster"] == "3"
    screenshot(page, "clusters-after-row-select")
    assert page.get_by_test_id("stException").count() == 0
    assert combobox(page, "Cluster").startswith("3")
    page.close()


def test_switching_checkpoint_shows_its_own_caption(browser, app_url):
    """Bug 3: the cluster selectbox kept the previous checkpoint's caption."""
    page = open_page(
        browser,
        link(app_url, "clusters", ckpt="ck0", cluster="2"),
        "clusters-ck0",
        SHORT,
    )
    assert combobox(page, "Cluster") == "2 — a blue shape"
    choose(page, "Checkpoint", "ck1")
    assert combobox(page, "Cluster") == f"2 — {CK1_CAPTIONS[2]}"
    page.close()


def test_url_restores_filters_sort_and_columns(browser, app_url):
    q = {
        "ckpt": "ck1",
        "q": "square",
        "min_size": "1",
        "sort": "size",
        "desc": "1",
        "cols": "cluster,size,caption",
    }
    page = open_page(browser, link(app_url, "clusters", **q), "clusters-filters-link", SHORT)
    assert page.get_by_test_id("stAlertContentWarning").count() == 0
    grid = page.get_by_test_id("stDataFrame").first
    grid.locator("th").first.wait_for(
        state="attached", timeout=30_000
    )  # the grid fills its accessible table late
    assert grid.locator("th").all_inner_texts() == ["cluster", "size", "caption"]
    rows = table_rows(page)
    # Min size, words and the sort come from the link: the two captions with "square", largest first.
    assert sorted(r[2] for r in rows) == ["a checkered square", "a wide red square"]
    sizes = [int(r[1]) for r in rows]
    assert sizes == sorted(sizes, reverse=True)
    assert page.get_by_role("textbox", name="Caption has the words").input_value() == "square"
    assert page.get_by_role("spinbutton", name="Min size").input_value() == "1"
    assert combobox(page, "Sort by") == "size"
    assert page.get_by_role("switch", name="descending").is_checked()
    # Choosing another word updates the link.
    box = page.get_by_role("textbox", name="Caption has the words")
    box.fill("red")
    box.press("Enter")
    wait_for_query(page, "q", "red")
    assert [r[2] for r in table_rows(page)] == ["a wide red square"]  # not "checkered"
    page.close()


# ---- linked views --------------------------------------------------------------------------------
def test_clicking_a_purity_point_chooses_its_cluster(browser, app_url):
    page = open_page(
        browser,
        link(app_url, "clusters", ckpt="ck0", cluster="0"),
        "clusters-purity",
        SHORT,
    )
    chart(page, "purity").scroll_into_view_if_needed()
    wait_for_script(page)
    p = point_position(page, "purity", trace=0, point=2)
    page.mouse.click(p["x"], p["y"])
    wanted = str(p["data"][0])
    wait_for_query(page, "cluster", wanted)
    screenshot(page, "clusters-purity-click")
    assert combobox(page, "Cluster").startswith(wanted)
    assert f"Cluster {wanted}" in main_text(page)
    page.close()


def lonely_point(frame) -> tuple[str, float, float]:
    """(image id, x, y) of the component's point farthest from every other one (a click
    there hits no neighbour)."""
    return tuple(
        frame.evaluate(
            """() => { const S = window.__projection, xy = S.xy, n = S.n;
                const lines = new TextDecoder().decode(S.textBytes).split('\\n');
                let best = 0, far = -1;
                for (let i = 0; i < n; i++) { let d = Infinity;
                    for (let j = 0; j < n; j++) if (j !== i)
                        d = Math.min(d, (xy[2*i]-xy[2*j])**2 + (xy[2*i+1]-xy[2*j+1])**2);
                    if (d > far) { far = d; best = i; } }
                return [lines[best].split('\\t')[0], xy[2*best], xy[2*best+1]]; }"""
        )
    )


def test_clicking_a_umap_point_shows_its_image(browser, app_url):
    page = open_page(browser, link(app_url, "clusters", ckpt="ck0"), "clusters-umap", SHORT)
    el, frame = projection(page)
    image_id, x, y = lonely_point(frame)
    page.mouse.click(*projection_pixels(el, frame, [(x, y)])[0])
    wait_for_query(page, "img", image_id)
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_text("Nearest in ck0").wait_for()
    screenshot(page, "clusters-umap-click")
    assert image_id in sidebar.inner_text()
    assert sidebar.locator('[data-testid="stImage"] img').count() == 1 + 8  # the image, 8 neighbours
    # A neighbour's button shows that image instead.
    first = sidebar.get_by_role("button").filter(has_text="·").first
    first.click()
    page.wait_for_function(f"() => new URL(location.href).searchParams.get('img') !== {image_id!r}")
    wait_for_script(page)
    assert query_of(page)["img"].startswith("toy-")
    page.close()


def test_box_selection_downloads_its_image_ids(browser, app_url, tmp_path):
    page = open_page(browser, link(app_url, "clusters", ckpt="ck0"), "clusters-box", SHORT)
    el, frame = projection(page)
    frame.get_by_role("button", name="Box").click()
    box = el.bounding_box()
    canvas = frame.locator("#gl").bounding_box()  # page coordinates
    drag_path(
        page,
        [
            (canvas["x"] + 2, canvas["y"] + 2),
            (canvas["x"] + canvas["width"] / 2, canvas["y"] + canvas["height"] / 2),
            (canvas["x"] + canvas["width"] - 2, canvas["y"] + canvas["height"] - 2),
        ],
    )
    assert box["height"] > 300
    wait_for_query(page, "sel", "region")
    assert query_of(page)["region"].startswith("box:")
    page.get_by_role("radio", name="the region drawn on the UMAP").wait_for()
    screenshot(page, "clusters-box-selection")
    with page.expect_download(timeout=60_000) as dl:
        page.get_by_role("button", name="Download image ids (CSV)").click()
    path = tmp_path / "ids.csv"
    dl.value.save_as(path)
    rows = list(csv.DictReader(path.open()))
    assert sorted(r["image_id"] for r in rows) == [f"toy-{i:04d}" for i in range(48)]
    # The selection's grid holds them all; a click on a name shows that image.
    page.get_by_test_id("stMain").get_by_role("button", name="red").first.click()
    page.wait_for_function("() => new URL(location.href).searchParams.get('img') !== null")
    wait_for_script(page)
    assert query_of(page)["img"] in page.get_by_test_id("stSidebar").inner_text()
    page.close()


def test_back_and_forward_buttons_step_through_the_views(browser, app_url):
    """Bug 9: Back returns to the previous view, Forward to the next."""
    page = open_page(
        browser,
        link(app_url, "clusters", ckpt="ck0", cluster="0"),
        "clusters-history",
        SHORT,
    )
    choose(page, "Cluster", "2 — a blue shape")
    wait_for_query(page, "cluster", "2")
    choose(page, "Checkpoint", "ck1")
    wait_for_query(page, "ckpt", "ck1")
    page.go_back()
    wait_for_query(page, "ckpt", "ck0")
    assert (combobox(page, "Checkpoint"), combobox(page, "Cluster")) == ("ck0", "2 — a blue shape")
    page.go_back()
    wait_for_query(page, "cluster", "0")
    assert combobox(page, "Cluster") == "0 — a red shape"
    page.go_forward()
    wait_for_query(page, "cluster", "2")
    assert combobox(page, "Cluster") == "2 — a blue shape"
    page.close()


def test_another_page_and_back_keeps_the_view(browser, app_url):
    """Bug 9: the navigation drops the URL's parameters; the page shows the view left."""
    page = open_page(browser, link(app_url, "clusters", ckpt="ck1", cluster="2"), "clusters-nav", SHORT)
    nav = page.get_by_test_id("stSidebarNav")
    nav.get_by_role("link", name="Checkpoints").click()
    page.wait_for_function("() => location.pathname === '/checkpoints'")
    wait_for_script(page)
    nav.get_by_role("link", name="Clusters").click()
    page.wait_for_function("() => location.pathname === '/clusters'")
    wait_for_query(page, "cluster", "2")
    assert (combobox(page, "Checkpoint"), combobox(page, "Cluster")) == ("ck1", f"2 — {CK1_CAPTIONS[2]}")
    page.close()


def test_nothing_is_fetched_from_outside_the_server(browser, app_url):
    requests = []
    page = browser.new_page(viewport=SHORT)
    page.on("request", lambda r: requests.append(r.url))
    # With an image in the sidebar: its thumbnail and its neighbours' are requested too.
    page.goto(link(app_url, "clusters", ckpt="ck0", img="toy-0001"))
    page.locator('[data-testid="stMain"] h1').first.wait_for(timeout=120_000)
    wait_for_script(page)
    time.sleep(1)
    outside = [u for u in requests if not u.startswith((app_url, "data:", "blob:"))]
    assert requests and not outside, outside
    page.close()


# ---- Checkpoints ----------------------------------------------------------------------------
def test_checkpoints_deep_link_and_flows(browser, app_url):
    # The toy pair has no significant split or merge (the default flows): its one-to-one
    # matches are drawn with significant flows.
    q = {"ds": "toy", "k": "4", "a": "ck2", "b": "ck0", "flows": "significant flows"}
    page = open_page(browser, link(app_url, "checkpoints", **q), "checkpoints-deep-link")
    assert {k: query_of(page)[k] for k in q} == q
    main = page.get_by_test_id("stMain")
    assert "A clusters that split" in main.inner_text()
    assert main.locator(".js-plotly-plot .sankey").count() == 1
    assert main.locator(".js-plotly-plot .heatmaplayer, .js-plotly-plot .hm").count() >= 1
    significant = main.locator(".sankey-link").count()
    page.get_by_role("radiogroup").get_by_text("all flows").click()
    wait_for_script(page)
    screenshot(page, "checkpoints-all-flows")
    assert page.get_by_test_id("stException").count() == 0
    assert main.locator(".sankey-link").count() >= significant > 0
    page.close()


def test_export_popover_offers_every_format(browser, app_url):
    page = open_page(
        browser, link(app_url, "checkpoints"), "checkpoints-export", viewport={"width": 1400, "height": 1400}
    )
    popover = open_export(page)
    assert popover.get_by_role("button", name="Download PDF").count() == 1
    page.close()


def test_the_server_logs_no_stack_trace(browser, app_url):
    """url_state puts a widget's value into session_state before drawing it, by design.
    Streamlit logged that with a stack trace the first time a server drew the Clusters
    page's pagination (until .streamlit/config.toml turned that warning off)."""
    open_page(browser, link(app_url, "clusters"), "clusters-server-log", SHORT).close()
    log = server_log(app_url)
    assert "Session State API" not in log and "Stack (most recent call last)" not in log, log[-2000:]


@pytest.fixture(scope="module")
def hostile_url(factory_template, tmp_path_factory):
    from tests.test_text_literal import make_hostile

    with serve(make_hostile(factory_template, tmp_path_factory.mktemp("browser-hostile") / "ws")) as url:
        yield url


def test_workspace_text_makes_no_link_or_markup(browser, hostile_url):
    """Label names, captions and checkpoint runs holding Markdown and HTML (issue 24) are
    shown as their text: no link, no bold, in the page or in its figures."""
    page = open_page(
        browser,
        link(hostile_url, "clusters", ckpt="ck0", img="toy-0000", color="label_name"),
        "clusters-hostile",
        SHORT,
    )
    page.get_by_test_id("stSidebar").get_by_text("Nearest in ck0").wait_for()
    _, frame = projection(page)
    wait_for_script(page)
    screenshot(page, "clusters-hostile")
    # The WebGL view's legend shows the names as text too.
    assert "[click me](http://x) red" in frame.locator("#legend").inner_text()
    assert frame.locator("a, b:not(#tip b), strong").count() == 0
    assert page.locator('a[href^="http://x"]').count() == 0
    assert page.locator("strong", has_text="bold").count() == 0
    assert page.locator("b", has_text="x").count() == 0
    # Plotly's <b> (an untitled chart's title is an empty bold one: not text)
    bold = page.locator('svg tspan[style*="bold"]').all_text_contents()
    assert not [t for t in bold if t and t.strip()], bold
    text = page.locator("body").inner_text()
    assert "[click me](http://x) red" in text and "**bold** green" in text
    page.close()
