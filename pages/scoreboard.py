"""Scoreboard: every kind of concept of a checkpoint — dictionary atoms, single units,
k-means clusters, saved selections, labels and label-hierarchy nodes — scored alike at one
member count N, against random directions of feature space (the null) and random sets of
N images (docs/scoreboard.md).

URL: ?ds=DATASET&ckpt=CHECKPOINT&score=SCORE&src=SOURCE,SOURCE&concept=SOURCE/CONCEPT
(each left out at its default: the first dataset and checkpoint, `purity_label` or else
`learnability`, every source, the first ranked concept).
"""

import pandas as pd
import streamlit as st

from components import data, defer, url_state
from components.analysis_gate import available, command
from components.cluster_tables import DASH
from components.export_button import show_catalog_figure, view_provenance
from components.image_grid import image_grid
from components.metric_table import metric_table
from components.text import literal
from components.url_state import url_multiselect, url_selectbox
from conceptlens.figures.scoreboard import score_title
from conceptlens.figures.specs.scoreboard import axis_order
from conceptlens.tables import latex_escape, to_latex
from conceptlens.views import scoreboard as V

GRID_IMAGES = 24
ws = data.open_page("scoreboard")

st.title("Scoreboard")
st.caption(
    "Which concepts did the model learn, and how do they compare? Every kind of concept of a "
    "checkpoint is a set of N images, chosen by its own source, and scored alike: purity "
    "against the labels, 2AFC coherence, describability, learnability, intrinsic dimension "
    "and, where the images have ground-truth concepts, niche membership. Each score is read "
    "against random directions of feature space (what any direction gets) and random sets of "
    "N images (what chance gets); labels are the ceiling."
)

sets = ws.view(V.datasets)
first = sets["dataset"].iloc[0] if len(sets) else "DATASET"
if not available(ws, "scoreboard", first):
    url_state.stop()
if sets.empty:
    st.info("No checkpoint has a scoreboard yet. Compute it with:", icon=":material/pending:")
    st.code(command(ws, "scoreboard", first), language="bash")
    url_state.stop()

c_ds, c_ck, c_sc = st.columns([1, 2, 1])
ds = url_selectbox("Dataset", list(sets["dataset"]), key="sb_ds", param="ds", container=c_ds)
cks = ws.view(V.checkpoints, dataset=ds)
ckpt = url_selectbox("Checkpoint", list(cks["checkpoint_id"]), key="sb_ckpt", param="ckpt", container=c_ck)
names = ws.view(V.scores, checkpoint=ckpt)
default = V.default_score(names)
score = url_selectbox(
    "Rank by",
    names,
    key="sb_score",
    param="score",
    format_func=score_title,
    default_index=names.index(default) if default in names else 0,
    container=c_sc,
)
have = ws.view(V.sources, checkpoint=ckpt)
picked = url_multiselect("Sources", have, key="sb_src", param="src", format_func=V.title)
if not picked:
    st.info("Choose at least one source.", icon=":material/filter_alt:")
    url_state.stop()
chosen = None if picked == have else picked
n = ws.view(V.matched_size, checkpoint=ckpt)
n_boot, seed = ws.view(V.resampling, checkpoint=ckpt)
params = {"ds": ds, "ckpt": ckpt, "score": score, **({"src": ",".join(chosen)} if chosen else {})}
prov = {"dataset": ds, "checkpoint": ckpt}
st.caption(
    f"Checkpoint {literal(ckpt)} · N = {n if n is not None else DASH} members per concept · "
    f"intervals: 95%, {n_boot} bootstrap resamples, seed {seed}"
)

# ---- the overview, sent first ---------------------------------------------------------------------
# A session's first run in a browser sends the controls and this figure and stops; its first
# draw reruns the page whole (components/defer.py).
deferring = defer.defer_rest("sb_scatter")
st.header("Purity against coherence")
show_catalog_figure(ws, "scoreboard_scatter", params, prov, key="sb_scatter")
st.caption(
    "Each scored concept: purity against the labels (up) and coherence with random negatives "
    "(right). Shaded: where 95% of the random directions fall on each score; a concept outside "
    "both bands does better than an arbitrary direction of the same feature space."
)
if deferring:
    st.caption(defer.DEFERRED_NOTE)
    defer.report_when_drawn("sb_scatter")
    url_state.stop(carry=True)

