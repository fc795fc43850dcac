"""The CompMap page's figures (pages/compmap.py)."""

from __future__ import annotations

from ...views import compmap as V
from ..catalog import Figure, Param, add, view
from .common import col

CM_DS = Param("ds", lambda db, p: col(V.datasets(db), "dataset"), help="dataset")
CM_VL = Param("vl", lambda db, p: col(V.vl_models(db, p["ds"]), "vl_model"), help="VL model")
CM_SETTING = Param(
    "setting", lambda db, p: col(view(db, V.settings, vl_model=p["vl"]), "setting"), help="setting"
)
CM_MODEL = Param("model", lambda db, p: list(V.LEARNED), help="prim or oracle")
CM_SORT = Param("sort", lambda db, p: list(V.SORTS), help="class order")
CM_CLASS = Param(
    "cls", lambda db, p: [int(c) for c in col(V.classes(db, p["ds"], p["vl"]), "label")], kind=int
)


def _cm_accuracy(db, p):
    from ..compmap import accuracy_by_setting

    return accuracy_by_setting(view(db, V.scores, vl_model=p["vl"], metric="accuracy"))


def _cm_delta(db, p):
    from ..compmap import delta_by_model

    labels = view(db, V.settings, vl_model=p["vl"]).set_index("setting")["setting_label"]
    return delta_by_model(
        view(db, V.delta, dataset=p["ds"], setting=p["setting"]), labels.get(p["setting"], p["setting"])
    )


def _cm_weights(db, p):
    from ..compmap import weights_heatmap

    w = view(db, V.weights, dataset=p["ds"], vl_model=p["vl"], model=p["model"], sort=p["sort"])
    return weights_heatmap(w, f"{V.LEARNED[p['model']]} weights (full shot)")


def _cm_class(db, p):
    from ..compmap import top_weights_bar

    cw = view(db, V.class_weights, dataset=p["ds"], vl_model=p["vl"], model=p["model"], label=p["cls"])
    names = view(db, V.classes, dataset=p["ds"], vl_model=p["vl"]).set_index("label")["label_name"]
    return top_weights_bar(cw, n=max(15, 2 * int(cw["gt"].sum())), title=f"{names[p['cls']]}: top weights")


CM = ("primitives", "compmap")
add(
    Figure(
        "compmap",
        "accuracy_by_setting",
        "Accuracy and interventions",
        (CM_DS, CM_VL),
        _cm_accuracy,
        aspect=0.62,
        steps=CM,
    )
)
add(
    Figure(
        "compmap",
        "delta",
        "Delta per VL model",
        (CM_DS, CM_VL, CM_SETTING),
        _cm_delta,
        aspect=0.62,
        steps=CM,
    )
)
add(
    Figure(
        "compmap",
        "weights_heatmap",
        "Composition weights",
        (CM_DS, CM_VL, CM_MODEL, CM_SORT),
        _cm_weights,
        aspect=0.9,
        steps=CM,
    )
)
add(
    Figure(
        "compmap",
        "top_weights",
        "One class's top weights",
        (CM_DS, CM_VL, CM_MODEL, CM_CLASS),
        _cm_class,
        aspect=0.75,
        steps=CM,
    )
)
