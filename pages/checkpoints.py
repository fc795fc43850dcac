"""Checkpoints: a dataset's checkpoints side by side — CL vs ID, predictors, training, aNMI, matching.

URL: ?ds=DATASET&k=K&a=CHECKPOINT&b=CHECKPOINT (a and b: the compared clusterings).
"""

import pandas as pd
import streamlit as st

from components import data
from components.analysis_gate import available, command, require
from components.export_button import show_figure
from components.metric_table import metric_table
from components.text import literal
from components.url_state import url_selectbox
from conceptlens import views
from conceptlens.figures.checkpoints import anmi_heatmap, cl_id_scatter, cluster_sankey, metrics_vs_epoch

V = views.checkpoints

ws = data.open_page("checkpoints")

st.title("Checkpoints")
st.caption(
    "Every clustered checkpoint of a dataset side by side: learnability (CL) against "
    "expressiveness (ID) as in lu2022, how well these predict kNN accuracy, the metrics "
    "over training, how similar the checkpoints' clusterings are, and how clusters split "
    "and merge from one checkpoint to another."
)

datasets = ws.view(views.clusters.datasets)
first = datasets["dataset"].iloc[0] if len(datasets) else "DATASET"
require(ws, ("cluster_metrics",), first)
c_ds, c_k, _ = st.columns([1, 1, 2])
ds = url_selectbox("Dataset", list(datasets["dataset"]), key="ckpts_ds", param="ds", container=c_ds)
ks = [int(k) for k in ws.view(V.ks, dataset=ds)["k"]]
if not ks:
    st.info(f"No checkpoint of {literal(ds)} has cluster metrics yet. Compute them with:")
    st.code(command(ws, "cluster_metrics", ds), language="bash")
    st.stop()
k = url_selectbox("k (clusters)", ks, key="ckpts_k", param="k", container=c_k)
provenance = {"workspace": ws.label, "fingerprint": ws.fp, "dataset": ds, "k": k}

# ---- CL vs ID and the predictors ---------------------------------------------------------------
st.header("Learnability vs expressiveness")
left, right = st.columns([1, 1], gap="large")
with right:
    st.markdown("**Correlation with kNN accuracy** (lu2022 Table 1)")
    compared = available(ws, "comparisons", ds)
    if compared:
        corr = ws.view(V.predictor_correlations, dataset=ds, k=k)
        metric_table(
            corr,
            key="ckpts_corr",
            formats={"pearson": "%.3f", "pearson_p": "%.3g", "kendall": "%.3f", "kendall_p": "%.3g"},
        )
        if len(corr) and corr["pearson"].isna().all():
            st.caption("Correlations need at least three checkpoints with distinct values.")
summary = ws.view(V.summary, dataset=ds, k=k, clid=compared)
with left:
    show_figure(
        cl_id_scatter(summary), f"cl-id-{ds}-k{k}", {**provenance, "figure": "cl_id"}, key="ckpts_clid_fig"
    )

st.subheader("All checkpoints")
cols = [
    c
    for c in [
        "checkpoint_id",
        "model",
        "method",
        "run",
        "epoch",
        "knn_acc",
        "cl",
        "cl_heldout",
        "id",
        "clid",
        "wclid",
        "anmi",
        "clusters",
        "mean_purity",
        "mean_coherence",
        "mean_coherence_hard",
    ]
    if c in summary.columns
]
metric_table(
    summary[cols],
    key="ckpts_table",
    formats={
        c: "%.3f"
        for c in [
            "knn_acc",
            "cl",
            "cl_heldout",
            "clid",
            "wclid",
            "anmi",
            "mean_purity",
            "mean_coherence",
            "mean_coherence_hard",
        ]
    }
    | {"id": "%.2f"},
)

# ---- over training ---------------------------------------------------------------------------
st.header("Over training")
curves = ws.view(V.training, dataset=ds, k=k, clid=compared)
if curves.empty:
    st.info("No run has checkpoints at two or more epochs (`checkpoints.run` and `epoch`).")
