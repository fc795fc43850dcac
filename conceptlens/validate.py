"""Check a workspace against the format in `schema.py`. Never writes anything."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import schema
from .workspace import Workspace, WorkspaceError, inside


@dataclass(frozen=True)
class Problem:
    file: str          # path relative to the workspace
    table: str
    column: str | None
    message: str
    example: str | None = None

    def __str__(self) -> str:
        where = f"{self.file} (table {self.table}"
        where += f", column {self.column})" if self.column else ")"
        s = f"{where}: {self.message}"
        if self.example:
            s += f"; example: {self.example}"
        return s


def _row_example(t: pa.Table, idx: int, key: tuple[str, ...]) -> str:
    cols = [c for c in key if c in t.column_names] or t.column_names[:3]
    return ", ".join(f"{c}={t[c][idx].as_py()!r}" for c in cols) + f" (row {idx})"


def _check_meta(ws: Workspace) -> list[Problem]:
    f = Workspace.META
    try:
        meta = ws.meta()
    except WorkspaceError as e:
        return [Problem(f, "workspace.json", None, str(e).split(": ", 1)[-1])]
    out = []
    for field in ("schema_version", "name", "description", "created", "provenance"):
        if field not in meta:
            out.append(Problem(f, "workspace.json", field, "missing field"))
    v = str(meta.get("schema_version", ""))
    if v and v.split(".")[0] != schema.SCHEMA_MAJOR:
        out.append(Problem(f, "workspace.json", "schema_version",
                           f"version {v} is not readable by this ConceptLens "
                           f"(reads {schema.SCHEMA_MAJOR}.x)"))
    if "provenance" in meta and not isinstance(meta["provenance"], dict):
        out.append(Problem(f, "workspace.json", "provenance", "must be a JSON object"))
    return out


def _check_columns(t: pa.Table, spec: schema.Table, rel: str) -> list[Problem]:
    out = []
    for col in spec.columns:
        if col.name not in t.column_names:
            if col.required:
                out.append(Problem(rel, spec.name, col.name, "required column is missing"))
            continue
        got = schema.logical_type(t.schema.field(col.name).type)
        ok = got == col.type or (col.type == schema.FLOAT and got == schema.INT) \
            or (got == "null" and col.nullable)
        if not ok:
            out.append(Problem(rel, spec.name, col.name,
                               f"has type {t.schema.field(col.name).type}, expected {col.type}"))
            continue
        nulls = t[col.name].null_count
        if nulls and not col.nullable:
            idx = int(np.flatnonzero(pc.is_null(t[col.name]).to_numpy(zero_copy_only=False))[0])
            out.append(Problem(rel, spec.name, col.name, f"{nulls} null value(s) in a non-nullable column",
                               _row_example(t, idx, spec.key)))
    return out


def _check_key(t: pa.Table, spec: schema.Table, rel: str) -> list[Problem]:
    if not all(k in t.column_names for k in spec.key) or t.num_rows == 0:
        return []
    counts = t.group_by(list(spec.key)).aggregate([([], "count_all")])
    dup = counts.filter(pc.greater(counts["count_all"], 1))
    if dup.num_rows == 0:
        return []
    ex = ", ".join(f"{k}={dup[k][0].as_py()!r}" for k in spec.key)
    return [Problem(rel, spec.name, ",".join(spec.key),
                    f"key is not unique: {dup.num_rows} value(s) repeat", ex)]


def _check_refs(t: pa.Table, spec: schema.Table, rel: str, domains: dict) -> list[Problem]:
    out = []
    for col in spec.columns:
        if not col.references or col.name not in t.column_names:
            continue
        domain = domains.get(col.references)
        if domain is None:
            continue
        vals = t[col.name]
        missing = pc.invert(pc.is_in(vals, value_set=domain))
        missing = pc.and_(missing, pc.is_valid(vals))
        n = pc.sum(missing).as_py() or 0
        if n:
            idx = int(np.flatnonzero(missing.to_numpy(zero_copy_only=False))[0])
            out.append(Problem(rel, spec.name, col.name,
                               f"{n} value(s) not found in {col.references}",
                               f"{col.name}={vals[idx].as_py()!r} (row {idx})"))
    return out


def _check_paths(ws: Workspace, t: pa.Table, spec: schema.Table, rel: str) -> list[Problem]:
    out = []
    for col in spec.columns:
        if not col.is_path or col.name not in t.column_names:
            continue
        if schema.logical_type(t.schema.field(col.name).type) != schema.STRING:
            continue
        bad_outside, bad_missing = [], []
        for i, v in enumerate(t[col.name].to_pylist()):
            if v is None:
                continue
            try:
                p = inside(ws.root, v)
            except WorkspaceError:
                bad_outside.append((i, v))
                continue
            if not p.is_file():
                bad_missing.append((i, v))
        if bad_outside:
            i, v = bad_outside[0]
            out.append(Problem(rel, spec.name, col.name,
                               f"{len(bad_outside)} path(s) are absolute or leave the workspace",
                               f"{col.name}={v!r} (row {i})"))
        if bad_missing:
            i, v = bad_missing[0]
            out.append(Problem(rel, spec.name, col.name, f"{len(bad_missing)} file(s) do not exist",
                               f"{col.name}={v!r} (row {i})"))
    return out


def _check_features(ws: Workspace, ckpts: pa.Table | None, image_ds: dict, deep: bool = True
                    ) -> list[Problem]:
    spec = schema.TABLES_BY_NAME["features"]
    out = []
    fdir = ws.root / "features"
    files = {p.stem: p for p in sorted(fdir.glob("*.parquet"))} if fdir.is_dir() else {}
    rows = {} if ckpts is None or "checkpoint_id" not in ckpts.column_names else {
        r["checkpoint_id"]: r for r in ckpts.to_pylist()}
    for cid in sorted(set(rows) - set(files)):
        out.append(Problem(f"features/{cid}.parquet", "features", None,
                           "file is missing for a row of checkpoints.parquet", f"checkpoint_id={cid!r}"))
    for cid in sorted(set(files) - set(rows)):
        out.append(Problem(f"features/{cid}.parquet", "features", None,
                           "file has no row in checkpoints.parquet", f"checkpoint_id={cid!r}"))
    for cid in sorted(set(files) & set(rows)):
        rel = f"features/{cid}.parquet"
        try:
            pf = pq.ParquetFile(files[cid])
            t = pf.read(columns=[c for c in ("image_id",) if c in pf.schema_arrow.names])
        except Exception as e:  # unreadable Parquet: report, keep going
            out.append(Problem(rel, "features", None, f"cannot be read as Parquet ({e})"))
            continue
        head = pa.Table.from_batches([], schema=pf.schema_arrow)
        out += _check_columns(head, spec, rel)
        if "image_id" in t.column_names:
            out += _check_key(t, spec, rel)
            ds = rows[cid].get("dataset")
            dom = image_ds.get(ds)
            if dom is not None:
                vals = t["image_id"]
                missing = pc.invert(pc.is_in(vals, value_set=dom))
                n = pc.sum(missing).as_py() or 0
                if n:
                    idx = int(np.flatnonzero(missing.to_numpy(zero_copy_only=False))[0])
                    out.append(Problem(rel, "features", "image_id",
                                       f"{n} value(s) not found in images.image_id of dataset {ds!r}",
                                       f"image_id={vals[idx].as_py()!r} (row {idx})"))
        if not deep or "embedding" not in pf.schema_arrow.names or \
                schema.logical_type(pf.schema_arrow.field("embedding").type) != schema.FLOAT_LIST:
            continue
        dim = rows[cid].get("feature_dim")
        row0, bad_len, bad_val = 0, None, None
        n_len = n_val = 0
        for batch in pf.iter_batches(columns=["embedding"], batch_size=4096):
            emb = batch.column(0)
            lens = pc.list_value_length(emb).to_numpy(zero_copy_only=False)
            if dim is not None:
                wrong = np.flatnonzero(lens != dim)
                n_len += len(wrong)
                if len(wrong) and bad_len is None:
                    bad_len = (row0 + int(wrong[0]), int(lens[wrong[0]]))
            flat = pc.list_flatten(emb).to_numpy(zero_copy_only=False)
            finite = np.isfinite(flat)
            if not finite.all():
                offs = np.repeat(np.arange(len(lens)), lens.astype(np.int64))
                rows_bad = np.unique(offs[~finite])
                n_val += len(rows_bad)
                if bad_val is None:
                    bad_val = row0 + int(rows_bad[0])
            row0 += batch.num_rows
        ids = t["image_id"] if "image_id" in t.column_names else None
        def ex(i):
            return (f"image_id={ids[i].as_py()!r} (row {i})" if ids is not None else f"row {i}")
        if n_len:
            i, got = bad_len
            out.append(Problem(rel, "features", "embedding",
                               f"{n_len} embedding(s) do not have length feature_dim={dim}",
                               ex(i) + f", length {got}"))
        if n_val:
            out.append(Problem(rel, "features", "embedding",
                               f"{n_val} embedding(s) contain NaN or infinity", ex(bad_val)))
    return out


def validate(root: str | Path, deep: bool = True) -> list[Problem]:
    """Return every problem found in the workspace at `root` (empty list = valid).

    `deep=False` skips reading every embedding (lengths, NaN/inf): the dashboard's
    quick check on open; `conceptlens validate` is always deep.
    """
    ws = Workspace(root)
    if not ws.root.is_dir():
        return [Problem(str(root), "workspace", None, "is not a directory")]
    problems = _check_meta(ws)
    tables: dict[str, pa.Table] = {}
    for spec in schema.TABLES:
        if spec.per_checkpoint:
            continue
        rel = spec.path
        p = ws.root / rel
        if not p.exists():
            if spec.required:
                problems.append(Problem(rel, spec.name, None, "required table is missing"))
            continue
        try:
            tables[spec.name] = pq.read_table(p)
        except Exception as e:
            problems.append(Problem(rel, spec.name, None, f"cannot be read as Parquet ({e})"))
    domains: dict[str, pa.Array] = {}
    for spec_name, cols in (("images", ("image_id", "dataset")),
                            ("checkpoints", ("checkpoint_id",))):
        t = tables.get(spec_name)
        for c in cols:
            if t is not None and c in t.column_names:
                domains[f"{spec_name}.{c}"] = pc.unique(t[c].combine_chunks())
    for spec in schema.TABLES:
        t = tables.get(spec.name)
        if t is None:
            continue
        problems += _check_columns(t, spec, spec.path)
        problems += _check_key(t, spec, spec.path)
        problems += _check_refs(t, spec, spec.path, domains)
        problems += _check_paths(ws, t, spec, spec.path)
    image_ds: dict = {}
    imgs = tables.get("images")
    if imgs is not None and {"image_id", "dataset"} <= set(imgs.column_names):
        for ds in pc.unique(imgs["dataset"]).to_pylist():
            image_ds[ds] = imgs.filter(pc.equal(imgs["dataset"], ds))["image_id"].combine_chunks()
    problems += _check_features(ws, tables.get("checkpoints"), image_ds, deep)
    return problems


def format_problems(problems: list[Problem]) -> str:
    return "\n".join(f"- {p}" for p in problems)


def summary_json(problems: list[Problem]) -> str:
    return json.dumps([p.__dict__ for p in problems], indent=2)
