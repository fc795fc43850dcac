"""`conceptlens info`: what a workspace holds, in a couple of seconds (issue 47).

Its datasets (images, splits, labels, checkpoints and how many are layers, ground-truth
concepts, the label hierarchy's levels), every analysis with its units (those the registry
lists for this workspace) and how many of them the `analysis_runs` log records as done or
skipped, and every table's files and size on disk. Nothing is fingerprinted: whether a
logged unit is still up to date is `conceptlens analyze`'s question (it recomputes what is
due). Reads only; `summary` gives the numbers, `format_summary` the text.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from . import hierarchy as H
from . import schema
from .analysis import common, registered
from .analysis.base import EVERYTHING
from .analysis.common import Context
from .analysis.runner import DONE, SKIPPED, last_runs
from .workspace import Workspace, WorkspaceError


def _size(path: Path) -> tuple[int, int]:
    """(files, bytes) under `path` (a file or a folder; 0, 0 when absent)."""
    if path.is_file():
        return 1, path.stat().st_size
    n = size = 0
    for root, _, files in os.walk(path):
        for f in files:
            n += 1
            size += os.stat(os.path.join(root, f)).st_size
    return n, size


def _datasets(ws: Workspace) -> list[dict]:
    """One row per dataset of `images`, read straight from the core tables' files (a
    WorkspaceDB would first register every table)."""

    def has(name: str) -> bool:
        return ws.table_path(name).is_file()

    con = duckdb.connect()
    try:
        params = {"images": str(ws.table_path("images"))}
        checkpoints = "SELECT NULL::VARCHAR AS dataset, 0 AS checkpoints, 0 AS layers WHERE false"
        if has("checkpoints"):
            params["checkpoints"] = str(ws.table_path("checkpoints"))
            cols = pq.read_schema(params["checkpoints"]).names
            layer = "count(*) FILTER (WHERE layer IS NOT NULL)" if "layer" in cols else "0"
            checkpoints = (
                f"SELECT dataset, count(*) AS checkpoints, {layer} AS layers "
                "FROM read_parquet($checkpoints) GROUP BY dataset"
            )
        concepts = "SELECT NULL::VARCHAR AS dataset, 0 AS concepts WHERE false"
        if has("concept_labels"):
            params["concepts"] = str(ws.table_path("concept_labels"))
            concepts = (
                "SELECT i.dataset, count(DISTINCT l.concept) AS concepts FROM read_parquet($concepts) l "
                "JOIN read_parquet($images) i USING (image_id) GROUP BY i.dataset"
            )
        rows = (
            con.execute(
                f"""
            WITH c AS ({checkpoints}), k AS ({concepts})
            SELECT i.dataset, count(*) AS images,
                   count(*) FILTER (WHERE split = 'train') AS train,
                   count(*) FILTER (WHERE split = 'test') AS test,
                   count(DISTINCT label) AS labels,
                   coalesce(any_value(c.checkpoints), 0) AS checkpoints,
                   coalesce(any_value(c.layers), 0) AS layers,
                   coalesce(any_value(k.concepts), 0) AS concepts
            FROM read_parquet($images) i LEFT JOIN c USING (dataset) LEFT JOIN k USING (dataset)
            GROUP BY i.dataset ORDER BY i.dataset""",
                params,
            )
            .df()
            .to_dict("records")
        )
    finally:
        con.close()
    for r in rows:
        h = H.load(ws, r["dataset"])
        r["hierarchy_levels"] = h.levels if h is not None else 0
        for k in ("images", "train", "test", "labels", "checkpoints", "layers", "concepts"):
            r[k] = int(r[k])
    return rows


def _analyses(ws: Workspace) -> list[dict]:
    ctx = Context(ws, progress=False)
    logged = last_runs(ws)
    out = []
    quiet = logging.getLogger(common.__name__)  # listing units notes what it passes over
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        listed = {}
        for a in registered():
            try:
                listed[a.name] = ([u.label for u in a.units(ctx, a.option_defaults(), EVERYTHING)], None)
            except WorkspaceError as e:
                listed[a.name] = ([], str(e))
    finally:
        quiet.setLevel(level)
    for a in registered():
        units, why = listed[a.name]
        status = [logged.get((a.name, u), {}).get("status") for u in units]
        out.append(
            {
                "analysis": a.name,
                "title": a.title,
                "units": len(units),
                "done": sum(s == DONE for s in status),
                "skipped": sum(s == SKIPPED for s in status),
                "problem": why,
                "depends": list(a.depends),
            }
        )
    return out


def _tables(ws: Workspace) -> list[dict]:
    out = []
    for t in schema.tables():
        path = ws.root / t.path
        if path.exists():
            files, size = _size(path)
            out.append({"table": t.name, "files": files, "bytes": size})
    return out


def summary(root, analyses: bool = True) -> dict:
    """What the workspace at `root` holds (see the module's docstring)."""
    ws = Workspace(root)
    meta = ws.meta()
    files, size = _size(ws.root)
    datasets = _datasets(ws) if ws.table_path("images").is_file() else []
    return {
        "workspace": str(ws.root),
        "name": meta.get("name", ""),
        "format": meta.get("schema_version", ""),
        "files": files,
        "bytes": size,
        "datasets": datasets,
        "analyses": _analyses(ws) if analyses else None,
        "tables": _tables(ws),
    }


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 1e5 else f"{n / 1e3:,.1f} kB"


def format_summary(s: dict) -> str:
    """`summary` as the lines `conceptlens info` prints."""
    lines = [
        f"{s['name']} ({s['workspace']}): format {s['format']}, {_mb(s['bytes'])} in {s['files']:,} files",
        "",
        "datasets:",
    ]
    for d in s["datasets"]:
        parts = [
            f"{d['images']:,} images ({d['train']:,} train, {d['test']:,} test)",
            f"{d['labels']} labels",
            f"{d['checkpoints']} checkpoints" + (f" ({d['layers']} of them layers)" if d["layers"] else ""),
        ]
        if d["concepts"]:
            parts.append(f"{d['concepts']} ground-truth concepts")
        if d["hierarchy_levels"]:
            parts.append(f"a label hierarchy of {d['hierarchy_levels']} levels")
        lines.append(f"  {d['dataset']}: " + ", ".join(parts))
    if not s["datasets"]:
        lines.append("  none yet: conceptlens import images --workspace W --dataset NAME SOURCE")
    if s["analyses"] is not None:
        lines += ["", "analyses (units of this workspace; done and skipped as analysis_runs records them):"]
        width = max(len(a["analysis"]) for a in s["analyses"])
        by = {a["analysis"]: a for a in s["analyses"]}

        def pending(name: str) -> bool:
            """Units of `name` not done, or none yet behind an analysis that has some."""
            a = by.get(name)
            if a is None:
                return False
            return a["done"] < a["units"] if a["units"] else any(pending(d) for d in a["depends"])

        for a in s["analyses"]:
            # What it runs after and is not wholly done: its units may appear once it is.
            before = [d for d in a["depends"] if pending(d)]
            if a["problem"]:
                state = f"cannot list its units: {a['problem']}"
            elif not a["units"] and before:
                state = f"no unit yet: it runs after {', '.join(before)}"
            elif not a["units"]:
                state = "nothing to compute here"
            else:
                state = f"{a['done']} of {a['units']} units done"
                if a["skipped"]:
                    state += f", {a['skipped']} skipped"
            lines.append(f"  {a['analysis']:<{width}}  {state}")
    lines += ["", "tables:"]
    width = max((len(t["table"]) for t in s["tables"]), default=0)
    for t in s["tables"]:
        lines.append(f"  {t['table']:<{width}}  {_mb(t['bytes']):>10} in {t['files']:,} file(s)")
    return "\n".join(lines)


def render(s: dict, as_json: bool = False) -> str:
    """What `conceptlens info` prints: `format_summary`, or the numbers as JSON."""
    return json.dumps(s, indent=1) if as_json else format_summary(s)
