"""AppTest of the Clusters and Checkpoints pages on the factory workspace: what they show
matches the stored tables, links reopen a view, missing or broken analyses are explained."""

import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptlens import views
from conceptlens.metrics import compare, events
from conceptlens.workspace import Workspace
from harness.factory import COLORS
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


def projection_args(at, nth: int | None = None) -> dict:
    """The arguments of the page's WebGL projection view (components/projection.py; the
    `nth` one if several), bytes ones decoded: `ids` and `captions` from its hover lines,
    `x`, `y`, `codes`, `ring`."""
    import json

    els = [
        e for e in at.get("component_instance") if e.proto.component_name.endswith("projection.projection")
    ]
    (el,) = els if nth is None else [els[nth]]
    args = json.loads(el.proto.json_args)
    args.update({a.key: a.bytes for a in el.proto.special_args})
    xy = np.frombuffer(args["xy"], "float32")
    lines = [ln.split("\t") for ln in args["text"].decode().split("\n")]
    args.update(
        x=xy[0::2],
        y=xy[1::2],
        codes=np.frombuffer(args["codes"], "uint16"),
        ids=[ln[0] for ln in lines],
        captions=[ln[1] for ln in lines],
        ring=np.frombuffer(args["ring"], "uint8") if args.get("ring") else None,
    )
    return args


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
        "desc. top-1",
        "desc. top-5",
        "desc. binary",
    } <= set(table.columns)
    # Captions come from cluster_captions, joined on the cluster.
    assert list(table["caption"]) == [f"a {COLORS[c % 3]} shape" for c in table["cluster"]]
    stored = pd.read_parquet(factory_template / "cluster_metrics/checkpoint_id=ck0/k=4/part-0.parquet")
    assert list(table["size"]) == list(stored["size"])
    assert "purity range" in at.dataframe[1].value.columns
    assert metrics(at)["kNN accuracy"] == "0.900"
    # The cluster's and its hard negative's grids, then the selection's grid (cluster 0).
    grids = at.get("image")
    assert len(grids[0].proto.imgs) == 15 and len(grids[1].proto.imgs) == 16
    assert len(grids[2:]) == 15
    # Every choice is its default: the link stays bare (docs/dashboard.md).
    assert not {"ds", "ckpt", "k", "cluster"} & set(at.query_params)


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
    args = projection_args(at)
    assert args["title"] == "shape" and set(args["names"]) == {"circle", "square"}
    # Each point's colour is its own shape's.
    images = pd.read_parquet(factory_template / "images.parquet").set_index("image_id")
    assert [args["names"][c] for c in args["codes"]] == list(images.loc[args["ids"], "shape"])
    assert args["ring"] is not None  # the chosen cluster (0) is ringed


def test_missing_captions_leave_the_rest_of_the_page(monkeypatch, factory_copy):
    shutil.rmtree(factory_copy / "cluster_captions")
    at = open_app(monkeypatch, factory_copy, CLUSTERS)
    assert_clean(at)
    assert any("not computed yet" in i.value for i in at.info)
    assert f"conceptlens analyze cluster_captions --workspace {factory_copy}" in [c.value for c in at.code]
    assert at.dataframe[0].value["caption"].isna().all()
    assert len(at.get("plotly_chart")) == 2 and len(at.get("image")) >= 2  # the UMAP is WebGL


def test_broken_captions_are_named_and_the_table_still_shows(monkeypatch, factory_copy):
    MALFORMATIONS["describability_above_one"].apply(Workspace(factory_copy))
    at = open_app(monkeypatch, factory_copy, CLUSTERS)
    assert not at.exception
    assert "table cluster_captions, column describability_binary" in plain(at.error)
    assert len(at.dataframe[0].value) == 4 and "desc. binary" not in at.dataframe[0].value
    assert len(at.get("plotly_chart")) == 2


