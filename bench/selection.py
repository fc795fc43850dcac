"""Time of the concept scores of one selection (issue 26): 5,000 images of 50,000 x 512
synthetic features (seeded), with every null (conceptlens.metrics.selection).

    python bench/selection.py [--n 50000] [--dim 512] [--size 5000] [--null 200] [--repeat 3]

Prints the wall and CPU time, and the load average around each, of
  - first, fresh process: the first selection of the process on a new population (its
    neighbour search of the evaluation sample, scipy.special's import, faiss's first call);
  - next: other selections of the same size on the same population (the dashboard's next
    lasso on a checkpoint);
  - first, new checkpoint: the first selection on another population in the same process
    (the neighbour search, no import);
  - prepare, then first: Population.prepare (what views.selection.population starts in the
    background when it loads a checkpoint; joined here and timed) and then the first
    selection on that population (the dashboard's first lasso, drawn after the search).
The machine may be shared: compare CPU times when the load average is above the cores.
Measurements: docs/analysis.md ("Cost" of the selection scores).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from conceptlens.metrics.selection import EVAL_MAX, Population, score_selection


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=50_000)
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--size", type=int, default=5_000)
    p.add_argument("--null", type=int, default=200)
    p.add_argument("--repeat", type=int, default=3, help="next selections after the first")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    labels = rng.integers(0, 100, a.n)
    centres = rng.normal(size=(100, a.dim)).astype(np.float32)
    X = centres[labels] + 2 * rng.normal(size=(a.n, a.dim)).astype(np.float32)
    factors = {"colour": rng.integers(0, 8, a.n), "size": labels % 5}
    annotator = np.eye(100, dtype=np.float32)[labels]
    print(f"{os.cpu_count()} cores; selection of {a.size} of {a.n} x {a.dim}, {a.null} null draws x 2")

    def population():
        return _timed(lambda: Population(X, labels, factors, annotator))

    def score(pop, what):
        sel = rng.choice(a.n, a.size, replace=False)
        before = _load()
        out, wall, cpu = _timed(lambda: score_selection(pop, sel, n_null=a.null, seed=a.seed))
        print(f"{what:>28}: wall {wall:5.2f} s, CPU {cpu:5.2f} s   (load {before} -> {_load()})")
        return out

    pop, wall, cpu = population()
    print(f"{'Population()':>28}: wall {wall:5.2f} s, CPU {cpu:5.2f} s")
    out = score(pop, "first, fresh process")
    for r in out["scores"]:
        print(
            f"{r['score']:>28} {r['value']:.3f}  pct random {r['pct_random']:.0f}  "
            f"same labels {r['pct_same_labels']:.0f}"
        )
    for _ in range(a.repeat):
        score(pop, "next")
    del pop
    pop, _, _ = population()
    score(pop, "first, new checkpoint")
    del pop
    pop, _, _ = population()
    before = _load()
    _, wall, cpu = _timed(lambda: pop.prepare(seed=a.seed, background=False))
    print(
        f"{'prepare (background)':>28}: wall {wall:5.2f} s, CPU {cpu:5.2f} s   "
        f"(load {before} -> {_load()}; {min(EVAL_MAX, a.n)} rows searched)"
    )
    score(pop, "prepare, then first")


if __name__ == "__main__":
    main()
