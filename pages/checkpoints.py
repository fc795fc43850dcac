"""Checkpoints: a dataset's checkpoints side by side — CL vs ID, predictors, training, aNMI,
and two checkpoints A and B compared: their UMAPs with a linked selection, the cluster matching.

URL: ?ds=DATASET&k=K&a=CHECKPOINT&b=CHECKPOINT, the table's &sort=COLUMN&desc=1, the
training curve's &metric=M, the UMAPs' &color=COLUMN and the region drawn on A's
(&region=box:...|lasso:...), the panel scoring that region or another selection on A
(&score=1&ssrc=..., components/selection_panel.py), the matching's &share=S&flows=F&top=N;
along training and depth (components/training_section.py: a training run or a depth
sequence) &run=SEQUENCE&kinds=K&cap=N&event=STEP-EVENT&factor=F (&run_ds=DATASET: another
dataset's sequences when this one has none); the aligned projections of the sequence
(components/aligned_section.py) &aframe=&acolor=&aregion=&aat=.
"""

import streamlit as st

from components import data
from components import projection as P
from components import url_state as U
from components.analysis_gate import available, command, require
from components.checkpoint_tables import (
    checkpoint_formats,
    column_name,
    correlation_table,
    population_commands,
    population_text,
    unstable_warning,
)
from components.cluster_tables import DASH
from components.export_button import export_catalog_figure, show_catalog_figure
from components.metric_table import metric_table
from components.selection_panel import region_origin, selection_panel
from components.text import literal
from components.training_section import training_section
from conceptlens import views
from conceptlens.figures.checkpoints import (
    METRIC_TITLES,
    short_names,
)
from conceptlens.metrics.clid import MIN_CORRELATED
from conceptlens.metrics.events import MIN_IMAGES

V = views.checkpoints
C = views.clusters

ws = data.open_page("checkpoints")

st.title("Checkpoints")
st.caption(
    "Every clustered checkpoint of a dataset side by side: learnability (CL) against "
    "expressiveness (ID) as in lu2022, how well these predict kNN accuracy, the metrics "
    "over training, how similar the checkpoints' clusterings are; then two checkpoints, "
    "A and B: where A's images lie in B's UMAP, and how A's clusters split and merge in B."
)

datasets = ws.view(C.datasets)
first = datasets["dataset"].iloc[0] if len(datasets) else "DATASET"
require(ws, ("cluster_metrics",), first)


def _forget_region() -> None:
    # A region is drawn in A's UMAP coordinates: it means nothing on another A.
    st.session_state["ckpts_region"] = None


c_ds, c_k, c_a, c_b = st.columns([1, 1, 2, 2])
ds = U.url_selectbox(
    "Dataset", list(datasets["dataset"]), key="ckpts_ds", param="ds", container=c_ds, on_change=_forget_region
)
ks = [int(k) for k in ws.view(V.ks, dataset=ds)["k"]]
if not ks:
    st.info(f"No checkpoint of {literal(ds)} has cluster metrics yet. Compute them with:")
    st.code(command(ws, "cluster_metrics", ds), language="bash")
    U.stop()
k = U.url_selectbox("k (clusters)", ks, key="ckpts_k", param="k", container=c_k)
order = list(ws.view(V.summary, dataset=ds, k=k, clid=False)["checkpoint_id"])
name_of = dict(ws.view(V.names, dataset=ds, k=k).itertuples(index=False))
a = U.url_selectbox(
    "From checkpoint (A)",
    order,
    key="ckpts_a",
    param="a",
    format_func=lambda c: name_of.get(c, c),
    container=c_a,
    on_change=_forget_region,
)
b = U.url_selectbox(
    "To checkpoint (B)",
    order,
    key="ckpts_b",
    param="b",
    format_func=lambda c: name_of.get(c, c),
    # B: the first checkpoint that is not A (A itself when it is the only one).
    default_index=next((i for i, c in enumerate(order) if c != a), 0),
    container=c_b,
)
provenance = {"workspace": ws.label, "fingerprint": ws.fp, "dataset": ds, "k": k}

