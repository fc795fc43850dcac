"""Time the concept-quality metrics (`conceptlens analyze concepts`) on synthetic concepts.

1. The purity matrix: k_learnt x k_true one-hidden-layer (32 ReLU) classifiers per seed,
   trained together in numpy (`metrics.concepts.pairwise_mlp_auc`), for k = 3 (TabularToy),
   5 (dSprites), 6 (3dshapes), 12 (the issue's bound) and 24 x 12 (2k unsupervised
   concepts), at d = 1 and d = 4 dimensions per concept, on 1,000 test images (the demo's
   test splits; the 80/20 split trains on 800). Compared with sklearn's MLPClassifier((32,))
   fitted pair by pair on a sample of pairs (time extrapolated to k^2 pairs; AUCs compared).
2. One seed of one checkpoint's niche scores: the label predictor (MLP 20-20) and niche
   purity / impurity for 21 betas, with 5 concepts and 8 labels on 2,000 train / 1,000 test
   images (dSprites-sized).

Wall and CPU times are printed and written as JSON. The machine is shared: CPU time is the
steadier figure.

    nice .venv/bin/python bench/concepts.py [--out /tmp/bench/concepts.json] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conceptlens.metrics import concepts as CQ  # noqa: E402


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def problem(n: int, kl: int, kt: int, d: int, seed: int = 0):
    """kt binary concepts from correlated latents; kl learnt concepts of d dims, the first kt
    noisy (and non-monotone: |z|) views of the latents, the rest noise."""
    rng = np.random.default_rng(seed)
    cov = np.full((kt, kt), 0.3) + 0.7 * np.eye(kt)
    z = rng.multivariate_normal(np.zeros(kt), cov, size=n)
    C = (z > 0).astype(np.int64)
    reps = []
    for i in range(kl):
        base = z[:, i % kt] if i < kt else rng.normal(size=n)
        cols = [base + 0.5 * rng.normal(size=n)] + [np.abs(base) + rng.normal(size=n) for _ in range(d - 1)]
        reps.append(np.column_stack(cols).astype(np.float32))
    return reps, C


def bench_purity(kl, kt, d, n=1000, sk_pairs=6):
    from sklearn.neural_network import MLPClassifier

    reps, C = problem(n, kl, kt, d)
    P, wall, cpu = timed(lambda: CQ.purity_matrix(reps, C, random_state=0))
    train, test = CQ.split_rows(n, 0.2, 0)
    rng = np.random.default_rng(1)
    pairs = [(int(rng.integers(kl)), int(rng.integers(kt))) for _ in range(sk_pairs)]
    diffs, sk_cpu = [], 0.0
    for i, j in pairs:
        mlp = MLPClassifier((32,), max_iter=1000, random_state=0)
        clf, _, c = timed(lambda i=i, j=j, mlp=mlp: mlp.fit(reps[i][train], C[train, j]))
        sk_cpu += c
        diffs.append(abs(CQ.ovo_auc(C[test, j], clf.predict_proba(reps[i][test])) - P[i, j]))
    return {
        "k_learnt": kl,
        "k_true": kt,
        "d": d,
        "n": n,
        "classifiers": kl * kt,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "sklearn_cpu_s_extrapolated": round(sk_cpu / len(pairs) * kl * kt, 1),
        "max_abs_auc_diff_vs_sklearn": round(float(max(diffs)), 4),
    }


def bench_niches(n_train=2000, n_test=1000, k=5, labels=8, seed=0):
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    C = rng.integers(0, 2, (n, k))
    y = np.where(C[:, 0] == 1, 2 * C[:, 1] + C[:, 3], 4 + 2 * C[:, 2] + C[:, 4])[:, None].ravel() % labels
    reps = [(C[:, i] + 0.3 * rng.normal(size=n))[:, None] for i in range(k)]
    X = np.hstack(reps)
    tr, te = np.arange(n_train), np.arange(n_train, n)
    f, fw, fc = timed(lambda: CQ.fit_label_predictor(X[tr], y[tr], random_state=seed))
    corr = CQ.niche_correlations([r[tr] for r in reps], y[tr], list(f.classes_))
    betas = sorted(set(CQ.BETAS) | {CQ.PAPER_BETA})
    _, nw, nc = timed(lambda: CQ.niche_scores(f, X[te], y[te], CQ.concept_columns(reps), corr, betas))
    return {
        "k": k,
        "labels": int(len(f.classes_)),
        "n_train": n_train,
        "n_test": n_test,
        "label_predictor_wall_s": round(fw, 3),
        "label_predictor_cpu_s": round(fc, 3),
        "niche_scores_wall_s": round(nw, 3),
        "niche_scores_cpu_s": round(nc, 3),
        "betas": len(betas),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    ap.add_argument("--quick", action="store_true", help="k = 3 and 12 only")
    args = ap.parse_args(argv)
    shapes = (
        [(3, 3, 1), (12, 12, 1)]
        if args.quick
        else [
            (3, 3, 1),
            (5, 5, 1),
            (6, 6, 1),
            (12, 12, 1),
            (12, 12, 4),
            (24, 12, 1),
        ]
    )
    out = {"purity": [], "niches": None}
    for kl, kt, d in shapes:
        r = bench_purity(kl, kt, d)
        out["purity"].append(r)
        print(
            f"purity {kl:>2} x {kt:>2} (d={d}): {r['classifiers']:>3} classifiers in "
            f"{r['wall_s']:.2f} s wall, {r['cpu_s']:.2f} s CPU; "
            f"sklearn one by one ~{r['sklearn_cpu_s_extrapolated']:.0f} s CPU; "
            f"max |AUC - sklearn's| {r['max_abs_auc_diff_vs_sklearn']:.3f}",
            flush=True,
        )
    out["niches"] = bench_niches()
    r = out["niches"]
    print(
        f"niches (k={r['k']}, {r['labels']} labels, {r['betas']} betas): label predictor "
        f"{r['label_predictor_wall_s']:.2f} s wall / {r['label_predictor_cpu_s']:.2f} s CPU, niche scores "
        f"{r['niche_scores_wall_s']:.2f} s wall / {r['niche_scores_cpu_s']:.2f} s CPU",
        flush=True,
    )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
