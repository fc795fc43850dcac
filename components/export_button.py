"""An Export control under every figure: PDF/SVG/PNG/HTML at paper sizes, with provenance.

The provenance of a figure (or a table) is the page's own (workspace, dataset, the
figure's parameters) plus what this module adds for every one: the view's URL, the
workspace fingerprint, the ConceptLens version and the date.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode, urlsplit

import streamlit as st

from components import data
from components.text import plain_figure
from conceptlens.figures.catalog import FIGURES, aspect_of, stem
from conceptlens.figures.export import FORMATS, SIZES, figure_bytes
from conceptlens.figures.export import provenance as _provenance


def view_url() -> str:
    """The URL of the view being drawn: this page with the parameters the run leaves."""
    try:
        from components.url_state import current_params  # local: guarded by the except below

        params = current_params()
    except ImportError:  # url_state without pending changes
        params = st.query_params.to_dict()
    raw = st.context.url or ""
    parts = urlsplit(raw)
    base = f"{parts.scheme}://{parts.netloc}{parts.path}" if parts.netloc else parts.path
    return base + ("?" + urlencode(params) if params else "")


def view_provenance(**extra) -> dict:
    """Provenance of what this page shows: workspace label and fingerprint, URL, version, date."""
    ws = data.session_workspace()
    label, fp = (ws.label, ws.fp) if ws is not None else ("", "")
    out = _provenance(label, fp, view_url())
    out.update(extra)
    return out


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "figure"


def export_button(fig, name: str, provenance: dict, key: str, title: str | None = None) -> None:
    """The Export control of `fig` (a figure, or a function building it when downloaded)."""
    prov = {**view_provenance(), **provenance}
    with st.popover("Export figure", icon=":material/download:"):
        fmt = st.selectbox("Format", list(FORMATS), key=f"{key}-fmt")
        size = st.selectbox("Width", list(SIZES), index=1, key=f"{key}-size", disabled=fmt == "html")
        # Rendering runs only when the button is clicked (callable data).
        st.download_button(
            f"Download {fmt.upper()}",
            key=f"{key}-dl",
            data=lambda: figure_bytes(
                fig() if callable(fig) else fig,
                fmt,
                SIZES[size],
                prov,
                aspect=aspect_of(prov.get("figure"), SIZES[size]),
                title=title or name,
            ),
            file_name=f"{slug(name)}.{fmt}",
            mime=FORMATS[fmt],
            on_click="ignore",
        )


def show_figure(fig, name: str, provenance: dict, key: str, title: str | None = None, **kwargs):
    """Plot a figure with its export control; returns the chart's selection state if any.
    Workspace text in it shows as text (`plain_figure`), here and in its exports."""
    fig = plain_figure(fig)
    event = st.plotly_chart(fig, key=key, **kwargs)
    export_button(fig, name, provenance, key, title=title)
    return event


def catalog_figure(ws, name: str, params: dict):
    """The catalogue figure `name` (conceptlens/figures/specs/) drawn by its own `build` with
    the parameters the page's URL chose: what `conceptlens figures` exports is what the page draws."""
    return FIGURES[name].build(ws, params)


def show_catalog_figure(
    ws, name: str, params: dict, provenance: dict, key: str, on_page: dict | None = None, **kwargs
):
    """Draw the catalogue figure `name` with `params` and its export control (file named and
    titled as `conceptlens figures` names it); returns the chart's selection state if any.
    `params` may carry more than the figure's parameters (interactive state such as a
    highlighted cluster is a parameter of its build too). `on_page`: layout of the page's
    chart only (its height, the drag mode), none of it data."""
    spec = FIGURES[name]
    fig = spec.build(ws, params)
    if on_page:
        fig.update_layout(**on_page)
    shown = {p.name: params[p.name] for p in spec.params if params.get(p.name) is not None}
    prov = {**provenance, **shown, "figure": name, **({"on_page": on_page} if on_page else {})}
    return show_figure(fig, stem(spec, shown), prov, key, title=spec.title, **kwargs)


def export_catalog_figure(ws, name: str, params: dict, provenance: dict, key: str) -> None:
    """Only the export control of the catalogue figure `name` (the page draws its data some
    other way, e.g. the WebGL projection view): the figure is built when downloaded, by the
    same `build` as `conceptlens figures`, so the file is what the catalogue exports."""
    spec = FIGURES[name]
    shown = {p.name: params[p.name] for p in spec.params if params.get(p.name) is not None}
    prov = {**provenance, **shown, "figure": name}
    export_button(
        lambda: plain_figure(spec.build(ws, params)), stem(spec, shown), prov, key, title=spec.title
    )
