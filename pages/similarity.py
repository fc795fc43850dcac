"""Similarity: people's similarity judgments, their psychological embedding and how well each
checkpoint agrees with people (roads2021).

URL: ?ds=DATASET&color=COLUMN&thumbs=N&img=IMAGE&ckpt=CHECKPOINT&dist=l1|l2|cosine
&metric=triplet_accuracy|rsa&trial=I&catch=0|1, the box or lasso drawn on the map
&region=box:...|lasso:... and the panel scoring it (or another selection) on the checkpoint
(&score=1&ssrc=..., components/selection_panel.py).

The map is the WebGL projection view (components/projection.py): pan, zoom and hover in the
browser, a click picks the image, a box or lasso selects a group; its static export is the
catalogue's `psych_umap` figure (with `thumbs` thumbnails drawn on it).
"""

import pandas as pd
import streamlit as st

from components import data, url_state
from components import projection as P
from components.analysis_gate import available, command
from components.export_button import export_catalog_figure, show_catalog_figure
from components.image_grid import image_grid
from components.metric_table import metric_table
from components.selection_panel import region_origin, selection_panel
from components.text import literal
from components.url_state import set_param, url_selectbox
from conceptlens.embedding.psych import psych_id
from conceptlens.figures.similarity import (
    DISTANCE_NAMES,
    METRICS,
)
from conceptlens.figures.specs.similarity import NEIGHBOURS, THUMBS
from conceptlens.views import clusters as VC
from conceptlens.views import selection as VS
from conceptlens.views import similarity as V

ws = data.open_page("similarity")

st.title("Similarity")
st.caption(
    "Which images do people find similar, and which models agree? In each trial a person saw "
    "a query image and 8 references and chose, in order, the two most similar (8-rank-2, "
    "roads2021). A psychological embedding is inferred from the choices; each checkpoint is "
    "scored by how often it ranks the trials' pairs as people did (triplet accuracy) and by "
    "the rank correlation of its similarities with the embedding's (RSA)."
)

datasets = ws.view(V.datasets)
if datasets.empty:
    if ws.problems(("similarity_trials",)):
        data.show_problems(ws, ws.problems(("similarity_trials",)), "similarity_trials has problems")
    else:
        st.info(
            "This workspace has no similarity judgments. Import some (the ImageNet-HSJ release or "
            "psiz HDF5 observations, docs/similarity.md) with:",
            icon=":material/pending:",
        )
        st.code(f"conceptlens import hsj --workspace {ws.label} SOURCE --dataset DATASET", language="bash")
    url_state.stop()

c_ds, c_ck = st.columns([1, 2])


def _forget_region() -> None:
    # A region is drawn in one dataset's map coordinates: it means nothing on another's.
    st.session_state["sim_region"] = None


ds = url_selectbox(
    "Dataset", list(datasets["dataset"]), key="sim_ds", param="ds", container=c_ds, on_change=_forget_region
)
summary = ws.view(V.trial_summary, dataset=ds).iloc[0]
if summary["simulated"]:
    note = str(ws.meta().get("provenance", {}).get("similarity_trials", {}).get("note") or "")
    title = "Simulated people"
    if note.lower().startswith(title.lower()):  # the note's own title is not said twice
        note = note[len(title) :].lstrip(" .:;-")
        note = note[:1].upper() + note[1:]
    st.warning(
        f"**{title}.** "
        + (
            literal(note)
            if note
            else "These judgments were not collected from anyone (every agent id starts with `simulated-`)."
        ),
        icon=":material/smart_toy:",
    )
cols = st.columns(6)
for col, (name, value) in zip(
    cols,
    [
        ("trials", summary["trials"]),
        ("people", summary["people"]),
        ("images", summary["images"]),
        ("fitted (train)", summary["train"]),
        ("scored (test)", summary["test"]),
        ("catch trials", summary["catch"]),
    ],
):
    col.metric(name, f"{int(value):,}")
st.caption(
    f"Trial kinds: {literal(summary['kinds'])} · mean weight {summary['mean_weight']:.2f} (the "
    "session's catch-trial grade)"
    + (
        ""
        if pd.isna(summary["median_seconds"])
        else f" · median response time {summary['median_seconds']:.1f} s"
    )
)
prov = {"workspace": ws.label, "fingerprint": ws.fp, "dataset": ds}
analysed = available(ws, "similarity", ds)  # says what is missing or broken if not
computed = analysed and bool(datasets.set_index("dataset").loc[ds, "embedded"])
ckpts = list(ws.view(V.checkpoints, dataset=ds)["checkpoint_id"]) if computed else []
ckpt = (
    url_selectbox(
        "Checkpoint (neighbours, trial choices, per label)",
        ckpts,
        key="sim_ckpt",
        param="ckpt",
        container=c_ck,
    )
    if ckpts
    else None
)

