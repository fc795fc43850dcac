"""ConceptLens dashboard: the router and the frame, nothing else."""
import streamlit as st

from components import data

st.set_page_config(page_title="ConceptLens", page_icon=":material/lens_blur:", layout="wide")

PAGES = [
    st.Page("pages/home.py", title="Home", icon=":material/home:", default=True, url_path="home"),
    st.Page("pages/clusters.py", title="Clusters", icon=":material/bubble_chart:", url_path="clusters"),
    st.Page("pages/checkpoints.py", title="Checkpoints", icon=":material/compare_arrows:",
            url_path="checkpoints"),
]

nav = st.navigation(PAGES)
ws = data.current()
with st.sidebar:
    st.caption(f"Workspace: `{ws.label}`")
nav.run()
