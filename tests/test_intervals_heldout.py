"""The 2.4 intervals of checkpoint_metrics (issue 26 item 4): 1-NN accuracy and held-out CL
carry 95% bootstrap intervals over the test images, stored by `cluster_metrics` and carried
by the checkpoint table's CSV and LaTeX exports. Each is checked against the per-test-image
flags computed another way (scikit-learn's 1-NN, a cosine nearest-neighbour search) and a
direct loop over the documented seeded resamples (metrics/bootstrap.py)."""

from __future__ import annotations

import numpy as np
import pytest

from conceptlens import metrics as M
from conceptlens.metrics import bootstrap as B


def direct(n: int, n_boot: int, rng) -> list[np.ndarray]:
    return [rng.integers(0, n, n) for _ in range(n_boot)]


def q(stats, est):
    lo, hi = np.quantile(stats, [0.025, 0.975])
    return min(lo, est), max(hi, est)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory, factory_template):
    from conceptlens.analysis import runner
    from tests.conftest import copy_ws

    root = copy_ws(factory_template, tmp_path_factory.mktemp("ivh") / "ws")
    runner.run(
        root,
        "cluster_metrics",
        {"bootstrap": 200, "seed": 2},
        progress_bars=False,
        with_dependencies=False,
        force=True,
    )
    return root


def test_knn1_and_heldout_cl_intervals_are_recomputed_another_way(analysed):
    from sklearn.neighbors import KNeighborsClassifier, NearestNeighbors

    from conceptlens.analysis.common import Context
    from conceptlens.validate import validate
    from conceptlens.workspace import Workspace

    assert validate(analysed) == []
    ws = Workspace(analysed)
    ctx = Context(ws)
    for ck in ("ck0", "ck1", "ck2"):
        ids, Xn = ctx.normalized(ck)
        meta = ctx.image_meta(ids)
        row = ws.read("checkpoint_metrics", checkpoint_id=ck, k=4).to_pylist()[0]
        split = meta["split"].astype(str).to_numpy()
        y = meta["label"].to_numpy().astype(np.int64)
        tr, te = split == "train", split == "test"
        # 1-NN accuracy: scikit-learn's cosine 1-NN, its per-test-image flags resampled
        knn = KNeighborsClassifier(n_neighbors=1, metric="cosine", algorithm="brute").fit(Xn[tr], y[tr])
        flags = knn.predict(Xn[te]) == y[te]
        assert row["knn1_acc"] == pytest.approx(flags.mean())
        ref = q([flags[i].mean() for i in direct(len(flags), 200, B.rng_for(2, "knn1_acc"))], flags.mean())
        assert (row["knn1_acc_lo"], row["knn1_acc_hi"]) == pytest.approx(ref)
        # held-out CL: the train split's k-means (the library's), then each test image's
        # nearest train image by scikit-learn's cosine search; its flags resampled
        tr_lab, te_lab = M.heldout_clusters(Xn[tr], Xn[te], 4, 3, 2, "auto")
        _, nn = (
            NearestNeighbors(n_neighbors=1, metric="cosine", algorithm="brute").fit(Xn[tr]).kneighbors(Xn[te])
        )
        held = tr_lab[nn[:, 0]] == te_lab
        assert row["cl_heldout"] == pytest.approx(held.mean())
        ref = q([held[i].mean() for i in direct(len(held), 200, B.rng_for(2, "cl_heldout"))], held.mean())
        assert (row["cl_heldout_lo"], row["cl_heldout_hi"]) == pytest.approx(ref)
        for m in ("knn1_acc", "cl_heldout"):
            assert row[f"{m}_lo"] <= row[m] <= row[f"{m}_hi"]


def test_the_checkpoint_table_exports_carry_every_interval(analysed):
    from components.checkpoint_tables import checkpoint_formats
    from conceptlens.db import WorkspaceDB
    from conceptlens.tables import find_intervals, to_csv, to_latex
    from conceptlens.views import checkpoints as V

    ck = V.checkpoint_table(WorkspaceDB(analysed), "toy", 4)
    found = find_intervals(ck)
    for c in ("knn_acc", "knn1_acc", "cl", "cl_heldout", "id"):
        assert found[c] == (f"{c}_lo", f"{c}_hi"), c
    header = to_csv(ck).decode().splitlines()[0].split(",")
    assert {"knn1_acc_lo", "knn1_acc_hi", "cl_heldout_lo", "cl_heldout_hi"} <= set(header)
    tex = to_latex(ck, checkpoint_formats(ck))
    for r in ck.itertuples():
        assert f"{r.knn1_acc:.3f} [{r.knn1_acc_lo:.3f}, {r.knn1_acc_hi:.3f}]" in tex
        assert f"{r.cl_heldout:.3f} [{r.cl_heldout_lo:.3f}, {r.cl_heldout_hi:.3f}]" in tex


def test_every_analysis_help_prints_its_options(capsys):
    """`conceptlens analyze NAME --help` for every analysis: argparse %-formats help texts, and
    cluster_metrics' `--bootstrap` help says "95% intervals" (it failed with a TypeError)."""
    from conceptlens.analysis import registered
    from conceptlens.cli import main

    names = [a.name for a in registered()]
    assert "cluster_metrics" in names
    for name in names:
        with pytest.raises(SystemExit) as done:
            main(["analyze", name, "--help"])
        assert done.value.code == 0, name
        out = capsys.readouterr().out
        assert "--seed" in out, name
    with pytest.raises(SystemExit):
        main(["analyze", "cluster_metrics", "--help"])
    assert "the 95% intervals of purity" in " ".join(capsys.readouterr().out.split())
