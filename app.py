"""ConceptLens dashboard: the router and the frame, nothing else."""

import streamlit as st

from components import data, nav
from components.text import literal

st.set_page_config(page_title="ConceptLens", page_icon=":material/lens_blur:", layout="wide")

# The one place the session's workspace is opened on each rerun; pages take it from here.
ws = data.open_workspace()
navigation = st.navigation(
    [st.Page(p.path, title=p.title, icon=p.icon, url_path=p.name, default=p.default) for p in nav.PAGES]
)
with st.sidebar:
    st.caption(f"Workspace: {literal(ws.label)}")
navigation.run()
