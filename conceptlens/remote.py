"""A workspace served from a URL (HTTP(S), or object storage through fsspec), read-only.

DuckDB reads its Parquet files through fsspec (`register_filesystem`): no DuckDB
extension has to be downloaded. Partitioned tables are found by globbing, so an HTTP
server must list its folders (nginx's `autoindex`, Caddy's `file_server browse`, Apache's
`Options +Indexes`) and answer Range requests, which DuckDB uses to read a Parquet file's
footer and only the columns a query needs (Python's `http.server` does not: it is
refused, naming the cause). `s3://`, `gs://`, `az://` work through the matching fsspec
package (s3fs, gcsfs, adlfs).

Reading fails closed: a path is percent-decoded (repeatedly) before it is checked to stay
inside the workspace, folder listings yield only the folder's own children, and a redirect
to another scheme, host or port is refused (docs/deploy.md, section 4).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import re
import threading
import time
from urllib.parse import quote, unquote, urljoin, urlsplit

from . import schema
from .cache import cached
from .workspace import Workspace, WorkspaceError, parse_partition

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# How long a folder listing (and so the fingerprint) is trusted before it is read again.
LISTING_TTL = 60.0
# Why a remote workspace cannot be read when its server ignores `Range: bytes=a-b`.
NO_RANGES = "this server does not answer Range requests; see docs/deploy.md"
# fsspec's words for a whole file answered to a Range request (HTTPFile._fetch_range): public
# because conceptlens.validate's `validate_remote` names the cause when a read fails with them.
FSSPEC_NO_RANGES = "doesn't appear to support range requests"


class RedirectRefused(Exception):
    """A server answered with a redirect to another scheme, host or port."""


def _origin(url: str) -> tuple[str, str, int | None]:
    u = urlsplit(url)
    port = u.port or {"http": 80, "https": 443}.get(u.scheme.lower())
    return u.scheme.lower(), (u.hostname or "").lower(), port


async def _refuse_foreign_redirect(session, ctx, params) -> None:
    """aiohttp's redirect hook: follow a redirect only to the same scheme, host and port."""
    source = str(params.url)
    target = urljoin(source, params.response.headers.get("Location", ""))
    if _origin(target) != _origin(source):
        raise RedirectRefused(
            f"{source} redirects to {target}: a redirect to another host or port is refused "
            "(serve the workspace from the URL it is opened with; see docs/deploy.md)"
        )


async def _client(**kwargs):
    import aiohttp

    trace = aiohttp.TraceConfig()
    trace.on_request_redirect.append(_refuse_foreign_redirect)
    return aiohttp.ClientSession(trace_configs=[trace], **kwargs)


def _decoded(text: str) -> str:
    """`text` percent-decoded until nothing changes (`%252e` is `%2e` is `.`)."""
    for _ in range(8):
        once = unquote(text)
        if once == text:
            return text
        text = once
    raise WorkspaceError(f"path {text!r} is percent-encoded too many times")


def _child(folder: str, name: str) -> str | None:
    """A listing's link `name` decoded, if it names a child of `folder` (else None: a link
    to a parent, to itself, deeper down, elsewhere, or with a backslash)."""
    try:
        name, base = _decoded(name), _decoded(folder).rstrip("/") + "/"
    except WorkspaceError:
        return None
    rest = name[len(base) :] if name.startswith(base) else ""
    leaf = rest[:-1] if rest.endswith("/") else rest
    if leaf in ("", ".", "..") or "/" in leaf or "\\" in leaf:
        return None
    return name


def is_url(root) -> bool:
    return isinstance(root, str) and bool(_URL.match(root))


# One open file system client per scheme for the process: not a cache of a computed value
# (what a client holds, its sessions and listings, belongs to that one object, and an LRU
# could drop one while DuckDB still reads through it). fsspec's own instance cache keeps
# one per thread, and Streamlit runs every rerun on a new thread.
_FS: dict[str, object] = {}
_FS_LOCK = threading.Lock()


def filesystem(url: str):
    """The fsspec file system for `url`'s scheme (one per scheme and process)."""
    scheme = urlsplit(url).scheme.lower()
    with _FS_LOCK:
        if scheme not in _FS:
            if scheme in ("http", "https"):
                _FS[scheme] = _http_filesystem()
            else:
                import fsspec

                try:
                    _FS[scheme] = fsspec.filesystem(scheme)
                except (ImportError, ValueError) as e:
                    raise WorkspaceError(f"{url}: cannot read {scheme}:// URLs ({e})") from None
        return _FS[scheme]


def _http_filesystem():
    try:
        from fsspec.implementations.http import HTTPFileSystem
    except ImportError as e:  # aiohttp missing
        raise WorkspaceError(f"reading a workspace over HTTP needs fsspec and aiohttp ({e})") from None

    class ListingHTTPFileSystem(HTTPFileSystem):
        """HTTPFileSystem as DuckDB needs it: folder listings give `checkpoint_id=x`,
        not the percent-encoded `checkpoint_id%3Dx` of their links (hive partitions are
        read from the names), and only the folder's own children (a link to `..`, encoded
        or not, is dropped: a glob's `*` would match it); `modified` answers (listings
        carry no times); redirects elsewhere are refused (`_client`)."""

        async def _ls_real(self, url, detail=True, **kwargs):
            out = await super()._ls_real(url, detail=True, **kwargs)
            kept = [{**e, "name": n} for e in out if (n := _child(url, e["name"])) is not None]
            return kept if detail else sorted(e["name"] for e in kept)

        def modified(self, path):
            return _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)

    return ListingHTTPFileSystem(
        use_listings_cache=True,
        listings_expiry_time=LISTING_TTL,
        skip_instance_cache=True,
        get_client=_client,
    )


