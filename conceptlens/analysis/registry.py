"""The analysis registry: every analysis declares its name, the tables it writes, its
options (with help text), the analyses it depends on, and how it splits into units of
work (a checkpoint and k, a dataset...).

`conceptlens analyze NAME` runs one analysis; `conceptlens analyze all` runs every
analysis in dependency order. A unit already done is skipped (resumable: a run that
stops half-way goes on where it stopped), unless `--force`. A unit is done when the
file it writes last exists and, for analyses of derived tables, was computed from the
input files as they are now (their fingerprint is stored in the file's metadata).
Each finished unit is logged in the append-only `analysis_runs` table.
`--engine ray` runs the pending units of each analysis as Ray tasks (engines.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..errors import ConceptLensError
from ..workspace import Workspace, WorkspaceError, legacy_signatures
from .common import Context, log, partition_label, progress


@dataclass(frozen=True)
class Option:
    name: str  # Python name; the command line flag is --name-with-dashes
    type: type
    default: Any
    help: str
    multiple: bool = False  # a list of values (nargs="+")
    minimum: float | None = None

    @property
    def flag(self) -> str:
        if self.type is bool and self.default is True:
            return "--no-" + self.name.replace("_", "-")
        return "--" + self.name.replace("_", "-")

    def check(self, value):
        if value is None or self.minimum is None:
            return value
        for v in value if self.multiple else [value]:
            if v < self.minimum:
                raise ValueError(f"{self.flag} must be at least {self.minimum:g}, got {v}")
        return value


SEED = Option("seed", int, 0, "random seed of every random choice (random_state)")


@dataclass(frozen=True)
class Unit:
    """One piece of work: the partition it writes (e.g. checkpoint_id and k)."""

    partition: dict
    checkpoint_id: str | None = None

    @property
    def label(self) -> str:
        return partition_label(self.partition)


@dataclass(frozen=True)
class Analysis:
    name: str
    title: str
    writes: tuple[str, ...]  # tables; the last one is written last
    units: Callable[[Context, dict], list[Unit]]  # every unit, given the inputs present
    run: Callable[[Context, Unit, dict], str | None]  # computes one unit; returns its inputs' fingerprint
    options: tuple[Option, ...] = ()
    depends: tuple[str, ...] = ()
    page: str | None = None
    # Fingerprint of a unit's inputs now, or None when being present is enough.
    inputs: Callable[[Context, Unit], str | None] = field(default=lambda ctx, unit: None)
    doc: str = ""

    def option_defaults(self) -> dict:
        return {o.name: o.default for o in (SEED, *self.options)}

    def is_done(self, ctx: Context, unit: Unit) -> bool:
        last = self.writes[-1]
        if not ctx.ws.has(last, **self._partition_of(last, unit)):
            return False
        want = self.inputs(ctx, unit)
        if want is None:
            return True
        stored = ctx.ws.read_metadata(last, **self._partition_of(last, unit)).get("inputs")
        if stored == want:
            return True
        with legacy_signatures():  # analysed before 2.1, in this same folder
            return stored is not None and stored == self.inputs(ctx, unit)

    @staticmethod
    def _partition_of(table: str, unit: Unit) -> dict:
        from ..schema import TABLES_BY_NAME

        return {c: unit.partition[c] for c in TABLES_BY_NAME[table].partition}


def _analyses() -> tuple[Analysis, ...]:
    from . import (
        baselines,
        cluster_captions,
        cluster_metrics,
        clustering,
        comparisons,
        compmap,
        concepts,
        convergence,
        projections,
        similarity,
    )

    return (
        clustering.ANALYSIS,
        cluster_metrics.ANALYSIS,
        cluster_captions.ANALYSIS,
        projections.ANALYSIS,
        baselines.ANALYSIS,
        comparisons.ANALYSIS,
        compmap.ANALYSIS,
        similarity.ANALYSIS,
        concepts.ANALYSIS,
        convergence.ANALYSIS,
    )


def __getattr__(name: str):
    """`ANALYSES` and `BY_NAME`, built on first use: the analysis modules import this one,
    so building them at import time would make importing any of those modules alone circular."""
    if name in ("ANALYSES", "BY_NAME"):
        return _registered()[name]
    raise AttributeError(name)


def _registered() -> dict:
    g = globals()
    if "ANALYSES" not in g:
        analyses = _analyses()
        g.update(ANALYSES=analyses, BY_NAME={a.name: a for a in analyses})
    return {"ANALYSES": g["ANALYSES"], "BY_NAME": g["BY_NAME"]}


def in_order(names) -> list[Analysis]:
    """The analyses named and everything they depend on, dependencies first."""
    out: list[Analysis] = []

    def visit(name: str, stack: tuple = ()):
        by_name = _registered()["BY_NAME"]
        if name not in by_name:
            raise ValueError(f"unknown analysis {name!r}; choose from {', '.join(by_name)} or all")
        if name in stack:
            raise ValueError(f"analyses depend on each other in a cycle: {' -> '.join(stack + (name,))}")
        a = by_name[name]
        for d in a.depends:
            visit(d, stack + (name,))
        if a not in out:
            out.append(a)

    for n in names:
        visit(n)
    return out


def all_options() -> dict[str, Option]:
    """The union of every analysis' options (one name means one thing everywhere)."""
    out = {"seed": SEED}
    for a in _registered()["ANALYSES"]:
        for o in a.options:
            if o.name in out and out[o.name] != o:
                raise AssertionError(f"option {o.name!r} is declared differently by two analyses")
            out[o.name] = o
    return out


