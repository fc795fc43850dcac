"""The `learning_curves` analysis (conceptlens/analysis/learning_curves.py): saved selections scored on
their latest save, factor values matched to clusters, per-class rows, and new features making the
curves due. Each test is written against a data-flow bug (issue 29; tools/dataflow_mutants.py): a
filter not applied, the first element used for every one, two arguments swapped, a sort the wrong
way."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from conceptlens import schema
from conceptlens.analysis import runner
from conceptlens.analysis.common import Context
from conceptlens.workspace import Workspace
from tests.helpers_comparisons import replace_partition

# ---- learning_curves ---------------------------------------------------------------------------
CURVE_OPTS = {"curve_boot": 20}


@pytest.fixture(scope="module")
def curves_ws(tmp_path_factory):
    """factor_workspace (120 images, label = shape x colour) as one run of three checkpoints,
    clustered at k = 4 by shape and colour parity; a factor `site` missing on a third of the
    images; two saved selections: `sel-a` saved twice (the later save other images) and
    `sel-b`, which holds an image no checkpoint has features for."""
    from harness.factory import factor_workspace

    ws = factor_workspace(tmp_path_factory.mktemp("curves") / "ws", n=120)
    ck = ws.read("checkpoints").to_pandas().assign(run="toy-run")
    ws.write("checkpoints", pa.Table.from_pandas(ck, preserve_index=False))
    img = ws.read("images").to_pandas()
    site = np.array(["north", "south", None], dtype=object)[np.arange(len(img)) % 3]
    ws.write("images", pa.Table.from_pandas(img.assign(site=site), preserve_index=False))
    ids = img["image_id"].tolist()
    cl = (img["label"].to_numpy() % 4).astype(np.int64)
    for c in ck["checkpoint_id"]:
        ws.write(
            "clusters",
            pa.table(
                {"image_id": ids, "cluster": cl, "distance": np.zeros(len(ids))},
                schema=schema.arrow_schema("clusters", partition=False),
            ),
            checkpoint_id=c,
            k=4,
        )
    saves = [
        ("sel-a", ids[:30], "2026-01-01"),
        ("sel-b", ids[40:70] + ["img-9999"], "2026-01-02"),
        ("sel-a", ids[60:100], "2026-01-03"),  # the latest save of sel-a
    ]
    ws.append(
        "selections",
        pa.Table.from_pylist(
            [
                {
                    "name": n,
                    "image_ids": s,
                    "n_images": len(s),
                    "origin": "test",
                    "checkpoint_id": None,
                    "created": pd.Timestamp(t, tz="UTC"),
                }
                for n, s, t in saves
            ],
            schema=schema.arrow_schema("selections", partition=False),
        ),
        dataset="toy",
    )
    runner.run(ws.root, "learning_curves", CURVE_OPTS, with_dependencies=False, progress_bars=False)
    return ws


def _curves(ws) -> pd.DataFrame:
    return ws.read("learning_curves", dataset="toy", run="toy-run").to_pandas()


def test_each_saved_selection_is_scored_on_its_latest_save(curves_ws):
    """Every checkpoint has a row per saved selection; `sel-a`'s AUC is the learnability of
    its latest save's images (Scorer on those rows, computed here), `sel-b` is scored
    without the image the checkpoint lacks. Catches the older save used, only the first
    selection scored, a selection image missing from the checkpoint failing the run."""
    from conceptlens.analysis.learning_curves import SELECTION
    from conceptlens.metrics import selection as S

    t = _curves(curves_ws)
    sel = t[t["factor"] == SELECTION]
    assert sorted(zip(sel["checkpoint_id"], sel["value"])) == sorted(
        (c, n) for c in ("toy-ckpt0", "toy-ckpt1", "toy-ckpt2") for n in ("sel-a", "sel-b")
    )
    ctx = Context(curves_ws, progress=False)
    ids, Xn = ctx.normalized("toy-ckpt1")
    codes = ctx.image_meta(ids)["label"].astype("Int64").fillna(-1).to_numpy(np.int64)
    row_of = {i: n for n, i in enumerate(ids)}
    latest = [row_of[i] for i in curves_ws.read("images")["image_id"].to_pylist()[60:100]]
    out = S.Scorer(S.Population(Xn, codes), latest, n_null=0, nulls=(), seed=0).run(bootstrap=20)
    learn = next(r for r in out["scores"] if r["score"] == "learnability")
    got = sel[(sel["checkpoint_id"] == "toy-ckpt1") & (sel["value"] == "sel-a")].iloc[0]
    assert got["auc"] == pytest.approx(min(1.0, max(0.0, learn["value"])))
    assert got["n_positive"] == out["evaluated_members"]
    # sel-a's best cluster, by hand: the cluster of largest F1 against its 40 images.
    clusters = curves_ws.read("clusters", checkpoint_id="toy-ckpt1", k=4).to_pandas().set_index("image_id")
    members = set(curves_ws.read("images")["image_id"].to_pylist()[60:100])
    f1 = {}
    for c, g in clusters.groupby("cluster"):
        inter = len(members & set(g.index))
        f1[c] = (2 * inter / (len(g) + len(members)), inter / len(g), inter / len(members))
    best = max(sorted(f1), key=lambda c: f1[c][0])
    assert (got["best_cluster"], got["cluster_purity"], got["cluster_recall"]) == pytest.approx(
        (best, f1[best][1], f1[best][2])
    )


def test_a_factor_value_is_matched_to_the_cluster_of_largest_f1(curves_ws):
    """Each factor value's best cluster, purity (precision) and recall, by hand; the factor
    with missing values gets rows for its known values only. Catches the clusters and the
    value indicator swapped, and missing values taken for a class. (A real bug found here:
    a factor with missing values, on clustered checkpoints, stopped the analysis with
    "boolean value of NA is ambiguous" where the value's images were marked.)"""
    t = _curves(curves_ws)
    img = curves_ws.read("images").to_pandas().set_index("image_id")
    clusters = curves_ws.read("clusters", checkpoint_id="toy-ckpt0", k=4).to_pandas()
    clusters = clusters.assign(shape=img.loc[clusters["image_id"], "shape"].to_numpy())
    rows = t[(t["checkpoint_id"] == "toy-ckpt0") & (t["factor"] == "shape") & t["value"].notna()]
    assert len(rows) == 3
    for _, r in rows.iterrows():
        has = clusters["shape"] == r["value"]
        inter = clusters[has].groupby("cluster").size().reindex(range(4), fill_value=0)
        size = clusters.groupby("cluster").size()
        f1 = 2 * inter / (size + has.sum())
        best = int(f1.idxmax())
        assert r["best_cluster"] == best
        assert r["cluster_purity"] == pytest.approx(inter[best] / size[best])
        assert r["cluster_recall"] == pytest.approx(inter[best] / has.sum())
    site = t[(t["checkpoint_id"] == "toy-ckpt0") & (t["factor"] == "site")]
    assert sorted(site["value"].dropna()) == ["north", "south"]
    whole = site[site["value"].isna()].iloc[0]
    assert whole["n_test"] == int(((img["split"] == "test") & img["site"].notna()).sum())


def test_new_features_of_a_later_checkpoint_make_the_curves_due(curves_ws, tmp_path):
    """The fingerprint covers every checkpoint's features, not the first one's again."""
    import shutil

    root = shutil.copytree(curves_ws.root, tmp_path / "ws")
    assert runner.missing(root, ["learning_curves"])["learning_curves"] == []
    replace_partition(Workspace(root), "features", lambda d: d.iloc[::-1], checkpoint_id="toy-ckpt2")
    assert runner.missing(root, ["learning_curves"])["learning_curves"] != []


# ---- learning_curves ----------------------------------------------------------------------------
def test_per_class_rows_are_each_classes_own():
    """A factor's per-value rows: one per value, each with its own test count (a hand count
    of the test split) and its own AUC. Catches the first class reported for every class."""
    from conceptlens.analysis.learning_curves import checkpoint_rows

    n = 40
    rng = np.random.default_rng(0)
    y = np.array(["a", "b", "c", "a"] * (n // 4), dtype=object)
    centres = {"a": [1.0, 0, 0], "b": [0, 1.0, 0], "c": [0, 0, 1.0]}
    X = np.array([centres[v] for v in y]) + 0.2 * rng.standard_normal((n, 3))
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    meta = pd.DataFrame({"split": ["test" if i % 3 == 0 else "train" for i in range(n)]})
    rows = checkpoint_rows(
        [f"i{i}" for i in range(n)],
        Xn,
        meta,
        (3, None),
        {"f": pd.Series(y)},
        {"seed": 0, "curve_boot": 20},
    )
    per = [r for r in rows if r["value"] is not None]
    test = y[meta["split"].to_numpy() == "test"]
    assert sorted(r["value"] for r in per) == ["a", "b", "c"]
    for r in per:
        assert r["n_positive"] == int((test == r["value"]).sum())
    assert len({r["n_positive"] for r in per}) > 1  # the counts differ, so a reused class shows
