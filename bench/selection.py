"""Time of the concept scores of one selection (issue 26): 5,000 images of 50,000 x 512
synthetic features (seeded), with every null (conceptlens.metrics.selection).

    python bench/selection.py [--n 50000] [--dim 512] [--size 5000] [--null 200] [--repeat 3]

Prints the wall and CPU time of the first selection on the population ("cold": includes
the one neighbour search of the evaluation sample, kept by the Population) and of the next
ones ("warm": other selections of the same size on the same population, as the dashboard
scores them), with the load average (the machine may be shared).

Measured 2026-11-25 (defaults: 5,000 of 50,000 x 512, 2 x 200 null draws), `nice -n 10` on
the two-core machine shared with four other helpers' jobs, load average 7 to 12 — so wall
times are 3-4x the CPU times and no idle-core wall time could be taken:
  before average_ranks (scipy.stats imported by the first selection), load 7.2-8.1:
    cold wall 25.52 s / CPU 5.61 s; warm wall 10.63, 6.01, 5.39 s / CPU 2.05, 1.90, 1.93 s
  after (numpy average ranks, the same scores bit for bit), load 12.4-12.6:
    cold wall 19.84 s / CPU 4.84 s; warm wall 5.76, 5.45, 4.06 s / CPU 1.72, 1.90, 1.77 s
Where a warm selection's CPU goes (cProfile): TwoNN of the selection and of 2 x 15 null
draws (31 Gram matrices of 400 x 512 in float64) 0.7 s, coherence trials 0.3-0.6 s, the
rest in the null draws' shares, AUCs and intervals. A cold one adds the faiss search of the
3,000-image evaluation sample against all 50,000 (2.5 s CPU), kept by the Population.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from conceptlens.metrics.selection import Population, score_selection


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
    p.add_argument("--repeat", type=int, default=3, help="warm selections after the first")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    labels = rng.integers(0, 100, a.n)
    centres = rng.normal(size=(100, a.dim)).astype(np.float32)
    X = centres[labels] + 2 * rng.normal(size=(a.n, a.dim)).astype(np.float32)
    factors = {"colour": rng.integers(0, 8, a.n), "size": labels % 5}
    annotator = np.eye(100, dtype=np.float32)[labels]
    pop = Population(X, labels, factors, annotator)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for i in range(1 + a.repeat):
        sel = rng.choice(a.n, a.size, replace=False)
        out, wall, cpu = _timed(lambda sel=sel: score_selection(pop, sel, n_null=a.null, seed=a.seed))
        if i == 0:
            for r in out["scores"]:
                print(
                    f"{r['score']:>22} {r['value']:.3f}  pct random {r['pct_random']:.0f}  "
                    f"same labels {r['pct_same_labels']:.0f}"
                )
        print(
            f"{'cold' if i == 0 else 'warm'}: selection of {a.size} of {a.n} x {a.dim}, "
            f"{a.null} null draws x 2: wall {wall:.2f} s, CPU {cpu:.2f} s"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