def test_missing_projections_only_hide_the_umap(monkeypatch, factory_copy):
    shutil.rmtree(factory_copy / "projections")
    at = open_app(monkeypatch, factory_copy, CLUSTERS)
    assert_clean(at)
    assert f"conceptlens analyze projections --workspace {factory_copy}" in [c.value for c in at.code]
    # The purity plot and the selection's labels stay; no UMAP, no region to select by.
    titles = [f.layout.xaxis.title.text for f in figures(at)]
    assert len(titles) == 2 and titles[0].startswith("purity") and titles[1] == "images"
    assert len(at.dataframe) == 2
    assert "the region drawn on the UMAP" not in at.radio(key="clusters_sel").options


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


def table_ticks(at) -> list[int]:
    return list(at.session_state["clusters_table"]["selection"]["rows"])


def shown_clusters(at) -> list[int]:
    return [int(c) for c in at.dataframe[0].value["cluster"]]


def test_table_tick_follows_the_chosen_cluster(monkeypatch, factory_template):
    """Bug 2: a tick stayed on the row clicked earlier, whatever cluster the selectbox or a
    filter then showed."""
    at = open_app(monkeypatch, factory_template, CLUSTERS, query={"ckpt": "ck0", "cluster": "3"})
    assert table_ticks(at) == [3]
    at.selectbox(key="clusters_cluster").set_value(1).run()
    assert_clean(at)
    assert table_ticks(at) == [1]
    # Sorted by size, largest first: the tick moves with cluster 1's row.
    at.selectbox(key="clusters_sort").set_value("size").run()
    at.toggle(key="clusters_desc").set_value(True).run()
    assert table_ticks(at) == [shown_clusters(at).index(1)]
    # A filter that keeps only other clusters: the choice follows it, so does the tick.
    at.text_input(key="clusters_text").input("blue").run()
    assert shown_clusters(at) == [2] and at.selectbox(key="clusters_cluster").value == 2
    assert at.selectbox(key="clusters_cluster").options == ["2 — a blue shape"]
    assert table_ticks(at) == [0]


def test_other_pages_and_back_keep_the_view(monkeypatch, factory_template):
    """Bug 9: the app's navigation drops the URL's parameters (AppTest keeps them; cleared
    here as the browser does): coming back shows the view left, and writes it back."""
    q = {
        "ckpt": "ck1",
        "cluster": "3",
        "min_size": "2",
        "q": "red",
        "sort": "size",
        "desc": "1",
        "color": "shape",
    }
    at = open_app(monkeypatch, factory_template, CLUSTERS, query=q)
    assert_clean(at)
    at.query_params.clear()
    at.switch_page(CHECKPOINTS).run()
    at.query_params.clear()
    at.switch_page(CLUSTERS).run()
    assert_clean(at)
    assert not at.warning
    for key, value in q.items():
        if key != "cluster":  # cluster 3 is then the table's first, its default: left out
            assert at.query_params[key] in (value, [value]), key
    assert selected(at)["Cluster"] == 3 and at.text_input(key="clusters_text").value == "red"


def test_every_choice_is_in_the_link(monkeypatch, factory_template):
    """Bug 10: filters, sort, columns, colour, selection and its page live in the URL and a
    link restores them; defaults stay out of the link."""
    q = {
        "ckpt": "ck2",
        "min_size": "5",
        "purity": "0.1,0.9",
        "q": "shape",
        "sort": "purity",
        "desc": "1",
        "cols": "cluster,purity,caption",
        "color": "label_name",
        "sel": "filter",
    }
    at = open_app(monkeypatch, factory_template, CLUSTERS, query=q)
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]
    assert at.number_input(key="clusters_min_size").value == 5
    assert at.slider(key="clusters_purity").value == (0.1, 0.9)
    assert at.text_input(key="clusters_text").value == "shape"
    assert (selected(at)["Sort by"], at.toggle(key="clusters_desc").value) == ("purity", True)
    assert list(at.dataframe[0].proto.column_order) == ["cluster", "purity", "caption"]
    assert at.radio(key="clusters_sel").value == "filter"
    stored = pd.read_parquet(factory_template / "cluster_metrics/checkpoint_id=ck2/k=4/part-0.parquet")
    keep = stored[(stored["size"] >= 5) & stored["purity"].between(0.1, 0.9)].sort_values(
        "purity", ascending=False
    )
    assert shown_clusters(at) == list(keep["cluster"])
    assert metrics(at)["images selected"] == str(keep["size"].sum())
    for key, value in q.items():
        assert at.query_params[key] in (value, [value]), key
    # Back to the defaults: the parameters leave the link.
    at.number_input(key="clusters_min_size").set_value(0).run()
    at.toggle(key="clusters_desc").set_value(False).run()
    at.radio(key="clusters_sel").set_value("cluster").run()
    assert not {"min_size", "desc", "sel"} & set(at.query_params)


