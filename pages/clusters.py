"""Clusters: one checkpoint's k-means clusters — table, images, purity vs coherence, UMAP.

URL: ?ds=DATASET&ckpt=CHECKPOINT&k=K&cluster=C (and &color=COLUMN for the UMAP).
"""

import pandas as pd
import streamlit as st

from components import data
from components.analysis_gate import available, command, require
from components.cluster_tables import cluster_table, purity_bins_table
from components.export_button import show_figure
from components.image_grid import image_grid
from components.text import literal
from components.url_state import url_selectbox
from conceptlens import views
from conceptlens.figures.clusters import projection_scatter, purity_coherence

MAX_POINTS = 20_000  # UMAP points drawn (a fixed sample above this)
GRID_IMAGES = 24  # images per cluster grid
SELECTED_IMAGES = 60  # images shown for a box/lasso selection
V = views.clusters

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
ds = url_selectbox("Dataset", list(datasets["dataset"]), key="clusters_ds", param="ds", container=c_ds)

ckpts = list(ws.view(V.checkpoints, dataset=ds)["checkpoint_id"])
if not ckpts:
    st.info(f"No checkpoint of {literal(ds)} has cluster metrics yet. Compute them with:")
    st.code(command(ws, "cluster_metrics", ds), language="bash")
    st.stop()
ckpt = url_selectbox("Checkpoint", ckpts, key="clusters_ckpt", param="ckpt", container=c_ck)
ks = [int(k) for k in ws.view(V.ks, checkpoint=ckpt)["k"]]
k = url_selectbox("k (clusters)", ks, key="clusters_k", param="k", container=c_k)
provenance = {"workspace": ws.label, "fingerprint": ws.fp, "dataset": ds, "checkpoint": ckpt, "k": k}
where = {"dataset": ds, "checkpoint": ckpt, "k": k}

header = st.container()  # the checkpoint's metrics, once the cluster table is known

# ---- the table --------------------------------------------------------------------------
st.header("Clusters")
captions = available(ws, "cluster_captions", ds)
metrics = ws.view(V.cluster_table, **where, captions=captions)
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
        val = len(metrics) if key is None else r.get(key)
        col.metric(name, "–" if val is None or pd.isna(val) else fmt.format(val))
f1, f2, f3 = st.columns([1, 2, 3])
min_size = f1.number_input("Min size", min_value=0, value=0, step=1, key="clusters_min_size")
pur = f2.slider("Purity range", 0.0, 1.0, (0.0, 1.0), step=0.05, key="clusters_purity")
text = f3.text_input(
    "Caption contains", key="clusters_text", placeholder="e.g. red circle", disabled=not captions
)
shown = ws.view(
    V.filtered_clusters, **where, min_size=int(min_size), purity=tuple(pur), text=text, captions=captions
)
table, config = cluster_table(shown)

cluster_ids = [int(c) for c in metrics["cluster"]]
st.session_state["_clusters_table_ids"] = [int(c) for c in shown["cluster"]]


def _on_table_select():
    rows = st.session_state["clusters_table"].selection.rows
    ids = st.session_state.get("_clusters_table_ids", [])
    if rows and rows[0] < len(ids):
        st.session_state["clusters_cluster"] = ids[rows[0]]


st.caption(
    f"{len(shown)} of {len(metrics)} clusters · click a row to see its images · click a column header to sort"
)
st.dataframe(
    table,
    key="clusters_table",
    column_config=config,
    hide_index=True,
    on_select=_on_table_select,
    selection_mode="single-row",
)

# ---- one cluster and its hard negative ------------------------------------------------------
captions_of = dict(zip(metrics["cluster"], metrics["caption"])) if "caption" in metrics else {}


def _label(c):
    cap = captions_of.get(c)
    return f"{c} — {cap}" if isinstance(cap, str) and cap else str(c)


st.subheader("Cluster and its hard negative")
cluster = url_selectbox("Cluster", cluster_ids, key="clusters_cluster", param="cluster", format_func=_label)


