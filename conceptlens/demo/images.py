"""The demo's images.parquet from rows of images: one module below both the `data` stage
(conceptlens.demo.build) and the `real` stage (conceptlens.demo.real), which each write
images, so neither imports the other for it (build runs real as a stage)."""

from __future__ import annotations

import pyarrow as pa

from .. import schema

IMAGE_COLUMNS = [c.name for c in schema.TABLES_BY_NAME["images"].columns]


def images_table(rows: list[dict]) -> pa.Table:
    """One table for all datasets: factor columns a dataset lacks are null."""
    extra = []
    for r in rows:
        for k in r:
            if k not in IMAGE_COLUMNS and k not in extra:
                extra.append(k)
    t = pa.Table.from_pylist([{k: r.get(k) for k in IMAGE_COLUMNS + extra} for r in rows])
    types = {"label": pa.int64(), "width": pa.int32(), "height": pa.int32()}
    t = t.select(IMAGE_COLUMNS + extra)
    return t.cast(pa.schema([pa.field(n, types.get(n, t.schema.field(n).type)) for n in t.column_names]))
