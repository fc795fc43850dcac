"""Home: what the workspace holds, a sample of its images, and what is missing."""
import streamlit as st

from components import data
from components.image_grid import image_grid
from components.metric_table import metric_table
from conceptlens import queries
from conceptlens.analyses import ANALYSES, command_for

ws = data.open_page()
meta = ws.meta()

st.title(meta.get("name") or "ConceptLens workspace")
if meta.get("description"):
    st.write(meta["description"])
st.caption(f"Workspace `{ws.label}` · format {meta.get('schema_version')} · created {meta.get('created')}")

datasets = ws.query(queries.DATASETS)
ckpts = ws.query(queries.CHECKPOINTS)
factors = queries.factor_columns(ws.columns("images"))

st.header("Datasets")
n_ckpt = ckpts.groupby("dataset").size()
datasets["checkpoints"] = datasets["dataset"].map(n_ckpt).fillna(0).astype(int)
metric_table(datasets, key="datasets")

st.header("Checkpoints")
if ckpts.empty:
    st.info("No checkpoints yet. Add one with "
            f"`{command_for(ANALYSES[0], ws.label, datasets['dataset'].iloc[0])}`.")
else:
    metric_table(ckpts, key="checkpoints")

st.header("Analyses")
for a in ANALYSES:
    present = all(ws.has(t) for t in a.tables)
    if present and a.present_sql:
        present = bool(ws.query(a.present_sql)["present"].iloc[0])
    if present:
        where = f" — see the **{a.page}** page" if a.page else ""
        st.markdown(f":green[:material/check_circle:] **{a.title}**{where}")
    else:
        st.markdown(f":orange[:material/radio_button_unchecked:] **{a.title}** — not computed yet:")
        ds = datasets["dataset"].iloc[0] if len(datasets) else "DATASET"
        st.code(command_for(a, ws.label, ds), language="bash")

st.header("Sample images")
ds = st.segmented_control("Dataset", list(datasets["dataset"]), default=datasets["dataset"].iloc[0],
                          key="home_dataset")
if ds:
    present = [c for c in factors
               if ws.query(queries.FACTOR_NONNULL.format(col=c.replace('"', '""')), ds)["n"].iloc[0] > 0]
    if present:
        st.caption("Factors and attributes: " + ", ".join(f"`{c}`" for c in present))
    image_grid(ws, ws.query(queries.SAMPLE_IMAGES, ds, "home", 40))
