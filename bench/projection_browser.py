"""The projection view in a real browser: ConceptLens's WebGL view (Clusters page) beside
Apple's Embedding Atlas 0.21 on the same points, in one headless Chromium (Debian's; WebGL2
through SwiftShader, no WebGPU, so Atlas runs its WebGL2 fallback).

Workspaces are bench/million.py's (synthetic layout, built if missing): `--points 50000
1000000`. Embedding Atlas is installed in its own venv, bench/.venv-atlas (created here
with `pip install embedding-atlas==0.21.0`; never a dependency of the project), and serves
a Parquet file of the same image ids, x, y and label as the workspace's projection.

Measured per tool and size, `--repeat` times interleaved (ConceptLens, Atlas, ConceptLens,
...), medians:

- cold: a new browser context navigates to the page; the time until the screen shows the
  plot's points: the first frame of Chromium's screencast (every frame the compositor
  swaps, timestamped by it) whose plot area holds at least half the ink (pixels off its
  background colour) it holds once drawn. The same test for both tools. The end of the
  load is found by polling screenshots of the largest canvas every 50 ms until it has
  more than 1,000 non-background pixels (reported too, as `cold_polled_s`): each poll
  waits for the page's main thread, so a page still busy after it drew (ConceptLens sends
  its tables and figures once the view is drawn) is polled late. Each server's first
  navigation warms its caches (a deployed server's first visitor): reported apart
  (`first`), not in the medians. ConceptLens's server is navigated to once its warm-up is
  over (`/conceptlens/ready`, as a deployment's readiness probe; `--first-at-health`: as
  soon as it answers its health check), Atlas's once it answers (it loads its data before
  it listens).
- zoom: one wheel step over the plot -> the canvas's pixels change (polled screenshots).
- bytes per pan/zoom: websocket and HTTP bytes the browser sends and receives during
  five wheel steps and a drag.
- `--view-alone`: the cold load of a page that holds the view alone (bench/view_alone/),
  served the same way: what the Clusters page's other elements add to a cold load.
- ConceptLens only: hover -> the tip shows the point's image id and caption (six points
  spread over the drawing order, one after the other; beyond 250,000 points the captions
  come by the block of 4,096 on hover, so the first one also makes the view's captions);
- ConceptLens only: a box drawn in Box mode -> the view shows the selection (timed inside
  the component: pointer-up to the selection drawn, `gl.finish()`), and the bytes of the
  rerun that commits it (the page's selection table and images).

    nice -n 10 /work/main/.venv/bin/python bench/projection_browser.py [--points 50000 1000000] \\
        [--repeat 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from harness.browser import CHROMIUM, CHROMIUM_ARGS, free_port, serve  # noqa: E402

ATLAS_VENV = ROOT / "bench" / ".venv-atlas"
ATLAS_VERSION = "0.21.0"
VIEW = {"width": 1400, "height": 1000}


def atlas_python() -> Path:
    """bench/.venv-atlas's Python, with embedding-atlas 0.21 (created and installed if missing)."""
    py = ATLAS_VENV / "bin" / "python"
    if not (ATLAS_VENV / "bin" / "embedding-atlas").exists():
        if not py.exists():
            subprocess.run(["python3", "-m", "venv", str(ATLAS_VENV)], check=True)
        subprocess.run(
            [str(py), "-m", "pip", "install", "-q", f"embedding-atlas=={ATLAS_VERSION}"], check=True
        )
    return py


def atlas_parquet(workspace: Path, out: Path) -> Path:
    """The workspace's projection as Atlas reads it: id, x, y, label."""
    import duckdb

    if out.exists():
        return out
    con = duckdb.connect()
    proj = workspace / "projections"
    con.execute(
        f"""COPY (SELECT p.image_id AS id, p.x, p.y, i.label_name AS label
                  FROM read_parquet('{proj}/**/*.parquet', hive_partitioning = true) p
                  JOIN read_parquet('{workspace / "images.parquet"}') i USING (image_id)
                  WHERE p.method = 'umap') TO '{out}' (FORMAT parquet)"""
    )
    return out


