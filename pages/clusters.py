"""Clusters: one checkpoint's k-means clusters — UMAP, table, images, purity vs coherence,
a selection's labels and images, one image's details and nearest neighbours. The UMAP's
view is sent first: a session's first run stops after it, and its first draw sends the
rest (components/defer.py `defer_rest`).

Every choice is in the URL: ?ds=DATASET&ckpt=CHECKPOINT&k=K&cluster=C, the table's filters
(&min_size=N&purity=LO,HI&q=WORDS), sort (&sort=COLUMN&desc=1) and columns (&cols=A,B),
the level of the dataset's label hierarchy labels are read at and the node drilled into
(&level=L&within=NODE: the UMAP's label colours, the cluster table's level purity and the
selection's histogram), the UMAP colour (&color=COLUMN) and drawn region (&region=box:...|lasso:...), the
viewport of a UMAP too large to draw point by point (&view=X0,X1,Y0,Y1, &density=purity), the
selection shown (&sel=cluster|filter|region, &page=N), the image looked at (&img=ID) and the
scored selection (&ssrc=..., &saved=NAME, &ids=..., &nnull=N, &across=1: components/selection_panel.py).
"""

import contextlib
import html
import os

import streamlit as st

from components import data
from components import defer as D
from components import projection as P
from components import url_state as U
from components.analysis_gate import available, command, require
from components.cluster_tables import (
    DASH,
    DEFAULT_COLUMNS,
    cluster_table,
    interval,
    missing,
    number,
    purity_bins_table,
    selection_csv,
    value_text,
)
from components.export_button import export_catalog_figure, show_catalog_figure
from components.image_grid import image_grid, image_picker
from components.selection_panel import page_origin, selection_panel
from components.text import literal
from conceptlens import views
from conceptlens.errors import ConceptLensError
from conceptlens.figures.clusters import OTHER
from conceptlens.figures.projection import DENSITY
from conceptlens.figures.specs.clusters import max_points
from conceptlens.views import hierarchy as VH
from conceptlens.views import projection_window as W

GRID_IMAGES = 24  # images per cluster panel
PAGE_IMAGES = 48  # images per page of a selection
NEIGHBOURS = 8
V = views.clusters
SORT_NAMES = {
    "cluster": "cluster",
    "size": "size",
    "purity": "purity",
    "coherence_random": "coherence (random)",
    "coherence_hard": "coherence (hard)",
    "describability_binary": "describability (binary)",
}

ws = data.open_page("clusters")

st.title("Clusters")
st.caption(
    "k-means clusters of one checkpoint's features: how pure (laina2020 purity) and how "
    "coherent (2AFC with random and hard negatives) each one is, its class-level caption, "
    "its images, and where its images lie in a 2-D UMAP."
)

datasets = ws.view(V.datasets)
first = datasets["dataset"].iloc[0] if len(datasets) else "DATASET"
require(ws, ("clustering", "cluster_metrics"), first)
c_ds, c_ck, c_k = st.columns([1, 2, 1])
ds = U.url_selectbox("Dataset", list(datasets["dataset"]), key="clusters_ds", param="ds", container=c_ds)

ckpts = list(ws.view(V.checkpoints, dataset=ds)["checkpoint_id"])
if not ckpts:
    st.info(f"No checkpoint of {literal(ds)} has cluster metrics yet. Compute them with:")
    st.code(command(ws, "cluster_metrics", ds), language="bash")
    U.stop()


def _forget_region() -> None:
    # A region drawn on one checkpoint's UMAP means nothing on another's.
    st.session_state["clusters_region"] = None
    st.session_state["clusters_region_ids"] = None
    st.session_state["clusters_view"] = None
    if st.session_state.get("clusters_sel") == "region":
        st.session_state["clusters_sel"] = "cluster"


ckpt = U.url_selectbox(
    "Checkpoint", ckpts, key="clusters_ckpt", param="ckpt", container=c_ck, on_change=_forget_region
)
ks = [int(k) for k in ws.view(V.ks, checkpoint=ckpt)["k"]]
k = U.url_selectbox("k (clusters)", ks, key="clusters_k", param="k", container=c_k)
info = ws.view(V.checkpoint_info, checkpoint=ckpt)
if len(info):
    i = info.iloc[0]
    c_ck.caption(
        f"{literal(i['method'])} · epoch {number(i['epoch'], '{:.0f}')} · "
        f"{number(i['feature_dim'], '{:.0f}')}-d features"
    )


