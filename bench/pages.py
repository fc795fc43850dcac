"""Script-run seconds of every page on a workspace, with Streamlit's AppTest.

Each page is opened as a link opens it (app.py's frame, then the page). `cold`: the
first run after st.cache_data and st.cache_resource are cleared (imports stay warm:
one process); `warm`: a rerun of the same session, caches filled. `switch`: after that, the
rerun that follows choosing the next option of a select box (another cluster, another
checkpoint), whose views are not cached yet: what a user waits for. The median of
`--repeat` measurements of each is printed, then the process's RSS: after all pages,
its peak, and, with `--browse N`, before and after visiting N clusters of the Clusters
page in one session (the server's caches must keep that bounded). Nothing is asserted:
compare a demo run with a scale run (`conceptlens demo scale`). `sent MB`: the
element messages of a warm rerun (what the browser receives, charts included).

    nice -n 19 .venv/bin/python bench/pages.py --workspace data/demo [--repeat 5] \\
        [--page clusters] [--query clusters:k=224] [--switch clusters:clusters_cluster] \\
        [--browse 100] [--out pages.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from apptest import open_page, run_once, sent  # noqa: E402  (bench/ is this script's folder)

# The select boxes switched by default: what a user changes most on each page.
SWITCHES = {
    "clusters": ("clusters_cluster", "clusters_ckpt"),
    "checkpoints": ("ckpts_a", "ckpts_k"),
}


def rss_mb() -> float:
    """This process's resident memory now (Linux), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 2**10
    return float("nan")


def switch(at, key: str, step: int = 1) -> tuple[float, float] | None:
    """Choose the option `step` places after the current one of select box `key` and
    rerun; None when the page has no such box or it has a single option."""
    boxes = [b for b in at.selectbox if b.key == key]
    if not boxes or len(boxes[0].options) < 2:
        return None
    box = boxes[0]
    box.select_index(((box.index or 0) + step) % len(box.options))
    return run_once(at)


def _median(pairs, i):
    got = [p[i] for p in pairs if p is not None]
    return statistics.median(got) if got else None


def measure(page, workspace: str, query: dict, repeat: int, switches=()) -> dict:
    cold, warm, errors = [], [], []
    switched = {key: [] for key in switches}
    for _ in range(repeat):
        at = open_page(workspace, page.path, query)
        cold.append(run_once(at))
        warm.append(run_once(at))
        sent_bytes = sent(at)["elements_bytes"]
        errors = [e.message for e in at.exception] + [e.value for e in at.error]
        for key in switches:
            try:
                switched[key].append(switch(at, key))
            except ValueError as e:  # AppTest cannot always read back a select box's state
                errors.append(f"switch {key}: AppTest: {e}")
                break
            errors += [e.message for e in at.exception] + [e.value for e in at.error]
    return {
        "page": page.name,
        "cold_wall": statistics.median(r[0] for r in cold),
        "cold_cpu": statistics.median(r[1] for r in cold),
        "cold_script": statistics.median(r[2] for r in cold),
        "warm_wall": statistics.median(r[0] for r in warm),
        "warm_cpu": statistics.median(r[1] for r in warm),
        "warm_script": statistics.median(r[2] for r in warm),
        "bytes_per_rerun": sent_bytes,
        "switch": {
            key: {"wall": _median(v, 0), "cpu": _median(v, 1), "script": _median(v, 2)}
            for key, v in switched.items()
            if any(v)
        },
        "errors": errors[:3],
    }


def browse(workspace: str, query: dict, n: int) -> dict:
    """RSS before and after visiting `n` clusters, one after another, in one session."""
    from components import nav

    at = open_page(workspace, nav.BY_NAME["clusters"].path, query, clear=False)
    at.run()
    before, seconds = rss_mb(), []
    for _ in range(n):
        step = switch(at, "clusters_cluster")
        if step is None:
            break
        seconds.append(step[0])
    return {
        "clusters": len(seconds),
        "rss_before_mb": before,
        "rss_after_mb": rss_mb(),
        "median_wall": statistics.median(seconds) if seconds else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--page", action="append", help="only these pages (by name; repeatable)")
    ap.add_argument("--query", action="append", default=[], help="PAGE:KEY=VALUE URL parameter")
    ap.add_argument(
        "--switch",
        action="append",
        default=[],
        help="PAGE:KEY select box to switch (repeatable; default: the clusters and checkpoints ones)",
    )
    ap.add_argument("--browse", type=int, default=0, help="then visit this many clusters in one session")
    ap.add_argument("--out", help="write the numbers as JSON here")
    args = ap.parse_args()
    os.chdir(ROOT)
    from components import nav

    queries: dict[str, dict] = {}
    for q in args.query:
        page, _, kv = q.partition(":")
        key, _, value = kv.partition("=")
        queries.setdefault(page, {})[key] = value
    switches: dict[str, list[str]] = {}
    for sw in args.switch:
        page, _, key = sw.partition(":")
        switches.setdefault(page, []).append(key)
    pages = [p for p in nav.PAGES if not args.page or p.name in args.page]
    workspace = str(Path(args.workspace).resolve())
    print(f"{args.workspace}: median of {args.repeat}; seconds (wall / cpu)")
    head = ("cold wall", "cold cpu", "warm wall", "warm cpu", "sent MB")
    print(f"{'page':<14s} " + " ".join(f"{h:>{max(len(h), 8)}s}" for h in head))
    rows = []
    for page in pages:
        keys = switches.get(page.name, SWITCHES.get(page.name, ()) if not args.switch else ())
        r = measure(page, workspace, queries.get(page.name, {}), args.repeat, keys)
        rows.append(r)
        print(
            f"{r['page']:<14s} {r['cold_wall']:10.2f} {r['cold_cpu']:9.2f} {r['warm_wall']:10.2f} "
            f"{r['warm_cpu']:9.2f} {r['bytes_per_rerun'] / 1e6:8.2f}"
            + (f"   errors: {r['errors']}" if r["errors"] else ""),
            flush=True,
        )
        for key, t in r["switch"].items():
            print(
                f"  switch {key:<22s} {'':>20s} {t['wall']:10.2f} {t['cpu']:9.2f}"
                f"  (script {t['script']:.2f})",
                flush=True,
            )
    out = {"workspace": args.workspace, "pages": rows, "rss_mb": rss_mb()}
    print(f"RSS of this process after the pages {out['rss_mb']:.0f} MB")
    if args.browse:
        out["browse"] = b = browse(workspace, queries.get("clusters", {}), args.browse)
        print(
            f"browsing {b['clusters']} clusters in one session: RSS {b['rss_before_mb']:.0f} -> "
            f"{b['rss_after_mb']:.0f} MB, median {b['median_wall']:.2f} s wall per switch"
        )
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"peak RSS of this process {out['peak_rss_mb']:.0f} MB")
    if args.out:
        Path(args.out).write_text(json.dumps(out))


if __name__ == "__main__":
    main()
