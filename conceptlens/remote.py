"""A workspace served from a URL (HTTP(S), or object storage through fsspec), read-only.

DuckDB reads its Parquet files through fsspec (`register_filesystem`): no DuckDB
extension has to be downloaded. Partitioned tables are found by globbing, so an HTTP
server must list its folders (an index page per folder, as `python -m http.server`,
nginx's `autoindex` or Caddy's `file_server browse` give) and answer Range requests,
which DuckDB uses to read a Parquet file's footer and only the columns a query needs.
`s3://`, `gs://`, `az://` work through the matching fsspec package (s3fs, gcsfs, adlfs).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import re
import threading
import time
from urllib.parse import unquote, urlsplit

from . import schema
from .workspace import Workspace, WorkspaceError, parse_partition

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# How long a folder listing (and so the fingerprint) is trusted before it is read again.
LISTING_TTL = 60.0


def is_url(root) -> bool:
    return isinstance(root, str) and bool(_URL.match(root))


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
        read from the names), and `modified` answers (listings carry no times)."""

        async def _ls_real(self, url, detail=True, **kwargs):
            out = await super()._ls_real(url, detail=detail, **kwargs)
            if detail:
                return [{**e, "name": unquote(e["name"])} for e in out]
            return [unquote(u) for u in out]

        def modified(self, path):
            return _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)

    return ListingHTTPFileSystem(
        use_listings_cache=True, listings_expiry_time=LISTING_TTL, skip_instance_cache=True
    )


def _check_rel(root: str, rel: str) -> str:
    """`rel` as a path inside the workspace (the same rules as `workspace.inside`)."""
    if not isinstance(rel, str) or not rel:
        raise WorkspaceError(f"empty path in workspace {root}")
    if rel.startswith(("/", "\\")) or _URL.match(rel) or "\\" in rel:
        raise WorkspaceError(f"path {rel!r} must be relative to the workspace")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts or not parts:
        raise WorkspaceError(f"path {rel!r} leaves the workspace {root}")
    return "/".join(parts)


_FINGERPRINTS: dict[str, tuple[float, str]] = {}


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

    def fingerprint(self) -> str:
        """workspace.json and the names of every table's files; re-read after LISTING_TTL.
        (Listings carry no sizes or times: a file replaced under the same name is seen when
        workspace.json or the file list changes, or after a restart.)"""
        hit = _FINGERPRINTS.get(self.root)
        if hit and time.monotonic() - hit[0] < LISTING_TTL:
            return hit[1]
        h = hashlib.sha1()
        try:
            h.update(self.read_bytes(self.META))
        except WorkspaceError:
            h.update(b"no workspace.json")
        for t in schema.TABLES:
            for f in self.files(t.name):
                h.update(f.encode() + b";")
        fp = h.hexdigest()[:16]
        _FINGERPRINTS[self.root] = (time.monotonic(), fp)
        return fp


def workspace_at(root):
    """A `RemoteWorkspace` for a URL, else a `Workspace` (the read API both share)."""
    return RemoteWorkspace(root) if is_url(root) else Workspace(root)


def open_source(src):
    """What PIL can open for an image given as a local path or a URL."""
    if is_url(src):
        return io.BytesIO(filesystem(src).cat_file(src))
    return src


class _MetaOnly:
    """Enough of a path for `validate`'s workspace.json check to read it from a URL."""

    def __init__(self, ws: RemoteWorkspace, rel: str = ""):
        self.ws, self.rel = ws, rel

    def __truediv__(self, rel: str):
        return _MetaOnly(self.ws, rel)

    def read_bytes(self) -> bytes:
        try:
            return self.ws.read_bytes(self.rel)
        except WorkspaceError as e:
            if "not found" in str(e):
                raise FileNotFoundError(str(e)) from None
            raise OSError(str(e)) from None

    def __str__(self) -> str:
        return self.ws.root


def validate_remote(url: str, tables, db=None) -> list:
    """The dashboard's check of a remote workspace: workspace.json as `validate` checks
    it, and the tables DuckDB could not open (`db.errors`). Rows are not read here."""
    from .validate import Problem, Validator

    ws = RemoteWorkspace(url)
    v = Validator(_MetaOnly(ws), deep=False, tables=tables)
    v.check_meta()
    problems = list(v.problems)
    for name, error in sorted((getattr(db, "errors", None) or {}).items()):
        if name in v.selected:
            problems.append(Problem(schema.TABLES_BY_NAME[name].path, name, None, f"cannot be read: {error}"))
    return problems
