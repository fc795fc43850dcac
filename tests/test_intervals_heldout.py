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


def test_mean_purity_and_coherence_intervals_are_a_direct_loop_over_seeded_resamples(analysed):
    """The checkpoint table's means over clusters carry 95% intervals derived at read time
    (views.checkpoints.cluster_mean_intervals): each cluster's images (purity) or 2AFC
    trials (coherence) resampled within it, resample b of the mean the mean of the clusters'
    resample b. Recomputed here by a loop over the documented seeded resamples, purity by
    metrics.scores.purity on each resample's labels; with cluster_metrics' seed and count
    the purity resamples are those of the stored per-cluster intervals."""
    from components.checkpoint_tables import checkpoint_formats
    from conceptlens.db import WorkspaceDB
    from conceptlens.metrics.scores import purity
    from conceptlens.tables import find_intervals, to_csv, to_latex
    from conceptlens.views import checkpoints as V
    from conceptlens.workspace import Workspace

    ws = Workspace(analysed)
    db = WorkspaceDB(analysed)
    got = V.cluster_mean_intervals(db, "toy", 4).set_index("checkpoint_id")
    images = ws.read("images").to_pandas().set_index("image_id")
    K = images.loc[images["dataset"] == "toy", "label"].dropna().nunique()
    for ck in ("ck0", "ck1", "ck2"):
        cm = ws.read("cluster_metrics", checkpoint_id=ck, k=4).to_pandas().sort_values("cluster")
        cl = ws.read("clusters", checkpoint_id=ck, k=4).to_pandas().sort_values("image_id")
        cl["label"] = images.loc[cl["image_id"], "label"].to_numpy()
        cl = cl.dropna(subset=["label"])
        rng = M.rng_for(2, "purity")
        per_cluster = []
        for c, p, lo, hi in zip(cm["cluster"], cm["purity"], cm["purity_lo"], cm["purity_hi"]):
            y = cl.loc[cl["cluster"] == c, "label"].to_numpy()
            stats = [purity(y[i], K)[0] for i in direct(len(y), 200, rng)]
            assert purity(y, K)[0] == pytest.approx(p)
            assert (lo, hi) == pytest.approx(q(stats, p))  # the analysis's own resamples
            per_cluster.append(stats)
        ref = q(np.mean(per_cluster, axis=0), cm["purity"].mean())
        assert (got.loc[ck, "mean_purity_lo"], got.loc[ck, "mean_purity_hi"]) == pytest.approx(ref)
        for mean, col in (("mean_coherence", "coherence_random"), ("mean_coherence_hard", "coherence_hard")):
            rng = M.rng_for(2, f"mean_{col}")
            per_cluster = []
            have = cm[cm[col].notna()]  # clusters under refs + 1 images have none
            for acc, t in zip(have[col], have["coherence_trials"].astype(int)):
                flags = np.zeros(t)
                flags[: round(acc * t)] = 1
                per_cluster.append([flags[i].mean() for i in direct(t, 200, rng)])
            ref = q(np.mean(per_cluster, axis=0), have[col].mean())
            assert (got.loc[ck, f"{mean}_lo"], got.loc[ck, f"{mean}_hi"]) == pytest.approx(ref)
            assert got.loc[ck, f"{mean}_lo"] < got.loc[ck, f"{mean}_hi"]
    # The table and its exports carry them (the units' own 200 resamples and seed 2).
    table = V.checkpoint_table(db, "toy", 4)
    found = find_intervals(table)
    for c in ("mean_purity", "mean_coherence", "mean_coherence_hard"):
        assert found[c] == (f"{c}_lo", f"{c}_hi"), c
        assert (table[f"{c}_lo"] <= table[c]).all() and (table[c] <= table[f"{c}_hi"]).all()
    assert {"mean_purity_lo", "mean_coherence_hard_hi"} <= set(
        to_csv(table).decode().splitlines()[0].split(",")
    )
    tex = to_latex(table, checkpoint_formats(table))
    for r in table.itertuples():
        assert f"{r.mean_purity:.3f} [{r.mean_purity_lo:.3f}, {r.mean_purity_hi:.3f}]" in tex
        assert f"{r.mean_coherence:.3f} [{r.mean_coherence_lo:.3f}, {r.mean_coherence_hi:.3f}]" in tex
    db.close()
