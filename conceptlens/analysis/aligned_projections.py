"""`conceptlens analyze aligned_projections`: a 2-D projection per checkpoint of a sequence, in one frame.

One unit per sequence (`base.run_units`: the checkpoints of one training run of a
dataset, in the order `base.run_checkpoints` gives). The images every checkpoint of the
sequence has features for (at most `--aligned-max-images` of them, a seeded sample) are
projected once per checkpoint, so that the same image can be followed from frame to frame:

- `aligned_umap` (the default): umap-learn's `AlignedUMAP` over the whole sequence, the
  relation between consecutive checkpoints the identity (the images are the same), so its
  alignment term keeps an image where it was unless its neighbours changed: the images of
  a group that moved drift most, the others little.
- `procrustes`: a UMAP (cosine, exact neighbours) of each checkpoint with the same seed,
  each rotated, reflected and shifted onto the previous frame by orthogonal Procrustes
  (scipy), the first centred. Faster, and identical features give identical frames, but a
  rigid motion cannot undo UMAP placing its clusters elsewhere when the neighbour graph
  changes a little: unchanged groups can drift as far as moved ones. Measured in
  docs/analysis.md, 'Aligned projections'.

`drift` is the distance an image moved since the previous frame, in the shared frame.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow as pa

from .. import rng as rngs
from .. import schema
from ..metrics import nearest_cosine
from ..schema import FLOAT, INT, NON_NEGATIVE, STRING, Column, Table
from ..workspace import files_signature
from .base import Analysis, Option, Scope, Skipped, Unit, run_checkpoints, run_units
from .common import Context

METHODS = ("aligned_umap", "procrustes")
EPOCHS = 200  # UMAP's own choice above 10,000 points; as `projections` uses at every size

TABLE = Table(
    "aligned_projections",
    "aligned_projections",
    "2-D projections of the checkpoints of a sequence (a training run) in one shared frame "
    "(issue 27): one row per checkpoint and image of the sequence's sample, with how far the "
    "image moved since the previous checkpoint (docs/analysis.md, 'Aligned projections').",
    (
        Column("dataset", STRING, "Dataset (partition folder).", references="images.dataset"),
        Column("run", STRING, "Training run, `checkpoints.run` (partition folder)."),
        Column("checkpoint_id", STRING, "Checkpoint.", references="checkpoints.checkpoint_id"),
        Column("step", INT, "Its position in the sequence (0 = first frame).", bounds=NON_NEGATIVE),
        Column("epoch", INT, "Its epoch.", nullable=True, bounds=NON_NEGATIVE),
        Column("image_id", STRING, "Image.", references="images.image_id"),
        Column("x", FLOAT, "First coordinate, shared by every frame of the sequence."),
        Column("y", FLOAT, "Second coordinate."),
        Column(
            "drift",
            FLOAT,
            "Distance from the image's place in the previous frame (null in the first frame).",
            nullable=True,
            bounds=NON_NEGATIVE,
        ),
        Column("method", STRING, "`procrustes` or `aligned_umap` (`--align`)."),
    ),
    key=("dataset", "run", "checkpoint_id", "image_id"),
    partition=("dataset", "run"),
)


# ---- the projections (pure functions: arrays in, arrays out) ------------------------------
def _umap(X: np.ndarray, n_neighbors: int, min_dist: float, seed: int) -> np.ndarray:
    """A 2-D UMAP of the rows of `X` (L2-normalised): cosine, exact neighbours, seeded."""
    import umap

    nn = max(2, min(n_neighbors, len(X) - 1))
    sims, idx = nearest_cosine(X, X, k=nn, normalized=True)
    knn = (idx, np.maximum(0.0, 1.0 - sims).astype(np.float32))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*knn_search_index.*")
        warnings.filterwarnings("ignore", message=".*n_jobs value.*")
        reducer = umap.UMAP(
            n_components=2,
            n_neighbors=nn,
            min_dist=min_dist,
            metric="cosine",
            random_state=seed,
            n_jobs=1,
            n_epochs=EPOCHS,
            precomputed_knn=knn,
        )
        return reducer.fit_transform(X).astype(np.float64)


def procrustes_onto(Y: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """`Y` moved rigidly (translation, rotation or reflection; no scaling) onto `ref`: the
    orthogonal Procrustes fit of the centred point sets, placed at `ref`'s centre."""
    from scipy.linalg import orthogonal_procrustes

    Yc = Y - Y.mean(axis=0)
    R, _ = orthogonal_procrustes(Yc, ref - ref.mean(axis=0))
    return Yc @ R + ref.mean(axis=0)


def aligned_frames(
    frames: list[np.ndarray], method: str, n_neighbors: int, min_dist: float, seed: int
) -> list[np.ndarray]:
    """One (n, 2) projection per array of `frames` (the same n images in the same order, each
    L2-normalised), in one shared frame (`METHODS`)."""
    if method not in METHODS:
        raise ValueError(f"--align must be one of {', '.join(METHODS)}, got {method!r}")
    if len(frames) < 2 or len({len(f) for f in frames}) != 1:
        raise ValueError("aligned_frames needs two or more arrays with the same rows")
    n = len(frames[0])
    if method == "procrustes":
        out: list[np.ndarray] = []
        for X in frames:
            Y = _umap(X, n_neighbors, min_dist, seed)
            out.append(Y - Y.mean(axis=0) if not out else procrustes_onto(Y, out[-1]))
        return out
    import umap

    nn = max(2, min(n_neighbors, n - 1))
    identity = {i: i for i in range(n)}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*n_jobs value.*")
        model = umap.AlignedUMAP(
            n_neighbors=nn, min_dist=min_dist, metric="cosine", random_state=seed, n_epochs=EPOCHS
        )
        model.fit(frames, relations=[identity] * (len(frames) - 1))
    return [np.asarray(e, np.float64) for e in model.embeddings_]


