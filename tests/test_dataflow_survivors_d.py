"""Data-flow survivors of the importers (issue 29, part d): CUB's checks name the file, the line
and the first offending id; its tables keep the release's order (groups contiguous, labels and
attributes ascending); a re-import keeps an old label hierarchy its images still fit and drops
one they do not; the seeded test share is drawn class by class in sorted class order."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from conceptlens import hierarchy as H
from conceptlens.importers import cub as C
from conceptlens.importers import images as imp
from conceptlens.workspace import Workspace
from tests.test_compmap import CUB_ATTRS, make_cub


def _lines(path):
    return [s for s in path.read_text().splitlines() if s.strip()]


def _drop_ids(path, ids):
    """Remove the lines of `path` whose first field is one of `ids`."""
    keep = [s for s in _lines(path) if int(s.split()[0]) not in ids]
    path.write_text("\n".join(keep) + "\n")


# ---- cub.read: the checks -----------------------------------------------------------------
def test_a_split_file_without_a_line_for_an_image_is_named(tmp_path):
    """first_item on the (labels, split) loop: only the labels were checked, so an image
    missing from train_test_split.txt ended in a KeyError instead of the named error."""
    src = make_cub(tmp_path / "CUB_200_2011")
    _drop_ids(src / "train_test_split.txt", {3})
    with pytest.raises(imp.ImportInputError, match=r"train_test_split.txt: no line for image_id 3 of images"):
        C.read(src)


def test_the_error_for_images_without_a_label_names_the_smallest_image_id(tmp_path):
    """reverse_sort of the missing image ids: the error named the largest one (5), not the
    first of images.txt without a label (2)."""
    src = make_cub(tmp_path / "CUB_200_2011")
    _drop_ids(src / "image_class_labels.txt", {5, 2})
    with pytest.raises(imp.ImportInputError, match=r"image_class_labels.txt: no line for image_id 2 of"):
        C.read(src)


def test_the_error_for_unknown_classes_names_the_smallest_class_id(tmp_path):
    """reverse_sort of the unknown class ids: the error named 8, the largest, not 7."""
    src = make_cub(tmp_path / "CUB_200_2011")
    path = src / "image_class_labels.txt"
    new = {2: 8, 5: 7}
    path.write_text(
        "\n".join(f"{i} {new.get(int(i), int(c))}" for i, c in (s.split() for s in _lines(path))) + "\n"
    )
    with pytest.raises(imp.ImportInputError, match=r"image_class_labels.txt: class_id 7 is not in"):
        C.read(src)


@pytest.mark.parametrize(
    "bad, message",
    [
        ("images.txt|2|x 002.Laysan/x.jpg", r"images.txt line 2: image_id must be an integer, got 'x'"),
        (
            "attributes/image_attribute_labels.txt|5|y 1 1 3 12.5",
            r"image_attribute_labels.txt line 5: image_id must be an integer, got 'y'",
        ),
        (
            "attributes/image_attribute_labels.txt|2|1 x 1 3 12.5",
            r"image_attribute_labels.txt line 2: attribute_id must be an integer, got 'x'",
        ),
        (
            "attributes.txt|3|z has_wing_color::blue",
            r"attributes.txt line 3: attribute_id must be an integer",
        ),
    ],
)
def test_a_non_integer_id_is_an_error_naming_its_file_and_line(tmp_path, bad, message):
    """swap_args of `integer(path, n, ...)`: the message read "<line> line <file>" (the file
    and the line number swapped) for images.txt, the attribute labels and attributes.txt."""
    src = make_cub(tmp_path / "CUB_200_2011", bad=bad)
    with pytest.raises(imp.ImportInputError, match=message):
        C.read(src)


def test_images_are_listed_in_image_id_order_whatever_the_file_order(tmp_path):
    """reverse_sort of the image ids: the listing (and so images.parquet) ran from the
    largest CUB image id down instead of in the release's id order."""
    src = make_cub(tmp_path / "CUB_200_2011")
    path = src / "images.txt"
    lines = _lines(path)
    path.write_text("\n".join(lines[i] for i in (3, 0, 5, 1, 4, 2)) + "\n")
    cub = C.read(src)
    assert cub.cub_ids == sorted(cub.cub_ids) == [1, 2, 3, 4, 5, 6]
    assert [it.where.rsplit(" ", 1)[-1] for it in cub.listing.items] == ["1", "2", "3", "4", "5", "6"]


