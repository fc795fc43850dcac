"""A cold page in headless Chromium: seconds from navigation to the first chart drawn, and
the bytes that reach the browser, by kind.

Each repeat starts a fresh Streamlit server (harness/browser.py `serve`: a new process, so
every cache and first import is cold) on a copy of the workspace and opens `--page` in a
new browser profile. Bytes are the Chrome DevTools Protocol's encoded (on the wire) sizes:
HTTP responses by kind (Streamlit's /static/ bundles, /media/ files such as thumbnails,
the projection's points file served by serve.py, the rest) and the websocket's frames (the
page's elements). `gzip` is what the same /static/ and /media/ responses weigh gzipped
(level 6): serve.py sends /static/ so (`streamlit run app.py` does not). Then the same
page is opened again in the same profile: what the browser's cache saves (/static/ is
`Cache-Control: immutable`), and in a fresh profile on the warm server (a later visitor's
first load). `--floor`: after each repeat, bench/floor (a Streamlit page with one Plotly
chart, nothing of ConceptLens) in a fresh profile on its warm server, the least any page
with a Plotly chart costs here. The machine may be shared: wall seconds, the server's CPU
seconds and the load average are printed.

    nice -n 10 .venv/bin/python bench/cold_page.py [--workspace data/demo] [--page clusters] \\
        [--repeat 2] [--floor] [--out cold.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from harness.browser import CHROMIUM, CHROMIUM_ARGS, serve  # noqa: E402

CHART = '[data-testid="stPlotlyChart"] .main-svg, [data-testid="stMain"] canvas'


def _copy(src: Path, dst: Path) -> Path:
    """The workspace hard-linked into `dst` (never written: the server only reads)."""

    def link(a, b):
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    shutil.copytree(src, dst, copy_function=link)
    return dst


def _server_cpu(port: int) -> float:
    """CPU seconds of the streamlit process listening on `port` (and its threads)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"streamlit" in b" ".join(cmd) and str(port).encode() in cmd:
                f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            continue
    return float("nan")


def visit(context, url: str) -> dict:
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    resp, done, ws = {}, {}, [0]
    cdp.on("Network.responseReceived", lambda e: resp.__setitem__(e["requestId"], e["response"]))
    cdp.on("Network.loadingFinished", lambda e: done.__setitem__(e["requestId"], e["encodedDataLength"]))
    # Binary frames come base64-encoded: 3 bytes per 4 characters.
    cdp.on(
        "Network.webSocketFrameReceived",
        lambda e: ws.__setitem__(0, ws[0] + len(e["response"]["payloadData"]) * 3 // 4),
    )
    t = time.perf_counter()
    page.goto(url)
    page.locator(CHART).first.wait_for(timeout=300_000)
    drawn = time.perf_counter() - t
    page.wait_for_timeout(1500)  # late thumbnails and frames
    kinds = {"static": 0, "media": 0, "points": 0, "other": 0}
    gz = {"static": 0, "media": 0}
    cached = 0
    for rid, n in done.items():
        r = resp.get(rid)
        if r is None:
            continue
        path = r["url"].split("?", 1)[0]
        kind = (
            "static"
            if "/static/" in path
            else "media"
            if "/media/" in path
            else "points"
            if "/conceptlens/points/" in path
            else "other"
        )
        kinds[kind] += n
        if r.get("fromDiskCache") or r.get("fromMemoryCache"):
            cached += 1
        if kind in gz and n > 0:
            with urllib.request.urlopen(r["url"]) as f:
                gz[kind] += len(gzip.compress(f.read(), 6))
    page.close()
    return {
        "drawn_s": drawn,
        "bytes": {**kinds, "websocket": ws[0]},
        "gzip": gz,
        "responses": len(done),
        "from_cache": cached,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", default=str(ROOT / "data" / "demo"))
    ap.add_argument("--page", default="clusters")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--out")
    ap.add_argument(
        "--floor",
        action="store_true",
        help="also time bench/floor (one Plotly chart, nothing of ConceptLens), interleaved",
    )
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    runs = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        ws = _copy(Path(args.workspace), Path(tmp) / "ws")
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        for i in range(args.repeat):
            load = os.getloadavg()[0]
            with serve(ws) as url:
                port = int(url.rsplit(":", 1)[1])
                cpu0 = _server_cpu(port)
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                cold = visit(context, f"{url}/{args.page}")
                cpu = _server_cpu(port) - cpu0
                again = visit(context, f"{url}/{args.page}")
                context.close()
                # A fresh browser profile on the warm server: the first visitor's caches are
                # the server's, not this browser's.
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                fresh = visit(context, f"{url}/{args.page}")
                context.close()
            runs.append({"cold": cold, "again": again, "fresh": fresh, "server_cpu_s": cpu, "load": load})
            if args.floor:
                with serve(ws, script=ROOT / "bench" / "floor" / "serve.py") as url:
                    context = browser.new_context(viewport={"width": 1400, "height": 1000})
                    visit(context, url)  # the server's first load
                    context.close()
                    context = browser.new_context(viewport={"width": 1400, "height": 1000})
                    runs[-1]["floor"] = visit(context, url)
                    context.close()
                floor = runs[-1]["floor"]["drawn_s"]
                print(f"  floor (one Plotly chart, fresh profile, warm server): {floor:.1f} s")
            mb = {k: round(v / 1e6, 3) for k, v in cold["bytes"].items()}
            gz = {k: round(v / 1e6, 3) for k, v in cold["gzip"].items()}
            mb2 = {k: round(v / 1e6, 3) for k, v in again["bytes"].items()}
            print(
                f"run {i + 1}: cold {cold['drawn_s']:.1f} s (server CPU {cpu:.1f} s, load {load:.1f}); "
                f"MB {mb}; gzipped {gz}; again {again['drawn_s']:.1f} s, "
                f"MB {mb2}; a fresh profile on the warm server {fresh['drawn_s']:.1f} s",
                flush=True,
            )
        browser.close()
    med = statistics.median(r["cold"]["drawn_s"] for r in runs)
    total = statistics.median(sum(r["cold"]["bytes"].values()) for r in runs)
    print(f"median cold navigate -> first chart: {med:.1f} s; cold bytes {total / 1e6:.2f} MB")
    for what in ("fresh", "floor"):
        times = sorted(r[what]["drawn_s"] for r in runs if what in r)
        if times:
            print(f"median {what}: {statistics.median(times):.2f} s (range {times[0]:.2f}-{times[-1]:.2f})")
    if args.out:
        Path(args.out).write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
