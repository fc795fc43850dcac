"""Running analyses: `conceptlens analyze NAME` runs one analysis, `analyze all` every
analysis in dependency order.

A unit already done is not computed again (resumable: a run that stops half-way goes on
where it stopped), unless `force`. A unit is done when the file it writes last exists,
was computed from its input files as they are now (their fingerprint is stored in the
file's metadata), and with the result-changing options this run was given: an option
given with another value than the unit was computed with recomputes it, and says so; an
option not given keeps whatever the unit was computed with. Each unit finished or
skipped (`base.Skipped`: its inputs are missing) is logged in the append-only
`analysis_runs` table; a skipped unit writes nothing and is tried again by the next run.
`engine="ray"` runs the pending units of each analysis as Ray tasks (engines.py).
"""

from __future__ import annotations

import json
import time

import duckdb
import pyarrow as pa

from .. import __version__
from ..errors import ConceptLensError
from ..workspace import Workspace, WorkspaceError, legacy_signatures
from . import by_name, registered
from .base import EVERYTHING, SEED, Analysis, Option, Scope, Skipped, Unit
from .common import Context, log, progress
from .engines import now_us, run_ray, unit_threads

DONE, SKIPPED = "done", "skipped"


def in_order(names) -> list[Analysis]:
    """The analyses named and everything they depend on, dependencies first."""
    out: list[Analysis] = []
    known = by_name()

    def visit(name: str, stack: tuple = ()):
        if name not in known:
            raise ValueError(f"unknown analysis {name!r}; choose from {', '.join(known)} or all")
        if name in stack:
            raise ValueError(f"analyses depend on each other in a cycle: {' -> '.join(stack + (name,))}")
        a = known[name]
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
    for a in registered():
        for o in a.options:
            if o.name in out and out[o.name] != o:
                raise AssertionError(f"option {o.name!r} is declared differently by two analyses")
            out[o.name] = o
    return out


def due(ctx: Context, a: Analysis, unit: Unit, given: dict | None = None) -> str | None:
    """Why `unit` of `a` must be computed, or None when it is done. `given`: the options
    asked for explicitly (the others keep what the unit was computed with)."""
    given = {k: v for k, v in (given or {}).items() if k in a.option_defaults()}
    last = a.writes[-1]
    part = a.partition_of(last, unit)
    if not ctx.ws.has(last, **part):
        return "not computed yet"
    md = ctx.ws.read_metadata(last, **part)
    # Written before 2.2 (no options stored): computed with the defaults, except options
    # added since, which had their `legacy` value.
    stored = a.stored_options(md.get("analysis_options"))
    asked = a.result_options({**a.option_defaults(), **given})
    changed = [n for n in asked if n in given and asked[n] != stored.get(n)]
    if changed:
        what = ", ".join(f"{n} {_show(stored.get(n))} -> {_show(asked[n])}" for n in changed)
        return f"options changed ({what})"
    opts = {**a.option_defaults(), **stored, **given}
    want = a.inputs(ctx, unit, opts)
    if want is None or md.get("inputs") == want:
        return None
    if a.inputs_since_2_2 and "inputs" not in md and "analysis_options" not in md:
        return None  # written before 2.2, when this analysis stored no inputs
    with legacy_signatures():  # analysed before 2.1, in this same folder
        if md.get("inputs") is not None and md.get("inputs") == a.inputs(ctx, unit, opts):
            return None
    if a.mtime_inputs_before_2_3 and md.get("inputs") is not None and "inputs_scheme" not in md:
        return None  # fingerprinted by modification times: not checkable in a copy (base.py)
    return "inputs changed"


