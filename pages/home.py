"""Home: what the workspace holds, a sample of its images, and which analyses it has."""

import streamlit as st

from components import data, nav
from components.image_grid import image_grid
from components.metric_table import metric_table
from components.text import literal
from conceptlens import views

ws = data.open_page("home")
meta = ws.meta()
if ws.problems([nav.META]):
    data.show_problems(ws, ws.problems([nav.META]), "workspace.json has problems")

st.title(literal(meta.get("name") or "ConceptLens workspace"))
if meta.get("description"):
    st.write(literal(meta["description"]))
st.caption(
    f"Workspace {literal(ws.label)} · format {literal(meta.get('schema_version'))} · "
    f"created {literal(meta.get('created'))}"
)

datasets = ws.view(views.home.datasets)
names = list(datasets["dataset"])

st.header("Datasets")
metric_table(datasets, key="datasets")

st.header("Checkpoints")
ckpts = ws.view(views.home.checkpoints)
analyses = ws.view(
    views.home.analyses, workspace=ws.label, dataset=names[0] if names else "DATASET", broken=ws.broken()
)
if ckpts.empty:
    st.info("No checkpoints yet. Add one with:")
    st.code(analyses.set_index("name").loc["features", "command"], language="bash")
else:
    metric_table(ckpts, key="checkpoints")

st.header("Analyses")
for a in analyses.itertuples(index=False):
    if a.status == "present":
        where = f" — see the **{a.page}** page" if isinstance(a.page, str) else ""
        st.markdown(f":green[:material/check_circle:] **{a.title}**{where}")
    elif a.status == "missing":
        st.markdown(f":orange[:material/radio_button_unchecked:] **{a.title}** — not computed yet:")
        st.code(a.command, language="bash")
    else:
        checked = [t for t in a.tables if t in ws.checked]  # not those no page reads (nav.UNREAD)
        data.show_problems(ws, ws.problems(checked), f"{a.title}: its tables have problems")

st.header("Sample images")
ds = st.segmented_control(
    "Dataset", names, default=names[0] if names else None, key="home_dataset", format_func=literal
)  # its labels are Markdown
if ds:
    factors = ws.view(views.home.factors, dataset=ds)
    if len(factors):
        st.caption("Factors and attributes: " + ", ".join(literal(c) for c in factors["column"]))
    image_grid(ws, ws.view(views.home.sample_images, dataset=ds, n=40))