# ---- the level of the label hierarchy labels are read at (conceptlens/hierarchy.py) -------------
LABELS = "labels"
level = within = None
broken_tree = ws.problems(("label_hierarchy",))
if broken_tree:  # shown, and the labels read as they are
    data.show_problems(ws, broken_tree, "The label hierarchy has problems: labels are shown as they are")
    levels = []
else:
    try:
        levels = ws.view(VH.levels, dataset=ds)
    except ConceptLensError as e:
        st.warning(f"The label hierarchy of {literal(ds)} cannot be read: {literal(e)}")
        levels = []
if len(levels):
    inner = ws.view(VH.nodes, dataset=ds)
    depth_of = dict(zip(inner["node"], inner["depth"]))
    level_text = {
        str(r.level): f"{r.name}: {r.groups} groups (e.g. {r.examples})" for r in levels.itertuples()
    }

    def _drill() -> None:
        # Drilling into a node reads its images at its children's level (or deeper).
        node = st.session_state.get("clusters_within")
        chosen = st.session_state.get("clusters_level")
        if node in depth_of and (chosen == LABELS or int(chosen) <= depth_of[node]):
            st.session_state["clusters_level"] = str(min(depth_of[node] + 1, len(levels) - 1))

    l1, l2 = st.columns([2, 2])
    picked = U.url_selectbox(
        "Labels at level",
        [LABELS] + list(level_text),
        key="clusters_level",
        param="level",
        format_func=lambda v: "the labels themselves" if v == LABELS else level_text[v],
        container=l1,
        help="Read the labels at a level of this dataset's label hierarchy: the UMAP's label "
        "colours, the table's level purity and the selection's histogram group by it.",
    )
    level = None if picked == LABELS else int(picked)
    drillable = [n for n, d in depth_of.items() if level is not None and d < level]
    names = dict(zip(inner["node"], inner["name"]))
    counts = dict(zip(inner["node"], inner["images"]))
    within = U.url_selectbox(
        "Drill into",
        [None] + drillable,
        key="clusters_within",
        param="within",
        format_func=lambda n: "every group" if n is None else f"{names[n]} ({counts[n]} images)",
        container=l2,
        on_change=_drill,
        disabled=level is None,
        help="Colour only this node's subtree by its groups at the chosen level; every other "
        "image is one grey group.",
    )
provenance = {"workspace": ws.label, "fingerprint": ws.fp, "dataset": ds, "checkpoint": ckpt, "k": k}
where = {"dataset": ds, "checkpoint": ckpt, "k": k}
where_url = {"ds": ds, "ckpt": ckpt, "k": k}
header = st.container()  # the checkpoint's metrics, once the cluster table is known
umap_slot = st.container()  # the UMAP, drawn once the chosen cluster is known


# ---- what the user's clicks change ---------------------------------------------------------------
def _pick_cluster(c) -> None:
    st.session_state["clusters_cluster"] = int(c)
    st.session_state["clusters_sel"] = "cluster"


def _on_table_select() -> None:
    rows = st.session_state["clusters_table"]["selection"]["rows"]
    ids = st.session_state.get("_clusters_table_ids", [])
    if rows and rows[0] < len(ids):
        _pick_cluster(ids[rows[0]])


def _on_purity_click() -> None:
    points = st.session_state["clusters_purity_fig"]["selection"]["points"]
    if points and points[0].get("customdata"):
        _pick_cluster(int(points[0]["customdata"][0]))


def _on_umap_select(key: str = "clusters_umap") -> None:
    sel = st.session_state[key]["selection"]
    st.session_state["clusters_region_ids"] = None  # the binned view names a region, not ids
    if sel.get("box"):
        b = sel["box"][0]
        st.session_state["clusters_region"] = V.region_text("box", b["x"], b["y"])
        st.session_state["clusters_sel"] = "region"
    elif sel.get("lasso"):
        poly = sel["lasso"][0]
        st.session_state["clusters_region"] = V.region_text("lasso", poly["x"], poly["y"])
        st.session_state["clusters_sel"] = "region"
    elif sel.get("points"):
        data_ = sel["points"][0].get("customdata")
        if data_:
            st.session_state["clusters_img"] = html.unescape(str(data_[0]))  # plain_figure escaped it
    else:  # a double click cleared the selection
        st.session_state["clusters_region"] = None
        if st.session_state.get("clusters_sel") == "region":
            st.session_state["clusters_sel"] = "cluster"


