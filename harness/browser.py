"""Serve the dashboard on a free loopback port and drive it with Debian's Chromium.

Elements are found by role or data-testid, never by pixel offsets: a layout change
must not turn a click into a click on something else.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlparse

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = os.environ.get("CONCEPTLENS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Streamlit scrolls inside its main container: a full-page screenshot only grows with the viewport.
TALL = {"width": 1400, "height": 4400}


def free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(workspace: Path | str, port: int, script: Path | None = None) -> list[str]:
    """`streamlit run` of serve.py (or `script`) on `workspace`, headless on 127.0.0.1:`port`."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(script or ROOT / "serve.py"),
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        # Watching /work/main (with .venv) for edits costs CPU and nothing here edits the app.
        "--server.fileWatcherType",
        "none",
        "--",
        "--workspace",
        str(workspace),
    ]


@contextlib.contextmanager
def serve(
    workspace: Path | str,
    env: dict | None = None,
    timeout: float = 90,
    script: Path | None = None,
    ready: bool = False,
):
    """A fresh Streamlit server on `workspace`; yields its URL once it answers its health
    check (`ready`: once its warm-up is over too, `/conceptlens/ready`, as a deployment's
    readiness probe waits). `script`: another server entry than serve.py, run the same way
    (bench/view_alone/serve.py)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = open(ARTIFACTS / f"streamlit-{port}.log", "w")
    proc = subprocess.Popen(
        server_command(workspace, port, script),
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout
        for probe in ("/_stcore/health",) + (("/conceptlens/ready",) if ready else ()):
            while True:
                try:
                    with urllib.request.urlopen(url + probe, timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:  # refused, or HTTP 503 while warming
                    pass
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"streamlit did not answer {probe}; see {log.name}")
                time.sleep(0.1 if probe != "/_stcore/health" else 0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def server_log(url: str) -> str:
    """What the server `serve` started at `url` has printed so far."""
    return (ARTIFACTS / f"streamlit-{urlparse(url).port}.log").read_text()


def wait_for_script(page, timeout_ms: int = 120_000) -> None:
    """Wait until the app's script has finished and stayed finished (reruns settle), and a
    page that sent its projection view first has sent the rest (components/projection.py)."""
    from components.defer import DEFERRED_NOTE

    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
    state_js = """(note) => {
        const app = document.querySelector('[data-testid="stApp"]');
        const state = app ? app.getAttribute('data-test-script-state') : null;
        return state === 'notRunning' && document.body.innerText.includes(note) ? 'deferred' : state;
    }"""
    deadline = time.time() + timeout_ms / 1000
    calm = 0
    while calm < 4:
        if time.time() > deadline:
            raise TimeoutError("the app's script did not finish in time")
        calm = calm + 1 if page.evaluate(state_js, DEFERRED_NOTE) == "notRunning" else 0
        page.wait_for_timeout(250)
    # Let late elements (charts, images) paint before screenshots.
    page.wait_for_timeout(1000)


# Polled every 10 ms in the page (an init script): the first time (ms since navigation) the
# element sent first has drawn (`drawn`, a JavaScript expression), the page shows a data grid
# and the page shows the note of a run that sent that element alone. In window.__marks.
_MARKS = """
(() => {
  if (window.top !== window) return;
  window.__marks = {};
  const mark = (name) => {
    if (!(name in window.__marks)) window.__marks[name] = performance.now();
  };
  setInterval(() => {
    if (DRAWN) mark("drawn");
    if (document.querySelector('[data-testid="stDataFrame"]')) mark("table");
    if (document.body && document.body.innerText.includes(NOTE)) mark("note");
  }, 10);
})();
"""


def open_marked(browser, url: str, drawn: str, viewport: dict, *scripts: str):
    """(context, page) of `url` opened in a new browser profile with `_MARKS` recording when
    `drawn` (a JavaScript expression) first held, a data grid and components/defer.py's note
    appeared (`marks(page)`), `scripts` run first; once the app's script settled, checked
    to have raised nothing."""
    from components.defer import DEFERRED_NOTE

    ctx = browser.new_context(viewport=viewport)
    for s in scripts:
        ctx.add_init_script(s)
    ctx.add_init_script(_MARKS.replace("DRAWN", drawn).replace("NOTE", repr(DEFERRED_NOTE)))
    page = ctx.new_page()
    page.goto(url)
    page.get_by_test_id("stSidebarNav").wait_for(timeout=120_000)
    wait_for_script(page)
    assert page.get_by_test_id("stException").count() == 0
    return ctx, page


def marks(page) -> dict:
    """`open_marked`'s marks: name -> ms since navigation (or since they were cleared)."""
    return page.evaluate("() => window.__marks")


def clear_marks(page) -> None:
    """Forget the marks (the app stays one document across its pages)."""
    page.evaluate("() => { window.__marks = {}; }")


