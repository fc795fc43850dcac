"""The CompMap page: composition models of a VL model's primitive concepts (yun2023).

Settings are keyed `NwKs` (an n-way k-shot episode setting) or `full` (the full-shot
setting, `shots` = 0 in `compmap_scores`).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

MODEL_NAMES = {
    "prim": "Prim",
    "interv_full": "Interv(Full)",
    "interv_partial": "Interv(Partial)",
    "oracle": "Oracle-Prim",
}
LEARNED = {"prim": "learned (Prim)", "oracle": "ground-truth model (Oracle-Prim)"}
SORTS = {"label": "class index", "name": "class name", "recovered": "recovered primitives (worst first)"}
FULL = "full"


def setting_key(ways: int, shots: int) -> str:
    return FULL if int(shots) == 0 else f"{int(ways)}w{int(shots)}s"


def setting_label(ways: int, shots: int) -> str:
    return f"full shot ({int(ways)}-way)" if int(shots) == 0 else f"{int(ways)}-way {int(shots)}-shot"


def parse_setting(key: str) -> tuple[int | None, int]:
    """`5w1s` -> (5, 1); `full` -> (None, 0)."""
    if key == FULL:
        return None, 0
    m = re.fullmatch(r"(\d+)w(\d+)s", str(key))
    if not m:
        raise ValueError(f"setting {key!r} is neither `full` nor like `5w1s`")
    return int(m.group(1)), int(m.group(2))


def _order(df: pd.DataFrame) -> pd.DataFrame:
    """Episode settings by ways then shots; full shot last."""
    df = df.assign(
        setting=[setting_key(w, s) for w, s in zip(df["ways"], df["shots"])],
        setting_label=[setting_label(w, s) for w, s in zip(df["ways"], df["shots"])],
    )
    full = df["shots"] == 0
    return df.assign(_full=full).sort_values(["_full", "ways", "shots"], kind="stable").drop(columns="_full")


def datasets(db) -> pd.DataFrame:
    """Datasets with CompMap scores of some VL model."""
    if not (db.has("compmap_scores") and db.has("vl_models")):
        return pd.DataFrame({"dataset": pd.Series(dtype=str)})
    return db.query("""SELECT DISTINCT v.dataset FROM compmap_scores s
                       JOIN vl_models v ON v.vl_model_id = s.vl_model ORDER BY v.dataset""")


def vl_models(db, dataset: str) -> pd.DataFrame:
    return db.query(
        """SELECT DISTINCT s.vl_model FROM compmap_scores s
                       JOIN vl_models v ON v.vl_model_id = s.vl_model
                       WHERE v.dataset = $ds ORDER BY s.vl_model""",
        {"ds": dataset},
    )


def settings(db, vl_model: str) -> pd.DataFrame:
    """(setting, setting_label, ways, shots) of a VL model's scores, episodes first."""
    s = db.query("SELECT DISTINCT ways, shots FROM compmap_scores WHERE vl_model = $vl", {"vl": vl_model})
    return _order(s)[["setting", "setting_label", "ways", "shots"]].reset_index(drop=True)


def scores(db, vl_model: str, metric: str | None = None) -> pd.DataFrame:
    """Rows of compmap_scores with the setting's key and label and the model's paper name."""
    s = db.query(
        """SELECT * FROM compmap_scores WHERE vl_model = $vl
                    AND ($metric IS NULL OR metric = $metric)""",
        {"vl": vl_model, "metric": metric},
    )
    s = _order(s).assign(model_name=lambda d: d["model"].map(MODEL_NAMES))
    return s.reset_index(drop=True)


def delta(db, dataset: str, setting: str) -> pd.DataFrame:
    """Delta (Oracle-Prim - Interv(Full)) of every VL model of `dataset` at one setting."""
    ways, shots = parse_setting(setting)
    return db.query(
        """SELECT s.vl_model, s.value, s.lo, s.hi, s.episodes, s.ways, s.shots
                       FROM compmap_scores s JOIN vl_models v ON v.vl_model_id = s.vl_model
                       WHERE v.dataset = $ds AND s.metric = 'delta' AND s.shots = $shots
                         AND ($ways IS NULL OR s.ways = $ways)
                       ORDER BY s.vl_model""",
        {"ds": dataset, "shots": shots, "ways": ways},
    )


