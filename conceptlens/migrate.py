"""`conceptlens migrate --workspace W`: rewrite an older workspace in the current format (2.6).

1.0 kept every derived table in one file (`clusters.parquet`, ...) and features as
`features/ID.parquet`; 2.0 partitions them (docs/workspace.md). The migration:

1. moves each features file into its partition folder (a rename: bytes unchanged);
2. splits each derived table into its partitions (cluster_metrics' caption columns
   become `cluster_captions`; checkpoint_metrics' clid/wclid become `clid_scores`);
3. computes the tables 1.0 did not have (`clustering_similarity`, `cluster_links`)
   with the comparisons analysis;
4. writes `workspace.json` with the new version, and only then removes the 1.0 files.

Every write is atomic, and a migration stopped half-way is finished by running it
again: nothing of the 1.0 workspace is removed before step 4.

A minor version only adds optional columns (docs/workspace.md), so a 2.0 workspace is read
as it is; migrating it writes each added column into the files that lack it, as nulls, so
every file of a table has one schema again (2.1: `similarity_trials.round`; 2.2:
`analysis_runs.status` and `reason`, null in the rows logged before, which were all of
finished units; 2.3 only adds tables, `concept_events` and `learning_curves`, which a
workspace may lack: nothing to rewrite; 2.4 adds the optional interval columns
`checkpoint_metrics.knn1_acc_lo/hi` and `cl_heldout_lo/hi`, which files written before lack
and readers take as missing, like 2.3's intervals, the optional columns `checkpoints.depth`,
`concept_events.axis`, `layer_from`, `layer_to` and `learning_curves.axis`, `layer`
(sequences across depth), read as null where a file lacks them, and the tables
`label_hierarchy` (a tree over a dataset's labels) and `aligned_projections`: nothing to
rewrite; 2.5 only adds tables, the dictionary concepts' `dictionary_fit`, `dictionary_atoms`,
`dictionary_codes` and the scoreboard's `scoreboard_concepts`, `scoreboard_members`,
`scoreboard_scores`, `scoreboard_null`: nothing to rewrite, the version is raised; 2.6 adds
the optional column `scoreboard_concepts.caption`, read as null where a file lacks it:
nothing to rewrite). 2.1 also
stores the fingerprints of analysed inputs by their names inside the workspace (2.0 also
hashed the folders above, so a copied or renamed workspace looked stale); the migration
re-keys every unit that was up to date, so nothing is analysed again. Stopped half-way, a
unit whose inputs were already rewritten is analysed again by the next `analyze`.
"""

from __future__ import annotations

import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from . import schema
from .analysis import registered, runner
from .analysis.base import EVERYTHING, Unit, clustering_fingerprint
from .analysis.common import Context
from .errors import ConceptLensError
from .workspace import Workspace, WorkspaceError, atomic_write_table, legacy_signatures

# Columns each minor version added: (version, table, column).
ADDED_COLUMNS = (
    ("2.1", "similarity_trials", "round"),
    ("2.2", "analysis_runs", "status"),
    ("2.2", "analysis_runs", "reason"),
)

V1_FILES = (
    "clusters.parquet",
    "cluster_metrics.parquet",
    "checkpoint_metrics.parquet",
    "projections.parquet",
    "predictor_correlations.parquet",
)


def _partitions_of(ws: Workspace, name: str, df: pd.DataFrame, metadata=None) -> int:
    """Write `df` (with the table's partition columns) as its partitions; returns how many."""
    spec = schema.TABLES_BY_NAME[name]
    file_schema = schema.arrow_schema(name, partition=False)
    n = 0
    for values, g in df.groupby(list(spec.partition), sort=True):
        values = values if isinstance(values, tuple) else (values,)
        part = {
            c: (int(v) if spec.column(c).type == schema.INT else str(v))
            for c, v in zip(spec.partition, values)
        }
        cols = [f for f in file_schema if f.name in g.columns]
        t = pa.Table.from_pandas(g[[f.name for f in cols]], schema=pa.schema(cols), preserve_index=False)
        md = metadata(ws, part) if metadata else None
        ws.write(name, t, metadata=md, **part)
        n += 1
    return n


def _clusters_fingerprint(ws: Workspace, part: dict) -> dict:
    # What the runner stores to know a clustering's metrics are up to date: the same function.
    unit = Unit({"checkpoint_id": part["checkpoint_id"], "k": part["k"]})
    return {"inputs": clustering_fingerprint(Context(ws, progress=False), unit)}


