"""`conceptlens analyze cluster_captions`: a class-level caption per cluster (laina2020 Eq. 4),
its ablations, and describability by retrieval with the dataset's vision-language model.

One unit per clustering (checkpoint, k); captions are chosen among the image captions
of `captions.parquet` (a model captioner's when there is one, else ground truth).
"""
from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from .. import schema
from .cluster_metrics import clustering_fingerprint, clustering_units
from .common import Context, pick_captioner
from .registry import Analysis, Option, Unit

CAPTION_COLUMNS = ("caption", "caption_score", "caption_source", "caption_noneg",
                   "caption_noneg_score", "caption_rouge", "caption_rouge_score")


def caption_columns(ctx: Context, ids, labels, k: int, opts: dict) -> dict:
    from .. import metrics as M
    out = {c: [None] * k for c in CAPTION_COLUMNS}
    caps = ctx.table("captions", required=False)
    if caps is not None:
        caps = caps[caps["image_id"].isin(set(ids))]
    source = pick_captioner(caps)
    if source is None:
        ctx.note("captions skipped: captions.parquet has no caption for these images")
        return out
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


def _run(ctx: Context, unit: Unit, opts: dict) -> str:
    from .. import metrics as M
    cid, k = unit.partition["checkpoint_id"], unit.partition["k"]
    ids, _ = ctx.features(cid)
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
            d = M.describability(emb[0], have, emb[1], labels, random_state=opts["seed"])
            for c, r in d.items():
                cols["describability_hits"][c] = r["hits"]
                cols["describability_top1"][c] = r["top1"]
                cols["describability_top5"][c] = r["top5"]
                cols["describability_binary"][c] = None if math.isnan(r["binary"]) else r["binary"]
    ctx.ws.write("cluster_captions",
                 pa.table(cols, schema=schema.arrow_schema("cluster_captions", partition=False)),
                 metadata={"inputs": inputs}, checkpoint_id=cid, k=k)
    return inputs


ANALYSIS = Analysis(
    name="cluster_captions", title="Class-level captions and describability of every cluster",
    writes=("cluster_captions",), units=clustering_units, run=_run, inputs=clustering_fingerprint,
    depends=("clustering",), page="Clusters",
    options=(
        Option("rouge_ablation", bool, True, "skip the ROUGE-L caption ablation"),
        Option("describability", bool, True, "skip describability (VL model retrieval)"),
        Option("sentence_model", str, None, "sentence-transformers model for Eq. 4 "
                                            "(default: the bundled all-MiniLM-L6-v2)"),
    ),
    doc=__doc__.splitlines()[0],
)
