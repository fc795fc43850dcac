"""Checkpoints: a dataset's checkpoints side by side — CL vs ID, predictors, training, aNMI, matching.

URL: ?ds=DATASET&k=K&a=CHECKPOINT&b=CHECKPOINT (a and b: the compared clusterings).
"""
import pandas as pd
import streamlit as st

from components import data
from components.analysis_gate import datasets_clustered_first
from components.export_button import show_figure
from components.metric_table import metric_table
from components.url_state import url_selectbox
from conceptlens import queries
from conceptlens.analysis.compare import (cluster_changes, epoch_long, match_clusters,
                                          pairwise_anmi, runs_with_stages)
from conceptlens.figures.checkpoints import (anmi_heatmap, cl_id_scatter, cluster_sankey,
                                             metrics_vs_epoch)

ws = data.open_page()

st.title("Checkpoints")
st.caption("Every clustered checkpoint of a dataset side by side: learnability (CL) against "
           "expressiveness (ID) as in lu2022, how well these predict kNN accuracy, the metrics "
           "over training, how similar the checkpoints' clusterings are, and how clusters split "
           "and merge from one checkpoint to another.")

datasets = datasets_clustered_first(ws)
c_ds, c_k, _ = st.columns([1, 1, 2])
ds = url_selectbox("Dataset", datasets, key="ckpts_ds", param="ds", container=c_ds)
ks = [int(k) for k in ws.query(queries.CHECKPOINT_KS, ds)["k"]]
if not ks:
    st.info(f"No checkpoint of `{ds}` has been clustered yet.")
    st.code(f"conceptlens analyze clusters --workspace {ws.label}", language="bash")
    st.stop()
k = url_selectbox("k (clusters)", ks, key="ckpts_k", param="k", container=c_k)
summary = ws.query(queries.CHECKPOINT_SUMMARY, k, k, ds)
provenance = {"workspace": ws.label, "fingerprint": ws.fp, "dataset": ds, "k": k}

# ---- CL vs ID and the predictors ---------------------------------------------------------------
st.header("Learnability vs expressiveness")
left, right = st.columns([1, 1], gap="large")
with left:
    show_figure(cl_id_scatter(summary), f"cl-id-{ds}-k{k}", {**provenance, "figure": "cl_id"},
                key="ckpts_clid_fig")
with right:
    st.markdown("**Correlation with kNN accuracy** (lu2022 Table 1)")
    if ws.has("predictor_correlations"):
        corr = ws.query(queries.PREDICTOR_CORRELATIONS_OF, ds, k)
        metric_table(corr, key="ckpts_corr", formats={"pearson": "%.3f", "pearson_p": "%.3g",
                                                      "kendall": "%.3f", "kendall_p": "%.3g"})
        if len(corr) and corr["pearson"].isna().all():
            st.caption("Correlations need at least three checkpoints with distinct values.")
    else:
        st.info("`predictor_correlations.parquet` is missing; the cluster analysis writes it:")
        st.code(f"conceptlens analyze clusters --workspace {ws.label}", language="bash")

st.subheader("All checkpoints")
cols = [c for c in ["checkpoint_id", "model", "method", "run", "epoch", "knn_acc", "cl",
                    "cl_heldout", "id", "clid", "wclid", "anmi", "clusters", "mean_purity",
                    "mean_coherence", "mean_coherence_hard"] if c in summary.columns]
metric_table(summary[cols], key="ckpts_table",
             formats={c: "%.3f" for c in ["knn_acc", "cl", "cl_heldout", "clid", "wclid", "anmi",
                                          "mean_purity", "mean_coherence", "mean_coherence_hard"]}
             | {"id": "%.2f"})

# ---- over training ---------------------------------------------------------------------------
st.header("Over training")
stages = runs_with_stages(summary)
if stages.empty:
    st.info("No run has checkpoints at two or more epochs (`checkpoints.run` and `epoch`).")
else:
    show_figure(metrics_vs_epoch(epoch_long(stages)), f"metrics-vs-epoch-{ds}-k{k}",
                {**provenance, "figure": "metrics_vs_epoch"}, key="ckpts_epoch_fig")


