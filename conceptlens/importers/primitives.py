"""What the CompMap importers (CUB, MIT-States) share: reading whitespace-separated text
files with errors that name the file and line, and writing a dataset's `primitives`,
`label_primitives` and `image_primitives` partitions."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from .. import schema
from ..workspace import Workspace
from .images import ImportInputError


def find(root: Path, names: tuple[str, ...], what: str) -> Path:
    """The first of `names` (relative to `root`) that is a file."""
    for n in names:
        if (root / n).is_file():
            return root / n
    raise ImportInputError(f"{root}: no {what} (looked for {', '.join(names)})")


def rows(path: Path, fields: tuple[int, ...], layout: str):
    """(line number, fields) of every non-blank line; a line with a count of fields not in
    `fields` is an error naming the file, the line and the expected `layout`."""
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise ImportInputError(f"{path}: cannot be read ({e.strerror or e})") from None
    with f:
        try:
            for n, line in enumerate(f, 1):
                parts = line.split()
                if not parts:
                    continue
                if len(parts) not in fields:
                    raise ImportInputError(f"{path} line {n}: expected `{layout}`, got {line.strip()[:80]!r}")
                yield n, parts
        except UnicodeDecodeError as e:
            raise ImportInputError(f"{path}: not UTF-8 text ({e})") from None


def integer(path: Path, n: int, value: str, column: str, lo: int | None = None, hi: int | None = None) -> int:
    try:
        v = int(value)
    except ValueError:
        raise ImportInputError(f"{path} line {n}: {column} must be an integer, got {value!r}") from None
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise ImportInputError(f"{path} line {n}: {column} must be {rng}, got {v}")
    return v


def kept_ids(ws: Workspace, dataset: str) -> set[str]:
    """Image ids of `dataset` in images.parquet (an import skips images that do not decode)."""
    t = ws.read("images", columns=["image_id", "dataset"]).to_pandas()
    return set(t.loc[t["dataset"] == dataset, "image_id"])


def write_tables(
    ws: Workspace,
    dataset: str,
    primitives: list[dict],
    label_primitives: list[dict],
    image_primitives: list[dict] | None,
) -> None:
    """Replace the dataset's partitions (no image_primitives: any old partition is removed)."""
    tables = [("primitives", primitives), ("label_primitives", label_primitives)]
    if image_primitives is not None:
        tables.append(("image_primitives", image_primitives))
    else:
        ws.remove_partition("image_primitives", dataset=dataset)
    for name, data in tables:
        ws.write(
            name,
            pa.Table.from_pylist(data, schema=schema.arrow_schema(name, partition=False)),
            dataset=dataset,
        )
