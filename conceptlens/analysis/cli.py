"""`conceptlens analyze NAME|all`, with each analysis' options from its declaration.

Option values are checked when the arguments are parsed (a value out of range or not
among an option's choices is an error naming its flag, before anything runs).
"""

from __future__ import annotations

from . import registered
from .base import SEED, Option


def add_options(p, options) -> None:
    """One flag per option (default None: not given, so the analysis' default or what a
    done unit was computed with applies)."""
    for o in options:
        if o.type is bool:
            p.add_argument(
                o.flag,
                dest=o.name,
                action="store_false" if o.default else "store_true",
                default=None,
                help=_help(o.help),
            )
        else:
            p.add_argument(
                o.flag,
                dest=o.name,
                type=o.parse,
                nargs="+" if o.multiple else None,
                default=None,
                metavar=_metavar(o),
                help=_help(f"{o.help} (default: {_default(o)})"),
            )


def _help(text: str) -> str:
    """An option's help as argparse takes it: argparse %-formats help strings, so a literal
    `%` ("95% intervals") would make `--help` fail."""
    return text.replace("%", "%%")


def _metavar(o: Option) -> str:
    if o.choices is not None:
        return "{" + ",".join(map(str, o.choices)) + "}"
    return o.name.upper()


def _default(o: Option) -> str:
    if isinstance(o.default, (tuple, list)):
        return " ".join(map(str, o.default))
    return str(o.default)


def add_engine(p) -> None:
    """--engine (the one of every command, `cliargs.add_engine`), --workers and --threads:
    how the units of an analysis run."""
    from ..cliargs import add_engine as add_engine_flag  # local: the command's own, so --help stays light

    add_engine_flag(p)
    p.add_argument(
        "--workers",
        type=_at_least_one,
        help="Ray tasks at once with --engine ray (default: CPUs/threads)",
    )
    p.add_argument(
        "--threads",
        type=_at_least_one,
        help="BLAS / OpenMP threads of one unit (default: all with local, 1 per Ray task); scikit-learn's "
        "k-means depends on it, so a Ray run equals a local run with the same --threads",
    )


def _at_least_one(text: str) -> int:
    return Option("n", int, None, "", minimum=1).parse(text)


def _handler(name: str):
    def handle(args) -> int:
        from .runner import all_options, run  # local: the command's own, so --help stays light

        opts = {o: getattr(args, o, None) for o in all_options()}
        ctx = run(
            args.workspace,
            name,
            opts,
            checkpoint=args.checkpoint,
            dataset=args.dataset,
            force=args.force,
            progress_bars=not args.quiet,
            with_dependencies=name == "all",
            engine=args.engine,
            workers=args.workers,
            threads=args.threads,
            skip=tuple(getattr(args, "skip", None) or ()),
        )
        above = f"; {len(ctx.notes)} note(s) above" if ctx.notes else ""
        if ctx.written:
            print(f"{name}: analyses written to {args.workspace} ({ctx.written} unit(s){above})")
        else:
            print(
                f"{name}: nothing written to {args.workspace}: every unit was up to date, skipped "
                f"or had nothing to analyse{above}"
            )
        return 0

    return handle


def _subcommand(asub, name: str, parents, options, **kw):
    ap = asub.add_parser(name, parents=parents, **kw)
    if name == "all":
        ap.add_argument(
            "--skip",
            nargs="+",
            metavar="ANALYSIS",
            choices=[a.name for a in registered()],
            help="leave these analyses out (e.g. `--skip baselines dictionary`, the two slowest); "
            "what reads their tables uses what is there and is due again once they have run",
        )
    ap.add_argument("--checkpoint", help="only this checkpoint (default: all)")
    ap.add_argument("--dataset", help="only this dataset's units (default: all)")
    ap.add_argument("--force", action="store_true", help="recompute units already done")
    add_engine(ap)
    add_options(ap, options)
    ap.set_defaults(func=_handler(name))


def register(sub, parents) -> None:
    """`conceptlens analyze NAME|all`."""
    from .runner import all_options  # local: the command's own, so --help stays light

    p = sub.add_parser(
        "analyze",
        help="compute analyses into a workspace",
        description="Compute analyses; `all` runs every analysis not done yet, in dependency order.",
    )
    asub = p.add_subparsers(dest="analysis", required=True, metavar="ANALYSIS")
    for a in registered():
        _subcommand(asub, a.name, parents, (SEED, *a.options), help=a.title, description=a.doc or a.title)
    _subcommand(
        asub,
        "all",
        parents,
        all_options().values(),
        help="every analysis not done yet, in dependency order",
    )
