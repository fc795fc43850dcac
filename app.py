"""ConceptLens dashboard: the router and the frame, nothing else."""

import streamlit as st

from components import data, frame, nav, url_state
from components.text import literal

# An emoji icon becomes an inline data: URL; a :material/...: one is fetched from Google's font CDN.
st.set_page_config(page_title="ConceptLens", page_icon="🔎", layout="wide")

# The one place the session's workspace is opened on each rerun; pages take it from here.
if nav.STUDY_PARAM in st.query_params:
    # A participant's link: their page alone, no navigation, nothing of the owner's pages (and
    # no workspace validation: the page only reads the study's thumbnails).
    p = nav.PARTICIPANT
    st.navigation([st.Page(p.path, title=p.title, icon=p.icon, default=True)], position="hidden").run()
    url_state.stop()
ws = data.open_workspace()
navigation = st.navigation(
    [st.Page(p.path, title=p.title, icon=p.icon, url_path=p.name, default=p.default) for p in nav.PAGES]
)
with st.sidebar:
    st.caption(f"Workspace: {literal(ws.label)}")
    frame.sidebar_tools()
try:
    navigation.run()
finally:
    # The page's URL changes leave in one message: one view, one browser-history entry.
    url_state.flush()