# ---- the map of the psychological embedding ------------------------------------------------
if computed:
    st.header("People's similarity map")
    st.caption(
        "A 2-D UMAP of the psychological embedding: nearby images are ones people judge "
        "similar. Scroll to zoom, drag to pan, hover a point for its image and label; click it "
        "to compare its nearest images for people and for the checkpoint; pick *Box* or *Lasso* "
        "and draw to score a group (below)."
    )
    m1, m2, _ = st.columns([1, 1, 2])
    colour = url_selectbox(
        "Colour by",
        list(ws.view(V.colour_options, dataset=ds)["column"]),
        key="sim_color",
        param="color",
        container=m1,
    )
    thumbs = url_selectbox(
        "Thumbnails in the export",
        list(THUMBS),
        key="sim_thumbs",
        param="thumbs",
        container=m2,
        default_index=1,
        help="How many thumbnails the exported figure draws on the map (the view shows a point's "
        "thumbnail on hover).",
    )
    images = ws.view(V.embedded_images, dataset=ds)
    ids = list(images["image_id"])
    label_of = dict(zip(images["image_id"], images["label_name"]))

    def _on_map() -> None:
        # The view sends a click on a point (its index), a committed box or lasso, or a clear.
        ev = st.session_state.get("sim_map") or {}
        shown = st.session_state.get("_sim_map_ids")
        if ev.get("event") == "click" and shown is not None and 0 <= ev.get("index", -1) < len(shown):
            st.session_state["sim_img"] = str(shown[ev["index"]])
        elif ev.get("event") == "select":
            st.session_state["sim_region"] = VC.region_text(ev["kind"], ev["x"], ev["y"])
        elif ev.get("event") == "clear":
            st.session_state["sim_region"] = None

    def _region(raw: str) -> str:
        VC.parse_region(raw)  # ValueError: the link's region is warned about and dropped
        return raw

    region = url_state.url_value("sim_region", "region", _region, None, "Region")
    selected = st.session_state.get("sim_img") or st.query_params.get("img")
    limit = P.max_points()
    enc = P.points_of(ws, colour, view=V.embedding_points, dataset=ds, limit=limit)
    st.session_state["_sim_map_ids"] = enc.ids
    P.ring_ids(enc, [selected] if selected in ids else [])
    P.projection_view(
        enc,
        key="sim_map",
        data_key=f"{ws.fp}|{ds}|{colour}|{len(enc.ids)}",
        view_key=f"{ws.fp}|{ds}",
        region=region,
        height=520,
        on_change=_on_map,
    )
    if len(ids) > limit:
        st.caption(f"Showing a fixed sample of {limit:,} of the {len(ids):,} images.")
    export_catalog_figure(
        ws,
        "psych_umap",
        {"ds": ds, "color": colour, "thumbs": thumbs, "img": selected if selected in ids else None},
        prov,
        key="sim_map_export",
    )
    img = url_selectbox(
        "Image", ids, key="sim_img", param="img", format_func=lambda i: f"{i} · {label_of.get(i) or ''}"
    )
    near = ws.view(V.neighbours, dataset=ds, image_id=img, checkpoint=ckpt, k=NEIGHBOURS)
    left, mid, right = st.columns([1, 3, 3], gap="medium")
    with left:
        st.markdown("**Selected**")
        image_grid(ws, images[images["image_id"] == img], width=110)
    for col, who, heading in ((mid, "people", "Nearest for people"), (right, ckpt, f"Nearest for {ckpt}")):
        with col:
            st.markdown(f"**{literal(heading)}**")
            rows = near[near["who"] == who].assign(
                caption=lambda d: d["label_name"].fillna("") + " · " + d["similarity"].map("{:.2f}".format)
            )
            image_grid(ws, rows, caption_col="caption", width=72)
    if ckpt is not None:
        both = set(near.loc[near["who"] == "people", "image_id"]) & set(
            near.loc[near["who"] == ckpt, "image_id"]
        )
        st.caption(
            f"{len(both)} of the {NEIGHBOURS} nearest images are the same for people and "
            f"{literal(ckpt)}. People's similarity: the ensemble's mean exp(-10 · distance); the "
            "checkpoint's: cosine similarity of its features, among the embedded images."
        )