else:
    show_figure(
        metrics_vs_epoch(curves),
        f"metrics-vs-epoch-{ds}-k{k}",
        {**provenance, "figure": "metrics_vs_epoch"},
        key="ckpts_epoch_fig",
    )

# ---- aNMI between clusterings ---------------------------------------------------------------------
st.header("How similar are the clusterings?")
order = list(summary["checkpoint_id"])
if not compared:
    st.caption("Needs the comparisons between checkpoints (see above).")
elif len(order) < 2:
    st.info("Only one checkpoint is clustered at this k: nothing to compare.")
else:
    st.caption(
        "Adjusted NMI (arithmetic normalisation) between every two checkpoints' "
        f"k = {k} clusterings, on the images both assign: 1 = the same partition, "
        "0 = no more alike than chance."
    )
    show_figure(
        anmi_heatmap(ws.view(V.anmi_matrix, dataset=ds, k=k)),
        f"anmi-{ds}-k{k}",
        {**provenance, "figure": "anmi_matrix"},
        key="ckpts_anmi_fig",
    )

# ---- cluster matching ---------------------------------------------------------------------------
st.header("Cluster matching")
if not compared:
    st.caption("Needs the comparisons between checkpoints (see above).")
    st.stop()
if len(order) < 2:
    st.info("Cluster matching needs two clustered checkpoints.")
    st.stop()
name_of = dict(ws.view(V.names, dataset=ds, k=k).itertuples(index=False))
c_a, c_b, c_t = st.columns([2, 2, 1])
a = url_selectbox(
    "From checkpoint (A)", order, key="ckpts_a", param="a", format_func=name_of.get, container=c_a
)
b = url_selectbox(
    "To checkpoint (B)",
    order,
    key="ckpts_b",
    param="b",
    format_func=name_of.get,
    default_index=1,
    container=c_b,
)
min_share = c_t.slider(
    "Significant share",
    0.05,
    0.5,
    0.2,
    step=0.05,
    key="ckpts_share",
    help="A link counts for a split or merge when it carries at least this share of its cluster.",
)
if a == b:
    st.info("Choose two different checkpoints.")
    st.stop()
pair = {"dataset": ds, "k": k, "a": a, "b": b}
changes = ws.view(V.cluster_changes, **pair, min_share=min_share).iloc[0]
m1, m2, m3, m4 = st.columns(4)
m1.metric("A clusters that split", int(changes["splits"]))
m2.metric("B clusters that merge", int(changes["merges"]))
m3.metric("one-to-one matches", int(changes["one_to_one"]))
m4.metric("aNMI(A, B)", f"{changes['anmi']:.3f}" if pd.notna(changes["anmi"]) else "–")
flows = st.radio(
    "Show",
    list(V.FLOWS),
    horizontal=True,
    key="ckpts_flows",
    help="Minor flows carry less than the significant share of both their clusters.",
)
shown = ws.view(V.cluster_links, **pair, min_share=min_share, flows=flows)
# Captions only add to the hover text: a workspace without them needs no message here.
captions = ws.has("cluster_captions") and available(ws, "cluster_captions", ds)
meta_a = ws.view(views.clusters.cluster_table, dataset=ds, checkpoint=a, k=k, captions=captions)
meta_b = ws.view(views.clusters.cluster_table, dataset=ds, checkpoint=b, k=k, captions=captions)
st.caption(
    "Left: clusters of A, right: clusters of B; band width = shared images. "
    "Blue: splits, red: merges, purple: both, grey: one-to-one, olive: partial. "
    "Hover a node for its size, purity and coherence."
)
show_figure(
    cluster_sankey(shown, meta_a, meta_b, name_a="A", name_b="B"),
    f"sankey-{a}-{b}-k{k}",
    {**provenance, "figure": "cluster_sankey", "a": a, "b": b, "min_share": min_share, "flows": flows},
    key="ckpts_sankey_fig",
)
links = ws.view(V.cluster_links, **pair, min_share=min_share)
with st.expander(f"All {len(links)} links"):
    metric_table(links, key="ckpts_links", formats={"share_a": "%.2f", "share_b": "%.2f"})
