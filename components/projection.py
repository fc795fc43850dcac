"""The projection view: a 2-D projection drawn with WebGL2 in the browser (a Streamlit
custom component; source and build in components/projection_frontend/, its built bundle
committed, so running the app needs no Node).

Every point is drawn; pan, zoom and hover happen in the browser and send the server
nothing (no rerun); a box or lasso selection is computed in the browser too and sent
once, on mouse-up: its region (rounded as `views.clusters.region_text` keeps it in the
URL) and the indices of the points inside. The points go to the browser as binary
(float32 x/y, uint16 palette codes, caption lines). Served by serve.py (`make run`), they
are one immutable file per data version (`pack`, `components.serving.POINTS`), which the
browser fetches once and caches across sessions; under `streamlit run app.py` or AppTest
they are `bytes` arguments, and Streamlit's forward-message cache sends an unchanged view
once per session. Either way a rerun for another widget resends no points. A hovered
point shows its caption and thumbnail; thumbnails are served from the
workspace's thumbnail folder by a second, file-only component route (never the
workspace's tables).

Beyond `MAX_POINTS` points the page draws the binned overview instead (`too_many`).

View first (components/defer.py `defer_rest`): a page's other elements (tables, Plotly
figures) cost the browser seconds of script loading and evaluation on the thread that also
draws the view, so on the first run of a page in a browser session the page sends the view
and stops; the view's first draw (or its failure to draw) reports back, and that rerun sends
the whole page.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import streamlit as st
import streamlit.components.v1 as components

from components.cache import cached
from components.defer import mark_drawn
from conceptlens.cache import ALL, pinned
from conceptlens.figures.clusters import (
    MAX_LEGEND,
    OTHER,
    PALETTE,
    categories,
    focus_categories,
    is_categorical,
)
from conceptlens.workspace import WorkspaceError, inside

FRONTEND = Path(__file__).resolve().parent / "projection_frontend" / "build"
_component = components.declare_component("projection", path=str(FRONTEND))

# Points the browser is sent one by one (1,000,000 float32 x/y is 8 MB; measured in
# docs/dashboard.md); more and the page passes the binned overview.
MAX_POINTS = 1_000_000
# Hover captions and thumbnails are sent with the points up to this many points (about 40
# bytes a point); beyond, served by the block when the cursor reaches a point (CaptionSource).
MAX_TEXT = 250_000
CAPTION_BLOCK = 4096  # points per block of captions served on hover
# A selection of more points reaches Python as its region only (Python counts it).
MAX_IDS = 200_000
VIRIDIS = [
    "#440154",
    "#482878",
    "#3e4989",
    "#31688e",
    "#26828e",
    "#1f9e89",
    "#35b779",
    "#6ece58",
    "#b5de2b",
    "#fde725",
]
NONE = "(none)"
# Always coloured by category, whatever their type (cluster ids are numbers).
CATEGORICAL = ("cluster", "label", "cluster in A", "cluster in B")


def _env_count(name: str, default: int, least: int) -> int:
    """`$name` as a whole number of at least `least`, else `default` (unset or not a number)."""
    raw = os.environ.get(name)
    try:
        return max(least, int(raw)) if raw else default
    except ValueError:
        return default


def max_points() -> int:
    """Points drawn by the component (`$CONCEPTLENS_COMPONENT_MAX_POINTS`, else MAX_POINTS)."""
    return _env_count("CONCEPTLENS_COMPONENT_MAX_POINTS", MAX_POINTS, 1)


def max_text() -> int:
    """Points whose captions go with them (`$CONCEPTLENS_COMPONENT_MAX_TEXT`, else MAX_TEXT)."""
    return _env_count("CONCEPTLENS_COMPONENT_MAX_TEXT", MAX_TEXT, 0)


@dataclass
class Encoded:
    """Points as the component gets them. `ids[i]` is the image of the component's point i
    (the order is the drawing order: largest categories first)."""

    ids: np.ndarray
    x: np.ndarray
    y: np.ndarray
    args: dict
    packed: tuple[str, bytes] | None = None  # (key, bytes) of `pack`, made once
    # Without captions in `args` (too many points): (key, a function returning their
    # CaptionSource), the captions served by the block on hover (points_of sets it).
    captions: tuple[str, object] | None = None


POINT_SECTIONS = ("xy", "codes", "text")
HEADER = 256  # bytes before the first section of `pack`


def pack(args: dict) -> bytes:
    """The points of `args` (x/y, colour codes, caption lines) as one file, as the view reads
    it when served over HTTP (components/serving.py): a little-endian uint32 length, a JSON
    header {n, sections: {name: [offset, length]}} padded with spaces to `HEADER` bytes, then
    each section at a 4-byte boundary."""
    parts = {k: args[k] for k in POINT_SECTIONS if args.get(k)}
    sections, offset = {}, HEADER
    for k, b in parts.items():
        sections[k] = [offset, len(b)]
        offset += len(b) + (-len(b)) % 4
    head = json.dumps({"n": len(args["xy"]) // 8, "sections": sections}).encode()
    out = bytearray(struct.pack("<I", len(head)) + head.ljust(HEADER - 4))
    for b in parts.values():
        out += b + b"\0" * ((-len(b)) % 4)
    return bytes(out)


def _packed(enc: Encoded) -> tuple[str, bytes]:
    """(SHA-256, bytes) of `pack` of the points, made once per Encoded."""
    if enc.packed is None:
        blob = pack(enc.args)
        enc.packed = (hashlib.sha256(blob).hexdigest(), blob)
    return enc.packed


def _colours(vals: pd.Series, color: str, clusters, highlight) -> tuple[np.ndarray, list, list, list]:
    """(code per point, palette, names, legend entries) for a column."""
    if pd.api.types.is_numeric_dtype(vals) and not is_categorical(vals) and color not in CATEGORICAL:
        v = vals.to_numpy("float64")
        finite = np.isfinite(v)
        lo, hi = (float(v[finite].min()), float(v[finite].max())) if finite.any() else (0.0, 1.0)
        nb = len(VIRIDIS)
        edges = np.linspace(lo, hi, nb + 1)
        at = (np.where(finite, v, lo) - lo) / ((hi - lo) or 1.0) * nb
        codes = np.clip(at.astype("int64", copy=False), 0, nb - 1)
        codes = np.where(finite, codes, nb).astype("uint16")
        names = [f"{edges[i]:.3g} – {edges[i + 1]:.3g}" for i in range(nb)] + [NONE]
        palette = VIRIDIS + [OTHER]
        legend = list(range(nb)) + ([nb] if (~finite).any() else [])
        return codes, palette, names, legend
    text = vals.astype("string").fillna(NONE)
    cats = categories(text)
    shown = cats if len(cats) <= MAX_LEGEND else focus_categories(text, cats, clusters, highlight)
    palette = [PALETTE[i % len(PALETTE)] for i in range(len(shown))]
    names = [str(c) for c in shown]
    rank = {c: i for i, c in enumerate(shown)}
    other = len(shown)
    # One lookup per category, not per point (a million points are a million lookups).
    cat = pd.Categorical(text)
    lut = np.array([rank.get(c, other) for c in cat.categories] + [other], dtype="uint16")
    codes = lut[cat.codes]
    if len(shown) < len(cats):
        palette.append(OTHER)
        names.append(f"{len(cats) - len(shown):,} others")
    return codes, palette, names, list(range(len(palette)))


def thumb_folder(thumbnails: pd.Series) -> str | None:
    """The folder (relative to the workspace) that holds every thumbnail, if it is not the
    workspace itself (whose tables are never served)."""
    rel = pa.array(thumbnails, type=pa.string(), from_pandas=True).drop_null()
    if len(rel) == 0 or pc.any(pc.starts_with(rel, "/")).as_py() or pc.any(pc.starts_with(rel, "\\")).as_py():
        return None
    # Each path's folder (os.path.dirname: "" without a "/"), in Arrow: a million paths in C++.
    dirs = pc.if_else(pc.match_substring(rel, "/"), pc.replace_substring_regex(rel, "/[^/]*$", ""), "")
    try:
        common = os.path.commonpath([d or "" for d in pc.unique(dirs).to_pylist()])
    except ValueError:
        return None
    common = os.path.normpath(common) if common else ""
    if common in ("", ".") or common.startswith(".."):
        return None
    return common


def _ordered(points: pd.DataFrame, color: str | None, highlight=None):
    """`points` in drawing order (largest colour categories first, so small ones are drawn
    on top, never buried) with each point's colour code: (points, codes, palette, names,
    legend). The one order of both the points and their captions (`CaptionSource`)."""
    pts = points.reset_index(drop=True)
    n = len(pts)
    vals = pts[color] if color and color in pts.columns else pd.Series(["all"] * n)
    clusters = pts["cluster"] if "cluster" in pts.columns else None
    codes, palette, names, legend = _colours(vals, color or "", clusters, highlight)
    sizes = np.bincount(codes, minlength=len(palette))
    order = np.lexsort((np.arange(n), -sizes[codes]))
    return pts.iloc[order].reset_index(drop=True), codes[order], palette, names, legend


def caption_lines(pts: pd.DataFrame, color: str | None, thumbs=None) -> bytes:
    """The hover lines of `pts` (points in drawing order, or a run of them), one per point:
    UTF-8 "image id<TAB>caption<TAB>thumbnail path below `thumbs`", joined by newlines."""
    pts = pts.reset_index(drop=True)  # a run of rows: its columns align with the new ones
    n = len(pts)
    ids = pts["image_id"].astype(str).to_numpy()
    clus = pts["cluster"].astype("string").fillna("\u2014") if "cluster" in pts.columns else None
    label = pts["label_name"].astype("string").fillna("") if "label_name" in pts.columns else None
    cap = pd.Series([""] * n, dtype="string")
    if label is not None:
        cap = label
    if clus is not None:
        cap = cap + " · cluster " + clus
    if color and color in pts.columns and color not in ("cluster", "label_name"):
        v = pts[color]
        v = v.round(4) if pd.api.types.is_float_dtype(v) else v
        cap = cap + f" · {color}: " + v.astype("string").fillna("\u2014")
    thumb = pd.Series([""] * n, dtype="string")
    if thumbs and "thumbnail" in pts.columns:
        t = pts["thumbnail"].astype("string").fillna("")
        prefix = thumbs.rstrip("/") + "/"
        thumb = t.where(t.str.startswith(prefix), "").str.slice(len(prefix))
    clean = lambda s: s.str.replace(r"[\t\n\r]", " ", regex=True)  # noqa: E731
    lines = pd.Series(ids, dtype="string").pipe(clean) + "\t" + cap.pipe(clean) + "\t" + thumb.pipe(clean)
    return "\n".join(lines.fillna("").tolist()).encode()


def encode(
    points: pd.DataFrame, color: str | None, highlight=None, with_text: bool = True, thumbs=None
) -> Encoded:
    """The component's arguments for `points` (columns x, y, image_id, cluster, label_name,
    thumbnail and the colour column), coloured by `color`, the `highlight` cluster ringed.
    `thumbs`: the thumbnail folder (`thumb_folder`) the captions' paths are relative to."""
    pts, codes, palette, names, legend = _ordered(points, color, highlight)
    x = pts["x"].to_numpy("float32")
    y = pts["y"].to_numpy("float32")
    ids = pts["image_id"].astype(str).to_numpy()
    ring = None
    if highlight is not None and "cluster" in pts.columns:
        ring = (pts["cluster"].to_numpy() == highlight).astype("uint8")
        ring = ring.tobytes() if ring.any() else None
    text = caption_lines(pts, color, thumbs) if with_text else None
    xy = np.empty(2 * len(pts), "float32")
    xy[0::2], xy[1::2] = x, y
    args = dict(
        xy=xy.tobytes(),
        codes=codes.astype("uint16").tobytes(),
        ring=ring,
        text=text,
        palette=palette,
        names=names,
        legend=legend,
        title=color or "",
    )
    return Encoded(ids, x, y, args)


