"""Where each table of the workspace format is declared (issue 40): the tables an analysis
writes live in that analysis' module (`Analysis.tables`), next to the code that fills them;
`schema.py` keeps the core, the tables no analysis writes. A table left in (or moved back
to) the core, declared by an analysis that does not write it, or declared in two places
would still read and validate the same, so only these checks see the format split in two.
"""

from __future__ import annotations

import pytest

from conceptlens import analysis, schema
from conceptlens.analysis import registered


def test_every_table_an_analysis_writes_is_declared_by_the_first_analysis_that_writes_it():
    """`projections` is written by `projections` and `similarity`: the first in MODULES order
    declares it, the other only writes it. A declared table nobody writes fails too."""
    first: dict[str, str] = {}
    for a in registered():
        for name in a.writes:
            first.setdefault(name, a.name)
    declared: dict[str, list[str]] = {}
    for a in registered():
        for t in a.tables:
            declared.setdefault(t.name, []).append(a.name)
    assert declared == {name: [a] for name, a in first.items()}


def test_the_core_holds_only_tables_no_analysis_writes():
    written = {name for a in registered() for name in a.writes}
    assert sorted(written & set(schema.CORE_BY_NAME)) == []
    assert all(t.added_by for t in schema.CORE_TABLES), "a core table says who writes it"


def test_the_format_lists_the_core_then_each_analysis_in_module_order():
    """docs/workspace.md follows `tables()`: the inputs first, then what each analysis adds,
    in the order `conceptlens analyze all` runs them."""
    names = [t.name for t in schema.tables()]
    core = [t.name for t in schema.CORE_TABLES]
    assert names == core + [t.name for a in registered() for t in a.tables]


def test_a_table_declared_twice_is_refused(monkeypatch):
    """A table moved into an analysis but not removed from the core (or declared by two
    analyses) stops the format from loading, naming the table."""
    images = schema.CORE_BY_NAME["images"]
    monkeypatch.setattr(analysis, "declared_tables", lambda: (images,))
    schema.tables.cache_clear()
    try:
        with pytest.raises(AssertionError, match="table\\(s\\) declared twice: images"):
            schema.tables()
    finally:
        monkeypatch.undo()
        schema.tables.cache_clear()
    assert schema.tables()[0] is images
