"""conceptlens/analysis/engines.py: units grouped by checkpoint, and the Ray scheduling loop (with a
stand-in Ray) reporting every unit once."""

from __future__ import annotations

import sys
import types

from conceptlens.analysis import engines
from conceptlens.analysis.base import EVERYTHING, Unit


# ---- engines.py ----------------------------------------------------------------------------
def test_groups_keep_each_checkpoints_units_together_in_order():
    us = [
        Unit({"checkpoint_id": "a", "k": 2}, "a"),
        Unit({"checkpoint_id": "b", "k": 2}, "b"),
        Unit({"dataset": "toy", "run": "r"}),
        Unit({"checkpoint_id": "a", "k": 3}, "a"),
        Unit({"dataset": "toy", "run": "s"}),
    ]
    got = [[u.label for u in g] for g in engines.groups(us)]
    assert got == [
        ["checkpoint_id=a/k=2", "checkpoint_id=a/k=3"],
        ["checkpoint_id=b/k=2"],
        ["dataset=toy/run=r"],
        ["dataset=toy/run=s"],
    ]


def _fake_ray(die_after: dict):
    """A stand-in for Ray: a task yields one Result per unit of its group, except that the
    task of a group whose first unit is in `die_after` dies after that many results."""
    ray = types.ModuleType("ray")
    calls = {"wait": 0}

    def task_body(root, name, group, opts, scope, threads):
        n = die_after.get(group[0].label)
        for i, u in enumerate(group):
            if n is not None and i == n:
                raise RuntimeError("worker died\nsecond line")
            yield engines.Result(u, f"in-{u.label}", "t", 0.0)

    class Remote:
        def remote(self, *args):
            return task_body(*args)

    def wait(refs, num_returns=1):
        calls["wait"] += 1
        if calls["wait"] > 200:
            raise AssertionError("run_ray loops: a finished task is never dropped")
        return refs[:1], refs[1:]

    ray.is_initialized = lambda: True
    ray.cluster_resources = lambda: {"CPU": 2}
    ray.remote = lambda **kw: lambda fn: Remote()
    ray.wait = wait
    ray.get = lambda x: x
    return ray


def test_run_ray_reports_every_unit_once_even_when_a_task_dies(monkeypatch):
    us = [Unit({"checkpoint_id": c, "k": k}, c) for c in "ab" for k in (2, 3, 4)]
    monkeypatch.setitem(sys.modules, "ray", _fake_ray({"checkpoint_id=b/k=2": 1}))
    out = list(engines.run_ray("/nowhere", "clustering", us, {}, EVERYTHING, workers=1))
    got = sorted((r.unit.label, r.inputs, r.error) for r in out)
    boom = "its Ray task failed: RuntimeError: worker died"
    assert got == [
        ("checkpoint_id=a/k=2", "in-checkpoint_id=a/k=2", None),
        ("checkpoint_id=a/k=3", "in-checkpoint_id=a/k=3", None),
        ("checkpoint_id=a/k=4", "in-checkpoint_id=a/k=4", None),
        ("checkpoint_id=b/k=2", "in-checkpoint_id=b/k=2", None),
        ("checkpoint_id=b/k=3", None, boom),
        ("checkpoint_id=b/k=4", None, boom),
    ]
