"""AppTest for every page: on the demo, and on a broken workspace (a message, no traceback)."""
import sys

import pyarrow.parquet as pq
import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT

PAGES = ["pages/home.py"]


def run_app(workspace, page=None, query=None):
    old = sys.argv
    sys.argv = ["app.py", "--workspace", str(workspace)]
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        for k, v in (query or {}).items():
            at.query_params[k] = v
        at.run()
        if page:
            at.switch_page(page)
            at.run()
        return at
    finally:
        sys.argv = old


@pytest.mark.parametrize("page", PAGES)
def test_page_runs_on_demo(demo_ws, page):
    at = run_app(demo_ws, page)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


@pytest.mark.parametrize("page", PAGES)
def test_page_shows_problems_of_broken_workspace(demo_copy, page):
    p = demo_copy / "images.parquet"
    pq.write_table(pq.read_table(p).drop_columns(["image_id"]), p)
    at = run_app(demo_copy, page)
    assert not at.exception, at.exception
    msg = " ".join(e.value for e in at.error)
    assert "images.parquet" in msg and "image_id" in msg


def test_missing_workspace_folder(tmp_path):
    at = run_app(tmp_path / "nowhere")
    assert not at.exception
    assert "does not exist" in at.error[0].value


def test_home_lists_datasets_and_sample(demo_ws):
    at = run_app(demo_ws)
    tables = [df.value for df in at.dataframe]
    ds = tables[0].set_index("dataset")
    assert ds.loc["shapes", "images"] == 5000 and ds.loc["digits", "images"] == 1797
    assert ds.loc["digits", "labels"] == 10
    grid = at.get("image")[0].proto.imgs
    assert len(grid) == 40
    # Served by URL from the media endpoint, not inlined as base64.
    assert all(not im.url.startswith("data:") for im in grid)


def test_ws_query_parameter_cannot_leave_workspaces_root(demo_ws):
    at = run_app(demo_ws, query={"ws": "../../etc"})
    assert not at.exception
    assert any("not below" in w.value for w in at.warning)
