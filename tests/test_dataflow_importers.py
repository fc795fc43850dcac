"""Data-flow properties of the importers (issue 29): each image, id, vector and caption
reaches its own row; rows that must be skipped are skipped (hidden files, blank lines,
empty labels); every checkpoint, part file and factor is looked at, not only the first;
an ambiguous path matches no image instead of the last one; resumed imports keep the
newest record. Tiny folders of generated images (PIL), direct calls to the importers."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from conceptlens.importers import features as F
from conceptlens.importers import images as imp
from conceptlens.importers import manifest as M
from conceptlens.importers.captions import import_captions
from conceptlens.importers.imagefolder import scan as scan_folder
from conceptlens.workspace import Workspace
from tests.test_importers import interrupt_thumbnails

RGB = {"red": (220, 40, 40), "green": (40, 200, 60), "blue": (40, 60, 220)}


def draw(path, rgb, seed, size=(20, 16)):
    """A small noisy image of one colour: distinct pixels for distinct seeds."""
    rng = np.random.default_rng(seed)
    arr = np.clip(np.array(rgb) + rng.normal(0, 25, (size[1], size[0], 3)), 0, 255).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path)
    return path


def folder(root, per_class=2, classes=("red", "green", "blue")):
    """root/class/NNN.png, every image different."""
    for c, name in enumerate(classes):
        for i in range(per_class):
            draw(root / name / f"{i:03d}.png", RGB[name], seed=100 * c + i)
    return root


def workspace(tmp_path, name="ws") -> Workspace:
    return Workspace.create(tmp_path / name, name)


def images_table(ws: Workspace):
    return pq.read_table(ws.table_path("images")).to_pandas()


def run(ws, dataset, listing, **kw):
    return imp.import_images(ws, dataset, listing, workers=1, progress=False, **kw)


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


@pytest.fixture
def feat_ws(tmp_path):
    """A workspace with datasets `d` (6 images) and `e` (2 images)."""
    ws = workspace(tmp_path)
    run(ws, "d", scan_folder(folder(tmp_path / "d")))
    run(ws, "e", scan_folder(folder(tmp_path / "e", per_class=1, classes=("red", "blue"))))
    return ws


def _ids(ws, dataset):
    t = images_table(ws)
    return t.loc[t["dataset"] == dataset, "image_id"].tolist()


def _vectors(tmp_path, ids, seed=0, name="v"):
    X = np.random.default_rng(seed).normal(size=(len(ids), 3)).astype(np.float32)
    np.save(tmp_path / f"{name}.npy", X)
    (tmp_path / f"{name}.txt").write_text("\n".join(ids))
    return tmp_path / f"{name}.npy", tmp_path / f"{name}.txt", X


def test_every_existing_checkpoint_is_checked_before_one_is_overwritten(tmp_path, feat_ws):
    ws = feat_ws
    ids = _ids(ws, "d")
    v, t, _ = _vectors(tmp_path, ids)
    F.import_features(ws, "d", "first", v, ids=t)
    F.import_features(ws, "d", "second", v, ids=t)
    kept = ws.table_path("features", checkpoint_id="second").read_bytes()
    with pytest.raises(imp.ImportInputError, match="checkpoint 'second' exists; pass --replace"):
        F.import_features(ws, "d", "second", v, ids=t)
    e_v, e_t, _ = _vectors(tmp_path, _ids(ws, "e"), name="e")
    with pytest.raises(imp.ImportInputError, match="'second' exists for dataset 'd'"):
        F.import_features(ws, "e", "second", e_v, ids=e_t)
    assert ws.table_path("features", checkpoint_id="second").read_bytes() == kept


def test_an_unknown_dataset_error_lists_the_datasets_in_order(feat_ws):
    with pytest.raises(Exception, match=r"no images of dataset 'zz'; datasets: d, e$"):
        F.dataset_rows(feat_ws, "zz")


def test_vectors_reach_their_own_image_only_the_dataset_s_images(tmp_path, feat_ws):
    ws = feat_ws
    ids = _ids(ws, "e")[::-1]
    v, t, X = _vectors(tmp_path, ids, seed=3)
    F.import_features(ws, "e", "ck", v, ids=t)
    got = ws.read("features", checkpoint_id="ck").to_pylist()
    assert [r["image_id"] for r in got] == _ids(ws, "e")
    for r in got:
        np.testing.assert_array_equal(r["embedding"], X[ids.index(r["image_id"])])


# ---- captions -----------------------------------------------------------------------------
def test_each_caption_lands_on_its_own_image(tmp_path, feat_ws):
    import pandas as pd

    ws = feat_ws
    ids = _ids(ws, "d")
    rows = [{"image_id": i, "text": f"caption of {i}"} for i in reversed(ids)]
    pd.DataFrame(rows).to_csv(tmp_path / "c.csv", index=False)
    assert import_captions(ws, "me", tmp_path / "c.csv", dataset="d") == len(ids)
    caps = pq.read_table(ws.table_path("captions")).to_pylist()
    assert sorted((r["image_id"], r["text"]) for r in caps) == sorted((i, f"caption of {i}") for i in ids)


# ---- ImageFolder: what is a class, an image, a stray ----------------------------------------
def test_hidden_folders_and_files_and_non_images_are_not_classes_or_images(tmp_path):
    src = folder(tmp_path / "src", per_class=2, classes=("red", "blue"))
    draw(src / ".cache" / "x.png", RGB["green"], 1)  # a hidden class folder
    draw(src / "red" / ".thumbs" / "y.png", RGB["green"], 2)  # a hidden folder inside a class
    draw(src / "red" / ".z.png", RGB["green"], 3)  # a hidden file
    (src / "red" / "notes.txt").write_text("not an image")
    (src / "README.md").write_text("not an image either")
    draw(src / "b_stray.png", RGB["green"], 4)
    draw(src / "a_stray.png", RGB["green"], 5)
    listing = scan_folder(src)
    keys = [it.key for it in listing.items]
    assert keys == ["blue/000.png", "blue/001.png", "red/000.png", "red/001.png"]
    assert [(it.label, it.label_name) for it in listing.items] == [(0, "blue")] * 2 + [(1, "red")] * 2
    assert listing.notes == [f"ignored 2 image(s) outside a class folder, e.g. {src / 'a_stray.png'}"]
    assert listing.hierarchy is None  # no image lies deeper than its class folder


def test_images_are_listed_in_sorted_path_order_at_every_depth(tmp_path):
    src = tmp_path / "src"
    for i, rel in enumerate(["b/y/2.png", "a/z.png", "b/x/1.png", "a/y/9.png", "b/a.png", "a/y/10.png"]):
        draw(src / rel, RGB["red"], i)
    keys = [it.key for it in scan_folder(src).items]
    # os.walk order: a class's own files, then its subfolders, each sorted by name
    assert keys == ["a/z.png", "a/y/10.png", "a/y/9.png", "b/a.png", "b/x/1.png", "b/y/2.png"]
    splits = tmp_path / "splits"
    for s in ("val", "train"):
        for c in ("b", "a"):
            draw(splits / s / c / "0.png", RGB["red"], 0)
    items = scan_folder(splits).items
    assert [(it.split, it.key) for it in items] == [
        ("train", "train/a/0.png"),
        ("train", "train/b/0.png"),
        ("val", "val/a/0.png"),
        ("val", "val/b/0.png"),
    ]
    assert [it.label for it in items] == [0, 1, 0, 1]


# ---- manifests ------------------------------------------------------------------------------
def test_unlabeled_rows_of_a_label_name_column_do_not_shift_the_labels(tmp_path):
    import pandas as pd

    for i in range(4):
        draw(tmp_path / f"{i}.png", RGB["red"], i)
    names = ["zebra", None, "apple", "zebra"]
    pd.DataFrame({"path": [f"{i}.png" for i in range(4)], "label_name": names}).to_csv(
        tmp_path / "m.csv", index=False
    )
    items = M.scan(tmp_path / "m.csv", unlabeled=True).items
    # labels 0..K-1 over the names present, in sorted order; an empty name is no label
    assert [(it.label, it.label_name) for it in items] == [
        (1, "zebra"),
        (None, None),
        (0, "apple"),
        (1, "zebra"),
    ]


# ---- images: checks and splits -------------------------------------------------------------
def _item(i, **kw):
    return imp.Item(key=f"k{i}.png", where=f"row {i}", **kw)


def test_a_factor_that_shadows_a_core_column_is_refused_on_any_item():
    items = [_item(0, factors={"shade": 1}), _item(1, factors={"width": 3, "height": 4, "shade": 2})]
    with pytest.raises(
        imp.ImportInputError, match=r"^row 1: column\(s\) height, width are set by the import"
    ):
        imp.check_items(items, imp.make_ids("d", items))


def test_labels_are_checked_on_every_item():
    items = [_item(0, label=0, label_name="a"), _item(1, label=0, label_name="b")]
    with pytest.raises(imp.ImportInputError, match="row 1: label 0 is named 'b' here but 'a' in row 0"):
        imp.check_items(items, imp.make_ids("d", items))


def test_a_bad_split_names_the_accepted_ones_in_order():
    with pytest.raises(
        imp.ImportInputError,
        match=r"split 'dev' is not one of test, testing, train, training, val, valid, validation$",
    ):
        imp.split_of("dev", "x")


def test_the_seeded_test_share_is_stratified_by_label_in_sorted_label_order():
    # labels listed out of order; each class draws its test images from one generator
    # shared in sorted class order, so a class's draw does not depend on how rows are listed
    names = ["b"] * 5 + ["a"] * 4 + ["c"] * 3 + [None] * 2
    items = [_item(i, label=None if n is None else "abc".index(n), label_name=n) for i, n in enumerate(names)]
    got = imp.assign_splits(items, None, 0.5, seed=7)
    rng = np.random.default_rng(7)
    want = ["train"] * len(items)
    for name in ("", "a", "b", "c"):
        rows = [i for i, n in enumerate(names) if (n or "") == name]
        for j in rng.permutation(len(rows))[: int(round(len(rows) * 0.5))]:
            want[rows[j]] = "test"
    assert got == want
    per = {n: sum(s == "test" for s, m in zip(got, names) if m == n) for n in ("a", "b", "c", None)}
    assert per == {"a": 2, "b": 2, "c": 2, None: 1}
    # the test share of a class does not depend on the rows of the other classes
    only_b = [it for it in items if it.label_name == "b"]
    assert sum(s == "test" for s in imp.assign_splits(only_b, None, 0.5, seed=7)) == 2


# ---- images: warnings on flat and repeated thumbnails -----------------------------------------
def _rec(pixels, flat=False):
    return {"pixels": pixels, "flat": flat}


def test_no_warning_for_distinct_images_and_reused_records_are_not_counted():
    items = [_item(i) for i in range(4)]
    ids = imp.make_ids("d", items)
    done = {ids[0]: _rec("p0"), ids[1]: _rec("p1"), ids[2]: _rec("p2")}
    done[ids[3]] = {"thumbnail": "t", "width": 1}  # reused from images.parquet: no pixels
    assert imp._suspects(items, ids, done, "#000000") == []


def test_flat_and_repeated_thumbnails_are_counted_exactly():
    items = [_item(i) for i in range(6)]
    ids = imp.make_ids("d", items)
    done = {
        ids[0]: _rec("p0"),
        ids[1]: _rec("same"),
        ids[2]: _rec("flat1", flat=True),
        ids[3]: _rec("same"),
        ids[4]: _rec("flat2", flat=True),
        ids[5]: _rec("p5"),
    }
    flat, rep = imp._suspects(items, ids, done, "#ffffff")
    assert flat.startswith("2 of 6 image(s) are a single flat colour") and "(e.g. row 2, row 4)" in flat
    assert rep.startswith(
        "2 of 6 image(s) have the same pixels as another image (1 group(s), the largest of 2: row 1, row 3)"
    )


# ---- images: the import ----------------------------------------------------------------------
def _listing(paths, factors=None, **kw):
    items = [
        imp.Item(key=p.name, where=str(p), path=p, factors=(factors or {}).get(i, {}), **kw)
        for i, p in enumerate(paths)
    ]
    return imp.Listing(items, str(paths[0].parent), "test")


def test_the_result_and_the_rows_describe_this_import_and_nothing_is_left_behind(tmp_path):
    ws = workspace(tmp_path)
    paths = [draw(tmp_path / "src" / f"{i}.png", RGB["red"], i, size=(20 + i, 16)) for i in range(3)]
    (tmp_path / "src" / "bad.png").write_bytes(b"not a png")
    r = run(ws, "dd", _listing(paths + [tmp_path / "src" / "bad.png"], factors={2: {"shade": "dark"}}))
    assert (r.dataset, r.n_images, r.made, r.reused) == ("dd", 3, 3, 0)
    assert [w for w, _ in r.skipped] == [str(tmp_path / "src" / "bad.png")] and r.warnings == []
    t = images_table(ws)
    assert t["image_id"].tolist() == ["dd-0", "dd-1", "dd-2"] and t["width"].tolist() == [20, 21, 22]
    # a factor given only by a later image is a column, empty for the others
    assert pq.read_table(ws.table_path("images"))["shade"].to_pylist() == [None, None, "dark"]
    assert not (ws.root / ".partial").exists()


def test_new_rows_take_the_column_types_images_parquet_already_has(tmp_path):
    ws = workspace(tmp_path)
    a = [draw(tmp_path / "a" / f"{i}.png", RGB["red"], i) for i in range(2)]
    run(ws, "a", _listing(a))
    t = pq.read_table(ws.table_path("images"))
    for name in ("width", "height"):
        t = t.set_column(t.schema.get_field_index(name), name, t[name].cast(pa.int32()))
    pq.write_table(t, ws.table_path("images"))
    b = [draw(tmp_path / "b" / f"{i}.png", RGB["blue"], 10 + i, size=(24, 18)) for i in range(2)]
    run(ws, "b", _listing(b, factors={0: {"shade": "x"}, 1: {"shade": "y"}}))
    got = pq.read_table(ws.table_path("images"))
    assert got.schema.field("width").type == pa.int32() and got.schema.field("height").type == pa.int32()
    assert got["width"].to_pylist() == [20, 20, 24, 24] and got["shade"].to_pylist() == [None, None, "x", "y"]


def test_a_reimport_checks_every_checkpoint_of_the_dataset(tmp_path, feat_ws):
    ws = feat_ws
    e_v, e_t, _ = _vectors(tmp_path, _ids(ws, "e"), name="e")
    F.import_features(ws, "e", "of-e", e_v, ids=e_t)  # the first checkpoint: another dataset's
    v, t, _ = _vectors(tmp_path, _ids(ws, "d"))
    F.import_features(ws, "d", "of-d", v, ids=t)
    src = tmp_path / "d"
    (src / "red" / "000.png").unlink()
    (src / "blue" / "001.png").unlink()
    before = pq.read_table(ws.table_path("images"))
    with pytest.raises(
        imp.ImportInputError, match=r"checkpoint of-d has features of 2 image\(s\).*\(e\.g\. 'd-blue-001'\)"
    ):
        run(ws, "d", scan_folder(src), replace=True)
    assert pq.read_table(ws.table_path("images")).equals(before)


def _parts(partial):
    return [pq.read_table(p).to_pylist() for p in sorted(partial.glob("part-*.parquet"))]


def test_a_resumed_import_keeps_the_newest_record_of_an_image_and_records_each_once(tmp_path, monkeypatch):
    import os

    ws = workspace(tmp_path)
    src = tmp_path / "src"
    paths = [draw(src / f"{i}.png", RGB["green"], i) for i in range(3)]
    partial = ws.root / ".partial" / "import" / "g"
    job, calls = imp.thumbnail_job, {"n": 0, "stop": 3}

    def interrupted(j):
        calls["n"] += 1
        if calls["n"] == calls["stop"]:
            raise KeyboardInterrupt
        return job(j)

    monkeypatch.setattr(imp, "FLUSH_EVERY", 1)
    monkeypatch.setattr(imp, "thumbnail_job", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run(ws, "g", _listing(paths))
    assert [[r["image_id"] for r in p] for p in _parts(partial)] == [["g-0"], ["g-1"]]  # each once
    # 0.png changes after its thumbnail was made: the next run makes it again, then stops
    draw(paths[0], RGB["green"], 0, size=(30, 10))
    thumb = ws.root / "thumbnails" / "g" / "g-0.jpg"
    old = paths[0].stat().st_mtime_ns - 10**9
    os.utime(thumb, ns=(old, old))
    calls.update(n=0, stop=2)
    with pytest.raises(KeyboardInterrupt):
        run(ws, "g", _listing(paths))
    assert [[(r["image_id"], r["width"]) for r in p] for p in _parts(partial)] == [
        [("g-0", 20)],
        [("g-1", 20)],
        [("g-0", 30)],
    ]
    monkeypatch.setattr(imp, "thumbnail_job", job)
    r = run(ws, "g", _listing(paths))
    assert (r.made, r.reused) == (1, 2)
    t = images_table(ws)
    with Image.open(thumb) as im:
        assert t["width"].tolist()[0] == im.width == 30 and t["height"].tolist()[0] == im.height == 10


# ---- human similarity judgments -------------------------------------------------------------
def _h5(path, **arrays):
    import h5py

    with h5py.File(path, "w") as f:
        for k, v in arrays.items():
            f.create_dataset(k, data=v)
    return path


def test_psiz_rows_end_in_padding_and_missing_columns_take_their_defaults(tmp_path):
    from conceptlens.importers import hsj as H

    stim = np.array([[0, 1, 2, -1], [3, 4, 5, 6]], np.int32)
    raws = H.read_hdf5(_h5(tmp_path / "obs.hdf5", stimulus_set=stim, n_select=np.array([1, 2])))
    got = [(r.query, r.references, r.chosen, r.kind, r.weight, r.rt_ms, r.agent_id) for r in raws]
    assert got == [
        (0, [1, 2], [1], "2rank1", 1.0, None, "0"),
        (3, [4, 5, 6], [4, 5], "3rank2", 1.0, None, "0"),
    ]
    _h5(tmp_path / "no_select.hdf5", stimulus_set=stim)
    with pytest.raises(
        imp.ImportInputError, match="no_select.hdf5: psiz observations lack dataset 'n_select'"
    ):
        H.read_hdf5(tmp_path / "no_select.hdf5")
    _h5(tmp_path / "short.hdf5", stimulus_set=stim, n_select=np.array([1, 2]), weight=np.array([0.5]))
    with pytest.raises(imp.ImportInputError, match="short.hdf5: weight has 1 values for 2 trials"):
        H.read_hdf5(tmp_path / "short.hdf5")


def test_a_folder_of_psiz_observations_is_found_beside_its_catalog(tmp_path):
    from conceptlens.importers import hsj as H

    src = tmp_path / "psiz"
    src.mkdir()
    stim = np.array([[0, 1, 2]], np.int32)
    _h5(src / "obs.hdf5", stimulus_set=stim, n_select=np.array([1]))
    _h5(
        src / "catalog.hdf5",
        stimulus_id=np.arange(3),
        stimulus_filepath=np.array([b"a.png", b"b.png", b"c.png"]),
    )
    (src / "notes.txt").write_text("x")
    assert H.detect(src) == ("hdf5", src / "obs.hdf5")


def test_a_missing_reference_is_named_with_the_references_in_order():
    from conceptlens.importers import hsj as H
    from tests.hsj_fixtures import timestep

    step = timestep(0, 1, [2, 3, 4, 5], [2])
    step["interactions"] = [i for i in step["interactions"] if i["kind"] != "content:reference_1"]
    with pytest.raises(imp.ImportInputError, match=r"needs references 0\.\.3, got 3 \(\[0, 2, 3\]\)"):
        H._timestep(step, "here")


@pytest.fixture
def hsj_ws(tmp_path):
    """Dataset d: a/p0..p3.png, b/q0..q3.png and c/p1.png; dataset e: a/p0..p3.png (the
    same file names as d's)."""
    ws = workspace(tmp_path)
    d, e = tmp_path / "d", tmp_path / "e"
    for i in range(4):
        draw(d / "a" / f"p{i}.png", RGB["red"], i)
        draw(d / "b" / f"q{i}.png", RGB["blue"], 10 + i)
        draw(e / "a" / f"p{i}.png", RGB["green"], 20 + i)
    draw(d / "c" / "p1.png", RGB["green"], 30)
    run(ws, "d", scan_folder(d))
    run(ws, "e", scan_folder(e))
    return ws


def _release(src, stimuli, files):
    """stimuli.txt (local ids from 1) and {split/file: [(sequence_id, [(q, refs, chosen)])]}."""
    from tests.hsj_fixtures import local_id, timestep

    src.mkdir(parents=True)
    lines = ["local_id|filepath|wordnet_id"] + [
        f"{local_id(k)}|{p}|n0" for k, p in enumerate(stimuli, start=1)
    ]
    (src / "stimuli.txt").write_text("\n".join(lines) + "\n")
    for name, seqs in files.items():
        data = [
            {
                "sequence_id": sid,
                "anonymous_id": f"p{sid}",
                "grade": 80,
                "sequence": [timestep(p, *t) for p, t in enumerate(steps)],
            }
            for sid, steps in seqs
        ]
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(json.dumps({"data": data}))
    return src


def test_stimuli_match_the_named_dataset_s_images_by_id_or_file_name(tmp_path, hsj_ws):
    from conceptlens.importers.hsj import import_hsj

    ws = hsj_ws
    # stimuli 1..8 alternately by image id and by the source file's name (shared with e's files)
    names = ["d-a-p0", "q1", "p2", "d-b-q0", "p3", "d-b-q2", "q3", "d-a-p1"]
    image = ["d-a-p0", "d-b-q1", "d-a-p2", "d-b-q0", "d-a-p3", "d-b-q2", "d-b-q3", "d-a-p1"]
    src = _release(
        tmp_path / "hsj",
        [f"/imgs/{n}.png" for n in names],
        {
            "train_seqs/seq_b.json": [(3, [(5, [6, 7], [7])])],
            "train_seqs/seq_a.json": [(1, [(1, [2, 3], [3]), (2, [3, 4], [4])]), (2, [(8, [1, 5], [1])])],
            "test_seqs/seq_c.json": [(9, [(4, [4, 6], [4])])],
        },
    )
    r = import_hsj(ws.root, src, dataset="d")
    assert (r["trials"], r["catch"], r["dropped"], r["stimuli"]) == (5, 1, 0, 8)
    t = ws.read("similarity_trials", dataset="d").to_pylist()
    got = [(x["trial_id"], x["split"], x["query"], x["references"], x["chosen"], x["is_catch"]) for x in t]
    # files in name order, then sequences and positions in file order
    assert got == [
        ("1-0", "train", image[0], [image[1], image[2]], [image[2]], False),
        ("1-1", "train", image[1], [image[2], image[3]], [image[3]], False),
        ("2-0", "train", image[7], [image[0], image[4]], [image[0]], False),
        ("3-0", "train", image[4], [image[5], image[6]], [image[6]], False),
        ("9-0", "test", image[3], [image[3], image[5]], [image[3]], True),
    ]
    # the same trials again: refused, naming the first of them
    with pytest.raises(
        imp.ImportInputError, match=r"seq_a.json: sequence 1, position 0: trial '1-0' is already in"
    ):
        import_hsj(ws.root, src, dataset="d")
    # a file name two images of d share matches neither
    amb = _release(
        tmp_path / "amb",
        ["/imgs/p1.png", "/imgs/p0.png", "/imgs/q0.png"],
        {"train_seqs/seq_0.json": [(7, [(2, [1, 3], [3])])]},
    )
    with pytest.raises(
        imp.ImportInputError,
        match=r"stimulus '/imgs/p1.png' matches no image .*\(ambiguous: d-a-p1, d-c-p1\)",
    ):
        import_hsj(ws.root, amb, dataset="d")


class _InlinePool:
    """multiprocessing's Pool API, run in this process (spawning workers takes seconds)."""

    def __init__(self, workers):
        self.workers, self.closed = workers, False

    def imap(self, fn, jobs, chunksize=1):
        return map(fn, jobs)

    def terminate(self):
        self.closed = True

    def join(self):
        assert self.closed


def test_thumbnails_made_by_a_worker_pool_are_each_image_s_own(tmp_path, monkeypatch):
    import multiprocessing

    pools = []

    class Context:
        def Pool(self, workers):
            pools.append(_InlinePool(workers))
            return pools[-1]

    monkeypatch.setattr(multiprocessing, "get_context", lambda method: Context())
    monkeypatch.setattr(imp, "PARALLEL_MIN", 2)
    ws = workspace(tmp_path)
    paths = [draw(tmp_path / "src" / f"{i}.png", RGB["blue"], i, size=(16 + i, 16)) for i in range(4)]
    r = imp.import_images(ws, "p", _listing(paths), workers=2, progress=False)
    assert [(p.workers, p.closed) for p in pools] == [(2, True)]
    assert (r.made, r.n_images) == (4, 4)
    assert images_table(ws)["width"].tolist() == [16, 17, 18, 19]


def test_other_thumbnail_settings_after_an_interruption_make_every_thumbnail_again(tmp_path, monkeypatch):
    ws = workspace(tmp_path)
    paths = [draw(tmp_path / "src" / f"{i}.png", RGB["red"], i, size=(40, 20)) for i in range(3)]
    job = interrupt_thumbnails(monkeypatch, at=3, flush_every=1)
    with pytest.raises(KeyboardInterrupt):
        run(ws, "s", _listing(paths))  # two 40 x 20 thumbnails recorded
    monkeypatch.setattr(imp, "thumbnail_job", job)
    r = run(ws, "s", _listing(paths), thumbs=imp.Thumbs(size=16))
    assert (r.made, r.reused) == (3, 0)
    t = images_table(ws)
    assert t["width"].tolist() == [16] * 3 and t["height"].tolist() == [8] * 3
    for tid in t["thumbnail"]:
        with Image.open(ws.root / tid) as im:
            assert im.size == (16, 8)
