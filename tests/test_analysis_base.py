"""conceptlens/analysis/base.py: which checkpoints, clusterings, sequences and datasets are an
analysis' units, and the options (given, stored, legacy). Each test is written against a data-flow
bug (issue 29; tools/dataflow_mutants.py): a filter not applied, the first element used for every
one, two arguments swapped, a sort the wrong way."""

from __future__ import annotations

import pytest

from conceptlens import schema
from conceptlens.analysis import base, by_name
from conceptlens.analysis.base import EVERYTHING, Option, Scope, Unit
from conceptlens.analysis.common import Context
from conceptlens.workspace import Workspace
from tests import helpers_analysis_inputs
from tests.helpers_analysis_workspace import build, ctx_of, write_clusters

# Fixtures shared with other test modules, named here so that pytest finds them for this one.
two_datasets = helpers_analysis_inputs.two_datasets


# ---- a hand-built workspace -------------------------------------------------------------
CK_FIELDS = [f for f in schema.arrow_schema("checkpoints")]


# ---- base.py: which checkpoints are units ------------------------------------------------
def test_checkpoints_with_features_leave_out_concept_models_featureless_and_unasked(tmp_path):
    ws = build(
        tmp_path / "ws",
        [
            {"checkpoint_id": "a"},
            {"checkpoint_id": "b", "concept_names": ["x", "y", "z", "w"]},
            {"checkpoint_id": "c", "_features": False},
            {"checkpoint_id": "d"},
        ],
    )
    ctx = ctx_of(ws)
    assert base.checkpoints_with_features(ctx, {}, EVERYTHING) == ["a", "d"]
    assert base.checkpoints_with_features(ctx, {}, Scope(checkpoint="d")) == ["d"]
    # Named, a concept model is clustered; a checkpoint without features never is.
    assert base.checkpoints_with_features(ctx, {}, Scope(checkpoint="b")) == ["b"]
    assert base.checkpoints_with_features(ctx, {}, Scope(checkpoint="c")) == []


def test_clustering_units_are_those_of_the_checkpoint_asked_for(tmp_path):
    ws = build(tmp_path / "ws", [{"checkpoint_id": "a"}, {"checkpoint_id": "b"}])
    write_clusters(ws, "a", 2)
    write_clusters(ws, "b", 2)
    write_clusters(ws, "b", 3)
    ctx = ctx_of(ws)
    got = {(u.checkpoint_id, u.partition["k"]) for u in base.clustering_units(ctx, {}, EVERYTHING)}
    assert got == {("a", 2), ("b", 2), ("b", 3)}
    got = [(u.checkpoint_id, u.partition["k"]) for u in base.clustering_units(ctx, {}, Scope(checkpoint="b"))]
    assert sorted(got) == [("b", 2), ("b", 3)]


def test_sequence_k_is_the_k_most_checkpoints_of_the_sequence_have(tmp_path):
    ws = build(tmp_path / "ws", [{"checkpoint_id": c} for c in "abcd"])
    write_clusters(ws, "a", 2)  # one at 2
    for c in "bc":  # two at 3
        write_clusters(ws, c, 3)
    write_clusters(ws, "d", 4)
    write_clusters(ws, "d", 2)
    ctx = ctx_of(ws)
    # a:2, b:3, c:3, d:4 d:2 -> 2 twice, 3 twice: the smaller
    assert base.sequence_k(ctx, ["a", "b", "c", "d"], {}) == 2
    assert base.sequence_k(ctx, ["b", "c", "d"], {}) == 3
    assert base.sequence_k(ctx, ["d"], {}) == 2
    assert base.sequence_k(ctx, ["d"], {"sequence_k": 5}) == 5
    assert base.sequence_k(ctx, ["zz"], {}) is None


