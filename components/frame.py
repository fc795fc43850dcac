"""Make sure a page runs inside app.py's frame (navigation, wide layout, sidebar).

Streamlit keeps a legacy mode for apps with a `pages/` folder: until some
session has run app.py (whose `st.navigation` turns that mode off for the whole
server), a first request for `/clusters` runs `pages/clusters.py` on its own —
without the app's layout and navigation. A deep link opened right after the
server started would hit exactly that. Every page calls it first, through
`components.data.open_page`: in legacy mode it turns the mode off, as
`st.navigation` itself does, and reruns, so the same page (same URL path and
query) runs through app.py. The private flag it flips is checked by
tests/test_app.py, the behaviour by tests/test_browser.py (a fresh server).
"""

from __future__ import annotations

import streamlit as st


def ensure_app_frame() -> None:
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a Streamlit without the legacy mode
        return
    if getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
        st.rerun()