# ---- cub.tables ---------------------------------------------------------------------------
def _tables(src):
    cub = C.read(src)
    kept = set(imp.make_ids("cub", cub.listing.items))
    return cub, C.tables(cub, "cub", kept)


def test_groups_listed_apart_get_contiguous_positions(tmp_path):
    """first_item on the renumbering loop: only the first primitive was renumbered, so a group
    listed in two places (bill, wing, bill, wing) kept positions that interleave the groups."""
    src = make_cub(tmp_path / "CUB_200_2011")
    order = [CUB_ATTRS[0], CUB_ATTRS[2], CUB_ATTRS[1], CUB_ATTRS[3]]  # dagger, blue, curved, brown
    (src / "attributes.txt").write_text("".join(f"{i + 1} {a}\n" for i, a in enumerate(order)))
    _, (prims, _, _) = _tables(src)
    assert sorted(p["position"] for p in prims) == list(range(len(prims)))
    by_pos = sorted(prims, key=lambda p: p["position"])
    assert [p["group"] for p in by_pos] == ["bill shape", "bill shape", "wing color", "wing color"]
    # within a group, the release's order (attribute id)
    assert [p["primitive"] for p in by_pos] == [order[0], order[2], order[1], order[3]]


def test_label_rows_run_by_ascending_label(tmp_path):
    """reverse_sort of the labels: the label_primitives rows ran from the largest label down."""
    _, (_, label_rows, _) = _tables(make_cub(tmp_path / "CUB_200_2011"))
    labels = [r["label"] for r in label_rows]
    assert len(set(labels)) == 2 and labels == sorted(labels)


def test_an_image_s_attribute_rows_run_by_ascending_attribute_id(tmp_path):
    """reverse_sort of an image's present attributes: its image_primitives rows ran from the
    largest attribute id down (image 1 has attributes 1 and 3)."""
    cub, (_, _, image_rows) = _tables(make_cub(tmp_path / "CUB_200_2011"))
    aid = {name: a for a, name in cub.attributes}
    per: dict = {}
    for r in image_rows:
        per.setdefault(r["image_id"], []).append(aid[r["primitive"]])
    assert max(len(v) for v in per.values()) == 2
    assert all(v == sorted(v) for v in per.values()), per


# ---- images: the old label hierarchy on a re-import without one --------------------------
def _ws_with_tree(tmp_path):
    ws = Workspace.create(tmp_path / "ws", "ws")
    tree = H.Hierarchy("d", "label_name", {"animal": None, "cat": "animal", "dog": "animal"})
    H.write(ws, tree, ["cat", "dog"])
    assert H.load(ws, "d") is not None
    return ws


def test_an_old_hierarchy_the_images_still_fit_is_kept(tmp_path):
    """swap_args of `missing_values(old.parent, values)`: the tree's nodes were looked up
    among the images' values, so the inner node "animal" (no image has it) dropped a tree
    that still fits."""
    ws = _ws_with_tree(tmp_path)
    notes: list[str] = []
    imp._write_tree(ws, "d", None, pa.table({"label_name": ["cat", "dog", None]}), notes)
    assert H.load(ws, "d") is not None and H.load(ws, "d").parent["cat"] == "animal"
    assert notes == []


def test_an_old_hierarchy_the_images_no_longer_fit_is_removed(tmp_path):
    """skip_reset of `H.remove`: the note said the old tree was removed, yet it stayed."""
    ws = _ws_with_tree(tmp_path)
    notes: list[str] = []
    imp._write_tree(ws, "d", None, pa.table({"label_name": ["cat", "fish"]}), notes)
    assert H.load(ws, "d") is None
    assert len(notes) == 1 and "no longer fits" in notes[0]


# ---- images: the seeded test share ------------------------------------------------------
def test_the_test_share_is_drawn_class_by_class_in_sorted_class_order():
    """reverse_sort of the class names: the classes drew from the generator in reverse order,
    so the same seed gave another split. The expected split is drawn by a direct loop."""
    names = ["m"] * 6 + ["b"] * 3 + ["z"] * 2 + ["a"] * 5
    items = [
        imp.Item(key=f"k{i}.png", where=f"row {i}", label=ord(n), label_name=n) for i, n in enumerate(names)
    ]
    for seed in (0, 1, 2):
        rng = np.random.default_rng(seed)
        want = ["train"] * len(items)
        for name in ("a", "b", "m", "z"):
            rows = [i for i, n in enumerate(names) if n == name]
            for j in rng.permutation(len(rows))[: int(round(len(rows) * 0.4))]:
                want[rows[j]] = "test"
        assert imp.assign_splits(items, None, 0.4, seed=seed) == want, seed


