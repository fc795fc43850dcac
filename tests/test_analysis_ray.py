"""`conceptlens analyze --engine ray` (conceptlens/analysis/engines.py): the same tables as
the local engine, an error named by its unit while the other units complete, resume."""

from __future__ import annotations

import os
import sys

import numpy as np
import pyarrow.dataset as pads
import pytest

from conceptlens.analysis import by_name, engines, runner
from conceptlens.analysis.base import EVERYTHING, Unit
from conceptlens.errors import ConceptLensError
from conceptlens.workspace import Workspace
from harness.factory import make_workspace, write_features
from tests.conftest import copy_ws

KS = [4, 7]
TABLES = ("clusters", "cluster_metrics", "checkpoint_metrics")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """Three checkpoints of 600 images: more than one of scikit-learn's k-means chunks (256),
    so a unit's result would move with its threads or the order units run in."""
    root = tmp_path_factory.mktemp("ray") / "ws"
    make_workspace(root, n_images=600, dim=16)
    return root


@pytest.fixture(scope="module")
def ray_local():
    """A local Ray of 2 CPUs, started once for the module (startup takes seconds)."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        path = os.pathsep.join(p for p in [os.getcwd(), *sys.path] if p)
        ray.init(
            num_cpus=2,
            runtime_env={"env_vars": {"PYTHONPATH": path}},
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    yield ray
    ray.shutdown()


def _sorted(root, name):
    t = pads.dataset(root / name, format="parquet", partitioning="hive").to_table()
    keys = [c for c in ("checkpoint_id", "k", "cluster", "image_id") if c in t.column_names]
    return t.sort_by([(c, "ascending") for c in keys]).select(sorted(t.column_names))


def _runs(root, name) -> list[str]:
    ws = Workspace(root)
    if not ws.has("analysis_runs", analysis=name):
        return []
    return sorted(ws.read("analysis_runs", analysis=name)["unit"].to_pylist())


def _mtimes(root, name) -> dict:
    return {p: p.stat().st_mtime_ns for p in (root / name).rglob("*.parquet")}


def _analyze(root, **kw):
    for name, opts in (("clustering", {"k": KS}), ("cluster_metrics", {})):
        runner.run(root, name, opts, progress_bars=False, with_dependencies=False, **kw)


@pytest.mark.slow
def test_ray_writes_the_tables_of_the_local_engine_and_skips_done_units(base, tmp_path, ray_local):
    local, on_ray = copy_ws(base, tmp_path / "local"), copy_ws(base, tmp_path / "ray")
    _analyze(local, threads=1)
    _analyze(on_ray, engine="ray", workers=2)
    for name in TABLES:
        a, b = _sorted(local, name), _sorted(on_ray, name)
        assert a.num_rows > 0 and a.equals(b), name
    units = [f"checkpoint_id=ck{c}/k={k}" for c in range(3) for k in KS]
    assert _runs(on_ray, "clustering") == _runs(local, "clustering") == units
    assert _runs(on_ray, "cluster_metrics") == units
    # Another seed moves these clusters: a task given the wrong seed would be caught above.
    other = copy_ws(base, tmp_path / "seed1")
    runner.run(other, "clustering", {"k": [7], "seed": 1}, checkpoint="ck2", progress_bars=False)
    part = {"checkpoint_id": "ck2", "k": 7}
    assert not Workspace(other).read("clusters", **part).equals(Workspace(on_ray).read("clusters", **part))

    # Resume: a second run finds every unit done; a removed partition is the only one redone.
    before = {n: _mtimes(on_ray, n) for n in TABLES}
    _analyze(on_ray, engine="ray")
    assert {n: _mtimes(on_ray, n) for n in TABLES} == before
    assert len(_runs(on_ray, "clustering")) == 6 and len(_runs(on_ray, "cluster_metrics")) == 6
    gone = Workspace(on_ray).partition_dir("clusters", checkpoint_id="ck1", k=7)
    for f in gone.iterdir():
        f.unlink()
    gone.rmdir()
    runner.run(on_ray, "clustering", {"k": KS}, progress_bars=False, engine="ray")
    assert _runs(on_ray, "clustering") == sorted(units + ["checkpoint_id=ck1/k=7"])
    after = _mtimes(on_ray, "clusters")
    assert {p: t for p, t in after.items() if gone not in p.parents} == {
        p: t for p, t in before["clusters"].items() if gone not in p.parents
    }
    assert _sorted(on_ray, "clusters").equals(_sorted(local, "clusters"))  # same seed, same clusters


@pytest.mark.slow
def test_an_error_names_its_unit_and_the_other_units_complete(base, tmp_path, ray_local, capsys):
    from conceptlens.cli import main

    root = copy_ws(base, tmp_path / "ws")
    ws = Workspace(root)
    full = ws.read("features", checkpoint_id="ck1")
    # ck1 keeps 5 images: its k=4 clustering works, its k=7 cannot.
    ids, emb = full["image_id"].to_pylist(), np.stack(full["embedding"].to_numpy(False))
    write_features(ws, "ck1", ids[:5], emb[:5])
    cmd = ["analyze", "clustering", "--workspace", str(root), "--k", "4", "7", "--engine", "ray", "--quiet"]
    rc = main(cmd)
    err = capsys.readouterr().err
    assert rc == 1 and "1 of 6 unit(s) failed" in err and "checkpoint_id=ck1/k=7: ValueError: k=7" in err
    assert len(err.strip().splitlines()) == 1
    done = sorted(f"checkpoint_id=ck{c}/k={k}" for c in range(3) for k in KS if (c, k) != (1, 7))
    assert _runs(root, "clustering") == done
    assert sorted(f"checkpoint_id={p['checkpoint_id']}/k={p['k']}" for p in ws.partitions("clusters")) == done

    # The checkpoint repaired, the same command computes the unit that failed and ck1's k=4
    # again (its features changed: the clustering fingerprints them), nothing else.
    write_features(ws, "ck1", ids, emb)
    before = {p: t for p, t in _mtimes(root, "clusters").items() if "checkpoint_id=ck1" not in str(p)}
    assert main(cmd) == 0
    assert _runs(root, "clustering") == sorted(done + ["checkpoint_id=ck1/k=4", "checkpoint_id=ck1/k=7"])
    assert {p: t for p, t in _mtimes(root, "clusters").items() if p in before} == before


# ---- without Ray ----------------------------------------------------------------------------
def test_a_task_reports_each_unit_and_goes_on_after_an_error(base, tmp_path):
    """run_group is a Ray task's body; called here in-process."""
    root = copy_ws(base, tmp_path / "ws")
    a = by_name()["clustering"]
    opts = {**a.option_defaults(), "k": [3]}
    bad = Unit({"checkpoint_id": "ck0", "k": 700}, "ck0")  # more clusters than images
    good = Unit({"checkpoint_id": "ck0", "k": 3}, "ck0")
    out = list(engines.run_group(str(root), "clustering", [bad, good], opts, EVERYTHING))
    assert [r.unit for r in out] == [bad, good]
    assert out[0].error.startswith("ValueError: k=700") and "Traceback" in out[0].trace
    assert out[1].error is None and Workspace(root).has("clusters", checkpoint_id="ck0", k=3)
    assert not Workspace(root).has("clusters", checkpoint_id="ck0", k=700)


