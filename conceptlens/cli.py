"""The `conceptlens` command line.

Each command lives in its own module, which exposes `register(subparsers)`;
the module's handler is stored as the parser default `func(args) -> int`.
Heavy imports (torch, ...) happen inside handlers so `--help` stays fast.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from .workspace import WorkspaceError

# Modules that add subcommands after the core ones (validate, demo), in --help order.
COMMAND_MODULES: tuple[str, ...] = (
    "conceptlens.extract",
    "conceptlens.captioners",
    "conceptlens.analysis.clusters",
)


def _validate(args) -> int:
    from .validate import format_problems, summary_json, validate
    problems = validate(args.path)
    if args.json:
        print(summary_json(problems))
    elif problems:
        print(f"{args.path}: {len(problems)} problem(s)")
        print(format_problems(problems))
    else:
        print(f"{args.path}: valid workspace")
    return 1 if problems else 0


def _demo_build(args) -> int:
    from .demo.build import build
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    build(args.out, seed=args.seed, stages=stages, progress=not args.quiet)
    print(f"demo workspace written to {args.out}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("validate", help="check a workspace; exit 1 if it has problems")
    p.add_argument("path", help="workspace folder")
    p.add_argument("--json", action="store_true", help="print problems as JSON")
    p.set_defaults(func=_validate)

    demo = sub.add_parser("demo", help="the bundled demo workspace")
    dsub = demo.add_subparsers(dest="demo_command", required=True)
    b = dsub.add_parser("build", help="build data/demo deterministically from a seed")
    b.add_argument("--out", default="data/demo", help="output folder (default data/demo)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--stages", default="data,models,analysis",
                   help="comma-separated stages to run (data, models, analysis)")
    b.add_argument("--quiet", action="store_true", help="no progress bars")
    b.set_defaults(func=_demo_build)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="conceptlens", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    register(sub)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except (WorkspaceError, ValueError, FileNotFoundError) as e:
        print(f"conceptlens: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("conceptlens: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
