"""The scoreboard at scale: a workspace of n images with every source, the analyses timed,
then the Scoreboard page opened cold in headless Chromium (bench/cold_page.py).

The features are generated (10 labels, a Gaussian mixture through a ReLU: non-negative, so
every dictionary method runs), one checkpoint; `dictionary` (4 methods, --atoms atoms,
stability refits included) and `scoreboard` (every channel as a unit, --directions random
directions, the atoms, the labels) are run by the runner, each timed; the concept count
is printed. Then

    nice -n 10 .venv/bin/python bench/cold_page.py --workspace W --page scoreboard

times the page cold (navigation to the first chart drawn) on it.

    .venv/bin/python bench/scoreboard.py --out /tmp/sb50k [--n 50000] [--dim 128] \\
        [--directions 700] [--atoms 32]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from conceptlens import schema  # noqa: E402
from conceptlens.analysis import runner  # noqa: E402
from conceptlens.workspace import Workspace, atomic_write_bytes  # noqa: E402

# An 8 x 8 grey PNG every image shares as its thumbnail.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000008000000080800000000e164e157000000"
    "0f4944415478da63f8ffff3f0305a080000018e0fd01c6c5d0c20000000049454e44ae426082"
)


def build(root: Path, n: int, dim: int, seed: int = 0) -> Workspace:
    g = np.random.default_rng(seed)
    ws = Workspace.create(root, name=f"scoreboard-{n}", provenance={"generator": "bench/scoreboard.py"})
    atomic_write_bytes(ws.root / "thumbnails" / "grey.png", PNG)
    labels = g.integers(0, 10, n)
    ids = [f"img-{i:06d}" for i in range(n)]
    images = pa.table(
        {
            "image_id": ids,
            "dataset": ["synthetic"] * n,
            "label": labels.astype(np.int64),
            "label_name": [f"class {c}" for c in labels],
            "split": np.where(np.arange(n) % 5 == 4, "test", "train").tolist(),
            "thumbnail": ["thumbnails/grey.png"] * n,
            "width": np.full(n, 8, np.int64),
            "height": np.full(n, 8, np.int64),
            "source_path": pa.nulls(n, pa.string()),
        }
    )
    ws.write("images", images.cast(schema.arrow_schema("images")))
    centers = g.standard_normal((10, dim)) * 2
    X = np.maximum(0, centers[labels] + g.standard_normal((n, dim))).astype(np.float32)
    emb = pa.FixedSizeListArray.from_arrays(pa.array(X.ravel(), pa.float32()), dim)
    feats = pa.table({"image_id": ids, "embedding": emb.cast(pa.list_(pa.float32()))})
    ws.write("features", feats.cast(schema.arrow_schema("features", partition=False)), checkpoint_id="ck")
    ck = {
        "checkpoint_id": "ck",
        "dataset": "synthetic",
        "model": "synthetic",
        "method": "generated",
        "epoch": None,
        "feature_dim": dim,
        "source": "generated:relu-mixture",
    }
    ws.write("checkpoints", pa.Table.from_pylist([ck], schema=schema.arrow_schema("checkpoints")))
    xy = g.standard_normal((n, 2)) + centers[labels, :2]
    proj = pa.table({"image_id": ids, "x": xy[:, 0], "y": xy[:, 1]})
    ws.write(
        "projections",
        proj.cast(schema.arrow_schema("projections", partition=False)),
        checkpoint_id="ck",
        method="umap",
    )
    return ws


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder of the workspace (made)")
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--atoms", type=int, default=32)
    ap.add_argument("--directions", type=int, default=700)
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument(
        "--methods", nargs="+", default=["auto"], help="dictionary methods (`analyze dictionary`)"
    )
    ap.add_argument(
        "--no-stability", action="store_true", help="no stability refits (a third of the fit time)"
    )
    args = ap.parse_args()
    t0 = time.perf_counter()
    ws = build(Path(args.out), args.n, args.dim)
    times = {"build_s": time.perf_counter() - t0}
    opts = {"atoms": args.atoms, "directions": args.directions, "bootstrap": args.bootstrap}
    opts |= {"methods": args.methods, "stability": not args.no_stability}
    for name in ("dictionary", "scoreboard"):
        t0 = time.perf_counter()
        runner.run(ws.root, [name], opts, progress_bars=True, with_dependencies=False)
        times[f"{name}_s"] = time.perf_counter() - t0
    concepts = sum(ws.read("scoreboard_concepts", checkpoint_id="ck")["scored"].to_pylist())
    print(json.dumps({"n": args.n, "dim": args.dim, "scored_concepts": concepts, **times}, indent=1))


if __name__ == "__main__":
    main()