class CaptionSource:
    """The hover lines of a view too large to send them with its points (more than
    `max_text()`), made a block of `CAPTION_BLOCK` points at a time when the browser asks
    for one (served by components/serving.py at `/conceptlens/captions/<key>/<block>`): the
    same lines `encode` would have sent (`caption_lines` of the same drawing order). Keeps
    the points' caption columns and its last `KEEP_BLOCKS` blocks."""

    KEEP_BLOCKS = 64

    def __init__(self, pts: pd.DataFrame, color: str | None, thumbs: str | None):
        cols = [
            c for c in ("image_id", "cluster", "label_name", color, "thumbnail") if c and c in pts.columns
        ]
        self.pts = pts[list(dict.fromkeys(cols))]
        self.color, self.thumbs = color, thumbs
        self.n = len(pts)
        self._blocks: dict[int, bytes] = {}
        self._lock = threading.Lock()

    def blocks(self) -> int:
        return -(-self.n // CAPTION_BLOCK)

    def block(self, b: int) -> bytes:
        """The lines of points b * CAPTION_BLOCK .. (b + 1) * CAPTION_BLOCK - 1."""
        if not 0 <= b < self.blocks():
            raise IndexError(f"block {b} is not in [0, {self.blocks()})")
        with self._lock:
            got = self._blocks.pop(b, None)
            if got is None:
                s = b * CAPTION_BLOCK
                got = caption_lines(self.pts.iloc[s : s + CAPTION_BLOCK], self.color, self.thumbs)
            self._blocks[b] = got  # most recently used last
            while len(self._blocks) > self.KEEP_BLOCKS:
                del self._blocks[next(iter(self._blocks))]
            return got


@cached(resource=True, max_entries=2)
def _caption_source(db, view, args: dict, color, highlight) -> CaptionSource:
    """The CaptionSource of `_encoded`'s points (the same view, order and folder); at most two
    are kept (a million points' caption columns are about 150 MB)."""
    pts = view(db, **args)
    folder = thumb_folder(pts["thumbnail"]) if "thumbnail" in pts.columns else None
    return CaptionSource(_ordered(pts, color, highlight)[0], color, folder)


def _thumb_route(ws, folder: str | None) -> str | None:
    """URL prefix (relative to the component's frame) of the thumbnail folder, served as a
    file-only component route; None for a remote workspace or without a folder."""
    if folder is None or getattr(ws, "remote", False):
        return None
    try:
        path = inside(Path(ws.root), folder)
    except WorkspaceError:
        return None
    if not path.is_dir():
        return None
    name = "thumbs_" + hashlib.sha1(str(path).encode()).hexdigest()[:16]
    route = components.declare_component(name, path=str(path))
    return f"../{route.name}/"


@cached(resource=True, max_entries=8)
def _encoded(db, view, args: dict, color, highlight, text_limit: int):
    """The encoded points and their thumbnail folder, packed once. Kept as objects shared by
    every session (st.cache_data would unpickle them on every rerun: 0.1-0.4 s at 1,000,000
    points, the page's reruns after a selection included), so never changed: `points_of`
    hands each run a copy of what a page may change. Keyed by the view, its arguments and the
    tables it read (a stat of their files, taken once per rerun with the page's views), not
    by the whole workspace: a saved selection does not encode the points again. The view is
    run here, not through the page's view cache: its frame is needed once, to encode it."""
    pts = view(db, **args)
    folder = thumb_folder(pts["thumbnail"]) if "thumbnail" in pts.columns else None
    enc = encode(pts, color, highlight=highlight, with_text=len(pts) <= text_limit, thumbs=folder)
    _packed(enc)
    return enc, folder


def points_of(ws, color, highlight=None, view=None, **view_args) -> Encoded:
    """The encoded points of a projection (cached per workspace version): the view function
    `view` of `view_args` (it returns x, y, image_id and the colour column), by default
    `views.clusters.projection` (checkpoint, k) of every point up to `max_points()`."""
    if view is None:
        from conceptlens.views import clusters as V

        view = V.projection
        view_args = {"method": "umap", **view_args, "limit": max_points()}
    db = ws.db()
    text_limit = max_text()
    # The tables' fingerprints, each taken once for this call (the key, then a run on a miss);
    # the whole workspace's is the one this rerun took (`ws.fp`).
    with pinned({(str(db.root), ALL): "ws:" + ws.fp}):
        shared, folder = _encoded(db, view, view_args, color, highlight, text_limit)
        # The captions' URL key: the points' own key (the view, its arguments and the tables
        # it read), so the browser keeps a block of captions as long as the points.
        key = _encoded.key((db, view, view_args, color, highlight, text_limit), {})[0]
    # This run's own arguments (a page rings other points, greys a legend entry); the points'
    # arrays and bytes are shared, read only.
    lists = {k: list(shared.args[k]) for k in ("palette", "names", "legend")}
    enc = dataclasses.replace(shared, args={**shared.args, **lists})
    enc.args["thumb_base"] = _thumb_route(ws, folder)
    if enc.args.get("text") is None:
        enc.captions = (
            hashlib.sha256(repr((CAPTION_BLOCK, key)).encode()).hexdigest(),
            functools.partial(_caption_source, db, view, view_args, color, highlight),
        )
    return enc


def ring_ids(enc: Encoded, ids) -> None:
    """Ring the points of the images `ids` (e.g. a selection made in another view)."""
    mask = np.isin(enc.ids, np.asarray(list(ids), dtype=str)).astype("uint8")
    enc.args["ring"] = mask.tobytes() if mask.any() else None


def region_arg(region: str | None) -> dict | None:
    """The region text of the URL as the component draws it."""
    if not region:
        return None
    from conceptlens.views.clusters import parse_region

    try:
        kind, pts = parse_region(region)
    except ValueError:
        return None
    return {"kind": kind, "x": [float(v) for v in pts[:, 0]], "y": [float(v) for v in pts[:, 1]]}


def _region_arg(key: str, data_key: str, region: str | None) -> tuple[str | None, int]:
    """The region to pass, and its sequence number. A region the view drew itself is not
    passed back (the previous argument is kept): the view's arguments stay the same, so
    Streamlit's forward-message cache does not resend every point after a selection. A
    region from anywhere else (a link, Back, another checkpoint) is passed with a new number."""
    state = st.session_state.setdefault(
        f"_{key}_region", {"data_key": None, "arg": None, "seq": 0, "drawn": None}
    )
    fresh = state["data_key"] != data_key or key not in st.session_state  # new points, or a new mount
    if fresh or region != state["drawn"]:
        state.update(data_key=data_key, arg=region, seq=state["seq"] + 1, drawn=region)
    return state["arg"], state["seq"]


def projection_view(
    enc: Encoded,
    key: str,
    data_key: str,
    view_key: str,
    region: str | None = None,
    height: int = 560,
    on_change=None,
    report_drawn: bool = False,
):
    """Draw the encoded points; returns the last committed event (or None):
    {"event": "select", "kind", "x", "y", "n", "indices"}, {"event": "click", "index"} or
    {"event": "clear"}. `data_key` names the points (a new one redraws and resets the
    selection); `view_key` keeps the pan/zoom while it stays the same; `region` is the
    selection the page holds (the URL's region text). `report_drawn` (a run
    components/defer.py `defer_rest` deferred): the view's first draw reruns the page,
    `on_change` not called."""
    from conceptlens.views.clusters import region_text

    def committed():
        ev = st.session_state.get(key) or {}
        if ev.get("event") == "drawn":  # the page's deferred elements are sent on this rerun
            mark_drawn(key)
            return
        state = st.session_state.get(f"_{key}_region")
        if state is not None and ev.get("event") == "select":
            state["drawn"] = region_text(ev["kind"], ev["x"], ev["y"])
        elif state is not None and ev.get("event") == "clear":
            state["drawn"] = None
        if on_change is not None:
            on_change()

    arg, seq = _region_arg(key, data_key, region)
    args = dict(enc.args)
    from components.serving import (  # local: keeps Starlette's routing off the pages' cold start
        CAPTIONS,
        CAPTIONS_ROUTE,
        POINTS,
        POINTS_ROUTE,
    )

    if POINTS.served:  # serve.py: the points as an immutable file the browser caches
        points_key, blob = _packed(enc)
        POINTS.put(blob, key=points_key)
        for k in POINT_SECTIONS:
            args.pop(k, None)
        # The component's frame is /component/<name>/index.html: two levels below the base URL.
        args["points_url"] = f"../../{POINTS_ROUTE}/{points_key}"
        if args.get("text") is None and enc.captions is not None:
            CAPTIONS.put(*enc.captions)
            args["captions_url"] = f"../../{CAPTIONS_ROUTE}/{enc.captions[0]}"
            args["caption_block"] = CAPTION_BLOCK
    event = _component(
        **args,
        region=region_arg(arg),
        region_seq=seq,
        data_key=data_key,
        keep_view_key=view_key,
        ring_key=f"{data_key}|{enc.args['ring'] is not None and hashlib.sha1(enc.args['ring']).hexdigest()}",
        height=int(height),
        max_ids=MAX_IDS,
        report_drawn=bool(report_drawn),
        key=key,
        default=None,
        on_change=committed,
    )
    return None if (event or {}).get("event") == "drawn" else event


def selected_ids(enc: Encoded, event: dict | None) -> list[str] | None:
    """The image ids of a committed selection (None: no ids were sent, too many)."""
    if not event or event.get("event") != "select" or event.get("indices") is None:
        return None
    idx = np.asarray(event["indices"], dtype="int64")
    idx = idx[(idx >= 0) & (idx < len(enc.ids))]
    return [str(v) for v in enc.ids[idx]]
