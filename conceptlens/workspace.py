"""A workspace on disk: its metadata, its paths, and safe (atomic) writes."""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import hashlib
import json
import os
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import schema
from .cache import cached
from .errors import ConceptLensError


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


# mkstemp creates 0600 files; published tables should be readable like any other file.
_FILE_MODE = 0o666 & ~_umask()


class WorkspaceError(ConceptLensError):
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


READ_ONLY_ENV = "CONCEPTLENS_READ_ONLY"
STATE_DIR_ENV = "CONCEPTLENS_STATE_DIR"


class ReadOnlyError(WorkspaceError, PermissionError):
    """A write refused in read-only mode (a PermissionError, as a read-only disk would raise)."""


def read_only() -> bool:
    """True in a read-only deployment (`CONCEPTLENS_READ_ONLY=1`, docs/deploy.md)."""
    return os.environ.get(READ_ONLY_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def check_writable(path: Path) -> None:
    """Refuse a write in read-only mode, except below `CONCEPTLENS_STATE_DIR` (where a
    deployment keeps study answers, outside every workspace)."""
    if not read_only():
        return
    state = os.environ.get(STATE_DIR_ENV)
    if state:
        s, p = Path(state).resolve(), Path(path).resolve()
        if p == s or s in p.parents:
            return
    raise ReadOnlyError(f"{path}: not written: this deployment is read-only ({READ_ONLY_ENV}=1)")


@contextlib.contextmanager
def _replacing(path: Path):
    """Yield a temporary path next to `path`; on success rename it into place, else remove it."""
    check_writable(path)
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


# Row groups of about this many bytes: readers decode row groups on parallel threads, and a
# 50,000 x 2,048 features file in one row group reads on one core (2x slower on two).
ROW_GROUP_BYTES = 32 << 20


def atomic_write_table(path: Path, table: pa.Table) -> None:
    """Write a Parquet file to a temporary name, then rename it into place."""
    rows = max(4096, int(ROW_GROUP_BYTES * max(1, table.num_rows) // max(1, table.nbytes)))
    with _replacing(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", row_group_size=rows)


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
        atomic_write_bytes(self.meta_path, (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode())

    @classmethod
    def create(
        cls,
        root,
        name: str,
        description: str = "",
        provenance: dict | None = None,
        created: str | None = None,
    ) -> Workspace:
        ws = cls(root)
        ws.root.mkdir(parents=True, exist_ok=True)
        ws.write_meta(
            {
                "schema_version": schema.SCHEMA_VERSION,
                "name": name,
                "description": description,
                "created": created or now_iso(),
                "provenance": provenance or {},
            }
        )
        return ws

    # ---- paths ----------------------------------------------------------
    def _spec(self, name: str) -> schema.Table:
        try:
            return schema.TABLES_BY_NAME[name]
        except KeyError:
            raise WorkspaceError(f"unknown table {name!r}") from None

    def partition_dir(self, name: str, **partition) -> Path:
        """Folder of one partition of a partitioned table (every partition column given)."""
        t = self._spec(name)
        if not t.partitioned:
            raise ValueError(f"table {name!r} is not partitioned")
        if set(partition) != set(t.partition):
            raise ValueError(
                f"table {name!r} is partitioned by {', '.join(t.partition)}; "
                f"got {', '.join(sorted(partition)) or 'nothing'}"
            )
        parts = [f"{c}={partition_value(t, c, partition[c])}" for c in t.partition]
        return self.root.joinpath(t.path, *parts)

    def table_path(self, name: str, **partition) -> Path:
        """The file of a single-file table, or of one partition of a partitioned table."""
        t = self._spec(name)
        if not t.partitioned:
            if partition:
                raise ValueError(f"table {name!r} is not partitioned")
            return self.root / t.path
        return self.partition_dir(name, **partition) / "part-0.parquet"

    def partition_files(self, name: str, **partition) -> list[Path]:
        """Every Parquet file of one partition (several for append-only tables)."""
        d = self.partition_dir(name, **partition)
        return sorted(d.glob("*.parquet")) if d.is_dir() else []

    def files(self, name: str) -> list[Path]:
        """Every file of a table, without reading any."""
        t = self._spec(name)
        if not t.partitioned:
            p = self.root / t.path
            return [p] if p.is_file() else []
        return sorted(_parquet_below(self.root / t.path, len(t.partition)))

    def partitions(self, name: str) -> list[dict]:
        """The partitions present, from folder names alone (values typed as the schema says)."""
        t = self._spec(name)
        out = []
        for f in self.files(name):
            parts = f.relative_to(self.root / t.path).parts[:-1]
            try:
                values = parse_partition(t, parts)
            except ValueError:
                continue  # `validate` reports foreign folders
            if values not in out:
                out.append(values)
        return out

    def has(self, name: str, **partition) -> bool:
        t = self._spec(name)
        if t.partitioned and partition:
            return bool(self.partition_files(name, **partition))
        return bool(self.files(name))

    def resolve(self, rel: str) -> Path:
        return inside(self.root, rel)

    # ---- reading & writing ----------------------------------------------
    def read(self, name: str, *, columns=None, **partition) -> pa.Table:
        """A single-file table, or one partition with its partition columns put back."""
        t = self._spec(name)
        if not t.partitioned:
            p = self.table_path(name, **partition)
            try:
                return pq.read_table(p, columns=columns)
            except FileNotFoundError:
                raise WorkspaceError(f"{p}: table {name!r} not found") from None
        files = self.partition_files(name, **partition)
        if not files:
            d = self.partition_dir(name, **partition)
            raise WorkspaceError(f"{d}: partition of table {name!r} not found")
        file_cols = None if columns is None else [c for c in columns if c not in t.partition]
        tbl = pa.concat_tables(
            [pq.read_table(f, columns=file_cols) for f in files], promote_options="default"
        )
        for i, c in enumerate(t.partition):
            if columns is not None and c not in columns:
                continue
            typ = schema.arrow_type(t.column(c).type)
            tbl = tbl.add_column(
                i, pa.field(c, typ, nullable=False), pa.array([partition[c]] * tbl.num_rows, typ)
            )
        return tbl

    def read_metadata(self, name: str, **partition) -> dict:
        """The `conceptlens` metadata of one file (its footer only), {} when absent."""
        p = self.table_path(name, **partition)
        try:
            md = pq.read_schema(p).metadata or {}
        except FileNotFoundError:
            return {}
        raw = md.get(b"conceptlens")
        return json.loads(raw) if raw else {}

    def _file_table(
        self, t: schema.Table, table: pa.Table, partition: dict, metadata: dict | None
    ) -> pa.Table:
        """Drop partition columns (after checking they hold the partition's value)."""
        for c in t.partition:
            if c in table.column_names:
                vals = set(table[c].to_pylist())
                if vals - {partition[c]}:
                    raise ValueError(
                        f"table {t.name!r}: column {c!r} holds {sorted(map(str, vals))[:3]} "
                        f"but the partition is {c}={partition[c]!r}"
                    )
                table = table.drop_columns([c])
        if metadata is not None:
            md = dict(table.schema.metadata or {})
            md[b"conceptlens"] = json.dumps(metadata, sort_keys=True).encode()
            table = table.replace_schema_metadata(md)
        return table

    def write(self, name: str, table: pa.Table, metadata: dict | None = None, **partition) -> Path:
        """Write a single-file table, or replace one partition's file; atomically either way.

        Nothing else is read or rewritten: other partitions stay as they are.
        """
        t = self._spec(name)
        if t.append_only:
            raise ValueError(f"table {name!r} is append-only: use Workspace.append")
        p = self.table_path(name, **partition)
        atomic_write_table(p, self._file_table(t, table, partition, metadata))
        return p

    def append(self, name: str, table: pa.Table, **partition) -> Path:
        """Add rows to an append-only table as a new part file (never rewrites one)."""
        t = self._spec(name)
        if not t.append_only:
            raise ValueError(f"table {name!r} is not append-only")
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        p = self.partition_dir(name, **partition) / f"part-{stamp}-{uuid.uuid4().hex[:8]}.parquet"
        atomic_write_table(p, self._file_table(t, table, partition, None))
        return p

    def upsert(self, name: str, table: pa.Table, key_values: dict | None = None) -> Path:
        """Replace the rows matching `key_values` (column -> value or list) by `table`.

        For the small single-file tables (checkpoints, captions, vl_models); partitioned
        tables replace one partition's file instead.
        """
        import pyarrow.compute as pc

        if self._spec(name).partitioned:
            raise ValueError(f"table {name!r} is partitioned: write its partitions instead")
        p = self.table_path(name)
        if p.exists() and key_values:
            old = pq.read_table(p)
            keep = None
            for col, val in key_values.items():
                vals = val if isinstance(val, (list, tuple, set)) else [val]
                m = pc.is_in(old[col], value_set=pa.array(list(vals), type=old.schema.field(col).type))
                keep = m if keep is None else pc.and_(keep, m)
            old = old.filter(pc.invert(keep))
            if old.schema.names == table.schema.names:
                table = table.cast(old.schema)
            # Optional columns present on one side only are filled with nulls on the other.
            table = pa.concat_tables([old, table], promote_options="default")
        return self.write(name, table)

    def remove_partition(self, name: str, **partition) -> None:
        for f in self.partition_files(name, **partition):
            check_writable(f)
            f.unlink()

    def fingerprint(self) -> str:
        """Changes whenever any file of the workspace's tables changes (cache key)."""
        h = hashlib.sha1()
        try:
            files = [self.meta_path] + [f for t in schema.TABLES for f in self.files(t.name)]
        except OSError:
            files = [self.meta_path]
        skip = len(str(self.root)) + 1  # every file is root / ...: its name inside the workspace
        for p in files:
            try:
                st = os.stat(p)
            except OSError:
                continue
            h.update(f"{str(p)[skip:]}:{st.st_size}:{st.st_mtime_ns};".encode())
        return h.hexdigest()[:16]


def _parquet_below(base: Path, depth: int) -> list[Path]:
    """What Path.glob('*/' * depth + '*.parquet') finds under `base`, with os.scandir: the
    fingerprint lists every file on every rerun of every page (pathlib's glob: 3x slower)."""
    level = [str(base)]
    for _ in range(depth):
        nxt = []
        for d in level:
            try:
                with os.scandir(d) as it:
                    nxt += [e.path for e in it if e.is_dir()]
            except OSError:
                continue
        level = nxt
    out = []
    for d in level:
        try:
            with os.scandir(d) as it:
                out += [Path(e.path) for e in it if e.name.endswith(".parquet")]
        except OSError:
            continue
    return out


def partition_value(t: schema.Table, column: str, value) -> str:
    """The folder-name text of a partition value; string values keep to the id alphabet."""
    if t.column(column).type == schema.INT:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"table {t.name!r}: partition {column} must be an integer, got {value!r}")
        return str(int(value))
    return check_id(str(value), f"{t.name}.{column}")


def parse_partition(t: schema.Table, parts) -> dict:
    """Folder names (`k=5`, ...) -> typed partition values; ValueError if they do not fit."""
    if len(parts) != len(t.partition):
        raise ValueError(f"expected {len(t.partition)} partition folder(s), got {len(parts)}")
    out = {}
    for col, part in zip(t.partition, parts):
        key, sep, raw = part.partition("=")
        if not sep or key != col:
            raise ValueError(f"folder {part!r} is not {col}=VALUE")
        if t.column(col).type == schema.INT:
            if not raw.lstrip("-").isdigit():
                raise ValueError(f"folder {part!r}: {col} must be an integer")
            out[col] = int(raw)
        else:
            check_id(raw, f"{t.name}.{col}")
            out[col] = raw
    return out


def _inside(p: Path) -> str:
    """`p` as named inside its workspace: the table folder, its key=value folders and the
    file (`features/checkpoint_id=x/part.parquet`, `images.parquet`), so that a copied or
    renamed workspace keeps its fingerprints."""
    parts = p.parts
    i = len(parts) - 1
    while i > 1 and "=" in parts[i - 1]:
        i -= 1
    if i < len(parts) - 1:
        i -= 1
    return "/".join(parts[i:])


# Workspaces analysed before 2.1 stored fingerprints that also hashed the folders above
# a table (the workspace's own name among them); `legacy_signatures()` recomputes those,
# so that such a workspace, where it was analysed, is not analysed again.
_LEGACY = contextvars.ContextVar("legacy_signatures", default=False)


@contextlib.contextmanager
def legacy_signatures():
    token = _LEGACY.set(True)
    try:
        yield
    finally:
        _LEGACY.reset(token)


def files_signature(paths) -> str:
    """SHA-1 of the bytes of `paths` (the inputs an analysis read) and of their names inside
    the workspace: a staleness check."""
    paths = sorted(Path(p) for p in paths)
    # Files are replaced by rename, never written in place: a new file has a new inode, so
    # (path, inode, size, mtime) of every file identifies the bytes hashed before.
    stats = tuple((str(p), st.st_ino, st.st_size, st.st_mtime_ns) for p in paths for st in [p.stat()])
    return _signature(_LEGACY.get(), stats)


# Bounded (a long-lived process checks the staleness of every unit it runs: an unbounded memo
# grew with every version of every file it ever hashed).
@cached(reads=(), maxsize=4096)
def _signature(legacy: bool, stats: tuple) -> str:
    """`files_signature` of the files `stats` names ((path, inode, size, mtime) each)."""
    h = hashlib.sha1()
    for path, *_ in stats:
        p = Path(path)
        h.update(("/".join(p.parts[-4:]) if legacy else _inside(p)).encode())
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


_ID_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@+")


def check_id(value: str, what: str) -> str:
    """Ids become file names: keep them to a safe alphabet."""
    if not value or not set(value) <= _ID_OK or value.startswith(".") or len(value) > 200:
        raise WorkspaceError(
            f"{what} {value!r} may only use letters, digits and - _ . @ + (and not start with a dot)"
        )
    return value


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
