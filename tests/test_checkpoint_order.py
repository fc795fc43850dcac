"""Pages open on a model's own embedding, not on an early block that sorts first (issue 47,
minor): the Clusters page's default checkpoint and the Checkpoints page's A and B are
embeddings (`layer` null) while any exists; layers follow, each group by id."""

from __future__ import annotations

import pyarrow as pa
import pytest

from conceptlens.db import WorkspaceDB
from conceptlens.views import checkpoints as VC
from conceptlens.views import clusters as VK
from harness.factory import make_workspace
from tests.test_app import assert_clean, open_app


@pytest.fixture(scope="module")
def layered(tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("order") / "ws", n_images=30, n_checkpoints=3, derived=True)
    t = ws.read("checkpoints")
    assert t["checkpoint_id"].to_pylist() == ["ck0", "ck1", "ck2"]
    # ck0 sorts first and is a layer; ck1 and ck2 are embeddings.
    layer = pa.array(["blocks.1", None, None], pa.string())
    names = t.schema.names
    t = (
        t.set_column(names.index("layer"), "layer", layer)
        if "layer" in names
        else t.append_column("layer", layer)
    )
    ws.write("checkpoints", t)
    return ws


def test_views_list_embeddings_before_layers(layered):
    db = WorkspaceDB(layered.root)
    try:
        assert list(VK.checkpoints(db, "toy")["checkpoint_id"]) == ["ck1", "ck2", "ck0"]
        k = int(VC.ks(db, "toy")["k"].iloc[0])
        assert list(VC.summary(db, "toy", k)["checkpoint_id"]) == ["ck1", "ck2", "ck0"]
    finally:
        db.close()


def test_pages_open_on_embeddings(monkeypatch, layered):
    at = open_app(monkeypatch, layered.root, "pages/clusters.py")
    assert_clean(at)
    assert next(s for s in at.selectbox if s.label == "Checkpoint").value == "ck1"
    at = open_app(monkeypatch, layered.root, "pages/checkpoints.py")
    assert_clean(at)
    picked = {s.label: s.value for s in at.selectbox}
    assert (picked["From checkpoint (A)"], picked["To checkpoint (B)"]) == ("ck1", "ck2")
