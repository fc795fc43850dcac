"""conceptlens/importers/primitives.py: the kept ids are the named dataset's only."""

from __future__ import annotations


# ---- primitives.kept_ids ------------------------------------------------------------------
def test_kept_ids_are_the_named_dataset_s_only(tmp_path):
    """drop_mask of `t["dataset"] == dataset`: the image ids of every dataset of the
    workspace were taken as the named dataset's (CUB tables got other datasets' images)."""
    from conceptlens.importers.imagefolder import scan as scan_folder
    from conceptlens.importers.primitives import kept_ids
    from tests.helpers_importers import folder, run, workspace

    ws = workspace(tmp_path)
    src = folder(tmp_path / "src", per_class=1, classes=("red", "green"))
    run(ws, "one", scan_folder(src))
    run(ws, "two", scan_folder(src))
    t = ws.read("images", columns=["image_id", "dataset"]).to_pandas()
    want = {d: {i for i, d2 in zip(t["image_id"], t["dataset"]) if d2 == d} for d in ("one", "two")}
    assert len(want["one"]) == len(want["two"]) == 2
    assert kept_ids(ws, "one") == want["one"] and kept_ids(ws, "two") == want["two"]
