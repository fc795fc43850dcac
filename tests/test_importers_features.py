"""conceptlens/importers/features.py: ids matched to images (an ambiguous path end matches none),
vectors of any file layout, and every checkpoint checked before one is overwritten. Tiny folders of
generated images (PIL), direct calls to the importer."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptlens.importers import features as F
from conceptlens.importers import images as imp
from tests import helpers_importers
from tests.helpers_importers import dataset_image_ids, write_vectors

# Fixtures shared with other test modules, named here so that pytest finds them for this one.
feat_ws = helpers_importers.feat_ws


# ---- features: ids -> images --------------------------------------------------------------
def _rows(paths):
    return [
        {"image_id": f"d-{i}", "thumbnail": f"thumbnails/d/d-{i}.jpg", "source_path": p}
        for i, p in enumerate(paths)
    ]


def test_an_ambiguous_path_end_matches_no_image_whatever_the_order_of_the_images():
    paths = ["/data/a/cat.jpg", "/data/b/cat.jpg", "/data/b/dog.jpg", "/data/c/x/bird.png"]
    keys = ["cat.jpg", "cat", "a/cat.jpg", "b/cat", "dog", "x/bird.png", "/data/c/x/bird", "d-1", "owl"]
    want = [None, None, "d-0", "d-1", "d-2", "d-3", "d-3", "d-1", None]
    rows = _rows(paths)
    for perm in ([0, 1, 2, 3], [1, 0, 3, 2], [3, 2, 1, 0]):
        got, why = F.match_ids([rows[i] for i in perm], keys, lambda i: f"row {i + 1}")
        assert got == want, perm
        assert [w.split(":")[0] for w in why] == ["row 1", "row 2", "row 9"]
        assert "several images" in why[0] and "several images" in why[1] and "not an image" in why[2]


def test_blank_lines_of_an_ids_file_are_not_ids(tmp_path):
    p = tmp_path / "ids.txt"
    p.write_text("a\n\n  b  \n   \nc\n\n")
    assert F.read_ids(p) == ["a", "b", "c"]


def test_the_one_matrix_of_a_file_holds_the_vectors_whatever_its_name(tmp_path):
    X = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.savez(tmp_path / "v.npz", vecs=X, ids=np.array(["a", "b", "c"]), extra=np.ones(3))
    ids, got = F.read_vectors(tmp_path / "v.npz")
    assert ids == ["a", "b", "c"]
    np.testing.assert_array_equal(got, X)
    np.savez(tmp_path / "w.npz", one=X, two=X + 1, ids=np.array(["a", "b", "c"]))
    with pytest.raises(imp.ImportInputError, match="w.npz: cannot tell which array.*--key"):
        F.read_vectors(tmp_path / "w.npz")


def test_a_parquet_list_column_of_any_name_holds_the_vectors(tmp_path):
    X = np.arange(6, dtype=np.float32).reshape(3, 2)
    t = pa.table(
        {
            "image_id": ["a", "b", "c"],
            "note": ["x", "y", "z"],
            "vec": pa.array(list(X), pa.list_(pa.float32())),
        }
    )
    pq.write_table(t, tmp_path / "v.parquet")
    ids, got = F.read_vectors(tmp_path / "v.parquet")
    assert ids == ["a", "b", "c"]
    np.testing.assert_array_equal(got, X)


def test_every_existing_checkpoint_is_checked_before_one_is_overwritten(tmp_path, feat_ws):
    ws = feat_ws
    ids = dataset_image_ids(ws, "d")
    v, t, _ = write_vectors(tmp_path, ids)
    F.import_features(ws, "d", "first", v, ids=t)
    F.import_features(ws, "d", "second", v, ids=t)
    kept = ws.table_path("features", checkpoint_id="second").read_bytes()
    with pytest.raises(imp.ImportInputError, match="checkpoint 'second' exists; pass --replace"):
        F.import_features(ws, "d", "second", v, ids=t)
    e_v, e_t, _ = write_vectors(tmp_path, dataset_image_ids(ws, "e"), name="e")
    with pytest.raises(imp.ImportInputError, match="'second' exists for dataset 'd'"):
        F.import_features(ws, "e", "second", e_v, ids=e_t)
    assert ws.table_path("features", checkpoint_id="second").read_bytes() == kept


def test_an_unknown_dataset_error_lists_the_datasets_in_order(feat_ws):
    with pytest.raises(Exception, match=r"no images of dataset 'zz'; datasets: d, e$"):
        F.dataset_rows(feat_ws, "zz")


def test_vectors_reach_their_own_image_only_the_dataset_s_images(tmp_path, feat_ws):
    ws = feat_ws
    ids = dataset_image_ids(ws, "e")[::-1]
    v, t, X = write_vectors(tmp_path, ids, seed=3)
    F.import_features(ws, "e", "ck", v, ids=t)
    got = ws.read("features", checkpoint_id="ck").to_pylist()
    assert [r["image_id"] for r in got] == dataset_image_ids(ws, "e")
    for r in got:
        np.testing.assert_array_equal(r["embedding"], X[ids.index(r["image_id"])])