def _on_projection(key: str = "clusters_projection") -> None:
    # The WebGL view sends only what was committed: a box or lasso (its region, as the
    # URL keeps it, and the ids inside), a click on a point, or a cleared selection.
    ev = st.session_state.get(key) or {}
    ids = st.session_state.get("_clusters_projection_ids")
    if ev.get("event") == "select":
        st.session_state["clusters_region"] = V.region_text(ev["kind"], ev["x"], ev["y"])
        st.session_state["clusters_sel"] = "region"
        idx = ev.get("indices")
        st.session_state["clusters_region_ids"] = (
            [str(ids[i]) for i in idx if 0 <= i < len(ids)] if idx is not None and ids is not None else None
        )
    elif ev.get("event") == "click" and ids is not None and 0 <= ev.get("index", -1) < len(ids):
        st.session_state["clusters_img"] = str(ids[ev["index"]])
    elif ev.get("event") == "clear":
        st.session_state["clusters_region"] = None
        st.session_state["clusters_region_ids"] = None
        if st.session_state.get("clusters_sel") == "region":
            st.session_state["clusters_sel"] = "cluster"


def _on_bins_select() -> None:
    # A click on a bin of the overview zooms in around it; a box or lasso selects.
    sel = st.session_state["clusters_umap_bins"]["selection"]
    shown = st.session_state.get("_clusters_shown_view")
    if sel.get("points") and not (sel.get("box") or sel.get("lasso")) and shown:
        p = sel["points"][0]
        st.session_state["clusters_view"] = W.zoom_at(shown, p["x"], p["y"])
    else:
        _on_umap_select("clusters_umap_bins")


def _zoom_to_region() -> None:
    _, pts = V.parse_region(st.session_state["clusters_region"])
    (x0, y0), (x1, y1) = pts.min(axis=0), pts.max(axis=0)
    if x0 < x1 and y0 < y1:
        st.session_state["clusters_view"] = (float(x0), float(x1), float(y0), float(y1))


def _zoom_out() -> None:
    st.session_state["clusters_view"] = None


def _viewport(raw: str):
    try:
        return W.parse_viewport(raw)
    except ConceptLensError as e:
        raise ValueError(str(e)) from None


def _max_points() -> int:
    """Points drawn one by one: $CONCEPTLENS_MAX_POINTS when set (the figures' limit too,
    conceptlens/figures/specs/clusters.py), else the WebGL view's (components/projection.py);
    says when the variable is ignored."""
    raw = os.environ.get("CONCEPTLENS_MAX_POINTS")
    try:
        int(raw or 0)
    except ValueError:
        st.warning(f"CONCEPTLENS_MAX_POINTS={literal(raw, limit=40)} is not a whole number: ignored.")
        raw = None
    return max_points() if raw else P.max_points()


def _inspect(image_id: str) -> None:
    st.session_state["clusters_img"] = image_id


def _close_image() -> None:
    st.session_state["clusters_img"] = None


def _valid_region(text) -> bool:
    try:
        V.parse_region(text)
    except ValueError:
        return False
    return True


region = U.url_value("clusters_region", "region", str, None, "Region", _valid_region)
img = U.url_value("clusters_img", "img", str, None, "Image")

# ---- the UMAP's size: a view drawn point by point is sent first ---------------------------------
with umap_slot:  # what is wrong with the projections (once) is said under the UMAP's header
    st.header("UMAP of the features")
    has_projections = available(ws, "projections", ds)
    limit = _max_points()  # (and a $CONCEPTLENS_MAX_POINTS that is ignored)
