"""A workspace on disk: its metadata, its paths, and safe (atomic) writes."""
from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from . import schema


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


# mkstemp creates 0600 files; published tables should be readable like any other file.
_FILE_MODE = 0o666 & ~_umask()


class WorkspaceError(Exception):
    """A workspace cannot be read or written; the message names the file."""


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def inside(root: Path, rel: str) -> Path:
    """Resolve `rel` under `root`; refuse absolute paths and paths that escape it."""
    if not isinstance(rel, str) or rel == "":
        raise WorkspaceError(f"empty path in workspace {root}")
    if os.path.isabs(rel) or rel.startswith(("/", "\\")):
        raise WorkspaceError(f"path {rel!r} must be relative to the workspace")
    root_r = root.resolve()
    p = (root_r / rel).resolve()
    if p != root_r and root_r not in p.parents:
        raise WorkspaceError(f"path {rel!r} leaves the workspace {root}")
    return p


@contextlib.contextmanager
def _replacing(path: Path):
    """Yield a temporary path next to `path`; on success rename it into place, else remove it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: Path, data: bytes, fsync: bool = True) -> None:
    with _replacing(path) as tmp, open(tmp, "wb") as f:
        f.write(data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())


def atomic_write_table(path: Path, table: pa.Table) -> None:
    """Write a Parquet file to a temporary name, then rename it into place."""
    with _replacing(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


class Workspace:
    """A folder of Parquet tables plus `workspace.json`."""

    META = "workspace.json"

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    # ---- metadata -------------------------------------------------------
    @property
    def meta_path(self) -> Path:
        return self.root / self.META

    def meta(self) -> dict:
        try:
            with open(self.meta_path, encoding="utf-8") as f:
                meta = json.load(f)
        except FileNotFoundError:
            raise WorkspaceError(f"{self.meta_path}: not found; is {self.root} a workspace?") from None
        except json.JSONDecodeError as e:
            raise WorkspaceError(f"{self.meta_path}: invalid JSON ({e})") from None
        if not isinstance(meta, dict):
            raise WorkspaceError(f"{self.meta_path}: must hold a JSON object")
        return meta

    def write_meta(self, meta: dict) -> None:
        atomic_write_bytes(self.meta_path,
                           (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode())

    @classmethod
    def create(cls, root, name: str, description: str = "", provenance: dict | None = None,
               created: str | None = None) -> "Workspace":
        ws = cls(root)
        ws.root.mkdir(parents=True, exist_ok=True)
        ws.write_meta({
            "schema_version": schema.SCHEMA_VERSION,
            "name": name,
            "description": description,
            "created": created or now_iso(),
            "provenance": provenance or {},
        })
        return ws

    # ---- paths ----------------------------------------------------------
    def table_path(self, name: str, checkpoint_id: str | None = None) -> Path:
        t = schema.TABLES_BY_NAME[name]
        if t.per_checkpoint:
            if checkpoint_id is None:
                raise ValueError(f"table {name!r} needs a checkpoint_id")
            check_id(checkpoint_id, "checkpoint_id")
            return self.root / t.path.format(checkpoint_id=checkpoint_id)
        return self.root / t.path

    def has(self, name: str) -> bool:
        t = schema.TABLES_BY_NAME[name]
        if t.per_checkpoint:
            d = self.root / Path(t.path).parent
            return d.is_dir() and any(d.glob("*.parquet"))
        return self.table_path(name).exists()

    def resolve(self, rel: str) -> Path:
        return inside(self.root, rel)

    # ---- reading & writing ----------------------------------------------
    def read(self, name: str, checkpoint_id: str | None = None, columns=None) -> pa.Table:
        p = self.table_path(name, checkpoint_id)
        try:
            return pq.read_table(p, columns=columns)
        except FileNotFoundError:
            raise WorkspaceError(f"{p}: table {name!r} not found") from None

    def write(self, name: str, table: pa.Table, checkpoint_id: str | None = None) -> Path:
        p = self.table_path(name, checkpoint_id)
        atomic_write_table(p, table)
        return p

    def upsert(self, name: str, table: pa.Table, key_values: dict | None = None) -> Path:
        """Replace the rows matching `key_values` (column -> value or list) by `table`.

        Other rows are kept, so one checkpoint's analysis can be recomputed alone.
        """
        import pyarrow.compute as pc
        p = self.table_path(name)
        if p.exists() and key_values:
            old = pq.read_table(p)
            replaced = None
            for col, val in key_values.items():
                vals = val if isinstance(val, (list, tuple, set)) else [val]
                m = pc.is_in(old[col], value_set=pa.array(list(vals), type=old.schema.field(col).type))
                replaced = m if replaced is None else pc.and_(replaced, m)
            old = old.filter(pc.invert(replaced))
            if old.schema.names == table.schema.names:
                table = table.cast(old.schema)
            # Optional columns present on one side only are filled with nulls on the other.
            table = pa.concat_tables([old, table], promote_options="default")
        return self.write(name, table)

    def fingerprint(self) -> str:
        """Changes whenever any file of the workspace's tables changes (cache key)."""
        h = hashlib.sha1()
        files = [self.meta_path] + sorted(self.root.glob("*.parquet")) + \
            sorted((self.root / "features").glob("*.parquet"))
        for p in files:
            try:
                st = p.stat()
            except FileNotFoundError:
                continue
            h.update(f"{p.name}:{st.st_size}:{st.st_mtime_ns};".encode())
        return h.hexdigest()[:16]


_ID_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@+")


def check_id(value: str, what: str) -> str:
    """Ids become file names: keep them to a safe alphabet."""
    if not value or not set(value) <= _ID_OK or value.startswith(".") or len(value) > 200:
        raise WorkspaceError(
            f"{what} {value!r} may only use letters, digits and - _ . @ + "
            "(and not start with a dot)")
    return value


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