# ---- the group drawn on the map (or any other selection) scored on the checkpoint ---------------
if computed and ckpt is not None:
    region_ids = ws.view(VS.region_ids, checkpoint=psych_id(ds), region=region) if region else []
    broken_metrics = ws.problems(("cluster_metrics",)) if ws.has("cluster_metrics") else []
    if broken_metrics:  # shown; the selection is scored without describability
        data.show_problems(ws, broken_metrics, "cluster_metrics has problems: no caption for the selection")
    ks = ws.view(VC.ks, checkpoint=ckpt)["k"] if ws.has("cluster_metrics") and not broken_metrics else []
    selection_panel(
        ws,
        ds,
        ckpt,
        int(ks.iloc[0]) if len(ks) else None,
        lambda: region_ids,
        region_origin(region, f"people's similarity map of {ds}")
        if region
        else "draw a box or lasso on the map",
    )

# ---- agreement with people -----------------------------------------------------------------
if computed:
    st.header("Agreement with people")
    alignment = ws.view(V.alignment, dataset=ds)
    if alignment.empty:
        st.info(f"No checkpoint of {literal(ds)} has features to score yet.")
    else:
        d1, _ = st.columns([1, 3])
        dist = url_selectbox(
            "Distance",
            list(DISTANCE_NAMES),
            key="sim_dist",
            param="dist",
            format_func=DISTANCE_NAMES.get,
            container=d1,
            default_index=2,
        )
        ref = ws.view(V.people_reference, dataset=ds)
        reference = float(ref["value"].iloc[0]) if len(ref) and ref["value"].notna().all() else None
        show_catalog_figure(ws, "agreement", {"ds": ds, "dist": dist}, prov, key="sim_bars")
        st.caption(
            "Bars: 95% percentile bootstrap intervals (resampling trials for triplet accuracy, "
            "images for RSA). Dotted: chance (0.5; 0). Dashed: the psychological embedding's own "
            "triplet accuracy on trials held out of its fit"
            + (f" ({reference:.3f})." if reference is not None else ".")
        )
        metric_table(
            ws.view(V.alignment_wide, dataset=ds, distance=dist),
            key="sim_align_table",
            formats={
                c: "%.3f"
                for c in (
                    "triplet_accuracy",
                    "triplet_accuracy_lo",
                    "triplet_accuracy_hi",
                    "rsa",
                    "rsa_lo",
                    "rsa_hi",
                )
            },
        )

        st.subheader("Per label")
        l1, _ = st.columns([1, 3])
        metric = url_selectbox(
            "Score", list(METRICS), key="sim_metric", param="metric", format_func=METRICS.get, container=l1
        )
        per_label = ws.view(V.by_label, dataset=ds, metric=metric, distance=dist)
        st.caption(
            "Which concepts a checkpoint sees as people do: its score on the trials whose query "
            "has the label (triplet accuracy), or on the pairs with an image of the label (RSA)."
        )
        show_catalog_figure(ws, "by_label", {"ds": ds, "metric": metric, "dist": dist}, prov, key="sim_heat")
        if ckpt is not None:
            mine = per_label[per_label["checkpoint_id"] == ckpt].sort_values("value", ascending=False)
            st.markdown(f"**{literal(ckpt)}**, best agreeing labels first")
            metric_table(
                mine[["label_name", "value", "lo", "hi", "n"]],
                key="sim_label_table",
                formats={"value": "%.3f", "lo": "%.3f", "hi": "%.3f"},
            )

# ---- the trials ----------------------------------------------------------------------------
st.header("Trials")
t1, t2, _ = st.columns([1, 1, 2])
kinds = {"0": "judged trials", "1": "catch trials"}
catch = (
    url_selectbox("Show", list(kinds), key="sim_catch", param="catch", format_func=kinds.get, container=t1)
    == "1"
)
n = int(ws.view(V.trial_count, dataset=ds, catch=catch)["n"].iloc[0])
if n == 0:
    st.info(f"No {kinds['1' if catch else '0']} in {literal(ds)}.")