n_umap = (
    int(ws.view(V.projection_size, checkpoint=ckpt, method="umap")["n"].iloc[0]) if has_projections else 0
)
# The session's first run of the page in a browser sends the header, the UMAP and nothing
# more; the view's first draw reruns it whole (components/defer.py `defer_rest`). The
# table's filters and chosen cluster are read from the link without their widgets then.
view_first = 0 < n_umap <= limit and D.defer_rest("clusters_projection")
show = not view_first

# ---- the table ----------------------------------------------------------------------------------
if show:
    st.header("Clusters")
captions = available(ws, "cluster_captions", ds)
metrics = ws.view(V.cluster_table, **where, captions=captions)
level_purity = (
    ws.view(VH.cluster_purity, dataset=ds, checkpoint=ckpt, k=k, level=level) if level is not None else None
)
if level_purity is not None:
    metrics = metrics.merge(level_purity.drop(columns="size"), on="cluster", how="left")
row = ws.view(V.checkpoint_metrics, checkpoint=ckpt, k=k)
if len(row):
    r = row.iloc[0]
    for col, (name, key, fmt) in zip(
        header.columns(5),
        [
            ("clusters", None, "{}"),
            ("aNMI vs labels", "anmi", "{:.3f}"),
            ("kNN accuracy", "knn_acc", "{:.3f}"),
            ("CL", "cl", "{:.3f}"),
            ("ID", "id", "{:.1f}"),
        ],
    ):
        col.metric(name, number(len(metrics) if key is None else r.get(key), fmt))
self_ref = "describability_self" in metrics and bool(metrics["describability_self"].eq(True).any())
if self_ref and show:
    st.warning(
        "Describability here is **self-referential**: the vision-language model that retrieved "
        "the images for each caption is this checkpoint's own model, so it measures the "
        "checkpoint's feature space against itself (column *self-ref.*).",
        icon=":material/sync_problem:",
    )

f1, f2, f3 = st.columns([1, 2, 3]) if show else [U.NOWHERE] * 3
min_size = U.url_number("Min size", key="clusters_min_size", param="min_size", min_value=0, container=f1)
pur = U.url_slider(
    "Purity range", 0.0, 1.0, "clusters_purity", "purity", default=(0.0, 1.0), step=0.05, container=f2
)
text = U.url_text(
    "Caption has the words",
    key="clusters_text",
    param="q",
    container=f3,
    placeholder="e.g. red circle",
    disabled=not captions,
    help="Whole words, in any order, ignoring case: 'red' finds 'a red circle', not 'checkered'.",
)
s1, s2, s3, s4 = st.columns([1.2, 0.8, 0.8, 3], vertical_alignment="bottom") if show else [U.NOWHERE] * 4
sortable = [c for c in V.SORTABLE if c in metrics.columns]
sort = U.url_selectbox(
    "Sort by",
    sortable,
    key="clusters_sort",
    param="sort",
    format_func=SORT_NAMES.get,
    omit_default=True,
    container=s1,
)
descending = U.url_toggle("descending", key="clusters_desc", param="desc", container=s2)
shown = ws.view(
    V.filtered_clusters,
    **where,
    min_size=int(min_size),
    purity=tuple(pur),
    text=text,
    captions=captions,
    sort=sort,
    descending=descending,
)
if level_purity is not None:
    shown = shown.merge(level_purity.drop(columns="size"), on="cluster", how="left")
table, config = cluster_table(shown)
with s3.popover("Columns", icon=":material/view_column:") if show else contextlib.nullcontext():
    visible = U.url_multiselect(
        "Columns shown",
        list(table.columns),
        key="clusters_cols",
        param="cols",
        default=[c for c in DEFAULT_COLUMNS if c in table.columns],
        container=None if show else U.NOWHERE,
    )

ids = [int(c) for c in shown["cluster"]]
st.session_state["_clusters_table_ids"] = ids
captions_of = dict(zip(metrics["cluster"], metrics["caption"])) if "caption" in metrics else {}


def _label(c):
    cap = captions_of.get(c)
    return f"{c} — {cap}" if isinstance(cap, str) and cap else str(c)


