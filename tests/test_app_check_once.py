"""The workspace check runs once per workspace fingerprint per server process (issue 25,
item 3; components/data.py `_Checks`): a second session, or a page whose tables another
page checked, does not check them again; a changed workspace is checked again."""

from __future__ import annotations

import os

import pytest
import streamlit as st

from components import data, nav
from tests.test_app import assert_clean, open_app


@pytest.fixture()
def checks(monkeypatch):
    """Every validate call of the dashboard, as (root, tables asked for)."""
    calls = []
    real = data.validate

    def counting(root, deep=True, tables=None):
        calls.append((str(root), frozenset(tables)))
        return real(root, deep=deep, tables=tables)

    monkeypatch.setattr(data, "validate", counting)
    st.cache_resource.clear()  # a fresh server process
    yield calls
    st.cache_resource.clear()


def test_a_second_session_does_not_check_again_and_a_changed_workspace_is(monkeypatch, factory_copy, checks):
    clusters, checkpoints = nav.BY_NAME["clusters"], nav.BY_NAME["checkpoints"]
    assert_clean(open_app(monkeypatch, factory_copy, clusters.path))
    assert set().union(*(t for _, t in checks)) == set(clusters.tables)
    # Another session (a new browser), same page: nothing checked.
    n = len(checks)
    assert_clean(open_app(monkeypatch, factory_copy, clusters.path))
    assert len(checks) == n
    # Another page checks only the tables no page has checked yet.
    assert_clean(open_app(monkeypatch, factory_copy, checkpoints.path))
    assert [t for _, t in checks[n:]] == [frozenset(checkpoints.tables) - set(clusters.tables)]
    # A file of the workspace changes (a rebuilt table): its fingerprint changes, the page's
    # tables are checked again.
    f = next((factory_copy / "clusters").rglob("*.parquet"))
    st_ = f.stat()
    os.utime(f, ns=(st_.st_atime_ns, st_.st_mtime_ns + 10**9))
    n = len(checks)
    assert_clean(open_app(monkeypatch, factory_copy, clusters.path))
    assert set().union(*(t for _, t in checks[n:])) == set(clusters.tables)


def test_problems_of_a_table_are_kept_with_it(monkeypatch, tmp_path):
    """_Checks answers for each page's tables exactly what validating them together says."""
    from conceptlens.validate import Problem

    found = {"a": [Problem("a.parquet", "a", None, "bad a")], "b": []}
    meta = Problem("workspace.json", "workspace.json", None, "old")
    calls = []

    def fake(root, deep=True, tables=None):
        calls.append(set(tables))
        return [meta] + [p for t in sorted(tables) for p in found[t]]

    monkeypatch.setattr(data, "validate", fake)
    c = data._Checks()
    assert c.problems("r", "fp1", ()) == [meta]
    assert c.problems("r", "fp1", ("a", "b")) == [meta, *found["a"]]
    assert c.problems("r", "fp1", ("b",)) == [meta]
    assert c.problems("r", "fp1", ("a",)) == [meta, *found["a"]]
    assert calls == [set(), {"a", "b"}]
    assert c.problems("r", "fp2", ("b",)) == [meta] and calls[-1] == {"b"}  # new fingerprint
    for i in range(c.KEEP + 1):  # the oldest fingerprints are forgotten
        c.problems("r", f"x{i}", ())
    assert ("r", "fp1") not in c.done and len(c.done) == c.KEEP
