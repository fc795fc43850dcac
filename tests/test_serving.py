"""The server's caching and compression (serve.py, components/serving.py; issue 25 item 3):
measured on the real server that `make run` starts, and the middleware's own cache on a
small ASGI app."""

import asyncio
import concurrent.futures
import gzip
import re
import urllib.error
import urllib.request

import pytest

from components.serving import CachingMiddleware
from harness.browser import open_page, projection, serve


def _get(url: str, headers: dict | None = None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, r.read()  # headers: case-insensitive
    except urllib.error.HTTPError as e:  # 304 comes as an error in urllib
        return e.code, e.headers, e.read()


@pytest.fixture(scope="module")
def demo_url(demo_ws):
    with serve(demo_ws) as url:
        yield url


def test_static_bundles_are_gzipped_and_inflate_to_the_same_bytes(demo_url):
    _, _, html = _get(demo_url + "/")
    scripts = re.findall(r'(?:src|href)="\.?/?(static/[^"]+\.(?:js|css))"', html.decode())
    assert scripts, "no /static/ bundle named in the root document"
    raw_total = gz_total = 0
    for path in scripts[:4]:
        status, plain_h, plain = _get(f"{demo_url}/{path}")
        assert status == 200 and "Content-Encoding" not in plain_h  # a client without gzip gets bytes
        status, h, body = _get(f"{demo_url}/{path}", {"Accept-Encoding": "gzip"})
        assert status == 200
        if len(plain) >= 1024:
            assert h.get("Content-Encoding") == "gzip", (path, h)
            assert "Accept-Encoding" in h.get("Vary", "")
            assert int(h["Content-Length"]) == len(body)
            assert gzip.decompress(body) == plain, path
            assert "immutable" in h.get("Cache-Control", "")  # Streamlit's own caching is kept
            raw_total, gz_total = raw_total + len(plain), gz_total + len(body)
            # The second request is served the same compressed bytes (from the middleware's cache).
            assert _get(f"{demo_url}/{path}", {"Accept-Encoding": "gzip"})[2] == body
    assert gz_total < 0.5 * raw_total, (gz_total, raw_total)


@pytest.mark.browser
def test_thumbnails_are_immutable_and_component_files_revalidate_by_etag(browser, demo_url):
    page = open_page(browser, f"{demo_url}/clusters", "serving_clusters")
    seen = []
    page.on("response", lambda r: seen.append((r.url, r.status, r.headers)))
    page.reload()
    projection(page)  # the view's bundle has been fetched and has drawn
    page.wait_for_timeout(1000)
    media = [(u, h) for u, s, h in seen if "/media/" in u and s == 200]
    assert media, "the Clusters page showed no thumbnail"
    for u, h in media:
        assert "immutable" in h.get("cache-control", ""), (u, h)
    bundle = [u for u, s, h in seen if "/component/" in u and u.split("?")[0].endswith("bundle.js")]
    assert bundle, [u for u, _, _ in seen if "/component/" in u]
    status, h, body = _get(bundle[0])
    assert status == 200 and h.get("ETag") and body
    status, h304, again = _get(bundle[0], {"If-None-Match": h["ETag"]})
    assert status == 304 and again == b"" and h304.get("ETag") == h["ETag"]
    status, _, body2 = _get(bundle[0], {"If-None-Match": '"not-this-one"'})
    assert status == 200 and body2 == body
    page.close()


def _static_app(files: dict):
    """An ASGI app serving `files` (path -> bytes) as Streamlit serves /static/."""

    async def app(scope, receive, send):
        body = files[scope["path"]]
        headers = [(b"content-type", b"text/javascript"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def _call(app, path: str) -> tuple[dict, bytes]:
    out = []

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(m):
        out.append(m)

    scope = {"type": "http", "method": "GET", "path": path, "headers": [(b"accept-encoding", b"gzip, br")]}
    # In a thread of its own: Playwright's sync API may hold this thread's event loop.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, app(scope, receive, send)).result()
    return dict(out[0]["headers"]), b"".join(m.get("body", b"") for m in out[1:])


def test_the_gzip_cache_is_bounded_and_follows_a_changed_file():
    noise = bytes(range(256)) * 40
    files = {f"/static/{i}.js": (f"var a{i} = {i};" * 400).encode() + noise for i in range(6)}
    mw = CachingMiddleware(_static_app(files), max_cache=3 * len(gzip.compress(files["/static/0.js"])))
    for path in files:
        headers, body = _call(mw, path)
        assert headers[b"content-encoding"] == b"gzip" and gzip.decompress(body) == files[path]
        assert mw.cache._bytes <= mw.cache.max_bytes  # a bounded amount of memory, whatever is asked
    assert len(mw.cache._gz) < len(files)
    # A file that changes under the same path (a new Streamlit) is compressed again, not the stale copy.
    files["/static/5.js"] = b"var changed = 1;" * 300
    _, body = _call(mw, "/static/5.js")
    assert gzip.decompress(body) == files["/static/5.js"]


def test_the_warm_up_compresses_the_bundles_under_the_paths_they_are_asked_by(tmp_path, monkeypatch):
    """`GzipCache.precompress` (serve.py's warm-up) keys each file by the path a browser asks
    for, so the middleware serves it without compressing it again; tiny files are left."""
    import components.serving as S

    files = {
        "/static/js/main.js": b"var a = 1;" * 300,
        "/static/css/main.css": b"a{b:c}" * 400,
        "/static/js/tiny.js": b"x",
    }
    for path, body in files.items():
        (tmp_path / path[1:]).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path[1:]).write_bytes(body)
    cache = S.GzipCache()
    assert cache.precompress(tmp_path) == 2
    mw = CachingMiddleware(_static_app(files))
    mw.cache = cache
    monkeypatch.setattr(S.gzip, "compress", lambda *a, **k: pytest.fail("compressed again on request"))
    for path in ("/static/js/main.js", "/static/css/main.css"):
        headers, body = _call(mw, path)
        assert headers[b"content-encoding"] == b"gzip" and gzip.decompress(body) == files[path]
    monkeypatch.undo()
    behind = S.GzipCache()  # a server below a base URL path
    behind.precompress(tmp_path, "/lens")
    assert sorted(behind._gz) == ["/lens/static/css/main.css", "/lens/static/js/main.js"]


@pytest.mark.browser
def test_the_points_come_over_http_once_per_data_version(browser, demo_url):
    """The projection's points are an immutable file: a second tab in the same browser draws
    them from its cache, and the view still draws every point (the box and lasso tests of
    tests/test_browser_projection.py check the ids those points carry)."""
    context = browser.new_context()

    def visit():
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable")
        got = []
        cdp.on("Network.responseReceived", lambda e: got.append(e["response"]))
        cdp.on("Network.requestServedFromCache", lambda e: got.append({"url": "cache:" + e["requestId"]}))
        page.goto(f"{demo_url}/clusters")
        _, frame = projection(page)
        n = frame.evaluate("() => document.querySelectorAll('canvas').length")
        page.close()
        return [r for r in got if "/conceptlens/points/" in r.get("url", "")], n

    first, canvases = visit()
    assert canvases >= 1
    assert len(first) == 1, [r["url"] for r in first]
    r = first[0]
    assert r["status"] == 200 and "immutable" in r["headers"].get("cache-control", "")
    again, _ = visit()
    assert again and all(x.get("fromDiskCache") or x.get("fromMemoryCache") for x in again), again
    context.close()
    key = r["url"].rsplit("/", 1)[1]
    status, h, body = _get(r["url"])
    assert status == 200 and h["Content-Type"] == "application/octet-stream"
    for bad in ("0" * 64, key[:-1], "..%2F..%2Fapp.py", "%2e%2e"):
        assert _get(f"{demo_url}/conceptlens/points/{bad}")[0] in (400, 404), bad


def test_packed_points_read_back_section_by_section():
    """`pack` as the view's `unpack` reads it (components/projection_frontend/src/index.js)."""
    import json
    import struct

    import numpy as np
    import pandas as pd

    from components.projection import HEADER, encode, pack

    rng = np.random.default_rng(0)
    pts = pd.DataFrame(
        {
            "x": rng.normal(size=37),
            "y": rng.normal(size=37),
            "image_id": [f"im{i}" for i in range(37)],
            "cluster": rng.integers(0, 4, 37),
            "label_name": rng.choice(["cat", "dog", "ünï"], 37),
        }
    )
    enc = encode(pts, "cluster")
    blob = pack(enc.args)
    (length,) = struct.unpack_from("<I", blob)
    head = json.loads(blob[4 : 4 + length])
    assert head["n"] == 37 and length <= HEADER - 4
    for name in ("xy", "codes", "text"):
        off, size = head["sections"][name]
        assert off % 4 == 0 and blob[off : off + size] == enc.args[name], name
    off, size = head["sections"]["xy"]
    xy = np.frombuffer(blob[off : off + size], "<f4").reshape(-1, 2)
    order = pd.Series(range(37), index=enc.ids).loc[pts["image_id"]].to_numpy()
    np.testing.assert_array_equal(xy[order], pts[["x", "y"]].to_numpy("float32"))


def test_the_server_warms_up_on_start_and_says_when_it_is_ready(demo_url, demo_ws):
    """serve.py starts the warm-up (the served workspace's check) with the server;
    `/conceptlens/ready` answers 200 once it is over, and the log says what it did."""
    import time

    from harness.browser import server_log

    deadline = time.time() + 120
    while (status := _get(demo_url + "/conceptlens/ready")[0]) != 200 and time.time() < deadline:
        assert status == 503
        time.sleep(0.2)
    assert status == 200
    assert re.search(
        rf"warm-up: compressed \d+ static files in [\d.]+ s; "
        rf"checked \d+ tables of {re.escape(str(demo_ws))} \(0 problems\)",
        server_log(demo_url),
    )
