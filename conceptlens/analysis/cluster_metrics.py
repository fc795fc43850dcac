"""`conceptlens analyze cluster_metrics`: purity and 2AFC coherence of every cluster, and
per (checkpoint, k) aNMI, kNN accuracy, cluster learnability (CL) and intrinsic dimension (ID).

One unit per clustering (checkpoint, k); it reads that checkpoint's features and its
own `clusters` partition, and writes `cluster_metrics` then `checkpoint_metrics`
(the latter last, with the fingerprint of the clustering it used: a re-clustered
checkpoint is measured again). Purity, kNN accuracy, CL and ID come with 95% percentile
bootstrap intervals over images (`--bootstrap` resamples, seeded; metrics/bootstrap.py; 1-NN
accuracy and held-out CL too, over the test images),
computed from per-image quantities the shared pass already has. Definitions:
docs/analysis.md.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from .. import metrics as M
from .. import schema
from ..schema import FLOAT, INT, NON_NEGATIVE, SIGNED_UNIT, STRING, UNIT, Column, Table
from .base import (
    ANNOTATOR,
    BOOTSTRAP,
    KMEANS,
    N_INIT,
    REFS,
    TRIALS,
    Analysis,
    Option,
    Scope,
    Unit,
    clustering_fingerprint,
    clustering_units,
)
from .common import Context, annotator_features

BOOTSTRAP_DOC = "percentile bootstrap over images, `--bootstrap` seeded resamples"


def _interval_columns(
    of: str, bounds=None, positive: bool = False, what: str = BOOTSTRAP_DOC
) -> tuple[Column, ...]:
    """`of`_lo and `of`_hi: the 95% interval of column `of` (optional columns, null when not computed)."""
    return (
        Column(
            f"{of}_lo",
            FLOAT,
            f"95% interval of `{of}`, low end ({what}).",
            nullable=True,
            required=False,
            bounds=bounds,
            positive=positive,
            at_most=(of,),
        ),
        Column(
            f"{of}_hi",
            FLOAT,
            f"95% interval of `{of}`, high end.",
            nullable=True,
            required=False,
            bounds=bounds,
            positive=positive,
        ),
    )


CLUSTER_METRICS = Table(
    "cluster_metrics",
    "cluster_metrics",
    "One row per cluster: size, purity and 2AFC coherence with random and hard negatives.",
    (
        Column(
            "checkpoint_id",
            STRING,
            "Checkpoint (partition folder).",
            references="checkpoints.checkpoint_id",
        ),
        Column("k", INT, "Number of clusters (partition folder).", positive=True),
        Column("cluster", INT, "Cluster index in [0, k).", bounds=NON_NEGATIVE, less_than="k"),
        Column("size", INT, "Number of images in the cluster (> 0).", positive=True),
        Column(
            "purity",
            FLOAT,
            "1 - H(labels in cluster) / log K; null when K < 2.",
            nullable=True,
            bounds=UNIT,
            at_most=("purity_hi",),
        ),
        *_interval_columns(
            "purity", bounds=UNIT, what="the cluster's images resampled, `--bootstrap` seeded resamples"
        ),
        Column("top_label", INT, "Most frequent label.", nullable=True, bounds=NON_NEGATIVE),
        Column(
            "top_label_share", FLOAT, "Share of the cluster with `top_label`.", nullable=True, bounds=UNIT
        ),
        Column(
            "coherence_random",
            FLOAT,
            "2AFC accuracy with random negatives.",
            nullable=True,
            bounds=UNIT,
            at_most=("coherence_random_hi",),
        ),
        Column(
            "coherence_random_lo",
            FLOAT,
            "Clopper-Pearson 95% lower bound.",
            nullable=True,
            bounds=UNIT,
            at_most=("coherence_random",),
        ),
        Column("coherence_random_hi", FLOAT, "Clopper-Pearson 95% upper bound.", nullable=True, bounds=UNIT),
        Column(
            "coherence_hard",
            FLOAT,
            "2AFC accuracy with hard negatives.",
            nullable=True,
            bounds=UNIT,
            at_most=("coherence_hard_hi",),
        ),
        Column(
            "coherence_hard_lo",
            FLOAT,
            "Clopper-Pearson 95% lower bound.",
            nullable=True,
            bounds=UNIT,
            at_most=("coherence_hard",),
        ),
        Column("coherence_hard_hi", FLOAT, "Clopper-Pearson 95% upper bound.", nullable=True, bounds=UNIT),
        Column(
            "hard_negative",
            INT,
            "Cluster whose centroid is nearest.",
            nullable=True,
            bounds=NON_NEGATIVE,
            less_than="k",
            differs_from="cluster",
        ),
        Column(
            "annotator",
            STRING,
            "Feature space of the 2AFC proxy annotator (`factors` or `checkpoint:ID`).",
            nullable=True,
        ),
        Column("coherence_trials", INT, "2AFC trials per negative type.", nullable=True, bounds=NON_NEGATIVE),
    ),
    key=("checkpoint_id", "k", "cluster"),
    partition=("checkpoint_id", "k"),
)

CHECKPOINT_METRICS = Table(
    "checkpoint_metrics",
    "checkpoint_metrics",
    "One row per (checkpoint, k): clustering quality, kNN accuracy, CL, ID.",
    (
        Column(
            "checkpoint_id",
            STRING,
            "Checkpoint (partition folder).",
            references="checkpoints.checkpoint_id",
        ),
        Column("k", INT, "Number of clusters (partition folder).", positive=True),
        Column(
            "anmi",
            FLOAT,
            "Adjusted NMI of clusters vs labels (slightly negative below chance).",
            nullable=True,
            bounds=SIGNED_UNIT,
        ),
        Column(
            "knn_acc",
            FLOAT,
            "Weighted 20-NN accuracy on labels (Caron et al. 2021: cosine, "
            "weights exp(s / 0.07)), train -> test split.",
            nullable=True,
            bounds=UNIT,
            at_most=("knn_acc_hi",),
        ),
        *_interval_columns(
            "knn_acc",
            bounds=UNIT,
            what="the test images' correct flags resampled, `--bootstrap` seeded resamples",
        ),
        Column(
            "knn1_acc",
            FLOAT,
            "1-NN (cosine) accuracy on labels, train -> test split.",
            nullable=True,
            required=False,
            bounds=UNIT,
            at_most=("knn1_acc_hi",),
        ),
        *_interval_columns(
            "knn1_acc",
            bounds=UNIT,
            what="the test images' correct flags resampled, `--bootstrap` seeded resamples",
        ),
        Column(
            "cl",
            FLOAT,
            "Cluster learnability (prequential 1-NN on k-means labels).",
            bounds=UNIT,
            at_most=("cl_hi",),
        ),
        *_interval_columns(
            "cl",
            bounds=UNIT,
            what="images resampled with their prequential correct and predicted counts, "
            "`--bootstrap` seeded resamples",
        ),
        Column("id", FLOAT, "TwoNN intrinsic dimension.", positive=True, finite=True, at_most=("id_hi",)),
        *_interval_columns(
            "id",
            positive=True,
            what="images resampled, each with its ratio r2 / r1 among all images, the line "
            "refitted; `--bootstrap` seeded resamples",
        ),
        Column(
            "cl_heldout",
            FLOAT,
            "k-means on the train split only, test images labelled by "
            "nearest centroid; 1-NN accuracy train -> test on those labels.",
            nullable=True,
            bounds=UNIT,
            at_most=("cl_heldout_hi",),
        ),
        *_interval_columns(
            "cl_heldout",
            bounds=UNIT,
            what="the test images' correct flags resampled, the train split's clusters held "
            "fixed, `--bootstrap` seeded resamples",
        ),
        Column("n_images", INT, "Images clustered.", positive=True),
        Column(
            "n_duplicates",
            INT,
            "Duplicate feature rows dropped before TwoNN.",
            bounds=NON_NEGATIVE,
            at_most=("n_images",),
        ),
    ),
    key=("checkpoint_id", "k"),
    partition=("checkpoint_id", "k"),
)

# Neighbours kept per image by the one pass kNN accuracy, CL and ID share; a query its
# list cannot answer exactly is searched directly (rare: see SelfNeighbours).
NEIGHBOURS = 64


def _per_checkpoint(ctx: Context, cid: str, ids, Xn, meta, opts: dict) -> dict:
    """One exact neighbour pass, kNN accuracies and ID with their bootstrap intervals: per
    checkpoint, shared by its k's."""
    split = meta["split"].astype(str).to_numpy()
    train, test = split == "train", split == "test"
    has_y = ~meta["label"].isna().to_numpy()
    y = meta["label"].to_numpy()
    nb = M.SelfNeighbours(Xn, NEIGHBOURS)
    n_boot, seed = opts["bootstrap"], opts["seed"]
    knn = knn1 = None
    knn_ci = knn1_ci = id_ci = (None, None)
    if (train & has_y).any() and (test & has_y).any():
        a, b = train & has_y, test & has_y
        yi = np.where(has_y, y, -1).astype(np.int64)
        correct = M.knn_correct_shared(nb, a, yi, b)  # weighted 20-NN (lu2022)
        knn = float(np.mean(correct))
        if n_boot:
            knn_ci = M.mean_interval(correct, n_boot, M.rng_for(seed, "knn_acc"))
        correct1 = M.knn_correct_shared(nb, a, yi, b, k=1)
        knn1 = float(np.mean(correct1))
        if n_boot:
            knn1_ci = M.mean_interval(correct1, n_boot, M.rng_for(seed, "knn1_acc"))
    else:
        ctx.note(f"{cid}: knn_acc skipped (needs labelled `train` and `test` images)")
    # ID on the L2-normalised features, like every other metric here.
    mu, n_dup = M.twonn_ratios_shared(nb)
    id_ = M.twonn_fit(mu)
    if n_boot:
        id_ci = M.twonn_interval(mu, id_, n_boot, M.rng_for(seed, "id"))
    if n_dup:
        ctx.note(f"{cid}: {n_dup} duplicate feature row(s) dropped before TwoNN")
    return {
        "train": train,
        "test": test,
        "neighbours": nb,
        "knn_acc": knn,
        "knn1_acc": knn1,
        "knn_ci": knn_ci,
        "knn1_ci": knn1_ci,
        "id": id_,
        "id_ci": id_ci,
        "n_duplicates": n_dup,
    }


