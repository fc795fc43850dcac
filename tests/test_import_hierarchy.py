"""Importers read label hierarchies (issue 23): nested folders, a manifest's `parent` column
or a hierarchy file, ImageNet's WordNet hypernyms parsed from a hand-written `data.noun`
excerpt, and `conceptlens import hierarchy`; every result validates, bad trees are refused
naming the file."""

import numpy as np
import pyarrow.parquet as pq
import pytest

from conceptlens import hierarchy as H
from conceptlens.cli import main
from conceptlens.importers import imagenet, wordnet
from conceptlens.workspace import Workspace
from tests.test_importers import NAMES, assert_valid, draw, fails, init, make_imagenet, table, write_manifest


def tree(ws, dataset):
    h = H.load(Workspace(ws), dataset)
    return None if h is None else (h.column, h.parent, h.names)


def nested(root):
    """root/animals/{cat.png, mammals/{lion.png, big_cats/tiger.png}}, root/food/apple.png."""
    rng = np.random.default_rng(0)
    for rel in (
        "animals/cat.png",
        "animals/mammals/lion.png",
        "animals/mammals/big_cats/tiger.png",
        "food/a.png",
    ):
        draw(root / rel, (200, 100, 50), rng)
    return root


def test_nested_folders_keep_their_path_and_its_tree(tmp_path, capsys):
    src, ws = nested(tmp_path / "src"), init(tmp_path)
    assert main(["import", "images", "--workspace", str(ws), "--dataset", "d", str(src), "--quiet"]) == 0
    assert "label hierarchy over column category_path: 4 nodes on 3 levels" in capsys.readouterr().out
    df = table(ws).set_index("image_id")
    assert dict(zip(df["category_path"], df["label_name"])) == {
        "animals": "animals",
        "animals/mammals": "animals",
        "animals/mammals/big_cats": "animals",
        "food": "food",
    }
    assert tree(ws, "d") == (
        "category_path",
        {
            "animals": None,
            "animals/mammals": "animals",
            "animals/mammals/big_cats": "animals/mammals",
            "food": None,
        },
        {},
    )
    assert_valid(ws)
    # --labels leaf: the label is the image's own folder, the tree over label_name
    ws2 = init(tmp_path, "ws2")
    argv = ["import", "images", "--workspace", str(ws2), "--dataset", "d", str(src), "--quiet"]
    assert main([*argv, "--labels", "leaf"]) == 0
    assert sorted(table(ws2)["label_name"]) == [
        "animals",
        "animals/mammals",
        "animals/mammals/big_cats",
        "food",
    ]
    assert "category_path" not in table(ws2) and tree(ws2, "d")[0] == "label_name"
    assert_valid(ws2)


def test_flat_folders_have_no_hierarchy(tmp_path):
    rng = np.random.default_rng(0)
    for rel in ("a/1.png", "b/2.png"):
        draw(tmp_path / "src" / rel, (10, 20, 30), rng)
    ws = init(tmp_path)
    src = str(tmp_path / "src")
    assert main(["import", "images", "--workspace", str(ws), "--dataset", "d", src, "--quiet"]) == 0
    assert "category_path" not in table(ws) and tree(ws, "d") is None


