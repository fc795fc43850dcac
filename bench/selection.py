"""Time of the concept scores of one selection (issue 26): 5,000 images of 50,000 x 512
synthetic features (seeded), with every null (conceptlens.metrics.selection).

    python bench/selection.py [--n 50000] [--dim 512] [--size 5000] [--null 200] [--repeat 3]

Prints the wall and CPU time of the first selection on the population ("cold": includes
the one neighbour search of the evaluation sample, kept by the Population) and of the next
ones ("warm": other selections of the same size on the same population, as the dashboard
scores them), with the load average (the machine may be shared).
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
