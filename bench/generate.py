"""Time `conceptlens demo scale`: its data stages, then each analysis, and the size on disk.

    nice -n 19 .venv/bin/python bench/generate.py --images 50000 --checkpoints 28 --dim 512 \\
        --out /tmp/scale-50k [--analyses all] [--json gen.json]

The data (images, thumbnails, captions, features) is written first with `--analyses
none`, then every analysis runs through the runner as `conceptlens analyze all` does
(in dependency order), each timed on its own. Wall and CPU seconds (all threads).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def timed(fn, *a, **kw) -> tuple[object, float, float]:
    t, c = time.perf_counter(), time.process_time()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t, time.process_time() - c


def disk(root: Path) -> tuple[int, int]:
    """(bytes, files) under root."""
    size = files = 0
    for d, _, names in os.walk(root):
        for n in names:
            size += os.path.getsize(os.path.join(d, n))
            files += 1
    return size, files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=50_000)
    ap.add_argument("--checkpoints", type=int, default=28)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--out", required=True, help="workspace folder (must not exist)")
    ap.add_argument("--analyses", default="all", help="all, none or a comma-separated list")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the numbers as JSON here")
    args = ap.parse_args()
    from conceptlens.analysis import registered, runner
    from conceptlens.demo.scale import build_scale

    out = Path(args.out)
    if out.exists():
        raise SystemExit(f"{out} exists: give a new folder")
    rows = []
    _, w, c = timed(
        build_scale,
        out,
        n_images=args.images,
        n_checkpoints=args.checkpoints,
        dim=args.dim,
        seed=args.seed,
        analyses="none",
        progress=False,
    )
    rows.append(("data (images, thumbnails, captions, features)", w, c))
    print(f"{rows[-1][0]:<48s} wall {w:8.1f} s  cpu {c:8.1f} s", flush=True)
    if args.analyses != "none":
        names = runner.in_order(
            [a.name for a in registered()] if args.analyses == "all" else args.analyses.split(",")
        )
        for a in names:
            _, w, c = timed(runner.run, out, a.name, {"seed": args.seed}, progress_bars=False)
            rows.append((f"analyze {a.name}", w, c))
            print(f"{rows[-1][0]:<48s} wall {w:8.1f} s  cpu {c:8.1f} s", flush=True)
    size, files = disk(out)
    total_w, total_c = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{'total':<48s} wall {total_w:8.1f} s  cpu {total_c:8.1f} s")
    print(f"{out}: {size / 2**30:.2f} GiB in {files} files")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "images": args.images,
                    "checkpoints": args.checkpoints,
                    "dim": args.dim,
                    "stages": [{"stage": s, "wall": w, "cpu": c} for s, w, c in rows],
                    "bytes": size,
                    "files": files,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
