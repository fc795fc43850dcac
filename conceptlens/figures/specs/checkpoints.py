"""The Checkpoints page's figures (pages/checkpoints.py)."""

from __future__ import annotations

from ...errors import ConceptLensError
from ..catalog import Figure, Param, Unavailable, add
from ._common import DS_CLUSTERED, K_OF_DS, C, K, needs, order


def _compared(db) -> bool:
    return all(db.has(t) for t in getattr(K, "COMPARISON_TABLES", ("clid_scores",)))


def _cl_id(db, p):
    from ..checkpoints import cl_id_scatter, default_labels, short_names

    summary = needs(K.summary(db, p["ds"], p["k"], clid=_compared(db)), "no checkpoint metrics")
    short = dict(zip(summary["checkpoint_id"], short_names(summary["checkpoint_id"])))
    return cl_id_scatter(summary, labels={c: short[c] for c in default_labels(summary)})


def _correlations(db, p):
    from ..checkpoints import correlation_forest

    return correlation_forest(needs(K.predictor_correlations(db, p["ds"], p["k"]), "no correlations"))


def _transfer(db, p):
    from ..checkpoints import correlation_forest

    corr = needs(K.transfer_correlations(db, p["ds"], p["k"], p["target"]), "no transfer correlations")
    return correlation_forest(corr, target=f"transfer acc. ({p['target']})")


def _metric_options(db, p) -> list:
    curves = K.training(db, p["ds"], p["k"], clid=_compared(db))
    return [str(m) for m in dict.fromkeys(curves["metric"].astype(str))] if len(curves) else []


def _epochs(db, p):
    from ..checkpoints import metrics_vs_epoch

    return metrics_vs_epoch(K.training(db, p["ds"], p["k"], clid=_compared(db)), p["metric"])


def _anmi(db, p):
    from ..checkpoints import anmi_heatmap

    if len(order(db, p)) < 2:
        raise Unavailable("fewer than two clustered checkpoints")
    return anmi_heatmap(K.anmi_matrix(db, p["ds"], p["k"]))


def _sankey(db, p):
    from ..checkpoints import cluster_sankey

    if p["a"] == p["b"]:
        raise ConceptLensError("parameters a and b: choose two different checkpoints")
    pair = dict(dataset=p["ds"], k=p["k"], a=p["a"], b=p["b"], min_share=p["min_share"])
    links = K.cluster_links(db, **pair, flows=p["flows"])
    captions = db.has("cluster_captions")
    meta_a = C.cluster_table(db, p["ds"], p["a"], p["k"], captions=captions)
    meta_b = C.cluster_table(db, p["ds"], p["b"], p["k"], captions=captions)
    return cluster_sankey(links, meta_a, meta_b, name_a="A", name_b="B")


CHECKPOINTS = (DS_CLUSTERED, K_OF_DS)
PAIR = (Param("a", order, help="checkpoint A"), Param("b", order, default_index=1, help="checkpoint B"))
add(
    Figure(
        "checkpoints",
        "cl_id",
        "CL vs ID (lu2022 Fig. 1)",
        CHECKPOINTS,
        _cl_id,
        aspect=0.75,
        tables=("checkpoint_metrics",),
    )
)
add(
    Figure(
        "checkpoints",
        "predictor_correlations",
        "Correlation with kNN accuracy (lu2022 Table 1)",
        CHECKPOINTS,
        _correlations,
        aspect=0.6,
        tables=("predictor_correlations",),
    )
)
add(
    Figure(
        "checkpoints",
        "transfer_correlations",
        "Correlation with transfer accuracy (lu2022 section 3.5)",
        CHECKPOINTS
        + (Param("target", lambda db, p: K.transfer_targets(db, p["ds"]), help="target dataset"),),
        _transfer,
        aspect=0.6,
        tables=("transfer_correlations",),
    )
)
add(
    Figure(
        "checkpoints",
        "metrics_vs_epoch",
        "A metric over training",
        CHECKPOINTS + (Param("metric", _metric_options, help="metric"),),
        _epochs,
        aspect=0.62,
        tables=("checkpoint_metrics",),
    )
)
add(
    Figure(
        "checkpoints",
        "anmi_matrix",
        "aNMI between clusterings",
        CHECKPOINTS,
        _anmi,
        aspect=0.9,
        tables=("clustering_similarity",),
    )
)
add(
    Figure(
        "checkpoints",
        "cluster_sankey",
        "Cluster matching A -> B",
        CHECKPOINTS
        + PAIR
        + (
            Param("min_share", default=0.2, kind=float, help="significant share"),
            Param("flows", lambda db, p: list(K.FLOWS), help="which flows"),
        ),
        _sankey,
        aspect=1.0,
        tables=("clusters",),
    )
)
