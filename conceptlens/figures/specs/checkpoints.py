"""The Checkpoints page's figures (pages/checkpoints.py)."""

from __future__ import annotations

from ...errors import ConceptLensError
from ...views import aligned as A
from ...views import training as T
from ..catalog import Figure, Param, Unavailable, add, usable, view
from ..checkpoints import SANKEY_ASPECT
from .clusters import REGION, region
from .common import DS_CLUSTERED, K_OF_DS, C, K, needs, order

UMAP_POINTS = 10_000  # points per linked UMAP (a fixed sample above this, the same for A and B)


def _compared(db) -> bool:
    return all(db.has(t) for t in K.COMPARISON_TABLES)


def _cl_id(db, p):
    from ..checkpoints import cl_id_scatter, default_labels, short_names

    summary = view(db, K.summary, dataset=p["ds"], k=p["k"], clid=_compared(db))
    needs(summary, "no checkpoint metrics")
    short = dict(zip(summary["checkpoint_id"], short_names(summary["checkpoint_id"])))
    # Checkpoints A and B (the page's choice) are named by their role, then the extremes.
    labels = {c: f"{role}: {short[c]}" for role, c in (("A", p["a"]), ("B", p["b"])) if c in short}
    labels |= {c: short[c] for c in default_labels(summary) if c not in labels}
    return cl_id_scatter(summary, labels=labels)


def _correlations(db, p):
    from ..checkpoints import correlation_forest

    return correlation_forest(
        needs(view(db, K.predictor_correlations, dataset=p["ds"], k=p["k"]), "no correlations"),
        over=_population(db, p),
    )


def _population(db, p) -> str | None:
    """The population the stored correlations of the dataset are over, as the axis says it."""
    from ...analysis.comparisons import POPULATION_NAMES  # local: the analyses load on use

    stored = view(db, K.stored_population, dataset=p["ds"])
    return POPULATION_NAMES[stored] if stored else None


def _transfer(db, p):
    from ..checkpoints import correlation_forest

    corr = view(db, K.transfer_correlations, dataset=p["ds"], k=p["k"], target=p["target"])
    needs(corr, "no transfer correlations")
    return correlation_forest(corr, target=f"transfer acc. ({p['target']})", over=_population(db, p))


def _metric_options(db, p) -> list:
    curves = view(db, K.training, dataset=p["ds"], k=p["k"], clid=_compared(db))
    return [str(m) for m in dict.fromkeys(curves["metric"].astype(str))] if len(curves) else []


def _epochs(db, p):
    from ..checkpoints import metrics_vs_epoch

    return metrics_vs_epoch(view(db, K.training, dataset=p["ds"], k=p["k"], clid=_compared(db)), p["metric"])


def _anmi(db, p):
    from ..checkpoints import anmi_heatmap

    if len(order(db, p)) < 2:
        raise Unavailable("fewer than two clustered checkpoints")
    return anmi_heatmap(view(db, K.anmi_matrix, dataset=p["ds"], k=p["k"]))


def _sankey(db, p):
    from ..checkpoints import cluster_sankey

    if p["a"] == p["b"]:
        raise ConceptLensError("parameters a and b: choose two different checkpoints")
    if p["top"] < 0:
        raise ConceptLensError(f"parameter top: {p['top']} is negative (0 draws all of A's clusters)")
    pair = dict(dataset=p["ds"], k=p["k"], a=p["a"], b=p["b"], min_share=p["share"])
    links = view(db, K.cluster_links, **pair, flows=p["flows"], largest=p["top"] or None)
    # Captions only add to the hover text: broken or missing, the Sankey goes without.
    captions = usable(db, "cluster_captions")
    meta_a = view(db, C.cluster_table, dataset=p["ds"], checkpoint=p["a"], k=p["k"], captions=captions)
    meta_b = view(db, C.cluster_table, dataset=p["ds"], checkpoint=p["b"], k=p["k"], captions=captions)
    headers = (f"A: {p['a']}", f"B: {p['b']}")
    return cluster_sankey(links, meta_a, meta_b, name_a="A", name_b="B", headers=headers)


CHECKPOINTS = (DS_CLUSTERED, K_OF_DS)
PAIR = (Param("a", order, help="checkpoint A"), Param("b", order, default_index=1, help="checkpoint B"))


def _tops(db, p) -> list[int]:
    """How many of A's largest clusters the Sankey draws (0: all)."""
    return [n for n in (5, 10, 20, 40) if n < p["k"]] + [0]


