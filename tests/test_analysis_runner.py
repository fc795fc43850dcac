"""conceptlens/analysis/runner.py: options given vs stored, the log, missing and skipped units,
dependencies run in order, and the Ray driver loop. Each test is written against a data-flow bug
(issue 29; tools/dataflow_mutants.py): a filter not applied, the first element used for every one,
two arguments swapped, a sort the wrong way."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptlens.analysis import base, by_name, engines, runner
from conceptlens.analysis.base import Unit
from conceptlens.workspace import Workspace
from tests.helpers_analysis_workspace import build, write_clusters


# ---- runner.py -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_ds(tmp_path_factory):
    """Checkpoints a (toy) and b (other), 8 images each, nothing analysed."""
    return build(
        tmp_path_factory.mktemp("two") / "ws",
        [{"checkpoint_id": "a"}, {"checkpoint_id": "b", "dataset": "other"}],
        datasets=("toy", "other"),
    )


@pytest.fixture
def fresh(two_ds, tmp_path):
    from tests.conftest import copy_ws

    return Workspace(copy_ws(two_ds.root, tmp_path / "ws"))


def logged_options(ws, name):
    """The options of every analysis_runs row of `name`."""
    return [
        json.loads(o)
        for f in ws.partition_files("analysis_runs", analysis=name)
        for o in pq.read_table(f)["options"].to_pylist()
    ]


def test_a_run_logs_its_own_public_options_and_ignores_none(fresh):
    runner.run(fresh.root, ["clustering"], {"k": [2], "n_init": None, "trials": 30}, progress_bars=False)
    opts = logged_options(fresh, "clustering")
    assert len(opts) == 2
    assert sorted(map(tuple, (p.values() for p in fresh.partitions("clusters")))) == [("a", 2), ("b", 2)]
    assert runner.missing(fresh.root, ["clustering"]) == {"clustering": []}  # each unit computed, once
    for o in opts:
        assert o == {
            "seed": 0,
            "k": [2],
            "n_init": 3,
            "kmeans": "auto",
        }  # no _force, no other analysis' trials


def test_a_dataset_restricts_the_units_to_its_checkpoints(fresh):
    runner.run(fresh.root, ["clustering"], {"k": [2]}, dataset="other", progress_bars=False)
    assert fresh.partitions("clusters") == [{"checkpoint_id": "b", "k": 2}]


def test_run_arguments_are_all_checked(fresh):
    with pytest.raises(ValueError, match="--threads must be at least 1, got 0"):
        runner.run(fresh.root, ["clustering"], threads=0, progress_bars=False)
    with pytest.raises(ValueError, match=r"unknown option\(s\) aa, zz"):
        runner.run(fresh.root, ["clustering"], {"zz": 1, "aa": 2}, progress_bars=False)


def test_show_writes_a_list_option_as_its_values():
    assert runner._show([2, "x"]) == "2 x"
    assert runner._show(3) == "3"


def test_missing_lists_the_analyses_named_and_their_dependencies(fresh):
    got = runner.missing(fresh.root, ["cluster_captions"])
    assert got == {"clustering": ["checkpoint_id=a/k=3", "checkpoint_id=b/k=3"], "cluster_captions": []}
    names = [a.name for a in runner.in_order(["cluster_metrics", "baselines"])]
    assert names == ["clustering", "cluster_metrics", "baselines"]


def _log(ws, name, unit, started, status, reason=None):
    a = by_name()[name]
    runner.log_run(ws, a, Unit(unit), a.option_defaults(), None, started, 0.0, status=status, reason=reason)


def test_skipped_reports_each_analysis_latest_skip_of_a_unit_still_due(fresh):
    ws = fresh
    for cid in ("a", "b"):
        write_clusters(ws, cid, 2)
    ua, ub = {"checkpoint_id": "a", "k": 2}, {"checkpoint_id": "b", "k": 2}
    # cluster_captions: both units skipped, a's twice (the later reason counts), then b's done
    # in the log (but its file is missing: still due, and not a skip any more).
    _log(ws, "cluster_captions", ua, "2026-01-01T00:00:02", "skipped", "new")
    _log(ws, "cluster_captions", ua, "2026-01-01T00:00:01", "skipped", "old")
    _log(ws, "cluster_captions", ub, "2026-01-01T00:00:01", "skipped", "b first")
    _log(ws, "cluster_captions", ub, "2026-01-01T00:00:03", "done")
    # cluster_metrics: a done run only; its unit is due, but no skip.
    _log(ws, "cluster_metrics", ua, "2026-01-01T00:00:01", "done")
    # baselines: one skipped unit
    _log(ws, "baselines", {"checkpoint_id": "b"}, "2026-01-01T00:00:01", "skipped", "no model")
    assert runner.skipped(ws.root) == {
        "cluster_captions": {"checkpoint_id=a/k=2": "new"},
        "baselines": {"checkpoint_id=b": "no model"},
    }


def test_skipped_lists_every_unit_of_an_analysis(fresh):
    ws = fresh
    for cid in ("a", "b"):
        write_clusters(ws, cid, 2)
    _log(ws, "cluster_captions", {"checkpoint_id": "a", "k": 2}, "2026-01-01T00:00:01", "skipped", "ra")
    _log(ws, "cluster_captions", {"checkpoint_id": "b", "k": 2}, "2026-01-01T00:00:01", "skipped", "rb")
    assert runner.skipped(ws.root) == {
        "cluster_captions": {"checkpoint_id=a/k=2": "ra", "checkpoint_id=b/k=2": "rb"}
    }


def test_log_rows_written_before_status_and_reason_read_as_done(fresh):
    d = fresh.root / "analysis_runs" / "analysis=clustering"
    d.mkdir(parents=True)
    pq.write_table(
        pa.table(
            {
                "unit": ["checkpoint_id=a/k=2"],
                "inputs": ["x"],
                "options": ["{}"],
                "version": ["2.0"],
                "started": ["2026-01-01T00:00:00"],
                "seconds": [1.0],
            }
        ),
        d / "old.parquet",
    )
    assert runner.last_runs(fresh) == {
        ("clustering", "checkpoint_id=a/k=2"): {"status": "done", "reason": None}
    }


def test_the_ray_driver_logs_each_result_and_passes_on_every_note(fresh, monkeypatch):
    """run_ray stood in for by the task body run in this process (engines.run_group) plus
    two notes per result: both units written and logged, every note kept once."""
    import dataclasses

    def fake_run_ray(root, name, units, opts, scope, workers, threads):
        for r in engines.run_group(str(root), name, units, opts, scope, threads or 1):
            yield dataclasses.replace(r, notes=(f"{r.unit.label} one", f"{r.unit.label} two", "shared"))

    monkeypatch.setattr(runner, "run_ray", fake_run_ray)
    ctx = runner.run(fresh.root, ["clustering"], {"k": [2, 3]}, engine="ray", progress_bars=False)
    assert sorted(map(tuple, (p.values() for p in fresh.partitions("clusters")))) == [
        ("a", 2),
        ("a", 3),
        ("b", 2),
        ("b", 3),
    ]
    assert runner.missing(fresh.root, ["clustering"]) == {"clustering": []}
    for u in ("checkpoint_id=a/k=2", "checkpoint_id=b/k=3"):
        assert f"{u} one" in ctx.notes and f"{u} two" in ctx.notes
    assert ctx.notes.count("shared") == 1
    assert len(logged_options(fresh, "clustering")) == 4


def _fake(name, depends=(), units=()):
    return base.Analysis(
        name=name,
        title=name,
        writes=("clusters",),
        units=lambda ctx, opts, scope: list(units),
        run=lambda c, u, o, s: None,
        depends=depends,
    )


@pytest.fixture
def diamond(monkeypatch):
    """x needs y and z, which both need w; z has a unit never computed."""
    fake = {
        "w": _fake("w"),
        "y": _fake("y", ("w",)),
        "z": _fake("z", ("w",), [Unit({"checkpoint_id": "a", "k": 9}, "a")]),
        "x": _fake("x", ("y", "z")),
    }
    monkeypatch.setattr(runner, "by_name", lambda: fake)
    return fake


def test_in_order_visits_every_dependency_once_dependencies_first(diamond):
    assert [a.name for a in runner.in_order(["x"])] == ["w", "y", "z", "x"]
    assert [a.name for a in runner.in_order(["y", "z"])] == ["w", "y", "z"]


def test_without_dependencies_a_run_says_which_dependency_is_not_done(diamond, fresh):
    ctx = runner.run(fresh.root, ["x"], with_dependencies=False, progress_bars=False)
    assert any(n.startswith("x: `z` is not done everywhere") for n in ctx.notes), ctx.notes


def test_a_run_with_dependencies_runs_each_analysis_in_order(monkeypatch, fresh):
    fake = {n: _fake(n, d) for n, d in (("w", ()), ("y", ("w",)), ("z", ("w",)), ("x", ("y", "z")))}
    monkeypatch.setattr(runner, "by_name", lambda: fake)
    ctx = runner.run(fresh.root, ["x"], progress_bars=False)
    assert ctx.notes == [f"{n}: nothing to analyse" for n in "wyzx"]


def test_analyze_all_skip_leaves_those_analyses_out_and_their_readers_catch_up(tmp_path, capsys):
    """`analyze all --skip A`: A writes nothing, the rest runs; a reader of A's tables (the
    scoreboard reads the dictionary's) is done without them and due again once A has run. A
    name that is no analysis is refused naming --skip, before anything runs."""
    from conceptlens.cli import main
    from harness.factory import make_workspace

    ws = make_workspace(tmp_path / "ws")
    root = str(ws.root)
    names = ["clustering", "dictionary", "scoreboard"]
    opts = {"k": [4], "units_max": 3, "directions": 4, "n_null": 10, "bootstrap": 10}
    ctx = runner.run(root, names, opts, skip=("dictionary",), progress_bars=False)
    assert "left out (--skip): dictionary" in ctx.notes
    assert not ws.files("dictionary_fit") and ws.files("clusters") and ws.files("scoreboard_scores")
    assert runner.missing(root, ["scoreboard"])["scoreboard"] == []
    dict_opts = {"methods": ["semi_nmf"], "atoms": 3, "stability": False}
    runner.run(root, ["dictionary"], dict_opts, with_dependencies=False, progress_bars=False)
    assert len(runner.missing(root, ["scoreboard"])["scoreboard"]) == len(ws.partitions("features"))
    with pytest.raises(SystemExit):
        main(["analyze", "all", "--workspace", root, "--skip", "no_such_analysis"])
    assert "--skip" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--skip: no analysis 'nope'"):
        runner.run(root, "all", {}, skip=("nope",), progress_bars=False)


def test_without_dependencies_runs_exactly_the_analyses_named(tmp_path):
    """`with_dependencies=False` with two analyses whose dependencies sort between them in
    the dependency order (the scoreboard depends on clustering and on the dictionary) runs
    those two and nothing else: taking the last two of the order ran clustering instead of
    the dictionary, and recomputed a workspace's clusterings under other options."""
    from harness.factory import make_workspace

    ws = make_workspace(tmp_path / "ws")
    runner.run(ws.root, ["clustering"], {"k": [4]}, progress_bars=False)
    before = {f: f.stat().st_mtime_ns for f in ws.files("clusters")}
    opts = {"methods": ["semi_nmf"], "atoms": 3, "stability": False, "units_max": 3, "directions": 4}
    opts |= {"n_null": 10, "bootstrap": 10, "n_init": 2}  # n_init: clustering would recompute
    runner.run(ws.root, ["dictionary", "scoreboard"], opts, progress_bars=False, with_dependencies=False)
    assert {f: f.stat().st_mtime_ns for f in ws.files("clusters")} == before
    assert ws.files("dictionary_fit") and ws.files("scoreboard_scores")
    logged = {p["analysis"] for p in ws.partitions("analysis_runs")}
    assert logged == {"clustering", "dictionary", "scoreboard"}
