"""Read-only mode (`CONCEPTLENS_READ_ONLY=1`, docs/deploy.md): a deployed dashboard writes
nothing into its workspace, whatever page is visited and whatever button is pressed;
study answers go to `CONCEPTLENS_STATE_DIR`, outside it (issue 13)."""

import hashlib
import os
import sys

import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from components import nav
from conceptlens.cli import main
from conceptlens.workspace import ReadOnlyError, Workspace
from tests.conftest import ROOT


def snapshot(root) -> dict:
    """Every file and folder below `root`: size, modification time and content hash."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = "dir"
        for f in filenames:
            p = os.path.join(dirpath, f)
            st = os.stat(p)
            with open(p, "rb") as fh:
                digest = hashlib.sha1(fh.read()).hexdigest()
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns, digest)
    return out


@pytest.fixture
def read_only(monkeypatch, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("CONCEPTLENS_READ_ONLY", "1")
    monkeypatch.setenv("CONCEPTLENS_STATE_DIR", str(state))
    monkeypatch.delenv("CONCEPTLENS_ANSWERS_URL", raising=False)
    return state


def test_every_page_and_button_leaves_the_workspace_untouched(factory_copy, read_only, monkeypatch):
    before = snapshot(factory_copy)
    monkeypatch.setattr(sys, "argv", ["app.py", "--workspace", str(factory_copy)])
    monkeypatch.setenv("CONCEPTLENS_OWNER_SECRET", "owner-secret-of-test-readonly")
    clicked = []
    for spec in nav.PAGES:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        at.session_state["_owner_secret"] = "owner-secret-of-test-readonly"  # the owner, even so
        at.switch_page(spec.path).run()
        assert not at.exception, (spec.name, [e.message for e in at.exception])
        assert any("Read-only deployment" in c.value for c in at.sidebar.caption), spec.name
        # Press every button the page shows once (those that create, export, run...),
        # including those a press brings up (a created study's export).
        pressed: set[str] = set()
        for _ in range(60):
            todo = [b for b in at.button if b.key and b.key not in pressed and not b.disabled]
            if not todo:
                break
            pressed.add(todo[0].key)
            todo[0].click().run()
            clicked.append((spec.name, todo[0].key))
            assert not at.exception, (spec.name, todo[0].key, [e.message for e in at.exception])
    assert snapshot(factory_copy) == before
    assert clicked, "no button was pressed: the test did not exercise any action"


def test_workspace_writes_are_refused(factory_copy, read_only):
    ws = Workspace(factory_copy)
    before = snapshot(factory_copy)
    table = ws.read("checkpoints")
    with pytest.raises(ReadOnlyError, match="CONCEPTLENS_READ_ONLY=1") as e:
        ws.write("checkpoints", table)
    assert isinstance(e.value, PermissionError)  # what callers catch for a read-only disk
    assert "checkpoints.parquet" in str(e.value)
    with pytest.raises(ReadOnlyError):
        ws.write_meta({**ws.meta(), "name": "changed"})
    with pytest.raises(ReadOnlyError):
        ws.remove_partition("clusters", checkpoint_id="ck0", k=4)
    assert snapshot(factory_copy) == before  # and no temporary file left behind


def test_the_state_folder_stays_writable(read_only):
    ws = Workspace.create(read_only / "answers-ws", name="state")
    ws.write("checkpoints", pa.table({"checkpoint_id": ["a"]}))
    assert ws.has("checkpoints")


def test_without_the_flag_writes_work(factory_copy, monkeypatch):
    monkeypatch.delenv("CONCEPTLENS_READ_ONLY", raising=False)
    ws = Workspace(factory_copy)
    ws.write_meta({**ws.meta(), "name": "changed"})
    assert ws.meta()["name"] == "changed"


@pytest.mark.parametrize("value,on", [("1", True), ("true", True), ("0", False), ("", False), ("no", False)])
def test_flag_values(monkeypatch, value, on):
    from conceptlens.workspace import read_only

    monkeypatch.setenv("CONCEPTLENS_READ_ONLY", value)
    assert read_only() is on


def test_an_analysis_in_read_only_mode_stops_with_one_line(factory_copy, read_only, capsys):
    before = snapshot(factory_copy)
    code = main(["analyze", "clustering", "--workspace", str(factory_copy), "--force", "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and "read-only" in err and "Traceback" not in err, err
    assert snapshot(factory_copy) == before
