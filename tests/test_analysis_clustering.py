"""The `clustering` analysis (conceptlens/analysis/clustering.py): the ks of each checkpoint, and what
makes a clustering (and the analyses keyed on its fingerprint, cluster_metrics and cluster_captions)
computed again: an input its fingerprint covers or an option that changes its result, and only then.
harness/factory.py's workspace: 48 images, three checkpoints, k = 4."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from conceptlens.analysis import by_name, runner
from conceptlens.analysis.base import EVERYTHING
from conceptlens.workspace import Workspace
from harness.factory import make_workspace, write_features
from tests.conftest import copy_ws
from tests.helpers_analysis_workspace import build, ctx_of, write_clusters


# ---- clustering.py -------------------------------------------------------------------------
def test_without_k_each_checkpoint_keeps_its_own_ks(tmp_path):
    ws = build(tmp_path / "ws", [{"checkpoint_id": c} for c in "abc"])
    write_clusters(ws, "a", 4)
    write_clusters(ws, "a", 2)
    write_clusters(ws, "b", 5)
    a = by_name()["clustering"]
    got = [u.label for u in a.units(ctx_of(ws), {**a.option_defaults(), "k": None}, EVERYTHING)]
    # a: its two k's in order; b: its own; c (never clustered): round(sqrt(8)) = 3
    assert got == ["checkpoint_id=a/k=2", "checkpoint_id=a/k=4", "checkpoint_id=b/k=5", "checkpoint_id=c/k=3"]


# ---- what makes a clustering due again (its fingerprint) ------------------------------------
K = 4


def analyse(root, names, **opts):
    return runner.run(root, names, {"k": [K], **opts}, progress_bars=False)


def missing(root, name):
    return runner.missing(root, [name])[name]


def stamp(ws: Workspace, table, **part):
    p = ws.table_path(table, **part)
    return p.stat().st_ino, p.stat().st_mtime_ns


@pytest.fixture(scope="module")
def clustered(tmp_path_factory):
    root = tmp_path_factory.mktemp("clu") / "ws"
    make_workspace(root)
    analyse(root, ["cluster_metrics", "cluster_captions"])
    for name in ("clustering", "cluster_metrics", "cluster_captions"):
        assert missing(root, name) == []
    return root


@pytest.fixture
def ws(clustered, tmp_path):
    return copy_ws(clustered, tmp_path / "ws")


def test_reclustered_checkpoint_gets_new_cluster_metrics_and_captions_only(ws):
    """ck1's clusters rewritten (other members, other sizes): its cluster_metrics and
    captions are due and recomputed from the new clusters; ck0's and ck2's are not
    touched. Catches a fingerprint of the wrong checkpoint's or k's clusters."""
    w = Workspace(ws)
    cl = w.read("clusters", checkpoint_id="ck1", k=K).drop_columns(["checkpoint_id", "k"])
    md = w.read_metadata("clusters", checkpoint_id="ck1", k=K)
    new = np.array([0] * 30 + [1] * 10 + [2] * 5 + [3] * 3)[: cl.num_rows]
    cl = cl.set_column(
        cl.schema.get_field_index("cluster"),
        cl.schema.field("cluster"),
        pa.array(new.astype(cl.schema.field("cluster").type.to_pandas_dtype())),
    )
    w.write("clusters", cl, metadata=md, checkpoint_id="ck1", k=K)
    keep = {
        c: (
            stamp(w, "cluster_metrics", checkpoint_id=c, k=K),
            stamp(w, "cluster_captions", checkpoint_id=c, k=K),
        )
        for c in ("ck0", "ck2")
    }
    assert missing(ws, "clustering") == []  # rewritten by hand: it is still a clustering done
    assert missing(ws, "cluster_metrics") == [f"checkpoint_id=ck1/k={K}"]
    assert missing(ws, "cluster_captions") == [f"checkpoint_id=ck1/k={K}"]
    analyse(ws, ["cluster_metrics", "cluster_captions"])
    m = (
        w.read("cluster_metrics", checkpoint_id="ck1", k=K)
        .to_pandas()
        .set_index("cluster")["size"]
        .sort_index()
    )
    assert m.tolist() == [30, 10, 5, 3]
    for c, s in keep.items():
        assert (
            stamp(w, "cluster_metrics", checkpoint_id=c, k=K),
            stamp(w, "cluster_captions", checkpoint_id=c, k=K),
        ) == s


def test_a_result_option_recomputes_and_a_unit_choice_does_not(ws):
    """--n-init changes a clustering's result: every clustering is due and says why;
    --k only chooses the units (the same k asked again leaves them done)."""
    ctx = runner.Context(Workspace(ws), progress=False)
    a = runner.by_name()["clustering"]
    u = a.units(ctx, {**a.option_defaults(), "k": [K]}, runner.EVERYTHING)[0]
    assert runner.due(ctx, a, u, {"k": [K]}) is None
    assert runner.due(ctx, a, u, {"n_init": 5}) == "options changed (n_init 3 -> 5)"
    before = stamp(Workspace(ws), "clusters", checkpoint_id="ck0", k=K)
    analyse(ws, ["clustering"], n_init=5)
    assert stamp(Workspace(ws), "clusters", checkpoint_id="ck0", k=K) != before
    assert (
        Workspace(ws).read_metadata("clusters", checkpoint_id="ck0", k=K)["analysis_options"]["n_init"] == 5
    )


def test_new_features_recluster_that_checkpoint(ws):
    """ck1's features replaced by other vectors: ck1's clusterings are due (and only theirs)."""
    w = Workspace(ws)
    ids = w.read("features", columns=["image_id"], checkpoint_id="ck1")["image_id"].to_pylist()
    write_features(w, "ck1", ids, np.random.default_rng(5).normal(size=(len(ids), 8)))
    assert missing(ws, "clustering") == [f"checkpoint_id=ck1/k={K}"]


def test_a_clustering_written_before_it_fingerprinted_its_features_stays_done(ws):
    """Clusters written before 2.2 carry neither `inputs` nor `analysis_options`: they count
    as done (a workspace analysed then, the committed demo's too, is not redone), while one
    written since with a fingerprint of other features is due."""
    w = Workspace(ws)
    t = w.read("clusters", checkpoint_id="ck1", k=K).drop_columns(["checkpoint_id", "k"])
    w.write("clusters", t.replace_schema_metadata(None), checkpoint_id="ck1", k=K)
    assert missing(ws, "clustering") == []
    ids = w.read("features", columns=["image_id"], checkpoint_id="ck0")["image_id"].to_pylist()
    write_features(w, "ck0", ids, np.random.default_rng(6).normal(size=(len(ids), 8)))
    assert missing(ws, "clustering") == [f"checkpoint_id=ck0/k={K}"]