# ---- imagenet.scan ------------------------------------------------------------------------
def _noun(tmp_path, drop=()):
    from tests.test_import_hierarchy import DATA_NOUN

    path = tmp_path / "data.noun"
    path.write_text("".join(s + "\n" for s in DATA_NOUN.splitlines() if s.split()[0] not in drop))
    return path


def test_ground_truth_layout_skips_folders_and_files_that_are_not_images(tmp_path):
    """drop_mask of `p.is_file() and is_image_file(p.name)`: a sub-folder or a README in the
    validation folder was looked up in the ground truth and failed the import."""
    from conceptlens.importers import imagenet
    from tests.test_importers import TRUTH, make_imagenet

    root = make_imagenet(tmp_path / "imagenet", "kaggle")
    val = root / "ILSVRC" / "Data" / "CLS-LOC" / "val"
    (val / "README.txt").write_text("not an image\n")
    (val / "extra").mkdir()
    listing = imagenet.scan(root, wordnet=_noun(tmp_path))
    assert len(listing.items) == len(TRUTH)
    assert all(it.path.suffix == ".JPEG" for it in listing.items)


def test_folder_layout_skips_files_and_folders_that_are_not_images(tmp_path):
    """drop_mask of `f.is_file() and is_image_file(f.name)`: a class folder's README and
    sub-folder became images of the class."""
    from conceptlens.importers import imagenet
    from tests.test_importers import TRUTH, make_imagenet

    root = make_imagenet(tmp_path / "imagenet", "folders")
    (root / "val" / "n01440764" / "README.txt").write_text("not an image\n")
    (root / "val" / "n01440764" / "sub").mkdir()
    listing = imagenet.scan(root / "val", wordnet=_noun(tmp_path))
    assert len(listing.items) == len(TRUTH)
    assert all(it.path.suffix == ".JPEG" for it in listing.items)


@pytest.mark.parametrize("layout", ["kaggle", "folders"])
def test_images_are_listed_in_path_order(tmp_path, layout):
    """reverse_sort of the class folders, of a class folder's files, or of the ground-truth
    layout's files: the listing (and so images.parquet) ran in reverse path order."""
    from conceptlens.importers import imagenet
    from tests.test_importers import make_imagenet

    root = make_imagenet(tmp_path / "imagenet", layout)
    listing = imagenet.scan(root if layout == "kaggle" else root / "val", wordnet=_noun(tmp_path))
    paths = [str(it.path) for it in listing.items]
    assert len(set(paths)) == len(paths) > 1 and paths == sorted(paths)
    if layout == "folders":
        wnids = [it.factors["wnid"] for it in listing.items]
        assert wnids == sorted(wnids) and len(set(wnids)) == 4


def test_a_missing_synsets_file_is_named(tmp_path):
    """first_item on the (--ground-truth, --synsets) loop: only the ground truth was checked,
    so a --synsets path that does not exist was not named as "file not found"."""
    from conceptlens.importers import imagenet
    from tests.test_importers import make_imagenet

    root = make_imagenet(tmp_path / "imagenet", "kaggle")
    with pytest.raises(imp.ImportInputError, match=r"^--synsets \S*nope.txt: file not found"):
        imagenet.scan(root, synsets=tmp_path / "nope.txt", wordnet=_noun(tmp_path))


def test_classes_missing_from_wordnet_are_named_by_the_smallest_wnid(tmp_path):
    """reverse_sort of the classes' wnids: the error's example was the largest missing wnid
    (n03126707), not the first in wnid order (n01751748)."""
    from conceptlens.importers import imagenet
    from tests.test_importers import make_imagenet

    root = make_imagenet(tmp_path / "imagenet", "kaggle")
    noun = _noun(tmp_path, drop=("01751748", "03126707"))
    with pytest.raises(imp.ImportInputError, match=r"2 synset\(s\) of the classes .* e\.g\. n01751748$"):
        imagenet.scan(root, wordnet=noun)