def _run(ctx: Context, unit: Unit, opts: dict, scope: Scope) -> str:

    cid, k = unit.partition["checkpoint_id"], unit.partition["k"]
    ids, Xn = ctx.normalized(cid)
    meta = ctx.cached(cid, "meta", lambda: ctx.image_meta(ids))
    labels, _ = ctx.clusters(cid, k)
    inputs = clustering_fingerprint(ctx, unit)
    shared = ctx.cached(cid, "shared", lambda: _per_checkpoint(ctx, cid, ids, Xn, meta, opts))
    tr, te = shared["train"], shared["test"]
    with ThreadPoolExecutor(1) as pool:
        held = None
        if te.any() and tr.sum() >= k:
            # Held-out CL's k-means of the train split needs only the features: it runs
            # beside the per-cluster metrics, mostly one-core work (0.8 s at 20,000 x
            # 2,048). Neither sets a thread limit the other would undo.
            held = pool.submit(
                M.heldout_clusters, Xn[tr], Xn[te], k, opts["n_init"], opts["seed"], opts["kmeans"]
            )
        return _metrics(ctx, unit, opts, ids, Xn, meta, labels, inputs, shared, held)


def _metrics(ctx: Context, unit: Unit, opts: dict, ids, Xn, meta, labels, inputs, shared, held) -> str:
    """The unit's tables; `held`: the future of held-out CL's train-split clusters (or None:
    held-out CL skipped)."""
    cid, k = unit.partition["checkpoint_id"], unit.partition["k"]
    n = len(ids)

    # Purity's K: the labels of the whole dataset, not only those among these images.
    dataset = str(ctx.checkpoint_row(cid)["dataset"])
    imgs = ctx.images
    n_classes = int(imgs.loc[(imgs["dataset"] == dataset) & imgs["label"].notna(), "label"].nunique())
    y = meta["label"].to_numpy()
    has_y = ~meta["label"].isna().to_numpy()
    cols: dict = {f.name: [None] * k for f in schema.arrow_schema("cluster_metrics", partition=False)}
    cols["cluster"] = list(range(k))
    cols["size"] = np.bincount(labels, minlength=k).tolist()
    n_boot = opts["bootstrap"]
    purity_rng = M.rng_for(opts["seed"], "purity")  # clusters in order, one stream
    for c in range(k):
        m = (labels == c) & has_y
        if n_classes and m.any():
            yc = y[m].astype(np.int64)
            p, top, share = M.purity(yc, n_classes)
            cols["purity"][c] = None if math.isnan(p) else p
            cols["top_label"][c], cols["top_label_share"][c] = int(top), share
            if n_boot and not math.isnan(p):
                cols["purity_lo"][c], cols["purity_hi"][c] = M.purity_interval(
                    yc, n_classes, p, n_boot, purity_rng
                )

    # 2AFC coherence with a proxy annotator outside the checkpoint's own space.
    A, who = ctx.cached(
        cid,
        f"annotator:{opts['annotator']}",
        lambda: annotator_features(ctx, cid, ids, meta, opts["annotator"]),
    )
    hard = M.hard_negative_clusters(Xn, labels)
    for c, h in hard.items():
        cols["hard_negative"][c] = int(h)
    if A is None:
        ctx.note(f"{cid}: coherence skipped ({who})")
    else:
        for kind in ("random", "hard"):
            trials = M.make_trials(labels, opts["trials"], opts["refs"], kind, hard, opts["seed"])
            coh = M.coherence(trials, M.annotate(trials, A, opts["seed"]))
            for c, (acc, lo, hi, nt) in coh.items():
                cols[f"coherence_{kind}"][c] = acc
                cols[f"coherence_{kind}_lo"][c], cols[f"coherence_{kind}_hi"][c] = lo, hi
                cols["coherence_trials"][c] = nt
                cols["annotator"][c] = who
            if trials.skipped:
                ctx.note(
                    f"{cid} k={k}: {len(trials.skipped)} cluster(s) smaller than "
                    f"{opts['refs'] + 1} images get no {kind} coherence"
                )
    ctx.ws.write(
        "cluster_metrics",
        pa.table(cols, schema=schema.arrow_schema("cluster_metrics", partition=False)),
        checkpoint_id=cid,
        k=k,
    )

    anmi = M.anmi(y[has_y].astype(np.int64), labels[has_y]) if has_y.sum() > 1 else None
    nb = shared["neighbours"]
    cl, cl_correct, cl_pred = M.cluster_learnability_counts(
        nb, labels, min(opts["cl_chunks"], n), opts["cl_orders"], opts["seed"]
    )
    cl_ci = (None, None)
    if n_boot:
        cl_ci = M.ratio_interval(cl_correct, cl_pred, n_boot, M.rng_for(opts["seed"], "cl"), estimate=cl)
    # Held-out CL: clusters cut on the train split alone, so test images cannot shape them.
    tr, te = shared["train"], shared["test"]
    cl_held, held_ci = None, (None, None)
    if held is not None:
        held = M.cluster_learnability_heldout_correct(
            nb, tr, te, k, opts["n_init"], opts["seed"], opts["kmeans"], held.result()
        )
        cl_held = float(np.mean(held))
        if n_boot:  # the test images resampled, the train split's clusters held fixed
            held_ci = M.mean_interval(held, n_boot, M.rng_for(opts["seed"], "cl_heldout"))
    else:
        ctx.note(f"{cid} k={k}: cl_heldout skipped (needs `test` images and at least k `train` images)")
    row = {
        "anmi": [anmi],
        "knn_acc": [shared["knn_acc"]],
        "knn_acc_lo": [shared["knn_ci"][0]],
        "knn_acc_hi": [shared["knn_ci"][1]],
        "knn1_acc": [shared["knn1_acc"]],
        "knn1_acc_lo": [shared["knn1_ci"][0]],
        "knn1_acc_hi": [shared["knn1_ci"][1]],
        "cl": [cl],
        "cl_lo": [cl_ci[0]],
        "cl_hi": [cl_ci[1]],
        "id": [shared["id"]],
        "id_lo": [shared["id_ci"][0]],
        "id_hi": [shared["id_ci"][1]],
        "cl_heldout": [cl_held],
        "cl_heldout_lo": [held_ci[0]],
        "cl_heldout_hi": [held_ci[1]],
        "n_images": [n],
        "n_duplicates": [shared["n_duplicates"]],
    }
    ctx.ws.write(
        "checkpoint_metrics",
        pa.table(row, schema=schema.arrow_schema("checkpoint_metrics", partition=False)),
        metadata=ANALYSIS.done_metadata(opts, inputs),
        checkpoint_id=cid,
        k=k,
    )
    return inputs


ANALYSIS = Analysis(
    name="cluster_metrics",
    title="Purity, 2AFC coherence, kNN accuracy, CL and ID",
    writes=("cluster_metrics", "checkpoint_metrics"),
    tables=(CLUSTER_METRICS, CHECKPOINT_METRICS),
    units=clustering_units,
    run=_run,
    inputs=clustering_fingerprint,
    depends=("clustering",),
    options=(
        ANNOTATOR,
        TRIALS,
        REFS,
        Option("cl_chunks", int, 10, "chunks of the prequential CL code", minimum=2),
        Option("cl_orders", int, 3, "random orders CL is averaged over", minimum=1),
        N_INIT,
        KMEANS,
        BOOTSTRAP,
    ),
    doc=__doc__.splitlines()[0],
)