def run(
    root,
    names,
    options: dict | None = None,
    checkpoint: str | None = None,
    force: bool = False,
    progress_bars: bool = True,
    with_dependencies: bool = True,
    engine: str = "local",
    workers: int | None = None,
    threads: int | None = None,
    dataset: str | None = None,
) -> Context:
    """Run the analyses `names` (or "all") on the workspace at `root`; returns the run's context.

    `checkpoint` restricts per-checkpoint units to that checkpoint (dataset-level units
    then cover its dataset only); `dataset` restricts every unit to that dataset's (a
    checkpoint's unit to the checkpoints of that dataset). Units already done are skipped
    unless `force`.
    `engine="ray"` runs each analysis' pending units as Ray tasks, at most `workers` at
    once; a unit that fails there is reported by name once the others are written, and
    the analyses after it are not run. `threads` limits the BLAS / OpenMP threads of a unit
    (default: all locally, 1 per Ray task); the output depends on it (engines.py).
    """
    if engine not in ("local", "ray"):
        raise ValueError(f"--engine must be local or ray, got {engine!r}")
    from .engines import unit_threads

    if workers is not None and engine != "ray":
        raise ValueError("--workers is the number of Ray tasks at once: it needs --engine ray")
    for flag, v in (("--workers", workers), ("--threads", threads)):
        if v is not None and v < 1:
            raise ValueError(f"{flag} must be at least 1, got {v}")
    ws = Workspace(root)
    ws.meta()
    ctx = Context(ws, progress=progress_bars)
    if isinstance(names, str):
        names = [names]
    if names == ["all"]:
        names = [a.name for a in _registered()["ANALYSES"]]
    todo = in_order(names) if with_dependencies else in_order(names)[-len(names) :]
    if checkpoint is not None:
        ctx.checkpoint_row(checkpoint)  # an unknown id is an error, not an empty run
    if dataset is not None and dataset not in set(ctx.images["dataset"]):
        raise WorkspaceError(f"dataset {dataset!r} has no images in images.parquet")
    given = {k: v for k, v in (options or {}).items() if v is not None}
    known = all_options()
    unknown = set(given) - set(known)
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(sorted(unknown))}")
    for a in todo:
        opts = {
            **a.option_defaults(),
            **{k: known[k].check(v) for k, v in given.items() if k in a.option_defaults()},
        }
        opts["_checkpoint"] = checkpoint
        opts["_force"] = force  # an analysis may reuse work within a unit unless forced
        if not with_dependencies:
            for d in in_order(a.depends):
                if any(
                    not d.is_done(ctx, u)
                    for u in d.units(ctx, {**d.option_defaults(), "_checkpoint": checkpoint})
                ):
                    ctx.note(
                        f"{a.name}: `{d.name}` is not done everywhere; its missing units are "
                        f"skipped here (`conceptlens analyze all` computes everything)"
                    )
                    break
        units = a.units(ctx, opts)
        if dataset is not None:
            units = [u for u in units if _dataset_of(ctx, u) in (dataset, None)]
        pending = [u for u in units if force or not a.is_done(ctx, u)]
        if not units:
            ctx.note(f"{a.name}: nothing to analyse")
        if engine == "ray" and pending:  # nothing to do starts no Ray
            _run_on_ray(ctx, a, pending, opts, workers, threads, progress_bars)
            continue
        for unit in progress(pending, a.name, progress_bars):
            started, t0 = now_us(), time.perf_counter()
            with unit_threads(threads):
                inputs = a.run(ctx, unit, opts)
            _log_run(ws, a, unit, opts, inputs, started, time.perf_counter() - t0)
    return ctx


def _dataset_of(ctx: Context, unit: Unit) -> str | None:
    """The dataset a unit belongs to: its partition's, else its checkpoint's (None: no one)."""
    if "dataset" in unit.partition:
        return str(unit.partition["dataset"])
    cid = unit.checkpoint_id or unit.partition.get("checkpoint_id")
    return None if cid is None else str(ctx.checkpoint_row(cid)["dataset"])