def open_page(browser, url: str, name: str, viewport: dict = TALL):
    """Open `url` in a new tab, wait for the page inside the app frame (its navigation),
    check it raised nothing, save tests/artifacts/NAME.png."""
    page = browser.new_page(viewport=viewport)
    page.goto(url)
    page.get_by_test_id("stSidebarNav").wait_for(timeout=120_000)
    page.locator('[data-testid="stMain"] h1').first.wait_for(timeout=120_000)
    wait_for_script(page)
    assert page.get_by_test_id("stException").count() == 0
    assert page.get_by_role("dialog").count() == 0, page.get_by_role("dialog").inner_text()
    screenshot(page, name)
    return page


def screenshot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def main_text(page) -> str:
    return page.get_by_test_id("stMain").inner_text()


def query_of(page) -> dict:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def select_grid_row(page, grid, row: int) -> None:
    """Select row `row` of a `st.dataframe` the way a keyboard user does: focus the grid,
    move the cell cursor down to the row, Shift+Space. The grid is a canvas; its
    accessible cells (`glide-cell-COL-ROW`) say which cell has the cursor."""
    grid.get_by_test_id("data-grid-canvas").focus()
    active = "() => document.activeElement && document.activeElement.getAttribute('data-testid')"
    for _ in range(row + 2):
        page.keyboard.press("ArrowDown")
        page.wait_for_timeout(300)  # the grid moves its focus after the key event
        if (page.evaluate(active) or "").endswith(f"-{row}"):
            break
    assert (page.evaluate(active) or "").endswith(f"-{row}"), page.evaluate(active)
    page.keyboard.press("Shift+Space")


def choose(page, name: str, option: str) -> None:
    """Pick `option` in the selectbox `name`; a click that lands while the app reruns opens
    no list, so it is tried again."""
    for _ in range(3):
        page.get_by_role("combobox", name=name, exact=True).click()
        wanted = page.get_by_role("option", name=option, exact=True)
        try:
            wanted.wait_for(timeout=15_000)
        except Exception:
            page.keyboard.press("Escape")
            wait_for_script(page)
            continue
        wanted.click()
        return
    raise AssertionError(f"{name}: option {option!r} never listed")


def open_export(page, nth: int = 0):
    """Open the nth "Export figure" popover and return it once its download button is drawn."""
    page.get_by_role("button", name="Export figure").nth(nth).click()
    popover = page.get_by_test_id("stPopoverBody")
    popover.wait_for()
    popover.get_by_role("button", name=re.compile(r"^Download ")).first.wait_for(timeout=60_000)
    return popover


# ---- the WebGL projection view (components/projection.py) ------------------------------------
PROJECTION = 'iframe[title="components.projection.projection"]'


def projection(page, nth: int = 0):
    """(iframe locator, frame) of the nth WebGL projection view, once it has drawn its points."""
    el = page.locator(PROJECTION).nth(nth)
    el.scroll_into_view_if_needed()
    frame = el.element_handle().content_frame()
    frame.wait_for_function("() => document.body.dataset.drawn", timeout=60_000)
    return el, frame


def ab_projection(page, side: int):
    """The Checkpoints page's A (0) or B (1) WebGL view: the page's last two (the aligned
    frame of 'Along training', components/aligned_section.py, comes before them)."""
    return projection(page, page.locator(PROJECTION).count() - 2 + side)


def projection_pixels(el, frame, xy) -> list[tuple[float, float]]:
    """Page coordinates of data points `xy` [(x, y), ...] through the view's own transform."""
    box = el.bounding_box()
    inner = frame.evaluate(
        """(pts) => {
            const r = document.getElementById('gl').getBoundingClientRect();
            return pts.map(([x, y]) => { const [a, b] = window.__projection.toScreen(x, y);
                                         return [r.left + a, r.top + b]; });
        }""",
        [list(map(float, p)) for p in xy],
    )
    return [(box["x"] + a, box["y"] + b) for a, b in inner]


def projection_data(el, frame, pixels) -> list[tuple[float, float]]:
    """Data coordinates of page points `pixels`, through the view's own transform."""
    box = el.bounding_box()
    return [
        tuple(v)
        for v in frame.evaluate(
            """(pts) => {
                const r = document.getElementById('gl').getBoundingClientRect();
                return pts.map(([a, b]) => window.__projection.toData(a - r.left, b - r.top));
            }""",
            [[px - box["x"], py - box["y"]] for px, py in pixels],
        )
    ]


def drag_path(page, pixels, steps: int = 4) -> None:
    """Press at the first page point, move through the others, release at the last."""
    page.mouse.move(*pixels[0])
    page.mouse.down()
    for p in pixels[1:]:
        page.mouse.move(*p, steps=steps)
    page.mouse.up()
