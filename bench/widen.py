"""Widen a `demo scale` workspace to more checkpoints for timing pages, without running
every analysis again: each new checkpoint of `checkpoint_plan(C)` gets the partitions
(features, clusters, metrics, projections, ...) of the source checkpoint of its method,
as hard links (partition values live in folder names, so the files are the same bytes).
Then the comparisons between checkpoints are computed for real, over every pair.

The copies are the same clustering under other names (their aNMI is 1), so this
workspace is for page timing only, never for findings.

    nice -n 19 .venv/bin/python bench/widen.py --source /tmp/scale-50k-4 --checkpoints 28 \\
        --out /tmp/scale-50k-28
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# Tables between checkpoints, recomputed by `analyze comparisons` over the new set.
COMPARED = (
    "clid_scores",
    "predictor_correlations",
    "clustering_similarity",
    "cluster_links",
    "transfer_correlations",
)


def link_tree(src: Path, dst: Path) -> None:
    for d, _, names in os.walk(src):
        out = dst / Path(d).relative_to(src)
        out.mkdir(parents=True, exist_ok=True)
        for n in names:
            os.link(Path(d) / n, out / n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="a `conceptlens demo scale` workspace")
    ap.add_argument("--checkpoints", type=int, default=28)
    ap.add_argument("--out", required=True, help="new workspace folder (must not exist)")
    ap.add_argument("--no-comparisons", action="store_true", help="leave the comparisons out")
    args = ap.parse_args()
    import pyarrow as pa
    import pyarrow.parquet as pq

    from conceptlens import schema
    from conceptlens.analysis import runner
    from conceptlens.demo.scale import checkpoint_plan

    src, out = Path(args.source), Path(args.out)
    if out.exists():
        raise SystemExit(f"{out} exists: give a new folder")
    ckpts = pq.read_table(src / "checkpoints.parquet").to_pylist()
    by_method = {c["method"]: c for c in ckpts}
    partitioned = {t.name for t in schema.TABLES if t.partition[:1] == ("checkpoint_id",)}
    out.mkdir(parents=True)
    for entry in src.iterdir():
        if entry.name in partitioned or entry.name in COMPARED or entry.name == "checkpoints.parquet":
            continue
        if entry.is_dir():
            link_tree(entry, out / entry.name)
        else:
            os.link(entry, out / entry.name)
    rows = []
    for plan in checkpoint_plan(args.checkpoints):
        source = by_method[plan["method"]]
        for table in partitioned:
            folder = src / table / f"checkpoint_id={source['checkpoint_id']}"
            if folder.is_dir():
                link_tree(folder, out / table / f"checkpoint_id={plan['checkpoint_id']}")
        rows.append(
            {
                **source,
                "checkpoint_id": plan["checkpoint_id"],
                "epoch": plan["epoch"],
                "source": f"copy of {source['checkpoint_id']} (bench/widen.py)",
            }
        )
    table = pa.Table.from_pylist(rows, schema=pq.read_schema(src / "checkpoints.parquet"))
    pq.write_table(table, out / "checkpoints.parquet")
    shutil.rmtree(out / "analysis_runs" / "analysis=comparisons", ignore_errors=True)
    if args.no_comparisons:
        return
    t, c = time.perf_counter(), time.process_time()
    runner.run(out, "comparisons", {}, progress_bars=False, with_dependencies=False)
    w, c = time.perf_counter() - t, time.process_time() - c
    print(f"{out}: {len(rows)} checkpoints; analyze comparisons wall {w:.1f} s cpu {c:.1f} s")


if __name__ == "__main__":
    main()
