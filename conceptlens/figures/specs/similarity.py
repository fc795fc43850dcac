"""The Similarity page's figures (pages/similarity.py)."""

from __future__ import annotations

from ...views import similarity as V
from ..catalog import Figure, Param, add, image_source, view
from .common import col, needs


def _embedded(db, p) -> list:
    d = view(db, V.datasets)
    return list(d.loc[d["embedded"].astype(bool), "dataset"]) if len(d) else []


THUMBS = {"none": 0, "some": 8, "many": 14}  # grid cells per side that get a thumbnail
MAX_POINTS = 20_000  # map points drawn (a fixed sample above this)
NEIGHBOURS = 8  # nearest images of the selected one
SIM_DS = Param("ds", _embedded, help="dataset with a psychological embedding")


def _sim_map(db, p):
    from ..similarity import embedding_map, thumbnail_sample, thumbnail_uris

    points = needs(view(db, V.embedding_points, dataset=p["ds"], limit=MAX_POINTS), "no embedding map")
    shown = set(thumbnail_sample(points, THUMBS[p["thumbs"]]))
    uris = thumbnail_uris(
        {i: image_source(db, t) for i, t in zip(points["image_id"], points["thumbnail"]) if i in shown}
    )
    # The page's selected image (`img`) is ringed with its nearest images for people.
    people_near = []
    if p.get("img") is not None:
        near = view(db, V.neighbours, dataset=p["ds"], image_id=p["img"], checkpoint=None, k=NEIGHBOURS)
        people_near = list(near.loc[near["who"] == "people", "image_id"])
    return embedding_map(points, p["color"], uris, p.get("img"), people_near)


def _sim_agreement(db, p):
    from ..similarity import agreement_bars

    alignment = needs(view(db, V.alignment, dataset=p["ds"]), "no checkpoint scored")
    ref = view(db, V.people_reference, dataset=p["ds"])
    reference = float(ref["value"].iloc[0]) if len(ref) and ref["value"].notna().all() else None
    return agreement_bars(alignment, p["dist"], reference)


def _sim_labels(db, p):
    from ..similarity import label_heatmap

    return label_heatmap(
        view(db, V.by_label, dataset=p["ds"], metric=p["metric"], distance=p["dist"]), p["metric"], p["dist"]
    )


def _sim_fit(db, p):
    from ..similarity import fit_diagnostics

    return fit_diagnostics(needs(view(db, V.fit, dataset=p["ds"]), "no fit"))


def _sim_convergence(db, p):
    from ..similarity import convergence_curves

    return convergence_curves(needs(view(db, V.convergence, dataset=p["ds"]), "no convergence rounds"))


def _dist_names():
    from ..similarity import DISTANCE_NAMES

    return list(DISTANCE_NAMES)


def _metric_names():
    from ..similarity import METRICS

    return list(METRICS)


SIM_DIST = Param("dist", lambda db, p: _dist_names(), default="cosine", help="l1, l2 or cosine")
SIM = ("similarity",)
add(
    Figure(
        "similarity",
        "psych_umap",
        "People's similarity map",
        (
            SIM_DS,
            Param(
                "color",
                lambda db, p: col(view(db, V.colour_options, dataset=p["ds"]), "column"),
                help="colour by",
            ),
            Param("thumbs", lambda db, p: list(THUMBS), default_index=1, help="thumbnails"),
            Param(
                "img",
                lambda db, p: list(view(db, V.embedded_images, dataset=p["ds"])["image_id"]),
                optional=True,
                help="selected image (ringed, with its nearest for people)",
            ),
        ),
        _sim_map,
        aspect=0.85,
        steps=SIM,
    )
)
add(
    Figure(
        "similarity",
        "agreement",
        "Agreement with people",
        (SIM_DS, SIM_DIST),
        _sim_agreement,
        aspect=0.62,
        steps=SIM,
    )
)
add(
    Figure(
        "similarity",
        "by_label",
        "Agreement per label",
        (SIM_DS, Param("metric", lambda db, p: _metric_names(), help="triplet_accuracy or rsa"), SIM_DIST),
        _sim_labels,
        aspect=0.9,
        steps=SIM,
    )
)
add(
    Figure(
        "similarity",
        "fit",
        "Fit diagnostics",
        (SIM_DS,),
        _sim_fit,
        aspect=0.62,
        steps=("similarity_trials",) + SIM,
    )
)
add(
    Figure(
        "similarity",
        "convergence",
        "Convergence of the embedding",
        (SIM_DS,),
        _sim_convergence,
        aspect=0.62,
        steps=("convergence",),
    )
)
