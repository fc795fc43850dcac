"""HTTP caching and compression of what Streamlit serves without them (issue 25, item 3).

`serve.py` is the dashboard's entry (`make run`): app.py served by `st.App` with this
middleware in front of Streamlit's routes. Streamlit's own choices, measured on a cold load
of the demo's Clusters page (docs/deploy.md):

- `/static/` (9.5 MB of JavaScript and CSS) is sent uncompressed, on purpose: its server
  would gzip the bundles again on every request. Here each file is compressed once per
  process and kept (`MAX_GZIP_CACHE` bytes at most), so a browser that accepts gzip
  downloads about a third. Streamlit's `Cache-Control: immutable` stays.
- `/media/` (thumbnails drawn by `st.image`) has no `Cache-Control`. Its names are hashes
  of the content (Streamlit's `_calculate_file_id`), so it gets `immutable`.
- `/component/` files (the projection view's bundle, the thumbnail routes) are sent with a
  bare `Cache-Control: public` and no validator: a second visit fetched them again. They get
  an `ETag` (a hash of the bytes), and a request naming it is answered `304` without a body.

Only responses to GET with status 200 are touched; everything else, the websocket
included, passes through unchanged. No request can make the server compress more than the
files Streamlit itself serves under `/static/`.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import threading
import time
from collections import OrderedDict
from pathlib import Path

MAX_GZIP_CACHE = 64 * 1024 * 1024  # bytes of compressed static files kept per process
MIN_GZIP = 1024  # smaller files are sent as they are
COMPRESSIBLE = ("javascript", "css", "json", "html", "svg", "text/", "wasm", "font/ttf", "font/otf")
IMMUTABLE = "public, max-age=31536000, immutable"


class GzipCache:
    """Compressed `/static/` files by request path, each kept with a hash of the bytes it was
    made from (a changed file is compressed again), at most `max_bytes` of them (least
    recently used dropped). Shared by the event loop and the warm-up thread."""

    def __init__(self, max_bytes: int = MAX_GZIP_CACHE):
        self.max_bytes = max_bytes
        self._gz: OrderedDict[str, tuple[bytes, bytes]] = OrderedDict()  # path -> (etag, gzip bytes)
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, path: str, body: bytes) -> bytes:
        """`body` (the file served at `path`) compressed, from the cache when it holds it."""
        etag = hashlib.sha1(body).digest()
        with self._lock:
            hit = self._gz.get(path)
            if hit is not None and hit[0] == etag:
                self._gz.move_to_end(path)
                return hit[1]
        gz = gzip.compress(body, compresslevel=6, mtime=0)
        with self._lock:
            old = self._gz.pop(path, None)
            if old is not None:
                self._bytes -= len(old[1])
            self._gz[path] = (etag, gz)
            self._bytes += len(gz)
            while self._bytes > self.max_bytes and self._gz:
                _, (_, dropped) = self._gz.popitem(last=False)
                self._bytes -= len(dropped)
        return gz

    def precompress(self, folder: Path, base: str = "") -> int:
        """Compress every JavaScript and CSS file of `folder` (Streamlit's static folder, served
        at `base` + its path below the folder) of at least MIN_GZIP bytes; returns how many."""
        done = 0
        for path in sorted(folder.rglob("*")):
            if path.suffix in (".js", ".css") and path.is_file() and path.stat().st_size >= MIN_GZIP:
                self.get(f"{base}/{path.relative_to(folder).as_posix()}", path.read_bytes())
                done += 1
        return done


STATIC_GZIP = GzipCache()


def warmup_log() -> logging.Logger:
    """The warm-up's logger: to stderr beside Streamlit's own lines, at INFO (Python's
    logging, not Streamlit's internal `streamlit.logger`)."""
    log = logging.getLogger("conceptlens.serving")
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d %(message)s", "%Y-%m-%d %H:%M:%S"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


def precompress_static() -> str:
    """The warm-up's part (serve.py): Streamlit's bundles compressed before a browser asks for
    them. Compressed on request, the 9.5 MB of a first visit to the Clusters page (3 MB of
    gzip) held the event loop, the page's messages included, for about 0.25 s."""
    import streamlit  # local: this module's only use of Streamlit, at serve.py's start

    base = streamlit.get_option("server.baseUrlPath").strip("/")
    t = time.perf_counter()
    n = STATIC_GZIP.precompress(Path(streamlit.__file__).parent / "static", f"/{base}" if base else "")
    return f"compressed {n} static files in {time.perf_counter() - t:.1f} s"


def _kind(path: str, base: str = "") -> str | None:
    if base and path.startswith(base):
        path = path[len(base) :]
    if path.startswith("/static/"):
        return "static"
    if path.startswith("/media/"):
        return "media"
    if path.startswith("/component/"):
        return "component"
    return None


def _header(headers: list, name: bytes) -> bytes | None:
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def _without(headers: list, *names: bytes) -> list:
    return [(k, v) for k, v in headers if k.lower() not in names]


class CachingMiddleware:
    """ASGI middleware: gzip `/static/` once per file, `immutable` for `/media/`, an ETag
    (and `304`) for `/component/` files. `base`: the server's base URL path, if any."""

    def __init__(self, app, base: str = "", max_cache: int | None = None):
        self.app = app
        self.base = "/" + base.strip("/") if base.strip("/") else ""
        # The process's cache (filled ahead by the warm-up, `precompress_static`), or, with
        # `max_cache`, one of its own.
        self.cache = STATIC_GZIP if max_cache is None else GzipCache(max_cache)

    async def __call__(self, scope, receive, send):
        kind = _kind(scope.get("path", ""), self.base) if scope["type"] == "http" else None
        if kind is None or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return
        req = dict(scope.get("headers") or [])
        if kind == "media":
            await self.app(scope, receive, self._media_send(send))
            return
        start, body = await self._collect(scope, receive)
        if start is None:  # streamed or not a plain 200: pass what came as it came
            return await self._replay(send, start, body)
        headers = list(start.get("headers", []))
        if kind == "component":
            etag = b'"' + hashlib.sha1(body).hexdigest().encode() + b'"'
            headers = _without(headers, b"etag", b"cache-control") + [
                (b"etag", etag),
                (b"cache-control", b"public, no-cache"),
            ]
            if req.get(b"if-none-match") == etag:
                headers = _without(headers, b"content-length", b"content-type")
                await send({"type": "http.response.start", "status": 304, "headers": headers})
                await send({"type": "http.response.body", "body": b""})
                return
            return await self._replay(send, {**start, "headers": _without(headers, b"content-length")}, body)
        # static
        ctype = (_header(headers, b"content-type") or b"").decode("latin-1")
        accepts = b"gzip" in (req.get(b"accept-encoding") or b"")
        if (
            not accepts
            or len(body) < MIN_GZIP
            or _header(headers, b"content-encoding")
            or not any(c in ctype for c in COMPRESSIBLE)
        ):
            return await self._replay(send, start, body)
        gz = self.cache.get(scope["path"], body)
        headers = _without(headers, b"content-length", b"vary") + [
            (b"content-encoding", b"gzip"),
            (b"vary", b"Accept-Encoding"),
        ]
        await self._replay(send, {**start, "headers": headers}, gz)

    def _media_send(self, send):
        async def wrapped(message):
            if message["type"] == "http.response.start" and message.get("status") == 200:
                headers = _without(list(message.get("headers", [])), b"cache-control")
                message = {**message, "headers": headers + [(b"cache-control", IMMUTABLE.encode())]}
            await send(message)

        return wrapped

    async def _collect(self, scope, receive):
        """Run the app and keep its response: (start message, body), or (None, messages) when
        it is not a whole 200 response (kept to be replayed untouched)."""
        messages: list[dict] = []

        async def keep(message):
            messages.append(message)

        await self.app(scope, receive, keep)
        if not messages or messages[0]["type"] != "http.response.start" or messages[0].get("status") != 200:
            return None, messages
        body = b"".join(m.get("body", b"") for m in messages[1:] if m["type"] == "http.response.body")
        return messages[0], body

    async def _replay(self, send, start, body):
        if start is None:  # `body` is the list of messages, sent as they came
            for m in body:
                await send(m)
            return
        headers = list(start.get("headers", []))
        if _header(headers, b"content-length") is None:
            headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})


