"""What a run is restricted to reaches every analysis as an argument of its own (issue 40,
item 4): `base.Scope` (checkpoint, dataset, force), never keys such as `_checkpoint`
hidden among the options. The options an analysis is given, stores and logs are exactly
the ones it declares.

The runner-level tests stand in for each analysis' `run` a recorder that computes
nothing (it raises `Skipped`), and keep its real `units`: what is checked is which units
the runner asks for and what it hands them, for every registered analysis at once. The
workspace is `two_datasets` (tests/helpers_analysis_inputs.py): checkpoints ck0-ck2 of a
training run of `toy`, ck8 of dataset `other`, so that every analysis has a unit outside
the scope of ck1 or of ck8."""

from __future__ import annotations

import dataclasses
import json
import os

import pyarrow.parquet as pq
import pytest

from conceptlens.analysis import by_name, engines, registered, runner
from conceptlens.analysis.base import EVERYTHING, Scope, Skipped, Unit, run_checkpoints
from conceptlens.analysis.common import Context
from conceptlens.workspace import Workspace
from tests.conftest import copy_ws
from tests.helpers_analysis_inputs import two_datasets  # noqa: F401  (a fixture)

NAMES = [a.name for a in registered()]


@pytest.fixture
def root(two_datasets, tmp_path):  # noqa: F811
    return copy_ws(two_datasets, tmp_path / "ws")


@pytest.fixture
def recorded(monkeypatch):
    """analysis name -> the calls the runner makes of it: ("units" | "run", opts, scope,
    unit). Each analysis keeps its real `units`; its `run` records and skips the unit."""
    calls: dict[str, list] = {n: [] for n in NAMES}
    fakes = {}
    for a in registered():

        def units(ctx, opts, scope, a=a):
            calls[a.name].append(("units", dict(opts), scope, None))
            return a.units(ctx, opts, scope)

        def run(ctx, unit, opts, scope, a=a):
            calls[a.name].append(("run", dict(opts), scope, unit))
            raise Skipped("recorded by the test, not computed")

        fakes[a.name] = dataclasses.replace(a, units=units, run=run)
    monkeypatch.setattr(runner, "by_name", lambda: fakes)
    return calls


def attempted(calls: list) -> dict:
    """label -> unit, of the units the runner ran (a Unit holds a dict: not hashable)."""
    return {u.label: u for what, _, _, u in calls if what == "run"}


def belongs(ctx: Context, unit: Unit, cid: str) -> bool:
    """Whether `unit` is within the scope of checkpoint `cid`: a unit of a checkpoint is
    that checkpoint's, a unit of a sequence holds it, a unit of a dataset (or of a VL
    model of a dataset) is that of its dataset."""
    dataset = str(ctx.checkpoint_row(cid)["dataset"])
    p = unit.partition
    if unit.checkpoint_id is not None or "checkpoint_id" in p:
        return (unit.checkpoint_id or p["checkpoint_id"]) == cid
    if "run" in p:
        return cid in set(run_checkpoints(ctx, unit)["checkpoint_id"])
    if "dataset" in p:
        return p["dataset"] == dataset
    if "vl_model" in p:
        vl = ctx.table("vl_models")
        return vl.loc[vl["vl_model_id"] == p["vl_model"], "dataset"].iloc[0] == dataset
    raise AssertionError(f"a unit of a kind this test does not know: {unit.label} (teach `belongs`)")


# ---- (a) the options are the declared ones, the scope an argument -------------------------------
def test_every_analysis_refuses_an_underscore_or_undeclared_option():
    for a in registered():
        opts = a.option_defaults()
        assert a.check_options(opts) is opts
        for odd in ("_checkpoint", "_force", "_anything"):
            with pytest.raises(ValueError, match=f"{a.name}.*'{odd}' starts with `_`"):
                a.check_options({**opts, odd: None})
        with pytest.raises(ValueError, match=f"{a.name}.*'nope' is not declared"):
            a.check_options({**opts, "nope": 1})
        with pytest.raises(ValueError, match="seed not given"):
            a.check_options({k: v for k, v in opts.items() if k != "seed"})


def test_a_hidden_option_is_refused_by_the_runner_and_by_a_ray_task(root):
    with pytest.raises(ValueError, match="unknown option.*_checkpoint.*arguments of run"):
        runner.run(root, "clustering", {"_checkpoint": "ck1"}, progress_bars=False)
    a = by_name()["clustering"]
    unit = Unit({"checkpoint_id": "ck1", "k": 4}, "ck1")
    with pytest.raises(ValueError, match="'_force' starts with `_`"):
        opts = {**a.option_defaults(), "_force": True}
        list(engines.run_group(str(root), a.name, [unit], opts, EVERYTHING))