# The selectbox offers the clusters the table shows, in its order.
cluster = U.url_selectbox(
    "Cluster",
    ids,
    key="clusters_cluster",
    param="cluster",
    format_func=_label,
    container=s4,
    on_change=lambda: st.session_state.update(clusters_sel="cluster"),
)
# The table's tick always marks the chosen cluster: Streamlit would keep the row of an
# earlier click, on whatever cluster sits there after filtering or sorting.
want = [ids.index(cluster)] if cluster in ids else []
current = st.session_state.get("clusters_table")
if current is None or list(current["selection"]["rows"]) != want:
    st.session_state["clusters_table"] = {"selection": {"rows": want, "columns": [], "cells": []}}


# ---- UMAP: more points than `limit` are binned, and drawn once zoomed in ----------------------
def _projection_window(n: int, colour: str, limit: int) -> None:
    view = U.url_value("clusters_view", "view", _viewport, None, "Viewport", encode=W.viewport_text)
    win = ws.view(W.window, checkpoint=ckpt, k=k, method="umap", viewport=view, max_points=limit)
    binned = win.attrs["kind"] == "bins"
    st.session_state["_clusters_shown_view"] = win.attrs["viewport"]
    z1, z2, z3 = st.columns([1, 1, 2], vertical_alignment="bottom")
    density = U.url_selectbox(
        "Bins show",
        list(DENSITY),
        key="clusters_density",
        param="density",
        omit_default=True,
        container=z3,
        disabled=not binned,
    )
    z1.button(
        "Zoom to the region",
        key="clusters_zoom_region",
        on_click=_zoom_to_region,
        disabled=not region,
        icon=":material/zoom_in:",
    )
    z2.button(
        "Show all",
        key="clusters_zoom_out",
        on_click=_zoom_out,
        disabled=view is None,
        icon=":material/zoom_out_map:",
    )
    in_view = f"{win.attrs['n']:,} of {n:,} points in view"
    if binned:
        b = win.attrs["bins"]
        st.caption(
            f"{in_view}: more than the {limit:,} drawn one by one, so each square is one of "
            f"{b} × {b} bins, coloured by its images (log scale) or their clusters' mean purity; "
            f"hover for its majority cluster. Click a bin to zoom in {W.ZOOM}× around it (the points "
            "show once few enough are in view); pick Box or Lasso Select in the chart's toolbar to "
            "select every image inside (shown below), then *Zoom to the region*."
        )
    else:
        st.caption(
            f"Zoomed in: {in_view}. Click a point to see its image, captions and nearest neighbours "
            "in the sidebar; pick Box or Lasso Select in the chart's toolbar to select images "
            "(shown below); the chosen cluster is ringed. *Show all* returns to the overview."
        )
    show_catalog_figure(
        ws,
        "umap_density",
        dict(fig_params, color=colour, density=density, max_points=limit, view=view),
        provenance,
        key="clusters_umap_bins" if binned else "clusters_umap",
        on_select=_on_bins_select if binned else _on_umap_select,
        selection_mode=("points", "box", "lasso"),
    )


# ---- UMAP, above the table (drawn first: components/defer.py `defer_rest`) -----------------
# The figures' parameters: the page's URL keys (conceptlens/figures/specs/clusters.py).
fig_params = dict(
    where_url, min_size=int(min_size), purity=tuple(pur), q=text, cluster=cluster, region=region
)
# The label level (and drill-down) of the figures that show labels.
level_params = {"level": level, "within": within} if level is not None else {}


