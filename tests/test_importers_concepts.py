"""conceptlens/importers/concepts.py (`conceptlens import concepts`): every image gets its own
concept values, whatever the file's order, names or coding; what cannot be a concept is
refused (a file's column) or left out with the reason (a derived one) and nothing is written;
a dataset's concepts are replaced whole; and concepts of one's own nested folders reach the
Concepts page through `analyze concepts` (issue 47, major 3)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conceptlens.importers import concepts as IC
from conceptlens.importers.imagefolder import scan as scan_folder
from conceptlens.importers.images import ImportInputError
from conceptlens.metrics import concepts as CQ
from tests import helpers_importers
from tests.helpers_importers import dataset_image_ids, draw, images_table, run

feat_ws = helpers_importers.feat_ws

# Nested folders (category/subfolder), as openclipart's: the label is the top folder.
TREE = {
    ("shapes", "stars"): 8,
    ("shapes", "arrows"): 8,
    ("shapes", None): 4,
    ("plants", "trees"): 8,
    ("plants", "flowers"): 8,
    ("plants", None): 4,
    ("rare", "one"): 2,  # too few images: left out
    ("rare", None): 6,
}


@pytest.fixture
def nested(tmp_path):
    root = tmp_path / "own"
    seed = 0
    for (top, sub), n in TREE.items():
        for i in range(n):
            folder = root / top / sub if sub else root / top
            draw(folder / f"{i:03d}.png", (30 * seed % 255, 80, 200 - seed % 150), seed=seed)
            seed += 1
    ws = helpers_importers.workspace(tmp_path)
    run(ws, "own", scan_folder(root), test_fraction=0.5, seed=0)
    return ws


def labels_of(ws) -> pd.DataFrame:
    return pq.read_table(ws.table_path("concept_labels")).to_pandas()


def wide(ws) -> pd.DataFrame:
    return labels_of(ws).pivot(index="image_id", columns="concept", values="value")


# ---- encode: the coding of one column --------------------------------------------------------
values = st.lists(st.sampled_from(["cat", "dog", "owl", "Émile", "b c"]), min_size=2, max_size=40)


@settings(max_examples=60, deadline=None)
@given(values, st.randoms(use_true_random=False))
def test_encode_codes_each_value_by_its_category_whatever_the_order(vals, rnd):
    if len(set(vals)) < 2:
        with pytest.raises(IC.ConceptValueError, match="single value"):
            IC.encode(vals)
        return
    codes, cats = IC.encode(vals)
    assert [cats[c] for c in codes] == vals  # read back whole
    assert sorted(set(codes)) == list(range(len(cats)))  # 0..m-1, no gap
    order = list(range(len(vals)))
    rnd.shuffle(order)
    codes2, cats2 = IC.encode([vals[i] for i in order])
    assert cats2 == cats and codes2 == [codes[i] for i in order]  # row order does not matter


@settings(max_examples=40, deadline=None)
@given(values, st.permutations(["w", "x", "y", "z", "v"]))
def test_renaming_categories_keeps_the_grouping(vals, names):
    if len(set(vals)) < 2:
        return
    rename = dict(zip(["cat", "dog", "owl", "Émile", "b c"], names))
    a, _ = IC.encode(vals)
    b, _ = IC.encode([rename[v] for v in vals])
    pairs = set(zip(a, b))
    assert len(pairs) == len(set(a)) == len(set(b))  # a bijection between the two codings


@pytest.mark.parametrize(
    "vals, codes, cats",
    [
        ([True, False, True], [1, 0, 1], ["0", "1"]),
        (np.array([1, 0, 0]), [1, 0, 0], ["0", "1"]),
        ([1.0, 0.0, 1.0], [1, 0, 1], ["0", "1"]),
        (["Yes", "no", "YES"], [1, 0, 1], ["no", "yes"]),
        (["false", "True"], [0, 1], ["false", "true"]),
        ([3, 10, 3, 2], [1, 2, 1, 0], ["2", "3", "10"]),  # numeric order, not text order
        ([-1, 1, -1], [0, 1, 0], ["-1", "1"]),
    ],
)
def test_encode_binary_and_numbers(vals, codes, cats):
    assert IC.encode(vals) == (codes, cats)


@pytest.mark.parametrize(
    "vals, match",
    [
        ([0.5, 1.0], "not an integer"),
        ([1.0, float("nan")], "not an integer"),
        ([7, 7, 7], "single value"),
        ([str(i) for i in range(IC.MAX_VALUES + 1)], f"at most {IC.MAX_VALUES}"),
    ],
)
def test_encode_refuses_what_is_not_a_concept(vals, match):
    with pytest.raises(IC.ConceptValueError, match=match):
        IC.encode(vals)


# ---- from a file --------------------------------------------------------------------------------
def test_each_image_gets_its_own_values_by_id_or_path(tmp_path, feat_ws):
    ws = feat_ws
    ids = dataset_image_ids(ws, "d")
    t = images_table(ws).set_index("image_id")
    keys = [i if n % 2 else t.loc[i, "source_path"] or t.loc[i, "thumbnail"] for n, i in enumerate(ids)]
    colour = [t.loc[i, "label_name"] for i in ids]
    bright = [n % 2 for n in range(len(ids))]
    df = pd.DataFrame({"image_id": keys, "colour": colour, "bright": bright}).iloc[::-1]
    df.to_csv(tmp_path / "c.csv", index=False)
    r = IC.import_concepts(ws, "d", tmp_path / "c.csv")
    got = wide(ws)
    cats = {c.name: c.categories for c in r.concepts}
    assert {i: cats["colour"][got.loc[i, "colour"]] for i in ids} == dict(zip(ids, colour))
    assert {i: got.loc[i, "bright"] for i in ids} == dict(zip(ids, bright))
    assert r.images == len(ids) and sorted(got.index) == sorted(ids)


def test_a_bad_file_names_the_row_and_column_and_writes_nothing(tmp_path, feat_ws):
    ws = feat_ws
    ids = dataset_image_ids(ws, "d")
    ok = pd.DataFrame({"image_id": ids, "a": [0, 1] * 3})
    ok.to_csv(tmp_path / "ok.csv", index=False)
    IC.import_concepts(ws, "d", tmp_path / "ok.csv")
    before = ws.table_path("concept_labels").read_bytes()
    cases = {
        "empty cell": (ok.assign(a=[0, 1, None, 1, 0, 1]), r"row 3 \(line 4\): column a is empty"),
        "unknown image": (ok.assign(image_id=ids[:-1] + ["nope"]), "'nope' is not an image"),
        "twice": (ok.assign(image_id=ids[:-1] + ids[:1]), "again"),
        "measurement": (
            ok.assign(a=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6]),
            "column a holds a value that is not an integer",
        ),
        "constant": (ok.assign(a=1), "column a takes a single value"),
    }
    for name, (df, match) in cases.items():
        df.to_csv(tmp_path / "bad.csv", index=False)
        with pytest.raises(ImportInputError, match=match):
            IC.import_concepts(ws, "d", tmp_path / "bad.csv", replace=True)
        assert ws.table_path("concept_labels").read_bytes() == before, name
    with pytest.raises(ImportInputError, match=r"no column\(s\) 'b' \(--columns\)"):
        IC.import_concepts(ws, "d", tmp_path / "ok.csv", columns=["b"], replace=True)
    with pytest.raises(ImportInputError, match=r"no column 'id' \(--id-column\)"):
        IC.import_concepts(ws, "d", tmp_path / "ok.csv", id_column="id", replace=True)


def test_a_dataset_s_concepts_are_replaced_whole_and_others_kept(tmp_path, feat_ws):
    ws = feat_ws
    d, e = dataset_image_ids(ws, "d"), dataset_image_ids(ws, "e")
    pd.DataFrame({"image_id": d, "a": [0, 1] * 3, "b": [0, 0, 1] * 2}).to_csv(tmp_path / "d.csv", index=False)
    pd.DataFrame({"image_id": e, "z": [0, 1]}).to_csv(tmp_path / "e.csv", index=False)
    IC.import_concepts(ws, "e", tmp_path / "e.csv")
    IC.import_concepts(ws, "d", tmp_path / "d.csv")
    with pytest.raises(ImportInputError, match=r"already has concepts \(a, b\); --replace"):
        IC.import_concepts(ws, "d", tmp_path / "d.csv", columns=["b"])
    r = IC.import_concepts(ws, "d", tmp_path / "d.csv", columns=["b"], replace=True)
    assert r.replaced == ["a", "b"]
    got = labels_of(ws)
    assert set(got.loc[got["image_id"].isin(d), "concept"]) == {"b"}  # `a` is gone, not left behind
    assert set(got.loc[got["image_id"].isin(e), "concept"]) == {"z"}  # the other dataset is kept
    assert len(got) == len(d) + len(e)


def test_images_the_file_leaves_out_stay_unlabelled(tmp_path, feat_ws):
    ws = feat_ws
    ids = dataset_image_ids(ws, "d")
    pd.DataFrame({"image_id": ids[:4], "a": [0, 1, 0, 1]}).to_csv(tmp_path / "c.csv", index=False)
    r = IC.import_concepts(ws, "d", tmp_path / "c.csv")
    assert sorted(labels_of(ws)["image_id"]) == sorted(ids[:4])
    assert any("4 of the dataset's 6 images" in n for n in r.notes)
    assert any("needs at least 10" in w for w in r.warnings)  # too few test images to score


# ---- derived from the workspace ------------------------------------------------------------------
def test_hierarchy_nodes_are_the_images_in_their_subtree(nested):
    ws = nested
    r = IC.import_concepts(ws, "own", from_hierarchy="nodes")
    img = images_table(ws).set_index("image_id")
    got = wide(ws)
    names = {c.name for c in r.concepts}
    assert names == {"shapes/stars", "shapes/arrows", "plants/trees", "plants/flowers"}
    for name in names:  # the node's images, computed from the paths themselves
        want = {i: int((p + "/").startswith(name + "/")) for i, p in img["category_path"].items()}
        assert got[name].to_dict() == want, name
    why = dict(w.split(": ", 1) for w in r.left_out)
    assert "one class of the task label" in why["hierarchy node shapes (of images.category_path)"]
    assert "a value held by 2 image(s)" in why["hierarchy node rare/one (of images.category_path)"]


def test_hierarchy_levels_and_image_columns(nested):
    ws = nested
    # Level 0 (the top folder) is the label; level 1 has `rare/one`, on 2 images: neither is kept.
    with pytest.raises(ImportInputError, match=r"level 0 .*the task label itself.*level 1 .*held by 2 image"):
        IC.import_concepts(ws, "own", from_hierarchy="levels")
    assert not ws.table_path("concept_labels").exists()
    r = IC.import_concepts(ws, "own", from_images=["category_path"])  # asked for by name: kept
    (c,) = r.concepts
    img = images_table(ws).set_index("image_id")
    got = wide(ws)["category_path"]
    assert {i: c.categories[v] for i, v in got.items()} == img["category_path"].to_dict()
    with pytest.raises(ImportInputError, match="describe the file"):
        IC.import_concepts(ws, "own", from_images=["split"], replace=True)
    with pytest.raises(ImportInputError, match=r"no column\(s\) 'colour'"):
        IC.import_concepts(ws, "own", from_images=["colour"], replace=True)


def test_no_hierarchy_says_which_command_writes_one(feat_ws):
    with pytest.raises(ImportInputError, match="conceptlens import hierarchy"):
        IC.import_concepts(feat_ws, "d", from_hierarchy="nodes")
    assert not feat_ws.table_path("concept_labels").exists()


# ---- the split the purity matrices score on ----------------------------------------------------
@settings(max_examples=50, deadline=None)
@given(st.integers(20, 200), st.integers(0, 2**31 - 1))
def test_common_concepts_split_as_the_plain_permutation(n, seed):
    C = np.arange(n)[:, None] % 2  # every value on half the rows
    train, test = CQ.split_rows(n, 0.2, seed, C=C)
    perm = np.random.default_rng(seed).permutation(n)
    k = round(n * 0.2)
    if min(len(set(C[perm[:k], 0])), len(set(C[perm[k:], 0]))) == 2:
        assert test.tolist() == sorted(perm[:k]) and train.tolist() == sorted(perm[k:])


@settings(max_examples=50, deadline=None)
@given(st.integers(30, 200), st.integers(2, 5), st.integers(0, 2**31 - 1))
def test_rare_concepts_get_both_values_on_each_side(n, rare, seed):
    C = np.zeros((n, 2), np.int64)
    C[:rare, 0] = 1
    C[:, 1] = np.arange(n) % 3
    train, test = CQ.split_rows(n, 0.2, seed, C=C)
    assert sorted(np.concatenate([train, test])) == list(range(n)) and len(test) == round(n * 0.2)
    for j in range(2):
        assert len(set(C[train, j])) >= 2 and len(set(C[test, j])) >= 2


def test_a_concept_no_split_can_hold_names_its_column():
    C = np.zeros((50, 2), np.int64)
    C[::2, 0] = 1
    C[0, 1] = 1  # one row: never on both sides
    with pytest.raises(CQ.UnsplittableConcept, match="concept column 1") as e:
        CQ.split_rows(50, 0.2, 0, C=C, tries=20)
    assert e.value.column == 1


# ---- one's own nested folders, end to end ----------------------------------------------------
def test_own_nested_folders_reach_the_concepts_page(monkeypatch, nested, tmp_path):
    from conceptlens.analysis import runner
    from conceptlens.cli import main
    from conceptlens.importers.features import import_features
    from tests.test_app import assert_clean, open_app

    ws = nested
    assert (
        main(["import", "concepts", "--workspace", str(ws.root), "--dataset", "own", "--from-hierarchy"]) == 0
    )
    ids = dataset_image_ids(ws, "own")
    C = wide(ws).loc[ids].to_numpy(float)
    X = np.hstack([C, np.random.default_rng(0).normal(size=(len(ids), 4))]).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    (tmp_path / "x.txt").write_text("\n".join(ids))
    import_features(ws, "own", "own-model", tmp_path / "x.npy", ids=tmp_path / "x.txt")
    runner.run(
        ws.root,
        "concepts",
        {"concept_seeds": 2, "purity_steps": 20},
        progress_bars=False,
        with_dependencies=False,
    )
    at = open_app(monkeypatch, ws.root, "pages/concepts.py")
    assert_clean(at)
    headers = [h.value for h in at.header]
    assert headers[0] == "Purity matrices" and "Impurity against dependency" not in headers  # no levels
    assert "Dependency" not in " ".join(s.label for s in at.selectbox)
    import plotly.io

    heat = plotly.io.from_json(
        next(c for c in at.get("plotly_chart") if "cq_purity" in c.proto.id).proto.spec
    )
    assert set(heat.data[0].y) == {"shapes/stars", "shapes/arrows", "plants/trees", "plants/flowers"}
