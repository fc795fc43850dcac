"""Widgets whose value lives in the URL, so a link reopens the same view.

On a session's first run a widget takes its value from `?param=` when that is
one of its options; an unknown value falls back to the default with a warning
(the value shown as literal text).
After each run the current value is written back to `st.query_params`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from components.text import literal


def _match(options: Sequence, raw: str):
    for o in options:
        if str(o) == raw:
            return o, True
    return None, False


def seed_from_url(key: str, param: str, options: Sequence, label: str, default_index: int = 0) -> None:
    """Put the URL's value of `param` into session_state[key] (validated) before the widget.

    Later runs keep the widget's own value, reset to the default when it is no
    longer among the options (e.g. another dataset was chosen).
    """
    options = list(options)
    if not options:
        return
    if key not in st.session_state:
        raw = st.query_params.get(param)
        if raw is not None:
            value, ok = _match(options, raw)
            if ok:
                st.session_state[key] = value
                return
            st.warning(
                f"{label} {literal(raw, limit=80)} from the link is not available here; "
                f"showing {literal(options[default_index])} instead.",
                icon=":material/link_off:",
            )
        st.session_state[key] = options[default_index]
    elif st.session_state[key] not in options:
        st.session_state[key] = options[default_index]


def url_selectbox(
    label: str,
    options: Sequence,
    key: str,
    param: str,
    format_func: Callable[[Any], str] = str,
    default_index: int = 0,
    container=None,
    **kwargs,
):
    """A selectbox synced with `?param=`; returns its value (None without options)."""
    options = list(options)
    seed_from_url(key, param, options, label, default_index)
    box = container if container is not None else st
    value = box.selectbox(label, options, key=key, format_func=format_func, **kwargs)
    set_param(param, value)
    return value


def set_param(param: str, value) -> None:
    """Write one URL parameter (remove it for None), only when it changes."""
    if value is None:
        if param in st.query_params:
            del st.query_params[param]
        return
    if st.query_params.get(param) != str(value):
        st.query_params[param] = str(value)
