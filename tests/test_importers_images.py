"""conceptlens/importers/images.py: the checks of every item, the seeded stratified test share,
thumbnail warnings, the import itself (types, resumes, worker pools) and the old label hierarchy
kept or dropped on a re-import. Tiny folders of generated images (PIL)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from conceptlens import hierarchy as H
from conceptlens.importers import features as F
from conceptlens.importers import images as imp
from conceptlens.importers.imagefolder import scan as scan_folder
from conceptlens.workspace import Workspace
from tests import helpers_importers
from tests.helpers_importers import RGB, dataset_image_ids, draw, images_table, run, workspace, write_vectors
from tests.test_importers import interrupt_thumbnails

# Fixtures shared with other test modules, named here so that pytest finds them for this one.
feat_ws = helpers_importers.feat_ws


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
    e_v, e_t, _ = write_vectors(tmp_path, dataset_image_ids(ws, "e"), name="e")
    F.import_features(ws, "e", "of-e", e_v, ids=e_t)  # the first checkpoint: another dataset's
    v, t, _ = write_vectors(tmp_path, dataset_image_ids(ws, "d"))
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


# ---- --drop flat duplicates (issue 47, minor) -----------------------------------------------------
def test_drop_leaves_out_flat_images_and_repeats_as_declared(tmp_path):
    """Flat images go; of identical pixels the first (by id) of a one-label group stays and a
    group spanning labels goes whole; every other image stays, and without --drop all do."""
    import shutil

    root = tmp_path / "src"
    for c, name in enumerate(("red", "green")):
        for i in range(4):
            draw(root / name / f"{i:03d}.png", RGB[name], seed=10 * c + i)
    Image.new("RGB", (20, 16), (200, 200, 200)).save(root / "red" / "flat1.png")
    Image.new("RGB", (20, 16), (10, 10, 10)).save(root / "green" / "flat2.png")
    shutil.copy(root / "red" / "000.png", root / "red" / "000-copy.png")  # a repeat within red
    shutil.copy(root / "red" / "001.png", root / "green" / "red-in-green.png")  # across labels
    listing = scan_folder(root)
    ws = workspace(tmp_path, "all")
    run(ws, "d", listing)
    assert len(images_table(ws)) == 12
    ws = workspace(tmp_path, "dropped")
    r = run(ws, "d", listing, drop=("flat", "duplicates"))
    t = images_table(ws)
    paths = {str(p).split("src/")[-1] for p in t["source_path"]}
    want = {f"{n}/{i:03d}.png" for n in ("red", "green") for i in range(4)} - {"red/001.png"}
    assert paths == want, paths
    assert any("2 flat image(s) left out" in n for n in r.notes)
    assert any("1 repeat(s) of an image kept, 2 in groups spanning labels" in n for n in r.notes)
    with pytest.raises(ValueError, match="--drop: blurry"):
        run(workspace(tmp_path, "bad"), "d", listing, drop=("blurry",))
