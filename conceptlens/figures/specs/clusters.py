"""The Clusters page's figures (pages/clusters.py). Their parameters are the page's URL
keys: the clustering (`ds`, `ckpt`, `k`), the table's filters (`min_size`, `purity`, `q`),
the chosen cluster (`cluster`, ringed), the region drawn on the UMAP (`region`), the UMAP's
colour, bins and viewport (`color`, `density`, `view`) and which images the selection
holds (`sel`). The page's interactive state (a ringed cluster, a drawn region, a zoomed
viewport) is optional: the catalogue's default export draws none."""

from __future__ import annotations

import os

from ... import selections as SEL
from ...errors import ConceptLensError
from ...views import hierarchy as VH
from ...views import projection_window as W
from ..catalog import Figure, Param, Unavailable, add, usable, view
from .common import CKPT, DS_CLUSTERED, K_OF_CKPT, C, col, needs


def max_points() -> int:
    """UMAP points drawn one by one; above this the page draws the binned overview
    (`$CONCEPTLENS_MAX_POINTS`, else `projection_window.MAX_POINTS`)."""
    raw = os.environ.get("CONCEPTLENS_MAX_POINTS")
    try:
        return max(1, int(raw)) if raw else W.MAX_POINTS
    except ValueError:
        return W.MAX_POINTS


def purity_range(raw) -> tuple[float, float]:
    """`lo,hi` (as the page's URL keeps it) or a pair -> (lo, hi) within [0, 1]."""
    lo, hi = (float(v) for v in (raw.split(",") if isinstance(raw, str) else raw))
    if not 0 <= lo <= hi <= 1:
        raise ValueError(raw)
    return lo, hi


def viewport(raw) -> tuple[float, float, float, float]:
    """`x0,x1,y0,y1` (as the page's URL keeps it) or four numbers."""
    try:
        return W.parse_viewport(raw) if isinstance(raw, str) else W.check_viewport(raw)
    except ConceptLensError as e:
        raise ValueError(str(e)) from None


def region(raw) -> str:
    C.parse_region(raw)  # a clear ValueError on a malformed region
    return str(raw)


def _captions(db) -> bool:
    return usable(db, "cluster_captions")


def _filtered(db, p):
    """The clusters the page's filters keep (its table; the figure's order: by cluster)."""
    return view(
        db,
        C.filtered_clusters,
        dataset=p["ds"],
        checkpoint=p["ckpt"],
        k=p["k"],
        min_size=int(p["min_size"]),
        purity=tuple(p["purity"]),
        text=p["q"],
        captions=_captions(db),
        sort="cluster",
        descending=False,
    )


def _region(p):
    return C.parse_region(p["region"]) if p.get("region") else None


def _purity_coherence(db, p):
    from ..clusters import purity_coherence

    return purity_coherence(_filtered(db, p), selected=p.get("cluster"))


def _umap(db, p):
    from ..clusters import legend_above, projection_scatter

    color = p["color"]
    if p.get("level") is not None and color == "label_name":  # labels read at a level
        pts = view(
            db,
            VH.projection,
            checkpoint=p["ckpt"],
            k=p["k"],
            dataset=p["ds"],
            level=p["level"],
            within=p.get("within"),
            method="umap",
            limit=max_points(),
        )
        color = VH.group_column(p["level"])
    else:
        pts = view(db, C.projection, checkpoint=p["ckpt"], k=p["k"], method="umap", limit=max_points())
    needs(pts, f"no UMAP of {p['ckpt']}")
    # dragmode "zoom": on the page a click selects one point (its image in the sidebar)
    fig = projection_scatter(pts, color=color, highlight=p.get("cluster"), region=_region(p), dragmode="zoom")
    return legend_above(fig)


def _umap_window(db, p):
    from ..projection import projection_window_figure

    vp = p.get("view")
    win = view(
        db, W.window, checkpoint=p["ckpt"], k=p["k"], method="umap", viewport=vp, max_points=p["max_points"]
    )
    if not win.attrs.get("total"):
        raise Unavailable(f"no UMAP of {p['ckpt']}")
    return projection_window_figure(
        win,
        color=p["color"],
        value=p["density"],
        highlight=p.get("cluster"),
        region=_region(p),
        zoomed=vp is not None,
    )


def _selection_labels(db, p):
    """The labels of the selection's images: one cluster, the clusters the filters keep, or
    the region drawn on the UMAP; counted in DuckDB (a selection may be every image)."""
    from ..clusters import label_histogram

    if p.get("level") is not None:  # the labels read at a level of the label hierarchy
        at = dict(dataset=p["ds"], checkpoint=p["ckpt"], k=p["k"], level=p["level"], within=p.get("within"))
        if p["sel"] == "region":
            if not p.get("region"):
                raise ConceptLensError("parameter sel: `region` needs a region")
            counted = view(db, VH.region_groups, region=p["region"], **at)
        else:
            chosen = (
                (p["cluster"],)
                if p["sel"] == "cluster"
                else tuple(int(c) for c in _filtered(db, p)["cluster"])
            )
            counted = view(db, VH.selection_groups, clusters=chosen, **at)
        return label_histogram(C.top_labels(counted))
    if p["sel"] == "region":
        if not p.get("region"):
            raise ConceptLensError("parameter sel: `region` needs a region")
        counted = view(db, W.region_labels, checkpoint=p["ckpt"], k=p["k"], region=p["region"])
    else:
        chosen = (
            (p["cluster"],) if p["sel"] == "cluster" else tuple(int(c) for c in _filtered(db, p)["cluster"])
        )
        counted = view(db, C.selection_labels, checkpoint=p["ckpt"], k=p["k"], clusters=chosen)
    return label_histogram(C.top_labels(counted))