# ---- base.py: sequences -------------------------------------------------------------------
SEQ_CKS = [
    # run r1, default layer, epochs 5, 1, 3 (written out of order)
    {"checkpoint_id": "r1-e5", "run": "r1", "epoch": 5},
    {"checkpoint_id": "r1-e1", "run": "r1", "epoch": 1},
    {"checkpoint_id": "r1-e3", "run": "r1", "epoch": 3},
    # of run r1 too, without an epoch or a depth (a downloaded final model): in no sequence
    {"checkpoint_id": "r1-x", "run": "r1"},
    # run r1 at layer L: a training sequence of its own
    {"checkpoint_id": "r1-L-e1", "run": "r1", "epoch": 1, "layer": "L"},
    {"checkpoint_id": "r1-L-e2", "run": "r1", "epoch": 2, "layer": "L"},
    # run r0: a depth sequence at no epoch (depths 2, 0, 1), never a training sequence
    {"checkpoint_id": "r0-d2", "run": "r0", "depth": 2, "layer": "l2"},
    {"checkpoint_id": "r0-d0", "run": "r0", "depth": 0, "layer": "l0"},
    {"checkpoint_id": "r0-d1", "run": "r0", "depth": 1, "layer": "l1"},
    # run r5: a depth sequence at epoch 4 (each layer alone at its epoch: no training sequence)
    {"checkpoint_id": "r5-d1", "run": "r5", "epoch": 4, "depth": 1, "layer": "b"},
    {"checkpoint_id": "r5-d0", "run": "r5", "epoch": 4, "depth": 0, "layer": "a"},
    # no run: no sequence, even with epochs
    {"checkpoint_id": "free-1", "epoch": 1},
    {"checkpoint_id": "free-2", "epoch": 2},
    # a concept model of run r2: no sequence (r2 then has one checkpoint only)
    {"checkpoint_id": "r2-e1", "run": "r2", "epoch": 1},
    {"checkpoint_id": "r2-e2", "run": "r2", "epoch": 2, "concept_names": ["a", "b", "c", "d"]},
    # run r3 in dataset other
    {"checkpoint_id": "o-e1", "run": "r3", "epoch": 1, "dataset": "other"},
    {"checkpoint_id": "o-e2", "run": "r3", "epoch": 2, "dataset": "other"},
]


@pytest.fixture(scope="module")
def seq_ws(tmp_path_factory):
    return build(tmp_path_factory.mktemp("seq") / "ws", [dict(c) for c in SEQ_CKS], datasets=("toy", "other"))


def test_sequences_group_runs_layers_and_depths_in_order(seq_ws):
    ctx = ctx_of(seq_ws)
    got = [
        (s.dataset, s.name, s.axis, s.at, list(s.checkpoints["checkpoint_id"])) for s in base.sequences(ctx)
    ]
    assert got == [
        ("other", "r3", "epoch", None, ["o-e1", "o-e2"]),
        ("toy", "r0@depth", "depth", None, ["r0-d0", "r0-d1", "r0-d2"]),
        ("toy", "r1", "epoch", None, ["r1-e1", "r1-e3", "r1-e5"]),
        ("toy", "r1@layer=L", "epoch", "L", ["r1-L-e1", "r1-L-e2"]),
        ("toy", "r5@depth.e4", "depth", 4, ["r5-d0", "r5-d1"]),
    ]
    s = {s.name: s for s in base.sequences(ctx)}
    assert s["r1"].checkpoints["order"].tolist() == [1, 3, 5]
    assert s["r0@depth"].checkpoints["order"].tolist() == [0, 1, 2]
    assert s["r0@depth"].checkpoints["depth"].tolist() == [0, 1, 2]
    assert s["r0@depth"].checkpoints["epoch"].isna().all()
    assert s["r1"].checkpoints["epoch"].tolist() == [1, 3, 5]
    assert s["r1"].checkpoints["depth"].isna().all()
    assert [x.name for x in base.sequences(ctx, "other")] == ["r3"]
    assert [x.name for x in base.sequences(ctx, "toy")] == ["r0@depth", "r1", "r1@layer=L", "r5@depth.e4"]
    assert s["r5@depth.e4"].checkpoints["epoch"].tolist() == [4, 4]


def test_run_units_and_their_checkpoints(seq_ws):
    ctx = ctx_of(seq_ws)
    labels = [u.label for u in base.run_units(ctx, {}, EVERYTHING)]
    assert labels == [
        "dataset=other/run=r3",
        "dataset=toy/run=r0@depth",
        "dataset=toy/run=r1",
        "dataset=toy/run=r1@layer=L",
        "dataset=toy/run=r5@depth.e4",
    ]
    assert [u.label for u in base.run_units(ctx, {}, Scope(checkpoint="r1-e3"))] == ["dataset=toy/run=r1"]
    # Each unit's own sequence, not the dataset's first.
    ck = base.run_checkpoints(ctx, Unit({"dataset": "toy", "run": "r1@layer=L"}))
    assert ck["checkpoint_id"].tolist() == ["r1-L-e1", "r1-L-e2"] and ck.attrs["axis"] == "epoch"
    ck = base.run_checkpoints(ctx, Unit({"dataset": "toy", "run": "r1"}))
    assert ck["epoch"].tolist() == [1, 3, 5]
    # A unit whose sequence has gone: empty, of its own dataset and name.
    s = base.unit_sequence(ctx, Unit({"dataset": "toy", "run": "gone@depth.e4"}))
    assert (s.dataset, s.name, s.run, s.axis, s.at) == ("toy", "gone@depth.e4", "gone", "depth", 4)
    assert s.checkpoints.empty