else:
    raw = st.query_params.get("trial")
    if "sim_trial" not in st.session_state:
        st.session_state["sim_trial"] = int(raw) if raw and raw.isdigit() and int(raw) < n else 0
    st.session_state["sim_trial"] = min(int(st.session_state["sim_trial"]), n - 1)
    index = t2.number_input(f"Trial (0 – {n - 1:,})", min_value=0, max_value=n - 1, step=1, key="sim_trial")
    set_param("trial", int(index))
    rows = ws.view(V.trial, dataset=ds, index=int(index), catch=catch)
    r = rows.iloc[0]
    st.caption(
        f"Trial {literal(r['trial_id'])} ({literal(r['kind'])}, split {literal(r['split'])}) by "
        f"{literal(r['agent_id'])} · weight {r['weight']:.2f}"
        + ("" if pd.isna(r["rt_ms"]) else f" · {r['rt_ms'] / 1000:.1f} s")
    )
    ranks = {}
    if ckpt is not None and ws.problems(("features",)):  # the checkpoint's choices read its features
        data.show_problems(ws, ws.problems(("features",)), "features has problems")
    elif ckpt is not None:
        picks = ws.view(V.model_choices, trial_rows=rows, checkpoint=ckpt)
        ranks = dict(zip(picks["image_id"], picks["rank"]))
    ordinal = {1: "1st", 2: "2nd", 3: "3rd"}

    def caption(row):
        if row["role"] == "query":
            return "query"
        c = row["choice"]
        text = "not chosen" if pd.isna(c) else f"{ordinal.get(int(c), f'{int(c)}th')} choice"
        if row["image_id"] in ranks and ranks[row["image_id"]] <= 2:
            text += f" · model #{ranks[row['image_id']]}"
        return text

    rows = rows.assign(caption=rows.apply(caption, axis=1))
    q, refs = st.columns([1, 4], gap="medium")
    with q:
        image_grid(ws, rows[rows["role"] == "query"], caption_col="caption", width=120)
    with refs:
        image_grid(ws, rows[rows["role"] == "reference"], caption_col="caption", width=80)
    st.caption(
        "The person's choices in order"
        + (
            f"; `model #1`, `#2`: the two references {literal(ckpt)} finds most similar to the "
            "query (cosine)."
            if ckpt
            else "."
        )
    )

# ---- the fit -------------------------------------------------------------------------------
if computed:
    st.header("Fit diagnostics")
    fit = ws.view(V.fit, dataset=ds)
    kept = fit[fit["selected"]]
    st.caption(
        f"An ensemble of {fit['member'].nunique()} variational embeddings per dimensionality, each "
        "fitted without its own held-out share of the trials; the dimensionality with the best "
        f"mean held-out log-likelihood ({int(kept['dim'].iloc[0]) if len(kept) else '–'}) is kept "
        "(shaded). Accuracy: the chosen pair, in order, is the embedding's most probable outcome. "
        "Agreement: Spearman correlation of a member's similarities with the other members'."
    )
    show_catalog_figure(ws, "fit", {"ds": ds}, prov, key="sim_fit")
    fours = (
        "heldout_loglik",
        "heldout_accuracy",
        "heldout_triplet_accuracy",
        "test_loglik",
        "test_accuracy",
        "agreement",
        "prior_scale",
    )
    metric_table(
        fit.drop(columns=["dataset", "chance_accuracy"]),
        key="sim_fit_table",
        formats={c: "%.4f" for c in fours} | {"seconds": "%.1f"},
    )
    st.header("Convergence")
    conv = ws.view(V.convergence, dataset=ds)
    if conv.empty:
        st.info(
            "Has enough been collected? The embedding inferred again from growing shares of the "
            "trials shows it once computed:",
            icon=":material/pending:",
        )
        st.code(command(ws, "convergence", ds), language="bash")
    else:
        st.caption(
            f"The embedding inferred again from {len(conv)} growing shares of the trials, in "
            f"collection order ({int(conv['members'].iloc[0])} members each, "
            f"{int(conv['dim'].iloc[0])} dimensions): the loss on randomly drawn trials, the "
            "members' agreement and the agreement with the previous share (roads2021 section 5). "
            "Flat curves: more judgments no longer change the embedding."
        )
        show_catalog_figure(ws, "convergence", {"ds": ds}, prov, key="sim_conv")
elif analysed:
    st.info(
        f"No psychological embedding of {literal(ds)} yet: the map, the agreement scores and the "
        "fit appear once the analysis has run:",
        icon=":material/pending:",
    )
    st.code(command(ws, "similarity", ds), language="bash")