# ---- CL vs ID and the predictors ---------------------------------------------------------------
st.header("Learnability vs expressiveness")
compared = available(ws, "comparisons", ds, tables=V.COMPARISON_TABLES)
summary = ws.view(V.summary, dataset=ds, k=k, clid=compared)
short = dict(zip(summary["checkpoint_id"], short_names(summary["checkpoint_id"])))
left, right = st.columns([1, 1], gap="large")
with left:
    st.markdown("**CL against ID** (lu2022 Fig. 1)")
    show_catalog_figure(ws, "cl_id", {"ds": ds, "k": k, "a": a, "b": b}, provenance, key="ckpts_clid_fig")
    st.caption(
        "Ringed and named: checkpoints A and B and the highest and lowest kNN accuracy; "
        "hover a point for any other's name."
    )
corr = ws.view(V.predictor_correlations, dataset=ds, k=k) if compared else None
# Which checkpoints the stored correlations are over (`analyze comparisons --population`).
population = ws.view(V.comparison_population, dataset=ds) if compared else {"population": None}
corr_provenance = {**provenance, "population": population["population"]}
n_corr = int(corr["n_checkpoints"].max()) if corr is not None and corr["n_checkpoints"].notna().any() else 0
if compared and n_corr < MIN_CORRELATED:
    with right:
        st.info(
            f"**No correlation with kNN accuracy yet:** it needs at least {MIN_CORRELATED} checkpoints "
            f"with kNN accuracy and the predictors; {literal(ds)} has {n_corr} at k = {k}. Add more "
            "checkpoints (or another epoch of a run) to compare, then run the comparisons again:",
            icon=":material/info:",
        )
        st.code(command(ws, "comparisons", ds), language="bash")
elif compared:
    with right:
        st.markdown("**Correlation with kNN accuracy** (lu2022 Table 1), with 95% intervals")
        show_catalog_figure(
            ws, "predictor_correlations", {"ds": ds, "k": k}, corr_provenance, key="ckpts_corr_fig"
        )
    if warning := unstable_warning(corr):
        st.warning(warning, icon=":material/warning:")
    table, formats = correlation_table(corr)
    metric_table(table, key="ckpts_corr", formats=formats, placeholder=DASH)
    st.caption(
        "95% intervals: Fisher z for Pearson r, a percentile bootstrap over checkpoints "
        "(2,000 seeded resamples) for Kendall τ. Permutation p: the share of the orderings of "
        "kNN accuracy across the checkpoints (all of them up to 7, else 10,000 seeded) that "
        "correlate as strongly. W-CLID is fitted to kNN accuracy itself; "
        "its leave-one-out version predicts each checkpoint from a fit without it."
    )
    members = ws.view(V.clid_membership, dataset=ds, k=k)
    out, inside = members[members["compared"].eq(False)], members[members["compared"].eq(True)]
    if len(out):
        sizes = ", ".join(f"{literal(c)} ({n:,} images)" for c, n in zip(out.checkpoint_id, out.n_images))
        n_in = " / ".join(f"{n:,}" for n in sorted(set(inside["n_images"])))
        st.info(
            f"**Left out of CLID, W-CLID and these correlations:** {sizes}. They were embedded "
            f"on other images than the {len(inside)} compared checkpoints ({n_in} images each): "
            "CLID z-scores CL and ID across checkpoints, which compares like with like only on "
            "the same images.",
            icon=":material/filter_alt_off:",
        )
    elif len(inside):
        st.caption(
            f"All {len(inside)} checkpoints with CL, ID and kNN accuracy were embedded on the "
            "same images and are compared."
        )

    baselines = corr[corr["predictor"].isin(V.BASELINES)]
    if baselines.empty:
        st.caption(
            "lu2022's baselines (alignment, uniformity, MCR² ΔR, rotation prediction) are not computed yet:"
        )
        st.code(command(ws, "baselines", ds), language="bash")
    else:
        st.caption(
            "Baselines (lu2022 section 3.2): alignment and uniformity of normalised features (lower is "
            "better for both), MCR² rate reduction with the k-means partition, rotation prediction "
            "by a 20-NN classifier; * uses labels. Alignment and rotation need the checkpoint's model."
        )

