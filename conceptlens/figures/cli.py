"""`conceptlens figures`: the catalog's figures written for a paper (conceptlens/figures/catalog.py;
each page's figures in conceptlens/figures/specs/, the --spec file read by spec_file.py).

Imports are inside the handler so that `conceptlens --help` stays light.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..errors import ConceptLensError


# ---- the command -------------------------------------------------------------------------------------
def _list(db) -> str:
    from .catalog import Unavailable, by_page

    lines = []
    for page, figs in by_page().items():
        lines.append(f"{page}:")
        for f in figs:
            try:
                params = f.resolve(db)
                shown = ", ".join(f"{k}={v}" for k, v in params.items())
            except (Unavailable, ConceptLensError) as e:
                shown = f"unavailable here: {e}"
            lines.append(f"  {f.name:<24} {f.title}  [{shown}]")
    return "\n".join(lines)


def _figures(args) -> int:
    from ..db import WorkspaceDB  # local: the command's own, so --help stays light
    from ..remote import workspace_at  # local: the command's own, so --help stays light
    from .catalog import FIGURES, PAPER_FORMATS, Job, render_jobs
    from .export import parse_width
    from .spec_file import jobs_from_spec, load_spec, parse_formats

    db = WorkspaceDB(args.workspace)
    if args.list:
        print(_list(db))
        return 0
    if not args.out:
        raise ConceptLensError("--out DIR is required (or --list to see the catalog)")
    spec = load_spec(args.spec) if args.spec else {}
    jobs = jobs_from_spec(spec, args.spec) if args.spec else [Job(f) for f in FIGURES.values() if f.default]
    width = parse_width(args.width or spec.get("width", "double"))
    formats = parse_formats(args.format or spec.get("formats", PAPER_FORMATS))
    fp = workspace_at(args.workspace).fingerprint()
    t0 = time.perf_counter()
    m = render_jobs(db, jobs, Path(args.out), args.workspace, fp, width, formats, progress=not args.quiet)
    n = len({(f["figure"], json.dumps(f["params"], sort_keys=True, default=str)) for f in m["files"]})
    skipped = ", ".join(f"{s['figure']} ({s['reason']})" for s in m["skipped"])
    print(
        f"{n} figures, {len(m['files'])} files in {args.out} ({time.perf_counter() - t0:.1f} s); "
        f"manifest: {Path(args.out) / 'manifest.json'}" + (f"; skipped: {skipped}" if skipped else "")
    )
    return 0


def register(sub, parents) -> None:
    p = sub.add_parser(
        "figures",
        parents=parents,
        help="write the dashboard's figures for a paper (PDF/SVG/PNG with provenance)",
        description="Draw the pages' figures headless, from the same views and figure functions "
        "the dashboard uses, and write them with a manifest.json of every file and its provenance.",
    )
    p.add_argument("--out", help="output folder")
    p.add_argument("--spec", help="TOML file of [[figure]] entries (default: every page's default figures)")
    p.add_argument("--format", help="comma-separated formats: pdf, svg, png, html (default pdf,svg,png)")
    p.add_argument("--width", help="single (3.5 in), double (7 in) or a width in inches (default double)")
    p.add_argument("--list", action="store_true", help="list the catalog's figures and their defaults here")
    p.set_defaults(func=_figures)
