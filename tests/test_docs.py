import re
from pathlib import Path

from conceptlens import schema

ROOT = Path(__file__).resolve().parent.parent


def test_workspace_doc_matches_schema():
    text = (ROOT / "docs" / "workspace.md").read_text()
    a = text.index(schema.DOC_BEGIN) + len(schema.DOC_BEGIN)
    b = text.index(schema.DOC_END)
    assert text[a:b].strip() == schema.markdown().strip(), (
        "docs/workspace.md is stale: run `python -m conceptlens.schema docs/workspace.md`"
    )


def test_every_table_and_column_documented():
    text = (ROOT / "docs" / "workspace.md").read_text()
    for t in schema.TABLES:
        assert f"`{t.path}`" in text
        for c in t.columns:
            assert f"| `{c.name}` |" in text


def test_who_writes_a_table_is_the_registry_for_analyses_tables():
    """`added_by` is typed only for tables no analysis writes; the others name the analyses
    of the registry that write them (it once said `analyze captions`, which does not exist)."""
    from conceptlens import analyses
    from conceptlens.analysis import registered

    names = {a.name for a in registered()}
    for t in schema.TABLES:
        writers = analyses.writers(t.name)
        assert bool(writers) != bool(t.added_by), f"{t.name}: who writes it is declared twice or not at all"
        assert set(writers) == {a.name for a in registered() if t.name in a.writes}
    text = (ROOT / "docs" / "workspace.md").read_text()
    for m in re.finditer(r"`conceptlens analyze ([a-z_]+)", text):
        assert m.group(1) in names, f"docs/workspace.md names `conceptlens analyze {m.group(1)}`"
