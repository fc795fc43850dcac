"""Data flow of `conceptlens analyze comparisons` (issue 29, items 1 and 2): its unit's
fingerprint covers every checkpoint's clusters and metrics of the dataset, and a pair of
clusterings is compared again exactly when one of its two sides changed.

The workspace is tests/factory.py's (48 images, three checkpoints, k = 4, every table
written by hand), so `comparisons` runs alone in a fraction of a second."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from conceptlens.analysis import by_name, runner
from conceptlens.analysis.base import Unit
from conceptlens.analysis.common import Context
from conceptlens.metrics.compare import contingency
from conceptlens.metrics.scores import anmi
from conceptlens.workspace import Workspace
from tests.conftest import copy_ws

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


def replace_partition(ws, table, change, **part):
    """Rewrite one partition of `table` through `change(DataFrame)`: a new file (a copy's
    files are hard links, never written into), its metadata kept."""
    t = ws.read(table, **part)
    md = ws.read_metadata(table, **part)
    t = t.drop_columns([c for c in part if c in t.column_names])
    df = change(t.to_pandas())
    ws.write(
        table, pa.Table.from_pandas(df, schema=t.schema, preserve_index=False), metadata=md or None, **part
    )


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