with st.expander("The sources, and how each chooses its N members"):
    st.dataframe(
        V.source_table()[["title", "role", "members"]].rename(
            columns={"title": "source", "members": "its N members"}
        ),
        hide_index=True,
    )
    st.caption(
        "Every source is compared at the same N, so none is favoured by larger or smaller sets. "
        "Role: `concept` (what the model learned), `null` (read against), `ceiling` (ground truth)."
    )

# ---- the ranking ----------------------------------------------------------------------------------
st.header("Ranking")
ranked = ws.view(V.ranked, checkpoint=ckpt, score=score, chosen=chosen)
shown = ranked.assign(source=ranked["source"].map(V.title))[
    ["rank", "source", "name", "size", "value", "lo", "hi", "pct_random", "pct_directions"]
].rename(
    columns={
        "value": score_title(score),
        "lo": f"{score_title(score)} lo",
        "hi": f"{score_title(score)} hi",
        "pct_random": "percentile vs random sets",
        "pct_directions": "percentile vs random directions",
    }
)
metric_table(
    shown,
    key="sb_ranking",
    formats={
        score_title(score): "%.3f",
        f"{score_title(score)} lo": "%.3f",
        f"{score_title(score)} hi": "%.3f",
        "percentile vs random sets": "%.0f",
        "percentile vs random directions": "%.0f",
    },
    name=f"scoreboard-{ckpt}-{score}",
    height=360,
)
st.caption(
    f"Every scored concept by {literal(score_title(score))}, highest first (a concept without the "
    "score last), with its 95% interval and its percentile among random sets of N images and "
    "among the random directions (100: above them all)."
)
left = ws.view(V.unscored, checkpoint=ckpt, chosen=chosen)
if len(left):
    with st.expander(f"Not scored: {len(left)} concept(s) with fewer than N members"):
        st.dataframe(
            left.assign(source=left["source"].map(V.title))[["source", "name", "size", "reason"]],
            hide_index=True,
        )

# ---- the sources ---------------------------------------------------------------------------------
st.header(f"{score_title(score).capitalize()} by source")
show_catalog_figure(ws, "scoreboard_sources", params, prov, key="sb_sources")
st.caption(
    "Each source's concepts (points) and their mean with its 95% interval (concepts resampled), "
    "against the 2.5–97.5% range of the random directions (grey) and of random sets of N "
    "images (blue)."
)

# ---- one concept ----------------------------------------------------------------------------------
st.header("One concept")
keys = list(ranked["key"])
label_of = dict(zip(ranked["key"], ranked["source"].map(V.title) + " · " + ranked["name"].astype(str)))
key = url_selectbox(
    "Concept", keys, key="sb_concept", param="concept", format_func=lambda k: label_of.get(k, k)
)
if key is None:
    st.info("No scored concept among the sources shown.")
