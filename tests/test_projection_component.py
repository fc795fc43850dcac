"""What the WebGL projection view is sent (components/projection.py `encode`): every point
once, its coordinates as float32, its colour code naming its own category (or value bin),
the ring on the chosen cluster's points, hover lines naming each point's image; and the
thumbnail folder served, never the workspace root."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from components.projection import NONE, VIRIDIS, encode, selected_ids, thumb_folder


def points(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "image_id": [f"im-{i:04d}" for i in range(n)],
            "x": rng.normal(size=n),
            "y": rng.normal(size=n),
            "cluster": rng.integers(0, 5, size=n),
            "label_name": rng.choice(["red\tcircle", "blue square", "green star"], size=n),
            "size": np.where(rng.random(n) < 0.1, np.nan, rng.random(n) * 10),
            "thumbnail": [f"thumbnails/toy/{i:04d}.png" for i in range(n)],
        }
    )


def decoded(enc):
    xy = np.frombuffer(enc.args["xy"], "float32")
    lines = enc.args["text"].decode().split("\n")
    return xy[0::2], xy[1::2], np.frombuffer(enc.args["codes"], "uint16"), [ln.split("\t") for ln in lines]


def test_every_point_once_with_its_own_coordinates_and_category():
    pts = points()
    enc = encode(pts, "label_name", highlight=3, thumbs="thumbnails")
    x, y, codes, lines = decoded(enc)
    assert sorted(enc.ids) == sorted(pts.image_id) and len(x) == len(pts)
    by_id = pts.set_index("image_id")
    assert np.allclose(x, by_id.loc[enc.ids, "x"], rtol=1e-6) and np.allclose(
        y, by_id.loc[enc.ids, "y"], rtol=1e-6
    )
    names = enc.args["names"]
    assert [names[c] for c in codes] == list(by_id.loc[enc.ids, "label_name"])
    # Largest category first (drawn first, so small ones are on top).
    sizes = pd.Series(codes).value_counts()
    first_seen = list(dict.fromkeys(codes))
    assert first_seen == sorted(first_seen, key=lambda c: -sizes[c])
    # Hover lines: id, caption (a tab in a label becomes a space), thumbnail under the folder.
    assert [ln[0] for ln in lines] == list(enc.ids)
    i = int(np.flatnonzero(enc.ids == "im-0007")[0])
    assert lines[i][1].startswith(by_id.loc["im-0007", "label_name"].replace("\t", " "))
    assert lines[i][2] == "toy/0007.png"
    ring = np.frombuffer(enc.args["ring"], "uint8").astype(bool)
    assert set(enc.ids[ring]) == set(pts.image_id[pts.cluster == 3])


def test_numbers_are_coloured_by_their_bin_and_missing_ones_apart():
    pts = points()
    enc = encode(pts, "size")
    _, _, codes, _ = decoded(enc)
    v = pts.set_index("image_id").loc[enc.ids, "size"].to_numpy()
    lo, hi = np.nanmin(v), np.nanmax(v)
    bins = np.minimum(((np.nan_to_num(v, nan=lo) - lo) / (hi - lo) * 10).astype(int), 9)
    want = np.where(np.isnan(v), len(VIRIDIS), bins)
    assert (codes == want).all()
    assert enc.args["names"][len(VIRIDIS)] == NONE and enc.args["palette"][:10] == VIRIDIS


def test_clusters_are_categories_and_too_many_share_one_grey():
    pts = points(2_000)
    pts["cluster"] = np.arange(len(pts)) % 40  # 40 clusters: more than a legend holds
    enc = encode(pts, "cluster", highlight=7)
    _, _, codes, _ = decoded(enc)
    names = enc.args["names"]
    assert len(names) == 11 and names[-1] == "30 others"
    assert "7" in names  # the chosen cluster keeps its colour
    clusters = pts.set_index("image_id").loc[enc.ids, "cluster"].astype(str).to_numpy()
    coloured = codes < 10
    assert (np.array(names)[codes[coloured]] == clusters[coloured]).all()
    assert not set(clusters[~coloured]) & set(names[:10])


@pytest.mark.parametrize(
    "paths, folder",
    [
        (["thumbnails/a/1.png", "thumbnails/b/2.png"], "thumbnails"),
        (["thumbnails/a/1.png", "thumbnails/a/2.png"], "thumbnails/a"),
        (["1.png", "thumbnails/2.png"], None),  # the workspace root: never served
        (["../outside/1.png", "../outside/2.png"], None),
        (["/abs/1.png"], None),
        ([None, None], None),
    ],
)
def test_the_thumbnail_folder_is_never_the_workspace_or_outside_it(paths, folder):
    assert thumb_folder(pd.Series(paths, dtype="object")) == folder


def test_a_selection_names_its_images_by_the_views_order():
    enc = encode(points(50), "cluster")
    event = {"event": "select", "kind": "box", "x": [0, 1], "y": [0, 1], "indices": [3, 0, 49, 50, -1]}
    assert selected_ids(enc, event) == [enc.ids[3], enc.ids[0], enc.ids[49]]
    assert selected_ids(enc, {**event, "indices": None}) is None  # too many: the region only
    assert selected_ids(enc, {"event": "click", "index": 2}) is None


def _thumb_folder_by_os_path(paths):
    """The folder thumb_folder names, computed the plain way (os.path, one path at a time)."""
    import os

    rel = [p for p in paths if p is not None]
    if not rel or any(p.startswith(("/", "\\")) for p in rel):
        return None
    try:
        common = os.path.commonpath(sorted({os.path.dirname(p) for p in rel}))
    except ValueError:
        return None
    common = os.path.normpath(common) if common else ""
    return None if common in ("", ".") or common.startswith("..") else common


def test_the_thumbnail_folder_matches_os_path_on_many_layouts():
    """thumb_folder finds folders in Arrow (a million paths); it must name the folder
    os.path.dirname and commonpath name, on layouts with nesting, doubled and trailing
    slashes, files at the root and missing paths."""
    rng = np.random.default_rng(0)
    parts = ["thumbnails", "a", "b", "c d", "x.y", ""]
    for _ in range(300):
        paths = []
        for _ in range(int(rng.integers(1, 6))):
            if rng.random() < 0.1:
                paths.append(None)
                continue
            depth = int(rng.integers(0, 4))
            folder = "/".join(str(rng.choice(parts)) for _ in range(depth))
            paths.append(f"{folder}/{int(rng.integers(9))}.png" if folder else f"{int(rng.integers(9))}.png")
        assert thumb_folder(pd.Series(paths, dtype="object")) == _thumb_folder_by_os_path(paths), paths


@pytest.mark.parametrize("color", ["label_name", "size", "cluster"])
def test_captions_served_by_the_block_are_the_lines_sent_with_the_points(monkeypatch, color):
    """A view with more points than `max_text()` sends no captions with its points; the
    blocks of its CaptionSource (served on hover) are, end to end, the very lines `encode`
    sends for a smaller view: same order (the drawing order), same text. Fails if the
    source ordered its points otherwise, cut a line at a block's edge or lost one."""
    import components.projection as P

    monkeypatch.setattr(P, "CAPTION_BLOCK", 7)
    pts = points(301)
    pts["cluster"] = pts["cluster"].astype("Int64")  # as DuckDB gives a nullable column
    pts.loc[5, "cluster"] = pd.NA  # a point without a cluster
    whole = encode(pts, color, highlight=3, thumbs="thumbnails")
    monkeypatch.setenv("CONCEPTLENS_COMPONENT_MAX_TEXT", "300")
    assert (
        encode(pts, color, highlight=3, thumbs="thumbnails", with_text=len(pts) <= P.max_text()).args["text"]
        is None
    )
    src = P.CaptionSource(P._ordered(pts, color, highlight=3)[0], color, "thumbnails")
    assert src.blocks() == 43  # 301 points, 7 a block
    blocks = [src.block(b) for b in range(src.blocks())]
    assert all(len(b.decode().split("\n")) == 7 for b in blocks[:-1])
    assert b"\n".join(blocks) == whole.args["text"]
    with pytest.raises(IndexError):
        src.block(43)
    # The source keeps its last KEEP_BLOCKS blocks, not every one it made.
    monkeypatch.setattr(P.CaptionSource, "KEEP_BLOCKS", 4)
    for b in range(10):
        src.block(b)
    assert len(src._blocks) == 4 and src.block(9) == blocks[9]