def _check_rel(root: str, rel: str) -> str:
    """`rel` as a path inside the workspace (the same rules as `workspace.inside`), checked
    on its percent-decoded text (a server decodes `%2e%2e` to `..`) and quoted again, so
    the URL asks for exactly the path checked."""
    if not isinstance(rel, str) or not rel:
        raise WorkspaceError(f"empty path in workspace {root}")
    text = _decoded(rel)
    if text.startswith(("/", "\\")) or _URL.match(text) or "\\" in text:
        raise WorkspaceError(f"path {rel!r} must be relative to the workspace")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts or not parts:
        raise WorkspaceError(f"path {rel!r} leaves the workspace {root}")
    # `*` and `[...]` stay: table globs are paths too.
    return quote("/".join(parts), safe="/=*[]")


class RemoteWorkspace:
    """The read side of `Workspace` for a URL: metadata, files, fingerprint, bytes."""

    META = Workspace.META

    def __init__(self, url: str):
        if not is_url(url):
            raise WorkspaceError(f"{url!r} is not a URL")
        self.root = url.rstrip("/")
        self.fs = filesystem(self.root)
        self._scheme = urlsplit(self.root).scheme

    def loc(self, rel: str) -> str:
        """The URL of `rel` (a path inside the workspace, or a glob)."""
        return f"{self.root}/{_check_rel(self.root, rel)}"

    @property
    def meta_path(self) -> str:
        return self.loc(self.META)

    def read_bytes(self, rel: str) -> bytes:
        url = self.loc(rel)
        try:
            return self.fs.cat_file(url)
        except FileNotFoundError:
            raise WorkspaceError(f"{url}: not found") from None
        except RedirectRefused as e:
            raise WorkspaceError(str(e)) from None
        except Exception as e:  # aiohttp and object stores raise their own types
            raise WorkspaceError(f"{url}: cannot be read ({type(e).__name__}: {e})") from None

    def meta(self) -> dict:
        raw = self.read_bytes(self.META)
        try:
            meta = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise WorkspaceError(f"{self.meta_path}: invalid JSON ({e})") from None
        if not isinstance(meta, dict):
            raise WorkspaceError(f"{self.meta_path}: must hold a JSON object")
        return meta

    def _url(self, path: str) -> str:
        # Object stores' globs drop the scheme; HTTP keeps whole URLs.
        return path if _URL.match(path) else f"{self._scheme}://{path}"

    def files(self, name: str) -> list[str]:
        """Every file of a table (URLs), from the server's listings."""
        t = schema.TABLES_BY_NAME[name]
        if not t.partitioned:
            url = self.loc(t.path)
            try:
                return [url] if self.fs.exists(url) else []
            except RedirectRefused:
                return [url]  # there, but refused: reading it names the redirect
            except Exception:
                return []
        try:
            return sorted(self._url(p) for p in self.fs.glob(self.loc(t.glob)))
        except FileNotFoundError:
            return []

    def has(self, name: str, **partition) -> bool:
        return bool(self.files(name))

    def partitions(self, name: str) -> list[dict]:
        """The partitions present, from the folder names in the listings (as `Workspace`)."""
        t = schema.TABLES_BY_NAME[name]
        base = self.loc(t.path) + "/"
        out = []
        for f in self.files(name):
            if not f.startswith(base):
                continue
            try:
                values = parse_partition(t, f[len(base) :].split("/")[:-1])
            except (ValueError, WorkspaceError):
                continue
            if values not in out:
                out.append(values)
        return out

    def table_path(self, name: str, **partition) -> str:
        t = schema.TABLES_BY_NAME[name]
        if not t.partitioned:
            return self.loc(t.path)
        parts = "/".join(f"{c}={partition[c]}" for c in t.partition)
        return self.loc(f"{t.path}/{parts}/part-0.parquet")

    def range_problem(self) -> str | None:
        """NO_RANGES (with the URL asked) when an HTTP server answers a Range request with
        the whole file: DuckDB could then read no Parquet footer."""
        if self._scheme.lower() not in ("http", "https"):
            return None  # object stores answer ranges
        try:
            head = self.fs.cat_file(self.meta_path, start=0, end=1)
        except Exception:
            return None  # workspace.json itself is reported unreadable
        return None if len(head) <= 1 else f"{self.meta_path}: {NO_RANGES}"

    def fingerprint(self) -> str:
        """workspace.json and the names of every table's files; re-read after LISTING_TTL.
        (Listings carry no sizes or times: a file replaced under the same name is seen when
        workspace.json or the file list changes, or after a restart.)"""
        return _fingerprint(self.root, int(time.monotonic() // LISTING_TTL))


# The time is part of the key as the number of LISTING_TTL periods since an arbitrary start:
# a fingerprint is read again in the next period (at most LISTING_TTL seconds after it was
# read), never kept longer.
@cached(reads=(), maxsize=64)
def _fingerprint(root: str, period: int) -> str:
    ws = RemoteWorkspace(root)
    h = hashlib.sha1()
    try:
        h.update(ws.read_bytes(ws.META))
    except WorkspaceError:
        h.update(b"no workspace.json")
    for t in schema.TABLES:
        for f in ws.files(t.name):
            h.update(f.encode() + b";")
    return h.hexdigest()[:16]


def workspace_at(root):
    """A `RemoteWorkspace` for a URL, else a `Workspace` (the read API both share)."""
    return RemoteWorkspace(root) if is_url(root) else Workspace(root)


def open_source(src):
    """What PIL can open for an image given as a local path or a URL."""
    if is_url(src):
        return io.BytesIO(filesystem(src).cat_file(src))
    return src