TOP = Param(
    "top", _tops, default=lambda db, p: 10 if 10 in _tops(db, p) else 0, kind=int, help="A's clusters drawn"
)
add(
    Figure(
        "checkpoints",
        "cl_id",
        "CL vs ID (lu2022 Fig. 1)",
        CHECKPOINTS + PAIR,
        _cl_id,
        aspect=0.75,
        steps=("cluster_metrics",),
        optional=("comparisons",),
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
        steps=("comparisons",),
    )
)
add(
    Figure(
        "checkpoints",
        "transfer_correlations",
        "Correlation with transfer accuracy (lu2022 section 3.5)",
        CHECKPOINTS
        + (
            Param(
                "target", lambda db, p: view(db, K.transfer_targets, dataset=p["ds"]), help="target dataset"
            ),
        ),
        _transfer,
        aspect=0.6,
        steps=("comparisons",),
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
        steps=("cluster_metrics",),
        optional=("comparisons",),
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
        steps=("cluster_metrics", "comparisons"),
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
            Param("share", default=0.2, kind=float, help="significant share"),
            Param("flows", lambda db, p: list(K.FLOWS), help="which flows"),
            TOP,
        ),
        _sankey,
        aspect=SANKEY_ASPECT,
        steps=("clustering", "cluster_metrics"),
        optional=("cluster_captions",),
    )
)


def _linked_colours(db, p) -> list:
    return list(view(db, K.linked_colours, dataset=p["ds"])["column"])


def _linked_umap(db, p):
    """A's or B's UMAP (`side`), coloured alike; the images of a region drawn on A are
    highlighted in both (the page's linked selection)."""
    from ..checkpoints import highlight_images, short_names
    from ..clusters import projection_scatter

    side, ckpt = p["side"], p[p["side"]]
    pair = dict(dataset=p["ds"], k=p["k"], a=p["a"], b=p["b"])
    pts = view(db, K.linked_projection, **pair, side=side, colour=p["color"], limit=UMAP_POINTS)
    needs(pts, f"no UMAP of {ckpt}")
    ids = order(db, p)
    short = dict(zip(ids, short_names(ids)))
    region = p.get("region")
    fig = projection_scatter(
        pts,
        color=p["color"],
        title=f"{side.upper()}: {short.get(ckpt, ckpt)}",
        categorical=True if p["color"] in ("cluster in A", "cluster in B") else None,
        region=C.parse_region(region) if region and side == "a" else None,
    )
    picked = view(db, C.region_images, checkpoint=p["a"], k=p["k"], region=region) if region else None
    fig = highlight_images(fig, [] if picked is None else list(picked["image_id"]))
    # Past a dozen categories (71 clusters) the hover names a point's category instead.
    return fig.update_layout(showlegend=len(fig.data) <= 12)


add(
    Figure(
        "checkpoints",
        "linked_umap",
        "A's images in B's UMAP",
        CHECKPOINTS
        + PAIR
        + (
            Param("side", lambda db, p: ["a", "b"], help="which UMAP: a or b"),
            Param(
                "color",
                lambda db, p: list(view(db, K.linked_colours, dataset=p["ds"])["column"]),
                help="colour both by",
            ),
            REGION,
        ),
        _linked_umap,
        aspect=0.85,
        steps=("projections", "clustering", "cluster_metrics"),
    )
)


# ---- a training run (issue 27): the timeline of concept events and the learning curves,
# drawn on the page by components/training_section.py
KINDS = {"changes": T.CHANGE_KINDS, "all": (*T.CHANGE_KINDS, "continuation")}
CAPS = (30, 15, 60, 0)  # events drawn at most (0: all); the first is the default


def _run_datasets(db, p) -> list[str]:
    out: set[str] = set()
    for table in ("concept_events", "learning_curves"):
        if db.has(table):
            out |= set(db.query(f"SELECT DISTINCT dataset FROM {table}")["dataset"].astype(str))
    return sorted(out)


RUN_DS = Param("ds", _run_datasets, help="dataset")
RUN = Param(
    "run",
    lambda db, p: view(db, T.runs, dataset=p["ds"]),
    help="sequence: a training run, or RUN@depth[.eN] for the layers of one network",
)