# ---- the projection's points, one immutable file per data version --------------------------
POINTS_ROUTE = "conceptlens/points"
MAX_POINTS_BYTES = 512 * 1024 * 1024  # blobs kept per process (a 1,000,000-point view: ~10 MB)


class PointsStore:
    """The projection view's points (components/projection.py `pack`), kept by the hash of
    their bytes and served at `/conceptlens/points/<hash>` with `Cache-Control: immutable`:
    a browser downloads one data version once, in every session that shows it. Only what a
    page put here is served (a name is a SHA-256 of the bytes, not a path), and the store
    keeps at most `max_bytes` (least recently used dropped; a page puts its points again
    each time it draws them)."""

    def __init__(self, max_bytes: int = MAX_POINTS_BYTES):
        self.max_bytes = max_bytes
        self._blobs: OrderedDict[str, tuple[bytes, bytes]] = OrderedDict()  # key -> (raw, gzip)
        self._bytes = 0
        self.served = False  # True once serve.py mounted the route

    def put(self, blob: bytes, key: str | None = None) -> str:
        key = key or hashlib.sha256(blob).hexdigest()
        if key in self._blobs:
            self._blobs.move_to_end(key)
            return key
        gz = gzip.compress(blob, compresslevel=1, mtime=0)
        self._blobs[key] = (blob, gz)
        self._bytes += len(blob) + len(gz)
        while self._bytes > self.max_bytes and len(self._blobs) > 1:
            _, (old, oldgz) = self._blobs.popitem(last=False)
            self._bytes -= len(old) + len(oldgz)
        return key

    def get(self, key: str) -> tuple[bytes, bytes] | None:
        return self._blobs.get(key)

    def route(self):
        """The Starlette route serving the stored points (serve.py mounts it)."""
        from starlette.responses import Response  # local: loaded when serve.py mounts the route
        from starlette.routing import Route  # local: loaded when serve.py mounts the route

        async def points(request):
            hit = self.get(request.path_params["key"])
            if hit is None:
                return Response(b"unknown points", status_code=404, media_type="text/plain")
            headers = {"Cache-Control": IMMUTABLE, "Vary": "Accept-Encoding"}
            raw, gz = hit
            if "gzip" in request.headers.get("accept-encoding", "") and len(gz) < len(raw):
                headers["Content-Encoding"] = "gzip"
                return Response(gz, media_type="application/octet-stream", headers=headers)
            return Response(raw, media_type="application/octet-stream", headers=headers)

        self.served = True
        return Route(f"/{POINTS_ROUTE}/{{key:str}}", points, methods=["GET"])


