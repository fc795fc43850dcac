"""Missing analysis tables: a readable message with the exact command, never a traceback."""
from __future__ import annotations

import streamlit as st

from conceptlens.analyses import ANALYSES, command_for

BY_NAME = {a.name: a for a in ANALYSES}


def missing_tables(ws, name: str) -> list[str]:
    return [t for t in BY_NAME[name].tables if not ws.has(t)]


def analysis_present(ws, name: str, dataset: str = "DATASET", stop: bool = False) -> bool:
    """True when the analysis `name` (see conceptlens.analyses) is in the workspace.

    Otherwise shows an st.info naming the missing tables and the command that
    computes them, and stops the page when `stop`.
    """
    missing = missing_tables(ws, name)
    if not missing:
        return True
    a = BY_NAME[name]
    st.info(f"**{a.title}** not computed yet (missing "
            + ", ".join(f"`{t}.parquet`" for t in missing)
            + "). Compute it with:", icon=":material/pending:")
    st.code(command_for(a, ws.label, dataset or "DATASET"), language="bash")
    if stop:
        st.stop()
    return False


def datasets_clustered_first(ws) -> list[str]:
    """All datasets, those with clusters first, so the default view is never empty when one has them."""
    from conceptlens import queries
    datasets = list(ws.query(queries.DATASETS)["dataset"])
    analysis_present(ws, "clusters", datasets[0] if datasets else "DATASET", stop=True)
    clustered = set(ws.query(queries.CLUSTERED_DATASETS)["dataset"])
    return [d for d in datasets if d in clustered] + [d for d in datasets if d not in clustered]