def weight_accuracy(db, vl_model: str) -> pd.DataFrame:
    """Acc-Instance and Acc-Class (yun2023 Table 4) of Prim and Oracle-Prim, per setting."""
    s = scores(db, vl_model)
    s = s[s["metric"].isin(["acc_instance", "acc_class"])]
    if s.empty:
        return pd.DataFrame(
            columns=[
                "setting",
                "setting_label",
                "model",
                "acc_instance",
                "acc_instance_lo",
                "acc_instance_hi",
                "acc_class",
                "acc_class_lo",
                "acc_class_hi",
            ]
        )
    wide = s.pivot_table(
        index=["setting", "setting_label", "model_name"],
        columns="metric",
        values=["value", "lo", "hi"],
        sort=False,
    )
    wide.columns = [m if v == "value" else f"{m}_{v}" for v, m in wide.columns]
    wide = wide.reset_index().rename(columns={"model_name": "model"})
    cols = ["setting", "setting_label", "model"] + [
        f"{m}{x}" for m in ("acc_instance", "acc_class") for x in ("", "_lo", "_hi")
    ]
    return wide[cols]


# ---- weights ------------------------------------------------------------------------------------
def primitives(db, dataset: str) -> pd.DataFrame:
    return db.query(
        """SELECT primitive, "group", value, prompt, position FROM primitives
                       WHERE dataset = $ds ORDER BY position""",
        {"ds": dataset},
    )


def _label_names(db, dataset: str) -> str:
    """SQL of (label, label_name) for `dataset`: images, else label_primitives."""
    return """(SELECT label, min(label_name) AS label_name FROM (
                 SELECT label, label_name FROM images WHERE dataset = $ds AND label IS NOT NULL
                 UNION ALL SELECT label, label_name FROM label_primitives WHERE dataset = $ds)
               GROUP BY label)"""


def classes(db, dataset: str, vl_model: str) -> pd.DataFrame:
    """The classes the full-shot models have weights for, with their names."""
    return db.query(
        f"""SELECT DISTINCT w.label, coalesce(n.label_name, 'class ' || w.label) AS label_name
                        FROM compmap_weights w LEFT JOIN {_label_names(db, dataset)} n USING (label)
                        WHERE w.vl_model = $vl ORDER BY w.label""",
        {"ds": dataset, "vl": vl_model},
    )


def weights(db, dataset: str, vl_model: str, model: str = "prim", sort: str = "label") -> pd.DataFrame:
    """Long (class x primitive) weights of a full-shot model with the ground truth:
    `truth` (label_primitives' value, 0 where absent), `gt` (truth >= 0.5), each class's
    `k` ground-truth primitives, `recovered` (how many of them are among its top-k
    weights) and `row` (the class order `sort` asks for; see SORTS)."""
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}, got {sort!r}")
    w = db.query(
        f"""
        SELECT w.label, coalesce(n.label_name, 'class ' || w.label) AS label_name, w.primitive,
               p."group", p.value, p.position, w.weight, coalesce(t.value, 0.0) AS truth
        FROM compmap_weights w
        JOIN primitives p ON p.dataset = $ds AND p.primitive = w.primitive
        LEFT JOIN label_primitives t ON t.dataset = $ds AND t.label = w.label
                                     AND t.primitive = w.primitive
        LEFT JOIN {_label_names(db, dataset)} n ON n.label = w.label
        WHERE w.vl_model = $vl AND w.model = $model
        ORDER BY w.label, p.position""",
        {"ds": dataset, "vl": vl_model, "model": model},
    )
    w["gt"] = w["truth"] >= 0.5
    rank = w.groupby("label")["weight"].rank(ascending=False, method="first")
    w["k"] = w.groupby("label")["gt"].transform("sum").astype(int)
    w["rank"] = rank.astype(int)
    w["recovered"] = (w["gt"] & (w["rank"] <= w["k"])).groupby(w["label"]).transform("sum").astype(int)
    per = w.drop_duplicates("label")[["label", "label_name", "k", "recovered"]]
    if sort == "name":
        per = per.sort_values(["label_name", "label"], kind="stable")
    elif sort == "recovered":
        share = per["recovered"] / per["k"].where(per["k"] > 0)
        per = per.assign(_s=share.fillna(np.inf)).sort_values(["_s", "label"], kind="stable")
    order = {lab: i for i, lab in enumerate(per["label"])}
    return w.assign(row=w["label"].map(order)).sort_values(["row", "position"]).reset_index(drop=True)


def class_weights(db, dataset: str, vl_model: str, model: str, label: int) -> pd.DataFrame:
    """One class's weights, largest first, with `rank` and `gt` (its ground-truth primitives)."""
    w = weights(db, dataset, vl_model, model)
    return w[w["label"] == int(label)].sort_values("rank").reset_index(drop=True)