# Under the correlation figure: which checkpoints its numbers are over, and the commands for
# the other populations.
if population["population"] is not None:
    with right:
        st.markdown(population_text(population))
        st.caption("The same comparisons over another population (it replaces the stored one):")
        st.code(population_commands(command(ws, "comparisons", ds), ds, population), language="bash")

st.subheader("All checkpoints")
sortable = [c for c in V.TABLE_COLUMNS if c in summary.columns and c not in ("model", "run")]
s1, s2, _ = st.columns([2, 1, 3])
sort = U.url_selectbox(
    "Sort by",
    sortable,
    key="ckpts_sort",
    param="sort",
    format_func=column_name,
    container=s1,
    omit_default=True,
)
desc = U.url_toggle("Descending", key="ckpts_desc", param="desc", container=s2)
shown = ws.view(V.checkpoint_table, dataset=ds, k=k, clid=compared, sort=sort, descending=desc)
metric_table(shown, key="ckpts_table", formats=checkpoint_formats(shown), placeholder=DASH)

# ---- over training ---------------------------------------------------------------------------
st.header("Transfer to other datasets")
targets = ws.view(V.transfer_targets, dataset=ds)
if not targets:
    st.info(
        "How well does each checkpoint transfer, and which predictor foresees it (lu2022 section "
        "3.5)? A linear probe on every other labelled dataset of the workspace, once computed:",
        icon=":material/pending:",
    )
    st.code(command(ws, "baselines", ds), language="bash")
else:
    target = U.url_selectbox("Target dataset", targets, key="ckpts_target", param="target", omit_default=True)
    tcorr = ws.view(V.transfer_correlations, dataset=ds, k=k, target=target)
    tl, tr = st.columns([1, 1], gap="large")
    with tl:
        st.markdown(f"**Correlation with transfer accuracy to {literal(target)}**, with 95% intervals")
        show_catalog_figure(
            ws,
            "transfer_correlations",
            {"ds": ds, "k": k, "target": target},
            corr_provenance,
            key="ckpts_transfer_fig",
        )
    with tr:
        scores = ws.view(V.transfer_scores, dataset=ds, k=k, target=target)
        st.markdown(f"**Linear probe on {literal(target)}**, by checkpoint")
        metric_table(
            scores,
            key="ckpts_transfer_scores",
            formats={c: "%.3f" for c in scores.columns if c not in ("checkpoint_id", "n_train", "n_test")},
            placeholder=DASH,
        )
    if warning := unstable_warning(tcorr):
        st.warning(warning, icon=":material/warning:")
    table, formats = correlation_table(tcorr)
    metric_table(table, key="ckpts_transfer_corr", formats=formats, placeholder=DASH)
    st.caption(
        "Transfer accuracy: a logistic-regression probe on the target's train split, scored on the "
        "rest. −H target is Vedantam et al.'s target-entropy baseline and needs the target's labels; "
        "kNN acc. is the in-domain accuracy (lu2022 Table 3 combines it with the predictors)."
    )

st.header("Over training")
curves = ws.view(V.training, dataset=ds, k=k, clid=compared)
if curves.empty:
    st.info("No run has checkpoints at two or more epochs (`checkpoints.run` and `epoch`).")
else:
    present = [str(m) for m in dict.fromkeys(curves["metric"].astype(str))]
    metric = U.url_selectbox(
        "Metric",
        present,
        key="ckpts_metric",
        param="metric",
        format_func=lambda m: METRIC_TITLES.get(m, m),
        container=st.columns([1, 2])[0],
        omit_default=True,
    )
    show_catalog_figure(
        ws, "metrics_vs_epoch", {"ds": ds, "k": k, "metric": metric}, provenance, key="ckpts_epoch_fig"
    )

# ---- aNMI between clusterings ---------------------------------------------------------------------
st.header("How similar are the clusterings?")
if not compared:
    st.caption("Needs the comparisons between checkpoints (see above).")
elif len(order) < 2:
    st.info(
        "Only one checkpoint is clustered at this k: add a second checkpoint to compare.",
        icon=":material/info:",
    )
