"""Label hierarchies (format 2.4, table `label_hierarchy`; conceptlens/hierarchy.py and
conceptlens/views/hierarchy.py): trees from paths and pairs, levels and ancestors, the
checks of `validate` (each naming table, column and value), and purity read at a level
against a value computed another way and against the stored purity where they coincide."""

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy.stats import entropy

from conceptlens import hierarchy as H
from conceptlens import schema
from conceptlens.db import WorkspaceDB
from conceptlens.validate import validate
from conceptlens.views import clusters as C
from conceptlens.views import hierarchy as VH
from conceptlens.workspace import Workspace
from tests.conftest import has_demo

TREE = {"warm": None, "cool": None, "red": "warm", "green": "cool", "blue": "cool"}
GROUP = {"red": "warm", "green": "cool", "blue": "cool"}


def test_paths_spell_a_tree_whose_levels_keep_shallow_nodes():
    parent = H.from_paths(["animals/mammals/big_cats", "animals", "food/fruit", None, "animals/birds"])
    assert parent == {
        "animals": None,
        "animals/mammals": "animals",
        "animals/mammals/big_cats": "animals/mammals",
        "food": None,
        "food/fruit": "food",
        "animals/birds": "animals",
    }
    h = H.Hierarchy("d", "category_path", parent)
    assert h.levels == 3 and h.level_names() == ["level 0 (top)", "level 1", "level 2 (finest)"]
    assert h.ancestor("animals/mammals/big_cats", 0) == "animals"
    assert h.ancestor("animals/mammals/big_cats", 1) == "animals/mammals"
    assert h.ancestor("animals/mammals/big_cats", 2) == "animals/mammals/big_cats"
    assert h.ancestor("animals", 2) == "animals"  # shallower: keeps its own node
    assert h.ancestor(None, 1) is None
    assert h.nodes_at(1) == ["animals/birds", "animals/mammals", "food/fruit"]
    assert h.children("animals") == ["animals/birds", "animals/mammals"]
    # drill-down: inside `animals`, at level 0 the groups are its children
    assert h.group("animals/mammals/big_cats", 0, within="animals") == "animals/mammals"
    assert h.group("food/fruit", 1, within="animals") is None
    with pytest.raises(H.HierarchyError, match="empty part"):
        H.from_paths(["a//b"])
    with pytest.raises(H.HierarchyError, match="'zebra'.*not a node"):
        h.ancestor("zebra", 0)


def test_pairs_refuse_cycles_and_two_parents():
    assert H.from_pairs([("red", "warm"), ("warm", "")]) == {"red": "warm", "warm": None}
    with pytest.raises(H.HierarchyError, match="cycle.*'a' -> 'b' -> 'a'"):
        H.from_pairs([("a", "b"), ("b", "a")])
    with pytest.raises(H.HierarchyError, match="'red' has two parents, 'warm' and 'cool'"):
        H.from_pairs([("red", "warm"), ("red", "cool")])
    assert H.tree_problems({"a": "zz"}) == ["parent(s) 'zz' are not nodes"]


@pytest.fixture
def toy(factory_copy):
    H.write(Workspace(factory_copy), H.Hierarchy("toy", "label_name", dict(TREE)))
    return factory_copy


def _rows(root, rows):
    """Write `rows` as toy's hierarchy, unchecked (what a foreign writer could store)."""
    t = pa.Table.from_pylist(rows, schema=schema.arrow_schema(H.TABLE, partition=False))
    Workspace(root).write(H.TABLE, t, dataset="toy")


def _problems(root):
    return [str(p) for p in validate(root, deep=False, tables={H.TABLE})]


def row(node, parent, col="label_name"):
    return {"images_column": col, "node": node, "parent": parent, "name": None}


def test_a_written_hierarchy_is_valid_and_reads_back(toy):
    assert _problems(toy) == []
    h = H.read(WorkspaceDB(toy), "toy")
    assert h.parent == TREE and h.column == "label_name"
    assert H.load(Workspace(toy), "toy").parent == TREE


@pytest.mark.parametrize(
    "rows, message",
    [
        (  # blue is no node: an image's value is missing from the tree
            [row("warm", None), row("cool", None), row("red", "warm"), row("green", "cool")],
            "table label_hierarchy, column node): dataset 'toy': 16 image(s) hold a value of "
            "images.label_name that is not a node of the hierarchy: 'blue'",
        ),
        (
            [row("red", "hot"), row("green", None), row("blue", None)],
            "column parent): 1 value(s) are not nodes of the same dataset; example: node='red', parent='hot'",
        ),
        (
            [row("red", "blue"), row("blue", "green"), row("green", "red")],
            "column parent): dataset 'toy': cycle(s) 'red' -> 'blue' -> 'green' -> 'red'",
        ),
        (
            [row("red", None), row("green", None), row("blue", None, "shape")],
            "column images_column): 1 value(s) differ from the dataset's first row",
        ),
        (
            [row("red", None, "flavour")],
            "column images_column): dataset 'toy': images has no column 'flavour'",
        ),
    ],
)
def test_validate_names_what_is_wrong(toy, rows, message):
    _rows(toy, rows)
    assert any(message in p for p in _problems(toy)), _problems(toy)


def test_write_refuses_values_that_are_not_nodes(toy):
    h = H.Hierarchy("toy", "label_name", {"red": None})
    with pytest.raises(H.HierarchyError, match="'blue', 'green' of images.label_name are not nodes"):
        H.write(Workspace(toy), h, ["red", "green", "blue", None])


