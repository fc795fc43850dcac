"""ConceptLens dashboard: the router and the frame, nothing else."""

import streamlit as st

from components import data, frame, nav, url_state
from components.study import participant_study
from components.text import literal

# An emoji icon becomes an inline data: URL; a :material/...: one is fetched from Google's font CDN.
st.set_page_config(page_title="ConceptLens", page_icon="🔎", layout="wide")

pages = [st.Page(p.path, title=p.title, icon=p.icon, url_path=p.name, default=p.default) for p in nav.PAGES]
# Who is a participant is decided here, on the server: a study link, a session that holds a
# place in a study (whatever its address says since), or a browser with a study's cookie
# (components/study.py).
study = participant_study(nav.STUDY_PARAM)
if study is not None:
    # Their page alone, no navigation, nothing of the owner's pages (and no workspace
    # validation: the page only reads the study's thumbnails).
    if st.query_params.get(nav.STUDY_PARAM) != study:
        st.query_params[nav.STUDY_PARAM] = study
    p = nav.PARTICIPANT
    st.navigation([st.Page(p.path, title=p.title, icon=p.icon, default=True)], position="hidden").run()
    url_state.stop()
# The one place the session's workspace is opened on each rerun; pages take it from here.
ws = data.open_workspace()
navigation = st.navigation(pages)
with st.sidebar:
    st.caption(f"Workspace: {literal(ws.label)}")
    frame.sidebar_tools()
try:
    navigation.run()
finally:
    # The page's URL changes leave in one message: one view, one browser-history entry.
    url_state.flush()