POINTS = PointsStore()


# ---- hover captions of a view too large to send them, by the block --------------------------
CAPTIONS_ROUTE = "conceptlens/captions"
MAX_CAPTION_KEYS = 16  # views whose captions are served (most recently drawn)


class CaptionStore:
    """The hover captions of the projection views drawn with more points than their captions
    go with (components/projection.py `CaptionSource`), served at
    `/conceptlens/captions/<key>/<block>` with `Cache-Control: immutable` (a key is a hash of
    the workspace's fingerprint and the view's arguments). Only views a page drew are
    served (at most `MAX_CAPTION_KEYS`); a request makes at most one block of
    `CAPTION_BLOCK` lines, once (the source keeps the last ones), and a block number out of
    range is answered 404."""

    def __init__(self, max_keys: int = MAX_CAPTION_KEYS):
        self.max_keys = max_keys
        self._sources: OrderedDict[str, object] = OrderedDict()  # key -> function returning a CaptionSource
        self._lock = threading.Lock()

    def put(self, key: str, source) -> None:
        with self._lock:
            self._sources.pop(key, None)
            self._sources[key] = source
            while len(self._sources) > self.max_keys:
                self._sources.popitem(last=False)

    def lines(self, key: str, block: int) -> bytes | None:
        """The lines of `block` of the view `key` (None: no such view or block)."""
        with self._lock:
            source = self._sources.get(key)
        if source is None:
            return None
        src = source()
        if not 0 <= block < src.blocks():
            return None
        return src.block(block)

    def route(self):
        """The Starlette route serving the captions (serve.py mounts it)."""
        from starlette.concurrency import run_in_threadpool  # local: loaded when serve.py mounts the route
        from starlette.responses import Response  # local: loaded when serve.py mounts the route
        from starlette.routing import Route  # local: loaded when serve.py mounts the route

        async def captions(request):
            key, block = request.path_params["key"], request.path_params["block"]
            body = await run_in_threadpool(self.lines, key, block)
            if body is None:
                return Response(b"unknown captions", status_code=404, media_type="text/plain")
            headers = {"Cache-Control": IMMUTABLE, "Vary": "Accept-Encoding"}
            if "gzip" in request.headers.get("accept-encoding", ""):
                headers["Content-Encoding"] = "gzip"
                body = gzip.compress(body, compresslevel=1, mtime=0)
            return Response(body, media_type="text/plain; charset=utf-8", headers=headers)

        return Route(f"/{CAPTIONS_ROUTE}/{{key:str}}/{{block:int}}", captions, methods=["GET"])


