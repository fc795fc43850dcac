"""`conceptlens analyze learning_curves`: when labels, factor values and selections become learnable.

One unit per sequence of a dataset (`base.sequences`): a training run (checkpoints of
`checkpoints.run` at one layer ordered by `epoch`) or a depth sequence (a run's
checkpoints at one epoch ordered by `depth`); `axis` says which, and the `epoch`,
`learned_at` and `lost_at` columns then hold epochs or depths. For every checkpoint of the
sequence, every factor of the images (the label, and
each categorical column of images.parquet with 2 to `--factor-values` values: shape,
colour, size...) and every value of it: a weighted cosine 20-NN fitted on the `train`
split scores the held-out (`test`) images, and the one-vs-rest ROC AUC of the value's
vote share says how learnable the value is (0.5 = chance), with a 95% percentile
interval over `--curve-boot` seeded resamples of the held-out images; per factor, the
macro mean AUC and the kNN accuracy, with intervals. The value's best-matching cluster
(largest F1, at `--sequence-k`) gives its purity for the value. A value is *learned* at
a checkpoint when the lower end of its AUC interval exceeds `--learned-auc`; `learned_at`
is the first such epoch, `lost_at` the first later epoch where it no longer is.

Saved selections (the `selections` table, issue 26; the latest save of each name) are
scored beside them, as factor `saved selection` with the selection's name as value: the
learnability of the set against the rest (`metrics.selection`, the Clusters page's
selection score: held-out weighted 20-NN vote share AUC, leave-one-out on its evaluation
sample, with a `--curve-boot` bootstrap interval) and the purity of its best-matching
cluster; learned and lost by the same rule. A newly saved selection makes the unit due.
A sequence with fewer than two checkpoints with features is skipped with the reason.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from .. import rng as rngs
from .. import schema
from ..metrics import learning as L
from ..metrics import selection as S
from ..metrics.neighbors import nearest_cosine
from ..schema import BOOL, FLOAT, INT, NON_NEGATIVE, STRING, UNIT, Column, Table
from ..workspace import files_signature
from .base import (
    AXES,
    SEQUENCE_K,
    Analysis,
    Option,
    Scope,
    Skipped,
    Unit,
    run_checkpoints,
    run_units,
    sequence_k,
)
from .common import IMAGE_CORE, Context

SELECTION = "saved selection"  # the factor of the saved selections' rows
NEIGHBOURS, TEMPERATURE = 20, 0.07  # the weighted kNN of lu2022's kNN accuracy (DINO's eval_knn)
MIN_SPLIT = 10  # fewer train or test images than this: a seeded quarter is held out instead

TABLE = Table(
    "learning_curves",
    "learning_curves",
    "Per-label learning curves along a sequence of checkpoints (issue 27), a training run "
    "(by epoch) or the layers of one network (by depth): for every checkpoint of the "
    "sequence, factor of the images and value of it, how well a cosine kNN on the checkpoint's "
    "features separates the value from the others on held-out images (one-vs-rest AUC with "
    "a bootstrap interval), the purity of its best-matching cluster, and the epochs at which "
    "it is learned and lost (docs/analysis.md, 'Learning curves'). A row with a null `value` "
    "is the factor as a whole (macro mean AUC, kNN accuracy).",
    (
        Column("dataset", STRING, "Dataset (partition folder).", references="images.dataset"),
        Column(
            "run",
            STRING,
            "The sequence (partition folder), named as in `concept_events.run`: a training "
            "run's name, `RUN@layer=L`, `RUN@depth` or `RUN@depth.eN`.",
        ),
        Column("checkpoint_id", STRING, "Checkpoint.", references="checkpoints.checkpoint_id"),
        Column(
            "epoch",
            INT,
            "Its position along the sequence's axis: its epoch (axis `epoch`) or depth (axis `depth`).",
            bounds=NON_NEGATIVE,
        ),
        Column(
            "axis",
            STRING,
            "`epoch` or `depth` (null in files written before 2.4: epoch).",
            nullable=True,
            required=False,
            allowed=AXES,
        ),
        Column("layer", STRING, "`checkpoints.layer` of the checkpoint.", nullable=True, required=False),
        Column(
            "factor",
            STRING,
            "`label`, a factor column of images.parquet, or `saved selection` (a saved "
            "selection of the `selections` table against the rest).",
        ),
        Column(
            "value",
            STRING,
            "The value (as text; a saved selection's name); null: the factor as a whole.",
            nullable=True,
        ),
        Column("n_test", INT, "Held-out images scored.", positive=True),
        Column(
            "n_positive",
            INT,
            "Held-out images with the value (null for a factor row).",
            nullable=True,
            bounds=NON_NEGATIVE,
        ),
        Column(
            "auc",
            FLOAT,
            "One-vs-rest ROC AUC of the value's kNN vote share (factor row: the "
            "macro mean over its values); null when the held-out images lack the value.",
            nullable=True,
            bounds=UNIT,
            at_most=("auc_hi",),
        ),
        Column(
            "auc_lo",
            FLOAT,
            "95% percentile bootstrap interval, low end.",
            nullable=True,
            bounds=UNIT,
            at_most=("auc",),
        ),
        Column("auc_hi", FLOAT, "95% percentile bootstrap interval, high end.", nullable=True, bounds=UNIT),
        Column(
            "accuracy",
            FLOAT,
            "Factor rows: the kNN classifier's accuracy on the factor.",
            nullable=True,
            bounds=UNIT,
        ),
        Column("accuracy_lo", FLOAT, "Its 95% bootstrap interval, low end.", nullable=True, bounds=UNIT),
        Column("accuracy_hi", FLOAT, "Its 95% bootstrap interval, high end.", nullable=True, bounds=UNIT),
        Column(
            "chance",
            FLOAT,
            "Factor rows: the accuracy of always answering the most frequent held-out value.",
            nullable=True,
            bounds=UNIT,
        ),
        Column(
            "k",
            INT,
            "k of the clustering searched for the best-matching cluster.",
            nullable=True,
            positive=True,
        ),
        Column(
            "best_cluster",
            INT,
            "Cluster with the largest F1 against the value (all images).",
            nullable=True,
            bounds=NON_NEGATIVE,
        ),
        Column(
            "cluster_purity",
            FLOAT,
            "Share of that cluster's images with the value.",
            nullable=True,
            bounds=UNIT,
        ),
        Column(
            "cluster_recall",
            FLOAT,
            "Share of the value's images in that cluster.",
            nullable=True,
            bounds=UNIT,
        ),
        Column("threshold", FLOAT, "`--learned-auc`: learned when auc_lo exceeds it.", bounds=UNIT),
        Column("learned", BOOL, "auc_lo > threshold at this checkpoint."),
        Column(
            "learned_at",
            INT,
            "First epoch (depth, on a depth sequence) at which it is learned (null: never).",
            nullable=True,
            bounds=NON_NEGATIVE,
        ),
        Column(
            "lost_at",
            INT,
            "First later epoch (depth) at which it is no longer learned (null: never lost).",
            nullable=True,
            bounds=NON_NEGATIVE,
        ),
    ),
    key=("dataset", "run", "checkpoint_id", "factor", "value"),
    partition=("dataset", "run"),
)


def factors(images: pd.DataFrame, max_values: int) -> dict[str, pd.Series]:
    """factor -> its values per image (text; null where missing): `label` (its names where
    there are) and every categorical (text, boolean or integer) non-core column with 2 to
    `max_values` values."""
    out = {}
    if images["label"].notna().any():
        names = images["label_name"] if "label_name" in images else None
        lab = images["label"].astype("Int64").astype("string")
        if names is not None and names.notna().all():
            lab = names.astype("string")
        out["label"] = lab
    for c in images.columns:
        if c in IMAGE_CORE or c == "label":
            continue
        s = images[c]
        if pd.api.types.is_float_dtype(s) or not s.notna().any():
            continue
        if 2 <= s.nunique(dropna=True) <= max_values:
            out[c] = s.astype("string")
    return out


def _fingerprint(ctx: Context, unit: Unit, opts: dict) -> str:
    seq = run_checkpoints(ctx, unit)
    k = sequence_k(ctx, list(seq["checkpoint_id"]), opts)
    files = [ctx.ws.table_path("images")]
    for c in seq["checkpoint_id"]:
        files += ctx.ws.partition_files("features", checkpoint_id=c)
        if k is not None:
            files += ctx.ws.partition_files("clusters", checkpoint_id=c, k=k)
    # Saved selections are scored too: saving one makes the unit due (none: as before 2.4).
    files += ctx.ws.partition_files("selections", dataset=unit.partition["dataset"])
    order = ";".join(f"{c}@{e}" for c, e in zip(seq["checkpoint_id"], seq["epoch"]))
    axis = "" if seq.attrs.get("axis", "epoch") == "epoch" else f":axis={seq.attrs['axis']}"
    return files_signature(files) + f":k={k}:{order}{axis}"


def saved_selections(ctx: Context, dataset: str) -> dict[str, list[str]]:
    """name -> image ids of the latest save of each saved selection of `dataset`."""
    if not ctx.ws.has("selections", dataset=dataset):
        return {}
    t = ctx.ws.read("selections", columns=["name", "image_ids", "created"], dataset=dataset).to_pandas()
    t = t.sort_values(["name", "created"], kind="stable").drop_duplicates("name", keep="last")
    return {str(n): [str(i) for i in ids] for n, ids in zip(t["name"], t["image_ids"])}


def selection_rows(
    ids, Xn: np.ndarray, meta: pd.DataFrame, clusters, selections: dict, opts: dict
) -> list[dict]:
    """Rows of factor `saved selection` of one checkpoint: each selection's learnability
    against the rest (`metrics.selection.Scorer`, no null sets) with its bootstrap interval,
    and its best-matching cluster. A selection with fewer than 2 images on this checkpoint,
    or leaving fewer than 2 outside, gets no row."""
    if not selections:
        return []
    codes = meta["label"].astype("Int64").fillna(-1).to_numpy(np.int64)
    pop = S.Population(Xn, codes)
    row_of = {iid: n for n, iid in enumerate(ids)}
    rows = []
    for name, sel_ids in sorted(selections.items()):
        sel = np.array(sorted({row_of[i] for i in sel_ids if i in row_of}), np.int64)
        if len(sel) < 2 or len(sel) > len(ids) - 2:
            continue
        out = S.Scorer(pop, sel, n_null=0, nulls=(), seed=opts["seed"]).run(bootstrap=opts["curve_boot"])
        learn = next(r for r in out["scores"] if r["score"] == "learnability")
        best = (None, None, None)
        if clusters[1] is not None:
            member = np.zeros(len(ids), bool)
            member[sel] = True
            c, prec, rec = L.best_cluster(clusters[1], member)
            best = (c, _num(prec), _num(rec))
        rows.append(
            {
                "factor": SELECTION,
                "value": name,
                "n_test": int(out["evaluation_sample"]),
                "n_positive": int(out["evaluated_members"]),
                "auc": _num(learn["value"]),
                "auc_lo": _num(learn["lo"]),
                "auc_hi": _num(learn["hi"]),
                "accuracy": None,
                "accuracy_lo": None,
                "accuracy_hi": None,
                "chance": None,
                "k": clusters[0],
                "best_cluster": best[0],
                "cluster_purity": best[1],
                "cluster_recall": best[2],
            }
        )
    return rows


def split(meta: pd.DataFrame, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) row masks: the images' own split, else a seeded quarter held out."""
    test = (meta["split"] == "test").to_numpy()
    train = (meta["split"] == "train").to_numpy()
    if test.sum() < MIN_SPLIT or train.sum() < MIN_SPLIT:
        test = rngs.stream(seed, "learning_curves.heldout").random(len(meta)) < 0.25
        train = ~test
    return train, test


