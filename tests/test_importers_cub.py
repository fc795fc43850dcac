"""conceptlens/importers/cub.py: CUB's checks name the file, the line and the first offending id; its
tables keep the release's order (groups contiguous, labels and attributes ascending)."""

from __future__ import annotations

import pytest

from conceptlens.importers import cub as C
from conceptlens.importers import images as imp
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
