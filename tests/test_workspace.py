"""conceptlens/workspace.py: file signatures follow the bytes, the workspace fingerprint covers the
tables and workspace.json only, and the dashboard's cached views follow it."""

from __future__ import annotations

import os
import shutil

from conceptlens.workspace import Workspace, files_signature
from tests.conftest import copy_ws


# ---- file signatures and the workspace fingerprint ----------------------------------------------
def _rewrite(ws: Workspace, note: str, **part):
    """The clusters file replaced (atomic: a new inode) by the same rows with `note` in its
    metadata: with a note of the same length, a file of the same size."""
    t = ws.read("clusters", **part).drop_columns(list(part))
    md = {**ws.read_metadata("clusters", **part), "note": note}
    ws.write("clusters", t, metadata=md, **part)
    return ws.table_path("clusters", **part)


def test_files_signature_follows_the_bytes_not_the_stat(factory_copy):
    """A clusters file replaced by one of the same size and modification time (two writes
    in one clock tick) gets a new signature: the memo is keyed on the inode too. Catches a
    memo keyed on (path, size, mtime) only: a re-clustered checkpoint would then keep its
    old fingerprint and the comparisons their stale pairs."""
    ws = Workspace(factory_copy)
    part = {"checkpoint_id": "ck1", "k": 4}
    path = _rewrite(ws, "a", **part)
    st = path.stat()
    before = files_signature([path])
    _rewrite(ws, "b", **part)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    assert path.stat().st_ino != st.st_ino
    assert files_signature([path]) != before


def test_files_signature_is_the_same_for_a_copy_and_differs_by_name(factory_template, tmp_path):
    """A copied workspace keeps its signatures (names inside the workspace, not the absolute
    path), and the same bytes under another partition's name sign differently."""
    copy = copy_ws(factory_template, tmp_path / "elsewhere" / "ws")
    a = Workspace(factory_template).partition_files("clusters", checkpoint_id="ck0", k=4)
    b = Workspace(copy).partition_files("clusters", checkpoint_id="ck0", k=4)
    assert files_signature(a) == files_signature(b)
    moved = tmp_path / "elsewhere" / "ws" / "clusters" / "checkpoint_id=ck9" / "k=4"
    moved.mkdir(parents=True)
    shutil.copy2(b[0], moved / b[0].name)
    assert files_signature([moved / b[0].name]) != files_signature(b)


def test_workspace_fingerprint_covers_tables_and_workspace_json_only(factory_copy, tmp_path):
    """The dashboard's cache key changes when a table or workspace.json changes, not when a
    file outside the tables does, and not when the workspace is copied (copy2 keeps mtimes)."""
    ws = Workspace(factory_copy)
    fp = ws.fingerprint()
    (ws.root / "notes.txt").write_text("not a table")
    assert ws.fingerprint() == fp
    assert Workspace(copy_ws(factory_copy, tmp_path / "copy")).fingerprint() == fp
    t = ws.read("clusters", checkpoint_id="ck2", k=4).drop_columns(["checkpoint_id", "k"])
    ws.write("clusters", t.slice(1), checkpoint_id="ck2", k=4)  # one row fewer
    fp2 = ws.fingerprint()
    assert fp2 != fp
    meta = ws.meta_path.read_text()
    ws.meta_path.unlink()
    ws.meta_path.write_text(meta.replace('"tiny"', '"renamed"'))
    assert ws.fingerprint() != fp2


def test_dashboard_views_follow_the_fingerprint(factory_copy):
    """components/data.py caches a view per (workspace, fingerprint): a table rewritten, the
    next AppWorkspace sees the new rows; unchanged, the cached frame is served."""
    from components.data import AppWorkspace
    from conceptlens.views import home

    calls = []

    def counted(db):
        calls.append(1)
        return home.checkpoints(db)

    counted.__qualname__ = "test_workspace_counted_checkpoints"
    first = AppWorkspace(factory_copy).view(counted)
    again = AppWorkspace(factory_copy).view(counted)
    assert len(calls) == 1 and again.equals(first)
    ws = Workspace(factory_copy)
    ck = ws.read("checkpoints")
    ws.write("checkpoints", ck.slice(0, ck.num_rows - 1))
    after = AppWorkspace(factory_copy).view(counted)
    assert len(calls) == 2 and len(after) == len(first) - 1
