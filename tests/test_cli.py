"""The command line: one error root, one line per error, tracebacks only with --debug."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conceptlens import __version__
from conceptlens.cli import main, parser
from harness.factory import make_workspace
from tests.conftest import ROOT


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
sys.exit(main(["validate", "--workspace", {str(ws.root)!r}]))
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


# ---- one shape: --workspace W everywhere -------------------------------------------------------------
# Commands that never read or write a workspace (the answers store only).
NO_WORKSPACE = {"study close", "study open"}
# The old positional form kept for one release, with what else each command needs to parse.
OLD_FORMS = {
    "validate": [],
    "migrate": [],
    "init": [],
    "import images": ["SRC", "--dataset", "d"],
    "import features": ["FILE", "--checkpoint", "c", "--dataset", "d"],
    "import captions": ["FILE", "--captioner", "n"],
    "import cub": ["DIR"],
    "import mit-states": ["DIR"],
    "import hsj": ["SRC"],
}


def leaf_commands(p=None, path=()) -> dict[str, argparse.ArgumentParser]:
    """Every command of the tree ("import images", "analyze all", ...) -> its parser."""
    p = p or parser()
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {" ".join(path): p}
    return {
        k: v
        for a in subs
        for name, c in a.choices.items()
        for k, v in leaf_commands(c, (*path, name)).items()
    }


def test_every_command_names_its_workspace_with_dash_dash_workspace():
    """Walks the whole tree: a new command without `--workspace` fails here (or joins NO_WORKSPACE)."""
    leaves = leaf_commands()
    assert {"validate", "init", "import images", "extract", "figures", "study list"} <= set(leaves)
    without = set()
    for name, p in leaves.items():
        ws = [a for a in p._actions if "--workspace" in a.option_strings]
        if not ws:
            without.add(name)
            continue
        assert ws[0].dest == "workspace" and ws[0].metavar == "W", name
        assert ws[0].help and "workspace" in ws[0].help, name
        # no visible positional workspace (the old form is a hidden alias)
        shown = [a.dest for a in p._get_positional_actions() if a.help != argparse.SUPPRESS]
        assert not {"workspace", "path", "workspace_alias"} & set(shown), name
    assert without == NO_WORKSPACE


def _parse(argv, capsys):
    ns = parser().parse_args(argv)
    return ns, capsys.readouterr().err


@pytest.mark.parametrize("command", sorted(OLD_FORMS))
def test_the_old_positional_form_still_works_with_one_deprecation_line(command, capsys):
    rest = OLD_FORMS[command]
    ns, err = _parse([*command.split(), "--workspace", "my ws", *rest], capsys)
    assert ns.workspace == "my ws" and err == ""
    ns, err = _parse([*command.split(), "my ws", *rest], capsys)
    assert ns.workspace == "my ws" and not hasattr(ns, "workspace_alias")
    assert err == f"conceptlens: `conceptlens {command} my ws` is deprecated; use `--workspace my ws`\n"
    for positional in ("source", "file"):  # the other positionals keep their values
        if hasattr(ns, positional):
            assert getattr(ns, positional) == rest[0], command


@pytest.mark.parametrize("command", sorted(OLD_FORMS))
def test_the_workspace_both_ways_or_neither_is_one_clear_error(command, capsys):
    rest = OLD_FORMS[command]
    with pytest.raises(SystemExit) as e:
        parser().parse_args([*command.split(), "old", "--workspace", "new", *rest])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert e.value.code == 2
    assert last == (
        f"conceptlens {command}: error: the workspace is given twice (old and --workspace new): "
        "give only --workspace W"
    )
    with pytest.raises(SystemExit) as e:
        parser().parse_args([*command.split(), *rest])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert e.value.code == 2
    assert last == f"conceptlens {command}: error: the workspace is missing: give --workspace W"


def test_a_command_without_an_old_form_requires_dash_dash_workspace(capsys):
    with pytest.raises(SystemExit):
        parser().parse_args(["extract", "--dataset", "d", "--model", "m"])
    assert "the following arguments are required: --workspace" in capsys.readouterr().err


def test_the_old_form_with_options_between_its_positionals(capsys):
    """`import images W --dataset D SOURCE` (the README's old order): W is still the workspace
    and SOURCE the source, though argparse before 3.12 hands W to SOURCE first."""
    ns, err = _parse(["import", "images", "W", "--dataset", "D", "S", "--quiet"], capsys)
    assert (ns.workspace, ns.source, ns.dataset) == ("W", "S", "D") and "deprecated" in err
    ns, err = _parse(["import", "images", "S", "--dataset", "D", "--workspace", "W"], capsys)
    assert (ns.workspace, ns.source) == ("W", "S") and err == ""
    with pytest.raises(SystemExit):  # one positional too many is still refused
        parser().parse_args(["import", "images", "W", "--dataset", "D", "S", "T"])
    assert "unrecognized arguments:" in capsys.readouterr().err


def test_demo_out_is_an_alias_of_dash_dash_workspace(capsys):
    ns, err = _parse(["demo", "build"], capsys)
    assert Path(ns.workspace).parts[-2:] == ("data", "demo") and err == ""  # the committed demo
    ns, err = _parse(["demo", "build", "--out", "o", "--stages", "data"], capsys)
    assert (
        ns.workspace == "o" and "`conceptlens demo build --out o` is deprecated; use `--workspace o`" in err
    )
    ns, err = _parse(["demo", "scale", "--workspace", "s"], capsys)
    assert ns.workspace == "s" and err == ""
    with pytest.raises(SystemExit):
        parser().parse_args(["demo", "scale"])
    assert "the workspace is missing: give --workspace W" in capsys.readouterr().err


def test_the_old_form_runs_end_to_end(tmp_path, capsys):
    ws = make_workspace(tmp_path / "w", n_images=12, n_checkpoints=1)
    assert main(["validate", str(ws.root)]) == 0
    out, err = capsys.readouterr()
    assert out == f"{ws.root}: valid workspace\n"
    assert (
        err == f"conceptlens: `conceptlens validate {ws.root}` is deprecated; use `--workspace {ws.root}`\n"
    )
    assert main(["validate", "--workspace", str(ws.root)]) == 0
    assert capsys.readouterr().err == ""


def test_engine_is_declared_once():
    """Every `--engine` of the tree has the same choices and help (cliargs.add_engine)."""
    from conceptlens.cliargs import ENGINE_HELP, ENGINES

    seen = []
    for name, p in leaf_commands().items():
        if name.split()[0] in PENDING_ENGINE:
            continue
        for a in p._actions:
            if "--engine" in a.option_strings:
                seen.append(name)
                assert tuple(a.choices) == ENGINES and a.help.startswith(ENGINE_HELP), name
    assert "extract" in seen


# `analyze` takes its --engine from conceptlens/analysis (being rewritten apart); it calls
# cliargs.add_engine once merged, and then leaves this set.
PENDING_ENGINE: set[str] = set()  # commands whose --engine is still their own: none


def test_study_list_by_workspace(factory_copy, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'answers.sqlite'}"
    common = ["--store", url, "--kind", "coherence", "--checkpoint", "ck0", "--k", "4", "--refs", "5"]
    assert main(["study", "create", "--workspace", str(factory_copy), *common, "--id", "s1"]) == 0
    other = tmp_path / "other"
    assert main(["init", "--workspace", str(other)]) == 0
    capsys.readouterr()
    assert main(["study", "list", "--store", url, "--workspace", str(factory_copy), "--json"]) == 0
    assert [r["study_id"] for r in json.loads(capsys.readouterr().out)] == ["s1"]
    assert main(["study", "list", "--store", url, "--workspace", str(other)]) == 0
    assert capsys.readouterr().out.startswith("no study in ")
    assert main(["study", "list", "--store", url]) == 0  # without: every study of the store
    assert capsys.readouterr().out.startswith("1 study in ")
    assert main(["study", "list", "--store", url, "--workspace", str(tmp_path / "nowhere")]) == 1
    assert "workspace.json: not found" in capsys.readouterr().err


def test_demo_stages_are_checked_before_any_stage_runs(capsys):
    assert parser().parse_args(["demo", "build", "--stages", "data, models"]).stages == ["data", "models"]
    assert parser().parse_args(["demo", "build"]).stages == ["data", "models", "concepts", "real", "analysis"]
    assert parser().parse_args(["demo", "build", "--only", "real"]).stages == ["real"]
    with pytest.raises(SystemExit):
        parser().parse_args(["demo", "build", "--stages", "data,modles"])
    assert "argument --stages: 'modles': not a stage; choose from data, models" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser().parse_args(["demo", "build", "--only", "reel"])
    assert "argument --only: 'reel': not a stage" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # one or the other
        parser().parse_args(["demo", "build", "--only", "real", "--stages", "data"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_analyze_says_what_it_wrote_and_when_it_wrote_nothing(tmp_path, capsys):
    """`analyze NAME` counts the units it wrote; a run that wrote none says so instead of
    claiming analyses written (issue 47: "nothing to analyse" then "analyses written")."""
    ws = make_workspace(tmp_path / "ws", n_checkpoints=2)
    assert main(["analyze", "clustering", "--workspace", str(ws.root), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "clustering: analyses written" in out and "(2 unit(s)" in out, out
    assert main(["analyze", "clustering", "--workspace", str(ws.root), "--quiet"]) == 0  # all done
    out = capsys.readouterr().out
    assert "clustering: nothing written" in out and "analyses written" not in out, out
