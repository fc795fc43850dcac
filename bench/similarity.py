"""Time `conceptlens analyze similarity` at ImageNet-HSJ's two sizes (roads2021 Table 1).

seed: 1,000 stimuli / 25,000 trials; full: 50,000 stimuli / 384,000 trials (8-rank-2).
A synthetic workspace is written first (untimed): stimuli in 100 Gaussian classes of an
8-d generating embedding, trials answered from the rank likelihood (2 references from the
query's class, 6 at random, as active selection favours near neighbours), and two 64-d
checkpoints to score (the generating embedding plus noise; pure noise). Then the analysis
runs with its defaults (fit progress bars on stderr) and the wall and CPU times, the
selected dimensionality, the held-out scores and the recovery of the generating
similarities (Spearman, on a sample of 1,000 stimuli) are printed and written as JSON.

    nice .venv/bin/python bench/similarity.py --size seed [--size full] [--screen-members 1]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conceptlens import schema  # noqa: E402
from conceptlens.metrics import similarity as S  # noqa: E402
from conceptlens.workspace import Workspace, atomic_write_bytes  # noqa: E402

SIZES = {"seed": (1_000, 25_000), "full": (50_000, 384_000)}
DIM, CLASSES, FEATURE_DIM = 8, 100, 64


def build(root: Path, n: int, m: int, seed: int = 0) -> np.ndarray:
    """The synthetic workspace; returns the generating embedding."""
    import io

    from PIL import Image

    rng = np.random.default_rng(seed)
    ws = Workspace.create(root, name="bench-similarity", created="2026-01-01T00:00:00+00:00")
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (128, 128, 128)).save(buf, format="PNG")
    atomic_write_bytes(root / "thumbnails" / "x.png", buf.getvalue(), fsync=False)
    label = rng.integers(0, CLASSES, n)
    centres = rng.normal(0, 0.25, (CLASSES, DIM))
    Z = centres[label] + rng.normal(0, 0.05, (n, DIM))
    ids = [f"b-{i:06d}" for i in range(n)]
    ws.write(
        "images",
        pa.table(
            {
                "image_id": ids,
                "dataset": ["bench"] * n,
                "label": label.astype(np.int64),
                "label_name": [f"class {c}" for c in label],
                "split": ["train"] * n,
                "thumbnail": ["thumbnails/x.png"] * n,
                "width": np.full(n, 8),
                "height": np.full(n, 8),
            }
        ),
    )
    members = [np.flatnonzero(label == c) for c in range(CLASSES)]
    q = rng.integers(0, n, m)
    refs = np.empty((m, 8), np.int64)
    for t in range(m):
        near = members[label[q[t]]]
        near = near[near != q[t]]
        a = rng.choice(near, min(2, len(near)), replace=False)
        b = rng.choice(n, 8 - len(a) + 4, replace=False)
        b = [x for x in b if x != q[t] and x not in a][: 8 - len(a)]
        refs[t] = np.concatenate([a, b])
    stim = S.sample_choices(Z, q, refs, 2, 10.0, rng)
    names = np.asarray(ids, dtype=object)
    split = np.where(rng.random(m) < 0.1, "test", "train")
    ws.append(
        "similarity_trials",
        pa.table(
            {
                "trial_id": [f"t{t:07d}" for t in range(m)],
                "agent_id": [f"a{t % 500}" for t in range(m)],
                "query": names[stim[:, 0]].tolist(),
                "references": [list(names[r]) for r in refs],
                "chosen": [list(names[r]) for r in stim[:, 1:3]],
                "n_select": np.full(m, 2),
                "kind": ["8rank2"] * m,
                "weight": np.ones(m),
                "rt_ms": np.full(m, 8000.0),
                "split": split.tolist(),
                "is_catch": np.zeros(m, bool),
            },
            schema=schema.arrow_schema("similarity_trials", partition=False),
        ),
        dataset="bench",
    )
    ck = []
    proj = rng.normal(size=(DIM, FEATURE_DIM))
    for cid, X in (
        ("bench-aligned", Z @ proj + rng.normal(0, 0.5, (n, FEATURE_DIM))),
        ("bench-noise", rng.normal(size=(n, FEATURE_DIM))),
    ):
        ws.write(
            "features",
            pa.table(
                {"image_id": ids, "embedding": pa.array(list(X.astype(np.float32)), pa.list_(pa.float32()))}
            ),
            checkpoint_id=cid,
        )
        ck.append(
            {
                "checkpoint_id": cid,
                "dataset": "bench",
                "model": "synthetic",
                "method": "bench",
                "epoch": None,
                "feature_dim": FEATURE_DIM,
                "source": "bench",
            }
        )
    ws.write(
        "checkpoints",
        pa.Table.from_pylist(
            ck, schema=pa.schema([f for f in schema.arrow_schema("checkpoints") if f.name in ck[0]])
        ),
    )
    return Z


def run(size: str, options: dict, keep: Path | None) -> dict:
    from conceptlens.analysis import runner
    from conceptlens.embedding.psych import ensemble_similarity, read_embedding

    n, m = SIZES[size]
    root = Path(keep) / size if keep else Path(tempfile.mkdtemp(prefix=f"bench-sim-{size}-")) / "ws"
    t0 = time.perf_counter()
    Z = build(root, n, m)
    built = time.perf_counter() - t0
    print(f"{size}: workspace of {n:,} stimuli / {m:,} trials written in {built:.0f} s ({root})", flush=True)
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    runner.run(root, "similarity", options, progress_bars=True)
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    ws = Workspace(root)
    fit = ws.read("similarity_fit", dataset="bench").to_pandas()
    kept = fit[fit["selected"]]
    ids, members = read_embedding(ws, "bench")
    pos = np.array([int(i[2:]) for i in ids])
    sample = np.sort(np.random.default_rng(1).choice(len(ids), min(1000, len(ids)), replace=False))
    truth = np.exp(-10 * np.linalg.norm(Z[pos[sample]][:, None] - Z[pos[sample]][None], axis=-1))
    got = ensemble_similarity([(mu[sample], s[sample]) for mu, s in members])
    h = ws.read("human_alignment", dataset="bench").to_pandas()
    overall = h[h["label"].isna() & (h["distance"] == "cosine")]
    out = {
        "size": size,
        "stimuli": n,
        "trials": m,
        "options": options,
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "fit_seconds": round(float(fit["seconds"].sum()), 1),
        "fits": len(fit),
        "epochs": fit["epochs"].tolist(),
        "selected_dim": int(kept["dim"].iloc[0]),
        "heldout_loglik": round(float(kept["heldout_loglik"].mean()), 4),
        "heldout_accuracy": round(float(kept["heldout_accuracy"].mean()), 4),
        "recovery_spearman": round(S.rsa(got, truth), 4),
        "agreement": {f"{r.checkpoint_id}/{r.metric}": round(r.value, 4) for r in overall.itertuples()},
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(out, indent=1), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", action="append", choices=list(SIZES), help="seed and/or full (default seed)")
    ap.add_argument(
        "--screen-members",
        type=int,
        default=0,
        help="members fitted at every candidate dimensionality (0 = all, the default)",
    )
    ap.add_argument("--dims", type=int, nargs="+", help="candidate dimensionalities (default: the analysis')")
    ap.add_argument("--keep", help="write the workspaces under this folder (default: a temporary one)")
    ap.add_argument("--out", default=None, help="append the results as JSON lines to this file")
    args = ap.parse_args()
    opts = {"screen_members": args.screen_members, **({"dims": args.dims} if args.dims else {})}
    for size in args.size or ["seed"]:
        res = run(size, opts, Path(args.keep) if args.keep else None)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