def test_every_analysis_is_given_its_declared_options_and_the_scope_apart(root, recorded):
    """Every analysis, its dependencies' units checked too (with_dependencies=False): each
    call of `units` and of `run` gets exactly the declared options and the run's Scope, and
    every `analysis_runs` row stores exactly the declared options."""
    runner.run(root, NAMES, checkpoint="ck1", force=True, with_dependencies=False, progress_bars=False)
    scope = Scope(checkpoint="ck1", dataset=None, force=True)
    ws = Workspace(root)
    for a in registered():
        declared = set(a.option_defaults())
        calls = recorded[a.name]
        assert any(what == "units" for what, *_ in calls), f"{a.name}: its units were never asked for"
        for what, opts, got, _ in calls:
            assert set(opts) == declared, (a.name, what, sorted(set(opts) ^ declared))
            assert got == scope, (a.name, what, got)
        for f in ws.partition_files("analysis_runs", analysis=a.name):
            for stored in pq.read_table(f).column("options").to_pylist():
                assert set(json.loads(stored)) == declared, (a.name, stored)
    assert any(attempted(c) for c in recorded.values())


# ---- (b) a run of one checkpoint computes only that checkpoint's units ---------------------------
@pytest.mark.parametrize("cid", ["ck1", "ck8"])
def test_a_run_of_one_checkpoint_computes_only_and_all_of_its_units(root, recorded, cid):
    """Per analysis: every unit attempted is within the scope of `cid` (an analysis that
    ignores the scope computes other checkpoints' units), and every unit of the whole
    workspace within it is attempted (one that drops them computes too little). A named
    checkpoint may add units (a concept model's clustering is computed only when named)."""
    runner.run(root, NAMES, checkpoint=cid, force=True, progress_bars=False)
    ctx = Context(Workspace(root), progress=False)
    for a in registered():
        everything = a.units(ctx, a.option_defaults(), EVERYTHING)
        got = attempted(recorded[a.name])
        outside = sorted(label for label, u in got.items() if not belongs(ctx, u, cid))
        assert not outside, f"{a.name} at --checkpoint {cid} computed units of another: {outside}"
        left = sorted(u.label for u in everything if belongs(ctx, u, cid) and u.label not in got)
        assert not left, f"{a.name} at --checkpoint {cid} left out its units {left}"


def test_every_analysis_has_units_outside_one_of_the_scopes_above(root):
    """What makes the test above able to fail for every analysis: each one has, in this
    workspace, a unit outside the scope of ck1 or of ck8."""
    ctx = Context(Workspace(root), progress=False)
    for a in registered():
        everything = a.units(ctx, a.option_defaults(), EVERYTHING)
        assert any(not belongs(ctx, u, c) for u in everything for c in ("ck1", "ck8")), a.name


# ---- (c) force recomputes, its absence reuses ---------------------------------------------------
def test_force_reaches_every_analysis_and_only_force_recomputes_a_done_unit(root, recorded, monkeypatch):
    """Every unit counted as done (`due` says so): without force no analysis computes any;
    with force every analysis computes every unit of its, each told force=True."""
    monkeypatch.setattr(runner, "due", lambda ctx, a, unit, given=None: None)
    runner.run(root, NAMES, progress_bars=False)
    assert {n: attempted(c) for n, c in recorded.items() if attempted(c)} == {}
    runner.run(root, NAMES, force=True, progress_bars=False)
    ctx = Context(Workspace(root), progress=False)
    for a in registered():
        want = {u.label for u in a.units(ctx, a.option_defaults(), EVERYTHING)}
        assert set(attempted(recorded[a.name])) == want, a.name
        assert all(s == Scope(force=True) for what, _, s, _ in recorded[a.name] if what == "run"), a.name


# As tests/test_analysis_similarity.py fits: one dimensionality, two members, 20 epochs (about a second)
SIMILARITY = {
    "dims": [2],
    "members": 2,
    "screen_members": 2,
    "max_epochs": 20,
    "n_boot": 20,
    "batch_trials": 512,
}


def _stamps(ws: Workspace, table: str) -> dict:
    """Each file of the partition: (inode, mtime): the atomic writer gives a rewritten one a new inode."""
    return {f: (os.stat(f).st_ino, os.stat(f).st_mtime_ns) for f in ws.partition_files(table, dataset="toy")}


def test_similarity_refits_within_a_due_unit_only_when_forced(factory_copy):
    """Within a unit, similarity reuses its fitted embedding when the trials and the fit
    options are unchanged: a unit due for a scoring option (n_boot) keeps the fit, the same
    unit forced fits again. Catches the force of the run not reaching the analysis (the
    fit never redone), or taken as always on (a fit redone for every scoring change)."""
    ws = Workspace(factory_copy)

    def analyse(opts=(), force=False):
        runner.run(ws.root, "similarity", {**SIMILARITY, **dict(opts)}, force=force, progress_bars=False)

    def logged() -> int:
        return len(ws.partition_files("analysis_runs", analysis="similarity"))

    analyse(force=True)
    fitted, n = _stamps(ws, "similarity_fit"), logged()
    analyse()
    assert logged() == n, "a done unit is reused"
    analyse(opts={"n_boot": 30})
    assert logged() == n + 1
    assert _stamps(ws, "similarity_fit") == fitted, "a scoring option alone keeps the fit"
    analyse(opts={"n_boot": 30}, force=True)
    assert logged() == n + 2
    refitted = _stamps(ws, "similarity_fit")
    assert refitted and not set(refitted.values()) & set(fitted.values()), "forced: fitted again"
