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
from .common import Context, default_k
from .registry import Analysis, Option, Unit


def kmeans(
    Xn: np.ndarray, k: int, n_init: int, seed: int, engine: str = "auto"
) -> tuple[np.ndarray, np.ndarray]:
    """Labels and each point's distance to its centroid (fixed restarts; metrics.kmeans)."""
    from ..metrics import kmeans as fit_kmeans

    if not 2 <= k <= len(Xn):
        raise ValueError(f"k={k} must be in [2, {len(Xn)}] (number of images)")
    fit = fit_kmeans(Xn, k, n_init, seed, engine)
    return fit.labels, np.linalg.norm(Xn - fit.centres[fit.labels], axis=1)


def checkpoints_with_features(ctx: Context, opts: dict) -> list[str]:
    """Checkpoints of checkpoints.parquet with a features partition (or the one asked for).

    Without `--checkpoint`, checkpoints that declare `concept_names` are left out: their
    features are k learnt concepts side by side, which the `concepts` analysis measures;
    k-means over them is not a question any of the papers asks. Name one to cluster it."""
    wanted = opts.get("_checkpoint")
    ck = ctx.checkpoints
    if wanted is None and "concept_names" in ck.columns:
        ck = ck[ck["concept_names"].isna()]
    cids = [c for c in ck["checkpoint_id"] if wanted is None or c == wanted]
    return [c for c in cids if ctx.ws.has("features", checkpoint_id=c)]


def _units(ctx: Context, opts: dict) -> list[Unit]:
    out = []
    clustered = {}
    for p in ctx.ws.partitions("clusters"):
        clustered.setdefault(p["checkpoint_id"], []).append(p["k"])
    for cid in checkpoints_with_features(ctx, opts):
        ks = opts["k"]
        if not ks and cid in clustered:
            ks = sorted(clustered[cid])  # no k asked for: the clusterings it has
        elif not ks:
            # The number of rows is in the Parquet footer: no embedding is read to decide k.
            n = pq.ParquetFile(ctx.ws.table_path("features", checkpoint_id=cid)).metadata.num_rows
            ks = [default_k(n)]
        out += [Unit({"checkpoint_id": cid, "k": int(k)}, cid) for k in ks]
    return out


def _run(ctx: Context, unit: Unit, opts: dict) -> None:
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
        checkpoint_id=cid,
        k=k,
    )


ANALYSIS = Analysis(
    name="clustering",
    title="k-means clusters of each checkpoint's features",
    writes=("clusters",),
    units=_units,
    run=_run,
    page="Clusters",
    options=(
        Option(
            "k",
            int,
            None,
            "numbers of clusters (default round(sqrt(N)) per checkpoint)",
            multiple=True,
            minimum=2,
        ),
        Option(
            "n_init",
            int,
            3,
            "k-means restarts (with scikit-learn each costs about 5 N x N x d products at k = sqrt(N))",
            minimum=1,
        ),
        Option(
            "kmeans",
            str,
            "auto",
            "k-means implementation: `sklearn`, `faiss` (k-means++ starts compared after 5 Lloyd "
            "iterations, the best run to 15, every point used; needs faiss-cpu) or `auto` (faiss "
            "from 20,000 images if installed)",
        ),
    ),
    doc=__doc__.splitlines()[0],
)