# ---- aNMI between clusterings ---------------------------------------------------------------------
@st.cache_data(show_spinner="Comparing clusterings…", max_entries=32)
def _anmi(root: str, fp: str, dataset: str, k: int, order: tuple, _ws) -> pd.DataFrame:
    return pairwise_anmi(_ws.query(queries.CLUSTER_ASSIGNMENTS, dataset, k), list(order))


st.header("How similar are the clusterings?")
order = tuple(summary["checkpoint_id"])
if len(order) < 2:
    st.info("Only one checkpoint is clustered at this k: nothing to compare.")
else:
    matrix = _anmi(str(ws.root), ws.fp, ds, k, order, ws)
    st.caption("Adjusted NMI (arithmetic normalisation) between every two checkpoints' "
               f"k = {k} clusterings, on the images both assign: 1 = the same partition, "
               "0 = no more alike than chance.")
    show_figure(anmi_heatmap(matrix), f"anmi-{ds}-k{k}", {**provenance, "figure": "anmi_matrix"},
                key="ckpts_anmi_fig")

# ---- cluster matching ---------------------------------------------------------------------------
st.header("Cluster matching")
if len(order) < 2:
    st.info("Cluster matching needs two clustered checkpoints.")
    st.stop()
run_of = dict(zip(stages["checkpoint_id"], stages["run"] + " · epoch " + stages["epoch"].astype(str)))


def _name(c):
    return f"{c} ({run_of[c]})" if c in run_of else str(c)


c_a, c_b, c_t = st.columns([2, 2, 1])
a = url_selectbox("From checkpoint (A)", list(order), key="ckpts_a", param="a", format_func=_name,
                  container=c_a)
b = url_selectbox("To checkpoint (B)", list(order), key="ckpts_b", param="b", format_func=_name,
                  default_index=1, container=c_b)
min_share = c_t.slider("Significant share", 0.05, 0.5, 0.2, step=0.05, key="ckpts_share",
                       help="A link counts for a split or merge when it carries at least this "
                            "share of its cluster.")
if a == b:
    st.info("Choose two different checkpoints.")
    st.stop()
links = match_clusters(ws.query(queries.CLUSTER_ASSIGNMENT_OF, a, k),
                       ws.query(queries.CLUSTER_ASSIGNMENT_OF, b, k), min_share=min_share)
changes = cluster_changes(links)
m1, m2, m3, m4 = st.columns(4)
m1.metric("A clusters that split", changes["splits"])
m2.metric("B clusters that merge", changes["merges"])
m3.metric("one-to-one matches", changes["one_to_one"])
m4.metric("aNMI(A, B)", f"{matrix.loc[a, b]:.3f}" if pd.notna(matrix.loc[a, b]) else "–")
FLOWS = {"significant flows": ("one-to-one", "split", "merge", "split+merge", "partial"),
         "splits and merges only": ("split", "merge", "split+merge"),
         "all flows": tuple(links["kind"].unique())}
flows = st.radio("Show", list(FLOWS), horizontal=True, key="ckpts_flows",
                 help="Minor flows carry less than the significant share of both their clusters.")
shown = links[links["kind"].isin(FLOWS[flows])]
meta_a = ws.query(queries.CLUSTER_METRICS_OF, ds, a, k).set_index("cluster")
meta_b = ws.query(queries.CLUSTER_METRICS_OF, ds, b, k).set_index("cluster")
st.caption("Left: clusters of A, right: clusters of B; band width = shared images. "
           "Blue: splits, red: merges, purple: both, grey: one-to-one, olive: partial. "
           "Hover a node for its size, purity and coherence.")
show_figure(cluster_sankey(shown, meta_a, meta_b, name_a="A", name_b="B"),
            f"sankey-{a}-{b}-k{k}", {**provenance, "figure": "cluster_sankey", "a": a, "b": b,
                                     "min_share": min_share, "flows": flows},
            key="ckpts_sankey_fig")
with st.expander(f"All {len(links)} links"):
    metric_table(links, key="ckpts_links", formats={"share_a": "%.2f", "share_b": "%.2f"})
