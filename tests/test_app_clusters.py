"""AppTest for the Clusters and Checkpoints pages: default view, deep links, missing tables."""
import os
import shutil

import pandas as pd
import pytest

from tests.cluster_ws import cluster_ws  # noqa: F401  (fixture)
from tests.test_app import run_app

PAGES = ["pages/clusters.py", "pages/checkpoints.py"]
ANALYSIS_FILES = ("clusters.parquet", "cluster_metrics.parquet", "checkpoint_metrics.parquet",
                  "projections.parquet", "predictor_correlations.parquet")


def deep_link_choice(ws):
    """A view that is not the default: the last clustered checkpoint, its last k, a middle cluster."""
    cm = pd.read_parquet(ws / "cluster_metrics.parquet", columns=["checkpoint_id", "k", "cluster"])
    ck = pd.read_parquet(ws / "checkpoints.parquet", columns=["checkpoint_id", "dataset"])
    cm = cm.merge(ck, on="checkpoint_id")
    ds = sorted(cm["dataset"].unique())[-1]
    cid = sorted(cm.loc[cm.dataset == ds, "checkpoint_id"].unique())[-1]
    k = int(cm.loc[cm.checkpoint_id == cid, "k"].max())
    clusters = sorted(cm.loc[(cm.checkpoint_id == cid) & (cm.k == k), "cluster"])
    return {"ds": ds, "ckpt": cid, "k": str(k), "cluster": str(clusters[len(clusters) // 2])}


def values(at):
    return {s.label: s.value for s in at.selectbox}


@pytest.mark.parametrize("page", PAGES)
def test_page_runs_with_cluster_tables(cluster_ws, page):  # noqa: F811
    at = run_app(cluster_ws, page)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.get("plotly_chart"), "no figure on the page"
    assert not at.info or all("analyze clusters" not in i.value for i in at.info)


def test_clusters_default_view(cluster_ws):  # noqa: F811
    at = run_app(cluster_ws, "pages/clusters.py")
    table = at.dataframe[0].value
    assert {"cluster", "size", "purity", "coh. (R)", "CI (R)", "coh. (H)", "caption",
            "top label"} <= set(table.columns)
    assert len(table) > 0
    # Purity bins (laina2020 Tables 1-2) are the second table.
    bins = at.dataframe[1].value
    assert "purity range" in bins.columns and bins["clusters"].sum() <= len(table)
    # Selected cluster and its hard negative both show images.
    assert len(at.get("image")) >= 2
    # The view is in the URL.
    assert {"ds", "ckpt", "k", "cluster"} <= set(at.query_params)


def test_clusters_deep_link_reopens_the_same_view(cluster_ws):  # noqa: F811
    q = deep_link_choice(cluster_ws)
    at = run_app(cluster_ws, "pages/clusters.py", query=q)
    assert not at.exception, at.exception
    assert not at.warning, [w.value for w in at.warning]
    v = values(at)
    assert v["Dataset"] == q["ds"] and v["Checkpoint"] == q["ckpt"]
    assert v["k (clusters)"] == int(q["k"]) and v["Cluster"] == int(q["cluster"])
    assert any(f"**Cluster {q['cluster']}**" in m.value for m in at.markdown)
    for key in ("ds", "ckpt", "k", "cluster"):
        assert at.query_params[key] in (q[key], [q[key]])


def test_clusters_unknown_checkpoint_falls_back_with_warning(cluster_ws):  # noqa: F811
    q = deep_link_choice(cluster_ws)
    at = run_app(cluster_ws, "pages/clusters.py", query={**q, "ckpt": "no-such-ckpt", "k": "999"})
    assert not at.exception, at.exception
    msg = " ".join(w.value for w in at.warning)
    assert "no-such-ckpt" in msg
    assert values(at)["Checkpoint"] != "no-such-ckpt"


def test_clusters_filters(cluster_ws, monkeypatch):  # noqa: F811
    # Reruns happen after run_app restored sys.argv: name the workspace in the environment.
    monkeypatch.setenv("CONCEPTLENS_WORKSPACE", str(cluster_ws))
    at = run_app(cluster_ws, "pages/clusters.py")
    n = len(at.dataframe[0].value)
    at.text_input(key="clusters_text").input("no caption contains this").run()
    assert not at.exception
    assert len(at.dataframe[0].value) == 0 < n


def test_checkpoints_deep_link(cluster_ws):  # noqa: F811
    ck = pd.read_parquet(cluster_ws / "checkpoint_metrics.parquet", columns=["checkpoint_id", "k"])
    meta = pd.read_parquet(cluster_ws / "checkpoints.parquet", columns=["checkpoint_id", "dataset"])
    ck = ck.merge(meta, on="checkpoint_id")
    ds = ck["dataset"].value_counts().index[0]
    k = int(ck.loc[ck.dataset == ds, "k"].max())
    ids = sorted(ck.loc[(ck.dataset == ds) & (ck.k == k), "checkpoint_id"])
    assert len(ids) >= 2
    q = {"ds": ds, "k": str(k), "a": ids[-1], "b": ids[0]}
    at = run_app(cluster_ws, "pages/checkpoints.py", query=q)
    assert not at.exception, at.exception
    assert not at.warning, [w.value for w in at.warning]
    v = values(at)
    assert v["Dataset"] == ds and v["k (clusters)"] == k
    assert v["From checkpoint (A)"] == ids[-1] and v["To checkpoint (B)"] == ids[0]
    assert {m.label for m in at.metric} >= {"A clusters that split", "B clusters that merge"}


def test_checkpoints_unknown_b_falls_back(cluster_ws):  # noqa: F811
    at = run_app(cluster_ws, "pages/checkpoints.py", query={"b": "nope"})
    assert not at.exception, at.exception
    assert any("nope" in w.value for w in at.warning)


def copy_without(src, dst, skip):
    """Copy a workspace without the files in `skip` (files hard-linked where possible)."""
    def link(a, b):
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)
    shutil.copytree(src, dst, copy_function=link,
                    ignore=lambda d, names: [n for n in names if n in skip and d == str(src)])
    return dst


@pytest.fixture()
def no_analysis_ws(tmp_path, cluster_ws):  # noqa: F811
    """The cluster workspace without any analysis table."""
    return copy_without(cluster_ws, tmp_path / "ws", ANALYSIS_FILES)


@pytest.mark.parametrize("page", PAGES)
def test_missing_analysis_shows_the_command(no_analysis_ws, page):
    at = run_app(no_analysis_ws, page)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert any("not computed yet" in i.value for i in at.info)
    assert any(c.value.startswith("conceptlens analyze clusters --workspace") for c in at.code)


def test_missing_projections_only_hides_the_umap(tmp_path, cluster_ws):  # noqa: F811
    out = copy_without(cluster_ws, tmp_path / "ws", {"projections.parquet"})
    at = run_app(out, "pages/clusters.py")
    assert not at.exception, at.exception
    assert len(at.dataframe) >= 2
    assert any("projections.parquet" in i.value for i in at.info)


@pytest.mark.parametrize("page", PAGES)
def test_broken_workspace_shows_its_problems(tmp_path, cluster_ws, page):  # noqa: F811
    import pyarrow.parquet as pq
    out = copy_without(cluster_ws, tmp_path / "ws", {"images.parquet"})
    pq.write_table(pq.read_table(cluster_ws / "images.parquet").drop_columns(["image_id"]),
                   out / "images.parquet")
    at = run_app(out, page)
    assert not at.exception, at.exception
    msg = " ".join(e.value for e in at.error)
    assert "images.parquet" in msg and "image_id" in msg


def test_checkpoints_flow_choice_and_threshold(cluster_ws, monkeypatch):  # noqa: F811
    monkeypatch.setenv("CONCEPTLENS_WORKSPACE", str(cluster_ws))
    at = run_app(cluster_ws, "pages/checkpoints.py")
    for choice in ("splits and merges only", "all flows"):
        at.radio(key="ckpts_flows").set_value(choice).run()
        assert not at.exception, at.exception
    at.slider(key="ckpts_share").set_value(0.5).run()
    assert not at.exception, at.exception