def _umap() -> tuple[bool, bool]:
    """The UMAP section: (a projection is shown, too large to draw point by point). On a
    `view_first` run the view reports its first draw."""
    if not has_projections:
        return False, False
    if n_umap == 0:
        st.info(f"No UMAP projection of {literal(ckpt)} yet. Compute it with:")
        st.code(command(ws, "projections", ds), language="bash")
        return False, False
    colour = U.url_selectbox(
        "Colour by",
        list(ws.view(V.colour_options, dataset=ds)["column"]),
        key="clusters_color",
        param="color",
    )
    if n_umap > limit:
        _projection_window(n_umap, colour, limit)
        return True, True
    st.caption(
        "Every point, drawn in your browser: scroll to zoom, drag to pan, hover for a "
        "point's image and caption. Click a point to see its image, captions and nearest "
        "neighbours in the sidebar; pick *Box* or *Lasso* and drag to select images (shown "
        "below); the chosen cluster is ringed."
    )
    if level is not None and colour == "label_name":
        # Labels read at the chosen level: one colour (and legend entry) per group.
        enc = P.points_of(
            ws,
            VH.group_column(level),
            highlight=cluster,
            view=VH.projection,
            checkpoint=ckpt,
            k=k,
            dataset=ds,
            level=level,
            within=within,
            method="umap",
            limit=P.max_points(),
        )
        if within is not None:  # the images outside the node drilled into: grey
            rest = f"outside {names[within]}"
            if rest in enc.args["names"]:
                enc.args["palette"][enc.args["names"].index(rest)] = OTHER
        st.caption(
            f"Coloured by the labels at level {level} of the label hierarchy"
            + (f", inside {literal(names[within])}" if within is not None else "")
            + "."
        )
    else:
        enc = P.points_of(ws, colour, highlight=cluster, checkpoint=ckpt, k=k)
    st.session_state["_clusters_projection_ids"] = enc.ids
    P.projection_view(
        enc,
        key="clusters_projection",
        data_key=f"{ws.fp}|{ckpt}|{k}|{colour}|{level}|{within}|{len(enc.ids)}",
        view_key=f"{ws.fp}|{ckpt}",
        region=region,
        on_change=_on_projection,
        report_drawn=view_first,
    )
    # The export is the catalogue's figure, built only when downloaded.
    export_catalog_figure(
        ws, "umap", dict(fig_params, color=colour, **level_params), provenance, key="clusters_umap"
    )
    return True, False


if view_first:
    # Sent before the view (shown below it, in the slot's place): the view's first draw
    # reruns the page and may interrupt this run at its next element.
    st.caption(D.DEFERRED_NOTE)
with umap_slot:
    has_umap, large_umap = _umap()
if view_first:  # the view is sent; the rest of the page follows once it has drawn
    U.stop(carry=True)

st.caption(
    f"{len(shown)} of {len(metrics)} clusters · click a row (or a point of the purity plot) to "
    f"choose a cluster · missing values: {DASH}"
)
st.dataframe(
    table,
    key="clusters_table",
    column_config=config,
    column_order=visible or None,
    hide_index=True,
    on_select=_on_table_select,
    selection_mode="single-row",
    placeholder=DASH,
)
if not ids:
    st.info("No cluster passes the filters.")


# ---- one cluster and its hard negative ------------------------------------------------------
def _cluster_panel(m):
    heading = "Cluster" if m["role"] == "cluster" else "Hard negative: cluster"
    n = int(m["size"])
    st.markdown(f"**{heading} {m['cluster']}** · {n} image{'s' * (n != 1)}")
    if isinstance(m.get("caption"), str):
        st.markdown(f"> {literal(m['caption'])}")
    facts = [f"purity {number(m.get('purity'))}"]
    if "level_purity" in m:
        top = DASH if missing(m["level_top"]) else f"*{literal(m['level_top'])}*"
        facts.append(
            f"at level {level}: purity {number(m['level_purity'])}, "
            f"top {top} ({number(m['level_top_share'])})"
        )
    for kind, name in (("coherence_random", "coherence (random)"), ("coherence_hard", "coherence (hard)")):
        if kind in m:
            facts.append(f"{name} {number(m[kind])} {interval(m.get(kind + '_lo'), m.get(kind + '_hi'))}")
    if "top_label_name" in m:
        label = DASH if missing(m["top_label_name"]) else f"*{literal(m['top_label_name'])}*"
        facts.append(f"top label {label} ({number(m.get('top_label_share'))})")
    if "describability_binary" in m:
        self_ = m.get("describability_self")
        flag = " (self-referential)" if not missing(self_) and bool(self_) else ""
        facts.append(
            f"describability top-1 {number(m.get('describability_top1'))}, top-5 "
            f"{number(m.get('describability_top5'))}, binary {number(m['describability_binary'])}{flag}"
        )
    st.caption(" · ".join(facts))
    ablations = [
        (name, m.get(col))
        for col, name in (
            ("caption_noneg", "without the negative term"),
            ("caption_rouge", "ROUGE-L distance"),
        )
        if isinstance(m.get(col), str)
    ]
    if ablations:
        with st.expander("Caption ablations"):
            src = m.get("caption_source")
            if isinstance(src, str):
                st.caption(f"Chosen from the image captions of {literal(src)} (laina2020 Eq. 4).")
            for name, cap in ablations:
                st.markdown(f"- *{name}*: {literal(cap)}")
    image_grid(ws, pair_images[pair_images["cluster"] == int(m["cluster"])], width=72)