def test_purity_at_a_level_against_scipy_and_the_stored_purity(toy):
    db = WorkspaceDB(toy)
    labels = pd.read_parquet(toy / "images.parquet").set_index("image_id")["label_name"]
    assigned = pd.read_parquet(toy / "clusters/checkpoint_id=ck1/k=4/part-0.parquet")
    top = VH.cluster_purity(db, "toy", "ck1", 4, 0).set_index("cluster")
    for c, part in assigned.groupby("cluster"):
        counts = labels.loc[part["image_id"]].map(GROUP).value_counts()
        assert np.isclose(top.loc[c, "level_purity"], max(0.0, 1 - entropy(counts.to_numpy()) / math.log(2)))
        assert top.loc[c, "level_top"] == sorted(counts[counts == counts.max()].index)[0]
        assert top.loc[c, "size"] == len(part)
    # Level 1 is the labels themselves (K = 3 colours). (The factory's stored purity is made
    # up; the demo's test below compares with purity computed by `cluster_metrics`.)
    finest = VH.cluster_purity(db, "toy", "ck1", 4, 1).set_index("cluster")
    for c, part in assigned.groupby("cluster"):
        counts = labels.loc[part["image_id"]].value_counts().to_numpy()
        assert np.isclose(finest.loc[c, "level_purity"], max(0.0, 1 - entropy(counts) / math.log(3)))
    with pytest.raises(H.HierarchyError, match="parameter level: 2 is not a level"):
        VH.cluster_purity(db, "toy", "ck1", 4, 2)


def test_levels_and_selection_histograms(toy):
    db = WorkspaceDB(toy)
    lv = VH.levels(db, "toy")
    assert list(lv["groups"]) == [2, 3] and list(lv["name"]) == ["level 0 (top)", "level 1 (finest)"]
    assert VH.levels(WorkspaceDB(toy), "other").empty
    labels = pd.read_parquet(toy / "images.parquet").set_index("image_id")["label_name"]
    assigned = pd.read_parquet(toy / "clusters/checkpoint_id=ck0/k=4/part-0.parquet")
    chosen = assigned[assigned["cluster"].isin([0, 2])]
    got = VH.selection_groups(db, "toy", "ck0", 4, (0, 2), 0)
    want = labels.loc[chosen["image_id"]].map(GROUP).value_counts()
    assert dict(zip(got["label_name"], got["images"])) == want.to_dict()
    # A region around every point of the projection holds every image: all four clusters.
    everything = VH.region_groups(db, "toy", "ck0", 4, "box:-1e6,1e6,-1e6,1e6", 0)
    assert everything.equals(VH.selection_groups(db, "toy", "ck0", 4, (0, 1, 2, 3), 0))
    assert (
        dict(zip(everything["label_name"], everything["images"]))
        == labels.map(GROUP).value_counts().to_dict()
    )
    inside = VH.selection_groups(db, "toy", "ck0", 4, (0, 2), 1, within="cool")
    names = labels.loc[chosen["image_id"]].map(lambda v: v if v != "red" else "outside cool")
    assert dict(zip(inside["label_name"], inside["images"])) == names.value_counts().to_dict()


@pytest.mark.skipif(not has_demo(), reason="no demo workspace")
def test_clipart_top_level_is_its_label_and_its_purity_the_stored_one(demo_copy):
    from conceptlens.demo.real import build_hierarchy

    # The committed demo holds the tree already: building it again rewrites that file only.
    before = {
        p: p.stat().st_mtime_ns for p in demo_copy.rglob("*.parquet") if "label_hierarchy" not in p.parts
    }
    assert build_hierarchy(Workspace(demo_copy), progress=False) > 10
    assert {p: p.stat().st_mtime_ns for p in before} == before  # nothing else rewritten
    assert _problems(demo_copy) == []
    # digits: a tree over label_name (even / odd above the ten digits), whose finest level is
    # the labels: the stored purity again.
    words = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
    digits = {"even": None, "odd": None} | {w: ("even", "odd")[d % 2] for d, w in enumerate(words)}
    names = set(pd.read_parquet(demo_copy / "images.parquet").query("dataset == 'digits'")["label_name"])
    assert names == set(words)
    H.write(Workspace(demo_copy), H.Hierarchy("digits", "label_name", digits), names)
    db = WorkspaceDB(demo_copy)
    ckpt = C.checkpoints(db, "digits")["checkpoint_id"].iloc[0]
    k = int(C.ks(db, ckpt)["k"].iloc[0])
    finest = VH.cluster_purity(db, "digits", ckpt, k, 1)
    stored = C.cluster_table(db, "digits", ckpt, k, captions=False)
    assert np.allclose(finest["level_purity"], stored["purity"], equal_nan=True)
    assert list(finest["level_top"]) == list(stored["top_label_name"])
    for ckpt in C.checkpoints(db, "clipart")["checkpoint_id"]:
        k = int(C.ks(db, ckpt)["k"].iloc[0])
        level0 = VH.cluster_purity(db, "clipart", ckpt, k, 0)
        stored = C.cluster_table(db, "clipart", ckpt, k, captions=False)
        assert np.allclose(level0["level_purity"], stored["purity"], equal_nan=True)
        assert list(level0["level_top"]) == list(stored["top_label_name"])