def checkpoint_rows(
    ids, Xn: np.ndarray, meta: pd.DataFrame, clusters, factor_values: dict, opts: dict
) -> list[dict]:
    """The rows of one checkpoint (without run, epoch and the learned columns)."""
    train, test = split(meta, opts["seed"])
    sims, idx = nearest_cosine(Xn[test], Xn[train], k=min(NEIGHBOURS, int(train.sum())), normalized=True)
    rows = []
    for f, values in factor_values.items():
        y = values.to_numpy(dtype=object)
        y_tr, y_te = y[train], y[test]
        known = np.array([v is not pd.NA and v is not None for v in y_te])
        classes = np.array(sorted({v for v in y if v is not pd.NA and v is not None}), dtype=object)
        nb = y_tr[idx]
        nb = np.where(pd.isna(nb), None, nb)
        shares = L.shares_from_neighbours(sims[known], nb[known], classes, TEMPERATURE)
        yk = y_te[known]
        if not len(yk):
            continue
        res = L.bootstrap_indices(len(yk), opts["curve_boot"], opts["seed"])
        auc = L.bootstrap_auc(yk, shares, classes, res)
        pred = classes[np.argmax(shares, axis=1)]
        acc, acc_lo, acc_hi = L.bootstrap_accuracy(pred == yk, res)
        counts = pd.Series(yk).value_counts()
        base = {"factor": f, "n_test": int(len(yk)), "k": clusters[0]}
        rows.append(
            {
                **base,
                "value": None,
                "n_positive": None,
                "auc": _num(auc["macro"]),
                "auc_lo": _num(auc["macro_lo"]),
                "auc_hi": _num(auc["macro_hi"]),
                "accuracy": acc,
                "accuracy_lo": acc_lo,
                "accuracy_hi": acc_hi,
                "chance": float(counts.iloc[0] / len(yk)),
                "best_cluster": None,
                "cluster_purity": None,
                "cluster_recall": None,
            }
        )
        lab = clusters[1]
        for j, v in enumerate(classes.tolist()):
            best = (None, None, None)
            if lab is not None:
                has = np.array([False if w is pd.NA or w is None else w == v for w in y], bool)
                c, prec, rec = L.best_cluster(lab, has)
                best = (c, _num(prec), _num(rec))
            rows.append(
                {
                    **base,
                    "value": str(v),
                    "n_positive": int(counts.get(v, 0)),
                    "auc": _num(auc["auc"][j]),
                    "auc_lo": _num(auc["lo"][j]),
                    "auc_hi": _num(auc["hi"][j]),
                    "accuracy": None,
                    "accuracy_lo": None,
                    "accuracy_hi": None,
                    "chance": None,
                    "best_cluster": best[0],
                    "cluster_purity": best[1],
                    "cluster_recall": best[2],
                }
            )
    return rows


