"""An analysis that runs a checkpoint's model again loads the weights its features came from,
or refuses (issue 28, item 2): the file is recorded where it is and checked by its sha256."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

import conceptlens.extract as ex
from conceptlens.analysis import baselines
from conceptlens.analysis.common import Context
from conceptlens.db import WorkspaceDB
from conceptlens.models import WeightsMismatchError, checkpoint_weights, load_checkpoint_model
from conceptlens.workspace import Workspace, sha256_file
from tests.tiny_models import TinyConv, save_torch_weights

TINY = "torch:tests.tiny_models:TinyConv"


def _weights(path, seed):
    torch.manual_seed(seed)
    return save_torch_weights(path, TinyConv(), preprocess={"size": 32})


@pytest.fixture
def extracted(ws, tmp_path):
    """Checkpoint `ext` of the shapes workspace, extracted with weights outside it."""
    (tmp_path / "outside").mkdir()
    w = _weights(tmp_path / "outside" / "enc.pt", 1)
    ex.extract(ws, "shapes", TINY, weights=w, checkpoint_id="ext", progress=False)
    return Workspace(ws), w


def _row(ws):
    return next(
        r for r in pq.read_table(ws.table_path("checkpoints")).to_pylist() if r["checkpoint_id"] == "ext"
    )


def test_matching_weights_load_the_model_the_features_came_from(extracted):
    ws, w = extracted
    row = _row(ws)
    assert checkpoint_weights(ws, row) == w.resolve()
    adapter = load_checkpoint_model(ws, row)
    ids, X = WorkspaceDB(ws.root).features("ext")
    meta = {r["image_id"]: r for r in ws.read("images").to_pylist()}
    imgs = [ex.load_rgb(ex.image_path(ws, meta[i]["thumbnail"], meta[i].get("source_path"))) for i in ids[:4]]
    with torch.inference_mode():
        again = adapter.embed(torch.stack([adapter.preprocess(im) for im in imgs])).numpy()
    np.testing.assert_allclose(again, X[:4], atol=1e-5)


def test_other_weights_under_the_recorded_path_are_refused(extracted):
    ws, w = extracted
    sha = sha256_file(w)
    _weights(w, 2)  # the same file name, other weights
    with pytest.raises(WeightsMismatchError) as e:
        load_checkpoint_model(ws, _row(ws))
    msg = str(e.value)
    assert "checkpoint ext" in msg and sha in msg and sha256_file(w) in msg
    assert "--weights FILE" in msg and "--checkpoint-id ext" in msg


def test_a_missing_weights_file_is_refused(extracted):
    ws, w = extracted
    sha = sha256_file(w)
    w.unlink()
    with pytest.raises(
        WeightsMismatchError, match=f"checkpoint ext: weights file .*enc.pt is missing .*{sha}"
    ):
        load_checkpoint_model(ws, _row(ws))


def test_an_unrecorded_weights_file_is_refused_not_replaced_by_a_fresh_model(extracted):
    """A workspace written before the path was recorded: hash but no path."""
    ws, w = extracted
    row = {**_row(ws), "weights": None}
    with pytest.raises(WeightsMismatchError, match="does not say where it is; pass that file again"):
        load_checkpoint_model(ws, row)


def test_baselines_refuse_other_weights_instead_of_noting_them(extracted):
    ws, w = extracted
    _weights(w, 2)
    ctx = Context(ws, progress=False)
    with pytest.raises(WeightsMismatchError, match="checkpoint ext"):
        baselines._load_model(ctx, "ext")
