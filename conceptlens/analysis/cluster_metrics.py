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

import numpy as np
import pyarrow as pa

from .. import schema
from ..workspace import WorkspaceError
from .base import KMEANS, N_INIT, Analysis, Option, Scope, Unit, clustering_fingerprint, clustering_units
from .common import Context, factor_matrix

# Neighbours kept per image by the one pass kNN accuracy, CL and ID share; a query its
# list cannot answer exactly is searched directly (rare: see SelfNeighbours).
NEIGHBOURS = 64


def annotator_features(ctx: Context, cid: str, ids, meta, spec: str | None):
    """(annotator features aligned with ids, name) or (None, reason)."""
    spec = spec or "factors"
    if spec == "factors":
        A, _ = factor_matrix(meta.reset_index(drop=True))
        if A.shape[1] == 0:
            return None, (
                "images.parquet has no factor columns or labels for this dataset; "
                "use --annotator checkpoint:ID"
            )
        return A, "factors"
    if spec.startswith("checkpoint:"):
        other = spec.split(":", 1)[1]
        if other == cid:
            return None, f"annotator checkpoint {other} is the checkpoint analysed"
        ctx.checkpoint_row(other)
        oids, A = ctx.read_features(other)
        pos = {i: j for j, i in enumerate(oids)}
        missing = [i for i in ids if i not in pos]
        if missing:
            raise WorkspaceError(
                f"features of {other} lack {len(missing)} image(s) of {cid}, e.g. {missing[0]!r}"
            )
        return A[[pos[i] for i in ids]], spec
    raise ValueError(f"--annotator must be 'factors' or 'checkpoint:ID', got {spec!r}")


def _per_checkpoint(ctx: Context, cid: str, ids, Xn, meta, opts: dict) -> dict:
    """One exact neighbour pass, kNN accuracies and ID with their bootstrap intervals: per
    checkpoint, shared by its k's."""
    from .. import metrics as M

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
    from concurrent.futures import ThreadPoolExecutor

    from .. import metrics as M

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
    from .. import metrics as M

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
    units=clustering_units,
    run=_run,
    inputs=clustering_fingerprint,
    depends=("clustering",),
    options=(
        Option(
            "annotator",
            str,
            None,
            "2AFC proxy annotator: `factors` (the dataset's factor "
            "columns and label; the default) or `checkpoint:ID`",
        ),
        Option("trials", int, 20, "2AFC trials per cluster and negative type", minimum=20),
        Option("refs", int, 10, "reference images per 2AFC trial", minimum=1),
        Option("cl_chunks", int, 10, "chunks of the prequential CL code", minimum=2),
        Option("cl_orders", int, 3, "random orders CL is averaged over", minimum=1),
        N_INIT,
        KMEANS,
        Option(
            "bootstrap",
            int,
            1000,
            "bootstrap resamples over images of the 95% intervals of purity, kNN accuracy "
            "(20-NN and 1-NN), CL (and held-out CL) and ID (percentile, seeded by --seed); "
            "0 stores no intervals",
            minimum=0,
            maximum=100_000,
            legacy=0,  # units stored before 2.3 have no intervals
        ),
    ),
    doc=__doc__.splitlines()[0],
)
