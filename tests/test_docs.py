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