def drifts(frames: list[np.ndarray]) -> list[np.ndarray | None]:
    """Per frame, each image's distance from its place in the previous frame (None first)."""
    return [None] + [np.linalg.norm(b - a, axis=1) for a, b in zip(frames, frames[1:])]


def sample_ids(ids: np.ndarray, cap: int, seed: int) -> np.ndarray:
    """At most `cap` of `ids` (sorted), a seeded sample, sorted."""
    ids = np.sort(np.asarray(ids, dtype=object))
    if len(ids) <= cap:
        return ids
    pick = rngs.stream(seed, "aligned_projections.sample").choice(len(ids), cap, replace=False)
    return ids[np.sort(pick)]


# ---- the analysis ----------------------------------------------------------------------
def _fingerprint(ctx: Context, unit: Unit, opts: dict) -> str:
    seq = run_checkpoints(ctx, unit)
    files = []
    for c in seq["checkpoint_id"]:
        files += ctx.ws.partition_files("features", checkpoint_id=c)
    order = ";".join(f"{c}@{e}" for c, e in zip(seq["checkpoint_id"], seq["epoch"]))
    return files_signature(files) + f":{order}"


def _run(ctx: Context, unit: Unit, opts: dict, scope: Scope) -> str:
    d, r = unit.partition["dataset"], unit.partition["run"]
    seq = run_checkpoints(ctx, unit)
    if len(seq) < 2:
        raise Skipped(
            f"run {r!r} of dataset {d!r} has {len(seq)} checkpoint(s) with features and an epoch; "
            "aligned projections need two or more"
        )
    fingerprint = _fingerprint(ctx, unit, opts)
    cids = list(seq["checkpoint_id"])
    common = None
    for c in cids:
        ids, _ = ctx.features(c)
        common = set(ids) if common is None else common & set(ids)
    if not common or len(common) < 5:
        raise Skipped(
            f"run {r!r} of dataset {d!r}: its checkpoints share {len(common or ())} image(s); "
            "5 or more needed"
        )
    keep = sample_ids(np.array(sorted(common), dtype=object), opts["aligned_max_images"], opts["seed"])
    frames = []
    for c in cids:
        ids, Xn = ctx.normalized(c)
        at = pd.Index(ids).get_indexer(keep)
        frames.append(np.ascontiguousarray(Xn[at], dtype=np.float32))
    xy = aligned_frames(
        frames, opts["align"], opts["aligned_neighbors"], opts["aligned_min_dist"], opts["seed"]
    )
    moved = drifts(xy)
    n = len(keep)
    parts = []
    epochs = seq["epoch"] if "epoch" in seq.columns else pd.Series([None] * len(seq))
    for step, (c, e, Y, m) in enumerate(zip(cids, epochs, xy, moved)):
        parts.append(
            pd.DataFrame(
                {
                    "checkpoint_id": c,
                    "step": step,
                    "epoch": None if pd.isna(e) else int(e),
                    "image_id": keep.astype(str),
                    "x": Y[:, 0],
                    "y": Y[:, 1],
                    "drift": m if m is not None else np.full(n, np.nan),
                    "method": opts["align"],
                }
            )
        )
    t = pd.concat(parts, ignore_index=True)
    t["drift"] = t["drift"].astype(object).where(t["drift"].notna(), None)
    t["epoch"] = t["epoch"].astype(object).where(t["epoch"].notna(), None)
    ctx.ws.write(
        "aligned_projections",
        pa.Table.from_pandas(
            t, schema=schema.arrow_schema("aligned_projections", partition=False), preserve_index=False
        ),
        metadata=ANALYSIS.done_metadata(opts, fingerprint),
        **ANALYSIS.partition_of("aligned_projections", unit),
    )
    return fingerprint


ANALYSIS = Analysis(
    name="aligned_projections",
    title="Aligned projections along a sequence of checkpoints (a training run)",
    writes=("aligned_projections",),
    units=run_units,
    run=_run,
    inputs=_fingerprint,
    options=(
        Option(
            "align",
            str,
            "aligned_umap",
            "how the frames share one frame: `aligned_umap` (umap-learn's AlignedUMAP) or "
            "`procrustes` (each checkpoint's UMAP rotated onto the previous one; faster, but "
            "unchanged groups may drift)",
            choices=METHODS,
        ),
        Option(
            "aligned_max_images",
            int,
            2000,
            "images projected per sequence at most (a seeded sample of those every checkpoint has)",
            minimum=5,
        ),
        Option("aligned_neighbors", int, 15, "UMAP n_neighbors of each frame", minimum=2, maximum=200),
        Option("aligned_min_dist", float, 0.1, "UMAP min_dist of each frame", minimum=0.0, maximum=1.0),
    ),
    tables=(TABLE,),
    doc=__doc__.splitlines()[0],
)
