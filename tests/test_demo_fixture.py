"""Tests read a committed copy of the demo, never data/demo itself (issue 28, item 8): a write
into data/demo (e.g. `conceptlens study export --workspace data/demo`) must not change what
the tests see."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import DEMO, ROOT, committed_copy


def test_the_demo_fixture_is_a_hard_linked_copy_not_data_demo(demo_ws):
    got, demo = Path(demo_ws).resolve(), DEMO.resolve()
    assert got != demo and demo not in got.parents and got not in demo.parents
    # Hard links, not copies: the suite's time does not grow with the demo's 200 MB.
    some = next((demo / "thumbnails" / "shapes").iterdir())
    assert os.path.samefile(some, got / some.relative_to(demo))


def test_no_test_module_opens_data_demo_itself():
    """Only conftest.py names data/demo; every test reaches it through `demo_ws`."""
    pattern = re.compile(r"""\bDEMO\b(?!_)|["']data/demo\b|["']data["']\s*/\s*["']demo["']""")
    offenders = []
    for path in sorted((ROOT / "tests").glob("*.py")):
        if path.name in ("conftest.py", Path(__file__).name):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if pattern.search(code) and "provenance(" not in code and '"""' not in code:
                offenders.append(f"{path.name}:{n}: {line.strip()}")
    assert not offenders, "use the demo_ws fixture:\n" + "\n".join(offenders)


def _run(*args, cwd):
    subprocess.run(args, cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    """A git repository whose `data/demo` has two committed files."""
    root = tmp_path / "repo"
    demo = root / "data" / "demo"
    (demo / "sub").mkdir(parents=True)
    (demo / "workspace.json").write_text('{"name": "demo"}')
    (demo / "sub" / "t.parquet").write_bytes(b"committed")
    _run("git", "init", "-q", cwd=root)
    _run("git", "add", ".", cwd=root)
    _run("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "demo", cwd=root)
    return demo


def test_the_copy_is_what_git_committed_whatever_was_written_since(repo, tmp_path):
    (repo / "studies.parquet").write_bytes(b"exported by hand")  # a new table
    (repo / "workspace.json").write_text('{"name": "changed"}')  # written over (atomic rename)
    (repo / "sub" / "t.parquet").unlink()  # removed
    out = committed_copy(repo, tmp_path / "copy")
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == ["sub/t.parquet", "workspace.json"]
    assert (out / "workspace.json").read_text() == '{"name": "demo"}'
    assert (out / "sub" / "t.parquet").read_bytes() == b"committed"


def test_unchanged_files_are_hard_links(repo, tmp_path):
    out = committed_copy(repo, tmp_path / "copy")
    assert os.path.samefile(out / "sub" / "t.parquet", repo / "sub" / "t.parquet")


def test_outside_git_every_file_is_linked(tmp_path):
    src = tmp_path / "plain"
    src.mkdir()
    (src / "a.txt").write_text("a")
    out = committed_copy(src, tmp_path / "copy")
    assert os.path.samefile(out / "a.txt", src / "a.txt")
