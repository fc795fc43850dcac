"""`conceptlens analyze --engine ray`: the pending units of one analysis as Ray tasks.

The driver (`runner.run`) keeps what needs one view of the whole run: the order of
the analyses, which units are done already, the progress bar, the `analysis_runs` log
and the error report. Each Ray task opens the workspace by its path and runs the same
`Analysis.run` the local engine runs, so it writes its partitions atomically itself; a
unit's randomness comes from `--seed` alone, never from what ran before it in the same
process, so the output is the local engine's whatever the schedule. One more input decides the
bits: the number of threads of a unit. scikit-learn's k-means sums each cluster's points
in an order set by its OpenMP threads, and one unit of rounding can move a near-tied
point to another cluster, after which the runs part ways. So a Ray task runs its units
with `--threads` threads (default 1, and it reserves as many CPUs), and its output equals
that of the local engine run with the same `--threads`.

The units of one checkpoint (its k's) go to one task, run one after the other: they
share the checkpoint's features and neighbour pass, which a task per unit would read and
compute again. A task reports each unit when it finishes (a Ray generator), and an error
in one unit is caught there: the task goes on with its next unit and the other tasks are
unaffected. `ray.init()` joins the cluster of $RAY_ADDRESS, else starts one here (as
`conceptlens extract --engine ray` does); the workspace must be at the same path on every
node (a shared file system).
"""

from __future__ import annotations

import datetime as dt
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..extract import ray_init
from ..workspace import Workspace
from . import by_name
from .base import Scope, Skipped, Unit
from .common import Context


def now_us() -> str:
    """Microseconds: two runs of one unit within a second must not share a key."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Result:
    """What a task reports of one unit: its inputs' fingerprint and time, why it was
    skipped (`base.Skipped`), or its error."""

    unit: Unit
    inputs: str | None
    started: str
    seconds: float
    notes: tuple[str, ...] = ()
    error: str | None = None
    trace: str | None = None
    skipped: str | None = None


@contextmanager
def unit_threads(n: int | None):
    """At most `n` BLAS and OpenMP threads inside (None: no limit)."""
    if n is None:
        yield
        return
    import sklearn.cluster  # noqa: F401  loads scikit-learn's OpenMP runtime so the limit reaches it
    from threadpoolctl import threadpool_limits

    with threadpool_limits(n):
        yield


def run_group(
    root: str, name: str, units: list[Unit], opts: dict, scope: Scope, threads: int = 1
) -> Iterator[Result]:
    """Run `units` of analysis `name` one after the other in one fresh context (a Ray task's
    body, also callable in-process); yields each unit's Result as soon as it is written.
    `opts` are the analysis' declared options exactly (checked here too: a task is an entry
    point of its own), `scope` the run's (`base.Scope`)."""
    a = by_name()[name]
    a.check_options(opts)
    ctx = Context(Workspace(root), progress=False)
    for unit in units:
        before = len(ctx.notes)
        started, t0 = now_us(), time.perf_counter()
        inputs = error = trace = skipped = None
        try:
            with unit_threads(threads):
                inputs = a.run(ctx, unit, opts, scope)
        except Skipped as s:  # logged by the driver; tried again by the next run
            skipped = s.reason
        except Exception as e:  # reported by the driver under the unit's name; the next unit still runs
            error, trace = f"{type(e).__name__}: {e}", traceback.format_exc()
        notes = tuple(ctx.notes[before:])
        yield Result(unit, inputs, started, time.perf_counter() - t0, notes, error, trace, skipped)


def groups(units: list[Unit]) -> list[list[Unit]]:
    """Units of one checkpoint together (in their order); a unit of no checkpoint alone."""
    out: dict = {}
    for u in units:
        out.setdefault(u.checkpoint_id or ("unit", u.label), []).append(u)
    return list(out.values())


def run_ray(
    root,
    name: str,
    units: list[Unit],
    opts: dict,
    scope: Scope,
    workers: int | None = None,
    threads: int | None = None,
) -> Iterator[Result]:
    """Results of `units` in the order they finish, at most `workers` tasks at once
    (default: as many as the Ray cluster's CPUs hold), each with `threads` threads (default 1)."""
    try:
        import ray
    except ImportError:
        raise ValueError("--engine ray needs Ray: pip install 'conceptlens[ray]'") from None

    ray_init(ray)
    threads = threads or 1
    if workers is None:
        workers = max(1, int(ray.cluster_resources().get("CPU", 1)) // threads)
    task = ray.remote(num_cpus=threads, max_retries=0)(run_group)
    todo = groups(units)[::-1]
    running: dict = {}  # generator -> units of its group not reported yet
    while todo or running:
        while todo and len(running) < workers:
            group = todo.pop()
            running[task.remote(str(root), name, group, opts, scope, threads)] = list(group)
        ready, _ = ray.wait(list(running), num_returns=1)
        gen = ready[0]
        try:
            result = ray.get(next(gen))
        except StopIteration:
            del running[gen]
            continue
        except Exception as e:  # the worker died (killed, out of memory): its unreported units failed
            why = (str(e).strip().splitlines() or [""])[0]
            for unit in running.pop(gen):
                yield Result(
                    unit, None, now_us(), 0.0, error=f"its Ray task failed: {type(e).__name__}: {why}"
                )
            continue
        running[gen].remove(result.unit)
        yield result
