"""What an analysis is: its options, its units of work and how it says a unit was skipped.

An analysis module declares one `ANALYSIS = Analysis(...)` and imports only this module,
`common` and `conceptlens.metrics` (never another analysis, never the runner); it is
listed by module name in `conceptlens.analysis.MODULES`. Options that several analyses
share are declared here once (`SEED`, `N_INIT`, `KMEANS`, `BETA`, `MAX_EPOCHS`): one name
means one thing everywhere.

A unit is done when the last table it writes exists, was computed from its inputs as they
are now (`inputs`, a fingerprint stored in the file's metadata) and with the options that
change its result that were asked for (`Analysis.done_metadata`, stored there too). An
analysis whose inputs are missing for a unit raises `Skipped(reason)` before writing it:
the runner logs the reason and the next run tries again.

What a run is restricted to (one checkpoint, one dataset) and whether it recomputes done
work is its `Scope`, an argument of its own to `units` and `run`: the options dict holds
the declared options and nothing else (`Analysis.check_options`), so what is stored with
a unit and logged as its options is exactly what changes or chooses its result.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .. import schema
from ..metrics.kmeans import ENGINES as KMEANS_ENGINES
from ..workspace import files_signature
from .common import Context, partition_label


class Skipped(Exception):  # noqa: N818  (a unit skipped is not an error)
    """Raised by `Analysis.run` when a unit's inputs are missing (no caption for its images,
    a model that cannot be loaded...): nothing is written, the unit is not done, and the
    next `conceptlens analyze` tries it again."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


NO_LEGACY = object()  # Option.legacy unset