def _timeline(db, p):
    from ..training import event_timeline

    events = view(db, T.events, dataset=p["ds"], run=p["run"], kinds=KINDS[p["kinds"]])
    needs(events, f"no {p['kinds']} events in run {p['run']}")
    epochs = view(db, T.epochs, dataset=p["ds"], run=p["run"])
    return event_timeline(events, epochs, cap=p["cap"], axis=T.axis(p["run"]))


def _curves(db, p):
    from ..training import learning_curves

    axis = T.axis(p["run"])
    if p["factor"] == "all":
        curves = view(db, T.curves, dataset=p["ds"], run=p["run"], factor=None)
        return learning_curves(needs(curves, f"no learning curves of run {p['run']}"), by="factor", axis=axis)
    curves = view(db, T.curves, dataset=p["ds"], run=p["run"], factor=p["factor"])
    curves = needs(curves[curves["value"].notna()], f"no learning curves of {p['factor']}")
    return learning_curves(curves, by="value", axis=axis)


add(
    Figure(
        "checkpoints",
        "event_timeline",
        "Concept events along training or depth",
        (
            RUN_DS,
            RUN,
            Param("kinds", lambda db, p: list(KINDS), help="changes: splits, merges, births, deaths"),
            Param("cap", lambda db, p: list(CAPS), kind=int, help="events drawn at most (0: all)"),
        ),
        _timeline,
        aspect=1.2,
        steps=("concept_events",),
    )
)
add(
    Figure(
        "checkpoints",
        "learning_curves",
        "Learning curves along training or depth",
        (
            RUN_DS,
            RUN,
            Param(
                "factor",
                lambda db, p: ["all", *view(db, T.factors, dataset=p["ds"], run=p["run"])],
                help="all: one line per factor; else one per value",
            ),
        ),
        _curves,
        aspect=0.75,
        steps=("learning_curves",),
    )
)


# ---- aligned projections along a sequence (issue 27), drawn by components/aligned_section.py
def _aligned_datasets(db, p) -> list[str]:
    if not db.has("aligned_projections"):
        return []
    return sorted(db.query("SELECT DISTINCT dataset FROM aligned_projections")["dataset"].astype(str))


def _aligned_points(db, p):
    pts = view(db, A.points, dataset=p["ds"], run=p["run"], colour=p["acolor"])
    return needs(pts, f"no aligned projections of run {p['run']}")


def _selected(db, p, frames) -> list[str] | None:
    """The images of the region drawn on frame `aat` (its epoch, or step without epochs)."""
    if not p.get("aregion") or p.get("aat") is None:
        return None
    at = A.frame_step(frames, p["aat"])
    if at is None:
        raise ConceptLensError(f"parameter aat: {p['aat']} is not a frame of run {p['run']}")
    return view(db, A.region_ids, dataset=p["ds"], run=p["run"], step=at, region=p["aregion"])


def _aligned(db, p):
    from ..aligned import aligned_frames

    pts = _aligned_points(db, p)
    frames = view(db, A.frames, dataset=p["ds"], run=p["run"])
    shown = [int(frames["step"].iloc[i]) for i in A.evenly(len(frames), A.SMALL_MULTIPLES)]
    return aligned_frames(
        pts, colour=p["acolor"], steps=shown, ids=_selected(db, p, frames), axis=T.axis(p["run"])
    )


def _drift(db, p):
    from ..aligned import drift_lines

    return drift_lines(
        A.drift_by(_aligned_points(db, p), p["acolor"]), colour=p["acolor"], axis=T.axis(p["run"])
    )


ALIGNED = (
    Param("ds", _aligned_datasets, help="dataset"),
    Param("run", lambda db, p: view(db, A.runs, dataset=p["ds"]), help="training run"),
    Param("acolor", lambda db, p: view(db, A.colours, dataset=p["ds"]), help="colour by"),
)


add(
    Figure(
        "checkpoints",
        "aligned_frames",
        "Aligned projections along training",
        (
            *ALIGNED,
            Param(
                "aregion", kind=region, optional=True, help="region drawn on a frame (box:... or lasso:...)"
            ),
            Param("aat", kind=int, optional=True, help="the frame the region was drawn on (its epoch)"),
        ),
        _aligned,
        aspect=1.3,
        steps=("aligned_projections",),
    )
)
add(
    Figure(
        "checkpoints",
        "aligned_drift",
        "Drift of the images along training",
        ALIGNED,
        _drift,
        aspect=0.75,
        steps=("aligned_projections",),
    )
)
