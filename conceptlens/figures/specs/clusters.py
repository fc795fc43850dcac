"""The Clusters page's figures (pages/clusters.py)."""

from __future__ import annotations

from ..catalog import Figure, Param, Unavailable, add
from ._common import CKPT, DS_CLUSTERED, K_OF_CKPT, C, col, needs


def _cluster_table(db, p):
    return C.cluster_table(db, p["ds"], p["ckpt"], p["k"], captions=db.has("cluster_captions"))


def _umap(db, p):
    from ..clusters import projection_scatter

    pts = needs(C.projection(db, p["ckpt"], p["k"], "umap", limit=20_000), f"no UMAP of {p['ckpt']}")
    return projection_scatter(pts, color=p["color"])


def _umap_density(db, p):
    from ...views import projection_window as W
    from ..projection import projection_density

    whole, _ = W.whole_viewport(db, p["ckpt"], "umap")
    if whole is None:
        raise Unavailable(f"no UMAP of {p['ckpt']}")
    bins = W.binned(db, p["ckpt"], p["k"], whole, "umap", W.BINS)
    return projection_density(bins, whole, W.BINS, value=p["density"])


def _cluster_labels(db, p):
    from ..clusters import label_histogram

    images = C.selection_images(db, p["ckpt"], p["k"], (p["cluster"],))
    return label_histogram(C.label_counts(images))


def _purity_coherence(db, p):
    from ..clusters import purity_coherence

    return purity_coherence(_cluster_table(db, p))


CLUSTERS = (DS_CLUSTERED, CKPT, K_OF_CKPT)
add(
    Figure(
        "clusters",
        "purity_coherence",
        "Purity vs coherence (laina2020 Fig. 2)",
        CLUSTERS,
        _purity_coherence,
        aspect=0.75,
        tables=("cluster_metrics",),
    )
)
add(
    Figure(
        "clusters",
        "umap",
        "UMAP of the features",
        CLUSTERS
        + (Param("color", lambda db, p: col(C.colour_options(db, p["ds"]), "column"), help="colour by"),),
        _umap,
        aspect=0.85,
        tables=("cluster_metrics", "projections"),
    )
)
# The page's overview of a UMAP too large to draw point by point (not among the defaults:
# below the page's limit the page draws the points, figure `umap`).
add(
    Figure(
        "clusters",
        "umap_density",
        "UMAP of the features, binned",
        CLUSTERS + (Param("density", lambda db, p: ["images", "purity"], help="bins coloured by"),),
        _umap_density,
        aspect=0.85,
        tables=("cluster_metrics", "projections"),
        default=False,
    )
)
add(
    Figure(
        "clusters",
        "selection_labels",
        "Labels of one cluster's images",
        CLUSTERS
        + (
            Param(
                "cluster",
                lambda db, p: [int(c) for c in col(_cluster_table(db, p), "cluster")],
                kind=int,
                help="cluster",
            ),
        ),
        _cluster_labels,
        aspect=0.75,
        tables=("cluster_metrics", "clusters"),
    )
)
