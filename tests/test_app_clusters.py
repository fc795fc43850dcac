"""AppTest of the Clusters and Checkpoints pages on the factory workspace: what they show
matches the stored tables, links reopen a view, missing or broken analyses are explained."""

import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptlens.analysis import compare
from conceptlens.workspace import Workspace
from tests.factory import COLORS
from tests.malformed import MALFORMATIONS
from tests.test_app import assert_clean, open_app, plain

CLUSTERS, CHECKPOINTS = "pages/clusters.py", "pages/checkpoints.py"
COMPARISONS = ("clid_scores", "predictor_correlations", "clustering_similarity", "cluster_links")


def selected(at) -> dict:
    return {s.label: s.value for s in at.selectbox}


def figures(at) -> list:
    import plotly.io

    return [plotly.io.from_json(c.proto.spec) for c in at.get("plotly_chart")]


def figure(at, trace_type):
    """The first figure whose first trace is of `trace_type`."""
    return next(f for f in figures(at) if f.data and f.data[0].type == trace_type)


def array(value) -> np.ndarray:
    """A figure's array as sent to the browser (typed arrays travel as base64)."""
    if isinstance(value, dict) and "bdata" in value:
        import base64

        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        return flat.reshape([int(n) for n in str(value.get("shape", len(flat))).split(",")])
    return np.asarray(value, dtype=float)


def metrics(at) -> dict:
    return {m.label: m.value for m in at.metric}


def assignment(ws, cid, k=4) -> pd.DataFrame:
    return pd.read_parquet(
        ws / f"clusters/checkpoint_id={cid}/k={k}/part-0.parquet", columns=["image_id", "cluster"]
    )


# ---- Clusters -------------------------------------------------------------------------------
def test_clusters_default_view(monkeypatch, factory_template):
    at = open_app(monkeypatch, factory_template, CLUSTERS)
    assert_clean(at)
    table = at.dataframe[0].value
    assert {
        "cluster",
        "size",
        "purity",
        "coh. (R)",
        "CI (R)",
        "coh. (H)",
        "caption",
        "top label",
        "describability",
    } <= set(table.columns)
    # Captions come from cluster_captions, joined on the cluster.
    assert list(table["caption"]) == [f"a {COLORS[c % 3]} shape" for c in table["cluster"]]
    stored = pd.read_parquet(factory_template / "cluster_metrics/checkpoint_id=ck0/k=4/part-0.parquet")
    assert list(table["size"]) == list(stored["size"])
    assert "purity range" in at.dataframe[1].value.columns
    assert metrics(at)["kNN accuracy"] == "0.900"
    assert len(at.get("image")) == 2  # the cluster and its hard negative
    assert {"ds", "ckpt", "k", "cluster"} <= set(at.query_params)


def test_clusters_deep_link_reopens_the_same_view(monkeypatch, factory_template):
    q = {"ds": "toy", "ckpt": "ck2", "k": "4", "cluster": "2"}
    at = open_app(monkeypatch, factory_template, CLUSTERS, query=q)
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]
    v = selected(at)
    assert (v["Dataset"], v["Checkpoint"], v["k (clusters)"], v["Cluster"]) == ("toy", "ck2", 4, 2)
    md = [m.value for m in at.markdown]
    # Cluster 2's hard negative is cluster 3 in the factory's cluster_metrics.
    assert any(m.startswith("**Cluster 2**") for m in md)
    assert any(m.startswith("**Hard negative: cluster 3**") for m in md)
    assert metrics(at)["kNN accuracy"] == "0.700"
    for key, value in q.items():
        assert at.query_params[key] in (value, [value])


def test_choosing_a_cluster_updates_the_panel_and_the_link(monkeypatch, factory_template):
    at = open_app(monkeypatch, factory_template, CLUSTERS)
    at.selectbox(key="clusters_cluster").set_value(3).run()
    assert_clean(at)
    assert at.query_params["cluster"] in ("3", ["3"])
    assert any(m.value.startswith("**Cluster 3**") for m in at.markdown)


