"""A grid of workspace thumbnails.

`st.image` with a file path serves the file through Streamlit's media endpoint (a URL per
image, not base64 in every rerun); paths are resolved inside the workspace, so nothing
outside it can be read. A thumbnail that is missing or does not decode is drawn as a
placeholder: `st.image` would raise on it and stop the whole page.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pandas as pd
import streamlit as st

from components import cache
from components.text import literal
from conceptlens.cache import cached
from conceptlens.remote import open_source
from conceptlens.validate import open_thumbnail
from conceptlens.workspace import WorkspaceError, inside

UNREADABLE = "unreadable image"


@cached(reads=(), maxsize=50_000)
def _decodes(path: str, size: int, mtime_ns: int) -> bool:
    # Keyed by size and mtime: a replaced file is checked again. The library's LRU, not
    # Streamlit's: st.cache_data hashes and pickles per call, 0.5 ms per thumbnail, 50 ms
    # of every 96-image grid.
    try:
        with open_thumbnail(path) as im:  # refuses an oversized one before decoding it
            im.load()
        return True
    except Exception:  # PIL raises many types (OSError, SyntaxError, ValueError, ...)
        return False


@cache.cached(resource=True, reads=())
def _placeholder() -> bytes:
    from PIL import Image, ImageDraw  # local: off the pages' cold start

    im = Image.new("RGB", (64, 64), (236, 236, 236))
    d = ImageDraw.Draw(im)
    d.line((16, 16, 48, 48), fill=(160, 160, 160), width=3)
    d.line((16, 48, 48, 16), fill=(160, 160, 160), width=3)
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


@cache.cached(max_entries=5_000, reads=())
def _remote_image(url: str, fp: str) -> bytes | None:
    # A remote workspace's thumbnail, fetched once per workspace version (kept in memory):
    # `fp` is not read, it is the key of the version (a listing has no sizes or times).
    try:
        data = open_source(url).getvalue()
        with open_thumbnail(io.BytesIO(data)) as im:
            im.load()
        return data
    except Exception:
        return None


@cached(reads=(), maxsize=50_000)
def _inside(root: str, rel) -> str | None:
    # Two path resolutions per thumbnail (a quarter of a grid's time), once per path: the
    # answer, a path inside the workspace, stays inside it.
    try:
        return str(inside(Path(root), rel))
    except (WorkspaceError, TypeError):
        return None


def _readable(ws, rel) -> str | bytes | None:
    if getattr(ws, "remote", False):
        try:
            return _remote_image(ws.path(rel), ws.fp)
        except (WorkspaceError, TypeError):
            return None
    p = _inside(str(ws.root), rel)
    try:
        info = os.stat(p) if p is not None else None
    except OSError:
        info = None
    return p if info is not None and _decodes(p, info.st_size, info.st_mtime_ns) else None


def image_grid(
    ws, rows: pd.DataFrame, caption_col: str | None = "label_name", width: int = 72, max_images: int = 60
) -> None:
    rows = rows.head(max_images)
    if rows.empty:
        st.info("No images to show.")
        return
    images, caps = [], []
    for r in rows.itertuples(index=False):
        path = _readable(ws, r.thumbnail)
        images.append(path or _placeholder())
        cap = literal(getattr(r, caption_col)) if caption_col and hasattr(r, caption_col) else ""
        caps.append(cap if path else f"{UNREADABLE} {cap}".strip())
    st.image(images, caption=caps, width=width)


def image_picker(
    ws,
    rows: pd.DataFrame,
    key: str,
    on_pick,
    caption_col: str = "label_name",
    columns: int = 8,
    width: int = 80,
) -> None:
    """Thumbnails in a grid, each with a button (its `caption_col`, the image id as
    tooltip) that calls `on_pick(image_id)`: Streamlit images take no clicks."""
    if rows.empty:
        st.info("No images to show.")
        return
    records = list(rows.itertuples(index=False))
    for start in range(0, len(records), columns):
        cells = st.columns(columns, gap="small")
        for cell, r in zip(cells, records[start : start + columns]):
            path = _readable(ws, r.thumbnail)
            cap = getattr(r, caption_col, None)
            cap = "" if cap is None or (isinstance(cap, float) and cap != cap) else literal(cap)
            with cell:
                st.image(path or _placeholder(), width=width)
                st.button(
                    (cap if path else f"{UNREADABLE} {cap}".strip()) or literal(r.image_id),
                    key=f"{key}-{r.image_id}",
                    help=f"Show image {literal(r.image_id)}: its details and nearest neighbours",
                    on_click=on_pick,
                    args=(str(r.image_id),),
                    type="tertiary",
                )