def _colours(db, p) -> list:
    return col(view(db, C.colour_options, dataset=p["ds"]), "column")


CLUSTERS = (DS_CLUSTERED, CKPT, K_OF_CKPT)
FILTERS = (
    Param("min_size", default=0, kind=int, help="smallest cluster kept"),
    Param("purity", default=(0.0, 1.0), kind=purity_range, help="purity range kept, lo,hi"),
    Param("q", default="", help="words every kept cluster's caption holds"),
)
RINGED = Param("cluster", kind=int, optional=True, help="the chosen cluster, ringed")
REGION = Param("region", kind=region, optional=True, help="region drawn on the UMAP (box:... or lasso:...)")
COLOUR = Param("color", _colours, help="colour by")


def _levels(db, p) -> list:
    return [int(v) for v in col(view(db, VH.levels, dataset=p["ds"]), "level")]


def _within(db, p) -> list:
    nodes = view(db, VH.nodes, dataset=p["ds"])
    level = p.get("level")
    return [] if level is None else [n for n, d in zip(col(nodes, "node"), col(nodes, "depth")) if d < level]


# Labels read at a level of the dataset's label hierarchy (none: the labels themselves).
LEVEL = (
    Param("level", _levels, kind=int, optional=True, help="level of the label hierarchy (0 = top)"),
    Param("within", _within, optional=True, help="node of the hierarchy drilled into"),
)
add(
    Figure(
        "clusters",
        "purity_coherence",
        "Purity vs coherence (laina2020 Fig. 2)",
        CLUSTERS + FILTERS + (RINGED,),
        _purity_coherence,
        aspect=0.75,
        steps=("cluster_metrics",),
        optional=("cluster_captions",),
    )
)
add(
    Figure(
        "clusters",
        "umap",
        "UMAP of the features",
        CLUSTERS + (COLOUR, RINGED, REGION) + LEVEL,
        _umap,
        aspect=0.85,
        steps=("clustering", "cluster_metrics", "projections"),
        optional_reads=("label_hierarchy",),
    )
)
# The page's view of a UMAP too large to draw point by point: the binned overview, and
# the points once a viewport holds few enough (not among the defaults: below the page's
# limit the page draws the points, figure `umap`). The catalogue's default bins it all.
add(
    Figure(
        "clusters",
        "umap_density",
        "UMAP of the features, binned",
        CLUSTERS
        + (
            COLOUR,
            Param("density", lambda db, p: list(_density()), help="bins coloured by"),
            Param("max_points", default=1, kind=int, help="points drawn one by one; more are binned"),
            Param("view", kind=viewport, optional=True, help="viewport x0,x1,y0,y1 (default: all)"),
            RINGED,
            REGION,
        ),
        _umap_window,
        aspect=0.85,
        steps=("clustering", "cluster_metrics", "projections"),
        default=False,
    )
)
add(
    Figure(
        "clusters",
        "selection_labels",
        "Labels of the selection's images",
        CLUSTERS
        + FILTERS
        + (
            Param(
                "sel",
                lambda db, p: ["cluster", "filter", "region"],
                help="images of: cluster, filter, region",
            ),
            Param(
                "cluster",
                lambda db, p: [int(c) for c in col(_filtered(db, p), "cluster")],
                kind=int,
                help="cluster",
            ),
            REGION,
        )
        + LEVEL,
        _selection_labels,
        aspect=0.75,
        steps=("clustering", "cluster_metrics"),
        optional_reads=("label_hierarchy",),
    )
)


def _density():
    from ..projection import DENSITY

    return DENSITY


# ---- a saved selection on every checkpoint of its dataset (issue 26 item 3) -------------------
NULL_SIZES = (20, 50, 100, 200)  # random sets per null the page offers (bounded work)
DEFAULT_NULL = 50


def _selection_datasets(db, p) -> list:
    if not db.has("selections"):
        return []
    return list(db.query("SELECT DISTINCT dataset FROM selections ORDER BY dataset")["dataset"])


def _selection_across(db, p):
    from ...views import selection as VS
    from ..selection import across_figure

    try:
        t = view(db, VS.across_saved, dataset=p["ds"], name=p["saved"], n_null=p["nnull"])
    except VS.SelectionError as e:
        raise Unavailable(str(e)) from None
    return across_figure(needs(t, f"selection {p['saved']} could be scored on no checkpoint"))


add(
    Figure(
        "clusters",
        "selection_across",
        "Scores of a saved selection on every checkpoint of its dataset",
        (
            Param("ds", _selection_datasets, help="dataset with saved selections"),
            Param("saved", lambda db, p: col(view(db, SEL.saved, dataset=p["ds"]), "name"), help="selection"),
            Param(
                "nnull",
                lambda db, p: list(NULL_SIZES),
                default=DEFAULT_NULL,
                kind=int,
                help="random sets per null",
            ),
        ),
        _selection_across,
        aspect=1.1,
        # At one column the panels (up to 6) and the upright checkpoint names need the height.
        narrow_aspect=2.0,
        steps=("features",),
        reads=("selections",),
        default=False,  # scores every checkpoint: asked for by name
    )
)
