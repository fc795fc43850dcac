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
from collections import OrderedDict

MAX_GZIP_CACHE = 64 * 1024 * 1024  # bytes of compressed static files kept per process
MIN_GZIP = 1024  # smaller files are sent as they are
COMPRESSIBLE = ("javascript", "css", "json", "html", "svg", "text/", "wasm", "font/ttf", "font/otf")
IMMUTABLE = "public, max-age=31536000, immutable"


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

    def __init__(self, app, base: str = "", max_cache: int = MAX_GZIP_CACHE):
        self.app = app
        self.base = "/" + base.strip("/") if base.strip("/") else ""
        self.max_cache = max_cache
        self._gz: OrderedDict[str, tuple[bytes, bytes]] = OrderedDict()  # path -> (etag, gzip bytes)
        self._gz_bytes = 0

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
        gz = self._gzip(scope["path"], body)
        headers = _without(headers, b"content-length", b"vary") + [
            (b"content-encoding", b"gzip"),
            (b"vary", b"Accept-Encoding"),
        ]
        await self._replay(send, {**start, "headers": headers}, gz)

    def _gzip(self, path: str, body: bytes) -> bytes:
        etag = hashlib.sha1(body).digest()
        hit = self._gz.get(path)
        if hit is not None and hit[0] == etag:
            self._gz.move_to_end(path)
            return hit[1]
        gz = gzip.compress(body, compresslevel=6, mtime=0)
        if hit is not None:
            self._gz_bytes -= len(hit[1])
        self._gz[path] = (etag, gz)
        self._gz_bytes += len(gz)
        while self._gz_bytes > self.max_cache and self._gz:
            _, (_, old) = self._gz.popitem(last=False)
            self._gz_bytes -= len(old)
        return gz

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
        from starlette.responses import Response
        from starlette.routing import Route

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