def migrate(root, progress: bool = True) -> list[str]:
    """Migrate the workspace at `root` in place; returns what was done (empty if nothing)."""
    ws = Workspace(root)
    meta = ws.meta()
    version = str(meta.get("schema_version", ""))
    major = version.split(".")[0]
    if major == schema.SCHEMA_MAJOR:
        # Read before any file is rewritten: adding a column changes a file's bytes.
        legacy = legacy_done(ws) if _minor(version) < 1 else []
        done = _add_columns(ws, version)
        done += _rekey(ws, legacy)
        if _minor(version) < _minor(schema.SCHEMA_VERSION):
            ws.write_meta({**meta, "schema_version": schema.SCHEMA_VERSION})
            done.append(f"workspace.json: format {version} -> {schema.SCHEMA_VERSION}")
        return done + _remove_v1(ws)
    if major != "1":
        raise ConceptLensError(
            f"{ws.meta_path}: cannot migrate format {version!r} "
            f"(this ConceptLens migrates 1.x to {schema.SCHEMA_VERSION})"
        )
    done = []
    fdir = ws.root / "features"
    moved = 0
    for f in sorted(fdir.glob("*.parquet")) if fdir.is_dir() else []:
        dest = ws.table_path("features", checkpoint_id=f.stem)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(f, dest)
        moved += 1
    done.append(f"moved {moved} features file(s) into partitions")

    def read(name):
        p = ws.root / name
        return pq.read_table(p).to_pandas() if p.exists() else None

    ck = read("checkpoints.parquet")
    dataset_of = dict(zip(ck["checkpoint_id"], ck["dataset"])) if ck is not None else {}
    clusters = read("clusters.parquet")
    if clusters is not None:
        done.append(f"clusters: {_partitions_of(ws, 'clusters', clusters)} partition(s)")
    cm = read("cluster_metrics.parquet")
    if cm is not None:
        meta_fn = _clusters_fingerprint if clusters is not None else None
        n = _partitions_of(ws, "cluster_metrics", cm)
        cap_cols = [c.name for c in schema.TABLES_BY_NAME["cluster_captions"].columns if c.name in cm.columns]
        _partitions_of(ws, "cluster_captions", cm[cap_cols], metadata=meta_fn)
        done.append(f"cluster_metrics and cluster_captions: {n} partition(s) each")
    km = read("checkpoint_metrics.parquet")
    if km is not None:
        meta_fn = _clusters_fingerprint if clusters is not None else None
        n = _partitions_of(ws, "checkpoint_metrics", km, metadata=meta_fn)
        done.append(f"checkpoint_metrics: {n} partition(s)")
    proj = read("projections.parquet")
    if proj is not None:
        done.append(f"projections: {_partitions_of(ws, 'projections', proj)} partition(s)")
    if km is not None and clusters is not None and ck is not None:
        runner.run(ws.root, "comparisons", progress_bars=progress, with_dependencies=False, force=True)
        done.append(
            "comparisons computed (clid_scores, predictor_correlations, clustering_similarity, cluster_links)"
        )
    elif km is not None:
        # Without clusterings there is nothing to compare; keep CLID as 1.0 had it.
        km["dataset"] = km["checkpoint_id"].map(dataset_of)
        _partitions_of(ws, "clid_scores", km.dropna(subset=["dataset"]))
    done += _add_columns(ws, "2.0")
    ws.write_meta({**meta, "schema_version": schema.SCHEMA_VERSION})
    done.append(f"workspace.json: format {version} -> {schema.SCHEMA_VERSION}")
    return done + _remove_v1(ws)


def _minor(version: str) -> int:
    parts = version.split(".")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def _add_columns(ws: Workspace, version: str) -> list[str]:
    """Write the columns added after `version` into every file of their table that lacks
    them, as nulls. A file already holding them is left as it is, so a stopped migration
    finishes on the next run."""
    done = []
    for since, name, col in ADDED_COLUMNS:
        if _minor(since) <= _minor(version):
            continue
        typ = schema.arrow_type(schema.TABLES_BY_NAME[name].column(col).type)
        n = 0
        for f in ws.files(name):
            if col in pq.read_schema(f).names:
                continue
            t = pq.read_table(f)
            atomic_write_table(f, t.append_column(pa.field(col, typ, nullable=True), pa.nulls(len(t), typ)))
            n += 1
        if n:
            done.append(f"{name}: column {col} added (null) to {n} file(s)")
    return done


def legacy_done(ws: Workspace) -> list[tuple]:
    """(analysis, unit) pairs whose stored fingerprint is of the pre-2.1 kind and matches
    their inputs here: done, and to be re-keyed. Read before anything is rewritten."""
    ctx = Context(ws, progress=False)
    out = []
    for a in runner.in_order([a.name for a in registered()]):
        opts = a.option_defaults()
        try:
            units = a.units(ctx, opts, EVERYTHING)
        except (WorkspaceError, ValueError):
            continue
        last = a.writes[-1]
        for u in units:
            part = a.partition_of(last, u)
            if not ws.has(last, **part):
                continue
            stored = ws.read_metadata(last, **part).get("inputs")
            if stored is None or stored == a.inputs(ctx, u, opts):
                continue
            with legacy_signatures():
                if stored == a.inputs(ctx, u, opts):
                    out.append((a, u))
    return out


def _rekey(ws: Workspace, done: list[tuple]) -> list[str]:
    """Store the current fingerprint of each unit of `done`, in dependency order (a unit's
    inputs may be the files rewritten before it)."""
    ctx = Context(ws, progress=False)
    for a, u in done:
        last = a.writes[-1]
        part = a.partition_of(last, u)
        md = ws.read_metadata(last, **part)
        inputs = a.inputs(ctx, u, a.option_defaults())
        ws.write(last, ws.read(last, **part), metadata={**md, "inputs": inputs}, **part)
    return [f"fingerprints of {len(done)} analysed unit(s) now independent of the folder"] if done else []


def _remove_v1(ws: Workspace) -> list[str]:
    gone = [n for n in V1_FILES if (ws.root / n).exists()]
    for n in gone:
        (ws.root / n).unlink()
    return [f"removed the 1.0 file(s) {', '.join(gone)}"] if gone else []