def _num(v) -> float | None:
    v = float(v)
    return None if v != v else min(1.0, max(0.0, v))


def _run(ctx: Context, unit: Unit, opts: dict, scope: Scope) -> str:
    d, r = unit.partition["dataset"], unit.partition["run"]
    seq = run_checkpoints(ctx, unit)
    axis = seq.attrs.get("axis", "epoch")
    if len(seq) < 2:
        raise Skipped(
            f"sequence {r!r} of dataset {d!r} has {len(seq)} checkpoint(s) with features and an "
            f"{'epoch' if axis == 'epoch' else 'depth'}; learning curves need two or more"
        )
    fingerprint = _fingerprint(ctx, unit, opts)
    k = sequence_k(ctx, list(seq["checkpoint_id"]), opts)
    selections = saved_selections(ctx, d)
    rows = []
    for cid, epoch, layer in zip(seq["checkpoint_id"], seq["epoch"], seq["layer"]):
        ids, Xn = ctx.normalized(cid)
        meta = ctx.image_meta(ids)
        fv = factors(meta, opts["factor_values"])
        if not fv:
            raise Skipped(f"dataset {d!r}: images have no label and no categorical factor column")
        lab = (
            ctx.clusters(cid, k)[0]
            if k is not None and ctx.ws.has("clusters", checkpoint_id=cid, k=k)
            else None
        )
        clusters = (k if lab is not None else None, lab)
        got = checkpoint_rows(ids, Xn, meta, clusters, fv, opts)
        got += selection_rows(ids, Xn, meta, clusters, selections, opts)
        head = {"checkpoint_id": cid, "epoch": int(epoch), "axis": axis, "layer": layer}
        rows += [{**head, **row} for row in got]
    t = pd.DataFrame(rows)
    thr = float(opts["learned_auc"])
    t["threshold"] = thr
    t["learned"] = t["auc_lo"].astype(float).gt(thr)
    t["learned_at"], t["lost_at"] = None, None
    for _, g in t.groupby(["factor", t["value"].fillna("\0")], sort=False):
        g = g.sort_values(["epoch", "checkpoint_id"], kind="stable")
        at, lost = L.learned_epochs(g["epoch"], g["auc_lo"].astype(float).fillna(np.nan), thr)
        t.loc[g.index, "learned_at"] = at
        t.loc[g.index, "lost_at"] = lost
    t = t.astype(object).where(t.notna(), None)
    ctx.ws.write(
        "learning_curves",
        pa.Table.from_pylist(
            t.to_dict("records"), schema=schema.arrow_schema("learning_curves", partition=False)
        ),
        metadata=ANALYSIS.done_metadata(opts, fingerprint),
        dataset=d,
        run=r,
    )
    return fingerprint


ANALYSIS = Analysis(
    name="learning_curves",
    title="Learning curves along training and depth: when each label, factor value and saved "
    "selection becomes learnable",
    writes=("learning_curves",),
    units=run_units,
    run=_run,
    inputs=_fingerprint,
    depends=("clustering",),
    options=(
        SEQUENCE_K,
        Option(
            "learned_auc",
            float,
            0.9,
            "a value is learned at a checkpoint when the low end of its AUC interval (95 percent) "
            "exceeds this",
            minimum=0.5,
            maximum=1.0,
        ),
        Option("curve_boot", int, 200, "bootstrap resamples of the held-out images (intervals)", minimum=20),
        Option(
            "factor_values",
            int,
            50,
            "a categorical column of images.parquet with 2 to this many values is a factor",
            minimum=2,
        ),
    ),
    tables=(TABLE,),
    doc=__doc__.splitlines()[0],
)