def test_units_of_one_checkpoint_share_a_task():
    u = Unit
    units = [
        u({"checkpoint_id": "a", "k": 2}, "a"),
        u({"checkpoint_id": "b", "k": 2}, "b"),
        u({"checkpoint_id": "a", "k": 5}, "a"),
        u({"dataset": "x"}),
        u({"dataset": "y"}),
    ]
    assert engines.groups(units) == [[units[0], units[2]], [units[1]], [units[3]], [units[4]]]


def test_unit_threads_limits_openmp_and_blas():
    from threadpoolctl import threadpool_info

    with engines.unit_threads(1):
        inside = threadpool_info()
    assert inside and all(p["num_threads"] == 1 for p in inside)
    assert any(p["user_api"] == "openmp" for p in inside)  # scikit-learn's k-means threads


def test_engine_options_are_checked(base):
    with pytest.raises(ValueError, match="--engine"):
        runner.run(base, "clustering", engine="dask", progress_bars=False)
    with pytest.raises(ValueError, match="--workers .*--engine ray"):
        runner.run(base, "clustering", workers=2, progress_bars=False)
    with pytest.raises(ValueError, match="--threads must be at least 1"):
        runner.run(base, "clustering", engine="ray", threads=0, progress_bars=False)
    with pytest.raises(ConceptLensError, match="checkpoint 'nope'"):
        runner.run(base, "clustering", engine="ray", checkpoint="nope", progress_bars=False)