def test_clusters_filters(monkeypatch, factory_template):
    at = open_app(monkeypatch, factory_template, CLUSTERS)
    assert len(at.dataframe[0].value) == 4
    at.text_input(key="clusters_text").input("BLUE").run()
    assert list(at.dataframe[0].value["caption"]) == ["a blue shape"]
    # Plain text, not a regular expression.
    at.text_input(key="clusters_text").input("a.*").run()
    assert len(at.dataframe[0].value) == 0
    at.text_input(key="clusters_text").input("").run()
    at.number_input(key="clusters_min_size").set_value(15).run()
    assert_clean(at)
    assert (at.dataframe[0].value["size"] >= 15).all() and len(at.dataframe[0].value) < 4


def test_umap_colour_from_the_link(monkeypatch, factory_template):
    at = open_app(monkeypatch, factory_template, CLUSTERS, query={"color": "shape"})
    assert_clean(at)
    assert selected(at)["Colour by"] == "shape"
    assert {t.name for t in figure(at, "scattergl").data} == {"circle", "square"}


def test_missing_captions_leave_the_rest_of_the_page(monkeypatch, factory_copy):
    shutil.rmtree(factory_copy / "cluster_captions")
    at = open_app(monkeypatch, factory_copy, CLUSTERS)
    assert_clean(at)
    assert any("not computed yet" in i.value for i in at.info)
    assert f"conceptlens analyze cluster_captions --workspace {factory_copy}" in [c.value for c in at.code]
    assert set(at.dataframe[0].value["caption"]) == {""}
    assert len(at.get("plotly_chart")) == 2 and len(at.get("image")) == 2


def test_broken_captions_are_named_and_the_table_still_shows(monkeypatch, factory_copy):
    MALFORMATIONS["describability_above_one"].apply(Workspace(factory_copy))
    at = open_app(monkeypatch, factory_copy, CLUSTERS)
    assert not at.exception
    assert "table cluster_captions, column describability_binary" in plain(at.error)
    assert len(at.dataframe[0].value) == 4 and "describability" not in at.dataframe[0].value
    assert len(at.get("plotly_chart")) == 2


def test_missing_projections_only_hide_the_umap(monkeypatch, factory_copy):
    shutil.rmtree(factory_copy / "projections")
    at = open_app(monkeypatch, factory_copy, CLUSTERS)
    assert_clean(at)
    assert f"conceptlens analyze projections --workspace {factory_copy}" in [c.value for c in at.code]
    assert len(at.get("plotly_chart")) == 1 and len(at.dataframe) == 2


@pytest.mark.parametrize("page,analysis", [(CLUSTERS, "clustering"), (CHECKPOINTS, "cluster_metrics")])
def test_without_analyses_a_page_shows_the_command(monkeypatch, factory_copy, page, analysis):
    for t in (
        "clusters",
        "cluster_metrics",
        "cluster_captions",
        "checkpoint_metrics",
        "projections",
        *COMPARISONS,
        "analysis_runs",
    ):
        shutil.rmtree(factory_copy / t)
    at = open_app(monkeypatch, factory_copy, page)
    assert_clean(at)
    assert any("not computed yet" in i.value for i in at.info)
    assert [c.value for c in at.code] == [f"conceptlens analyze {analysis} --workspace {factory_copy}"]


# ---- Checkpoints ----------------------------------------------------------------------------
def test_checkpoints_table_joins_clid_scores(monkeypatch, factory_template):
    at = open_app(monkeypatch, factory_template, CHECKPOINTS)
    assert_clean(at)
    (table,) = [d.value for d in at.dataframe if "clid" in d.value.columns]
    stored = pd.read_parquet(factory_template / "clid_scores/dataset=toy/part-0.parquet")
    assert (
        table.set_index("checkpoint_id")["clid"].to_dict()
        == stored.set_index("checkpoint_id")["clid"].to_dict()
    )
    cl_id = figures(at)[0]
    assert cl_id.layout.yaxis.title.text.startswith("cluster learnability")
    assert list(cl_id.data[0].text) == ["ck0", "ck1", "ck2"]