def test_a_region_from_the_link_selects_its_images_until_another_checkpoint(monkeypatch, factory_template):
    q = {"ckpt": "ck0", "region": "box:-0.5,0.5,-100,100", "sel": "region"}
    at = open_app(monkeypatch, factory_template, CLUSTERS, query=q)
    assert_clean(at)
    proj = pd.read_parquet(factory_template / "projections/checkpoint_id=ck0/method=umap/part-0.parquet")
    assert metrics(at)["images selected"] == str(proj["x"].between(-0.5, 0.5).sum())
    assert projection_args(at)["region"] == {"kind": "box", "x": [-0.5, 0.5], "y": [-100, 100]}
    at.selectbox(key="clusters_ckpt").set_value("ck1").run()
    assert "region" not in at.query_params and at.radio(key="clusters_sel").value == "cluster"


def test_bad_link_values_warn_as_literal_text(monkeypatch, factory_template):
    q = {"min_size": "lots", "purity": "0.9,0.1", "sort": "**x**", "region": "box:1,2", "sel": "region"}
    at = open_app(monkeypatch, factory_template, CLUSTERS, query=q)
    assert not at.exception
    text = plain(at.warning)
    for value in ("lots", "0.9,0.1", "**x**", "box:1,2"):
        assert value in text
    assert at.number_input(key="clusters_min_size").value == 0
    assert "region" not in at.query_params and at.radio(key="clusters_sel").value == "cluster"


def test_missing_values_show_an_em_dash(monkeypatch, factory_copy):
    """Bug 12: "[nan, 0.99]" and "None" where a value is missing."""
    p = factory_copy / "cluster_metrics/checkpoint_id=ck0/k=4/part-0.parquet"
    t = pq.read_table(p)
    for col in ("coherence_random_lo", "top_label", "top_label_share"):
        i = t.column_names.index(col)
        t = t.set_column(i, col, pa.array([None] + t[col].to_pylist()[1:], t.schema.field(col).type))
    p.unlink()
    pq.write_table(t, p)
    ck = pq.read_table(factory_copy / "checkpoints.parquet")
    i = ck.column_names.index("epoch")
    ck = ck.set_column(
        i, "epoch", pa.array([None] + ck["epoch"].to_pylist()[1:], ck.schema.field("epoch").type)
    )
    (factory_copy / "checkpoints.parquet").unlink()
    pq.write_table(ck, factory_copy / "checkpoints.parquet")
    at = open_app(monkeypatch, factory_copy, CLUSTERS, query={"ckpt": "ck0", "cluster": "0"})
    assert_clean(at)
    shown = " ".join(e.value for e in [*at.caption, *at.markdown])
    assert "nan" not in shown and "None" not in shown
    assert "epoch —" in plain(at.caption)
    facts = next(c.value for c in at.caption if c.value.startswith("purity"))  # cluster 0's panel
    assert f"coherence (random) {stored_value(factory_copy, 'coherence_random'):.2f} —" in facts
    assert "top label — (—)" in facts
    table = at.dataframe[0]
    assert pd.isna(table.value["CI (R)"].iloc[0]) and table.proto.placeholder == "—"


def stored_value(root, col, cid="ck0", cluster=0):
    m = pd.read_parquet(root / f"cluster_metrics/checkpoint_id={cid}/k=4/part-0.parquet")
    return float(m.set_index("cluster").loc[cluster, col])


