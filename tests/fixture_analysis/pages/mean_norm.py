"""Mean norm: each checkpoint's mean feature norm, with its 95% interval (the `mean_norm`
analysis). A fixture, not part of the product (tests/test_contracts.py).

URL: ?ds=DATASET
"""

import streamlit as st

from components import data, url_state
from components.analysis_gate import available
from components.export_button import show_catalog_figure
from components.url_state import url_selectbox
from conceptlens.views import mean_norm as V

ws = data.open_page("mean_norm")

st.title("Mean norm")
if not available(ws, "mean_norm"):
    url_state.stop()
sets = ws.view(V.datasets)
ds = url_selectbox("Dataset", list(sets["dataset"]), key="mn_ds", param="ds")
if ds is None:
    st.info("No checkpoint has a mean norm yet.", icon=":material/pending:")
    url_state.stop()
st.dataframe(ws.view(V.norms, dataset=ds), hide_index=True)
show_catalog_figure(ws, "mean_norm_bars", {"ds": ds}, {"workspace": ws.label, "dataset": ds}, key="mn_fig")
