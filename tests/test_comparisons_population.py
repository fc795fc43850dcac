"""Which checkpoints lu2022's correlations are over (`analyze comparisons --population`,
issue 47): layer checkpoints never join the default population, whatever their depths;
the population asked for is stored with the unit and makes it due when it differs; the
Checkpoints page and the correlation figure say which population the stored numbers are
over. Mostly harness/factory.py's workspace (toy dataset, ck0..ck2, k = 4), with ck2
turned into a layer checkpoint where a test needs one."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conceptlens import schema
from conceptlens.analysis import by_name, runner
from conceptlens.analysis.base import Unit
from conceptlens.analysis.common import Context
from conceptlens.analysis.comparisons import (
    POPULATION,
    POPULATIONS,
    in_population,
    population_label,
    stored_population,
)
from conceptlens.workspace import Workspace

A = by_name()["comparisons"]
UNIT = Unit({"dataset": "toy"})


# ---- who is in which population ------------------------------------------------------------
rows = st.lists(
    st.tuples(
        st.one_of(st.none(), st.sampled_from(["features.2", "blocks.4", "layer3"])),  # layer
        st.one_of(st.none(), st.integers(0, 6)),  # depth
        st.one_of(st.none(), st.integers(0, 60)),  # epoch
    ),
    max_size=12,
)


def _frame(spec) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "checkpoint_id": [f"c{i}" for i in range(len(spec))],
            "layer": pd.Series([s[0] for s in spec], dtype=object),
            "depth": pd.Series([s[1] for s in spec], dtype="Int64"),
            "epoch": pd.Series([s[2] for s in spec], dtype="Int64"),
        }
    )


@settings(max_examples=200, deadline=None)
@given(rows)
def test_the_default_population_never_holds_a_layer_and_keeps_every_default_embedding(spec):
    """For any arrangement of layers, depths and epochs: the default (`training`) holds
    exactly the checkpoints without a layer - a depth sequence's closing embedding (no
    layer, a depth) included, every layer (any depth) left out; `layers` holds every
    checkpoint with a layer or a depth; `both` everything; training and layers cover all."""
    ck = _frame(spec)
    assert POPULATION.default == "training"
    train = in_population(ck, POPULATION.default)
    layer = ck["layer"].notna().to_numpy()
    assert not (train & layer).any()
    assert (train == ~layer).all()
    layers = in_population(ck, "layers")
    assert (layers == (layer | ck["depth"].notna().to_numpy())).all()
    assert (train | layers).all()
    assert in_population(ck, "both").all()


def test_a_workspace_without_layer_columns_is_all_training():
    ck = pd.DataFrame({"checkpoint_id": ["a", "b"]})
    assert in_population(ck, "training").all() and not in_population(ck, "layers").any()


@pytest.mark.parametrize("bad", ["train", "all", "", None, "Training"])
def test_an_unknown_population_is_an_error_naming_the_option(bad):
    with pytest.raises(ValueError, match="--population"):
        in_population(pd.DataFrame({"checkpoint_id": ["a"]}), bad)
    with pytest.raises(ValueError, match="--population"):
        population_label(bad)


def test_the_option_is_declared_with_its_choices_and_legacy():
    assert A.all_options[-1] is POPULATION or POPULATION in A.options
    assert POPULATION.choices == POPULATIONS and POPULATION.changes_result
    # Units stored before the option existed were over every checkpoint.
    assert A.stored_options({"seed": 0})["population"] == "both"
    assert A.stored_options(None)["population"] == "both"


# ---- the analysis on a workspace with a layer checkpoint ----------------------------------------
def make_layer(root, cid="ck2", layer="features.3", depth=0) -> None:
    """Turn `cid` of the workspace at `root` into a layer checkpoint (a new file renamed
    over the old one: a copy's files are hard links)."""
    path = root / "checkpoints.parquet"
    df = pq.read_table(path).to_pandas()
    for c in ("layer", "depth"):
        if c not in df:
            df[c] = None
    df["layer"] = df["layer"].astype(object).where(df["checkpoint_id"] != cid, layer)
    df["depth"] = pd.array(
        [depth if c == cid else d for c, d in zip(df["checkpoint_id"], df["depth"])], dtype="Int64"
    )
    want = pa.schema([f for f in schema.arrow_schema("checkpoints") if f.name in df.columns])
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(pa.Table.from_pandas(df[want.names], schema=want, preserve_index=False), tmp)
    os.replace(tmp, path)


def compare(root, **options):
    return runner.run(root, "comparisons", options, with_dependencies=False, progress_bars=False)


def due(root, **given):
    return runner.due(Context(Workspace(root), progress=False), A, UNIT, given)


def n_compared(root) -> int:
    pc = Workspace(root).read("predictor_correlations", dataset="toy").to_pandas()
    return int(pc["n_checkpoints"].max())


@pytest.fixture
def layered(factory_copy):
    make_layer(factory_copy)
    return factory_copy


def test_the_default_leaves_the_layer_out_and_stores_its_population(layered):
    ctx = compare(layered)
    ws = Workspace(layered)
    assert stored_population(ws, "toy") == "training"
    assert set(ws.read("clid_scores", dataset="toy").to_pandas()["checkpoint_id"]) == {"ck0", "ck1"}
    assert n_compared(layered) <= 2
    assert any("ck2" in n and "--population training" in n for n in ctx.notes)
    assert due(layered) is None


def test_the_population_asked_for_makes_the_unit_due_and_is_stored(layered):
    compare(layered)
    assert due(layered, population="training") is None
    assert "population training -> both" in due(layered, population="both")
    compare(layered, population="both")
    assert stored_population(Workspace(layered), "toy") == "both"
    assert n_compared(layered) == 3
    assert due(layered) is None  # not given: what it was computed with stays
    assert "population both -> layers" in due(layered, population="layers")
    compare(layered, population="layers")
    clid = Workspace(layered).read("clid_scores", dataset="toy").to_pandas()
    assert list(clid["checkpoint_id"]) == ["ck2"]


def test_a_unit_stored_before_the_option_counts_as_over_every_checkpoint(layered):
    """Its metadata lacks `population`: it was computed over every checkpoint (`legacy`),
    stays done without the option and is recomputed when `training` is asked for."""
    compare(layered, population="both")
    ws = Workspace(layered)
    md = ws.read_metadata("predictor_correlations", dataset="toy")
    md["analysis_options"].pop("population")
    t = ws.read("predictor_correlations", dataset="toy").drop_columns(["dataset"])
    ws.write("predictor_correlations", t, metadata=md, dataset="toy")
    assert stored_population(ws, "toy") == "both"
    assert due(layered) is None
    assert "population both -> training" in due(layered, population="training")


def test_a_bad_population_on_the_command_line_names_the_flag(factory_copy, capsys):
    from conceptlens.cli import main

    with pytest.raises(SystemExit):
        main(["analyze", "comparisons", "--workspace", str(factory_copy), "--population", "all"])
    assert "--population" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--population"):
        compare(factory_copy, population="all")


# ---- what the page and the figure say --------------------------------------------------------
def test_the_view_names_the_stored_population_and_who_it_leaves_out(layered):
    from conceptlens.db import WorkspaceDB
    from conceptlens.views import checkpoints as V

    compare(layered)
    pop = V.comparison_population(WorkspaceDB(layered), "toy")
    assert pop["population"] == "training" and pop["members"] == ["ck0", "ck1"]
    assert pop["left_out"] == ["ck2"] and pop["label"] == "2 training checkpoints (of 3)"
    assert pop["others"] == ["layers", "both"]
    # A checkpoint outside the population is not "left out for its images".
    members = V.clid_membership(WorkspaceDB(layered), "toy", 4)
    assert "ck2" not in set(members["checkpoint_id"])


def test_the_page_and_the_figure_say_the_population(monkeypatch, layered):
    from tests.test_app import assert_clean, open_app, plain

    compare(layered, population="both")
    at = open_app(monkeypatch, layered, "pages/checkpoints.py")
    assert_clean(at)
    text = plain(at.markdown)
    assert "Over the 3 training and layer checkpoints" in text and "--population both" in text
    codes = " ".join(c.value for c in at.code)
    assert "--dataset toy --population training" in codes and "--population layers" in codes
    from tests.test_app_checkpoints import figures

    titles = [f.layout.xaxis.title.text or "" for f in figures(at)]
    assert any("over training and layer checkpoints" in t for t in titles)

    compare(layered, population="training")
    at = open_app(monkeypatch, layered, "pages/checkpoints.py")
    assert_clean(at)
    text = plain(at.markdown)
    assert "Over the 2 training checkpoints (of 3)" in text and "Left out: ck2." in text
    assert "--population both" in " ".join(c.value for c in at.code)


def test_the_exported_figure_says_the_population(layered):
    from conceptlens.db import WorkspaceDB
    from conceptlens.figures.catalog import FIGURES

    compare(layered, population="both")
    spec = FIGURES["predictor_correlations"]
    db = WorkspaceDB(layered)
    fig = spec.build(db, spec.resolve(db, {"ds": "toy", "k": 4}))
    assert "over training and layer checkpoints" in fig.layout.xaxis.title.text


def test_labels_count_and_name_the_population():
    assert population_label("training", 29, 33) == "29 training checkpoints (of 33)"
    assert population_label("both", 7, 7) == "7 training and layer checkpoints"
    assert np.all([population_label(p) for p in POPULATIONS])
