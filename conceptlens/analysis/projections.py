"""`conceptlens analyze projections`: a 2-D UMAP of each checkpoint's features."""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa

from .. import rng as rngs
from .. import schema
from ..metrics import nearest_cosine
from ..schema import FLOAT, STRING, Column, Table
from .base import Analysis, Option, Scope, Unit, checkpoints_with_features
from .common import Context

TABLE = Table(
    "projections",
    "projections",
    "2-D projections of a checkpoint's features (e.g. UMAP), or of a dataset's psychological "
    "embedding, for plotting.",
    (
        Column(
            "checkpoint_id",
            STRING,
            "Checkpoint (partition folder); `psych@DATASET` is the "
            "psychological embedding of DATASET (`conceptlens analyze similarity`).",
            references="checkpoints.checkpoint_id",
            pseudo_references=("psych@", "psych_embedding.dataset"),
        ),
        Column("method", STRING, "Projection method, e.g. `umap` (partition folder)."),
        Column("image_id", STRING, "Image.", references="images.image_id"),
        Column("x", FLOAT, "First coordinate.", finite=True),
        Column("y", FLOAT, "Second coordinate.", finite=True),
    ),
    key=("checkpoint_id", "method", "image_id"),
    partition=("checkpoint_id", "method"),
)


def umap_2d(Xn: np.ndarray, seed: int, fit_max: int = 10_000) -> np.ndarray:
    """2-D UMAP (cosine); above `fit_max` points it is fitted on a seeded sample.

    Up to `fit_max` points the exact neighbour graph is ours (blocked, exact) and
    handed to UMAP, which then skips its approximate search (and its slow JIT).
    """
    import umap

    n_neighbors = max(2, min(15, len(Xn) - 1))
    # A fixed random_state makes UMAP single-threaded; say so to silence its warning.
    # 200 epochs (UMAP's own choice above 10,000 points) at every size: layouts are
    # good enough for browsing and small datasets no longer pay 500.
    kw = dict(
        n_components=2, n_neighbors=n_neighbors, metric="cosine", random_state=seed, n_jobs=1, n_epochs=200
    )
    if len(Xn) <= fit_max:
        sims, idx = nearest_cosine(Xn, Xn, k=n_neighbors, normalized=True)
        knn = (idx, np.maximum(0.0, 1.0 - sims).astype(np.float32))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*knn_search_index.*")
            return umap.UMAP(precomputed_knn=knn, **kw).fit_transform(Xn)
    sample = rngs.stream(seed, "projections.fit_sample").choice(len(Xn), fit_max, replace=False)
    reducer = umap.UMAP(**kw).fit(Xn[sample])
    return reducer.transform(Xn)


def _units(ctx: Context, opts: dict, scope: Scope) -> list[Unit]:
    cids = checkpoints_with_features(ctx, opts, scope)
    return [Unit({"checkpoint_id": c, "method": "umap"}, c) for c in cids]


def _run(ctx: Context, unit: Unit, opts: dict, scope: Scope) -> None:
    cid = unit.partition["checkpoint_id"]
    ids, Xn = ctx.normalized(cid)
    xy = umap_2d(Xn, opts["seed"], opts["umap_fit_max"])
    ctx.ws.write(
        "projections",
        pa.table(
            {
                "image_id": pa.array(list(ids), pa.string()),
                "x": xy[:, 0].astype(np.float64),
                "y": xy[:, 1].astype(np.float64),
            },
            schema=schema.arrow_schema("projections", partition=False),
        ),
        metadata=ANALYSIS.done_metadata(opts, None),
        checkpoint_id=cid,
        method="umap",
    )


ANALYSIS = Analysis(
    name="projections",
    title="2-D UMAP of each checkpoint's features",
    writes=("projections",),
    tables=(TABLE,),
    units=_units,
    run=_run,
    options=(
        Option(
            "umap_fit_max",
            int,
            10_000,
            "above this many images UMAP is fitted on a seeded sample",
            minimum=100,
        ),
    ),
    doc=__doc__.splitlines()[0],
)