# ---- base.py: options ----------------------------------------------------------------------
def test_an_option_checks_every_value_of_a_list_and_names_the_choices():
    k = Option("k", int, None, "", multiple=True, minimum=2)
    assert k.check([2, 5]) == [2, 5]
    with pytest.raises(ValueError, match=r"--k must be at least 2, got 1"):
        k.check([3, 1])
    c = Option("how", str, "a", "", choices=("a", 2))
    assert c.problem("b") == "must be one of a, 2, got 'b'"


def test_stored_options_fill_in_legacy_values_and_only_result_options():
    a = by_name()["cluster_metrics"]
    stored = a.stored_options(None)
    assert stored["bootstrap"] == 0  # legacy: units before 2.3 have no intervals
    assert stored["trials"] == 20 and stored["seed"] == 0
    assert all(v is not base.NO_LEGACY for v in stored.values())
    assert set(stored) == set(a.result_options(a.option_defaults()))
    c = by_name()["clustering"]
    assert "k" not in c.result_options(c.option_defaults())  # k chooses units only
    assert set(c.stored_options({})) == {"seed", "n_init", "kmeans"}


# ---- which rows the analysis uses ---------------------------------------------------------------
def _units(root, name, checkpoint=None, **opts) -> list[dict]:
    from conceptlens.analysis import by_name

    ctx = Context(Workspace(root), progress=False)
    return [u.partition for u in by_name()[name].units(ctx, opts, Scope(checkpoint=checkpoint))]


def test_units_are_those_of_the_datasets_with_inputs(two_datasets):
    """One unit per dataset (VL model) that has the analysis' inputs; with a checkpoint
    given (`--checkpoint`), the units of its dataset only. Catches each of these filters
    dropped: another dataset's unit run, or a dataset without inputs given a unit."""
    assert _units(two_datasets, "comparisons") == [{"dataset": "other"}, {"dataset": "toy"}]
    assert _units(two_datasets, "comparisons", checkpoint="ck0") == [{"dataset": "toy"}]
    assert _units(two_datasets, "comparisons", checkpoint="ck8") == [{"dataset": "other"}]
    assert _units(two_datasets, "comparisons", checkpoint="ck7") == []  # not measured
    assert _units(two_datasets, "comparisons", checkpoint="ck9") == []
    for name in ("similarity", "convergence"):
        assert _units(two_datasets, name) == [{"dataset": "other"}, {"dataset": "toy"}]
        assert _units(two_datasets, name, checkpoint="ck1") == [{"dataset": "toy"}]
        assert _units(two_datasets, name, checkpoint="ck9") == [{"dataset": "other"}]
    assert _units(two_datasets, "compmap") == [{"vl_model": "vl-toy"}]  # `other` has no primitives
    assert _units(two_datasets, "compmap", vl=["vl-toy"]) == [{"vl_model": "vl-toy"}]
    assert _units(two_datasets, "compmap", checkpoint="ck9") == []
    assert [u["checkpoint_id"] for u in _units(two_datasets, "concepts")] == ["ck0", "ck1", "ck2"]


def test_a_datasets_checkpoints_are_its_own(two_datasets):
    """comparisons compares every checkpoint of the dataset; similarity scores those with
    features; neither takes another dataset's."""
    from conceptlens.analysis import comparisons, compmap, similarity

    ctx = Context(Workspace(two_datasets), progress=False)
    assert comparisons._checkpoints_of(ctx, "toy") == ["ck0", "ck1", "ck2", "ck7"]
    assert similarity._checkpoints_of(ctx, "toy") == ["ck0", "ck1", "ck2"]
    assert similarity._checkpoints_of(ctx, "other") == ["ck8"]
    assert list(compmap._vl_rows(ctx, {"vl": ["vl-other"]}, EVERYTHING)["vl_model_id"]) == ["vl-other"]
    assert list(compmap._vl_rows(ctx, {}, Scope(checkpoint="ck8"))["vl_model_id"]) == ["vl-other"]
    assert list(compmap._vl_rows(ctx, {}, EVERYTHING)["vl_model_id"]) == ["vl-other", "vl-toy"]
