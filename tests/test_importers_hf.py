"""conceptlens/importers/hf.py: the factors, labels and label names of a Hugging Face dataset."""

from __future__ import annotations

import pytest

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