def _run_on_ray(ctx: Context, a: Analysis, pending: list[Unit], opts: dict, workers, threads, bars) -> None:
    from .engines import run_ray

    failed = []
    bar = progress(None, f"{a.name} (ray)", bars, total=len(pending))
    for r in run_ray(ctx.ws.root, a.name, pending, opts, workers, threads):
        for n in r.notes:
            if n not in ctx.notes:  # each task notes what the local engine notes once per run
                ctx.note(n)
        if r.error is None:
            _log_run(ctx.ws, a, r.unit, opts, r.inputs, r.started, r.seconds)
        else:
            failed.append(r)
            log.debug("%s %s failed:\n%s", a.name, r.unit.label, r.trace or r.error)
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    if failed:
        raise ConceptLensError(
            f"{a.name}: {len(failed)} of {len(pending)} unit(s) failed on Ray, the others are written "
            "(run the same command again to retry them; --debug shows tracebacks): "
            + "; ".join(f"{r.unit.label}: {r.error}" for r in failed)
        )


def now_us() -> str:
    """Microseconds: two runs of one unit within a second must not share a key."""
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")


def _log_run(
    ws: Workspace, a: Analysis, unit: Unit, opts: dict, inputs, started: str, seconds: float
) -> None:
    from .. import __version__

    public = {k: v for k, v in opts.items() if not k.startswith("_")}
    ws.append(
        "analysis_runs",
        pa.table(
            {
                "unit": [unit.label],
                "inputs": pa.array([inputs], pa.string()),
                "options": [json.dumps(public, sort_keys=True, default=str)],
                "version": [__version__],
                "started": [started],
                "seconds": [float(seconds)],
            }
        ),
        analysis=a.name,
    )


def missing(root, names="all") -> dict[str, list[str]]:
    """Units not done yet, per analysis (what `analyze all` would compute)."""
    ctx = Context(Workspace(root), progress=False)
    names = [a.name for a in _registered()["ANALYSES"]] if names == "all" else names
    out = {}
    for a in in_order(names):
        opts = {**a.option_defaults(), "_checkpoint": None}
        try:
            units = a.units(ctx, opts)
        except WorkspaceError:
            units = []
        out[a.name] = [u.label for u in units if not a.is_done(ctx, u)]
    return out


# ---- command line ----------------------------------------------------------------------
def _add_options(p, options) -> None:
    for o in options:
        if o.type is bool:
            p.add_argument(
                o.flag,
                dest=o.name,
                action="store_false" if o.default else "store_true",
                default=None,
                help=o.help,
            )
        else:
            p.add_argument(
                o.flag,
                dest=o.name,
                type=o.type,
                nargs="+" if o.multiple else None,
                default=None,
                help=f"{o.help} (default: {o.default})",
            )


def _add_engine(p) -> None:
    p.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="local: one unit after the other here; ray: the units as Ray tasks (one per checkpoint "
        "or dataset) on the cluster of $RAY_ADDRESS, else on this machine",
    )
    p.add_argument("--workers", type=int, help="Ray tasks at once with --engine ray (default: CPUs/threads)")
    p.add_argument(
        "--threads",
        type=int,
        help="BLAS / OpenMP threads of one unit (default: all with local, 1 per Ray task); scikit-learn's "
        "k-means depends on it, so a Ray run equals a local run with the same --threads",
    )


def _handler(name: str):
    def handle(args) -> int:
        opts = {o: getattr(args, o, None) for o in all_options()}
        ctx = run(
            args.workspace,
            name,
            opts,
            checkpoint=args.checkpoint,
            dataset=args.dataset,
            force=args.force,
            progress_bars=not args.quiet,
            with_dependencies=name == "all",
            engine=args.engine,
            workers=args.workers,
            threads=args.threads,
        )
        print(
            f"{name}: analyses written to {args.workspace}"
            + (f" ({len(ctx.notes)} note(s) above)" if ctx.notes else "")
        )
        return 0

    return handle


def register(sub, parents) -> None:
    """`conceptlens analyze NAME|all`, with each analysis' options from the registry."""
    p = sub.add_parser(
        "analyze",
        help="compute analyses into a workspace",
        description="Compute analyses; `all` runs every analysis not done yet, in dependency order.",
    )
    asub = p.add_subparsers(dest="analysis", required=True, metavar="ANALYSIS")
    common = [*parents]
    for a in _registered()["ANALYSES"]:
        ap = asub.add_parser(a.name, parents=common, help=a.title, description=a.doc or a.title)
        ap.add_argument("--checkpoint", help="only this checkpoint (default: all)")
        ap.add_argument("--dataset", help="only this dataset's units (default: all)")
        ap.add_argument("--force", action="store_true", help="recompute units already done")
        _add_engine(ap)
        _add_options(ap, (SEED, *a.options))
        ap.set_defaults(func=_handler(a.name))
    ap = asub.add_parser("all", parents=common, help="every analysis not done yet, in dependency order")
    ap.add_argument("--checkpoint", help="only this checkpoint (default: all)")
    ap.add_argument("--dataset", help="only this dataset's units (default: all)")
    ap.add_argument("--force", action="store_true", help="recompute units already done")
    _add_engine(ap)
    _add_options(ap, all_options().values())
    ap.set_defaults(func=_handler("all"))
