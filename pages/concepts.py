"""Concepts: the quality of concept representations — purity matrices, oracle impurity and
concept niches (the concept-quality paper).

URL: ?family=FAMILY&level=LEVEL&method=METHOD&seed=SEED&beta=BETA
"""

import math

import streamlit as st

from components import data, url_state
from components.analysis_gate import available, command
from components.cluster_tables import DASH
from components.export_button import show_catalog_figure
from components.metric_table import metric_table
from components.text import literal
from components.url_state import url_selectbox, url_slider
from conceptlens.views import concepts as V

ws = data.open_page("concepts")

st.title("Concepts")
st.caption(
    "How pure are the concepts a model learnt? Entry (i, j) of a purity matrix is the test AUC "
    "of a small classifier (one hidden layer of 32 ReLUs) predicting true concept j from learnt "
    "concept i. The oracle matrix does the same with the true concepts themselves, so the "
    "oracle impurity score (OIS, 2/k ‖learnt − oracle‖) counts only information a learnt "
    "concept carries beyond what its dependencies explain; the non-oracle score compares with "
    "independent concepts instead. Concept niches: the learnt concepts whose |correlation| "
    "with a label exceeds β; niche purity is the label's AUC from its niche alone, niche "
    "impurity from everything else (Definitions 1–6 of the concept-quality paper)."
)

problems = ws.problems(("concept_labels", "concept_datasets"))
if problems:
    data.show_problems(ws, problems, "The ground-truth concepts have problems")
    url_state.stop()
sets = ws.view(V.datasets)
if sets.empty:
    st.info(
        "This workspace has no ground-truth concepts (`concept_labels`, docs/concepts.md). "
        "Import them from a file (an image id or path column and one column per concept, binary "
        "or categorical), or derive them from the label hierarchy's nodes (`--from-hierarchy`) "
        "or from columns of the images (`--from-images A,B`); then every checkpoint of their "
        "datasets is scored:",
        icon=":material/pending:",
    )
    st.code(
        command(ws, "concept_labels") + "\n" + command(ws, "concepts"),
        language="bash",
    )
    url_state.stop()
if not available(ws, "concepts", sets["dataset"].iloc[0]):
    url_state.stop()
sets = sets[sets["analysed"]]
if sets.empty:
    st.info("No checkpoint of a dataset with concepts has been scored yet:", icon=":material/pending:")
    st.code(command(ws, "concepts"), language="bash")
    url_state.stop()

c_fam, c_lvl, c_met, c_seed = st.columns(4)
families = list(dict.fromkeys(sets["family"]))
family = url_selectbox("Dataset", families, key="cq_family", param="family", container=c_fam)
of_family = sets[sets["family"] == family]
dependency = of_family["dependency"].iloc[0] or "level"
levels = [float(v) for v in of_family["level"]]
# A family of concept datasets (`concept_datasets`) has levels of dependency between its
# concepts; a dataset of one's own (`conceptlens import concepts`) is one dataset, no level.
graded = bool(of_family["dependency"].iloc[0]) or len(levels) > 1
if graded:
    level = url_selectbox(
        f"Dependency ({dependency})",
        levels,
        key="cq_level",
        param="level",
        format_func=lambda v: f"{dependency} = {v:g}",
        container=c_lvl,
    )
else:
    level = levels[0]
    c_lvl.caption("One dataset, no levels of dependency between its concepts (`concept_datasets`).")
ds = of_family.loc[of_family["level"] == level, "dataset"].iloc[0]
ckpts = ws.view(V.checkpoints, dataset=ds)
ckpts = ckpts[ckpts["analysed"]]
method = url_selectbox(
    "Method", list(dict.fromkeys(ckpts["method"])), key="cq_method", param="method", container=c_met
)
mine = ckpts[ckpts["method"] == method]
seed = url_selectbox("Seed", list(mine["seed"]), key="cq_seed", param="seed", container=c_seed)
row = mine[mine["seed"] == seed].iloc[0]
cid = row["checkpoint_id"]
prov = {"dataset": ds, "checkpoint": cid, "method": method}
st.caption(
    f"Dataset {literal(ds)} · checkpoint {literal(cid)} · "
    + (
        f"{int(row['k'])} learnt concepts"
        if row["concepts"] == "learnt"
        else "probe concepts: one logistic-regression probe per true concept on its features "
        "(train split; concept-based model extraction)"
    )
)

