"""A sortable table with readable number formats, downloadable as CSV and as LaTeX."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from components.cluster_tables import DASH
from components.export_button import slug, view_provenance
from conceptlens.tables import to_csv, to_latex


def download_table(
    df: pd.DataFrame, key: str, formats: dict[str, str] | None = None, name: str | None = None
):
    """CSV (every column as it is) and LaTeX (booktabs; a value and its interval in one
    cell, `0.62 [0.55, 0.69]`) of `df`, made when a button is clicked."""
    prov = view_provenance(table=name or key)
    stem = slug(name or key)
    with st.popover("Download table", icon=":material/table_view:"):
        st.download_button(
            "CSV",
            key=f"{key}-csv",
            data=lambda: to_csv(df),
            file_name=f"{stem}.csv",
            mime="text/csv",
            on_click="ignore",
        )
        st.download_button(
            "LaTeX (booktabs)",
            key=f"{key}-tex",
            data=lambda: to_latex(df, formats, provenance=prov).encode(),
            file_name=f"{stem}.tex",
            mime="application/x-tex",
            on_click="ignore",
        )


def metric_table(
    df: pd.DataFrame,
    key: str,
    formats: dict[str, str] | None = None,
    selectable: bool = False,
    height: int | str = "auto",
    name: str | None = None,
    **kwargs,
):
    # A missing value is an em dash, as everywhere in the dashboard (Streamlit writes "None").
    kwargs.setdefault("placeholder", DASH)
    cfg = {}
    for col, fmt in (formats or {}).items():
        if col in df.columns:
            cfg[col] = st.column_config.NumberColumn(format=fmt)
    if selectable:
        out = st.dataframe(
            df,
            key=key,
            column_config=cfg,
            hide_index=True,
            height=height,
            on_select="rerun",
            selection_mode="single-row",
            **kwargs,
        )
    else:
        out = st.dataframe(df, key=key, column_config=cfg, hide_index=True, height=height, **kwargs)
    download_table(df, key, formats, name)
    return out
