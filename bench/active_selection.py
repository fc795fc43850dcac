"""Active against random trial selection on the demo's simulated people (roads2021 4.3).

Both strategies collect the same number of 8-rank-2 trials per round from one simulated
agent whose answers follow the demo's generating embedding of the shapes images
(conceptlens/demo/similarity.py); the ensemble is inferred again after every round. The
curves: recovery of the generating similarities (Spearman, all pairs and fine-grained
pairs) and the convergence measures, against trials collected.

    python bench/active_selection.py [--workspace data/demo] [--stimuli 300] [--rounds 8]
        [--per-round 400] [--seeds 0 1] [--out bench/results/active_selection.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from conceptlens.demo.similarity import generating_embedding, stimuli
from conceptlens.embedding.active import simulate_rounds
from conceptlens.workspace import Workspace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", default="data/demo")
    ap.add_argument("--stimuli", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--per-round", type=int, default=400)
    ap.add_argument("--members", type=int, default=3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--random-rounds", type=int, default=1, help="random rounds before active selection")
    ap.add_argument("--out", default="bench/results/active_selection.json")
    a = ap.parse_args()
    images = Workspace(a.workspace).read("images").to_pandas()
    rows = []
    t0, c0 = time.perf_counter(), time.process_time()
    for seed in a.seeds:
        Z = generating_embedding(stimuli(images, seed, a.stimuli), seed)
        for strategy in ("random", "active"):
            for r in simulate_rounds(
                Z,
                strategy,
                a.rounds,
                a.per_round,
                members=a.members,
                random_state=seed,
                n_candidates=100,
                random_rounds=a.random_rounds,
            ):
                rows.append({"seed": seed, **r})
                print(
                    f"seed {seed} {strategy:6s} trials {r['n_trials']:5d}  recovery {r['recovery']:.3f}"
                    f"  fine {r['fine_recovery']:.3f}  coarse loss {r['coarse_loss']:.3f}"
                    f"  within {r['within_agreement']:.3f}",
                    flush=True,
                )
    summary = {
        "stimuli": a.stimuli,
        "rounds": a.rounds,
        "per_round": a.per_round,
        "members": a.members,
        "random_rounds": a.random_rounds,
        "seeds": a.seeds,
        "wall_s": round(time.perf_counter() - t0, 1),
        "cpu_s": round(time.process_time() - c0, 1),
        "rows": rows,
    }
    for strategy in ("random", "active"):
        last = [r for r in rows if r["strategy"] == strategy and r["round"] == a.rounds - 1]
        summary[f"{strategy}_final_recovery"] = float(np.mean([r["recovery"] for r in last]))
        summary[f"{strategy}_final_fine_recovery"] = float(np.mean([r["fine_recovery"] for r in last]))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out + ".tmp"
    Path(tmp).write_text(json.dumps(summary, indent=1))
    os.replace(tmp, a.out)
    print({k: v for k, v in summary.items() if k != "rows"})


if __name__ == "__main__":
    main()