def test_the_caption_store_serves_only_views_drawn_and_blocks_in_range():
    from components.serving import CaptionStore

    class Source:
        made = 0

        def blocks(self):
            return 3

        def block(self, b):
            return f"block {b}".encode()

    calls = []

    def source():
        calls.append(1)
        return Source()

    store = CaptionStore(max_keys=2)
    store.put("a", source)
    assert store.lines("a", 2) == b"block 2"
    assert store.lines("a", 3) is None and store.lines("a", -1) is None
    assert store.lines("nope", 0) is None
    store.put("b", source)
    store.put("c", source)  # the oldest view is no longer served
    assert store.lines("a", 0) is None and store.lines("c", 0) == b"block 0"


def test_each_run_gets_its_own_arguments_and_shares_the_points(demo_ws):
    """points_of keeps the encoded points once per process (st.cache_resource, no unpickling
    per rerun) and hands each run a copy of what a page changes: a ring or a greyed legend
    entry drawn for one session never shows in another's view."""
    import streamlit as st

    import components.projection as P
    from components.data import AppWorkspace

    st.cache_resource.clear()
    ws = AppWorkspace(demo_ws)
    kw = {"checkpoint": "shapes-simclr-e20", "k": 71}
    one = P.points_of(ws, "label_name", **kw)
    palette = list(one.args["palette"])
    one.args["palette"][0] = "#000000"
    P.ring_ids(one, one.ids[:3])
    two = P.points_of(ws, "label_name", **kw)
    assert two.args["palette"] == palette and two.args["ring"] is None
    assert one.args["ring"] is not None
    assert two.ids is one.ids and two.packed is one.packed  # the points themselves: shared
    assert P.pack(two.args) == two.packed[1]  # and packed from the same points
    st.cache_resource.clear()