def test_caption_filter_matches_whole_words(monkeypatch, factory_copy):
    p = factory_copy / "cluster_captions/checkpoint_id=ck0/k=4/part-0.parquet"
    t = pq.read_table(p)
    caps = ["a checkered shape", "a red shape", "a shape, red", "a redder shape"]
    t = t.set_column(t.column_names.index("caption"), "caption", pa.array(caps))
    p.unlink()
    pq.write_table(t, p)
    at = open_app(monkeypatch, factory_copy, CLUSTERS, query={"ckpt": "ck0", "q": "red"})
    assert_clean(at)
    assert shown_clusters(at) == [1, 2]


def test_self_referential_describability_is_flagged(monkeypatch, factory_copy):
    p = factory_copy / "cluster_captions/checkpoint_id=ck0/k=4/part-0.parquet"
    t = pq.read_table(p)
    t = t.append_column("describability_self", pa.array([True] * t.num_rows))
    p.unlink()
    pq.write_table(t, p)
    at = open_app(monkeypatch, factory_copy, CLUSTERS, query={"ckpt": "ck0"})
    assert not at.exception and not at.error
    assert "self-referential" in plain(at.warning)
    assert set(at.dataframe[0].value["self-ref."]) == {"yes"}
    assert any("(self-referential)" in c.value for c in at.caption)
    other = open_app(monkeypatch, factory_copy, CLUSTERS, query={"ckpt": "ck1"})
    assert not other.warning and "self-ref." not in other.dataframe[0].value


def test_selection_pages_through_all_its_images_and_downloads_their_ids(monkeypatch, tmp_path):
    from harness.factory import make_workspace

    root = make_workspace(tmp_path / "ws", n_images=130, derived=True).root
    at = open_app(monkeypatch, root, CLUSTERS, query={"ckpt": "ck0", "sel": "filter", "page": "3"})
    assert_clean(at)
    assert metrics(at)["images selected"] == "130"
    grid = [b for b in at.button if b.key and b.key.startswith("clusters_grid-")]
    assert len(grid) == 130 - 2 * 48  # the third page of 48
    # The CSV itself is read back in tests/test_browser_clusters.py.
    assert [b.label for b in at.get("download_button") if b.proto.id.endswith("clusters_csv")] == [
        "Download image ids (CSV)"
    ]
    labels = figure(at, "bar").data[0]
    stored = pd.read_parquet(root / "images.parquet")["label_name"].value_counts()
    assert dict(zip(labels.y, array(labels.x).tolist())) == stored.to_dict()
    # Another selection starts at its first page.
    at.radio(key="clusters_sel").set_value("cluster").run()
    assert at.query_params.get("page") is None


def test_an_image_from_the_link_shows_its_details_and_neighbours(monkeypatch, factory_template):
    at = open_app(monkeypatch, factory_template, CLUSTERS, query={"ckpt": "ck1", "img": "toy-0004"})
    assert_clean(at)
    side = " ".join(m.value for m in at.sidebar.markdown)
    assert "toy\\-0004" in side and "a green square" in side and "Nearest in ck1" in side
    from conceptlens.db import WorkspaceDB

    near = views.clusters.neighbours(WorkspaceDB(factory_template), "ck1", 4, "toy-0004", n=8)
    buttons = [b for b in at.sidebar.button if b.key and b.key.startswith("clusters_near-")]
    assert [b.key.removeprefix("clusters_near-") for b in buttons] == list(near["image_id"])
    buttons[0].click().run()
    assert at.query_params["img"] in (near["image_id"].iloc[0], [near["image_id"].iloc[0]])
    at.button(key="clusters_close_img").click().run()
    assert "img" not in at.query_params and not any("Nearest" in m.value for m in at.sidebar.markdown)


def test_unknown_image_from_the_link(monkeypatch, factory_template):
    at = open_app(monkeypatch, factory_template, CLUSTERS, query={"img": "**nope**"})
    assert_clean(at)
    assert "\\*\\*nope\\*\\*" in " ".join(i.value for i in at.sidebar.info)


