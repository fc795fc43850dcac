"""`conceptlens analyze concept_events`: how concepts are born, die, split and merge along training or depth.

One unit per sequence of a dataset (`base.sequences`): a training run (`checkpoints.run`,
its checkpoints at one layer ordered by `epoch`) or a depth sequence (a run's checkpoints
at one epoch ordered by `depth`, the layers of one network); `axis` says which. The
clusterings of consecutive checkpoints (at one k: `--sequence-k`, else the
k most of them are clustered at) are matched through their contingency table on the
images both assign, and every continuation, split, merge, birth and death between them
is written to `concept_events` (the significance rule of `metrics/events.py`:
`--event-share`, `--event-images`, `--event-alpha`), one row per cluster taking part,
with its size, label purity, top label and caption (where `cluster_captions` has one).
A sequence with fewer than two clustered checkpoints is skipped with the reason.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa

from .. import schema
from ..metrics import events as E
from ..metrics.compare import contingency
from ..metrics.scores import purity
from ..schema import FLOAT, INT, NON_NEGATIVE, STRING, UNIT, Column, Table
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
from .common import Context

SIDES = ("before", "after")

TABLE = Table(
    "concept_events",
    "concept_events",
    "Concept events along a sequence of checkpoints (issue 27): a training run (by epoch) or "
    "the layers of one network (by depth). Between the clusterings of consecutive "
    "checkpoints of the sequence, every continuation, split, merge, birth and death "
    "of a cluster (docs/analysis.md, 'Concept events'). One row per cluster taking part in "
    "an event; the event's images are those of its `before` clusters in checkpoint_from "
    "that its `after` clusters hold in checkpoint_to (births: the after cluster's, deaths: "
    "the before cluster's).",
    (
        Column("dataset", STRING, "Dataset (partition folder).", references="images.dataset"),
        Column(
            "run",
            STRING,
            "The sequence (partition folder): a training run's name (`checkpoints.run`); "
            "`RUN@layer=L` for the run's checkpoints at layer L by epoch; `RUN@depth` or "
            "`RUN@depth.eN` for its layers at epoch N by depth.",
        ),
        Column(
            "step",
            INT,
            "Index of checkpoint_to in the run's clustered checkpoints (1 = the second).",
            positive=True,
        ),
        Column("checkpoint_from", STRING, "Earlier checkpoint.", references="checkpoints.checkpoint_id"),
        Column(
            "checkpoint_to",
            STRING,
            "Later checkpoint.",
            references="checkpoints.checkpoint_id",
            differs_from="checkpoint_from",
        ),
        Column(
            "epoch_from",
            INT,
            "Position of checkpoint_from along the sequence's axis: its epoch (axis `epoch`) "
            "or its depth (axis `depth`).",
            bounds=NON_NEGATIVE,
            at_most=("epoch_to",),
        ),
        Column(
            "epoch_to", INT, "Position of checkpoint_to along the axis (epoch or depth).", bounds=NON_NEGATIVE
        ),
        Column(
            "axis",
            STRING,
            "`epoch`: a training sequence; `depth`: the layers of one network (null in files "
            "written before 2.4: epoch).",
            nullable=True,
            required=False,
            allowed=AXES,
        ),
        Column(
            "layer_from", STRING, "`checkpoints.layer` of checkpoint_from.", nullable=True, required=False
        ),
        Column("layer_to", STRING, "`checkpoints.layer` of checkpoint_to.", nullable=True, required=False),
        Column("k", INT, "Clusters per clustering.", positive=True),
        Column("event", INT, "Index of the event within its step.", bounds=NON_NEGATIVE),
        Column("kind", STRING, "What happened.", allowed=E.EVENT_KINDS),
        Column(
            "side",
            STRING,
            "`before`: a cluster of checkpoint_from; `after`: of checkpoint_to.",
            allowed=SIDES,
        ),
        Column(
            "cluster", INT, "Cluster id in its checkpoint's clustering.", bounds=NON_NEGATIVE, less_than="k"
        ),
        Column("size", INT, "Images of the cluster among the images both checkpoints assign.", positive=True),
        Column(
            "share",
            FLOAT,
            "Share of the cluster's images on the event's significant links (0 for a birth or death).",
            bounds=UNIT,
        ),
        Column(
            "best_share",
            FLOAT,
            "Largest share of the cluster's images on one link to a "
            "cluster of the other side (significant or not).",
            bounds=UNIT,
        ),
        Column(
            "images",
            INT,
            "Images on the event's significant links (0 for a birth or death).",
            bounds=NON_NEGATIVE,
        ),
        Column(
            "p_value",
            FLOAT,
            "Largest hypergeometric p-value of the event's links (null for a birth or death).",
            nullable=True,
            bounds=UNIT,
        ),
        Column(
            "purity",
            FLOAT,
            "Label purity 1 - H(labels) / log K of the cluster (as "
            "`cluster_metrics.purity`); null without labels.",
            nullable=True,
            bounds=UNIT,
        ),
        Column("top_label", STRING, "Its most frequent label name.", nullable=True),
        Column("top_label_share", FLOAT, "Share of the cluster with that label.", nullable=True, bounds=UNIT),
        Column(
            "caption",
            STRING,
            "The cluster's caption (`cluster_captions.caption`), where there is one.",
            nullable=True,
        ),
        Column("n_shared", INT, "Images both clusterings assign.", positive=True),
        Column("min_share", FLOAT, "Significance used: least share of a link.", bounds=UNIT),
        Column("min_images", INT, "Significance used: least images on a link.", positive=True),
        Column(
            "alpha",
            FLOAT,
            "Significance used: family-wise level of the hypergeometric test "
            "(Bonferroni over the step's links).",
            bounds=UNIT,
        ),
    ),
    key=("dataset", "run", "step", "event", "side", "cluster"),
    partition=("dataset", "run"),
)


def _sequence(ctx: Context, unit: Unit, opts: dict) -> tuple[pd.DataFrame, int | None]:
    """The sequence's checkpoints clustered at the unit's k, in order, and that k."""
    seq = run_checkpoints(ctx, unit)
    k = sequence_k(ctx, list(seq["checkpoint_id"]), opts)
    if k is None:
        return seq.iloc[:0], None
    have = np.array([ctx.ws.has("clusters", checkpoint_id=c, k=k) for c in seq["checkpoint_id"]], bool)
    out = seq[have].reset_index(drop=True)
    out.attrs["axis"] = seq.attrs.get("axis", "epoch")
    return out, k


def _fingerprint(ctx: Context, unit: Unit, opts: dict) -> str:
    seq, k = _sequence(ctx, unit, opts)
    files = [ctx.ws.table_path("images")]
    for c in seq["checkpoint_id"]:
        files += ctx.ws.partition_files("clusters", checkpoint_id=c, k=k)
        files += ctx.ws.partition_files("cluster_captions", checkpoint_id=c, k=k)
    # The sequence itself (which checkpoints, in which order) is part of the input.
    order = ";".join(f"{c}@{e}" for c, e in zip(seq["checkpoint_id"], seq["epoch"]))
    # (a training sequence's fingerprint is as before 2.4, so its unit stays done)
    axis = "" if seq.attrs.get("axis", "epoch") == "epoch" else f":axis={seq.attrs['axis']}"
    return files_signature(files) + f":k={k}:{order}{axis}"


def _clusters(ctx: Context, cid: str, k: int) -> pd.DataFrame:
    return ctx.ws.read("clusters", columns=["image_id", "cluster"], checkpoint_id=cid, k=k).to_pandas()


def _captions(ctx: Context, cid: str, k: int) -> dict[int, str]:
    if not ctx.ws.has("cluster_captions", checkpoint_id=cid, k=k):
        return {}
    t = ctx.ws.read("cluster_captions", columns=["cluster", "caption"], checkpoint_id=cid, k=k).to_pandas()
    return {int(c): str(s) for c, s in zip(t["cluster"], t["caption"]) if s is not None and s == s}


def cluster_labels(assign: pd.DataFrame, images: pd.DataFrame) -> dict[int, tuple]:
    """cluster -> (purity, top label name, its share) from the images' labels."""
    lab = images.set_index("image_id")
    j = assign.join(lab[["label", "label_name"]], on="image_id")
    j = j[j["label"].notna()]
    n_classes = int(images["label"].nunique())
    out = {}
    if j.empty or n_classes < 1:
        return out
    names = (
        images.dropna(subset=["label"]).drop_duplicates("label").set_index("label")["label_name"].to_dict()
    )
    for c, g in j.groupby("cluster", sort=True):
        p, top, share = purity(g["label"].to_numpy(np.int64), n_classes)
        out[int(c)] = (
            None if p != p else float(p),
            None if top is None else (str(names.get(top)) if names.get(top) is not None else str(top)),
            None if share != share else float(share),
        )
    return out


