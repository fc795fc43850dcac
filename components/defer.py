"""A page's first run in a browser session sends what a reader looks at first (a projection
view, an overview figure) and stops; the rest of the page follows once that is drawn. The
browser parses, lays out and draws every element a run sends before it paints any of them
(a Plotly chart waits for Plotly's bundle, then every chart of the page is drawn in one
go), so a page of tables and figures shows nothing until all of it is ready; sent first,
the one element is drawn alone.

`defer_rest(key)` says whether this run is such a first run (at most once per session and
key; never without a browser: AppTest sends no HTTP headers). The page then sends its first
element and `DEFERRED_NOTE` and stops. The element's first draw reruns the page: the
projection view reports it itself (components/projection.py `report_drawn`), any other
element through `report_when_drawn`, a frame of no height that watches the page for it.
"""

from __future__ import annotations

import functools
from pathlib import Path

import streamlit as st
import streamlit.components.v1 as components

DEFERRED_NOTE = "The table and figures follow once the view is drawn."
FRONTEND = Path(__file__).resolve().parent / "drawn_frontend"
_component = components.declare_component("drawn", path=str(FRONTEND))
# What a Plotly chart looks like once drawn (its SVG root), for `report_when_drawn`.
PLOTLY_DRAWN = '[data-testid="stPlotlyChart"] .main-svg'


def _flag(key: str, what: str) -> str:
    return f"_{key}_{what}"


def defer_rest(key: str) -> bool:
    """Whether this run should send the element `key` (and `DEFERRED_NOTE`) and stop: the
    first run of the page in a browser session, before the element has drawn. At most once
    per session and key; a run with no browser (AppTest, no HTTP headers) never defers, nor
    does any run once the element has drawn or the page was deferred already (a widget
    changed before the element drew reruns the whole page)."""
    state = st.session_state
    if state.get(_flag(key, "drawn")) or state.get(_flag(key, "deferred")) or not st.context.headers:
        return False
    state[_flag(key, "deferred")] = True
    return True


def mark_drawn(key: str) -> None:
    """The element `key` has drawn in this session: no later run defers."""
    st.session_state[_flag(key, "drawn")] = True


def report_when_drawn(key: str, selector: str = PLOTLY_DRAWN, timeout_ms: int = 15_000) -> None:
    """On a run `defer_rest(key)` deferred: rerun the page once the browser shows an element
    matching `selector` (by default a drawn Plotly chart), or after `timeout_ms` (an element
    that cannot draw does not hold the rest back)."""
    _component(
        selector=selector,
        timeout_ms=int(timeout_ms),
        key=f"{key}_drawn_report",
        default=None,
        on_change=functools.partial(mark_drawn, key),
    )
