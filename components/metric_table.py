"""A sortable table with readable number formats."""

from __future__ import annotations

import pandas as pd
import streamlit as st


def metric_table(
    df: pd.DataFrame,
    key: str,
    formats: dict[str, str] | None = None,
    selectable: bool = False,
    height: int | str = "auto",
    **kwargs,
):
    cfg = {}
    for col, fmt in (formats or {}).items():
        if col in df.columns:
            cfg[col] = st.column_config.NumberColumn(format=fmt)
    if selectable:
        return st.dataframe(
            df,
            key=key,
            column_config=cfg,
            hide_index=True,
            height=height,
            on_select="rerun",
            selection_mode="single-row",
            **kwargs,
        )
    return st.dataframe(df, key=key, column_config=cfg, hide_index=True, height=height, **kwargs)