else:
    st.caption(
        "Adjusted NMI (arithmetic normalisation) between every two checkpoints' "
        f"k = {k} clusterings, on the images both assign: 1 = the same partition, "
        "0 = no more alike than chance. Hover a cell for both names."
    )
    show_catalog_figure(ws, "anmi_matrix", {"ds": ds, "k": k}, provenance, key="ckpts_anmi_fig")

# ---- along training (issue 27): a separate component, so this page's other sections merge cleanly
training_section(ws, ds, provenance)

# ---- A and B ------------------------------------------------------------------------------------
st.header("A and B")
if len(order) < 2:
    st.info(
        f"Comparing two checkpoints needs two clustered checkpoints; {literal(ds)} has one at "
        f"k = {k}. Add a second checkpoint to compare.",
        icon=":material/info:",
    )
    U.stop()
if a == b:
    st.info("Choose two different checkpoints as A and B (at the top of the page).")
    U.stop()
pair = {"dataset": ds, "k": k, "a": a, "b": b}
st.markdown(f"**A** = {literal(name_of[a])} · **B** = {literal(name_of[b])}")


def _on_select() -> None:
    # A's WebGL view sends a committed box or lasso (as the URL keeps it) or a cleared one.
    ev = st.session_state.get("ckpts_proj_a") or {}
    if ev.get("event") == "select":
        st.session_state["ckpts_region"] = C.region_text(ev["kind"], ev["x"], ev["y"])
    elif ev.get("event") == "clear":
        st.session_state["ckpts_region"] = None


def _region(raw: str) -> str:
    """A region from a link, kept as its text once it parses (ValueError otherwise)."""
    C.parse_region(raw)
    return raw


region = U.url_value("ckpts_region", "region", _region, None, "Region")

st.subheader("Where A's images lie in B")
region_ids: list[str] = []  # the images of the region drawn on A, scored by the panel below
# The UMAPs are coloured by cluster and a selection is counted in B's clusters.
projected = available(ws, "projections", ds) and available(ws, "clustering", ds, tables=("clusters",))
sizes = (
    {c: int(ws.view(C.projection_size, checkpoint=c, method="umap")["n"].iloc[0]) for c in (a, b)}
    if projected
    else {}
)
if projected and not all(sizes.values()):
    missing = [c for c, n in sizes.items() if not n]
    st.info(f"No UMAP projection of {', '.join(literal(c) for c in missing)} yet. Compute it with:")
    st.code(command(ws, "projections", ds), language="bash")
elif projected:
    colour = U.url_selectbox(
        "Colour both by",
        list(ws.view(V.linked_colours, dataset=ds)["column"]),
        key="ckpts_color",
        param="color",
        container=st.columns([1, 2])[0],
        omit_default=True,
    )
    picked = ws.view(C.region_images, checkpoint=a, k=k, region=region) if region else None
    ids = region_ids = list(picked["image_id"]) if picked is not None else []
    limit = P.max_points()
    st.caption(
        "Pick *Box* or *Lasso* and draw on A: the same images are ringed in B, and the table "
        "below says which of B's clusters they fall in. Scroll to zoom, drag to pan, hover for "
        "an image's caption; *Clear selection* clears it."
        + (
            f" Showing a fixed sample of {limit:,} images (the same in both)."
            if max(sizes.values()) > limit
            else ""
        )
    )
    for side, column in zip(("a", "b"), st.columns(2)):
        with column:
            st.markdown(f"**{side.upper()}**: {literal(name_of[a if side == 'a' else b])}")
            args = dict(dataset=ds, k=k, a=a, b=b, side=side, colour=colour, limit=limit)
            enc = P.points_of(ws, colour, view=V.linked_projection, **args)
            if side == "b":
                P.ring_ids(enc, ids)
            P.projection_view(
                enc,
                key=f"ckpts_proj_{side}",
                data_key=f"{ws.fp}|{ds}|{k}|{a}|{b}|{side}|{colour}",
                view_key=f"{ws.fp}|{a}|{b}|{side}",
                region=region if side == "a" else None,
                height=440,
                on_change=_on_select if side == "a" else None,
            )
            # The export is the catalogue's figure, built only when downloaded.
            export_catalog_figure(
                ws,
                "linked_umap",
                {"ds": ds, "k": k, "a": a, "b": b, "side": side, "color": colour, "region": region},
                provenance,
                key=f"ckpts_umap_{side}",
            )
    if ids:
        where = ws.view(V.selection_in_b, **pair, ids=ids)
        st.markdown(
            f"**{len(ids):,} images selected in A** lie in {len(where)} of B's clusters "
            f"(the largest share: {where['share of selection'].iloc[0]:.0%} in cluster "
            f"{where['cluster in B'].iloc[0]})."
        )
        metric_table(
            where,
            key="ckpts_selection",
            formats={"share of selection": "%.2f", "share of cluster": "%.2f"},
            placeholder=DASH,
        )

