"""Time of the concept scores of one selection (issue 26): 5,000 images of 50,000 x 512
synthetic features (seeded), with every null (conceptlens.metrics.selection).

    python bench/selection.py [--n 50000] [--dim 512] [--size 5000] [--null 200]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from conceptlens.metrics.selection import Population, score_selection


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=50_000)
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--size", type=int, default=5_000)
    p.add_argument("--null", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    labels = rng.integers(0, 100, a.n)
    centres = rng.normal(size=(100, a.dim)).astype(np.float32)
    X = centres[labels] + 2 * rng.normal(size=(a.n, a.dim)).astype(np.float32)
    factors = {"colour": rng.integers(0, 8, a.n), "size": labels % 5}
    annotator = np.eye(100, dtype=np.float32)[labels]
    pop = Population(X, labels, factors, annotator)
    sel = rng.choice(a.n, a.size, replace=False)
    t = time.perf_counter()
    out = score_selection(pop, sel, n_null=a.null, seed=a.seed)
    dt = time.perf_counter() - t
    for r in out["scores"]:
        print(
            f"{r['score']:>22} {r['value']:.3f}  pct random {r['pct_random']:.0f}  "
            f"same labels {r['pct_same_labels']:.0f}"
        )
    print(f"selection of {a.size} of {a.n} x {a.dim}, {a.null} null draws x 2: {dt:.2f} s")


if __name__ == "__main__":
    main()
