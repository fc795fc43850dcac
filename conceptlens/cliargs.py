"""The arguments every `cli.py` shares, declared once: `--workspace` (and its deprecated
aliases), `--quiet`, `--engine`, `--seed`.

Every command names its workspace with `--workspace W`. The commands that used to take it
as their first positional argument (`init`, `import ...`, `validate`, `migrate`) and
`demo build|scale --out W` keep that form for one release: it still works and prints one
deprecation line on stderr. Giving the workspace both ways, or not at all, is a one-line
error naming `--workspace`. The aliases are resolved by `Parser` (the class of every
`conceptlens` parser) right after its own arguments are parsed.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

WORKSPACE_HELP = "workspace folder"
ENGINES = ("local", "ray")
ENGINE_HELP = (
    "where the work runs: local, in this process; ray, spread over Ray workers on the cluster of "
    "$RAY_ADDRESS, else on this machine"
)
# The namespace attribute of a deprecated workspace alias (removed once resolved).
_ALIAS_DEST = "workspace_alias"


@dataclass(frozen=True)
class _Alias:
    """How a parser's deprecated workspace form is written, e.g. `W` or `--out W`."""

    option: str | None  # None: the first positional argument
    default: str | None  # the workspace when neither form is given (None: an error)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that resolves `--workspace` against its deprecated alias (if
    `add_workspace` gave it one) as soon as its arguments are parsed. Subparsers are of
    the same class (argparse creates them with the class of their parent)."""

    def parse_known_args(self, args=None, namespace=None):
        ns, extras = super().parse_known_args(args, namespace)
        alias: _Alias | None = getattr(self, "_workspace_alias", None)
        if alias is not None and hasattr(ns, _ALIAS_DEST):
            extras = self._resolve_workspace(alias, ns, extras)
        return ns, extras

    def _resolve_workspace(self, alias: _Alias, ns, extras: list[str]) -> list[str]:
        if any(e.startswith(tuple(self.prefix_chars)) for e in extras):
            return extras  # an unknown option: argparse's own error names it
        if alias.option is None and extras and getattr(ns, _ALIAS_DEST) is None:
            # `import images W --dataset D SOURCE`: argparse (before 3.12) gives W to the first
            # required positional and leaves SOURCE over; shift the positionals back by one.
            after = [
                a for a in self._get_positional_actions() if a.dest not in (_ALIAS_DEST, argparse.SUPPRESS)
            ]
            if len(extras) == 1 and after and all(a.nargs is None for a in after):
                values = [getattr(ns, a.dest) for a in after] + extras
                setattr(ns, _ALIAS_DEST, values[0])
                for a, v in zip(after, values[1:]):
                    setattr(ns, a.dest, v)
                extras = []
        if extras:
            return extras  # a positional too many: argparse's own error names it
        old = getattr(ns, _ALIAS_DEST)
        delattr(ns, _ALIAS_DEST)
        written = old if alias.option is None else f"{alias.option} {old}"
        if old is not None and ns.workspace is not None:
            self.error(
                f"the workspace is given twice ({written} and --workspace {ns.workspace}): "
                "give only --workspace W"
            )
        if old is not None:
            print(
                f"conceptlens: `{self.prog} {written}` is deprecated; use `--workspace {old}`",
                file=sys.stderr,
            )
            ns.workspace = old
        elif ns.workspace is None:
            if alias.default is None:
                self.error("the workspace is missing: give --workspace W")
            ns.workspace = alias.default
        return extras


def add_workspace(
    parser: argparse.ArgumentParser,
    *,
    positional_alias: bool = False,
    option_alias: str | None = None,
    default: str | None = None,
    required: bool = True,
    help: str = WORKSPACE_HELP,
) -> None:
    """`--workspace W`. With `positional_alias` (add it before the other positionals) the old
    `COMMAND W ...` form, with `option_alias` (e.g. "--out") the old `COMMAND --out W`, still
    work for one release, with a deprecation line; `default` is the workspace when neither
    form is given. Without an alias `--workspace` is `required` (or optional: `default`)."""
    if not (positional_alias or option_alias):
        parser.add_argument("--workspace", metavar="W", required=required, default=default, help=help)
        return
    if not isinstance(parser, Parser):
        raise TypeError(f"{parser.prog}: a workspace alias needs a conceptlens.cliargs.Parser")
    if default is not None:
        help = f"{help} (default {default})"
    parser.add_argument("--workspace", metavar="W", help=help)
    if positional_alias:
        parser.add_argument(_ALIAS_DEST, nargs="?", metavar="W", help=argparse.SUPPRESS)
    else:
        parser.add_argument(option_alias, dest=_ALIAS_DEST, metavar="W", help=argparse.SUPPRESS)
    parser._workspace_alias = _Alias(option=None if positional_alias else option_alias, default=default)


def add_quiet(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def quiet_parent() -> argparse.ArgumentParser:
    """A parent parser of `--quiet` alone (`parents=[quiet_parent()]`)."""
    p = argparse.ArgumentParser(add_help=False)
    add_quiet(p)
    return p


def workspace_parent() -> argparse.ArgumentParser:
    """A parent parser of `--workspace` (required) and `--quiet`: what a command that reads
    or writes a workspace shares (`register(sub, parents)` receives it)."""
    p = argparse.ArgumentParser(add_help=False)
    add_workspace(p)
    add_quiet(p)
    return p


def add_engine(parser: argparse.ArgumentParser) -> None:
    """`--engine local|ray` (checked when the arguments are parsed)."""
    parser.add_argument("--engine", choices=ENGINES, default="local", help=f"{ENGINE_HELP} (default local)")


def add_seed(parser: argparse.ArgumentParser, of: str = "every random choice") -> None:
    """`--seed N` (default 0): the same command with the same seed gives the same result."""
    parser.add_argument("--seed", type=int, default=0, help=f"seed of {of} (default 0)")
