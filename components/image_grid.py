"""A grid of workspace thumbnails.

`st.image` with a file path serves the file through Streamlit's media endpoint (a URL per
image, not base64 in every rerun); paths are resolved inside the workspace, so nothing
outside it can be read. A thumbnail that is missing or does not decode is drawn as a
placeholder: `st.image` would raise on it and stop the whole page.
"""

from __future__ import annotations

import io
import os

import pandas as pd
import streamlit as st

from conceptlens.workspace import WorkspaceError

UNREADABLE = "unreadable image"


@st.cache_data(show_spinner=False, max_entries=50_000)
def _decodes(path: str, size: int, mtime_ns: int) -> bool:
    # Keyed by size and mtime: a replaced file is checked again.
    from PIL import Image

    try:
        with Image.open(path) as im:
            im.load()
        return True
    except Exception:  # PIL raises many types (OSError, SyntaxError, ValueError, ...)
        return False


@st.cache_resource(show_spinner=False)
def _placeholder() -> bytes:
    from PIL import Image, ImageDraw

    im = Image.new("RGB", (64, 64), (236, 236, 236))
    d = ImageDraw.Draw(im)
    d.line((16, 16, 48, 48), fill=(160, 160, 160), width=3)
    d.line((16, 48, 48, 16), fill=(160, 160, 160), width=3)
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def _readable(ws, rel) -> str | None:
    try:
        p = ws.path(rel)
        info = os.stat(p)
    except (WorkspaceError, OSError, TypeError):
        return None
    return str(p) if _decodes(str(p), info.st_size, info.st_mtime_ns) else None


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
        cap = str(getattr(r, caption_col)) if caption_col and hasattr(r, caption_col) else ""
        caps.append(cap if path else f"{UNREADABLE} {cap}".strip())
    st.image(images, caption=caps, width=width)
