"""The `conceptlens` command line.

Each command lives in its own module, which exposes `register(subparsers, parents)`;
the module's handler is stored as the parser default `func(args) -> int`. Every command
that reads or writes a workspace names it `--workspace W`; that option and the others
several commands share (`--quiet`, `--engine`, `--seed`) are declared once, in
`conceptlens.cliargs`, with the one-release aliases of the old positional form. Heavy
imports (torch, ...) happen inside handlers so `--help` and `validate` stay light:
`conceptlens validate` runs with only requirements.txt installed.
Errors: a `ConceptLensError` (or bad input: ValueError, OSError) is one line on stderr
and exit 1; a traceback only with `--debug`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from pathlib import Path

from . import __version__
from .cliargs import Parser, add_seed, add_workspace, quiet_parent, workspace_parent
from .errors import ConceptLensError, SelectionError

# Modules that add subcommands after the core ones, in --help order.
COMMAND_MODULES: tuple[str, ...] = (
    "conceptlens.importers.cli",
    "conceptlens.extract",
    "conceptlens.captioners",
    "conceptlens.analysis.cli",
    "conceptlens.figures.cli",
    "conceptlens.report",
    "conceptlens.studies.cli",
    "conceptlens.selections",
)


def _validate(args) -> int:
    from .validate import (  # local: the command's own, so --help stays light
        format_problems,
        summary_json,
        validate,
    )

    problems = validate(args.workspace)
    if args.json:
        print(summary_json(problems))
    elif problems:
        print(f"{args.workspace}: {len(problems)} problem(s)")
        print(format_problems(problems))
    else:
        print(f"{args.workspace}: valid workspace")
    return 1 if problems else 0


def _info(args) -> int:
    from .info import render, summary  # local: the command's own, so --help stays light

    print(render(summary(args.workspace, analyses=not args.no_analyses), as_json=args.json))
    return 0


def _migrate(args) -> int:
    from .migrate import migrate  # local: the command's own, so --help stays light

    done = migrate(args.workspace, progress=not args.quiet)
    print(f"{args.workspace}: " + ("; ".join(done) if done else "already in the current format"))
    return 0


def _demo_stages(text: str) -> list[str]:
    """`--stages a,b`, checked when the arguments are parsed (not after the first stages ran)."""
    from .demo.build import STAGES

    stages = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in stages if s not in STAGES]
    if bad or not stages:
        raise argparse.ArgumentTypeError(
            f"{', '.join(map(repr, bad)) or repr(text)}: not a stage; choose from {', '.join(STAGES)}"
        )
    return stages


def _demo_build(args) -> int:
    from .demo.build import build

    build(args.workspace, seed=args.seed, stages=args.stages, progress=not args.quiet)
    print(f"demo workspace written to {args.workspace}")
    return 0


def _demo_scale(args) -> int:
    from .demo.scale import build_scale

    analyses = [a.strip() for a in args.analyses.split(",") if a.strip()]
    build_scale(
        args.workspace,
        n_images=args.images,
        n_checkpoints=args.checkpoints,
        dim=args.dim,
        n_classes=args.classes,
        seed=args.seed,
        analyses="all" if analyses == ["all"] else analyses,
        progress=not args.quiet,
    )
    print(f"scale workspace written to {args.workspace}")
    return 0


def _factor_value(text: str) -> tuple[str, str]:
    col, eq, value = text.partition("=")
    if not eq or not col:
        raise argparse.ArgumentTypeError(f"{text!r}: expected column=value")
    return col, value


def _score(args) -> int:
    from .db import WorkspaceDB  # local: the command's own, so --help stays light
    from .selections import read_ids  # local: the command's own, so --help stays light
    from .views import selection

    db = WorkspaceDB(args.workspace)
    try:
        if args.caption is not None:  # the images with a caption containing the text
            if args.across is not None:
                dataset = args.across
            else:
                found = db.query(
                    "SELECT dataset FROM checkpoints WHERE checkpoint_id = $c", {"c": args.checkpoint}
                )
                if found.empty:
                    raise SelectionError(f"checkpoints.parquet has no checkpoint {args.checkpoint!r}")
                dataset = str(found["dataset"].iloc[0])
            ids = selection.captioned_ids(db, dataset, args.caption, captioner=args.captioner)
            if not ids:
                who = f"captioner {args.captioner!r}" if args.captioner else "any captioner"
                raise SelectionError(
                    f"--caption: no caption ({who}) of dataset {dataset!r} contains {args.caption!r}"
                )
            sel = {"image_ids": ids}
        elif args.ids:
            sel = {"image_ids": read_ids(args.ids, args.ids)}
        else:
            sel = {"label": args.label} if args.label is not None else {"factor": args.factor}
        if args.across is not None:
            table = selection.across(
                db, args.across, annotator=args.annotator, n_null=args.null, seed=args.seed, **sel
            )
        else:
            out = selection.score(
                db,
                args.checkpoint,
                annotator=args.annotator,
                describe=args.describe,
                k=args.k,
                n_null=args.null,
                seed=args.seed,
                **sel,
            )
    finally:
        db.close()
    if args.across is None:
        print(selection.format_scores(out))
        return 0
    print(selection.format_across(table))
    if args.csv:
        from .workspace import atomic_write_bytes  # local: the command's own, so --help stays light

        atomic_write_bytes(Path(args.csv), table.to_csv(index=False).encode(), fsync=False)
        print(f"wrote {args.csv}")
    if args.figure:
        from .figures.export import figure_bytes, provenance
        from .figures.selection import across_figure
        from .workspace import atomic_write_bytes  # local: the command's own, so --help stays light

        path = Path(args.figure)
        prov = provenance(
            args.workspace, WorkspaceDB(args.workspace).ws.fingerprint(), "", figure="selection_across"
        )
        named = args.ids or args.label or (f"caption contains {args.caption!r}" if args.caption else None)
        prov.update(dataset=args.across, selection=named or "=".join(args.factor or ()))
        data = figure_bytes(across_figure(table), path.suffix.lstrip(".") or "html", 7.0, prov)
        atomic_write_bytes(path, data, fsync=False)
        print(f"wrote {args.figure}")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "score", help="concept scores of a selection of images on one checkpoint, with their nulls"
    )
    add_workspace(p)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--checkpoint", help="checkpoint whose features are scored")
    where.add_argument(
        "--across",
        metavar="DATASET",
        help="score the selection on every checkpoint of this dataset (one line per checkpoint and score)",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--ids", metavar="FILE.csv", help="CSV of image ids (an `image_id` column, or the first)"
    )
    which.add_argument("--label", help="the images of this label (as written in images.parquet)")
    which.add_argument(
        "--factor", type=_factor_value, metavar="COL=VALUE", help="the images of one factor value"
    )
    which.add_argument(
        "--caption",
        metavar="TEXT",
        help="the images with a caption (captions.parquet) containing TEXT, ignoring case",
    )
    p.add_argument("--captioner", help="with --caption: only this captioner's captions (default: any)")
    p.add_argument("--null", type=int, default=200, help="random sets per null (default 200)")
    p.add_argument(
        "--annotator", choices=("factors", "none"), default="factors", help="proxy annotator of the coherence"
    )
    p.add_argument(
        "--describe",
        action="store_true",
        help="also the class-level caption and describability (loads the sentence model; one checkpoint)",
    )
    p.add_argument(
        "--k", type=int, help="clusters whose captions the caption competes with (default: smallest k)"
    )
    p.add_argument("--csv", metavar="FILE.csv", help="with --across: write the table here")
    p.add_argument(
        "--figure",
        metavar="FILE",
        help="with --across: write the figure here, as its suffix says (.pdf, .svg, .png or .html), "
        "with its provenance",
    )
    add_seed(p, "the evaluation sample, the trials and the null sets")
    p.set_defaults(func=_score)

    p = sub.add_parser("validate", help="check a workspace; exit 1 if it has problems")
    add_workspace(p, positional_alias=True)
    p.add_argument("--json", action="store_true", help="print problems as JSON")
    p.set_defaults(func=_validate)

    p = sub.add_parser(
        "info",
        help="what a workspace holds: datasets, checkpoints, analyses' units done and skipped, sizes",
        description="What a workspace holds, in a couple of seconds: its datasets (images, splits, "
        "labels, checkpoints, layers, concepts, hierarchy), every analysis with its units and how many "
        "the analysis_runs log records as done or skipped, and each table's size. Reads only.",
    )
    add_workspace(p)
    p.add_argument("--json", action="store_true", help="print the numbers as JSON")
    p.add_argument(
        "--no-analyses", action="store_true", help="leave out the analyses (their units take longest to list)"
    )
    p.set_defaults(func=_info)

    p = sub.add_parser(
        "migrate", parents=[quiet_parent()], help="rewrite a workspace of an older format in the current one"
    )
    add_workspace(p, positional_alias=True)
    p.set_defaults(func=_migrate)

    demo = sub.add_parser("demo", help="the bundled demo workspace")
    dsub = demo.add_subparsers(dest="demo_command", required=True)
    b = dsub.add_parser(
        "build", parents=[quiet_parent()], help="build data/demo deterministically from a seed"
    )
    add_workspace(b, option_alias="--out", default="data/demo", help="workspace folder to write")
    add_seed(b, "the images, the models and the analyses")
    which = b.add_mutually_exclusive_group()
    which.add_argument(
        "--stages",
        type=_demo_stages,
        default="data,models,concepts,real,analysis",
        help="comma-separated stages to run (data, models, concepts, real, analysis)",
    )
    which.add_argument(
        "--only",
        dest="stages",
        type=_demo_stages,
        metavar="STAGE",
        help="run only this stage on an existing demo workspace, e.g. `--only real` (the real "
        "images and ImageNet models, with their analyses)",
    )
    b.set_defaults(func=_demo_build)
    s = dsub.add_parser(
        "scale", parents=[quiet_parent()], help="a large synthetic workspace for benchmarks (deterministic)"
    )
    add_workspace(s, option_alias="--out", help="workspace folder to write")
    s.add_argument("--images", type=int, default=50_000, help="number of images (default 50000)")
    s.add_argument("--checkpoints", type=int, default=28, help="number of checkpoints (default 28)")
    s.add_argument("--dim", type=int, default=512, help="feature dimension (default 512)")
    s.add_argument("--classes", type=int, help="number of classes (default images / 50, at most 1000)")
    add_seed(s, "the images and the features")
    s.add_argument(
        "--analyses", default="all", help="analyses to run: all, none or a comma-separated list (default all)"
    )
    s.set_defaults(func=_demo_scale)


def parser() -> argparse.ArgumentParser:
    ap = Parser(prog="conceptlens", description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="version", version=f"conceptlens {__version__}")
    ap.add_argument("--debug", action="store_true", help="show tracebacks and debug logging")
    sub = ap.add_subparsers(dest="command", required=True)
    register(sub)
    parents = [workspace_parent()]
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub, parents)
    return ap


def _configure_logging(debug: bool) -> None:
    """Our notes at INFO; other libraries' chatter only from WARNING (all of it with --debug)."""
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING, format="conceptlens: %(message)s", force=True
    )
    logging.getLogger("conceptlens").setLevel(logging.DEBUG if debug else logging.INFO)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    _configure_logging(args.debug)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("conceptlens: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except (ConceptLensError, ValueError, OSError) as e:
        if args.debug:
            raise
        print(f"conceptlens: error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # a bug: still one line, with the way to see more
        if args.debug:
            raise
        print(
            f"conceptlens: unexpected {type(e).__name__}: {e} (run again with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