def test_umap_rings_the_chosen_cluster(monkeypatch, factory_template):
    at = open_app(monkeypatch, factory_template, CLUSTERS, query={"ckpt": "ck0", "cluster": "2"})
    args = projection_args(at)
    ringed = [i for i, r in zip(args["ids"], args["ring"]) if r]
    assign = assignment(factory_template, "ck0")
    assert sorted(ringed) == sorted(assign.loc[assign["cluster"] == 2, "image_id"])
    # Every point's coordinates are its stored ones.
    proj = pd.read_parquet(factory_template / "projections/checkpoint_id=ck0/method=umap/part-0.parquet")
    proj = proj.set_index("image_id").loc[args["ids"]]
    assert np.allclose(args["x"], proj["x"], rtol=1e-6) and np.allclose(args["y"], proj["y"], rtol=1e-6)
    purity = figure(at, "scatter")
    assert purity.data[-1].name == "cluster 2"


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
    query = {"a": "ck2", "b": "ck0", "flows": "all flows"}  # the toy's pair has no split
    at = open_app(monkeypatch, factory_template, CHECKPOINTS, query=query)
    assert_clean(at)
    assert (selected(at)["From checkpoint (A)"], selected(at)["To checkpoint (B)"]) == ("ck2", "ck0")
    want = compare.match_clusters(assignment(factory_template, "ck2"), assignment(factory_template, "ck0"))
    kinds = events.events_from_links(
        compare.contingency(assignment(factory_template, "ck2"), assignment(factory_template, "ck0"))
    )["kind"].value_counts()
    assert metrics(at)["A clusters that split"] == str(kinds.get("split", 0))
    assert metrics(at)["B clusters that merge"] == str(kinds.get("merge", 0))
    assert metrics(at)["births / deaths"] == f"{kinds.get('birth', 0)} / {kinds.get('death', 0)}"
    links = at.dataframe[-1].value
    pd.testing.assert_frame_equal(links.reset_index(drop=True)[want.columns].astype(str), want.astype(str))
    assert any("a green shape" in hover for _, hover in figure(at, "sankey").data[0].node.customdata)


def test_flows_and_significant_share(monkeypatch, factory_template):
    at = open_app(monkeypatch, factory_template, CHECKPOINTS, query={"a": "ck0", "b": "ck1"})
    assert_clean(at)
    from conceptlens.figures.checkpoints import KIND_COLOURS

    cells = compare.contingency(assignment(factory_template, "ck0"), assignment(factory_template, "ck1"))
    labelled = events.label_links(cells)  # the page's default share, 0.2
    # By default the Sankey draws the links of significant splits and merges only.
    sankeys = [f for f in figures(at) if f.data and f.data[0].type == "sankey"]
    drawn = sum(len(f.data[0].link.value) for f in sankeys)
    assert drawn == labelled["event"].isin(["split", "merge", "split+merge"]).sum()
    at.radio(key="ckpts_flows").set_value("all flows").run()
    assert_clean(at)
    colours = figure(at, "sankey").data[0].link.color
    assert sorted(colours) == sorted(KIND_COLOURS[e] for e in labelled["event"])
    at.slider(key="ckpts_share").set_value(0.5).run()
    assert_clean(at)
    kinds = events.events_from_links(cells, min_share=0.5)["kind"].value_counts()
    assert metrics(at)["A clusters that split"] == str(kinds.get("split", 0))
    assert metrics(at)["one-to-one matches"] == str(kinds.get("continuation", 0))


def test_checkpoints_page_without_clusters_keeps_the_stored_comparisons(monkeypatch, factory_copy):
    """The aNMI matrix is read from the comparisons; the Sankey counts the shown pair's
    links from their clusters, so without clusters the page says what it needs."""
    shutil.rmtree(factory_copy / "clusters")
    at = open_app(monkeypatch, factory_copy, CHECKPOINTS)
    assert_clean(at)
    types = {f.data[0].type for f in figures(at)}
    assert "heatmap" in types and "sankey" not in types
    assert any("Needs the clusterings and the comparisons" in c.value for c in at.caption)


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
