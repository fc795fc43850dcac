"""The `concepts` analysis (conceptlens/analysis/concepts.py): probes and the NIS area use each
concept's own values. Each test is written against a data-flow bug (issue 29;
tools/dataflow_mutants.py): a filter not applied, the first element used for every one, two
arguments swapped, a sort the wrong way."""

from __future__ import annotations

import numpy as np
import pytest

from conceptlens.analysis import runner
from conceptlens.analysis.common import Context


# ---- concepts --------------------------------------------------------------------------------
def test_probes_predict_each_true_concept_of_its_own(tmp_path):
    """Without declared concepts a checkpoint gets one probe per true concept, fitted on that
    concept: probe j separates concept j (AUC > 0.9 on the images, sklearn's roc_auc_score).
    Catches every probe fitted on the first concept."""
    from sklearn.metrics import roc_auc_score

    from conceptlens.analysis.concepts import Truth, probe_concepts
    from tests.concepts_factory import concept_workspace

    ws = concept_workspace(tmp_path / "ws", n=90, levels=(0.0,))
    truth = Truth(Context(ws, progress=False), "toy-d0.00")
    rng = np.random.default_rng(0)
    X = truth.C + 0.3 * rng.standard_normal(truth.C.shape)
    out = probe_concepts(X, truth, 0)
    assert len(out) == len(truth.names) >= 2
    for j in range(len(truth.names)):
        assert roc_auc_score(truth.C[:, j], out[j][:, 0]) > 0.9, truth.names[j]


def test_nis_area_is_over_the_public_grid_only(tmp_path):
    """nis_area is the area (trapezoid over the range) of the mean NIS per beta of the public
    grid CQ.BETAS, computed here from the written niche_scores rows; a niche_beta off the grid
    (0.27, where a niche changes) adds a curve point that must not enter it. Catches the
    `isin(CQ.BETAS)` filter dropped."""
    from conceptlens.metrics import concepts as CQ
    from tests.concepts_factory import concept_workspace

    ws = concept_workspace(tmp_path / "ws", n=90, levels=(0.0,))
    cid = "vae-toy-d0.00-s0"
    opts = {"concept_seeds": 1, "niche_beta": 0.27, "purity_steps": 5}
    runner.run(ws.root, "concepts", opts, checkpoint=cid, progress_bars=False, with_dependencies=False)
    curve = ws.read("niche_scores", checkpoint_id=cid).to_pandas()
    at = curve[np.isclose(curve["beta"], 0.27)]["nis"].mean()
    lo, hi = (curve[np.isclose(curve["beta"], b)]["nis"].mean() for b in (0.25, 0.3))
    assert not np.isclose(at, (lo * 3 + hi * 2) / 5)  # the extra point bends the curve: it would show
    on_grid = curve[np.isclose(curve["beta"].to_numpy()[:, None], np.array(CQ.BETAS)[None, :]).any(axis=1)]
    grid = on_grid.groupby("beta")["nis"].mean()
    b, v = grid.index.to_numpy(), grid.to_numpy()
    want = np.sum((v[1:] + v[:-1]) / 2 * np.diff(b)) / (b[-1] - b[0])
    got = ws.read("concept_scores", checkpoint_id=cid).to_pandas()["nis_area"]
    assert got.to_numpy() == pytest.approx([want])