# ---- images of a class ------------------------------------------------------------------------------
def _truth_of_images(db, dataset: str, label: int) -> tuple[pd.DataFrame, str]:
    """(image_id, primitive) pairs that are true, and where the truth comes from."""
    per_image = (
        db.has("image_primitives")
        and db.query("SELECT count(*) AS n FROM image_primitives WHERE dataset = $ds", {"ds": dataset})["n"][
            0
        ]
        > 0
    )
    if per_image:
        return db.query(
            """SELECT t.image_id, t.primitive FROM image_primitives t
                           JOIN images i USING (image_id)
                           WHERE t.dataset = $ds AND i.dataset = $ds AND i.label = $label
                             AND t.value >= 0.5""",
            {"ds": dataset, "label": int(label)},
        ), "image"
    return db.query(
        """SELECT i.image_id, t.primitive FROM images i
                       JOIN label_primitives t ON t.dataset = $ds AND t.label = i.label
                       WHERE i.dataset = $ds AND i.label = $label AND t.value >= 0.5""",
        {"ds": dataset, "label": int(label)},
    ), "class"


def class_primitives(db, dataset: str, vl_model: str, label: int) -> tuple[pd.DataFrame, str]:
    """Per image of the class and attribute group: the VL model's top primitive (highest
    activation in the group), its activation, the true values and whether it is one of
    them. Groups without a true value for the image are left out. Also says whether
    the truth is per image (`image_primitives`) or the class's (`label_primitives`)."""
    act = db.query(
        """
        SELECT a.image_id, a.primitive, a.activation, p."group", p.value, p.position
        FROM compmap_activations a
        JOIN images i ON i.image_id = a.image_id
        JOIN primitives p ON p.dataset = $ds AND p.primitive = a.primitive
        WHERE a.vl_model = $vl AND i.dataset = $ds AND i.label = $label""",
        {"ds": dataset, "vl": vl_model, "label": int(label)},
    )
    truth, source = _truth_of_images(db, dataset, label)
    cols = ["image_id", "group", "predicted", "activation", "truth", "correct", "position"]
    if act.empty:
        return pd.DataFrame(columns=cols), source
    top = act.sort_values(["activation", "position"], ascending=[False, True]).drop_duplicates(
        ["image_id", "group"]
    )
    tv = truth.merge(
        act[["image_id", "primitive", "group", "value"]].drop_duplicates(), on=["image_id", "primitive"]
    )
    true_sets = tv.groupby(["image_id", "group"])["value"].agg(lambda v: sorted(set(v)))
    top = top.join(true_sets.rename("truth"), on=["image_id", "group"], how="inner")
    top["correct"] = [v in t for v, t in zip(top["value"], top["truth"])]
    top = top.rename(columns={"value": "predicted"})
    top["truth"] = top["truth"].map(" / ".join)
    top["position"] = top["group"].map(act.groupby("group")["position"].min())
    return top[cols].sort_values(["image_id", "position"]).reset_index(drop=True), source


def class_images(db, dataset: str, vl_model: str, label: int) -> pd.DataFrame:
    """The class's images with a caption of what the VL model gets wrong, most wrong first."""
    imgs = db.query(
        """SELECT image_id, thumbnail, split FROM images
                       WHERE dataset = $ds AND label = $label ORDER BY image_id""",
        {"ds": dataset, "label": int(label)},
    )
    per, _ = class_primitives(db, dataset, vl_model, label)
    rows = []
    for iid, g in per.groupby("image_id", sort=False):
        wrong = g[~g["correct"]]
        text = "; ".join(f"{r.group}: {r.predicted} ≠ {r.truth}" for r in wrong.itertuples())
        score = f" ({len(g) - len(wrong)}/{len(g)})"
        rows.append(
            {
                "image_id": iid,
                "judged": len(g),
                "wrong": len(wrong),
                "caption": (f"✗ {text}" if len(wrong) else "✓ all") + score,
            }
        )
    out = imgs.merge(
        pd.DataFrame(rows, columns=["image_id", "judged", "wrong", "caption"]), on="image_id", how="left"
    )
    out["wrong"] = out["wrong"].fillna(0).astype(int)
    out["caption"] = out["caption"].fillna("no ground truth")
    return out.sort_values(["wrong", "image_id"], ascending=[False, True]).reset_index(drop=True)


def group_accuracy(db, dataset: str, vl_model: str, label: int) -> pd.DataFrame:
    """Per attribute group: share of the class's images whose top primitive is a true one."""
    per, source = class_primitives(db, dataset, vl_model, label)
    if per.empty:
        return pd.DataFrame(columns=["group", "images", "right", "share", "most often predicted", "truth"])
    g = per.groupby("group", sort=False)
    out = pd.DataFrame(
        {
            "images": g.size(),
            "right": g["correct"].sum().astype(int),
            "most often predicted": g["predicted"].agg(lambda v: v.value_counts().index[0]),
            "truth": g["truth"].agg(lambda v: v.value_counts().index[0]),
            "position": g["position"].min(),
        }
    ).reset_index()
    out["share"] = out["right"] / out["images"]
    return out.sort_values("position")[
        ["group", "images", "right", "share", "most often predicted", "truth"]
    ].reset_index(drop=True)
