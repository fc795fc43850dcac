"""Time `analyze clustering` + `cluster_metrics` with the local engine and with Ray.

    nice -n 19 .venv/bin/python bench/analysis_ray.py --images 5000 --checkpoints 4 --dim 256 \\
        --out /tmp/ray-bench [--workers 2] [--json ray.json]

Writes a `demo scale` workspace without analyses, then runs the two analyses on three
copies of it: the local engine as is (every thread), the local engine with `--threads 1`,
and Ray (`--workers` tasks of one thread), in this order. The Ray run's tables are compared with those
of the local `--threads 1` run (they must be equal). Ray's start is timed on its own (it
is paid once per command). Wall and CPU seconds of this process (Ray's workers are other
processes: their CPU time is not in the latter).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TABLES = ("clusters", "cluster_metrics", "checkpoint_metrics")


def analyze(root: Path, **kw) -> float:
    from conceptlens.analysis import runner

    t = time.perf_counter()
    for name in ("clustering", "cluster_metrics"):
        runner.run(root, name, {"seed": 0}, progress_bars=False, with_dependencies=False, **kw)
    return time.perf_counter() - t


def table(root: Path, name: str):
    import pyarrow.dataset as pads

    t = pads.dataset(root / name, format="parquet", partitioning="hive").to_table()
    keys = [c for c in ("checkpoint_id", "k", "cluster", "image_id") if c in t.column_names]
    return t.sort_by([(c, "ascending") for c in keys]).select(sorted(t.column_names))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=5000)
    ap.add_argument("--checkpoints", type=int, default=4)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--workers", type=int, help="Ray tasks at once (default: one per CPU)")
    ap.add_argument("--out", required=True, help="folder (must not exist)")
    ap.add_argument("--json", help="write the numbers as JSON here")
    args = ap.parse_args()
    import ray

    from conceptlens.demo.scale import build_scale
    from conceptlens.extract import ray_init

    out = Path(args.out)
    if out.exists():
        raise SystemExit(f"{out} exists: give a new folder")
    base = out / "base"
    size = {"n_images": args.images, "n_checkpoints": args.checkpoints, "dim": args.dim}
    build_scale(base, **size, analyses="none", progress=False)
    runs = {"local": {}, "local_threads1": {"threads": 1}, "ray": {"engine": "ray", "workers": args.workers}}
    for name in runs:
        shutil.copytree(base, out / name)
    res = dict(size)
    for name, kw in runs.items():
        if name == "ray":  # started last: Ray's idle processes would slow the local runs
            t = time.perf_counter()
            ray_init(ray)
            res["ray_start_s"] = round(time.perf_counter() - t, 1)
            res["ray_cpus"] = int(ray.cluster_resources().get("CPU", 0))
        res[f"{name}_s"] = round(analyze(out / name, **kw), 1)
        print(f"{name}: {res[f'{name}_s']} s", flush=True)
    ray.shutdown()
    res["ray_equals_local_threads1"] = all(
        table(out / "ray", n).equals(table(out / "local_threads1", n)) for n in TABLES
    )
    res["ray_equals_local"] = all(table(out / "ray", n).equals(table(out / "local", n)) for n in TABLES)
    print(json.dumps(res, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
