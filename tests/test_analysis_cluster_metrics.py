"""The `cluster_metrics` analysis (conceptlens/analysis/cluster_metrics.py): purity counts the classes
of the checkpoint's own dataset."""

from __future__ import annotations

import numpy as np
import pytest

from conceptlens.analysis import by_name
from conceptlens.analysis.base import EVERYTHING, Unit
from tests.helpers_analysis_workspace import build, ctx_of, write_clusters


# ---- cluster_metrics.py --------------------------------------------------------------------
def test_purity_counts_the_classes_of_the_checkpoints_own_dataset(tmp_path):
    """Toy has 2 classes, `other` 4 (and an unlabelled image): purity's K is 2."""
    labels = {"toy": [0, 1, 0, 1, 0, 1, 0, 1], "other": [0, 1, 2, 3, 0, 1, 2, None]}
    ws = build(tmp_path / "ws", [{"checkpoint_id": "a"}], datasets=("toy", "other"), labels=labels)
    write_clusters(ws, "a", 2, [0, 0, 0, 1, 1, 1, 1, 1])
    a = by_name()["cluster_metrics"]
    opts = {**a.option_defaults(), "bootstrap": 0, "refs": 1}
    a.run(ctx_of(ws), Unit({"checkpoint_id": "a", "k": 2}, "a"), opts, EVERYTHING)
    m = ws.read("cluster_metrics", checkpoint_id="a", k=2).to_pandas().set_index("cluster")

    def purity(p):
        p = np.asarray(p)
        return 1 + (p * np.log(p)).sum() / np.log(2)

    assert m.loc[0, "purity"] == pytest.approx(purity([2 / 3, 1 / 3]))  # labels 0 1 0
    assert m.loc[1, "purity"] == pytest.approx(purity([2 / 5, 3 / 5]))  # labels 1 0 1 0 1
    assert m["size"].tolist() == [3, 5]
