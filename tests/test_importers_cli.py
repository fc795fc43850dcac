"""conceptlens/importers/cli.py: the import reports list every skipped image, warning and note, and
`conceptlens import cub|mit-states|hsj` writes into the workspace."""

from __future__ import annotations

from conceptlens.importers import images as imp
from conceptlens.workspace import Workspace
from tests.test_compmap import make_cub


# ---- cli: the import reports --------------------------------------------------------------
def _result():
    return imp.Result(
        dataset="d",
        n_images=5,
        made=3,
        reused=0,
        skipped=[("a.png", "truncated"), ("b.png", "not an image")],
        notes=["note one", "note two"],
        seconds=1.0,
        warnings=["warn one", "warn two"],
    )


def test_the_images_report_lists_every_skipped_image_and_warning(tmp_path, capsys, monkeypatch):
    """first_item on the report's loops: the first skipped image and the first warning were
    printed as many times as there are, the others never."""
    from conceptlens.cli import main
    from conceptlens.importers import cli

    monkeypatch.setattr(cli, "listing", lambda *a, **k: None)
    monkeypatch.setattr(imp, "import_images", lambda *a, **k: _result())
    argv = ["import", "images", "--workspace", str(tmp_path), "--dataset", "d", str(tmp_path)]
    assert main([*argv, "--format", "imagefolder", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "  a.png: truncated\n  b.png: not an image\n" in out
    assert "note: note one\nnote: note two\n" in out
    assert err.count("warning: warn one\n") == 1 and err.count("warning: warn two\n") == 1


def test_the_compmap_report_lists_every_skipped_image_and_note(capsys):
    """first_item on the CUB / MIT-States report's loops: the first skipped image and the
    first note were printed as many times as there are, the others never."""
    from conceptlens.importers import cli

    cli._compmap_report(_result(), "d", "W")
    out = capsys.readouterr().out
    assert "  skipped a.png: truncated\n  skipped b.png: not an image\n" in out
    assert "note: note one\nnote: note two\n" in out


def test_import_cub_on_the_command_line_writes_into_the_workspace(tmp_path, capsys):
    """swap_args of `import_cub(args.workspace, args.source, ...)`: the release folder was
    taken for the workspace and the workspace for the release."""
    from conceptlens.cli import main

    src = make_cub(tmp_path / "CUB_200_2011")
    before = sorted(p.name for p in src.iterdir())
    assert main(["init", "--workspace", str(tmp_path / "ws")]) == 0
    argv = ["import", "cub", "--workspace", str(tmp_path / "ws"), str(src), "--quiet", "--workers", "1"]
    assert main(argv) == 0
    assert "dataset cub: 6 images" in capsys.readouterr().out
    assert len(Workspace(tmp_path / "ws").read("images").to_pandas()) == 6
    assert sorted(p.name for p in src.iterdir()) == before


def test_import_mit_states_on_the_command_line_writes_into_the_workspace(tmp_path, capsys):
    """swap_args of `import_mit_states(args.workspace, args.source, ...)` (the folders swapped)
    and of `_compmap_report(r, args.dataset, ...)` (the dataset's name taken for the result)."""
    from conceptlens.cli import main
    from tests.test_compmap import make_mit_states

    src = make_mit_states(tmp_path / "mit")
    assert main(["init", "--workspace", str(tmp_path / "ws")]) == 0
    argv = [
        "import",
        "mit-states",
        "--workspace",
        str(tmp_path / "ws"),
        str(src),
        "--quiet",
        "--workers",
        "1",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "dataset mit-states: 6 images" in out and "note: skipped 1 image folder(s)" in out
    assert len(Workspace(tmp_path / "ws").read("images").to_pandas()) == 6


def test_import_hsj_on_the_command_line_writes_into_the_workspace(tmp_path, capsys):
    """swap_args of `import_hsj(args.workspace, args.source, ...)`: the release folder was
    taken for the workspace and the workspace for the release."""
    from conceptlens.cli import main
    from tests import test_similarity as TS

    ws = TS.make_workspace(tmp_path / "ws")
    ids, Z = TS.F.people_embedding(ws)
    src = TS.F.write_release(tmp_path / "hsj", TS.F.simulate(ids, Z, 30, catch_every=10), ids)
    assert main(["import", "hsj", "--workspace", str(ws.root), str(src), "--dataset", "toy"]) == 0
    assert "30 similarity trials" in capsys.readouterr().out
    assert len(ws.read("similarity_trials", dataset="toy").to_pandas()) == 30
