"""Storage guarantees (issue 17): a write that stops half-way leaves the old file whole and,
when the process lives on, no temporary file; readers never see a half-written table; the
workspace fingerprint follows every table (features too); features come back in a stable
order."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptlens import workspace as W
from conceptlens.db import WorkspaceDB
from conceptlens.validate import validate
from conceptlens.workspace import atomic_write_bytes, atomic_write_table
from harness.factory import make_workspace, write_features


class Crash(Exception):
    pass


def crashing_writer(fraction: float = 0.5, error: type[BaseException] = Crash):
    """A stand-in for pq.write_table that writes part of the file, then fails."""
    real = pq.write_table

    def write(table, where, **kwargs):
        sink = pa.BufferOutputStream()
        real(table, sink, **kwargs)
        data = sink.getvalue().to_pybytes()
        with open(where, "wb") as f:
            f.write(data[: int(len(data) * fraction)])
        raise error("disk full")

    return write


def leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def ws(tmp_path):
    return make_workspace(tmp_path / "ws", n_images=12, n_checkpoints=2)


def test_atomic_write_table_crash_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    p = tmp_path / "t.parquet"
    atomic_write_table(p, pa.table({"x": [1, 2, 3]}))
    before, inode = p.read_bytes(), p.stat().st_ino
    monkeypatch.setattr(W.pq, "write_table", crashing_writer())
    with pytest.raises(Crash):
        atomic_write_table(p, pa.table({"x": list(range(1000))}))
    assert p.read_bytes() == before and p.stat().st_ino == inode
    assert pq.read_table(p)["x"].to_pylist() == [1, 2, 3]
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("error", [Crash, KeyboardInterrupt, OSError])
def test_an_interrupted_partition_write_changes_nothing(ws, monkeypatch, error):
    """Workspace.write of a partition: old bytes kept, no temp file, every reader unaffected."""
    p = ws.table_path("features", checkpoint_id="ck0")
    before = {f: f.read_bytes() for f in ws.root.rglob("*") if f.is_file()}
    fp = ws.fingerprint()
    monkeypatch.setattr(W.pq, "write_table", crashing_writer(0.7, error))
    with pytest.raises(error):
        write_features(ws, "ck0", [f"toy-{i:04d}" for i in range(12)], np.zeros((12, 8)))
    monkeypatch.undo()
    assert {f: f.read_bytes() for f in ws.root.rglob("*") if f.is_file()} == before
    assert leftovers(p.parent) == []
    assert ws.fingerprint() == fp
    assert validate(ws.root) == []
    assert len(ws.read("features", checkpoint_id="ck0")) == 12


def test_a_new_partition_that_fails_leaves_no_file_at_all(ws, monkeypatch):
    monkeypatch.setattr(W.pq, "write_table", crashing_writer())
    with pytest.raises(Crash):
        write_features(ws, "ck9", ["toy-0000"], np.zeros((1, 8)))
    d = ws.partition_dir("features", checkpoint_id="ck9")
    assert not ws.has("features", checkpoint_id="ck9")
    assert not d.exists() or list(d.iterdir()) == []


def test_an_interrupted_upsert_and_append_change_nothing(ws, monkeypatch):
    caps = ws.table_path("captions")
    before = caps.read_bytes()
    runs = sorted(f for f in ws.root.glob("analysis_runs/**/*") if f.is_file())
    monkeypatch.setattr(W.pq, "write_table", crashing_writer())
    new = pa.table({"image_id": ["toy-0000"], "captioner": ["groundtruth"], "text": ["changed"]})
    with pytest.raises(Crash):
        ws.upsert("captions", new, {"image_id": "toy-0000"})
    assert caps.read_bytes() == before and leftovers(caps.parent) == []
    with pytest.raises(Crash):
        ws.append(
            "analysis_runs",
            pa.table({"unit": ["x"], "inputs": pa.array([None], pa.string()), "options": ["{}"]}),
            analysis="clustering",
        )
    assert sorted(f for f in ws.root.glob("analysis_runs/**/*") if f.is_file()) == runs


def test_workspace_json_crash_keeps_the_old_metadata(ws, monkeypatch):
    before = ws.meta_path.read_bytes()

    def failing_sync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_sync)
    with pytest.raises(OSError):
        ws.write_meta({**ws.meta(), "description": "x" * 5000})
    monkeypatch.undo()
    assert ws.meta_path.read_bytes() == before and leftovers(ws.root) == []
    with pytest.raises(Crash):
        with W._replacing(ws.root / "blob.bin") as tmp:
            open(tmp, "wb").write(b"half")
            raise Crash
    assert not (ws.root / "blob.bin").exists() and leftovers(ws.root) == []
    atomic_write_bytes(ws.root / "blob.bin", b"whole")
    assert (ws.root / "blob.bin").read_bytes() == b"whole"


def test_a_killed_writer_leaves_the_old_table_readable(ws):
    """A real crash (SIGKILL in the middle of writing): nothing can clean up, yet the
    partition still holds the old, whole file; readers ignore the temporary file and
    validate names it."""
    p = ws.table_path("features", checkpoint_id="ck1")
    before = p.read_bytes()
    script = textwrap.dedent(
        f"""
        import os, signal
        import numpy as np
        import pyarrow as pa
        import pyarrow.parquet as pq
        from conceptlens import workspace as W
        from harness.factory import write_features

        real = pq.write_table
        def write(table, where, **kw):
            sink = pa.BufferOutputStream()
            real(table, sink, **kw)
            data = sink.getvalue().to_pybytes()
            with open(where, "wb") as f:
                f.write(data[: len(data) // 2])
                f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        W.pq.write_table = write
        ws = W.Workspace({str(ws.root)!r})
        write_features(ws, "ck1", [f"toy-{{i:04d}}" for i in range(12)], np.ones((12, 8)))
        """
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr.decode()
    assert p.read_bytes() == before
    (tmp,) = leftovers(p.parent)
    assert tmp.startswith(".part-0.parquet.")
    assert ws.read("features", checkpoint_id="ck1").num_rows == 12
    assert ws.partition_files("features", checkpoint_id="ck1") == [p]
    db = WorkspaceDB(ws.root)
    try:
        ids, X = db.features("ck1")
        assert len(ids) == 12 and db.errors == {}
    finally:
        db.close()
    (problem,) = validate(ws.root)
    assert "temporary file" in problem.message and tmp in problem.file


# ---- the workspace fingerprint and the order of features -------------------------------------
def test_fingerprint_follows_every_table_including_features(ws):
    """The app caches views by the fingerprint: re-extracted features must change it."""
    fp = ws.fingerprint()
    ids = [f"toy-{i:04d}" for i in range(12)]
    write_features(ws, "ck0", ids, np.random.default_rng(5).standard_normal((12, 8)))
    assert ws.fingerprint() != fp
    fp = ws.fingerprint()
    assert ws.fingerprint() == fp  # nothing changed, the same key
    for name in ("clusters", "images"):
        before = ws.fingerprint()
        if name == "clusters":
            ws.write(
                "clusters",
                pa.table({"image_id": ids, "cluster": np.zeros(12, np.int64), "distance": np.zeros(12)}),
                checkpoint_id="ck1",
                k=2,
            )
        else:
            ws.write("images", ws.read("images"))
        assert ws.fingerprint() != before, name


def test_features_come_back_sorted_by_image_id_whatever_the_file_order(ws):
    rng = np.random.default_rng(0)
    ids = np.array([f"toy-{i:04d}" for i in range(12)])
    X = rng.standard_normal((12, 8)).astype(np.float32)
    order = rng.permutation(12)
    write_features(ws, "ck0", ids[order], X[order])
    assert list(pq.read_table(ws.table_path("features", checkpoint_id="ck0"))["image_id"]) != sorted(ids)
    db = WorkspaceDB(ws.root)
    try:
        got_ids, got = db.features("ck0")
        assert list(got_ids) == list(ids) and np.array_equal(got, X)
        some = ["toy-0007", "toy-0002", "toy-0011"]
        sub_ids, sub = db.features("ck0", some)
        assert list(sub_ids) == sorted(some) and np.array_equal(sub, X[[2, 7, 11]])
    finally:
        db.close()


def test_fingerprint_survives_a_file_vanishing_while_it_is_taken(ws, monkeypatch):
    """A file removed between listing and stat is skipped; the files after it still count."""
    from pathlib import Path

    real_stat = Path.stat

    def stat(self, *a, **k):
        if self == ws.meta_path:
            raise FileNotFoundError(self)
        return real_stat(self, *a, **k)

    monkeypatch.setattr(Path, "stat", stat)
    fp = ws.fingerprint()
    ws.write("images", ws.read("images"))
    assert ws.fingerprint() != fp


def test_read_puts_partition_columns_back_and_metadata_round_trips(ws):
    t = ws.read("features", checkpoint_id="ck0")
    assert t.column_names == ["checkpoint_id", "image_id", "embedding"]
    assert set(t["checkpoint_id"].to_pylist()) == {"ck0"} and not t.schema.field("checkpoint_id").nullable
    assert ws.read("features", columns=["image_id"], checkpoint_id="ck0").column_names == ["image_id"]
    ids = [f"toy-{i:04d}" for i in range(12)]
    clusters = pa.table({"image_id": ids, "cluster": np.zeros(12, np.int64), "distance": np.zeros(12)})
    ws.write("clusters", clusters, metadata={"inputs": "abc"}, checkpoint_id="ck0", k=2)
    assert ws.read_metadata("clusters", checkpoint_id="ck0", k=2) == {"inputs": "abc"}
    assert ws.read_metadata("clusters", checkpoint_id="ck1", k=2) == {}


def test_workspace_json_problems_are_named(tmp_path):
    from conceptlens.workspace import Workspace, WorkspaceError

    ws = Workspace(tmp_path)
    with pytest.raises(WorkspaceError, match=f"^{ws.meta_path}: not found; is {tmp_path} a workspace"):
        ws.meta()
    ws.meta_path.write_text("{not json")
    with pytest.raises(WorkspaceError, match=f"^{ws.meta_path}: invalid JSON"):
        ws.meta()
    ws.meta_path.write_text("[1]")
    with pytest.raises(WorkspaceError, match=f"^{ws.meta_path}: must hold a JSON object"):
        ws.meta()