st.subheader("Cluster and its hard negative")
if cluster is not None:
    pair = V.pair_rows(metrics, cluster)
    pair_images = ws.view(
        V.clusters_images,
        checkpoint=ckpt,
        k=k,
        clusters=tuple(int(c) for c in pair["cluster"]),
        limit=GRID_IMAGES,
    )
    left, right = st.columns(2, gap="large")
    with left:
        _cluster_panel(pair.iloc[0])
    with right:
        if len(pair) > 1:
            _cluster_panel(pair.iloc[1])
        else:
            st.info("This cluster has no hard negative (fewer than two clusters, or not computed).")
else:
    st.caption("No cluster chosen: no cluster passes the filters.")

# ---- purity vs coherence (laina2020 Fig. 2, Tables 1-2) ------------------------------------------
st.header("Purity vs coherence")
st.caption(
    "Each cluster the filters keep: its purity against its 2AFC coherence with random and "
    "hard negatives; bars: 95% Clopper-Pearson intervals (laina2020 Fig. 2). Click a point "
    "to choose its cluster; the chosen one is ringed."
)
show_catalog_figure(
    ws,
    "purity_coherence",
    fig_params,
    provenance,
    key="clusters_purity_fig",
    on_select=_on_purity_click,
    selection_mode=("points",),
)
st.subheader("Coherence by purity range")
bins = ws.view(V.purity_bins, **where, captions=captions)
if bins.empty:
    st.info("No cluster has a purity (a dataset needs at least two labels).")
else:
    btable, bconfig = purity_bins_table(bins)
    st.dataframe(btable, key="clusters_bins", column_config=bconfig, hide_index=True, placeholder=DASH)
    st.caption(
        "As laina2020 Tables 1–2, over all clusters: mean of the clusters' 2AFC coherence per "
        "purity range; 95% interval: Clopper-Pearson on the pooled trials of the range's "
        "clusters (R = random, H = hard negatives)."
        + (" Describability is self-referential here (see above)." if self_ref else "")
    )


# ---- the selection: labels, all its images, its ids as CSV ---------------------------------------
st.header("Selection")
kinds = {}
if cluster is not None:
    kinds["cluster"] = f"cluster {cluster}"
kinds["filter"] = f"the {len(ids)} clusters the filters keep"
if region and has_umap:
    kinds["region"] = "the region drawn on the UMAP"
sel = U.url_radio("Images of", list(kinds), "clusters_sel", "sel", format_func=kinds.get, horizontal=True)
if sel == "region" and large_umap:
    # A region of a UMAP too large to draw may hold most images: DuckDB counts them and
    # hands one page.
    counted = ws.view(W.region_labels, checkpoint=ckpt, k=k, region=region)
    n_selected = int(counted["images"].sum())

    def _page_of(page: int):
        at = (page - 1) * PAGE_IMAGES
        return ws.view(W.region_images, checkpoint=ckpt, k=k, region=region, offset=at, limit=PAGE_IMAGES)

    def _all():
        return W.region_images(ws.db(), checkpoint=ckpt, k=k, region=region)
elif sel == "region":
    images = ws.view(V.region_images, checkpoint=ckpt, k=k, region=region)
    n_selected = len(images)

    def _page_of(page: int):
        return images.iloc[(page - 1) * PAGE_IMAGES : page * PAGE_IMAGES]

    def _all():
        return images
else:
    # A selection of clusters may be every image: DuckDB counts it and hands one page.
    chosen = (cluster,) if sel == "cluster" else tuple(ids)
    counted = ws.view(V.selection_labels, checkpoint=ckpt, k=k, clusters=chosen)
    n_selected = int(counted["images"].sum())

    def _page_of(page: int):
        at = (page - 1) * PAGE_IMAGES
        return ws.view(
            V.selection_images, checkpoint=ckpt, k=k, clusters=chosen, offset=at, limit=PAGE_IMAGES
        )

    def _all():
        return V.selection_images(ws.db(), checkpoint=ckpt, k=k, clusters=chosen)


