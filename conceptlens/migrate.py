"""`conceptlens migrate W`: rewrite a workspace of format 1.0 in the current format (2.0).

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
"""

from __future__ import annotations

import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from . import schema
from .errors import ConceptLensError
from .workspace import Workspace

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
    # What the registry stores to know a clustering's metrics are up to date: the same function.
    from .analysis.cluster_metrics import clustering_fingerprint
    from .analysis.common import Context
    from .analysis.registry import Unit

    unit = Unit({"checkpoint_id": part["checkpoint_id"], "k": part["k"]})
    return {"inputs": clustering_fingerprint(Context(ws, progress=False), unit)}


def migrate(root, progress: bool = True) -> list[str]:
    """Migrate the workspace at `root` in place; returns what was done (empty if nothing)."""
    ws = Workspace(root)
    meta = ws.meta()
    version = str(meta.get("schema_version", ""))
    major = version.split(".")[0]
    if major == schema.SCHEMA_MAJOR:
        return _remove_v1(ws)
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
        from .analysis import registry

        registry.run(ws.root, "comparisons", progress_bars=progress, with_dependencies=False, force=True)
        done.append(
            "comparisons computed (clid_scores, predictor_correlations, clustering_similarity, cluster_links)"
        )
    elif km is not None:
        # Without clusterings there is nothing to compare; keep CLID as 1.0 had it.
        km["dataset"] = km["checkpoint_id"].map(dataset_of)
        _partitions_of(ws, "clid_scores", km.dropna(subset=["dataset"]))
    ws.write_meta({**meta, "schema_version": schema.SCHEMA_VERSION})
    done.append(f"workspace.json: format {version} -> {schema.SCHEMA_VERSION}")
    return done + _remove_v1(ws)


def _remove_v1(ws: Workspace) -> list[str]:
    gone = [n for n in V1_FILES if (ws.root / n).exists()]
    for n in gone:
        (ws.root / n).unlink()
    return [f"removed the 1.0 file(s) {', '.join(gone)}"] if gone else []
