"""`conceptlens analyze baselines`: lu2022's baseline predictors and its transfer study.

Per checkpoint and k (the k of its clusterings): alignment and uniformity (Wang and Isola
2020), the rate reduction Delta R of MCR2 with that k-means partition, rotation-prediction
accuracy, and the source label entropy (`baseline_scores`); per checkpoint and target
dataset, the accuracy of a linear probe on another labelled dataset of the workspace
embedded by the checkpoint's model and its target label entropy (`transfer_scores`,
lu2022 section 3.5). The comparisons analysis correlates them with kNN accuracy and with
transfer accuracy.

Alignment, rotation and transfer run the checkpoint's model again on transformed images,
so they need its weights (`checkpoints.source` and `weights`). A checkpoint whose source
is no model spec (features imported without their model) gets them as missing values,
with a note; one whose model cannot be loaded is skipped (nothing written) and tried again
by the next run; one whose weights file is not the one its features came from (SHA-256)
is refused. Alignment's two views come from a SimCLR-style augmentation
(`conceptlens.models.augment`, the one the demo's contrastive checkpoints train with:
random resized crop of at least half the area with a horizontal flip, colour jitter 0.4,
greyscale with probability 0.2), applied to every checkpoint alike. Transfer reads, instead
of embedding the target dataset again, the features of a checkpoint of the target dataset
extracted with the same model (same source, weights SHA-256, layer and preprocessing:
`_twin`), when the workspace has one for every target image.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from .. import rng as rngs
from .. import schema
from ..schema import FLOAT, INT, STRING, UNIT, Column, Table
from ..workspace import files_signature
from .base import Analysis, Option, Scope, Skipped, Unit
from .common import Context

BASELINE_SCORES = Table(
    "baseline_scores",
    "baseline_scores",
    "lu2022's baseline predictors per (checkpoint, k): alignment and uniformity (Wang and "
    "Isola 2020), MCR2's rate reduction with the k-means partition, rotation prediction, "
    "and the source label entropy (section 3.2).",
    (
        Column(
            "checkpoint_id",
            STRING,
            "Checkpoint (partition folder).",
            references="checkpoints.checkpoint_id",
        ),
        Column("k", INT, "Clusters of the k-means partition used by `mcr2`.", positive=True),
        Column(
            "alignment",
            FLOAT,
            "Mean squared distance between two augmented views of an image (normalised "
            "features; lower = better aligned); null without the model.",
            nullable=True,
            bounds=(0.0, 4.0),
        ),
        Column(
            "uniformity",
            FLOAT,
            "log mean exp(-2 ||zi - zj||^2) over pairs of normalised features (lower = more uniform).",
            bounds=(-8.0, 0.0),
        ),
        Column("mcr2", FLOAT, "Rate reduction Delta R, epsilon^2 = 0.5.", finite=True),
        Column(
            "rotation",
            FLOAT,
            "Accuracy of a 20-NN classifier predicting the rotation (0/90/180/270) of held-out "
            "images from the features; null without the model.",
            nullable=True,
            bounds=UNIT,
        ),
        Column(
            "source_neg_entropy",
            FLOAT,
            "-H(Y|X) of a linear probe on the checkpoint's own labelled dataset (nats).",
            nullable=True,
            bounds=(None, 0.0),
        ),
    ),
    key=("checkpoint_id", "k"),
    partition=("checkpoint_id",),
)

TRANSFER_SCORES = Table(
    "transfer_scores",
    "transfer_scores",
    "Out-of-domain transfer (lu2022 section 3.5): a linear probe on another labelled "
    "dataset of the workspace, embedded by the checkpoint's model.",
    (
        Column(
            "checkpoint_id",
            STRING,
            "Checkpoint (partition folder).",
            references="checkpoints.checkpoint_id",
        ),
        Column("target_dataset", STRING, "Dataset transferred to.", references="images.dataset"),
        Column("accuracy", FLOAT, "Test accuracy of the linear probe (train split -> rest).", bounds=UNIT),
        Column(
            "target_neg_entropy",
            FLOAT,
            "-H(Y|X) of the probe's predictions on the target's test images (nats).",
            bounds=(None, 0.0),
        ),
        Column("n_train", INT, "Target images the probe was fitted on.", positive=True),
        Column("n_test", INT, "Target images it was scored on.", positive=True),
    ),
    key=("checkpoint_id", "target_dataset"),
    partition=("checkpoint_id",),
)

EPS2 = 0.5  # lu2022 follows MCR2's default epsilon^2 on normalised features
ROTATIONS = (0, 90, 180, 270)


def _units(ctx: Context, opts: dict, scope: Scope) -> list[Unit]:
    wanted = scope.checkpoint
    out = []
    for p in ctx.ws.partitions("features"):
        cid = p["checkpoint_id"]
        if wanted is not None and cid != wanted:
            continue
        if any(q["checkpoint_id"] == cid for q in ctx.ws.partitions("clusters")):
            out.append(Unit({"checkpoint_id": cid}, cid))
    return sorted(out, key=lambda u: u.checkpoint_id)


def _ks(ctx: Context, cid: str) -> list[int]:
    return sorted(int(p["k"]) for p in ctx.ws.partitions("clusters") if p["checkpoint_id"] == cid)


def _fingerprint(ctx: Context, unit: Unit, opts: dict | None = None) -> str:
    cid = unit.partition["checkpoint_id"]
    files = list(ctx.ws.partition_files("features", checkpoint_id=cid))
    for k in _ks(ctx, cid):
        files += ctx.ws.partition_files("clusters", checkpoint_id=cid, k=k)
    row = ctx.checkpoint_row(cid)
    return files_signature(files) + "|" + str(row.get("weights_sha256") or "") + "|" + str(row["source"])


def _load_model(ctx: Context, cid: str):
    """The checkpoint's adapter; None (with a note) when its source is no model spec
    (imported features); Skipped when its model cannot be loaded (weights missing...); a
    WeightsMismatchError when its weights are not those its features came from."""
    from ..models import (  # local: read at call time, where tests patch it
        LayerProbe,
        ModelLoadError,
        WeightsMismatchError,
        load_checkpoint_model,
        parse_spec,
    )

    row = ctx.checkpoint_row(cid)
    try:
        parse_spec(str(row["source"]))
    except ModelLoadError:
        ctx.note(
            f"{cid}: source {row['source']!r} is no model spec (family:name); "
            "alignment, rotation and transfer left missing"
        )
        return None
    try:
        adapter = load_checkpoint_model(ctx.ws, row)
        layer = row.get("layer")
        if isinstance(layer, str) and layer:
            # A layer's features (`extract --layer`): embed through the same module, as
            # extraction did, not through the default embedding.
            probe = LayerProbe(adapter, layer)
            probe.preprocess = adapter.preprocess
            return probe
        return adapter
    except WeightsMismatchError:
        raise  # never another model than the features came from: refuse, saying what to pass
    except Exception as e:  # any other failure to load: the unit waits for its model
        raise Skipped(f"model {row['source']!r} could not be loaded ({str(e).splitlines()[0][:200]})") from e


def _pil_images(ctx: Context, ids, row=None) -> list:
    """The images as the model sees them (transparency on the background extraction used)."""
    from ..extract import (  # local: read at call time, where tests patch it
        image_path,
        load_rgb,
        model_background,
    )

    meta = ctx.image_meta(list(ids))
    src = meta["source_path"] if "source_path" in meta else pd.Series([None] * len(meta))
    bg = {ds: model_background(ctx.ws, ds, row) for ds in set(meta["dataset"])}
    out = []
    for thumb, sp, ds in zip(meta["thumbnail"], src, meta["dataset"]):
        out.append(load_rgb(image_path(ctx.ws, thumb, sp if isinstance(sp, str) else None), bg[ds]))
    return out


def _embed(adapter, images: list, batch_size: int = 256) -> np.ndarray:
    import torch

    out = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small models: one thread is faster than two fighting a busy machine
    try:
        with torch.no_grad():
            for i in range(0, len(images), batch_size):
                batch = torch.stack([adapter.preprocess(im) for im in images[i : i + batch_size]])
                out.append(adapter.embed(batch).float().numpy())
    finally:
        torch.set_num_threads(threads)
    return np.concatenate(out) if out else np.zeros((0, 0), np.float32)


def _augmented_views(images: list, seed: int) -> tuple[list, list]:
    import torch
    from PIL import Image  # local: off the dashboard's cold start

    from ..models.augment import augment

    g = rngs.torch_generator(seed, "baselines.augment")
    views = ([], [])
    for im in images:
        x = torch.from_numpy(np.asarray(im, np.float32) / 255.0).permute(2, 0, 1)[None]
        for v in views:
            a = augment(x, g)[0].permute(1, 2, 0).numpy()
            v.append(Image.fromarray((a * 255).round().astype(np.uint8)))
    return views


def _sample(ids: np.ndarray, n: int, seed: int, what: str) -> np.ndarray:
    if len(ids) <= n:
        return ids
    return np.sort(rngs.stream(seed, f"baselines.sample.{what}").choice(ids, n, replace=False))


def _split_ids(ctx: Context, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    split = ctx.image_meta(ids)["split"].to_numpy()
    return ids[split == "train"], ids[split != "train"]


def _labelled(ctx: Context, dataset: str) -> pd.DataFrame:
    img = ctx.images
    return img[(img["dataset"] == dataset) & img["label"].notna()].sort_values("image_id")


def _targets(ctx: Context, source: str, wanted: list[str]) -> list[str]:
    """The datasets to transfer to: `wanted`, else every other labelled dataset except the
    concept-quality benchmarks (`concept_datasets`: tabular toys and dSprites levels, which
    are there to test concept representations, not vision transfer)."""
    have = set(ctx.images.loc[ctx.images["label"].notna(), "dataset"])
    if wanted:
        unknown = sorted(set(wanted) - have)
        if unknown:
            raise ValueError(f"--transfer-to: no labelled images of dataset(s) {', '.join(unknown)}")
        return sorted(set(wanted) - {source})
    concept = ctx.table("concept_datasets", required=False)
    skip = set(concept["dataset"]) if concept is not None else set()
    return sorted(have - {source} - skip)


def _twin(ctx: Context, row, target: str) -> str | None:
    """A checkpoint of dataset `target` whose features came from the very model of checkpoint
    `row` (same source, weights SHA-256, layer and preprocessing); None if there is none.
    A model without a weights file (pretrained by name, random init) has no twin."""
    sha = row.get("weights_sha256")
    if not isinstance(sha, str) or not sha:
        return None
    ck = ctx.checkpoints
    same = ck[
        (ck["dataset"] == target)
        & (ck["source"] == row["source"])
        & (ck["weights_sha256"] == sha)
        & (ck["preprocessing"] == row.get("preprocessing"))
        & (ck["layer"].fillna("") == (row.get("layer") if isinstance(row.get("layer"), str) else ""))
    ]
    for cid in sorted(same["checkpoint_id"]):
        if ctx.ws.has("features", checkpoint_id=cid):
            return str(cid)
    return None


def _target_features(ctx: Context, adapter, row, target: str, ids) -> np.ndarray:
    """The target images' embeddings: read from the twin checkpoint's features when it has
    them all, else computed by running the model."""
    twin = _twin(ctx, row, target)
    if twin is not None:
        tids, TX = ctx.read_features(twin)
        pos = {str(i): n for n, i in enumerate(tids)}
        if all(str(i) in pos for i in ids):
            return np.asarray(TX[[pos[str(i)] for i in ids]], dtype=np.float32)
    return _embed(adapter, _pil_images(ctx, ids))


def _run(ctx: Context, unit: Unit, opts: dict, scope: Scope) -> str:
    from ..metrics import baselines as B  # local: off the dashboard's cold start

    cid = unit.partition["checkpoint_id"]
    fingerprint = _fingerprint(ctx, unit)
    adapter = _load_model(ctx, cid)  # first: a model that cannot be loaded skips the unit
    seed, n_img = opts["seed"], opts["baseline_images"]
    ids, X = ctx.features(cid)
    row = ctx.checkpoint_row(cid)
    source_ds = str(row["dataset"])
    meta = ctx.image_meta(ids)
    train = (meta["split"] == "train").to_numpy()
    labels = meta["label"].to_numpy()
    has_label = pd.notna(labels)

    uniformity = B.uniformity(X, max_points=n_img, random_state=seed)
    source_ent = None
    if (has_label & train).any() and (has_label & ~train).any():
        tr, te = has_label & train, has_label & ~train
        # The probe's cost grows with images x classes (at 40,000 x 1,000 classes, lbfgs
        # took over 5 minutes a checkpoint): past `probe_images` it learns from a sample,
        # the same images for every checkpoint of the dataset.
        tr &= np.isin(ids, _sample(np.sort(ids[tr]), opts["probe_images"], seed, "probe"))
        if len(np.unique(labels[tr].astype(int))) >= 2:
            source_ent = B.linear_probe(X[tr], labels[tr].astype(int), X[te], labels[te].astype(int), seed)[
                "neg_entropy"
            ]

    align = rotation = None
    transfer = []
    if adapter is not None:
        tr_ids, te_ids = _split_ids(ctx, ids)
        views = _augmented_views(_pil_images(ctx, _sample(te_ids, n_img, seed, "views"), row), seed)
        align = B.alignment(_embed(adapter, views[0]), _embed(adapter, views[1]))

        def rotated(sel):
            ims = _pil_images(ctx, sel, row)
            return [im.rotate(a) for im in ims for a in ROTATIONS], np.tile(np.arange(4), len(ims))

        rtr, ytr = rotated(_sample(tr_ids, n_img // 2, seed, "rotation_train"))
        rte, yte = rotated(_sample(te_ids, n_img // 4, seed, "rotation_test"))
        rotation = B.rotation_accuracy(_embed(adapter, rtr), ytr, _embed(adapter, rte), yte)

        for target in _targets(ctx, source_ds, opts.get("transfer_to") or []):
            t = _labelled(ctx, target)
            t_tr = t[t["split"] == "train"]
            t_te = t[t["split"] != "train"]
            if t_tr["label"].nunique() < 2 or t_te.empty:
                continue
            ftr = _target_features(ctx, adapter, row, target, t_tr["image_id"].tolist())
            fte = _target_features(ctx, adapter, row, target, t_te["image_id"].tolist())
            probe = B.linear_probe(
                ftr, t_tr["label"].astype(int).to_numpy(), fte, t_te["label"].astype(int).to_numpy(), seed
            )
            transfer.append(
                {
                    "target_dataset": target,
                    "accuracy": probe["accuracy"],
                    "target_neg_entropy": probe["neg_entropy"],
                    "n_train": len(t_tr),
                    "n_test": len(t_te),
                }
            )

    rows = []
    for k in _ks(ctx, cid):
        part, _ = ctx.clusters(cid, k)
        rows.append(
            {
                "k": k,
                "alignment": align,
                "uniformity": uniformity,
                "mcr2": B.rate_reduction(X, part, EPS2),
                "rotation": rotation,
                "source_neg_entropy": source_ent,
            }
        )
    ctx.ws.write(
        "transfer_scores",
        pa.Table.from_pylist(transfer, schema=schema.arrow_schema("transfer_scores", partition=False)),
        checkpoint_id=cid,
    )
    ctx.ws.write(
        "baseline_scores",
        pa.Table.from_pylist(rows, schema=schema.arrow_schema("baseline_scores", partition=False)),
        checkpoint_id=cid,
        metadata=ANALYSIS.done_metadata(opts, fingerprint),
    )
    return fingerprint


ANALYSIS = Analysis(
    name="baselines",
    title="lu2022's baseline predictors (alignment, uniformity, MCR2, rotation) and transfer",
    writes=("transfer_scores", "baseline_scores"),
    tables=(BASELINE_SCORES, TRANSFER_SCORES),
    units=_units,
    run=_run,
    depends=("clustering",),
    inputs=_fingerprint,
    options=(
        Option(
            "baseline_images",
            int,
            500,
            "images per checkpoint for alignment and uniformity (half as many train images, "
            "a quarter as many held-out ones, four rotations each, for rotation prediction)",
            minimum=8,
        ),
        Option(
            "probe_images",
            int,
            5000,
            "train images at most for the linear probe of -H(Y|X) on the checkpoint's own "
            "dataset (a seeded sample beyond it, the same for every checkpoint)",
            minimum=8,
        ),
        Option(
            "transfer_to",
            str,
            None,
            "datasets to transfer to (default: every other labelled dataset but the concept benchmarks)",
            multiple=True,
        ),
    ),
    doc=__doc__.splitlines()[0],
)
