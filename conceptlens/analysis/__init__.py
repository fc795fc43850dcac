"""Analyses that read a workspace and write derived tables into it.

Every analysis is one module of this package with one `ANALYSIS = base.Analysis(...)`,
listed by module name in `MODULES` (in the order `conceptlens analyze all` and `--help`
list them; dependencies are run first whatever the order). `registered()` imports them on
first use: an analysis module imports `base`, `common` and `conceptlens.metrics` only, so
importing any of them alone never comes back here. `runner.py` runs them, `cli.py` is
`conceptlens analyze`.
"""

from __future__ import annotations

import importlib

from ..cache import cached

MODULES: tuple[str, ...] = (
    "clustering",
    "cluster_metrics",
    "cluster_captions",
    "projections",
    "baselines",
    "comparisons",
    "compmap",
    "similarity",
    "concepts",
    "convergence",
    "concept_events",
    "learning_curves",
    "aligned_projections",
    "dictionary",
    "scoreboard",
)


# A constant of the process (the modules of MODULES, imported once): one entry each.
@cached(reads=(), maxsize=1)
def registered() -> tuple:
    """Every analysis (`base.Analysis`), in the order of MODULES."""
    out = tuple(importlib.import_module(f"{__name__}.{m}").ANALYSIS for m in MODULES)
    names = [a.name for a in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise AssertionError(f"analysis name(s) declared twice: {', '.join(twice)}")
    return out


@cached(reads=(), maxsize=1)
def by_name() -> dict:
    """name -> `base.Analysis`."""
    return {a.name: a for a in registered()}


def declared_tables() -> tuple:
    """The tables the analyses add to the workspace format (`schema.Table`s of `Analysis.tables`)."""
    return tuple(t for a in registered() for t in a.tables)