def _cluster_panel(m):
    heading = "Cluster" if m["role"] == "cluster" else "Hard negative: cluster"
    n = int(m["size"])
    st.markdown(f"**{heading} {m['cluster']}** · {n} image{'s' * (n != 1)}")
    if isinstance(m.get("caption"), str):
        st.markdown(f"> {literal(m['caption'])}")
    facts = []
    if not pd.isna(m.get("purity")):
        facts.append(f"purity {m['purity']:.2f}")
    for kind, name in (("coherence_random", "coherence (random)"), ("coherence_hard", "coherence (hard)")):
        v = m.get(kind)
        if v is not None and not pd.isna(v):
            facts.append(f"{name} {v:.2f} [{m[kind + '_lo']:.2f}, {m[kind + '_hi']:.2f}]")
    if isinstance(m.get("top_label_name"), str):
        facts.append(f"top label *{literal(m['top_label_name'])}* ({m['top_label_share']:.0%})")
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
    image_grid(
        ws,
        ws.view(V.cluster_images, checkpoint=ckpt, k=k, cluster=int(m["cluster"]), limit=GRID_IMAGES),
        width=72,
    )


if cluster is not None:
    pair = ws.view(V.cluster_and_hard_negative, **where, cluster=cluster, captions=captions)
    left, right = st.columns(2, gap="large")
    with left:
        _cluster_panel(pair.iloc[0])
    with right:
        if len(pair) > 1:
            _cluster_panel(pair.iloc[1])
        else:
            st.info("This cluster has no hard negative (fewer than two clusters, or not computed).")

# ---- purity vs coherence (laina2020 Fig. 2, Tables 1-2) ------------------------------------------
st.header("Purity vs coherence")
st.caption(
    "Each cluster's purity against its 2AFC coherence with random and hard negatives; "
    "bars: 95% Clopper-Pearson intervals (laina2020 Fig. 2)."
)
show_figure(
    purity_coherence(metrics),
    f"purity-coherence-{ckpt}-k{k}",
    {**provenance, "figure": "purity_coherence"},
    key="clusters_purity_fig",
)
st.subheader("Coherence by purity range")
bins = ws.view(V.purity_bins, **where, captions=captions)
if bins.empty:
    st.info("No cluster has a purity (a dataset needs at least two labels).")
else:
    btable, bconfig = purity_bins_table(bins)
    st.dataframe(btable, key="clusters_bins", column_config=bconfig, hide_index=True)
    st.caption(
        "As laina2020 Tables 1–2: mean of the clusters' 2AFC coherence per purity range; "
        "95% interval: Clopper-Pearson on the pooled trials of the range's clusters "
        "(R = random, H = hard negatives)."
    )

# ---- UMAP --------------------------------------------------------------------------------------
st.header("UMAP of the features")
if available(ws, "projections", ds):
    n = int(ws.view(V.projection_size, checkpoint=ckpt, method="umap")["n"].iloc[0])
    if n == 0:
        st.info(f"No UMAP projection of {literal(ckpt)} yet. Compute it with:")
        st.code(command(ws, "projections", ds), language="bash")
    else:
        colour = url_selectbox(
            "Colour by",
            list(ws.view(V.colour_options, dataset=ds)["column"]),
            key="clusters_color",
            param="color",
        )
        pts = ws.view(V.projection, checkpoint=ckpt, k=k, method="umap", limit=MAX_POINTS)
        if n > MAX_POINTS:
            st.caption(f"Showing a fixed sample of {MAX_POINTS:,} of {n:,} points.")
        event = show_figure(
            projection_scatter(pts, color=colour),
            f"umap-{ckpt}-k{k}-{colour}",
            {**provenance, "figure": "umap", "color": colour},
            key="clusters_umap",
            on_select="rerun",
            selection_mode=("box", "lasso"),
        )
        points = (event or {}).get("selection", {}).get("points", []) if event else []
        ids = [p["customdata"][0] for p in points if p.get("customdata")]
        if ids:
            st.markdown(
                f"**{len(ids)} selected images**"
                + (f" (showing {SELECTED_IMAGES})" if len(ids) > SELECTED_IMAGES else "")
            )
            image_grid(
                ws, ws.view(V.images, ids=ids, limit=SELECTED_IMAGES), width=64, max_images=SELECTED_IMAGES
            )
        else:
            st.caption("Draw a box or lasso on the plot to see the selected images.")
