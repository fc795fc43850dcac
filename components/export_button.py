"""An Export control under every figure: PDF/SVG/PNG/HTML at paper sizes, with provenance."""

from __future__ import annotations

import re

import streamlit as st

from conceptlens.figures.export import FORMATS, SIZES, figure_bytes


def export_button(fig, name: str, provenance: dict, key: str) -> None:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "figure"
    with st.popover("Export figure", icon=":material/download:"):
        fmt = st.selectbox("Format", list(FORMATS), key=f"{key}-fmt")
        size = st.selectbox("Size", list(SIZES), index=1, key=f"{key}-size")
        # Rendering runs only when the button is clicked (callable data).
        st.download_button(
            f"Download {fmt.upper()}",
            key=f"{key}-dl",
            data=lambda: figure_bytes(fig, fmt, SIZES[size], provenance),
            file_name=f"{slug}.{fmt}",
            mime=FORMATS[fmt],
            on_click="ignore",
        )


def show_figure(fig, name: str, provenance: dict, key: str, **kwargs):
    """Plot a figure with its export control; returns the chart's selection state if any."""
    event = st.plotly_chart(fig, key=key, **kwargs)
    export_button(fig, name, provenance, key)
    return event