# ---- mit_states.read ----------------------------------------------------------------------
def test_mit_states_labels_agree_with_the_label_rows_of_its_tables(tmp_path):
    """reverse_sort of the pairs numbered by `read`: images got labels counted from the end,
    so an image's label named another pair than label_primitives' row of that label."""
    from conceptlens.importers import mit_states as MS
    from tests.test_compmap import make_mit_states

    pairs, listing = MS.read(make_mit_states(tmp_path / "mit"))
    _, label_rows = MS.tables(pairs)
    name_of = {r["label"]: r["label_name"] for r in label_rows}
    assert len(listing.items) == 6
    assert all(name_of[it.label] == it.label_name for it in listing.items)


def test_mit_states_images_are_listed_in_path_order(tmp_path):
    """reverse_sort of the pair folders or of a folder's files: the images ran in reverse
    path order."""
    from conceptlens.importers import mit_states as MS
    from tests.test_compmap import make_mit_states

    _, listing = MS.read(make_mit_states(tmp_path / "mit"))
    paths = [str(it.path) for it in listing.items]
    assert len(paths) == 6 and paths == sorted(paths)


def test_a_file_beside_the_pair_folders_is_not_a_skipped_folder(tmp_path):
    """drop_mask of `p.is_dir()`: a README beside the pair folders was counted as a folder of
    a pair no split lists."""
    from conceptlens.importers import mit_states as MS
    from tests.test_compmap import make_mit_states

    root = make_mit_states(tmp_path / "mit")
    (root / "release_dataset" / "images" / "README.txt").write_text("x\n")
    _, listing = MS.read(root)
    assert [n for n in listing.notes if "skipped" in n] == [
        "skipped 1 image folder(s) of pairs no split lists, e.g. 'new car'"
    ]


# ---- hf.scan ------------------------------------------------------------------------------
KIND = ["b", "a", None, "c"]


def _hf(root):
    """One saved Dataset of 4 rows: an Image and a ClassLabel column, a string and an int column
    (factors, or labels with --label-column), two columns named like images.parquet's core
    columns (width, height) and a list column (not a plain value)."""
    import io

    import datasets

    buf = io.BytesIO()
    from PIL import Image

    Image.new("RGB", (4, 4), (10, 20, 30)).save(buf, "PNG")
    feats = datasets.Features(
        {
            "img": datasets.Image(decode=False),
            "lab": datasets.ClassLabel(names=["zebra", "ant"]),
            "kind": datasets.Value("string"),
            "num": datasets.Value("int64"),
            "width": datasets.Value("int64"),
            "height": datasets.Value("int64"),
            "tags": datasets.Sequence(datasets.Value("string")),
        }
    )
    rows = [
        {
            "img": {"bytes": buf.getvalue(), "path": None},
            "lab": i % 2,
            "kind": KIND[i],
            "num": [3, 0, 2, 1][i],
            "width": 5,
            "height": 6,
            "tags": ["x"] * i,
        }
        for i in range(4)
    ]
    datasets.Dataset.from_list(rows, features=feats).save_to_disk(str(root))
    return root


@pytest.fixture(scope="module")
def hf_src(tmp_path_factory):
    return _hf(tmp_path_factory.mktemp("hf") / "ds")


def test_hf_factors_are_the_plain_columns_not_the_image_label_core_or_list_ones(hf_src):
    """drop_mask of the plain-value filter (the image, the label and the list column became
    factors), of the core-name filter (width and height became factors, no note), and
    reverse_sort of the note's names (listed "width, height")."""
    from conceptlens.importers import hf

    listing = hf.scan(hf_src)
    assert [sorted(it.factors) for it in listing.items] == [["kind", "num"]] * 4
    assert [it.factors["kind"] for it in listing.items] == KIND
    assert [it.label_name for it in listing.items] == ["zebra", "ant"] * 2
    assert len(listing.notes) == 1 and "column(s) height, width not kept" in listing.notes[0]


def test_hf_unlabeled_keeps_its_factors(hf_src):
    """drop_mask of `if c` in the columns read: without a label column a None was among the
    columns selected and the scan failed."""
    from conceptlens.importers import hf

    listing = hf.scan(hf_src, unlabeled=True)
    assert [it.label for it in listing.items] == [None] * 4
    assert [it.factors["num"] for it in listing.items] == [3, 0, 2, 1]