CAPTIONS = CaptionStore()


# ---- warming up: the server's one-time work, done before its first visitor ---------------
READY_ROUTE = "conceptlens/ready"


class Warmup:
    """Work a server does once, on a thread started with it (serve.py's lifespan): its first
    visitor finds it done instead of waiting for it. `/conceptlens/ready` answers 503
    (`warming`) until it is finished and 200 (`ready`) after, for a deployment's readiness
    probe; the server serves pages meanwhile (a page asking for the same work waits for it
    rather than doing it again: `components.data._Checks` holds a lock). A failure is logged
    and the server stays up: the page that needs the work does it and shows the problem."""

    def __init__(self):
        self.done = threading.Event()
        self.seconds: float | None = None
        self.error: str | None = None
        self.thread: threading.Thread | None = None

    def start(self, work) -> None:
        if self.thread is not None:
            return
        self.thread = threading.Thread(target=self._run, args=(work,), name="conceptlens-warmup", daemon=True)
        self.thread.start()

    def _run(self, work) -> None:
        log = warmup_log()
        t = time.perf_counter()
        try:
            said = work()
        except Exception as e:  # the page that needs it does it again and says what is wrong
            self.error = f"{type(e).__name__}: {e}"
            log.warning("warm-up failed: %s", self.error)
        else:
            log.info("warm-up: %s in %.1f s", said, time.perf_counter() - t)
        finally:
            self.seconds = time.perf_counter() - t
            self.done.set()

    def route(self):
        """The Starlette route answering whether the warm-up is over."""
        from starlette.responses import Response  # local: loaded when serve.py mounts the route
        from starlette.routing import Route  # local: loaded when serve.py mounts the route

        async def ready(request):
            if self.done.is_set():
                return Response(b"ready", media_type="text/plain", headers={"Cache-Control": "no-store"})
            return Response(
                b"warming", status_code=503, media_type="text/plain", headers={"Cache-Control": "no-store"}
            )

        return Route(f"/{READY_ROUTE}", ready, methods=["GET"])


WARMUP = Warmup()
