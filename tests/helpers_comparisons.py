"""Rewriting one partition of a stored table in place, as a later analysis run would."""

from __future__ import annotations

import pyarrow as pa


def replace_partition(ws, table, change, **part):
    """Rewrite one partition of `table` through `change(DataFrame)`: a new file (a copy's
    files are hard links, never written into), its metadata kept."""
    t = ws.read(table, **part)
    md = ws.read_metadata(table, **part)
    t = t.drop_columns([c for c in part if c in t.column_names])
    df = change(t.to_pandas())
    ws.write(
        table, pa.Table.from_pandas(df, schema=t.schema, preserve_index=False), metadata=md or None, **part
    )