else:
    source, concept = V.split_key(key)
    one = {**params, "concept": key}
    members = ws.view(V.members, checkpoint=ckpt, source=source, concept=concept)
    g, s = st.columns([3, 2])
    with g:
        st.subheader("Members")
        said = ws.view(V.caption, checkpoint=ckpt, source=source, concept=concept)
        if said is not None:
            st.markdown(f"Class-level caption: **{literal(said)}**")
        image_grid(ws, members, caption_col="label_name", max_images=GRID_IMAGES)
        st.caption(
            f"{len(members)} member(s), rank order ({literal(V.BY_NAME[source].members)})."
            if source in V.BY_NAME
            else f"{len(members)} member(s)."
        )
    with s:
        st.subheader("Scores")
        sc = ws.view(V.concept_scores, checkpoint=ckpt, source=source, concept=concept)
        metric_table(
            sc.assign(score=sc["score"].map(score_title)).rename(
                columns={"pct_random": "pct vs random sets", "pct_directions": "pct vs directions"}
            ),
            key="sb_concept_scores",
            formats={
                "value": "%.3f",
                "lo": "%.3f",
                "hi": "%.3f",
                "pct vs random sets": "%.0f",
                "pct vs directions": "%.0f",
            },
            name=f"scoreboard-{ckpt}-{key}",
        )
    broken = ws.problems(("projections",))
    if broken:
        data.show_problems(ws, broken, "The projections have problems: the members are not placed")
    elif ws.has("projections"):
        st.subheader("Where its members lie")
        show_catalog_figure(ws, "scoreboard_projection", one, prov, key="sb_projection")
    st.subheader("Across checkpoints and layers")
    rows = ws.view(V.across, dataset=ds, checkpoint=ckpt, source=source, concept=concept, score=score)
    show_catalog_figure(ws, "scoreboard_across", one, prov, key="sb_across")
    metric_table(
        rows[
            [
                "checkpoint_id",
                "epoch",
                "depth",
                "layer",
                "name",
                "matched",
                "jaccard",
                "cosine",
                "value",
                "lo",
                "hi",
            ]
        ].rename(
            columns={
                "name": "match",
                "matched": "matched by",
                "cosine": "|cosine|",
                "value": score_title(score),
            }
        ),
        key="sb_across_table",
        formats={"epoch": "%g", "depth": "%g", "jaccard": "%.2f", "|cosine|": "%.2f"}
        | {c: "%.3f" for c in (score_title(score), "lo", "hi")},
        name=f"scoreboard-across-{key}",
    )
    st.caption(
        f"In every checkpoint of {literal(ds)} with a scoreboard, by {axis_order(rows)}: "
        "its match. A dictionary atom is matched to an atom of the same method where the "
        "features are of equal width as the dictionary's stability matches atoms across "
        "seeds (`atoms`: the Hungarian method on |cosine| between the two dictionaries); any "
        "other concept, and an atom across widths, to the concept of the same source whose "
        "members overlap this one's most (`members`: Jaccard)."
    )

# ---- per source -----------------------------------------------------------------------------------
st.header("Per source")
summary = ws.view(V.source_summary, checkpoint=ckpt, chosen=chosen)
wide = pd.DataFrame({"source": [V.title(s) for s in dict.fromkeys(summary["source"])]})
for sc_name in dict.fromkeys(summary["score"]):
    part = summary[summary["score"] == sc_name].set_index("source")
    t = score_title(sc_name)
    order = list(dict.fromkeys(summary["source"]))
    if "concepts" not in wide:
        wide["concepts"] = [int(part["n"].get(s, 0)) for s in order]
    wide[t] = [part["mean"].get(s) for s in order]
    wide[f"{t} lo"] = [part["lo"].get(s) for s in order]
    wide[f"{t} hi"] = [part["hi"].get(s) for s in order]
    wide[f"{t}: above"] = [part["above"].get(s) for s in order]
fmt = {
    c: ("%.2f" if c.endswith(": above") else "%.3f") for c in wide.columns if c not in ("source", "concepts")
}
metric_table(wide, key="sb_summary", formats=fmt | {"concepts": "%d"}, name=f"scoreboard-sources-{ckpt}")
caption = (
    f"Scoreboard of checkpoint {ckpt} (workspace {ws.label}): per source, the mean of each score "
    f"over its concepts of N = {n} images with its 95% bootstrap interval ({n_boot} resamples of "
    "the concepts), and the share of its concepts above the random directions' 97.5% quantile."
)
latex = "\n".join(
    [
        "\\begin{table}[t]",
        "\\centering",
        f"\\caption{{{latex_escape(caption)}}}",
        to_latex(wide, fmt | {"concepts": "%d"}, provenance=view_provenance(table="scoreboard_sources")),
        "\\end{table}",
        "",
    ]
)
st.download_button(
    "LaTeX, with caption",
    data=latex.encode(),
    file_name=f"scoreboard-sources-{ckpt}.tex".replace("/", "-"),
    mime="application/x-tex",
    key="sb_latex",
    icon=":material/download:",
    on_click="ignore",
)
st.caption(literal(caption) + " “above”: share of concepts, 0–1.")

fit = ws.view(V.dictionary_fit, checkpoint=ckpt)
if len(fit):
    st.header("Dictionaries")
    metric_table(
        fit,
        key="sb_fit",
        formats={"r2": "%.3f", "l0": "%.2f", "stability": "%.3f"},
        name=f"dictionary-fit-{ckpt}",
    )
    st.caption(
        "Each dictionary of this checkpoint's features: r² of the reconstruction, l0 (mean non-zero "
        "codes per image), dead atoms (never active) and stability (atoms matched across two fits)."
    )
