"""`conceptlens analyze cluster_captions`: a class-level caption per cluster (laina2020 Eq. 4),
its ablations, and describability by retrieval with the dataset's vision-language model.

One unit per clustering (checkpoint, k); captions are chosen among the image captions
of `captions.parquet` (a model captioner's when there is one, else ground truth). A unit
whose images have no caption is skipped, and tried again by the next run.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa

from .. import metrics as M
from .. import schema
from ..schema import BOOL, FLOAT, INT, NON_NEGATIVE, STRING, UNIT, Column, Table
from .base import Analysis, Option, Scope, Skipped, Unit, clustering_fingerprint, clustering_units
from .common import Context, pick_captioner

TABLE = Table(
    "cluster_captions",
    "cluster_captions",
    "One row per cluster: class-level caption (laina2020 Eq. 4), its ablations and "
    "describability by vision-language retrieval.",
    (
        Column(
            "checkpoint_id",
            STRING,
            "Checkpoint (partition folder).",
            references="checkpoints.checkpoint_id",
        ),
        Column("k", INT, "Number of clusters (partition folder).", positive=True),
        Column("cluster", INT, "Cluster index in [0, k).", bounds=NON_NEGATIVE, less_than="k"),
        Column("caption", STRING, "Class-level caption (laina2020 Eq. 4).", nullable=True),
        Column("caption_score", FLOAT, "Eq. 4 score of the caption (lower is better).", nullable=True),
        Column("caption_source", STRING, "Captioner whose image captions Eq. 4 chose from.", nullable=True),
        Column("caption_noneg", STRING, "Eq. 4 caption without the negative term (ablation).", nullable=True),
        Column("caption_noneg_score", FLOAT, "Its score.", nullable=True),
        Column(
            "caption_rouge",
            STRING,
            "Eq. 4 caption with d = 1 - ROUGE-L F (ablation).",
            nullable=True,
            required=False,
        ),
        Column("caption_rouge_score", FLOAT, "Its score.", nullable=True, required=False),
        Column(
            "describability_hits",
            INT,
            "Images of the cluster among the 10 the VL model retrieves for the caption.",
            nullable=True,
            bounds=(0, 10),
        ),
        Column(
            "describability_top1",
            FLOAT,
            "laina2020 Table 3 Top-1: share of the 10 retrieved "
            "images that the clustering puts in the cluster.",
            nullable=True,
            bounds=UNIT,
        ),
        Column(
            "describability_top5",
            FLOAT,
            "laina2020 Table 3 Top-5: share of the retrieved "
            "images with the cluster among their 5 nearest clusters (own cluster first, "
            "then by nearest mean feature).",
            nullable=True,
            bounds=UNIT,
        ),
        Column(
            "describability_binary",
            FLOAT,
            "laina2020 Table 3 Binary: share of (retrieved "
            "image, image retrieved for another cluster's caption) pairs where the first "
            "is nearer the cluster's mean feature.",
            nullable=True,
            bounds=UNIT,
        ),
        Column(
            "describability_2afc",
            FLOAT,
            "Eq. 3 with the VL model as annotator: share of "
            "20 random (in, out) image pairs where the caption is more similar to the "
            "image in the cluster.",
            nullable=True,
            required=False,
            bounds=UNIT,
        ),
        Column(
            "describability_self",
            BOOL,
            "The VL model used is the checkpoint's own model "
            "(same weights): retrieval then shares the checkpoint's feature space.",
            nullable=True,
            required=False,
        ),
    ),
    key=("checkpoint_id", "k", "cluster"),
    partition=("checkpoint_id", "k"),
)

CAPTION_COLUMNS = (
    "caption",
    "caption_score",
    "caption_source",
    "caption_noneg",
    "caption_noneg_score",
    "caption_rouge",
    "caption_rouge_score",
)


def caption_columns(ctx: Context, ids, labels, k: int, opts: dict) -> dict:
    out = {c: [None] * k for c in CAPTION_COLUMNS}
    caps = ctx.table("captions", required=False)
    if caps is not None:
        caps = caps[caps["image_id"].isin(set(ids))]
    source = pick_captioner(caps)
    if source is None:  # nothing to choose from: not done, tried again once captions exist
        raise Skipped("captions.parquet has no caption for these images (conceptlens caption)")
    text_of = dict(caps[caps["captioner"] == source][["image_id", "text"]].itertuples(index=False))
    rows = np.array([i for i, iid in enumerate(ids) if iid in text_of])
    texts = np.array([text_of[ids[i]] for i in rows], dtype=object)
    lab = labels[rows]
    E = ctx.sentence_embeddings(texts, opts["sentence_model"])
    chosen = {"": M.class_captions(E, lab, True), "_noneg": M.class_captions(E, lab, False)}
    if opts["rouge_ablation"]:
        chosen["_rouge"] = M.class_captions_rouge(texts, lab, True, random_state=opts["seed"])
    for suffix, picks in chosen.items():
        for c, (j, score) in picks.items():
            out["caption" + suffix][c] = str(texts[j])
            out["caption" + suffix + "_score"][c] = score
    for c in chosen[""]:
        out["caption_source"][c] = source
    return out


def vl_is_checkpoint(ck: dict, vl: dict) -> bool:
    """The VL model is the checkpoint's own model: the same weights (by hash when both are
    recorded, else the same model spec and weights file)."""
    if ck.get("weights_sha256") and vl.get("weights_sha256"):
        return ck["weights_sha256"] == vl["weights_sha256"]
    return (
        bool(ck.get("weights"))
        and ck.get("weights") == vl.get("weights")
        and ck.get("source") == vl.get("spec")
    )


def describability_self(ctx: Context, cid: str, dataset: str) -> bool | None:
    """Whether describability of `cid` uses its own VL model (the one VLModel.from_workspace
    picks for the dataset: its first row); None without a VL model."""
    vl = ctx.table("vl_models", required=False)
    if vl is None or not (vl["dataset"] == dataset).any():
        return None
    row = vl[vl["dataset"] == dataset].iloc[0].to_dict()
    ck = {c: (None if pd.isna(v) else v) for c, v in ctx.checkpoint_row(cid).to_dict().items()}
    return vl_is_checkpoint(ck, row)


def _run(ctx: Context, unit: Unit, opts: dict, scope: Scope) -> str:
    cid, k = unit.partition["checkpoint_id"], unit.partition["k"]
    ids, Xn = ctx.normalized(cid)
    labels, _ = ctx.clusters(cid, k)
    inputs = clustering_fingerprint(ctx, unit)
    cols: dict = {f.name: [None] * k for f in schema.arrow_schema("cluster_captions", partition=False)}
    cols["cluster"] = list(range(k))
    cols.update(caption_columns(ctx, ids, labels, k, opts))
    if opts["describability"] and any(c is not None for c in cols["caption"]):
        have = [c for c in range(k) if cols["caption"][c] is not None]
        meta = ctx.cached(cid, "meta", lambda: ctx.image_meta(ids))
        dataset = str(ctx.checkpoint_row(cid)["dataset"])
        emb = ctx.vl_embeddings(dataset, meta, [cols["caption"][c] for c in have])
        if emb is not None:
            own = describability_self(ctx, cid, dataset)
            d = M.describability(emb[0], have, emb[1], labels, Xn, random_state=opts["seed"])
            for c, r in d.items():
                cols["describability_hits"][c] = r["hits"]
                for m in ("top1", "top5", "binary", "2afc"):
                    cols[f"describability_{m}"][c] = None if math.isnan(r[m]) else r[m]
                cols["describability_self"][c] = own
    ctx.ws.write(
        "cluster_captions",
        pa.table(cols, schema=schema.arrow_schema("cluster_captions", partition=False)),
        metadata=ANALYSIS.done_metadata(opts, inputs),
        checkpoint_id=cid,
        k=k,
    )
    return inputs


ANALYSIS = Analysis(
    name="cluster_captions",
    title="Class-level captions and describability of every cluster",
    writes=("cluster_captions",),
    tables=(TABLE,),
    units=clustering_units,
    run=_run,
    inputs=clustering_fingerprint,
    depends=("clustering",),
    options=(
        Option("rouge_ablation", bool, True, "skip the ROUGE-L caption ablation"),
        Option("describability", bool, True, "skip describability (VL model retrieval)"),
        Option(
            "sentence_model",
            str,
            None,
            "sentence-transformers model for Eq. 4 (default: the bundled all-MiniLM-L6-v2)",
        ),
    ),
    doc=__doc__.splitlines()[0],
)