# ---- the region drawn on A (or any other selection) scored on A ----------------------------------
selection_panel(
    ws,
    ds,
    a,
    k,
    lambda: region_ids,
    region_origin(region, f"the UMAP of checkpoint A ({a}, k={k})")
    if region
    else "draw a box or lasso on A's UMAP",
)

# ---- cluster matching ---------------------------------------------------------------------------
st.subheader("Cluster matching")
if not compared or ws.problems(("clusters",)) or not ws.has("clusters"):  # links come from clusters
    st.caption("Needs the clusterings and the comparisons between checkpoints (see above).")
    U.stop()
c_t, c_f, c_n = st.columns([1, 2, 1])
min_share = U.url_slider(
    "Significant share",
    0.05,
    0.5,
    key="ckpts_share",
    param="share",
    default=0.2,
    step=0.05,
    container=c_t,
    help=(
        f"A link is significant when it carries at least this share of its cluster in A or "
        f"in B, at least {MIN_IMAGES} images and more than chance would (docs/analysis.md)."
    ),
)
flows = U.url_radio(
    "Show",
    list(V.FLOWS),
    key="ckpts_flows",
    param="flows",
    horizontal=True,
    container=c_f,
    help=(
        "Splits and merges only: the links of significant splits and merges; significant "
        "flows add one-to-one matches; all flows add the links that are not significant."
    ),
)
tops = [n for n in (5, 10, 20, 40) if n < k] + [0]
top = U.url_selectbox(
    "A's clusters drawn",
    tops,
    key="ckpts_top",
    param="top",
    format_func=lambda n: "all" if n == 0 else f"the {n} largest",
    default_index=tops.index(10) if 10 in tops else len(tops) - 1,
    container=c_n,
    omit_default=True,
    help="The largest clusters of A (by images) and where their images go; all links are in the table below.",
)
changes = ws.view(V.cluster_changes, **pair, min_share=min_share).iloc[0]
m1, m2, m3, m4, m5 = st.columns(5)
m1.metric("A clusters that split", int(changes["splits"]))
m2.metric("B clusters that merge", int(changes["merges"]))
m3.metric("one-to-one matches", int(changes["one_to_one"]))
m4.metric("births / deaths", f"{int(changes['births'])} / {int(changes['deaths'])}")
m5.metric("aNMI(A, B)", DASH if changes["anmi"] != changes["anmi"] else f"{changes['anmi']:.3f}")
# Captions only add to the Sankey's hover text (its build leaves out a broken table): a
# workspace without them needs no message here, a broken one is named.
if ws.has("cluster_captions"):
    available(ws, "cluster_captions", ds)
st.caption(
    "Left: clusters of A, right: clusters of B; band width = shared images, band colour = "
    "the concept event it belongs to (legend in the figure; docs/analysis.md gives the rule "
    "of a significant link). Nodes too small for a label at a single column's width carry "
    "none; hover any node for its name, size, purity, coherence and caption."
)
show_catalog_figure(
    ws,
    "cluster_sankey",
    {"ds": ds, "k": k, "a": a, "b": b, "share": min_share, "flows": flows, "top": top},
    provenance,
    key="ckpts_sankey_fig",
)
links = ws.view(V.cluster_links, **pair, min_share=min_share)
with st.expander(f"All {len(links)} links"):
    metric_table(links, key="ckpts_links", formats={"share_a": "%.2f", "share_b": "%.2f"})
