"""Every page reads only the tables its spec declares (components/nav.py): those are the
tables validated before it renders, so a table read but not declared has its problems
never checked. The reads are recorded by the database itself (`conceptlens.db.read_log`)
while AppTest runs each page on a copy of the demo."""

import os
import shutil

import pytest
import streamlit as st

from components import nav
from conceptlens import analyses, schema
from conceptlens import db as dbmod
from conceptlens.db import WorkspaceDB
from tests.test_app import assert_clean, open_app


@pytest.fixture(scope="module")
def demo(tmp_path_factory, demo_ws):
    """The demo, hard-linked (the pages only read it)."""
    return shutil.copytree(demo_ws, tmp_path_factory.mktemp("pages") / "ws", copy_function=os.link)


def reads_of(monkeypatch, root, spec, query=None) -> set[str]:
    st.cache_data.clear()  # a cached view runs no query
    st.cache_resource.clear()
    with dbmod.read_log() as reads:
        at = open_app(monkeypatch, root, spec.path, query)
    assert_clean(at)
    return reads


def clusters_with_an_image(root) -> dict:
    """Clusters' URL with an image open in the sidebar (its captions, its nearest
    neighbours by features): the first image of the first clustering."""
    db = WorkspaceDB(root)
    row = db.query("""
        SELECT c.checkpoint_id, c.k, c.image_id, k.dataset FROM clusters c
        JOIN checkpoints k USING (checkpoint_id)
        ORDER BY k.dataset, c.checkpoint_id, c.k, c.image_id LIMIT 1""").iloc[0]
    return {"ds": row["dataset"], "ckpt": row["checkpoint_id"], "k": str(row["k"]), "img": row["image_id"]}


# Every page of nav.PAGES on the demo and on the factory workspace (harness/factory.py: every
# table an analysis writes, a new analysis' too, made from its declaration), so a new page is
# opened on a workspace that holds its tables without an entry here.
VISITS = [(spec, None, where) for where in ("demo", "factory") for spec in nav.PAGES] + [
    (nav.BY_NAME["clusters"], clusters_with_an_image, "demo")
]


@pytest.mark.parametrize(
    ("spec", "query", "where"),
    VISITS,
    ids=[f"{s.name}{'-image' if q else ''}-{w}" for s, q, w in VISITS],
)
def test_page_reads_only_the_tables_its_spec_declares(monkeypatch, request, spec, query, where):
    root = request.getfixturevalue("demo" if where == "demo" else "factory_template")
    reads = reads_of(monkeypatch, root, spec, query(root) if query else None)
    db = WorkspaceDB(root)
    complete = all(db.has(t) for t in spec.tables if t not in spec.may_lack + (nav.META,))
    db.close()
    if complete:
        # The log records (every page lists these), unless the page stopped at a missing table.
        assert reads & set(nav.BASE_TABLES), reads
    undeclared = reads - set(spec.tables)
    assert not undeclared, (
        f"pages/{spec.name}.py reads {sorted(undeclared)}, which its PageSpec in components/nav.py "
        "does not declare: name the step that has them"
    )


def test_read_log_records_the_tables_a_query_names(demo):
    db = WorkspaceDB(demo)
    db.query("SELECT count(*) FROM clusters WHERE k = $k", {"k": 4})  # not recorded: no log open
    with dbmod.read_log() as reads:
        db.query(
            """WITH m AS (SELECT * FROM cluster_metrics WHERE checkpoint_id = $ck)
            SELECT count(*) FROM m JOIN images i ON i.dataset = $ds""",
            {"ck": "x", "ds": "y"},
        )
        db.columns("captions")
        db.features(db.query("SELECT checkpoint_id FROM checkpoints LIMIT 1").iloc[0, 0], ["none"])
    assert reads == {"cluster_metrics", "images", "captions", "features", "checkpoints"}
    assert reads <= set(schema.TABLES_BY_NAME)
    db.query("SELECT count(*) FROM projections")
    assert "projections" not in reads  # closed: recording stopped


def test_every_step_is_shown_by_a_page_and_specs_name_only_steps():
    """Home links each step to the page whose spec names it: a step no page names, or a
    name that is no step, is a spec out of date."""
    steps = {s.name for s in analyses.steps()}
    for spec in nav.PAGES:
        assert set(spec.steps) <= steps, (spec.name, set(spec.steps) - steps)
        assert set(spec.reads).isdisjoint(t for s in analyses.steps() for t in s.reads), spec.name
    assert {s for s in steps if nav.page_of(s) is None} == set()
    assert nav.page_of("concepts").title == "Concepts"