def step_rows(
    before: pd.DataFrame,
    after: pd.DataFrame,
    images: pd.DataFrame,
    opts: dict,
    captions: tuple[dict, dict] = ({}, {}),
) -> list[dict]:
    """The rows of `concept_events` for one pair of clusterings (image_id, cluster), without
    the run's columns (step, checkpoints, epochs, k)."""
    shared = set(before["image_id"]) & set(after["image_id"])
    before = before[before["image_id"].isin(shared)]
    after = after[after["image_id"].isin(shared)]
    links = contingency(before, after)
    sig = dict(min_share=opts["event_share"], min_images=opts["event_images"], alpha=opts["event_alpha"])
    s = E.significant_links(links, **sig)
    ev = E.events_from_links(links, **sig)
    best_a = s.groupby("a")["share_a"].max().to_dict()
    best_b = s.groupby("b")["share_b"].max().to_dict()
    meta = (cluster_labels(before, images), cluster_labels(after, images))
    rows = []
    for i, e in enumerate(ev.itertuples(index=False)):
        cells = s[s["significant"] & s["a"].isin(e.before) & s["b"].isin(e.after)]
        p = float(cells["p_value"].max()) if len(cells) and cells["p_value"].notna().any() else None
        for side, ids, sizes, shares, best in (
            ("before", e.before, e.size_before, e.shares_before, best_a),
            ("after", e.after, e.size_after, e.shares_after, best_b),
        ):
            m, caps = meta[side == "after"], captions[side == "after"]
            for c, n, sh in zip(ids, sizes, shares):
                pur, top, top_share = m.get(int(c), (None, None, None))
                rows.append(
                    {
                        "event": i,
                        "kind": e.kind,
                        "side": side,
                        "cluster": int(c),
                        "size": int(n),
                        "share": float(sh),
                        "best_share": float(best.get(c, 0.0)),
                        "images": int(e.images),
                        "p_value": None if p is None or math.isnan(p) else min(1.0, p),
                        "purity": pur,
                        "top_label": top,
                        "top_label_share": top_share,
                        "caption": caps.get(int(c)),
                        "n_shared": len(shared),
                        "min_share": float(opts["event_share"]),
                        "min_images": int(opts["event_images"]),
                        "alpha": float(opts["event_alpha"]),
                    }
                )
    return rows