def test_a_manifest_parent_column_and_a_hierarchy_file(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = []
    for i, (name, parent) in enumerate([("lion", "mammals"), ("tiger", "mammals"), ("apple", "fruit")] * 2):
        draw(tmp_path / f"{i}.png", (i * 30, 50, 50), rng)
        rows.append({"path": f"{i}.png", "label_name": name, "parent": parent})
    m = write_manifest(tmp_path, rows)
    (tmp_path / "h.csv").write_text("node,parent,name\nmammals,animals,Mammals\nanimals,,\n")
    ws = init(tmp_path)
    argv = ["import", "images", "--workspace", str(ws), "--dataset", "m", str(m), "--quiet"]
    assert main([*argv, "--hierarchy", str(tmp_path / "h.csv")]) == 0
    assert "parent" not in table(ws)  # the tree is its own table, not a factor
    col, parent, names = tree(ws, "m")
    assert col == "label_name" and names == {"mammals": "Mammals"}
    assert parent == {
        "lion": "mammals",
        "tiger": "mammals",
        "apple": "fruit",
        "mammals": "animals",
        "animals": None,
        "fruit": None,
    }
    assert_valid(ws)
    # A label with two parents is refused, naming the manifest, and nothing is written.
    rows[3]["parent"] = "cats"
    bad = write_manifest(tmp_path, rows, "bad.csv")
    ws2 = init(tmp_path, "ws2")
    fails(
        ["import", "images", "--workspace", str(ws2), "--dataset", "m", str(bad), "--quiet"],
        capsys,
        "bad.csv (column parent): node 'lion' has two parents, 'mammals' and 'cats'",
    )
    assert tree(ws2, "m") is None and len(table(ws2)) == 0


# A hand-written excerpt of WordNet's data.noun (format of wndb(5WN)): a licence line, then
# one synset a line. `crane` n02012849 has a hypernym and an instance hypernym (the first
# `@` wins); `crane` n03126707 has only an instance hypernym.
DATA_NOUN = """\
  1 This software and database is being provided to you, the LICENSEE, by
00001740 03 n 01 entity 0 001 ~ 00001930 n 0000 | that which is perceived or known
00001930 03 n 01 physical_entity 0 002 @ 00001740 n 0000 ~ 00002684 n 0000 | has physical existence
00002684 03 n 02 object 0 physical_object 0 002 @ 00001930 n 0000 ~ 01000001 n 0000 | a tangible entity
01000001 05 n 01 animal 0 004 @ 00002684 n 0000 ~ 01000002 n 0000 ~ 01000003 n 0000 ~ 02012849 n 0000 | alive
01000002 05 n 01 fish 0 002 @ 01000001 n 0000 ~ 01440764 n 0000 | aquatic vertebrates
01440764 05 n 02 tench 0 Tinca_tinca 0 001 @ 01000002 n 0000 | freshwater dace-like game fish
01000003 05 n 01 snake 0 002 @ 01000001 n 0000 ~ 01751748 n 0000 | limbless scaly elongate reptile
01751748 05 n 01 sea_snake 0 001 @ 01000003 n 0000 | venomous Asiatic and Australian snake
02012849 05 n 01 crane 0 002 @i 09999999 n 0000 @ 01000001 n 0000 | large long-necked wading bird
03126707 06 n 01 crane 0 001 @i 00002684 n 0000 | lifts and moves heavy objects
"""


def test_wordnet_hypernyms_make_a_tree_without_single_child_chains(tmp_path):
    path = tmp_path / "data.noun"
    path.write_text(DATA_NOUN)
    parent, lemma = wordnet.read_data_noun(path)
    assert parent["n02012849"] == "n01000001"  # `@`, not the earlier `@i`
    assert parent["n03126707"] == "n00002684" and parent["n00001740"] is None
    assert lemma["n00001930"] == "physical entity" and lemma["n01440764"] == "tench"
    tree_, names = wordnet.imagenet_tree(list(NAMES), path, NAMES)
    # entity and physical_entity (one child each) and fish and snake (one class each) are gone
    assert tree_ == {
        "n00002684": None,
        "n01000001": "n00002684",
        "n01440764": "n01000001",
        "n01751748": "n01000001",
        "n02012849": "n01000001",
        "n03126707": "n00002684",
    }
    assert names["n00002684"] == "object" and names["n01000001"] == "animal"
    assert names["n02012849"] == "crane (n02012849)"  # the class keeps the importer's name
    path.write_text(DATA_NOUN + "01234567 05 n zz broken\n")
    with pytest.raises(H.HierarchyError, match="data.noun line 12: not a WordNet data line"):
        wordnet.read_data_noun(path)


def test_imagenet_import_writes_the_wordnet_tree_or_says_why_not(tmp_path, capsys, monkeypatch):
    root = make_imagenet(tmp_path / "imagenet", "kaggle")
    noun = tmp_path / "data.noun"
    noun.write_text(DATA_NOUN)
    ws = init(tmp_path)
    argv = ["import", "images", "--workspace", str(ws), "--dataset", "inet", str(root), "--quiet"]
    assert main([*argv, "--wordnet", str(noun)]) == 0
    col, parent, names = tree(ws, "inet")
    assert col == "wnid" and parent["n01440764"] == "n01000001" and names["n01000001"] == "animal"
    assert_valid(ws)
    # Without WordNet: imported, with a note naming the Debian package, and no tree.
    monkeypatch.setattr(wordnet, "DATA_NOUN", tmp_path / "absent" / "data.noun")
    ws2 = init(tmp_path, "ws2")
    argv2 = ["import", "images", "--workspace", str(ws2), "--dataset", "inet", str(root), "--quiet"]
    assert main(argv2) == 0
    assert "no label hierarchy" in capsys.readouterr().out and "wordnet-base" in imagenet.__doc__
    assert tree(ws2, "inet") is None
    fails([*argv2, "--replace", "--wordnet", str(tmp_path / "nope")], capsys, "--wordnet", "file not found")


def test_import_hierarchy_from_a_file_or_a_column_of_paths(tmp_path, capsys):
    src, ws = nested(tmp_path / "src"), init(tmp_path)
    assert main(["import", "images", "--workspace", str(ws), "--dataset", "d", str(src), "--quiet"]) == 0
    (tmp_path / "h.csv").write_text("node,parent\nanimals,living\nfood,\nliving,\n")
    assert (
        main(["import", "hierarchy", "--workspace", str(ws), "--dataset", "d", str(tmp_path / "h.csv")]) == 0
    )
    assert tree(ws, "d")[1] == {"animals": "living", "food": None, "living": None}
    assert_valid(ws)
    (tmp_path / "bad.csv").write_text("node,parent\nanimals,\n")
    fails(
        ["import", "hierarchy", "--workspace", str(ws), "--dataset", "d", str(tmp_path / "bad.csv")],
        capsys,
        "'food' of images.label_name are not nodes",
    )
    argv = ["import", "hierarchy", "--workspace", str(ws), "--dataset", "d", "--paths", "category_path"]
    assert main(argv) == 0
    assert tree(ws, "d")[0] == "category_path" and len(tree(ws, "d")[1]) == 4
    assert pq.read_table(ws / "label_hierarchy/dataset=d/part-0.parquet").num_rows == 4
