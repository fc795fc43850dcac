"""Script-run seconds of every page on a workspace, with Streamlit's AppTest.

Each page is opened as a link opens it (app.py's frame, then the page). `cold`: the
first run after st.cache_data and st.cache_resource are cleared (imports stay warm:
one process); `warm`: a rerun of the same session, caches filled. The median of
`--repeat` measurements of each is printed with the process's peak RSS. Nothing is
asserted: compare a demo run with a scale run (`conceptlens demo scale`).

    nice -n 19 .venv/bin/python bench/pages.py --workspace data/demo [--repeat 5] \\
        [--page clusters] [--query clusters:k=224] [--out pages.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def run_once(at) -> tuple[float, float]:
    t, c = time.perf_counter(), time.process_time()
    at.run()
    return time.perf_counter() - t, time.process_time() - c


def measure(page, workspace: str, query: dict, repeat: int) -> dict:
    import streamlit as st
    from streamlit import logger
    from streamlit.testing.v1 import AppTest

    # Clearing caches outside a server, and AppTest's bare mode, log warnings: not ours.
    logger.set_log_level("error")

    sys.argv = ["app.py", "--workspace", workspace]  # reruns read it again
    cold, warm, errors = [], [], []
    for _ in range(repeat):
        st.cache_data.clear()
        st.cache_resource.clear()
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        for k, v in query.items():
            at.query_params[k] = v
        at.switch_page(page.path)
        cold.append(run_once(at))
        warm.append(run_once(at))
        errors = [e.message for e in at.exception] + [e.value for e in at.error]
    return {
        "page": page.name,
        "cold_wall": statistics.median(w for w, _ in cold),
        "cold_cpu": statistics.median(c for _, c in cold),
        "warm_wall": statistics.median(w for w, _ in warm),
        "warm_cpu": statistics.median(c for _, c in warm),
        "errors": errors[:3],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--page", action="append", help="only these pages (by name; repeatable)")
    ap.add_argument("--query", action="append", default=[], help="PAGE:KEY=VALUE URL parameter")
    ap.add_argument("--out", help="write the numbers as JSON here")
    args = ap.parse_args()
    os.chdir(ROOT)
    from components import nav

    queries: dict[str, dict] = {}
    for q in args.query:
        page, _, kv = q.partition(":")
        key, _, value = kv.partition("=")
        queries.setdefault(page, {})[key] = value
    pages = [p for p in nav.PAGES if not args.page or p.name in args.page]
    print(f"{args.workspace}: median of {args.repeat}; seconds (wall / cpu)")
    print(f"{'page':<14s} {'cold wall':>10s} {'cold cpu':>9s} {'warm wall':>10s} {'warm cpu':>9s}")
    rows = []
    for page in pages:
        r = measure(page, str(Path(args.workspace).resolve()), queries.get(page.name, {}), args.repeat)
        rows.append(r)
        print(
            f"{r['page']:<14s} {r['cold_wall']:10.2f} {r['cold_cpu']:9.2f} {r['warm_wall']:10.2f} "
            f"{r['warm_cpu']:9.2f}" + (f"   errors: {r['errors']}" if r["errors"] else ""),
            flush=True,
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"peak RSS of this process {peak:.0f} MB")
    if args.out:
        Path(args.out).write_text(
            json.dumps({"workspace": args.workspace, "pages": rows, "peak_rss_mb": peak})
        )


if __name__ == "__main__":
    main()