pages = max(1, -(-n_selected // PAGE_IMAGES))
h_left, h_right = st.columns([3, 2], gap="large")
with h_right:
    st.metric("images selected", f"{n_selected:,}")
    st.download_button(
        "Download image ids (CSV)",
        data=lambda: selection_csv(_all()),  # written when clicked, not on every rerun
        file_name=f"selection-{ckpt}-k{k}-{sel}.csv",
        mime="text/csv",
        key="clusters_csv",
        icon=":material/download:",
        on_click="ignore",
    )
with h_left:
    show_catalog_figure(
        ws, "selection_labels", dict(fig_params, sel=sel, **level_params), provenance, key="clusters_labels"
    )
# Another selection starts at its first page (Back still restores the page from the URL).
signature = (ckpt, k, sel, cluster if sel == "cluster" else None, region if sel == "region" else None)
if sel == "filter":
    signature += (tuple(ids),)
if st.session_state.get("_clusters_signature") not in (None, signature) and not U.navigating():
    st.session_state["clusters_page"] = 1
st.session_state["_clusters_signature"] = signature
page = U.url_pagination(pages, key="clusters_page", param="page")
st.caption(
    f"Images {min(n_selected, (page - 1) * PAGE_IMAGES + 1):,}–{min(n_selected, page * PAGE_IMAGES):,} "
    f"of {n_selected:,}, by cluster and distance to its centre. Click a name to see the image."
)
image_picker(
    ws,
    _page_of(page),
    key="clusters_grid",
    on_pick=_inspect,
)

# ---- score this selection (or a label, a factor value, a cluster, a CSV, a saved one) ------------
selection_panel(
    ws, ds, ckpt, k, lambda: list(_all()["image_id"]), page_origin(sel, region, cluster, len(ids), ckpt, k)
)

# ---- one image, in the sidebar (visible wherever the page is scrolled) ---------------------------
if img is not None:
    details = ws.view(V.image_details, image_id=img, checkpoint=ckpt, k=k)
    with st.sidebar:
        st.divider()
        if details.empty:
            st.info(f"Image {literal(img, limit=80)} is not in this workspace.")
        else:
            d = details.iloc[0]
            st.markdown(f"**{literal(img)}**")
            image_grid(ws, details, caption_col=None, width=200, max_images=1)
            skip = {"image_id", "thumbnail", "x", "y", "width", "height"}
            # Columns that only other datasets' images fill are empty here: left out.
            lines = [
                f"- {literal(col)}: {literal(value_text(v))}"
                for col, v in d.items()
                if col not in skip and (not missing(v) or col in ("cluster", "distance"))
            ]
            w, h = number(d.get("width"), "{:.0f}"), number(d.get("height"), "{:.0f}")
            lines.append(f"- size: {w} × {h} px")
            st.markdown("\n".join(lines))
            if ws.problems(("captions", "features")):  # what the captions and neighbours below read
                data.show_problems(
                    ws, ws.problems(("captions", "features")), "Captions or features have problems"
                )
            caps = ws.view(V.image_captions, image_id=img)
            if len(caps):
                st.markdown("**Captions**")
                st.markdown(
                    "\n".join(f"- *{literal(c.captioner)}*: {literal(c.text)}" for c in caps.itertuples())
                )
            near = ws.view(V.neighbours, checkpoint=ckpt, k=k, image_id=img, n=NEIGHBOURS)
            st.markdown(f"**Nearest in {literal(ckpt)}** (cosine similarity)")
            if near.empty:
                st.caption("No features of this image in this checkpoint.")
            else:
                names = [DASH if missing(lab) else lab for lab in near["label_name"]]
                image_picker(
                    ws,
                    near.assign(caption=[f"{s:.2f} · {lab}" for s, lab in zip(near["similarity"], names)]),
                    key="clusters_near",
                    on_pick=_inspect,
                    caption_col="caption",
                    columns=2,
                    width=96,
                )
        st.button("Close image", key="clusters_close_img", on_click=_close_image, icon=":material/close:")