# ---- purity matrices ------------------------------------------------------------------------
st.header("Purity matrices")
scores = ws.view(V.checkpoint_scores, checkpoint=cid).set_index("score")


def interval(score: str, digits: int = 3) -> str:
    r = scores.loc[score]
    if math.isnan(r["mean"]):
        return DASH
    if math.isnan(r["lo"]):
        return f"{r['mean']:.{digits}f}"
    return f"{r['mean']:.{digits}f} [{r['lo']:.{digits}f}, {r['hi']:.{digits}f}]"


m1, m2, m3 = st.columns(3)
m1.metric("OIS", interval("ois"), help="Oracle impurity score, mean and 95% interval over the seeds.")
m2.metric("Non-oracle impurity", interval("non_oracle_impurity"), help="Against independent concepts.")
m3.metric("Task AUC", interval("task_auc"), help="The label predictor (MLP 20-20) on every concept.")
picked = {"family": family, "level": level, "method": method, "seed": seed}
show_catalog_figure(ws, "purity_heatmaps", picked, prov, key="cq_purity")
st.caption(
    f"Means over {int(scores.loc['ois', 'n'])} seeds (each its own 80/20 split of the test images "
    "and fresh classifiers). Rows follow the true concepts: row i is the learnt concept aligned "
    "to true concept i (by name, or greedily by AUC: `learnt → true`); learnt concepts aligned "
    "to none follow. One colour scale for all three: AUC in [0, 1], differences in [−1, 1]."
)

# ---- the sweep ----------------------------------------------------------------------------------
if graded:
    st.header("Impurity against dependency")
    show_catalog_figure(ws, "impurity_sweep", picked, {}, key="cq_sweep")
    st.caption(
        "Every method's mean with its 95% interval: over its checkpoints (training seeds) where it "
        "has several at a level, else over the analysis seeds (hover a point for n). The paper: the "
        "non-oracle score rises with dependency for every method while OIS separates the methods."
    )

# ---- niches ---------------------------------------------------------------------------------------
st.header("Concept niches")
betas = list(ws.view(V.betas, checkpoint=cid)["beta"])
if not betas:
    st.info(
        f"No niches for {literal(ds)}: its images have no task labels on both splits.",
        icon=":material/info:",
    )
else:
    b1, _ = st.columns([2, 3])
    default_beta = scores.loc["ois", "beta"]
    step = round(betas[1] - betas[0], 4) if len(betas) > 1 else 0.05
    chosen = url_slider(
        "β (niche threshold)",
        float(min(betas)),
        float(max(betas)),
        key="cq_beta",
        param="beta",
        default=float(min(betas, key=lambda b: abs(b - default_beta))),
        step=float(step),
        container=b1,
    )
    beta = min(betas, key=lambda b: abs(b - chosen))
    show_catalog_figure(ws, "niche_heatmap", {**picked, "beta": beta}, prov, key="cq_niche")
    show_catalog_figure(ws, "niche_curves", {**picked, "beta": beta}, {"dataset": ds}, key="cq_curves")
    st.caption(
        "Above: |Pearson correlation| of each learnt concept with each label on the train split; "
        "outlined, the label's niche at β. Below: per method, means over labels of niche purity "
        "(the label predictor with every concept outside the niche zeroed), niche impurity "
        "(every concept inside it zeroed) and niche size, with 95% intervals; the paper finds "
        "niche size falling and impurity rising with β."
    )

# ---- scores ----------------------------------------------------------------------------------------
st.header("Scores")
table = ws.view(V.scores_table, family=family)
metric_table(
    table,
    key="cq_scores",
    formats={c: "%.3f" for c in table.columns if c.startswith(tuple(V.SCORES))} | {"level": "%g"},
    name=f"concept-scores-{family}",
)
st.caption(
    "Every scored checkpoint of this dataset family: each score's mean over its seeds with the "
    "95% interval (`_lo`, `_hi`); niche scores at the analysis' fixed β "
    f"({scores.loc['ois', 'beta']:g}); `nis_area`: the mean niche impurity over β in [0, 0.95]."
)