def _show(v) -> str:
    if isinstance(v, list):
        return " ".join(map(str, v))
    return str(v)


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
    skip=(),
) -> Context:
    """Run the analyses `names` (or "all") on the workspace at `root`; returns the run's context.

    `skip`: analyses left out, even where another one depends on them (`analyze all --skip
    baselines`): a unit that reads what they write uses what is there, and is due again once
    they have run (its inputs' fingerprint changes).

    `checkpoint` restricts per-checkpoint units to that checkpoint (dataset-level units
    then cover its dataset only); `dataset` restricts every unit to that dataset's (a
    checkpoint's unit to the checkpoints of that dataset). Units already done are skipped
    unless `force`; `options` (None values: not given) that change a unit's result and
    differ from those it was computed with make it due again. `checkpoint`, `dataset` and
    `force` reach the analyses as one `base.Scope`, never among their options.
    `engine="ray"` runs each analysis' pending units as Ray tasks, at most `workers` at
    once; a unit that fails there is reported by name once the others are written, and
    the analyses after it are not run. `threads` limits the BLAS / OpenMP threads of a unit
    (default: all locally, 1 per Ray task); the output depends on it (engines.py).
    """
    if engine not in ("local", "ray"):
        raise ValueError(f"--engine must be local or ray, got {engine!r}")
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
        names = [a.name for a in registered()]
    # Without dependencies: the analyses named, in dependency order among themselves (their
    # dependencies may sort between them: never the last len(names) of the order).
    todo = in_order(names) if with_dependencies else [a for a in in_order(names) if a.name in set(names)]
    known_names = {a.name for a in registered()}
    unknown_skip = [n for n in skip or () if n not in known_names]
    if unknown_skip:
        raise ValueError(
            f"--skip: no analysis {', '.join(map(repr, unknown_skip))} "
            f"(analyses: {', '.join(sorted(known_names))})"
        )
    if skip:
        todo = [a for a in todo if a.name not in set(skip)]
        ctx.note(f"left out (--skip): {', '.join(sorted(set(skip)))}")
    if checkpoint is not None:
        ctx.checkpoint_row(checkpoint)  # an unknown id is an error, not an empty run
    if dataset is not None and dataset not in set(ctx.images["dataset"]):
        raise WorkspaceError(f"dataset {dataset!r} has no images in images.parquet")
    known = all_options()
    given = {k: v for k, v in (options or {}).items() if v is not None}
    unknown = set(given) - set(known)
    if unknown:
        hint = ""
        if any(str(k).startswith("_") for k in unknown):
            hint = " (a run's checkpoint, dataset and force are arguments of run(), not options)"
        raise ValueError(f"unknown option(s) {', '.join(sorted(unknown))}{hint}")
    given = {k: known[k].check(v) for k, v in given.items()}
    scope = Scope(checkpoint=checkpoint, dataset=dataset, force=force)
    for a in todo:
        mine = {k: v for k, v in given.items() if k in a.option_defaults()}
        opts = a.check_options({**a.option_defaults(), **mine})
        if not with_dependencies:
            for d in in_order(a.depends):
                if any(due(ctx, d, u) is not None for u in d.units(ctx, d.option_defaults(), scope)):
                    ctx.note(
                        f"{a.name}: `{d.name}` is not done everywhere; its missing units are "
                        f"skipped here (`conceptlens analyze all` computes everything)"
                    )
                    break
        units = a.units(ctx, opts, scope)
        if scope.dataset is not None:
            units = [u for u in units if dataset_of(ctx, u) in (scope.dataset, None)]
        pending = []
        for u in units:
            why = None if scope.force else due(ctx, a, u, mine)
            if scope.force or why is not None:
                pending.append(u)
            if why is not None and why.startswith("options changed"):
                ctx.note(f"{a.name} {u.label}: {why}, recomputing")
        if not units:
            ctx.note(f"{a.name}: nothing to analyse")
        if engine == "ray" and pending:  # nothing to do starts no Ray
            _run_on_ray(ctx, a, pending, opts, scope, workers, threads, progress_bars)
            continue
        for unit in progress(pending, a.name, progress_bars):
            started, t0 = now_us(), time.perf_counter()
            try:
                with unit_threads(threads):
                    inputs = a.run(ctx, unit, opts, scope)
            except Skipped as s:
                _skipped(ctx, a, unit, opts, s.reason, started, time.perf_counter() - t0)
                continue
            _check_marked(ctx, a, unit)
            log_run(ws, a, unit, opts, inputs, started, time.perf_counter() - t0)
            ctx.written += 1
    return ctx


def _skipped(ctx: Context, a: Analysis, unit: Unit, opts: dict, reason: str, started: str, seconds) -> None:
    ctx.note(f"{a.name} {unit.label}: skipped: {reason}")
    log_run(ctx.ws, a, unit, opts, None, started, seconds, status=SKIPPED, reason=reason)


def _check_marked(ctx: Context, a: Analysis, unit: Unit) -> None:
    """The unit's last table carries `Analysis.done_metadata` (else it could never be
    told apart from a unit computed with the default options)."""
    last = a.writes[-1]
    if "analysis_options" not in ctx.ws.read_metadata(last, **a.partition_of(last, unit)):
        raise ConceptLensError(
            f"analysis {a.name!r}: unit {unit.label} wrote {last} without "
            "metadata=ANALYSIS.done_metadata(opts, inputs)"
        )