def _run(ctx: Context, unit: Unit, opts: dict, scope: Scope) -> str:
    d, r = unit.partition["dataset"], unit.partition["run"]
    seq, k = _sequence(ctx, unit, opts)
    axis = seq.attrs.get("axis", "epoch")
    if len(seq) < 2:
        n_all = len(run_checkpoints(ctx, unit))
        if n_all < 2:
            why = (
                f"it has {n_all} checkpoint(s) with features and an {'epoch' if axis == 'epoch' else 'depth'}"
            )
        else:
            why = f"{len(seq)} of its {n_all} checkpoints are clustered" + (f" at k = {k}" if k else "")
        raise Skipped(
            f"sequence {r!r} of dataset {d!r}: {why}; concept events need two clustered checkpoints "
            "of the sequence (conceptlens analyze clustering)"
        )
    fingerprint = _fingerprint(ctx, unit, opts)
    images = ctx.images[ctx.images["dataset"] == d]
    rows = []
    prev = _clusters(ctx, seq["checkpoint_id"][0], k)
    prev_caps = _captions(ctx, seq["checkpoint_id"][0], k)
    for step in range(1, len(seq)):
        a, b = seq["checkpoint_id"][step - 1], seq["checkpoint_id"][step]
        cur, cur_caps = _clusters(ctx, b, k), _captions(ctx, b, k)
        head = {
            "step": step,
            "checkpoint_from": a,
            "checkpoint_to": b,
            "epoch_from": int(seq["epoch"][step - 1]),
            "epoch_to": int(seq["epoch"][step]),
            "axis": axis,
            "layer_from": seq["layer"][step - 1],
            "layer_to": seq["layer"][step],
            "k": int(k),
        }
        if not set(prev["image_id"]) & set(cur["image_id"]):
            ctx.note(f"concept_events {d}/{r}: {a} and {b} share no image; no events between them")
        else:
            rows += [{**head, **row} for row in step_rows(prev, cur, images, opts, (prev_caps, cur_caps))]
        prev, prev_caps = cur, cur_caps
    ctx.ws.write(
        "concept_events",
        pa.Table.from_pylist(rows, schema=schema.arrow_schema("concept_events", partition=False)),
        metadata=ANALYSIS.done_metadata(opts, fingerprint),
        dataset=d,
        run=r,
    )
    return fingerprint


ANALYSIS = Analysis(
    name="concept_events",
    title="Concept events along training and depth: births, deaths, splits and merges of clusters",
    writes=("concept_events",),
    units=run_units,
    run=_run,
    inputs=_fingerprint,
    depends=("clustering",),
    options=(
        SEQUENCE_K,
        Option(
            "event_share",
            float,
            E.MIN_SHARE,
            "least share of a cluster's images (of either side) a link carries to be significant",
            minimum=0.01,
            maximum=1.0,
        ),
        Option("event_images", int, E.MIN_IMAGES, "least images a significant link carries", minimum=1),
        Option(
            "event_alpha",
            float,
            E.ALPHA,
            "level of the hypergeometric test of a link (Bonferroni over a step's links)",
            minimum=1e-12,
            maximum=1.0,
        ),
    ),
    tables=(TABLE,),
    doc=__doc__.splitlines()[0],
)
