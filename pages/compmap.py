"""CompMap: which primitive concepts a VL model has learned (yun2023).

URL: ?ds=DATASET&vl=VL_MODEL&setting=5w1s|full&model=prim|oracle&sort=label|name|recovered
&cls=LABEL
"""

import streamlit as st

from components import data, url_state
from components.analysis_gate import available
from components.export_button import show_catalog_figure
from components.formats import WEIGHT_ACCURACY_COLUMNS, WEIGHT_ACCURACY_FORMATS
from components.image_grid import image_grid
from components.metric_table import metric_table
from components.text import literal
from components.url_state import url_selectbox
from conceptlens.views import compmap as V

ws = data.open_page("compmap")

st.title("CompMap")
st.caption(
    "Does a vision-language model know the primitive concepts (colours, shapes, parts...) "
    "that compose a class? Each image is scored against a prompt per primitive; composition "
    "models (logistic regression) map these activations (**Prim**) or the ground-truth "
    "primitives (**Oracle-Prim**) to the classes. Feeding the learned model the ground truth "
    "(**Interv(Full)**), or only setting the true primitives (**Interv(Partial)**), shows "
    "whether it composes the right primitives (Yun et al., CompMap)."
)

datasets = list(ws.view(V.datasets)["dataset"])
if not available(ws, "compmap", datasets[0] if datasets else "DATASET"):
    st.caption(
        "It needs `primitives` and `label_primitives` for a dataset (`conceptlens import cub` "
        "or `mit-states`; the demo has them for shapes) and a VL model of that dataset in "
        "`vl_models`."
    )
    url_state.stop()
if not datasets:
    st.info("No VL model has CompMap scores in this workspace.")
    url_state.stop()

c_ds, c_vl, c_set = st.columns(3)
ds = url_selectbox("Dataset", datasets, key="cm_ds", param="ds", container=c_ds)
vl = url_selectbox(
    "VL model", list(ws.view(V.vl_models, dataset=ds)["vl_model"]), key="cm_vl", param="vl", container=c_vl
)
settings = ws.view(V.settings, vl_model=vl)
label_of = dict(zip(settings["setting"], settings["setting_label"]))
setting = url_selectbox(
    "Setting",
    list(settings["setting"]),
    key="cm_setting",
    param="setting",
    format_func=label_of.get,
    container=c_set,
    help="n-way k-shot episodes (mean over episodes) or the full-shot setting "
    "(train split -> other splits). Used by Delta and the weight accuracy.",
)
prov = {"workspace": ws.label, "fingerprint": ws.fp, "dataset": ds, "vl_model": vl}

# ---- usefulness and interpretability ------------------------------------------------------------
st.header("Accuracy and interventions")
left, right = st.columns([3, 2], gap="large")
with left:
    show_catalog_figure(ws, "accuracy_by_setting", {"ds": ds, "vl": vl}, prov, key="cm_acc")
    st.caption("Mean accuracy with 95% intervals (episodes: mean ± 1.96 SE; full shot: Wilson).")
with right:
    show_catalog_figure(ws, "delta", {"ds": ds, "vl": vl, "setting": setting}, prov, key="cm_delta")
    st.caption(
        "Δ per VL model of this dataset: how much worse the learned composition is than the "
        "ground-truth one when both read the true primitives (lower = more interpretable)."
    )

st.subheader("Weight accuracy")
st.caption(
    "For a class with k ground-truth primitives: are its k largest weights those primitives? "
    "Acc-Instance counts each of the k slots, Acc-Class needs all k (yun2023 Table 4)."
)
acc = ws.view(V.weight_accuracy, vl_model=vl)
shown = acc[acc["setting"] == setting].drop(columns=["setting", "setting_label"])
metric_table(
    shown.rename(columns=WEIGHT_ACCURACY_COLUMNS),
    key="cm_weight_acc",
    formats=WEIGHT_ACCURACY_FORMATS,
)
st.caption(f"{label_of[setting]}; lo and hi: the ends of the 95% interval.")

# ---- weights ------------------------------------------------------------------------------------------
st.header("Composition weights")
c_m, c_s = st.columns(2)
model = url_selectbox(
    "Model", list(V.LEARNED), key="cm_model", param="model", format_func=V.LEARNED.get, container=c_m
)
sort = url_selectbox(
    "Sort classes by", list(V.SORTS), key="cm_sort", param="sort", format_func=V.SORTS.get, container=c_s
)
show_catalog_figure(
    ws, "weights_heatmap", {"ds": ds, "vl": vl, "model": model, "sort": sort}, prov, key="cm_heatmap"
)

# ---- one class ----------------------------------------------------------------------------------------
st.header("One class")
classes = ws.view(V.classes, dataset=ds, vl_model=vl)
name_of = dict(zip(classes["label"], classes["label_name"]))
label = url_selectbox(
    "Class", list(classes["label"]), key="cm_cls", param="cls", format_func=lambda c: f"{c} — {name_of[c]}"
)
cw = ws.view(V.class_weights, dataset=ds, vl_model=vl, model=model, label=label)
gt = cw[cw["gt"]]
left, right = st.columns([3, 2], gap="large")
with left:
    show_catalog_figure(
        ws, "top_weights", {"ds": ds, "vl": vl, "model": model, "cls": int(label)}, prov, key="cm_bar"
    )
    ranks = ", ".join(f"{r.value} ({r.group}) #{r.rank}" for r in gt.itertuples())
    st.caption(
        f"Ground-truth primitives and their rank among {len(cw)} weights: "
        f"{literal(ranks) if ranks else 'none'}."
    )
with right:
    st.markdown("**Where the VL model's primitives go wrong**")
    metric_table(
        ws.view(V.group_accuracy, dataset=ds, vl_model=vl, label=label),
        key="cm_groups",
        formats={"share": "%.2f"},
    )
    st.caption(
        "Per attribute group: images of this class whose highest activation in the group is a true value."
    )
imgs = ws.view(V.class_images, dataset=ds, vl_model=vl, label=label)
n_wrong = int((imgs["wrong"] > 0).sum())
st.markdown(
    f"**Images of {literal(name_of[label])}** — {n_wrong} of {len(imgs)} have a primitive "
    "the VL model gets wrong (shown first; caption: its top value ≠ the truth)."
)
image_grid(ws, imgs, caption_col="caption", width=96, max_images=24)
