"""`conceptlens analyze convergence`: has enough similarity data been collected? (roads2021 §5)

One unit per dataset with a psychological embedding. The fitted (train, non-catch) trials
are taken in collection order (`round` where a study ran in rounds, else trial id) and
split into cumulative shares: one per study round where the trials carry rounds (trials
collected before the rounds, e.g. imported ones, are the first share), else `--rounds`
equal shares; after each share an ensemble is inferred at the
embedding's chosen dimensionality and measured three ways: the coarse-grained loss on
randomly drawn trials (the `test` split; else a seeded tenth of the trials, held out),
the agreement of the members within the ensemble, and its agreement with the previous
share's ensemble. Curves that have flattened say that more judgments would no longer
change the embedding.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import rng as rngs
from .. import schema
from ..embedding import active as A
from ..embedding.psych import Trials, read_embedding
from ..schema import FLOAT, INT, NON_NEGATIVE, STRING, UNIT, Column, Table
from ..workspace import WorkspaceError, files_signature
from .base import BETA, MAX_EPOCHS, Analysis, Option, Scope, Unit
from .common import Context, encode, read_trials

TABLE = Table(
    "similarity_convergence",
    "similarity_convergence",
    "Whether enough similarity judgments were collected (roads2021 section 5): the "
    "embedding inferred again from growing shares of the trials, in collection order.",
    (
        Column("dataset", STRING, "Dataset (partition folder).", references="images.dataset"),
        Column(
            "round",
            INT,
            "Share of the trials (0 = the first): one per study round where the trials carry "
            "`similarity_trials.round` (trials from before the rounds first), else equal shares.",
            bounds=NON_NEGATIVE,
        ),
        Column("n_trials", INT, "Trials fitted so far.", positive=True),
        Column("dim", INT, "Dimensionality of the embeddings (the chosen one).", positive=True),
        Column("members", INT, "Ensemble members per share.", positive=True),
        Column(
            "coarse_loss",
            FLOAT,
            "Categorical cross-entropy of randomly drawn trials under the ensemble (nats).",
            finite=True,
            bounds=NON_NEGATIVE,
        ),
        Column(
            "within_agreement",
            FLOAT,
            "Mean squared Pearson correlation of the members' similarity matrices.",
            bounds=UNIT,
        ),
        Column(
            "across_agreement",
            FLOAT,
            "Squared Pearson correlation with the previous share's ensemble (null for the first).",
            nullable=True,
            bounds=UNIT,
        ),
    ),
    key=("dataset", "round"),
    partition=("dataset",),
)


def _units(ctx: Context, opts: dict, scope: Scope) -> list[Unit]:
    have = sorted({p["dataset"] for p in ctx.ws.partitions("psych_embedding")})
    wanted = scope.checkpoint
    if wanted is not None:
        have = [d for d in have if d == ctx.checkpoint_row(wanted)["dataset"]]
    return [Unit({"dataset": d}) for d in have]


def _fingerprint(ctx: Context, unit: Unit, opts: dict | None = None) -> str:
    ds = unit.partition["dataset"]
    return files_signature(
        ctx.ws.partition_files("similarity_trials", dataset=ds)
        + ctx.ws.partition_files("psych_embedding", dataset=ds)
    )


def _run(ctx: Context, unit: Unit, opts: dict, scope: Scope) -> str:
    from ..embedding.psych import fit_embedding  # local: read at call time, where tests patch it

    ds = unit.partition["dataset"]
    fingerprint = _fingerprint(ctx, unit)
    rounds, members, seed = opts["rounds"], opts["convergence_members"], opts["seed"]
    stimuli, fitted = read_embedding(ctx.ws, ds)
    if not fitted:
        raise WorkspaceError(f"{ctx.ws.partition_dir('psych_embedding', dataset=ds)}: no embedding")
    dim = fitted[0][0].shape[1]
    index = {s: k for k, s in enumerate(stimuli)}
    t = read_trials(ctx, ds)
    t = t[~t["is_catch"]]
    by_round = "round" in t.columns and t["round"].notna().any()
    order = ["round", "trial_id"] if by_round else ["trial_id"]
    t = t.sort_values(order, kind="stable", na_position="first")
    train, coarse = t[t["split"] == "train"], t[t["split"] == "test"]
    if coarse.empty:
        pick = rngs.stream(seed, "convergence.coarse_split", unit.partition).random(len(train)) < 0.1
        train, coarse = train[~pick], train[pick]
        ctx.note(f"convergence {ds}: no `test` trials; a seeded tenth of the train trials is the coarse set")
    stim, sel = encode(train, index)
    keep = stim[:, 0] >= 0
    stim, sel, w = stim[keep], sel[keep], train["weight"].to_numpy(np.float64)[keep]
    cstim, csel = encode(coarse, index)
    ok = cstim[:, 0] >= 0
    cstim, csel = cstim[ok], csel[ok]
    ends = _round_ends(train["round"].to_numpy(np.float64)[keep]) if by_round else np.array([], int)
    if len(ends) >= 2:
        rounds = len(ends)
        ctx.note(f"convergence {ds}: one share per study round ({rounds}, trials before the rounds first)")
    else:
        if len(stim) < rounds or not len(cstim):
            raise WorkspaceError(f"convergence {ds}: {len(stim)} trials cannot make {rounds} rounds")
        ends = np.linspace(0, len(stim), rounds + 1).round().astype(int)[1:]
    if not len(cstim):
        raise WorkspaceError(f"convergence {ds}: no trial left to measure the coarse-grained loss on")
    rows, prev = [], None
    for r, end in enumerate(ends):
        share = Trials(stim[:end], sel[:end], w[:end])
        ens = []
        for m in range(members):
            f = fit_embedding(
                share,
                len(stimuli),
                dim,
                beta=opts["beta"],
                seed=rngs.int_seed(seed, "convergence.member_fit", [unit.partition, r, m]),
                max_epochs=opts["max_epochs"],
                progress=ctx.progress,
                desc=f"convergence {ds} round {r + 1}/{rounds} member {m + 1}",
                member=m,
            )
            ens.append((f.mu.astype(np.float64), f.sigma.astype(np.float64)))
        rows.append(
            {
                "round": r,
                "n_trials": int(end),
                "dim": int(dim),
                "members": members,
                "coarse_loss": A.coarse_grained_loss(ens, cstim, csel, opts["beta"]),
                "within_agreement": A.within_agreement(
                    ens,
                    opts["beta"],
                    rngs.int_seed(seed, "convergence.within_agreement", [unit.partition, r]),
                ),
                "across_agreement": None
                if prev is None
                else A.across_agreement(
                    prev,
                    ens,
                    opts["beta"],
                    rngs.int_seed(seed, "convergence.across_agreement", [unit.partition, r]),
                ),
            }
        )
        prev = ens
    ctx.ws.write(
        "similarity_convergence",
        pa.Table.from_pylist(rows, schema=schema.arrow_schema("similarity_convergence", partition=False)),
        metadata=ANALYSIS.done_metadata(opts, fingerprint),
        dataset=ds,
    )
    return fingerprint


def _round_ends(rounds: np.ndarray) -> np.ndarray:
    """Where each round's trials end in trials sorted by round (nulls, i.e. no round, first)."""
    code = np.where(np.isnan(rounds), -1.0, rounds)
    return np.append(np.flatnonzero(np.diff(code)) + 1, len(code)) if len(code) else np.array([], int)


ANALYSIS = Analysis(
    name="convergence",
    title="Convergence of the psychological embedding as judgments accumulate (roads2021 §5)",
    writes=("similarity_convergence",),
    tables=(TABLE,),
    units=_units,
    run=_run,
    inputs=_fingerprint,
    depends=("similarity",),
    options=(
        Option(
            "rounds",
            int,
            5,
            "cumulative shares of the trials to infer the embedding from (trials collected in "
            "study rounds: one share per round instead)",
            minimum=2,
        ),
        Option("convergence_members", int, 3, "ensemble members per share", minimum=2),
        BETA,  # the same beta and epochs as the embedding itself
        MAX_EPOCHS,
    ),
    doc=__doc__.splitlines()[0],
)
