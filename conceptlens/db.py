"""Read-only DuckDB access to a workspace.

One in-memory DuckDB database holds a view per table present (a small images table is
copied in); every query runs on its own cursor (DuckDB connections refuse concurrent use
across threads) and takes its values as named parameters (`$ckpt`), never by string
formatting.
A partitioned table is one view over a glob of its files (hive partitioning), so
a filter on a partition column opens only the matching files.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from . import schema
from .remote import RemoteWorkspace, is_url
from .workspace import Workspace

# images.parquet up to this size is copied into the in-memory database: 50,000 images are a
# 1.3 MB file and some 7 MB of memory; a million (6 MB, 134 MB of memory) stay a view.
IMAGES_IN_MEMORY = 4 << 20

# The tables read by every WorkspaceDB while `read_log()` is open (None: not recording),
# and an empty database that parses their queries.
_reads: set[str] | None = None
_parser: duckdb.DuckDBPyConnection | None = None


@contextmanager
def read_log():
    """Record the workspace tables that queries read while inside: yields the set they are
    added to. For tests (tests/test_page_tables.py checks that a page reads only the tables
    its spec declares); off otherwise, when a query costs nothing more."""
    global _reads, _parser
    _parser = duckdb.connect(":memory:")
    _reads = out = set()
    try:
        yield out
    finally:
        _reads = None
        _parser.close()


def _log(tables) -> None:
    if _reads is not None:
        _reads.update(tables)


class WorkspaceDB:
    def __init__(self, root: str | Path):
        self.remote = is_url(root)
        self.ws = RemoteWorkspace(root) if self.remote else Workspace(root)
        self.root = self.ws.root
        self._con = duckdb.connect(":memory:")
        if self.remote:
            # fsspec instead of DuckDB's httpfs extension, which would be downloaded.
            self._con.register_filesystem(self.ws.fs)
        self._lock = threading.Lock()
        self.tables: set[str] = set()
        # Tables present whose files DuckDB cannot open (corrupt, foreign folders): left out,
        # so every page that does not read them still works; validate names the file.
        self.errors: dict[str, str] = {}
        cur = self._con.cursor()
        for t in schema.TABLES:
            if not self.ws.files(t.name):
                continue
            try:
                self._view(cur, t)
            except duckdb.Error as e:
                self.errors[t.name] = str(e).splitlines()[0]
                continue
            self.tables.add(t.name)
        cur.close()

    def _view(self, cur, t: schema.Table) -> None:
        # Paths are bound as parameters, not spliced into SQL text; the types and
        # names spliced below come from schema.py alone.
        if t.partitioned:
            types = ", ".join(f"'{c}': {_SQL_TYPE[t.column(c).type]}" for c in t.partition)
            cols = ", ".join(_ident_col(c) for c in t.partition)
            rel = cur.sql(
                f"SELECT {cols}, * EXCLUDE ({cols}) FROM read_parquet($glob, "
                f"hive_partitioning = true, hive_types = {{{types}}}, union_by_name = true)",
                params={"glob": self._loc(t.glob)},
            )
        else:
            rel = cur.sql("SELECT * FROM read_parquet($path)", params={"path": self._loc(t.path)})
        if t.name == "images" and not self.remote and (self.root / t.path).stat().st_size <= IMAGES_IN_MEMORY:
            # Nearly every page query joins images: held in DuckDB's memory, a join of a
            # cluster's rows with 50,000 images costs 13 ms instead of 18 (the scan decoded
            # its file's strings on every query). A larger table stays a view on its file.
            rel.create(t.name)
            return
        rel.create_view(t.name)

    def _loc(self, rel: str) -> str:
        return self.ws.loc(rel) if self.remote else str(self.root / rel)

    def close(self) -> None:
        self._con.close()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            return self._con.cursor()

    def query(self, sql: str, params: dict | None = None) -> pd.DataFrame:
        """Run `sql` with named parameters (`$name` in the text, `{"name": value}`)."""
        return self._fetch(sql, params, lambda cur: cur.execute(sql, params or {}).df())

    def _fetch(self, sql: str, params: dict | None, fetch):
        """`fetch(cursor)` on a cursor of its own, `sql`'s tables logged (named parameters only)."""
        if params is not None and not isinstance(params, dict):
            raise TypeError("queries take named parameters: a dict such as {'ckpt': 'x'}")
        cur = self.cursor()
        try:
            if _reads is not None:
                _log(_tables_in(sql))
            return fetch(cur)
        finally:
            cur.close()

    def query_large(self, sql: str, params: dict | None = None) -> pd.DataFrame:
        """`query` for results of up to millions of rows: the same frame, through Arrow
        (DuckDB's own pandas conversion of a million strings took 8 s of a cold page; this
        takes under 4). Where the two conversions differ, it converts as `query` does:
        integers with nulls become pandas' nullable integers, an all-null text column an
        object column of None, and other types (decimals, dates, lists, booleans with
        nulls) go through DuckDB's conversion."""
        table = self._fetch(sql, params, lambda cur: cur.sql(sql, params=params or {}).to_arrow_table())
        df = table.to_pandas()
        plain = []  # columns whose Arrow conversion differs from DuckDB's: converted by DuckDB
        for f, col in zip(table.schema, table.columns):
            t, nulls = f.type, col.null_count
            if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t):
                if len(col) and nulls == len(col):  # DuckDB: an object column of None
                    df[f.name] = pd.Series([None] * len(col), index=df.index, dtype=object)
            elif pa.types.is_integer(t):
                if nulls:  # DuckDB: pandas' nullable integer of the same width
                    kind = f"{'Int' if pa.types.is_signed_integer(t) else 'UInt'}{t.bit_width}"
                    df[f.name] = table.select([f.name]).to_pandas(
                        types_mapper={t: pd.api.types.pandas_dtype(kind)}.get
                    )[f.name]
            elif not (pa.types.is_floating(t) or (pa.types.is_boolean(t) and not nulls)):
                plain.append(f.name)
        if plain:
            con = duckdb.connect()
            try:
                other = con.from_arrow(table.select(plain)).df()
            finally:
                con.close()
            for name in plain:
                df[name] = other[name]
        return df

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> list[str]:
        _ident(table)
        if table not in self.tables:
            return []
        _log([table])
        cur = self.cursor()
        try:
            return [r[0] for r in cur.execute(f"DESCRIBE {_ident(table)}").fetchall()]
        finally:
            cur.close()

    # ---- features --------------------------------------------------------
    def features_path(self, checkpoint_id: str) -> Path | str:
        _log(["features"])
        return self.ws.table_path("features", checkpoint_id=checkpoint_id)

    def features(
        self, checkpoint_id: str, image_ids: list[str] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return (image_ids, embeddings float32 matrix) for one checkpoint."""
        path = str(self.features_path(checkpoint_id))
        cur = self.cursor()
        try:
            if image_ids is None:
                rel = cur.sql(
                    "SELECT image_id, embedding FROM read_parquet($path) ORDER BY image_id",
                    params={"path": path},
                )
            else:
                rel = cur.sql(
                    "SELECT f.image_id, f.embedding FROM read_parquet($path) f "
                    "WHERE list_contains($ids, f.image_id) ORDER BY f.image_id",
                    params={"path": path, "ids": list(image_ids)},
                )
            tbl = rel.to_arrow_table()
        finally:
            cur.close()
        ids = tbl["image_id"].to_numpy(zero_copy_only=False)
        emb = tbl["embedding"].combine_chunks()
        n = len(emb)
        if n == 0:
            return ids, np.zeros((0, 0), np.float32)
        flat = emb.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
        return ids, flat.reshape(n, -1)


def _tables_in(sql: str) -> set[str]:
    """The workspace tables `sql` names, from DuckDB's parse tree (nothing is bound or run)."""
    cur = _parser.cursor()
    try:
        tree = json.loads(cur.execute("SELECT json_serialize_sql($sql)", {"sql": sql}).fetchone()[0])
    finally:
        cur.close()
    if tree.get("error"):
        raise ValueError(f"cannot parse the query to log what it reads: {tree.get('error_message')}")
    names, ctes = set(), set()

    def walk(node) -> None:
        if isinstance(node, dict):
            if node.get("type") == "BASE_TABLE":
                names.add(node.get("table_name"))
            ctes.update(e["key"] for e in (node.get("cte_map") or {}).get("map", ()))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(tree)
    return (names - ctes) & set(schema.TABLES_BY_NAME)


_SQL_TYPE = {schema.STRING: "VARCHAR", schema.INT: "BIGINT"}


def _ident_col(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _ident(name: str) -> str:
    """Quote a table identifier known to the schema (identifiers cannot be parameters)."""
    if name not in schema.TABLES_BY_NAME:
        raise ValueError(f"unknown table {name!r}")
    return '"' + name + '"'
