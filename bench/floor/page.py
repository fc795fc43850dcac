"""The floor of a cold page in this stack (bench/cold_page.py --floor): a Streamlit page with
a header and one Plotly scatter of 1,000 points, nothing of ConceptLens. Served as serve.py
serves app.py (bench/floor/serve.py), timed the same way: what any page that draws a Plotly
chart costs a fresh browser profile on this machine."""

import numpy as np
import plotly.graph_objects as go
import streamlit as st

st.header("One chart")
g = np.random.default_rng(0)
st.plotly_chart(go.Figure(go.Scatter(x=g.random(1000), y=g.random(1000), mode="markers")))
