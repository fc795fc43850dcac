"""A grid of workspace thumbnails.

`st.image` with a file path serves the file through Streamlit's media endpoint
(a URL per image, not base64 in every rerun); paths are resolved inside the
workspace, so nothing outside it can be read.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from conceptlens.workspace import WorkspaceError


def image_grid(ws, rows: pd.DataFrame, caption_col: str | None = "label_name",
               width: int = 72, max_images: int = 60) -> None:
    rows = rows.head(max_images)
    paths, caps = [], []
    for r in rows.itertuples(index=False):
        try:
            p = ws.path(r.thumbnail)
        except WorkspaceError:
            continue
        if p.is_file():
            paths.append(str(p))
            caps.append(str(getattr(r, caption_col)) if caption_col and hasattr(r, caption_col) else None)
    if not paths:
        st.info("No images to show.")
        return
    st.image(paths, caption=caps if caption_col else None, width=width)