def test_hf_an_int_label_column_gives_its_values_as_labels(hf_src):
    """swap_args of `isinstance(v, int)` (a TypeError) and drop_mask of `v < 0` in the search
    for a negative label (any row was reported as negative)."""
    from conceptlens.importers import hf

    listing = hf.scan(hf_src, label_column="num")
    assert [it.label for it in listing.items] == [3, 0, 2, 1]
    assert [it.label_name for it in listing.items] == ["3", "0", "2", "1"]


def test_hf_a_string_label_column_is_numbered_in_sorted_order_of_its_names(hf_src):
    """drop_mask of `v is not None` (a "None" class shifted the labels) and reverse_sort of the
    names: labels must be the codes pandas gives the sorted categories (missing: no label)."""
    import pandas as pd

    from conceptlens.importers import hf

    listing = hf.scan(hf_src, label_column="kind")
    codes = pd.Categorical(KIND).codes.tolist()
    assert [it.label for it in listing.items] == [None if c < 0 else c for c in codes]
    assert [it.label_name for it in listing.items] == KIND


# ---- wordnet.imagenet_tree ----------------------------------------------------------------
TWO_BIRDS = """\
00001740 03 n 01 entity 0 002 ~ 01000001 n 0000 ~ 01000002 n 0000 | the root
01000001 05 n 01 bird 0 003 @ 00001740 n 0000 ~ 01000011 n 0000 ~ 01000012 n 0000 | one sense
01000002 05 n 01 bird 0 003 @ 00001740 n 0000 ~ 01000021 n 0000 ~ 01000022 n 0000 | another sense
01000011 05 n 01 a 0 001 @ 01000001 n 0000 | class a
01000012 05 n 01 b 0 001 @ 01000001 n 0000 | class b
01000021 05 n 01 c 0 001 @ 01000002 n 0000 | class c
01000022 05 n 01 d 0 001 @ 01000002 n 0000 | class d
"""


def test_every_ancestor_sharing_a_lemma_gets_its_wnid(tmp_path):
    """first_item on the name-grouping loops: only the first node, the first name or the
    first of two same-named ancestors was looked at, so two ancestors kept the name "bird"
    (or the wrong node got a wnid). Two "bird" senses, each over two classes."""
    from conceptlens.importers import wordnet

    path = tmp_path / "data.noun"
    path.write_text(TWO_BIRDS)
    classes = ["n01000011", "n01000012", "n01000021", "n01000022"]
    parent, names = wordnet.imagenet_tree(classes, path, None)
    assert parent["n01000011"] == "n01000001" and parent["n01000021"] == "n01000002"
    assert names == {
        "n00001740": "entity",
        "n01000001": "bird (n01000001)",
        "n01000002": "bird (n01000002)",
        "n01000011": "a",
        "n01000012": "b",
        "n01000021": "c",
        "n01000022": "d",
    }


# ---- cli: the import reports --------------------------------------------------------------
def _result():
    return imp.Result(
        dataset="d",
        n_images=5,
        made=3,
        reused=0,
        skipped=[("a.png", "truncated"), ("b.png", "not an image")],
        notes=["note one", "note two"],
        seconds=1.0,
        warnings=["warn one", "warn two"],
    )


