"""The `comparisons` analysis (conceptlens/analysis/comparisons.py): its unit's fingerprint covers
every checkpoint's clusters and metrics of the dataset, a pair of clusterings is compared again
exactly when one of its sides changed, CLID leaves out checkpoints of other images, and the tables
are written in key order. Mostly harness/factory.py's workspace (48 images, three checkpoints, k = 4)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from conceptlens import schema
from conceptlens.analysis import by_name, comparisons, runner
from conceptlens.analysis.base import Unit
from conceptlens.analysis.common import Context
from conceptlens.metrics.compare import contingency
from conceptlens.metrics.scores import anmi
from conceptlens.workspace import Workspace
from tests.conftest import copy_ws
from tests.helpers_comparisons import replace_partition
from tests.test_pipeline_wiring import DIM, analyse, blobs, build


# ---- comparisons: CLID over the comparable checkpoints -------------------------------------------
def test_clid_leaves_out_and_names_only_the_checkpoints_of_other_images():
    """Four checkpoints at one k, one (c) embedded other images, no baseline predictor
    columns given: the note names c alone, c's scores are null, the others' CLID is
    z(CL) + z(ID) over the three comparable ones. Catches the note listing every
    checkpoint and a missing predictor column added for the first predictor only."""
    from conceptlens.analysis.comparisons import clid_and_correlations

    m = pd.DataFrame(
        {
            "checkpoint_id": ["a", "b", "c", "d"],
            "k": 4,
            "image_set": ["s", "s", "t", "s"],
            "n_images": [48, 48, 40, 48],
            "cl": [0.2, 0.5, 0.9, 0.4],
            "id": [3.0, 5.0, 1.0, 9.0],
            "knn_acc": [0.6, 0.7, 0.1, 0.9],
        }
    )
    for c in comparisons.PREDICTORS:
        if c not in m:
            m[c] = np.linspace(0.1, 0.4, 4)
    from conceptlens.analysis.comparisons import BASELINE_COLUMNS

    m = m.drop(columns=[c for c in BASELINE_COLUMNS if c in m])
    scores, corr, notes = clid_and_correlations(m, seed=0)
    assert len(notes) == 1 and "c embedded other images" in notes[0] and "a," not in notes[0]
    s = pd.DataFrame(scores).set_index("checkpoint_id")
    assert s.loc["c"].isna()[["clid", "wclid", "wclid_loo"]].all()
    keep = m[m["checkpoint_id"] != "c"]
    z = lambda v: (v - v.mean()) / v.std(ddof=0)  # noqa: E731
    want = (z(keep["cl"]) + z(keep["id"])).to_numpy()
    assert s.loc[["a", "b", "d"], "clid"].to_numpy(float) == pytest.approx(want)
    assert {r["predictor"] for r in corr} == set(comparisons.PREDICTORS)


# ---- what makes a pair of clusterings compared again (the unit's fingerprint) -------------
A = by_name()["comparisons"]


UNIT = Unit({"dataset": "toy"})


SENTINEL = -0.5  # an aNMI no computation gives: a pair that keeps it was not compared again


K = 4


def compare(root):
    return runner.run(root, "comparisons", with_dependencies=False, progress_bars=False)


def due(root):
    return runner.due(Context(Workspace(root), progress=False), A, UNIT)


def sims(root) -> pd.DataFrame:
    return (
        Workspace(root)
        .read("clustering_similarity", dataset="toy")
        .to_pandas()
        .set_index(["checkpoint_a", "checkpoint_b"])
    )


def links(root, a, b) -> pd.DataFrame:
    t = Workspace(root).read("cluster_links", dataset="toy").to_pandas()
    t = t[(t.checkpoint_a == a) & (t.checkpoint_b == b)]
    return t[["a", "b", "count"]].sort_values(["a", "b"]).reset_index(drop=True)


def clusters(root, cid) -> pd.DataFrame:
    return (
        Workspace(root).read("clusters", columns=["image_id", "cluster"], checkpoint_id=cid, k=K).to_pandas()
    )


def rewrite(root, table, cid, change, **part):
    """Replace one partition file of `table` (the copy's files are hard links: never write into one)."""
    replace_partition(Workspace(root), table, change, checkpoint_id=cid, **part)


def mark_pairs(root):
    """Every stored aNMI set to SENTINEL, cluster_links' metadata kept (so the pairs look unchanged)."""
    ws = Workspace(root)
    t = ws.read("clustering_similarity", dataset="toy").drop_columns(["dataset"])
    md = ws.read_metadata("clustering_similarity", dataset="toy")
    i = t.schema.get_field_index("anmi")
    t = t.set_column(i, t.schema.field(i), pa.array([SENTINEL] * len(t), pa.float64()))
    ws.write("clustering_similarity", t, metadata=md or None, dataset="toy")


@pytest.fixture(scope="module")
def compared(factory_template, tmp_path_factory):
    root = copy_ws(factory_template, tmp_path_factory.mktemp("cmp") / "ws")
    compare(root)
    assert due(root) is None
    return root


@pytest.fixture
def ws(compared, tmp_path):
    root = copy_ws(compared, tmp_path / "ws")
    mark_pairs(root)
    assert due(root) is None  # the marks are outputs, not inputs
    return root


def test_reclustering_one_checkpoint_recomputes_its_pairs_and_no_other(ws):
    """Catches a pair reused although one side was re-clustered (the stored signatures
    compared for one side only, or read after they were rewritten), and every pair
    recomputed (the reuse lost). The new aNMI and links are those of the new clusters."""
    rng = np.random.default_rng(1)

    def recluster(df):
        return df.assign(cluster=rng.permutation(df["cluster"].to_numpy()))  # same sizes, other members

    rewrite(ws, "clusters", "ck1", recluster, k=K)
    assert due(ws) == "inputs changed"
    compare(ws)
    assert due(ws) is None
    s = sims(ws)
    assert s.loc[("ck0", "ck2"), "anmi"] == SENTINEL  # neither side changed: kept
    for a, b in (("ck0", "ck1"), ("ck1", "ck2")):
        j = clusters(ws, a).merge(clusters(ws, b), on="image_id")
        assert s.loc[(a, b), "anmi"] == pytest.approx(anmi(j["cluster_x"], j["cluster_y"]))
        want = contingency(clusters(ws, a), clusters(ws, b))[["a", "b", "count"]]
        assert links(ws, a, b).to_numpy().tolist() == want.sort_values(["a", "b"]).to_numpy().tolist()


def test_new_metrics_recompute_clid_but_no_pair(ws):
    """A checkpoint's metrics changed (not its clusters): CLID and W-CLID follow the new
    values; the clusterings are unchanged, so no pair is compared again. Catches a
    fingerprint that leaves out checkpoint_metrics (CLID kept stale)."""
    before = Workspace(ws).read("clid_scores", dataset="toy").to_pandas().set_index(["checkpoint_id", "k"])
    rewrite(ws, "checkpoint_metrics", "ck2", lambda df: df.assign(cl=df["cl"] + 5.0), k=K)
    assert due(ws) == "inputs changed"
    compare(ws)
    after = Workspace(ws).read("clid_scores", dataset="toy").to_pandas().set_index(["checkpoint_id", "k"])
    m = pd.concat(
        [
            Workspace(ws).read("checkpoint_metrics", checkpoint_id=c, k=K).to_pandas().assign(checkpoint_id=c)
            for c in ("ck0", "ck1", "ck2")
        ]
    ).set_index("checkpoint_id")
    z = lambda v: (v - v.mean()) / v.std(ddof=0)  # noqa: E731
    want = z(m["cl"].astype(float)) + z(m["id"].astype(float))
    got = after.xs(K, level="k")["clid"]
    assert got.to_numpy() == pytest.approx(want.loc[got.index].to_numpy())
    assert not np.allclose(got.to_numpy(), before.xs(K, level="k")["clid"].to_numpy())
    assert (sims(ws)["anmi"] == SENTINEL).all()


def test_a_table_comparisons_does_not_read_leaves_it_done(ws):
    """Another checkpoint's projections or cluster captions rewritten: not an input of
    comparisons, the unit stays done (catches a fingerprint over every file of the
    checkpoint, which recomputes all pairs on any change)."""
    rewrite(ws, "projections", "ck1", lambda df: df.assign(x=df["x"] + 1.0), method="umap")
    rewrite(ws, "cluster_captions", "ck0", lambda df: df.assign(caption="other words"), k=K)
    assert due(ws) is None
    compare(ws)
    assert (sims(ws)["anmi"] == SENTINEL).all()


def test_a_new_checkpoint_is_compared_with_every_other(ws):
    """A checkpoint added to the dataset: the unit is due, the new pairs are computed and
    the old ones kept."""
    w = Workspace(ws)
    ck = w.read("checkpoints").to_pandas()
    new = ck[ck.checkpoint_id == "ck2"].assign(checkpoint_id="ck3")
    w.write(
        "checkpoints",
        pa.Table.from_pandas(pd.concat([ck, new]), schema=w.read("checkpoints").schema, preserve_index=False),
    )
    for table in ("clusters", "checkpoint_metrics"):
        t = w.read(table, checkpoint_id="ck2", k=K).drop_columns(
            [c for c in ("checkpoint_id", "k") if c in w.read(table, checkpoint_id="ck2", k=K).column_names]
        )
        if table == "clusters":
            t = t.set_column(
                t.schema.get_field_index("cluster"),
                t.schema.field("cluster"),
                pa.array((np.arange(len(t)) % K).astype(t.schema.field("cluster").type.to_pandas_dtype())),
            )
        w.write(table, t, checkpoint_id="ck3", k=K)
    assert due(ws) == "inputs changed"
    compare(ws)
    s = sims(ws)
    assert {p for p in s.index if "ck3" in p} == {("ck0", "ck3"), ("ck1", "ck3"), ("ck2", "ck3")}
    assert (s.drop(index=[p for p in s.index if "ck3" in p])["anmi"] == SENTINEL).all()
    assert (s.loc[[p for p in s.index if "ck3" in p], "anmi"] != SENTINEL).all()


# ---- analysis/comparisons.py ---------------------------------------------------------------------
class _TransferWs:
    """The two calls transfer_correlations makes of a workspace, over in-memory rows."""

    def __init__(self, rows: pd.DataFrame):
        self.rows = rows

    def has(self, name, checkpoint_id):
        return name == "transfer_scores" and (self.rows["checkpoint_id"] == checkpoint_id).any()

    def read(self, name, checkpoint_id):
        assert name == "transfer_scores"
        return pa.Table.from_pandas(
            self.rows[self.rows["checkpoint_id"] == checkpoint_id], preserve_index=False
        )


class _Ctx:
    def __init__(self, ws):
        self.ws = ws


def test_transfer_correlations_equal_the_predictor_correlations_when_the_target_is_knn_accuracy():
    """A target whose transfer accuracy is each checkpoint's kNN accuracy: every predictor's
    transfer correlation (Kendall bootstrap interval and permutation p-values included, both
    seeded and resampling the checkpoints in order) equals its predictor correlation. Catches
    the checkpoints of a k taken in descending order in either table (the bootstrap then
    resamples other rows for the same seed)."""
    from conceptlens.analysis.comparisons import clid_and_correlations, transfer_correlations

    rng = np.random.default_rng(7)
    n = 9
    ids = [f"ck{i}" for i in range(n)]
    m = pd.DataFrame(
        {
            "checkpoint_id": ids,
            "k": 4,
            "image_set": "s",
            "n_images": 48,
            "cl": rng.normal(size=n),
            "cl_heldout": rng.normal(size=n),
            "id": rng.normal(size=n) + 5,
            "knn_acc": rng.uniform(0.2, 0.9, n),
        }
    )
    for c in ("alignment", "uniformity", "mcr2", "rotation", "source_entropy"):
        m[c] = rng.normal(size=n)
    by_k: dict = {}
    _, corr, _ = clid_and_correlations(m.sample(frac=1, random_state=1), seed=3, comparable_rows=by_k)
    tr = pd.DataFrame(
        {
            "checkpoint_id": ids,
            "target_dataset": "other",
            "accuracy": m["knn_acc"],
            "target_neg_entropy": -rng.uniform(0.1, 1.0, n),
            "n_train": 10,
            "n_test": 10,
        }
    ).sample(frac=1, random_state=2)
    transfer = transfer_correlations(_Ctx(_TransferWs(tr)), by_k, seed=3)
    want = {r["predictor"]: r for r in corr}
    got = {r["predictor"]: r for r in transfer}
    assert set(want) == set(comparisons.PREDICTORS) and set(want) <= set(got)
    assert np.isfinite(want["cl"]["kendall_lo"]) and want["cl"]["kendall_lo"] < want["cl"]["kendall_hi"]
    for p in comparisons.PREDICTORS:
        a = {c: v for c, v in want[p].items() if c not in ("k", "predictor")}
        b = {c: v for c, v in got[p].items() if c not in ("k", "predictor", "target_dataset")}
        assert a == pytest.approx(b, rel=1e-12, nan_ok=True), p
    # kNN accuracy against itself: a perfect correlation.
    assert got["knn_acc"]["kendall"] == pytest.approx(1.0) and got["knn_acc"]["pearson"] == pytest.approx(1.0)


def _shrink(ws: Workspace, cid: str, k: int, drop: int, new_k: int | None = None) -> None:
    """Write (checkpoint, new_k or k)'s clusters without their first `drop` images, and its
    checkpoint_metrics row (a copy of the k one), so that its image set differs."""
    for table in ("clusters", "checkpoint_metrics"):
        t = ws.read(table, checkpoint_id=cid, k=k).drop_columns(["checkpoint_id", "k"])
        if table == "clusters":
            t = t.slice(drop)
        ws.write(table, t, checkpoint_id=cid, k=k if new_k is None else new_k)


def test_every_k_with_checkpoints_of_other_images_gets_its_note(factory_copy):
    """At k = 4 ck2 and at k = 3 ck1 embedded fewer images than the other two: the run
    notes both, each naming its own k and checkpoint. Catches the first note repeated for
    every note."""
    ws = Workspace(factory_copy)
    for cid in ("ck0", "ck1", "ck2"):
        _shrink(ws, cid, 4, 5 if cid == "ck1" else 0, new_k=3)
    _shrink(ws, "ck2", 4, 5)
    ctx = runner.run(factory_copy, "comparisons", with_dependencies=False, progress_bars=False)
    notes = sorted(n for n in ctx.notes if "embedded other images" in n)
    assert len(notes) == 2, ctx.notes
    assert notes[0].startswith("toy k=3: ck1 embedded other images")
    assert notes[1].startswith("toy k=4: ck2 embedded other images")


# ---- the order the comparison tables are written in --------------------------------------------
@pytest.fixture(scope="module")
def compared_tables(tmp_path_factory):
    labels = np.repeat(np.arange(3), 15)
    split = np.where(np.arange(45) % 3 == 0, "test", "train")
    feats = {
        f"ck{j}": blobs(np.eye(DIM)[:3], labels, noise, seed=20 + j)
        for j, noise in enumerate((0.1, 0.9, 1.5))
    }
    ws = build(tmp_path_factory.mktemp("order") / "ws", labels, split, feats)
    analyse(ws, ["comparisons"], k=[3])
    return ws


@pytest.mark.parametrize("name", ["clustering_similarity", "cluster_links"])
def test_comparison_tables_are_written_in_key_order(compared_tables, name):
    """Rows sorted by the table's key: the same inputs give the same file, and pages read
    pairs in order."""
    df = compared_tables.read(name, dataset="syn").to_pandas()
    key = [c for c in schema.TABLES_BY_NAME[name].key if c in df.columns and c != "dataset"]
    assert len(df) >= 3 and df[key].duplicated().sum() == 0
    want = df.sort_values(key).reset_index(drop=True)
    assert df.reset_index(drop=True).equals(want)
