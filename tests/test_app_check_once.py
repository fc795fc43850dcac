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


def test_the_servers_warm_up_leaves_no_page_a_check_to_do(monkeypatch, factory_copy, checks):
    """serve.py's warm-up (components/data.py `warm`) checks the served workspace under the
    key pages look it up by: after it, opening any page validates nothing. (Fails if it
    checked another root string, e.g. a resolved path, or not every page's tables.)"""
    import sys

    monkeypatch.setattr(sys, "argv", ["serve.py", "--workspace", str(factory_copy)])
    said = data.warm()
    assert len(checks) == 1 and str(factory_copy) in said
    assert checks[0][1] == frozenset(t for p in nav.PAGES for t in p.tables)
    for spec in nav.PAGES:
        assert_clean(open_app(monkeypatch, factory_copy, spec.path))
    assert len(checks) == 1, checks[1:]


def test_the_warm_up_reports_and_survives_a_failure():
    """components/serving.py `Warmup`: `/conceptlens/ready` is 503 until the work is over and
    200 after, also when the work failed (logged; the page that needs it does it again)."""
    import asyncio
    import concurrent.futures
    import threading

    from components.serving import Warmup

    def ask(w) -> tuple[int, bytes]:
        # On a thread of its own: a browser test's Playwright may hold this thread's loop.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            response = pool.submit(asyncio.run, w.route().endpoint(None)).result()
        return response.status_code, response.body

    gate = threading.Event()
    w = Warmup()
    w.start(lambda: (gate.wait(30), "waited")[1])
    assert ask(w) == (503, b"warming")
    w.start(lambda: pytest.fail("a second start must not run again"))
    gate.set()
    assert w.done.wait(30) and w.error is None
    assert ask(w) == (200, b"ready")

    bad = Warmup()
    bad.start(lambda: 1 / 0)
    assert bad.done.wait(30)
    assert bad.error == "ZeroDivisionError: division by zero" and ask(bad) == (200, b"ready")
