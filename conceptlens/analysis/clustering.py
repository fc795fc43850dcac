"""`conceptlens analyze clustering`: k-means of each checkpoint's L2-normalised features.

One unit per (checkpoint, k); it reads that checkpoint's features and writes its own
`clusters` partition. Without `--k`, a checkpoint not clustered yet gets
k = round(sqrt(N)), and one already clustered keeps the k's it has.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import schema
from ..metrics import kmeans as fit_kmeans
from ..metrics.neighbors import by_spans
from ..schema import FLOAT, INT, NON_NEGATIVE, STRING, Column, Table
from .base import KMEANS, N_INIT, Analysis, Option, Scope, Unit, checkpoints_with_features
from .common import Context, default_k, files_footprint

TABLE = Table(
    "clusters",
    "clusters",
    "k-means assignment of every image, per checkpoint and k.",
    (
        Column(
            "checkpoint_id",
            STRING,
            "Checkpoint clustered (partition folder).",
            references="checkpoints.checkpoint_id",
        ),
        Column("k", INT, "Number of clusters (partition folder).", positive=True),
        Column("image_id", STRING, "Image assigned.", references="images.image_id"),
        Column("cluster", INT, "Cluster index in [0, k).", bounds=NON_NEGATIVE, less_than="k"),
        Column(
            "distance",
            FLOAT,
            "Euclidean distance of the L2-normalised feature to its centroid.",
            bounds=NON_NEGATIVE,
            finite=True,
        ),
    ),
    key=("checkpoint_id", "k", "image_id"),
    partition=("checkpoint_id", "k"),
)


def kmeans(
    Xn: np.ndarray, k: int, n_init: int, seed: int, engine: str = "auto"
) -> tuple[np.ndarray, np.ndarray]:
    """Labels and each point's distance to its centroid (fixed restarts; metrics.kmeans)."""
    if not 2 <= k <= len(Xn):
        raise ValueError(f"k={k} must be in [2, {len(Xn)}] (number of images)")
    fit = fit_kmeans(Xn, k, n_init, seed, engine)
    dist = by_spans(lambda s, e: np.linalg.norm(Xn[s:e] - fit.centres[fit.labels[s:e]], axis=1), len(Xn))
    return fit.labels, dist


def _units(ctx: Context, opts: dict, scope: Scope) -> list[Unit]:
    out = []
    clustered = {}
    for p in ctx.ws.partitions("clusters"):
        clustered.setdefault(p["checkpoint_id"], []).append(p["k"])
    for cid in checkpoints_with_features(ctx, opts, scope):
        ks = opts["k"]
        if not ks and cid in clustered:
            ks = sorted(clustered[cid])  # no k asked for: the clusterings it has
        elif not ks:
            # The number of rows is in the Parquet footer: no embedding is read to decide k.
            n = pq.ParquetFile(ctx.ws.table_path("features", checkpoint_id=cid)).metadata.num_rows
            ks = [default_k(n)]
        out += [Unit({"checkpoint_id": cid, "k": int(k)}, cid) for k in ks]
    return out


def features_signature(ctx: Context, unit: Unit, opts: dict) -> str:
    """The features the unit clusters (common.files_footprint: the same in a clone)."""
    return files_footprint(ctx.ws.partition_files("features", checkpoint_id=unit.checkpoint_id))


def _run(ctx: Context, unit: Unit, opts: dict, scope: Scope) -> None:
    cid, k = unit.partition["checkpoint_id"], unit.partition["k"]
    ids, Xn = ctx.normalized(cid)
    labels, dist = kmeans(Xn, k, opts["n_init"], opts["seed"], opts["kmeans"])
    ctx.ws.write(
        "clusters",
        pa.table(
            {
                "image_id": pa.array(list(ids), pa.string()),
                "cluster": labels,
                "distance": dist.astype(np.float64),
            },
            schema=schema.arrow_schema("clusters", partition=False),
        ),
        metadata=ANALYSIS.done_metadata(opts, features_signature(ctx, unit, opts)),
        checkpoint_id=cid,
        k=k,
    )


ANALYSIS = Analysis(
    name="clustering",
    title="k-means clusters of each checkpoint's features",
    writes=("clusters",),
    tables=(TABLE,),
    units=_units,
    run=_run,
    inputs=features_signature,
    inputs_since_2_2=True,
    options=(
        Option(
            "k",
            int,
            None,
            "numbers of clusters (default round(sqrt(N)) per checkpoint)",
            multiple=True,
            minimum=2,
            changes_result=False,  # each k is its own unit
        ),
        N_INIT,
        KMEANS,
    ),
    doc=__doc__.splitlines()[0],
)
