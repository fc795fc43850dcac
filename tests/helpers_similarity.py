"""A fitted similarity workspace (`fitted` and `ws` are fixtures: a test module names them, `ws =
helpers_similarity.ws`) and its trials: the factory workspace's 40 hand-written trials, one
dimensionality, two members, 20 epochs."""

from __future__ import annotations

import pyarrow as pa
import pytest

from conceptlens import schema
from conceptlens.analysis import runner
from conceptlens.workspace import Workspace
from tests.conftest import copy_ws

OPTS = {"dims": [2], "members": 2, "screen_members": 2, "max_epochs": 20, "n_boot": 20, "batch_trials": 512}


def analyse(root, **extra):
    return runner.run(root, "similarity", {**OPTS, **extra}, with_dependencies=False, progress_bars=False)


def add_trials(root, change, n=8):
    """Append `n` copies of existing train trials, each changed by `change(row, i)`."""
    ws = Workspace(root)
    rows = ws.read("similarity_trials", dataset="toy").drop_columns(["dataset"]).to_pylist()
    train = [r for r in rows if r["split"] == "train" and not r["is_catch"]]
    new = [change({**train[i % len(train)], "trial_id": f"new{i:03d}"}, i) for i in range(n)]
    ws.append(
        "similarity_trials",
        pa.Table.from_pylist(new, schema=schema.arrow_schema("similarity_trials", partition=False)),
        dataset="toy",
    )


def other_choice(r, i):
    """The same screen, other references chosen (what a catch trial's careless answer looks like)."""
    refs = r["references"]
    return {**r, "chosen": [x for x in refs if x not in r["chosen"]][: r["n_select"]]}


@pytest.fixture(scope="module")
def fitted(factory_template, tmp_path_factory):
    root = copy_ws(factory_template, tmp_path_factory.mktemp("sim") / "ws")
    analyse(root)
    assert runner.missing(root, ["similarity"])["similarity"] == []
    return root


@pytest.fixture
def ws(fitted, tmp_path):
    return copy_ws(fitted, tmp_path / "ws")