@dataclass(frozen=True)
class Option:
    name: str  # Python name; the command line flag is --name-with-dashes
    type: type
    default: Any
    help: str
    multiple: bool = False  # a list of values (nargs="+")
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple | None = None
    # False for an option that only chooses which units run (e.g. --k) or how: a unit done
    # with another value of it is still done.
    changes_result: bool = True
    # For an option added after units were stored: the value those units were computed
    # with (their stored options lack its name). Unset: the default, as for every option.
    legacy: Any = NO_LEGACY

    @property
    def flag(self) -> str:
        if self.type is bool and self.default is True:
            return "--no-" + self.name.replace("_", "-")
        return "--" + self.name.replace("_", "-")

    def problem(self, v) -> str | None:
        """What is wrong with one value, or None."""
        if self.choices is not None and v not in self.choices:
            return f"must be one of {', '.join(map(str, self.choices))}, got {v!r}"
        if self.minimum is not None and v < self.minimum:
            return f"must be at least {self.minimum:g}, got {v}"
        if self.maximum is not None and v > self.maximum:
            return f"must be at most {self.maximum:g}, got {v}"
        return None

    def check(self, value):
        """`value` if every element is allowed, else ValueError naming the flag (library calls)."""
        if value is None or self.type is bool:
            return value
        for v in value if self.multiple else [value]:
            why = self.problem(v)
            if why:
                raise ValueError(f"{self.flag} {why}")
        return value

    def parse(self, text: str):
        """argparse `type`: the value of one command line word, checked when arguments are
        parsed (argparse names the flag in its error)."""
        try:
            v = self.type(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a valid {self.type.__name__}: {text!r}") from None
        why = self.problem(v)
        if why:
            raise argparse.ArgumentTypeError(why)
        return v


SEED = Option("seed", int, 0, "random seed of every random choice (random_state)", minimum=0)
# k-means: the clustering analysis, and cluster_metrics' held-out CL re-runs it on the train split.
N_INIT = Option(
    "n_init",
    int,
    3,
    "k-means restarts (with scikit-learn each costs about 5 N x N x d products at k = sqrt(N))",
    minimum=1,
)
KMEANS = Option(
    "kmeans",
    str,
    "auto",
    "k-means implementation: `sklearn`, `faiss` (k-means++ starts compared after 5 Lloyd "
    "iterations, the best run to 15, every point used; needs faiss-cpu) or `auto` (faiss "
    "at every size if installed, else scikit-learn)",
    choices=KMEANS_ENGINES,
)
# The 2AFC observer and the intervals: cluster_metrics and the scoreboard.
ANNOTATOR = Option(
    "annotator",
    str,
    None,
    "2AFC proxy annotator: `factors` (the dataset's factor columns and label; the default) or "
    "`checkpoint:ID` (another checkpoint's features of the same images: a second network)",
)
TRIALS = Option("trials", int, 20, "2AFC trials per concept (cluster) and negative type", minimum=20)
REFS = Option("refs", int, 10, "reference images per 2AFC trial", minimum=1)
BOOTSTRAP = Option(
    "bootstrap",
    int,
    1000,
    "bootstrap resamples over images of the 95% intervals of purity, kNN accuracy (20-NN and 1-NN), "
    "CL (and held-out CL) and ID (cluster_metrics) and of learnability and purities (scoreboard); "
    "percentile, seeded by --seed; 0 stores no intervals",
    minimum=0,
    maximum=100_000,
    legacy=0,  # cluster_metrics' units stored before 2.3 have no intervals
)
# The psychological embedding: the similarity analysis and its convergence.
BETA = Option("beta", float, 10.0, "beta of the similarity exp(-beta * distance)", minimum=0.0)
MAX_EPOCHS = Option("max_epochs", int, 300, "most epochs of a fit (it stops earlier at a plateau)", minimum=1)


@dataclass(frozen=True)
class Scope:
    """What one run is restricted to, given to `Analysis.units` and `Analysis.run` apart
    from the options: none of it changes a unit's result, so none of it is stored with it.

    `checkpoint`: per-checkpoint units of that checkpoint only, dataset-level units of its
    dataset only (None: every checkpoint). `dataset`: units of that dataset only (the runner
    drops the others whatever `units` returns; None: every dataset). `force`: recompute
    units already done, and any work within a unit an analysis would otherwise reuse."""

    checkpoint: str | None = None
    dataset: str | None = None
    force: bool = False


EVERYTHING = Scope()  # the whole workspace, nothing recomputed that is done


@dataclass(frozen=True)
class Unit:
    """One piece of work: the partition it writes (e.g. checkpoint_id and k)."""

    partition: dict
    checkpoint_id: str | None = None

    @property
    def label(self) -> str:
        return partition_label(self.partition)


# ---- units shared by several analyses ----------------------------------------------------
def checkpoints_with_features(ctx: Context, opts: dict, scope: Scope) -> list[str]:
    """Checkpoints of checkpoints.parquet with a features partition (or the scope's one).

    Without `--checkpoint`, checkpoints that declare `concept_names` are left out: their
    features are k learnt concepts side by side, which the `concepts` analysis measures;
    k-means over them is not a question any of the papers asks. Name one to cluster it."""
    wanted = scope.checkpoint
    ck = ctx.checkpoints
    if wanted is None and "concept_names" in ck.columns:
        ck = ck[ck["concept_names"].isna()]
    cids = [c for c in ck["checkpoint_id"] if wanted is None or c == wanted]
    return [c for c in cids if ctx.ws.has("features", checkpoint_id=c)]


ONLY = Option(
    "only",
    str,
    None,
    "checkpoint ids (glob patterns, e.g. 'clipart-*') to compute; default: every checkpoint",
    multiple=True,
    changes_result=False,
)


def only_selected(cids: list[str], only) -> list[str]:
    """`cids` that match one of the `--only` patterns (all of them without any)."""
    import fnmatch  # local: used by two analyses only

    if not only:
        return list(cids)
    return [c for c in cids if any(fnmatch.fnmatchcase(c, p) for p in only)]


def clustering_units(ctx: Context, opts: dict, scope: Scope) -> list[Unit]:
    """One unit per `clusters` partition present (of the scope's checkpoint, if any)."""
    wanted = scope.checkpoint
    return [
        Unit(p, p["checkpoint_id"])
        for p in ctx.ws.partitions("clusters")
        if wanted is None or p["checkpoint_id"] == wanted
    ]


def clustering_fingerprint(ctx: Context, unit: Unit, opts: dict | None = None) -> str:
    """The fingerprint of the clustering a unit of `clustering_units` reads."""
    p = unit.partition
    return files_signature(ctx.ws.partition_files("clusters", checkpoint_id=p["checkpoint_id"], k=p["k"]))


# 2: copy-stable fingerprints (common.files_footprint); before: some analyses used mtimes.
INPUTS_SCHEME = 2


# ---- sequences: checkpoints of one run ordered by epoch or by depth (concept_events, learning_curves)
SEQUENCE_K = Option(
    "sequence_k",
    int,
    None,
    "k of the clusterings compared along a sequence (default: the k most of its checkpoints "
    "are clustered at; ties: the smallest)",
    minimum=2,
)

AXES = ("epoch", "depth")  # what orders a sequence: training epochs, or layers of one network
AXIS_NAMES = {"epoch": "epoch", "depth": "layer"}  # how tables and figures name the axis


def sequence_name(run: str, axis: str, at=None) -> str:
    """The name of a sequence (the `run` partition value of concept_events and
    learning_curves): a training sequence of `run`'s default embedding is the run's own name
    (so the units of training runs keep their keys); of layer `at`: `RUN@layer=AT`; a depth
    sequence at epoch `at`: `RUN@depth` (no epoch) or `RUN@depth.eAT`."""
    if axis == "epoch":
        return run if at is None else f"{run}@layer={at}"
    if axis == "depth":
        return f"{run}@depth" if at is None else f"{run}@depth.e{int(at)}"
    raise ValueError(f"axis must be one of {', '.join(AXES)}, got {axis!r}")


def parse_sequence_name(name: str) -> tuple[str, str, Any]:
    """(run, axis, at) of a name `sequence_name` made."""
    run, sep, rest = name.partition("@")
    if sep and rest.startswith("layer="):
        return run, "epoch", rest[len("layer=") :]
    if sep and rest == "depth":
        return run, "depth", None
    if sep and rest.startswith("depth.e") and rest[len("depth.e") :].isdigit():
        return run, "depth", int(rest[len("depth.e") :])
    return name, "epoch", None


@dataclass(frozen=True)
class Sequence:
    """An ordered list of checkpoints of one run of one dataset. axis `epoch`: a training
    sequence, the run's checkpoints at one `layer` (null = the default embedding) by epoch;
    axis `depth`: a depth sequence, the run's checkpoints at one `epoch` (null for a run
    without epochs, e.g. a downloaded model) by `depth`. `checkpoints`: columns
    checkpoint_id, order (the epoch or the depth), epoch, layer, depth; ties by id."""

    dataset: str
    name: str
    run: str
    axis: str
    at: Any  # the layer (epoch axis) or the epoch (depth axis) the sequence is taken at
    checkpoints: pd.DataFrame

    @property
    def axis_name(self) -> str:
        return AXIS_NAMES[self.axis]


def _eligible(ctx: Context) -> pd.DataFrame:
    """Checkpoints with a run and features, not concept models; columns checkpoint_id,
    dataset, run, epoch, layer, depth (nullable; absent columns read as null)."""
    ck = ctx.checkpoints
    if "run" not in ck.columns:
        return ck.iloc[:0].assign(run=None, epoch=None, layer=None, depth=None)
    if "concept_names" in ck.columns:
        ck = ck[ck["concept_names"].isna()]
    ck = ck[ck["run"].notna()]
    ck = ck[np.array([ctx.ws.has("features", checkpoint_id=c) for c in ck["checkpoint_id"]], bool)]
    out = pd.DataFrame(
        {
            "checkpoint_id": ck["checkpoint_id"].astype(str),
            "dataset": ck["dataset"].astype(str),
            "run": ck["run"].astype(str),
        }
    )
    for c in ("epoch", "depth"):
        out[c] = ck[c].astype("Int64") if c in ck.columns else pd.Series(pd.NA, index=ck.index, dtype="Int64")
    out["layer"] = ck["layer"] if "layer" in ck.columns else None
    out["layer"] = out["layer"].astype(object).where(out["layer"].notna(), None)
    return out.reset_index(drop=True)


def sequences(ctx: Context, dataset: str | None = None) -> list[Sequence]:
    """Every sequence of two or more checkpoints (of `dataset`, if given), by dataset and name.

    What a sequence is comes from the checkpoint table alone: checkpoints of one `run` at
    one `layer` with an `epoch` form a training sequence (by epoch); checkpoints of one
    `run` at one `epoch` (or all without one) with a `depth` form a depth sequence (by
    depth). A checkpoint may be in one of each (the last epoch's default embedding, with a
    depth, ends the depth sequence of its layers). Checkpoints without a run, or that
    declare `concept_names`, belong to no sequence."""
    ck = _eligible(ctx)
    if dataset is not None:
        ck = ck[ck["dataset"] == dataset]
    out = []
    key = ck["layer"].map(lambda v: "" if v is None else "\x01" + str(v))
    tr = ck[ck["epoch"].notna()]
    for (d, r, lk), g in tr.groupby([tr["dataset"], tr["run"], key[tr.index]], sort=True):
        if len(g) >= 2:
            layer = None if lk == "" else lk[1:]
            seq = g.assign(order=g["epoch"].astype("int64"))
            out.append(Sequence(d, sequence_name(r, "epoch", layer), r, "epoch", layer, _ordered(seq)))
    dp = ck[ck["depth"].notna()]
    ek = dp["epoch"].map(lambda v: -1 if pd.isna(v) else int(v))
    for (d, r, e), g in dp.groupby([dp["dataset"], dp["run"], ek], sort=True):
        if len(g) >= 2:
            at = None if e < 0 else int(e)
            seq = g.assign(order=g["depth"].astype("int64"))
            out.append(Sequence(d, sequence_name(r, "depth", at), r, "depth", at, _ordered(seq)))
    return sorted(out, key=lambda s: (s.dataset, s.name))


def _ordered(g: pd.DataFrame) -> pd.DataFrame:
    cols = ["checkpoint_id", "order", "epoch", "layer", "depth"]
    return g[cols].sort_values(["order", "checkpoint_id"], kind="stable").reset_index(drop=True)


def run_units(ctx: Context, opts: dict, scope: Scope) -> list[Unit]:
    """One unit per sequence (`sequences`; those holding the scope's checkpoint, if any),
    partition {dataset, run: the sequence's name}: a run of one checkpoint is no
    sequence, not a unit waiting for an input (its unit appears, due, when a second
    checkpoint is added)."""
    wanted = scope.checkpoint
    return [
        Unit({"dataset": s.dataset, "run": s.name})
        for s in sequences(ctx)
        if wanted is None or wanted in set(s.checkpoints["checkpoint_id"])
    ]


def unit_sequence(ctx: Context, unit: Unit) -> Sequence:
    """The sequence of a unit of `run_units` (empty checkpoints when it has gone)."""
    d, name = unit.partition["dataset"], unit.partition["run"]
    for s in sequences(ctx, d):
        if s.name == name:
            return s
    empty = pd.DataFrame({c: [] for c in ("checkpoint_id", "order", "epoch", "layer", "depth")})
    run, axis, at = parse_sequence_name(name)
    return Sequence(d, name, run, axis, at, empty)


def run_checkpoints(ctx: Context, unit: Unit) -> pd.DataFrame:
    """The checkpoints of a unit of `run_units` in order: columns checkpoint_id, order (the
    epoch of a training sequence, the depth of a depth sequence), epoch (= order, the name
    the analyses' tables use), layer, depth; `.attrs["axis"]` is `epoch` or `depth`."""
    s = unit_sequence(ctx, unit)
    out = s.checkpoints.assign(epoch=s.checkpoints["order"]).astype({"order": "int64", "epoch": "int64"})
    out.attrs["axis"] = s.axis
    return out


def sequence_k(ctx: Context, cids, opts: dict) -> int | None:
    """`--sequence-k`, else the k most of `cids` are clustered at (ties: the smallest);
    None when none is clustered."""
    if opts.get("sequence_k"):
        return int(opts["sequence_k"])
    counts: dict[int, int] = {}
    wanted = set(cids)
    for p in ctx.ws.partitions("clusters"):
        if p["checkpoint_id"] in wanted:
            counts[int(p["k"])] = counts.get(int(p["k"]), 0) + 1
    if not counts:
        return None
    return min(counts, key=lambda k: (-counts[k], k))


def no_inputs(ctx: Context, unit: Unit, opts: dict) -> None:
    """A unit whose output being there is enough (besides its options)."""
    return None


def plain(value):
    """A value as JSON stores it (tuples become lists): what is compared with a stored one."""
    return json.loads(json.dumps(value, default=str))


@dataclass(frozen=True)
class Analysis:
    name: str
    title: str
    writes: tuple[str, ...]  # tables; the last one is written last, with `done_metadata`
    units: Callable[[Context, dict, Scope], list[Unit]]  # every unit in scope, given the inputs present
    # Computes one unit; returns its inputs' fingerprint; raises Skipped when they are missing.
    run: Callable[[Context, Unit, dict, Scope], str | None]
    options: tuple[Option, ...] = ()
    depends: tuple[str, ...] = ()
    # Fingerprint of a unit's inputs now (given the options), or None when being present is enough.
    inputs: Callable[[Context, Unit, dict], str | None] = field(default=no_inputs)
    doc: str = ""
    # Tables this analysis adds to the workspace format (schema.TABLES picks them up).
    tables: tuple = ()
    # Before 2.2 this analysis stored no `inputs`: its files written then (no
    # `analysis_options` either) count as done rather than as stale (clustering).
    inputs_since_2_2: bool = False
    # Before 2.3 this analysis fingerprinted its inputs by modification times, which a copy
    # or a clone changes: such a fingerprint cannot be checked, and its unit counts as done
    # (`--force` recomputes it); units written since store `inputs_scheme`.
    mtime_inputs_before_2_3: bool = False

    @property
    def all_options(self) -> tuple[Option, ...]:
        return (SEED, *self.options)

    def option_defaults(self) -> dict:
        return {o.name: o.default for o in self.all_options}

    def check_options(self, opts: dict) -> dict:
        """`opts` if its keys are exactly this analysis' declared options, else ValueError
        naming the odd key. What a run is restricted to travels as its `Scope`: a key
        smuggled in beside the options (as `_checkpoint` once was) would be invisible to
        `--help`, to the stored options and to the Ray tasks' signature alike."""
        declared = self.option_defaults()
        for key in opts:
            if str(key).startswith("_"):
                raise ValueError(
                    f"analysis {self.name!r}: option {key!r} starts with `_`; what a run is "
                    "restricted to (checkpoint, dataset, force) is its Scope argument, not an option"
                )
            if key not in declared:
                raise ValueError(
                    f"analysis {self.name!r}: option {key!r} is not declared "
                    f"(its options: {', '.join(declared)})"
                )
        absent = [n for n in declared if n not in opts]
        if absent:
            raise ValueError(f"analysis {self.name!r}: option(s) {', '.join(absent)} not given")
        return opts

    def stored_options(self, stored: dict | None) -> dict:
        """The result options a unit was computed with, from those stored with it (None:
        written before 2.2, which stored none): an option missing there had its `legacy`
        value if it declares one (it did not exist yet), else its default."""
        legacy = {o.name: o.legacy for o in self.all_options if o.legacy is not NO_LEGACY}
        return {**self.result_options(self.option_defaults()), **legacy, **(stored or {})}

    def result_options(self, opts: dict) -> dict:
        """The options of `opts` that change a unit's result, as stored with it."""
        return {o.name: plain(opts[o.name]) for o in self.all_options if o.changes_result}

    def done_metadata(self, opts: dict, inputs: str | None) -> dict:
        """The metadata of the last table a unit writes: what makes it done (a file written
        before 2.2 has no `analysis_options`: it was computed with the defaults)."""
        md: dict = {"analysis_options": self.result_options(opts)}
        if inputs is not None:
            md["inputs"] = inputs
            md["inputs_scheme"] = INPUTS_SCHEME
        return md

    def partition_of(self, table: str, unit: Unit) -> dict:
        return {c: unit.partition[c] for c in schema.tables_by_name()[table].partition}
