"""Home: what the workspace holds, a sample of its images, and which analyses it has."""

import streamlit as st

from components import data, nav
from components.cluster_tables import DASH, value_text
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
    f"Workspace {literal(ws.label)} · format {literal(value_text(meta.get('schema_version')))} · "
    f"created {literal(value_text(meta.get('created')))}"
)

datasets = ws.view(views.home.datasets)
names = list(datasets["dataset"])

st.header("Datasets")
metric_table(datasets, key="datasets", placeholder=DASH)

st.header("Checkpoints")
ckpts = ws.view(views.home.checkpoints)
analyses = ws.view(
    views.home.analyses, workspace=ws.label, dataset=names[0] if names else "DATASET", broken=ws.broken()
)
if ckpts.empty:
    st.info("No checkpoints yet. Add one with:")
    st.code(analyses.set_index("name").loc["features", "command"], language="bash")
else:
    metric_table(ckpts, key="checkpoints", placeholder=DASH)

st.header("Analyses")
# Links to other pages keep the workspace a link chose.
keep = {"ws": st.query_params["ws"]} if "ws" in st.query_params else None
for a in analyses.itertuples(index=False):
    if a.status == "present":
        st.markdown(f":green[:material/check_circle:] **{a.title}**")
        page = nav.page_of(a.name)
        if page is not None:
            st.page_link(page.path, label=f"see the {page.title} page", icon=page.icon, query_params=keep)
    elif a.status == "missing":
        st.markdown(
            f":orange[:material/radio_button_unchecked:] **{a.title}** — not in this workspace yet"
            + (":" if a.command else f" ({a.doc})")
        )
        if a.command:
            st.code(a.command, language="bash")
    elif a.status == "waiting":
        st.markdown(
            f":orange[:material/radio_button_unchecked:] **{a.title}** — not computed yet; it runs after "
            + ", ".join(f"**{t}**" for t in a.after)
            + ":"
        )
        st.code(a.command, language="bash")
    elif a.status == "skipped":
        st.markdown(
            f":orange[:material/error:] **{a.title}** — {a.skipped} unit(s) skipped, not done: "
            "the next run tries them again once their input is there. The latest reason:"
        )
        st.text(a.reason)  # from the workspace's log: shown as text
        st.code(a.command, language="bash")
    elif a.status == "needed":
        continue  # said by the analysis that needs it
    elif a.status == "no_input":
        st.markdown(
            f":grey[:material/block:] **{a.title}** — nothing to compute in this workspace: it needs "
            + ", ".join(f"**{t}**" for t in a.needs)
            + (":" if a.command else f" ({a.doc})")
        )
        if a.command:
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
