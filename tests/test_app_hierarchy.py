"""AppTest of the Clusters page reading labels at a level of the label hierarchy (issue 23):
the level chosen in the URL colours the UMAP and its legend by group, adds each cluster's
purity at that level to the table and groups the selection's histogram; a drill-down
colours only a node's subtree. Fails if the level is ignored."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import entropy

from conceptlens import hierarchy as H
from conceptlens.figures.clusters import OTHER
from conceptlens.workspace import Workspace
from tests.conftest import has_demo
from tests.test_app import assert_clean, open_app
from tests.test_app_clusters import CLUSTERS, array, figures, projection_args, selected

# The factory's labels are colours: red alone under `warm`, green and blue under `cool`.
TREE = {"warm": None, "cool": None, "red": "warm", "green": "cool", "blue": "cool"}
GROUP = {"red": "warm", "green": "cool", "blue": "cool"}


def with_tree(root):
    H.write(Workspace(root), H.Hierarchy("toy", "label_name", dict(TREE)))
    return root


def test_the_level_in_the_link_colours_the_umap_and_its_legend(monkeypatch, factory_copy):
    with_tree(factory_copy)
    images = pd.read_parquet(factory_copy / "images.parquet").set_index("image_id")
    at = open_app(monkeypatch, factory_copy, CLUSTERS, query={"color": "label_name"})
    assert_clean(at)
    args = projection_args(at)
    assert set(args["names"]) == {"red", "green", "blue"}  # no level: the labels themselves
    at = open_app(monkeypatch, factory_copy, CLUSTERS, query={"color": "label_name", "level": "0"})
    assert_clean(at)
    assert selected(at)["Labels at level"] == "0"
    args = projection_args(at)
    assert set(args["names"]) == {"warm", "cool"}
    want = [GROUP[c] for c in images.loc[args["ids"], "label_name"]]
    assert [args["names"][c] for c in args["codes"]] == want


def test_the_level_adds_purity_at_that_level_and_groups_the_histogram(monkeypatch, factory_copy):
    with_tree(factory_copy)
    at = open_app(monkeypatch, factory_copy, CLUSTERS, query={"level": "0", "cluster": "1"})
    assert_clean(at)
    table = at.dataframe[0].value.set_index("cluster")
    labels = pd.read_parquet(factory_copy / "images.parquet").set_index("image_id")["label_name"]
    assigned = pd.read_parquet(factory_copy / "clusters/checkpoint_id=ck0/k=4/part-0.parquet")
    groups = assigned.assign(g=labels.loc[assigned["image_id"]].map(GROUP).to_numpy())
    for c, part in groups.groupby("cluster"):
        counts = part["g"].value_counts().to_numpy()
        want = max(0.0, 1 - entropy(counts) / math.log(2))  # K = 2 groups at level 0
        assert np.isclose(table.loc[c, "level purity"], want)
    (hist,) = [f for f in figures(at) if f.data and f.data[0].type == "bar" and f.data[0].orientation == "h"]
    shown = dict(zip(hist.data[0].customdata, array(hist.data[0].x).astype(int).tolist()))
    part = groups[groups["cluster"] == 1]["g"].value_counts()
    assert shown == part.to_dict()


def test_drilling_into_a_node_colours_its_subtree_only(monkeypatch, factory_copy):
    with_tree(factory_copy)
    images = pd.read_parquet(factory_copy / "images.parquet").set_index("image_id")
    at = open_app(
        monkeypatch, factory_copy, CLUSTERS, query={"color": "label_name", "level": "1", "within": "cool"}
    )
    assert_clean(at)
    args = projection_args(at)
    assert set(args["names"]) == {"green", "blue", "outside cool"}
    want = [c if c in ("green", "blue") else "outside cool" for c in images.loc[args["ids"], "label_name"]]
    assert [args["names"][c] for c in args["codes"]] == want
    grey = args["palette"][args["names"].index("outside cool")]
    assert grey == OTHER and grey not in [args["palette"][args["names"].index(c)] for c in ("green", "blue")]


def test_a_workspace_without_a_hierarchy_offers_no_level(monkeypatch, factory_copy):
    at = open_app(monkeypatch, factory_copy, CLUSTERS, query={"level": "0"})
    assert_clean(at)
    assert "Labels at level" not in selected(at)
    assert "level purity" not in at.dataframe[0].value


@pytest.mark.skipif(not has_demo(), reason="no demo workspace")
def test_clipart_at_its_top_level_draws_the_catalogue_builds(monkeypatch, demo_copy):
    """On the demo's clipart with its tree: the page's UMAP export and label histogram at
    level 0 are the catalogue's builds with the page's level (tests/test_figure_specs.py),
    and level 0 colours by the ten top-level categories, which are the labels."""
    from conceptlens.demo.real import build_hierarchy
    from tests.test_figure_specs import check_page_draws_the_catalogue_build

    build_hierarchy(Workspace(demo_copy), progress=False)
    query = {"ds": "clipart", "color": "label_name", "level": "0", "sel": "filter"}
    check_page_draws_the_catalogue_build(monkeypatch, demo_copy, "clusters", query)
    at = open_app(monkeypatch, demo_copy, CLUSTERS, query=query)
    assert_clean(at)
    args = projection_args(at)
    labels = pd.read_parquet(demo_copy / "images.parquet").set_index("image_id")["label_name"]
    assert [args["names"][c] for c in args["codes"]] == list(labels.loc[args["ids"]])
    at = open_app(monkeypatch, demo_copy, CLUSTERS, query={**query, "level": "1", "within": "animals"})
    assert_clean(at)
    names = set(projection_args(at)["names"])
    assert "outside animals" in names and "animals/mammals" in names and "food" not in names


def test_a_broken_hierarchy_is_named_and_the_labels_shown_as_they_are(monkeypatch, factory_copy):
    import pyarrow as pa

    from conceptlens import schema
    from tests.test_app import plain

    rows = [
        {"images_column": "label_name", "node": n, "parent": p, "name": None}
        for n, p in [("red", "blue"), ("blue", "green"), ("green", "red")]  # a cycle
    ]
    t = pa.Table.from_pylist(rows, schema=schema.arrow_schema(H.TABLE, partition=False))
    Workspace(factory_copy).write(H.TABLE, t, dataset="toy")
    at = open_app(monkeypatch, factory_copy, CLUSTERS, query={"level": "0", "color": "label_name"})
    assert not at.exception
    assert "table label_hierarchy, column parent" in plain(at.error) and "cycle" in plain(at.error)
    assert "Labels at level" not in selected(at)
    assert set(projection_args(at)["names"]) == {"red", "green", "blue"}