def dataset_of(ctx: Context, unit: Unit) -> str | None:
    """The dataset a unit belongs to: its partition's, else its checkpoint's (None: no one)."""
    if "dataset" in unit.partition:
        return str(unit.partition["dataset"])
    cid = unit.checkpoint_id or unit.partition.get("checkpoint_id")
    return None if cid is None else str(ctx.checkpoint_row(cid)["dataset"])


def _run_on_ray(
    ctx: Context, a: Analysis, pending: list[Unit], opts: dict, scope: Scope, workers, threads, bars
) -> None:
    failed = []
    bar = progress(None, f"{a.name} (ray)", bars, total=len(pending))
    for r in run_ray(ctx.ws.root, a.name, pending, opts, scope, workers, threads):
        for n in r.notes:
            if n not in ctx.notes:  # each task notes what the local engine notes once per run
                ctx.note(n)
        if r.skipped is not None:
            _skipped(ctx, a, r.unit, opts, r.skipped, r.started, r.seconds)
        elif r.error is None:
            _check_marked(ctx, a, r.unit)
            log_run(ctx.ws, a, r.unit, opts, r.inputs, r.started, r.seconds)
            ctx.written += 1
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


def log_run(
    ws: Workspace,
    a: Analysis,
    unit: Unit,
    opts: dict,
    inputs,
    started: str,
    seconds: float,
    status: str = DONE,
    reason: str | None = None,
) -> None:
    """One row of the `analysis_runs` log."""
    ws.append(
        "analysis_runs",
        pa.table(
            {
                "unit": [unit.label],
                "inputs": pa.array([inputs], pa.string()),
                "options": [json.dumps(a.check_options(opts), sort_keys=True, default=str)],
                "version": [__version__],
                "started": [started],
                "seconds": [float(seconds)],
                "status": [status],
                "reason": pa.array([reason], pa.string()),
            }
        ),
        analysis=a.name,
    )


def missing(root, names="all") -> dict[str, list[str]]:
    """Units not done yet, per analysis (what `analyze all` would compute)."""
    ctx = Context(Workspace(root), progress=False)
    names = [a.name for a in registered()] if names == "all" else names
    out = {}
    for a in in_order(names):
        out[a.name] = [u.label for u in _units_or_none(ctx, a) if due(ctx, a, u) is not None]
    return out


def _units_or_none(ctx: Context, a: Analysis) -> list[Unit]:
    try:
        return a.units(ctx, a.option_defaults(), EVERYTHING)
    except WorkspaceError:
        return []


def skipped(root) -> dict[str, dict[str, str]]:
    """analysis -> unit label -> reason, for the units whose latest `analysis_runs` entry
    is a skip and that are still not done (what `analyze all` will try again)."""
    ws = Workspace(root)
    latest = last_runs(ws)
    out: dict[str, dict[str, str]] = {}
    if not latest:
        return out
    ctx = Context(ws, progress=False)
    for a in registered():
        mine = {u: r for (n, u), r in latest.items() if n == a.name and r["status"] == SKIPPED}
        if not mine:
            continue
        for unit in _units_or_none(ctx, a):
            if unit.label in mine and due(ctx, a, unit) is not None:
                out.setdefault(a.name, {})[unit.label] = str(mine[unit.label]["reason"] or "")
    return out


def last_runs(ws: Workspace) -> dict[tuple[str, str], dict]:
    """(analysis, unit label) -> its latest `analysis_runs` row (status `done` for rows
    written before 2.2, which logged finished units only)."""
    files = [str(f) for f in ws.files("analysis_runs")]
    if not files:
        return {}
    con = duckdb.connect()
    try:
        df = con.execute(
            "SELECT * FROM read_parquet(?, hive_partitioning = true, union_by_name = true)", [files]
        ).df()
    finally:
        con.close()
    for c in ("status", "reason"):
        if c not in df:
            df[c] = None
    df["status"] = df["status"].fillna(DONE)
    df = df.sort_values("started", kind="stable").drop_duplicates(["analysis", "unit"], keep="last")
    return {
        (str(r["analysis"]), str(r["unit"])): {"status": r["status"], "reason": r["reason"]}
        for r in df.to_dict("records")
    }
