"""The command line: one error root, one line per error, tracebacks only with --debug."""

import subprocess
import sys

import pytest

from conceptlens import __version__
from conceptlens.cli import main, parser
from tests.conftest import ROOT
from tests.factory import make_workspace


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"conceptlens {__version__}"


def test_bad_workspace_is_one_line_and_exit_1(tmp_path, capsys):
    code = main(["analyze", "all", "--workspace", str(tmp_path / "nowhere")])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and "workspace.json: not found" in err and "Traceback" not in err


def test_debug_shows_the_traceback(tmp_path):
    from conceptlens.workspace import WorkspaceError

    with pytest.raises(WorkspaceError):
        main(["--debug", "analyze", "all", "--workspace", str(tmp_path / "nowhere")])


def test_an_unexpected_error_is_still_one_line(tmp_path, capsys, monkeypatch):
    import conceptlens.analysis.runner as R

    def boom(*a, **k):
        raise KeyError("bug")

    monkeypatch.setattr(R, "run", boom)
    ws = make_workspace(tmp_path / "w", n_images=12, n_checkpoints=1)
    assert main(["analyze", "all", "--workspace", str(ws.root)]) == 1
    err = capsys.readouterr().err
    assert "unexpected KeyError" in err and "--debug" in err and "Traceback" not in err


def test_workspace_commands_share_options():
    """--workspace and --quiet come from one parent parser: every workspace command has both."""
    sub = next(a for a in parser()._actions if a.dest == "command")
    for name in ("extract", "caption"):
        opts = {o for a in sub.choices[name]._actions for o in a.option_strings}
        assert {"--workspace", "--quiet"} <= opts, name
    analyze = next(a for a in sub.choices["analyze"]._actions if a.dest == "analysis")
    for name, p in analyze.choices.items():
        opts = {o for a in p._actions for o in a.option_strings}
        assert {"--workspace", "--quiet", "--force", "--checkpoint", "--seed"} <= opts, name


def test_analysis_options_have_help():
    from conceptlens.analysis import registered

    for a in registered():
        for o in a.options:
            assert len(o.help) > 10, (a.name, o.name)


def test_validate_runs_without_pipeline_packages(tmp_path):
    """`conceptlens validate` needs only requirements.txt: no torch, no umap, no tqdm."""
    ws = make_workspace(tmp_path / "w", n_images=12, n_checkpoints=1, derived=True)
    script = f"""
import sys
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {{"torch", "torchvision", "open_clip", "transformers", "timm",
                                   "sentence_transformers", "umap", "tqdm", "sklearn"}}:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Blocker())
from conceptlens.cli import main
sys.exit(main(["validate", {str(ws.root)!r}]))
"""
    r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "valid workspace" in r.stdout


def test_every_analysis_module_imports_on_its_own():
    """`conceptlens.analysis.MODULES` lists the analysis modules, which import only base,
    common and metrics: no import order may break."""
    from conceptlens.analysis import registered

    mods = {a.run.__module__ for a in registered()}
    for m in sorted(mods):
        r = subprocess.run([sys.executable, "-c", f"import {m}"], cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 0, (m, r.stderr[-500:])
