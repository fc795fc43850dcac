"""`conceptlens analyze mean_norm`: the mean length of a checkpoint's feature vectors, with a
percentile bootstrap interval over its images.

A fixture, not part of the product: tests/test_contracts.py drops this module into a copy of
ConceptLens, as docs/architecture.md's recipe adds an analysis, to show what the addition
touches and that the contract tests cover it from its declarations alone.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import rng as rngs
from .. import schema
from ..schema import FLOAT, INT, NON_NEGATIVE, STRING, Column, Table
from ..workspace import files_signature
from .base import Analysis, Option, Scope, Skipped, Unit, checkpoints_with_features
from .common import Context

TABLE = Table(
    "mean_norms",
    "mean_norms",
    "Mean Euclidean norm of a checkpoint's feature vectors, with its 95% interval.",
    (
        Column(
            "checkpoint_id", STRING, "Checkpoint (partition folder).", references="checkpoints.checkpoint_id"
        ),
        Column("n_images", INT, "Images with features.", positive=True),
        Column("mean_norm", FLOAT, "Mean norm of the feature vectors.", bounds=NON_NEGATIVE, finite=True),
        Column(
            "mean_norm_lo",
            FLOAT,
            "95% interval of `mean_norm`, low end (percentile bootstrap over images, `--norm-boot` "
            "resamples).",
            nullable=True,
            bounds=NON_NEGATIVE,
            at_most=("mean_norm",),
        ),
        Column(
            "mean_norm_hi",
            FLOAT,
            "95% interval of `mean_norm`, high end.",
            nullable=True,
            bounds=NON_NEGATIVE,
        ),
    ),
    key=("checkpoint_id",),
    partition=("checkpoint_id",),
)

NORM_BOOT = Option("norm_boot", int, 200, "bootstrap resamples of the mean norm's interval", minimum=20)


def _units(ctx: Context, opts: dict, scope: Scope) -> list[Unit]:
    return [Unit({"checkpoint_id": c}, c) for c in checkpoints_with_features(ctx, opts, scope)]


def _inputs(ctx: Context, unit: Unit, opts: dict | None = None) -> str:
    return files_signature(ctx.ws.partition_files("features", checkpoint_id=unit.checkpoint_id))


def mean_norm(X: np.ndarray, boot: int, rng: np.random.Generator) -> tuple[float, float, float]:
    """Mean row norm of `X` and its 95% percentile bootstrap interval (`boot` resamples)."""
    norms = np.linalg.norm(np.asarray(X, np.float64), axis=1)
    means = norms[rng.integers(0, len(norms), (boot, len(norms)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    m = float(norms.mean())
    return m, min(float(lo), m), max(float(hi), m)


def _run(ctx: Context, unit: Unit, opts: dict, scope: Scope) -> str:
    _, X = ctx.features(unit.checkpoint_id)
    if len(X) == 0:
        raise Skipped(f"checkpoint {unit.checkpoint_id} has no features")
    inputs = _inputs(ctx, unit)
    m, lo, hi = mean_norm(X, opts["norm_boot"], rngs.stream(opts["seed"], "mean_norm", unit.partition))
    t = pa.table(
        {"n_images": [len(X)], "mean_norm": [m], "mean_norm_lo": [lo], "mean_norm_hi": [hi]},
        schema=schema.arrow_schema("mean_norms", partition=False),
    )
    ctx.ws.write(
        "mean_norms", t, metadata=ANALYSIS.done_metadata(opts, inputs), checkpoint_id=unit.checkpoint_id
    )
    return inputs


ANALYSIS = Analysis(
    name="mean_norm",
    title="Mean feature norm",
    writes=("mean_norms",),
    units=_units,
    run=_run,
    options=(NORM_BOOT,),
    inputs=_inputs,
    tables=(TABLE,),
)