def test_anmi_is_read_from_clustering_similarity(monkeypatch, factory_copy):
    p = factory_copy / "clustering_similarity/dataset=toy/part-0.parquet"
    t = pq.read_table(p)
    pq.write_table(t.set_column(t.column_names.index("anmi"), "anmi", pa.array([0.123, 0.456, 0.789])), p)
    order = list(zip(t["checkpoint_a"].to_pylist(), t["checkpoint_b"].to_pylist()))
    assert order[0] == ("ck0", "ck1")
    at = open_app(monkeypatch, factory_copy, CHECKPOINTS, query={"a": "ck1", "b": "ck0"})
    assert_clean(at)
    z = array(figure(at, "heatmap").data[0].z)
    assert np.allclose(z, [[1, 0.123, 0.456], [0.123, 1, 0.789], [0.456, 0.789, 1]])
    assert metrics(at)["aNMI(A, B)"] == "0.123"


def test_cluster_matching_in_either_order_matches_the_assignments(monkeypatch, factory_template):
    """A after B in the stored order: the stored links are swapped, not misread."""
    at = open_app(monkeypatch, factory_template, CHECKPOINTS, query={"a": "ck2", "b": "ck0"})
    assert_clean(at)
    assert (selected(at)["From checkpoint (A)"], selected(at)["To checkpoint (B)"]) == ("ck2", "ck0")
    want = compare.match_clusters(assignment(factory_template, "ck2"), assignment(factory_template, "ck0"))
    changes = compare.cluster_changes(want)
    assert metrics(at)["A clusters that split"] == str(changes["splits"])
    assert metrics(at)["B clusters that merge"] == str(changes["merges"])
    links = at.dataframe[-1].value
    pd.testing.assert_frame_equal(links.reset_index(drop=True)[want.columns].astype(str), want.astype(str))
    assert any("a green shape" in h for h in figure(at, "sankey").data[0].node.customdata)


def test_flows_and_significant_share(monkeypatch, factory_template):
    at = open_app(monkeypatch, factory_template, CHECKPOINTS, query={"a": "ck0", "b": "ck1"})
    at.radio(key="ckpts_flows").set_value("splits and merges only").run()
    assert_clean(at)
    from conceptlens.figures.checkpoints import KIND_COLOURS

    colours = set(figure(at, "sankey").data[0].link.color)
    assert colours and colours <= {KIND_COLOURS[k] for k in ("split", "merge", "split+merge")}
    at.slider(key="ckpts_share").set_value(0.5).run()
    assert_clean(at)
    want = compare.cluster_changes(
        compare.match_clusters(
            assignment(factory_template, "ck0"), assignment(factory_template, "ck1"), min_share=0.5
        )
    )
    assert metrics(at)["A clusters that split"] == str(want["splits"])
    assert metrics(at)["one-to-one matches"] == str(want["one_to_one"])


def test_checkpoints_page_reads_no_cluster_assignments(monkeypatch, factory_copy):
    shutil.rmtree(factory_copy / "clusters")
    at = open_app(monkeypatch, factory_copy, CHECKPOINTS)
    assert_clean(at)
    assert {"heatmap", "sankey"} <= {f.data[0].type for f in figures(at)}


def test_missing_comparisons_keep_cl_vs_id(monkeypatch, factory_copy):
    for t in COMPARISONS:
        shutil.rmtree(factory_copy / t)
    at = open_app(monkeypatch, factory_copy, CHECKPOINTS)
    assert_clean(at)
    assert f"conceptlens analyze comparisons --workspace {factory_copy}" in [c.value for c in at.code]
    types = [f.data[0].type for f in figures(at)]
    assert "heatmap" not in types and "sankey" not in types and types.count("scatter") >= 1


def test_checkpoints_unknown_b_falls_back(monkeypatch, factory_template):
    at = open_app(monkeypatch, factory_template, CHECKPOINTS, query={"b": "nope"})
    assert_clean(at)
    assert "nope" in plain(at.warning)
    assert selected(at)["To checkpoint (B)"] == "ck1"