@contextlib.contextmanager
def _running(proc, log, url: str, health: str, what: str):
    """Yield `url` once `url + health` answers 200 (at most 300 s); stop `proc` after."""
    try:
        deadline = time.time() + 300
        while True:
            try:
                with urllib.request.urlopen(url + health, timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"{what} did not start; see {log.name}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@contextlib.contextmanager
def atlas_server(parquet: Path):
    port = free_port()
    log = open(parquet.with_suffix(".atlas.log"), "w")
    exe = ATLAS_VENV / "bin" / "embedding-atlas"
    proc = subprocess.Popen(
        [
            str(exe),
            str(parquet),
            "--x",
            "x",
            "--y",
            "y",
            "--text",
            "label",
            "--port",
            str(port),
            "--no-auto-port",
            "--host",
            "127.0.0.1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    with _running(proc, log, f"http://127.0.0.1:{port}", "", "embedding-atlas") as url:
        yield url


# ---- measuring in the browser ---------------------------------------------------------------
def biggest_canvas(page):
    """(frame, bounding box in page coordinates) of the largest visible canvas, in any frame."""
    best = None
    for frame in page.frames:
        try:
            boxes = frame.evaluate(
                """() => [...document.querySelectorAll('canvas')].map(c => {
                    const r = c.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })"""
            )
        except Exception:
            continue
        off = (0.0, 0.0)
        if frame.parent_frame is not None:
            el = frame.frame_element().bounding_box()
            off = (el["x"], el["y"]) if el else off
        for x, y, w, h in boxes:
            if w * h > 0 and (best is None or w * h > best[1]["width"] * best[1]["height"]):
                best = (frame, {"x": x + off[0], "y": y + off[1], "width": w, "height": h})
    return best


def inked(page, box) -> int:
    """Pixels of the clip `box` that differ from its most common colour."""
    import io

    import numpy as np
    from PIL import Image

    png = page.screenshot(clip=box)
    a = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).reshape(-1, 3)
    keys = a[:, 0].astype(np.int64) << 16 | a[:, 1].astype(np.int64) << 8 | a[:, 2]
    vals, counts = np.unique(keys, return_counts=True)
    return int(len(keys) - counts.max())


class Screencast:
    """The frames Chromium's compositor shows (CDP Page.startScreencast, half size), each
    with the wall-clock time it was swapped: when pixels reached the screen, whatever the
    page's main thread is doing."""

    def __init__(self, ctx, page):
        self.cdp = ctx.new_cdp_session(page)
        self.frames: list[tuple[float, str]] = []
        self.cdp.on("Page.screencastFrame", self._frame)

    def _frame(self, ev) -> None:
        self.frames.append((ev["metadata"]["timestamp"], ev["data"]))
        with contextlib.suppress(Exception):
            self.cdp.send("Page.screencastFrameAck", {"sessionId": ev["sessionId"]})

    def start(self) -> None:
        self.cdp.send(
            "Page.startScreencast",
            {
                "format": "jpeg",
                "quality": 60,
                "maxWidth": VIEW["width"] // 2,
                "maxHeight": VIEW["height"] // 2,
            },
        )

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.cdp.send("Page.stopScreencast")

    @staticmethod
    def ink(jpeg_b64: str, box: dict) -> int:
        """Pixels of `box` (page coordinates) off its most common colour (colours binned by 16,
        off by more than 40 in a channel: JPEG's noise is not ink)."""
        import base64
        import io

        import numpy as np
        from PIL import Image

        img = Image.open(io.BytesIO(base64.b64decode(jpeg_b64))).convert("RGB")
        f = img.width / VIEW["width"]
        x0, y0 = max(0, int(box["x"] * f)), max(0, int(box["y"] * f))
        x1, y1 = int((box["x"] + box["width"]) * f), int((box["y"] + box["height"]) * f)
        a = np.asarray(img)[y0:y1, x0:x1].reshape(-1, 3).astype(np.int64)
        if not len(a):
            return 0
        q = a // 16
        keys = q[:, 0] << 8 | q[:, 1] << 4 | q[:, 2]
        vals, counts = np.unique(keys, return_counts=True)
        bg = vals[counts.argmax()]
        centre = np.array([(bg >> 8) & 15, (bg >> 4) & 15, bg & 15]) * 16 + 8
        return int((np.abs(a - centre).max(axis=1) > 40).sum())

    def first_drawn(self, box: dict, since: float) -> float | None:
        """Seconds from `since` (wall clock) to the first frame whose `box` holds at least
        half the ink of the last frame's."""
        if not self.frames:
            return None
        final = self.ink(self.frames[-1][1], box)
        for ts, data in self.frames:
            if final and self.ink(data, box) >= final / 2:
                return ts - since
        return None


def wait_drawn(page, t0: float, timeout: float = 300, min_ink: int = 1000) -> tuple[float, dict]:
    while time.perf_counter() - t0 < timeout:
        found = biggest_canvas(page)
        if found and found[1]["width"] > 200 and found[1]["height"] > 200:
            if inked(page, found[1]) > min_ink:
                return time.perf_counter() - t0, found[1]
        page.wait_for_timeout(50)
    raise TimeoutError("the plot was never drawn")


def traffic(page) -> dict:
    """Bytes the page's websockets and HTTP responses carry from now on (a live dict)."""
    t = {"sent": 0, "received": 0, "http": 0}

    def on_ws(ws):
        ws.on("framesent", lambda p: t.__setitem__("sent", t["sent"] + len(p)))
        ws.on("framereceived", lambda p: t.__setitem__("received", t["received"] + len(p)))

    def on_response(r):
        with contextlib.suppress(Exception):
            t["http"] += int(r.headers.get("content-length") or 0)

    page.on("websocket", on_ws)
    page.on("response", on_response)
    return t


def zoom_once(page, box) -> float:
    """One wheel step over the plot's centre -> its pixels change (seconds)."""
    import io

    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(cx, cy)
    page.wait_for_timeout(300)
    before = page.screenshot(clip=box)
    t0 = time.perf_counter()
    page.mouse.wheel(0, -200)
    while time.perf_counter() - t0 < 30:
        if page.screenshot(clip=box) != before:
            return time.perf_counter() - t0
    del io
    raise TimeoutError("a wheel step changed nothing")


def pan_zoom_bytes(page, box, t: dict) -> int:
    page.wait_for_timeout(500)
    start = dict(t)
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(cx, cy)
    for _ in range(5):
        page.mouse.wheel(0, -120)
        page.wait_for_timeout(80)
    page.mouse.move(cx, cy)
    page.mouse.down()
    page.mouse.move(cx - 100, cy - 50, steps=10)
    page.mouse.up()
    page.wait_for_timeout(1500)
    return sum(t[k] - start[k] for k in t)


def hover_captions(page, el, frame, points: int = 6) -> list[float]:
    """Seconds from the cursor reaching a point to its tip showing the point's image id (its
    caption: with the points up to 250,000 of them, else fetched by the block), for
    `points` points spread over the drawing order (so over blocks), in turn."""
    from harness.browser import projection_pixels

    n = frame.evaluate("() => window.__projection.n")
    out = []
    for j in range(points):
        i = (2 * j + 1) * n // (2 * points)
        xy = frame.evaluate(f"() => [window.__projection.xy[{2 * i}], window.__projection.xy[{2 * i + 1}]]")
        px, py = projection_pixels(el, frame, [xy])[0]
        page.mouse.move(2, 2)  # off the view: the tip goes
        frame.wait_for_function("() => getComputedStyle(document.getElementById('tip')).display === 'none'")
        t0 = time.perf_counter()
        page.mouse.move(round(px), round(py))
        frame.wait_for_function(
            "() => { const b = document.querySelector('#tip b');"
            " return b && b.offsetParent !== null && !b.textContent.startsWith('point '); }",
            timeout=60_000,
            polling="raf",
        )
        out.append(time.perf_counter() - t0)
    page.mouse.move(2, 2)
    return out


def run_conceptlens(browser, url: str, ckpt: str) -> dict:
    from harness.browser import projection, wait_for_script

    def find_view(page):
        view = page.locator('iframe[title="components.projection.projection"]')
        view.wait_for(timeout=600_000)
        # Scrolled to at once: Playwright's own scroll waits for the page's layout to hold
        # still, which the rest of the page, sent after the view (components/projection.py),
        # delays.
        view.evaluate("e => e.scrollIntoView({block: 'nearest'})")

    ctx, page, t, cold = cold_load(browser, f"{url}/clusters?ckpt={ckpt}", find_view)
    wait_for_script(page, timeout_ms=600_000)
    el, frame = projection(page)
    box = frame.locator("#gl").bounding_box()
    zoom = zoom_once(page, box)
    frame.evaluate("() => document.getElementById('reset').click()")
    hover = hover_captions(page, el, frame)
    pz = pan_zoom_bytes(page, box, t)
    frame.evaluate("() => document.getElementById('reset').click()")
    # A box over the middle quarter: pointer-up -> selection drawn, timed inside the view.
    frame.get_by_role("button", name="Box").click()
    start = dict(t)
    page.mouse.move(box["x"] + box["width"] * 0.25, box["y"] + box["height"] * 0.25)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.75, box["y"] + box["height"] * 0.75, steps=6)
    page.mouse.up()
    frame.wait_for_function("() => window.__projection.selectDrawnMs !== undefined")
    select_ms = frame.evaluate("() => window.__projection.selectDrawnMs")
    n_sel = frame.evaluate("() => window.__projection.selCount")
    page.wait_for_function(
        "() => new URL(location.href).searchParams.get('sel') === 'region'", timeout=600_000
    )
    wait_for_script(page, timeout_ms=600_000)
    select_bytes = sum(t[k] - start[k] for k in t)
    ctx.close()
    return {
        **cold,
        "zoom_s": zoom,
        "pan_zoom_bytes": pz,
        "hover_first_s": hover[0],
        "hover_s": statistics.median(hover[1:]),
        "select_view_ms": select_ms,
        "selected": n_sel,
        "select_rerun_bytes": select_bytes,
    }


def alone_server(workspace: Path):
    """bench/view_alone/serve.py on `workspace`: a page with the projection view alone."""
    return serve(workspace, timeout=300, script=ROOT / "bench" / "view_alone" / "serve.py")


def cold_load(browser, url: str, before=None):
    """A new browser context navigates to `url` until the plot is drawn (`before(page)` runs
    first, after the navigation): (context, page, traffic counters, {"cold_s": seconds to
    the first frame that shows the points, "cold_polled_s": to the polled screenshot that
    does, "cold_bytes": bytes of the load})."""
    ctx = browser.new_context(viewport=VIEW)
    page = ctx.new_page()
    t = traffic(page)
    cast = Screencast(ctx, page)
    cast.start()
    wall0, t0 = time.time(), time.perf_counter()
    page.goto(url)
    if before is not None:
        before(page)
    polled, box = wait_drawn(page, t0, timeout=600)
    # Frames until one swapped after the poll saw the points: the ink to reach (a frame
    # comes only when the screen changes, and only once the one before was acknowledged).
    seen = wall0 + polled
    until = time.perf_counter() + 5
    page.wait_for_timeout(300)
    while time.perf_counter() < until and not (cast.frames and cast.frames[-1][0] >= seen):
        page.mouse.move(2, 2 + len(cast.frames) % 2)  # a hover outside the plot: a new frame
        page.wait_for_timeout(100)
    cast.stop()
    cold = {"cold_s": cast.first_drawn(box, wall0), "cold_polled_s": polled, "cold_bytes": sum(t.values())}
    return ctx, page, t, cold


def run_alone(browser, url: str) -> dict:
    ctx, _, _, cold = cold_load(browser, url)
    ctx.close()
    return cold


def run_atlas(browser, url: str) -> dict:
    ctx, page, t, cold = cold_load(browser, url)
    page.wait_for_timeout(1000)
    found = biggest_canvas(page)
    box = found[1]
    zoom = zoom_once(page, box)
    pz = pan_zoom_bytes(page, box, t)
    ctx.close()
    return {**cold, "zoom_s": zoom, "pan_zoom_bytes": pz}


def median(rows: list[dict], key: str):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, nargs="+", default=[50_000, 1_000_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--dir", default="/tmp/conceptlens-projection-bench", help="workspaces (built if missing)"
    )
    ap.add_argument("--no-atlas", action="store_true", help="ConceptLens only")
    ap.add_argument("--no-conceptlens", action="store_true", help="Embedding Atlas only")
    ap.add_argument(
        "--view-alone",
        action="store_true",
        help="also a page with the projection view alone (bench/view_alone/)",
    )
    ap.add_argument(
        "--first-at-health",
        action="store_true",
        help="navigate first as soon as the server answers its health check, not once its "
        "warm-up is over (/conceptlens/ready)",
    )
    ap.add_argument("--json", help="write the numbers here")
    args = ap.parse_args()

    from million import build
    from playwright.sync_api import sync_playwright

    if not args.no_atlas:
        atlas_python()
    results = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for n in args.points:
            ws = Path(args.dir) / f"ws-{n}"
            build(ws, n)
            ckpt = json.loads((ws / "workspace.json").read_text()).get("provenance", {}).get("checkpoint")
            if not ckpt:
                import pandas as pd

                ckpt = str(pd.read_parquet(ws / "checkpoints.parquet")["checkpoint_id"].iloc[0])
            cl, at, al = [], [], []
            with contextlib.ExitStack() as stack:
                url = (
                    None
                    if args.no_conceptlens
                    else stack.enter_context(serve(ws, timeout=300, ready=not args.first_at_health))
                )
                lurl = stack.enter_context(alone_server(ws)) if args.view_alone else None
                aurl = None
                if not args.no_atlas:
                    aurl = stack.enter_context(
                        atlas_server(atlas_parquet(ws, Path(args.dir) / f"atlas-{n}.parquet"))
                    )
                # The first navigation after a server start warms its caches (a deployed
                # server's first visitor): timed, and reported apart from the medians.
                first = {}
                for name, u in (("conceptlens", url), ("view_alone", lurl), ("atlas", aurl)):
                    if u:
                        path = f"/clusters?ckpt={ckpt}" if name == "conceptlens" else ""
                        ctx, *_, cold = cold_load(browser, u + path)
                        ctx.close()
                        first[name] = cold["cold_s"]
                        print(
                            f"{n:>9,} {name} first load after the server started: {json.dumps(cold)}",
                            flush=True,
                        )
                for i in range(args.repeat):
                    if url:
                        cl.append(run_conceptlens(browser, url, ckpt))
                        print(f"{n:>9,} ConceptLens run {i + 1}: {json.dumps(cl[-1])}", flush=True)
                    if lurl:
                        al.append(run_alone(browser, lurl))
                        print(f"{n:>9,} view alone  run {i + 1}: {json.dumps(al[-1])}", flush=True)
                    if aurl:
                        at.append(run_atlas(browser, aurl))
                        print(f"{n:>9,} Atlas       run {i + 1}: {json.dumps(at[-1])}", flush=True)
            results[n] = {"conceptlens": cl, "atlas": at, "view_alone": al, "first": first}
        browser.close()

    print("\n| points | measure | ConceptLens | Embedding Atlas 0.21 | ratio |")
    print("|---|---|---|---|---|")
    for n, r in results.items():
        for key, name, unit in (
            ("cold_s", "cold: navigate -> drawn (screencast)", "s"),
            ("cold_polled_s", "cold: navigate -> drawn (polled screenshots)", "s"),
            ("zoom_s", "one wheel step -> view updated", "s"),
            ("pan_zoom_bytes", "bytes for 5 wheel steps and a drag", "B"),
            ("hover_first_s", "hover -> caption shown, the view's first", "s"),
            ("hover_s", "hover -> caption shown (median of 5 more)", "s"),
            ("cold_bytes", "bytes of the cold load", "B"),
            ("select_view_ms", "box selection -> shown (in the view)", "ms"),
            ("select_rerun_bytes", "bytes of the selection's rerun", "B"),
        ):
            a, b = median(r["conceptlens"], key), median(r["atlas"], key)
            ratio = f"{a / b:.2f}x" if a is not None and b else "—"

            def fmt(v, unit=unit):
                if v is None:
                    return "—"
                return f"{v:,.0f} B" if unit == "B" else f"{v:,.3g} {unit}"

            print(f"| {n:,} | {name} | {fmt(a)} | {fmt(b)} | {ratio} |")
        f = r.get("first", {})
        if f.get("conceptlens"):
            a, b = f["conceptlens"], f.get("atlas")
            ratio = f"{a / b:.2f}x" if b else "—"
            print(f"| {n:,} | first load after the server started | {a:,.3g} s | {fmt(b, 's')} | {ratio} |")
        if r.get("view_alone"):
            a, b = median(r["view_alone"], "cold_s"), median(r["atlas"], "cold_s")
            ratio = f"{a / b:.2f}x" if b else "—"
            print(f"| {n:,} | cold: a page with the view alone | {a:,.3g} s | {fmt(b, 's')} | {ratio} |")
    if args.json:
        Path(args.json).write_text(json.dumps({str(k): v for k, v in results.items()}, indent=1))


if __name__ == "__main__":
    main()
