"""A page with the projection view alone (bench/projection_browser.py --view-alone): the
Clusters page's WebGL view of the workspace's first clustered checkpoint, coloured by label,
its points served over HTTP, and nothing else. What a cold load costs without the rest of a
dashboard page (its tables, Plotly figures and images, whose scripts the browser must load
and run before the page, the view included, is drawn).

    streamlit run bench/view_alone/serve.py -- WORKSPACE
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import streamlit as st  # noqa: E402

from components import projection as P  # noqa: E402
from components.data import AppWorkspace  # noqa: E402
from conceptlens.workspace import Workspace  # noqa: E402

st.set_page_config(page_title="the view alone", layout="wide")
ws = AppWorkspace(sys.argv[-1])
part = Workspace(ws.root).partitions("clusters")[0]
enc = P.points_of(ws, "label_name", checkpoint=str(part["checkpoint_id"]), k=int(part["k"]))
P.projection_view(enc, key="alone", data_key=f"{ws.fp}|alone", view_key=f"{ws.fp}|alone")