def test_the_images_report_lists_every_skipped_image_and_warning(tmp_path, capsys, monkeypatch):
    """first_item on the report's loops: the first skipped image and the first warning were
    printed as many times as there are, the others never."""
    from conceptlens.cli import main
    from conceptlens.importers import cli

    monkeypatch.setattr(cli, "listing", lambda *a, **k: None)
    monkeypatch.setattr(imp, "import_images", lambda *a, **k: _result())
    argv = ["import", "images", "--workspace", str(tmp_path), "--dataset", "d", str(tmp_path)]
    assert main([*argv, "--format", "imagefolder", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "  a.png: truncated\n  b.png: not an image\n" in out
    assert "note: note one\nnote: note two\n" in out
    assert err.count("warning: warn one\n") == 1 and err.count("warning: warn two\n") == 1


def test_the_compmap_report_lists_every_skipped_image_and_note(capsys):
    """first_item on the CUB / MIT-States report's loops: the first skipped image and the
    first note were printed as many times as there are, the others never."""
    from conceptlens.importers import cli

    cli._compmap_report(_result(), "d", "W")
    out = capsys.readouterr().out
    assert "  skipped a.png: truncated\n  skipped b.png: not an image\n" in out
    assert "note: note one\nnote: note two\n" in out


def test_import_cub_on_the_command_line_writes_into_the_workspace(tmp_path, capsys):
    """swap_args of `import_cub(args.workspace, args.source, ...)`: the release folder was
    taken for the workspace and the workspace for the release."""
    from conceptlens.cli import main

    src = make_cub(tmp_path / "CUB_200_2011")
    before = sorted(p.name for p in src.iterdir())
    assert main(["init", "--workspace", str(tmp_path / "ws")]) == 0
    argv = ["import", "cub", "--workspace", str(tmp_path / "ws"), str(src), "--quiet", "--workers", "1"]
    assert main(argv) == 0
    assert "dataset cub: 6 images" in capsys.readouterr().out
    assert len(Workspace(tmp_path / "ws").read("images").to_pandas()) == 6
    assert sorted(p.name for p in src.iterdir()) == before


def test_import_mit_states_on_the_command_line_writes_into_the_workspace(tmp_path, capsys):
    """swap_args of `import_mit_states(args.workspace, args.source, ...)` (the folders swapped)
    and of `_compmap_report(r, args.dataset, ...)` (the dataset's name taken for the result)."""
    from conceptlens.cli import main
    from tests.test_compmap import make_mit_states

    src = make_mit_states(tmp_path / "mit")
    assert main(["init", "--workspace", str(tmp_path / "ws")]) == 0
    argv = [
        "import",
        "mit-states",
        "--workspace",
        str(tmp_path / "ws"),
        str(src),
        "--quiet",
        "--workers",
        "1",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "dataset mit-states: 6 images" in out and "note: skipped 1 image folder(s)" in out
    assert len(Workspace(tmp_path / "ws").read("images").to_pandas()) == 6


def test_import_hsj_on_the_command_line_writes_into_the_workspace(tmp_path, capsys):
    """swap_args of `import_hsj(args.workspace, args.source, ...)`: the release folder was
    taken for the workspace and the workspace for the release."""
    from conceptlens.cli import main
    from tests import test_similarity as TS

    ws = TS.make_workspace(tmp_path / "ws")
    ids, Z = TS.F.people_embedding(ws)
    src = TS.F.write_release(tmp_path / "hsj", TS.F.simulate(ids, Z, 30, catch_every=10), ids)
    assert main(["import", "hsj", "--workspace", str(ws.root), str(src), "--dataset", "toy"]) == 0
    assert "30 similarity trials" in capsys.readouterr().out
    assert len(ws.read("similarity_trials", dataset="toy").to_pandas()) == 30


# ---- manifest.scan ------------------------------------------------------------------------
def test_a_manifest_without_a_path_column_names_its_columns(tmp_path):
    """swap_args of `map(str, cols)` in the no-`path` error: a TypeError instead of the error
    naming the columns the manifest has."""
    from conceptlens.importers import manifest as M

    (tmp_path / "m.csv").write_text("file,label\na.png,0\n")
    with pytest.raises(imp.ImportInputError, match=r"m.csv: no `path` column \(columns: file, label\)"):
        M.scan(tmp_path / "m.csv")


# ---- primitives.kept_ids ------------------------------------------------------------------
def test_kept_ids_are_the_named_dataset_s_only(tmp_path):
    """drop_mask of `t["dataset"] == dataset`: the image ids of every dataset of the
    workspace were taken as the named dataset's (CUB tables got other datasets' images)."""
    from conceptlens.importers.imagefolder import scan as scan_folder
    from conceptlens.importers.primitives import kept_ids
    from tests.test_dataflow_importers import folder, run, workspace

    ws = workspace(tmp_path)
    src = folder(tmp_path / "src", per_class=1, classes=("red", "green"))
    run(ws, "one", scan_folder(src))
    run(ws, "two", scan_folder(src))
    t = ws.read("images", columns=["image_id", "dataset"]).to_pandas()
    want = {d: {i for i, d2 in zip(t["image_id"], t["dataset"]) if d2 == d} for d in ("one", "two")}
    assert len(want["one"]) == len(want["two"]) == 2
    assert kept_ids(ws, "one") == want["one"] and kept_ids(ws, "two") == want["two"]
