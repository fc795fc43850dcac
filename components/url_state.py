"""Widgets whose value lives in the URL, so a link reopens the same view and the browser's
Back and Forward buttons step through the views a user saw.

Which value a widget shows:
- the first time it is drawn in a session (a link was opened), the URL's `?param=`,
  when it is valid (otherwise a warning, with the value as literal text, and the default);
- when it is drawn again after the user was on another page, what it showed last
  (the page's URL parameters are gone then);
- on Back or Forward, the URL's value, or the default when the URL has none (as
  Streamlit's own `bind="query-params"` does);
- otherwise, the widget's own value (the user's latest choice wins over the URL).

Each run collects the parameters it writes and `flush` (called by app.py after the page)
sends them in one message, so one user action is one browser-history entry (Streamlit
pushes an entry per URL change it is sent). A value equal to its default is left out of
the URL (docs/dashboard.md), which keeps links short; a link that names it keeps it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from components.text import literal

_MEMORY = "_url_memory"  # widget key -> last value, kept across page switches
_PENDING = "_url_pending"  # param -> str (write) or None (remove), this run's changes
_LABELS = "_url_labels"  # widget key -> the option labels it was last drawn with
_WARNED = "_url_warned"  # widget key -> (label, raw, shown): this run's warnings about the link
_CARRY = "_url_carry"  # the same, from a run that stopped before the page was whole
MAX_TEXT = 200  # characters of free text taken from a link


def navigating() -> bool:
    """True while the run answers the browser's Back or Forward button."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx  # local: Streamlit's internals, guarded
    except ImportError:  # pragma: no cover - Streamlit moved it
        return False
    ctx = get_script_run_ctx()
    return bool(ctx is not None and getattr(ctx, "is_history_navigation", False))


class _Nowhere:
    """A container that draws nothing: a `url_*` widget put in it restores its value (the
    link's, or the session's) and writes it to the URL as usual, without the widget. For a
    run that stops before the widget's part of the page is drawn (the Clusters page's
    view-first run needs the table's filters and chosen cluster, not their widgets)."""

    def __getattr__(self, widget: str):
        def value(*args, key: str, **kwargs):
            return st.session_state[key]

        return value


NOWHERE = _Nowhere()


def _memory() -> dict:
    return st.session_state.setdefault(_MEMORY, {})


def _warn(label: str, raw: str, shown, key: str | None = None) -> None:
    if key is not None:
        st.session_state.setdefault(_WARNED, {})[key] = (label, raw, shown)
    st.warning(
        f"{label} {literal(raw, limit=80)} from the link is not available here; "
        f"showing {literal(shown, limit=80)} instead.",
        icon=":material/link_off:",
    )


def restore(
    key: str,
    param: str,
    default,
    parse: Callable[[str], Any],
    label: str,
    valid: Callable[[Any], bool] = lambda v: True,
) -> None:
    """Put the value this run should show into `session_state[key]`, before the widget
    is drawn (or before a `url_value` is read).

    `parse(raw)` turns a URL value into a value or raises ValueError; `valid(value)`
    says whether a value is still allowed (e.g. among the current options).
    """
    state = st.session_state
    fresh = key not in state
    carried = state.get(_CARRY, {}).pop(key, None)
    if carried is not None and not fresh and not navigating():
        # The run that read the link stopped before the page was whole (`stop(carry=True)`);
        # its warning is shown again on the run that completes the page.
        _warn(*carried, key)
    if fresh or navigating():
        raw = st.query_params.get(param)
        if raw is not None:
            try:
                value = parse(raw)
                ok = bool(valid(value))
            except (ValueError, TypeError):
                ok = False
            if not ok:
                _warn(label, raw, default, key)
            state[key] = value if ok else default
        elif fresh and key in _memory() and valid(_memory()[key]):
            state[key] = _memory()[key]
        else:
            # Back or Forward to an entry without the parameter asks for the default.
            state[key] = default
    elif not valid(state[key]):
        state[key] = default


def publish(key: str, param: str, value, encode: Callable[[Any], str] = str, default=None, omit=False):
    """Remember `value` for `key` and write it to `?param=` (removed when it is None, or
    equal to `default` with `omit`, unless the link says it already: a link is not
    rewritten under its reader)."""
    _memory()[key] = value
    if value is None or (omit and value == default and st.query_params.get(param) != encode(value)):
        set_param(param, None)
    else:
        set_param(param, encode(value))
    return value


def _match(options: Sequence, raw: str):
    for o in options:
        if str(o) == raw:
            return o
    raise ValueError(raw)


def _refresh_labels(key: str, labels: list[str]) -> None:
    """Streamlit keeps a keyed widget's label on screen when only the option labels
    change (the options of another checkpoint): assigning the value again redraws it."""
    seen = st.session_state.setdefault(_LABELS, {})
    if seen.get(key) not in (None, labels) and key in st.session_state:
        st.session_state[key] = st.session_state[key]
    seen[key] = labels


def _url_choice(widget: str, label, options, key, param, format_func, default_index, container, omit, kwargs):
    """A one-of-options widget (`selectbox` or `radio`) synced with `?param=`."""
    options = list(options)
    if not options:
        set_param(param, None)
        return None
    default = options[min(default_index, len(options) - 1)]
    restore(key, param, default, lambda raw: _match(options, raw), label, lambda v: v in options)
    _refresh_labels(key, [format_func(o) for o in options])
    box = container if container is not None else st
    value = getattr(box, widget)(label, options, key=key, format_func=format_func, **kwargs)
    return publish(key, param, value, default=default, omit=omit)


def url_selectbox(
    label: str,
    options: Sequence,
    key: str,
    param: str,
    format_func: Callable[[Any], str] = str,
    default_index: int = 0,
    container=None,
    omit_default: bool = True,
    **kwargs,
):
    """A selectbox synced with `?param=`; returns its value (None without options)."""
    return _url_choice(
        "selectbox", label, options, key, param, format_func, default_index, container, omit_default, kwargs
    )


def url_radio(
    label: str,
    options: Sequence,
    key: str,
    param: str,
    format_func: Callable[[Any], str] = str,
    default_index: int = 0,
    container=None,
    omit_default: bool = True,
    **kwargs,
):
    """A radio synced with `?param=`; returns its value (None without options)."""
    return _url_choice(
        "radio", label, options, key, param, format_func, default_index, container, omit_default, kwargs
    )


def url_select_slider(
    label: str,
    options: Sequence,
    key: str,
    param: str,
    format_func: Callable[[Any], str] = str,
    default_index: int = 0,
    container=None,
    omit_default: bool = True,
    **kwargs,
):
    """A select_slider (one of `options`, e.g. the epochs of a run) synced with `?param=`."""
    return _url_choice(
        "select_slider",
        label,
        options,
        key,
        param,
        format_func,
        default_index,
        container,
        omit_default,
        kwargs,
    )


def url_multiselect(
    label: str,
    options: Sequence,
    key: str,
    param: str,
    default: Sequence | None = None,
    format_func: Callable[[Any], str] = str,
    container=None,
    **kwargs,
) -> list:
    """A multiselect synced with `?param=a,b,c` (option strings must not hold commas)."""
    options = list(options)
    default = [o for o in (options if default is None else default) if o in options]

    def parse(raw: str) -> list:
        return [_match(options, part) for part in raw.split(",") if part]

    restore(key, param, default, parse, label, lambda v: all(o in options for o in v))
    box = container if container is not None else st
    value = list(box.multiselect(label, options, key=key, format_func=format_func, **kwargs))
    # Kept in the options' order, so one choice has one URL.
    value = [o for o in options if o in value]
    return publish(key, param, value, lambda v: ",".join(map(str, v)), default=default, omit=True)


def _number(raw: str, kind: type):
    value = kind(raw)
    if kind is float and value != value:
        raise ValueError(raw)
    return value


def url_slider(
    label: str,
    min_value: float,
    max_value: float,
    key: str,
    param: str,
    default,
    step: float,
    container=None,
    **kwargs,
):
    """A slider synced with `?param=` (a range slider, `lo,hi`, when `default` is a pair)."""
    kind = type(step)
    pair = isinstance(default, (tuple, list))

    def inside(v) -> bool:
        vals = v if pair else (v,)
        return all(min_value <= x <= max_value for x in vals) and (not pair or v[0] <= v[1])

    def parse(raw: str):
        if pair:
            lo, hi = raw.split(",")
            return (_number(lo, kind), _number(hi, kind))
        return _number(raw, kind)

    default = tuple(default) if pair else default
    restore(key, param, default, parse, label, inside)
    box = container if container is not None else st
    value = box.slider(label, min_value, max_value, key=key, step=step, **kwargs)
    value = tuple(value) if pair else value
    return publish(
        key, param, value, lambda v: ",".join(f"{x:g}" for x in v) if pair else f"{v:g}", default, omit=True
    )


def url_number(
    label: str,
    key: str,
    param: str,
    default: int = 0,
    min_value: int | None = None,
    max_value: int | None = None,
    step: int = 1,
    container=None,
    **kwargs,
) -> int:
    """An integer input synced with `?param=`."""

    def inside(v) -> bool:
        return (min_value is None or v >= min_value) and (max_value is None or v <= max_value)

    restore(key, param, default, lambda raw: _number(raw, int), label, inside)
    box = container if container is not None else st
    value = box.number_input(label, min_value=min_value, max_value=max_value, step=step, key=key, **kwargs)
    return publish(key, param, int(value), default=default, omit=True)


def url_text(label: str, key: str, param: str, default: str = "", container=None, **kwargs) -> str:
    """A text input synced with `?param=` (at most MAX_TEXT characters from a link)."""
    restore(key, param, default, lambda raw: raw[:MAX_TEXT], label)
    box = container if container is not None else st
    value = box.text_input(label, key=key, **kwargs)
    return publish(key, param, value, default=default, omit=True)


def url_toggle(label: str, key: str, param: str, default: bool = False, container=None, **kwargs) -> bool:
    """A toggle synced with `?param=1` / `?param=0`."""

    def parse(raw: str) -> bool:
        if raw not in ("0", "1"):
            raise ValueError(raw)
        return raw == "1"

    restore(key, param, default, parse, label)
    box = container if container is not None else st
    value = bool(box.toggle(label, key=key, **kwargs))
    return publish(key, param, value, lambda v: "1" if v else "0", default, omit=True)


def url_pagination(num_pages: int, key: str, param: str, container=None, **kwargs) -> int:
    """Page buttons (1-based) synced with `?param=`."""
    num_pages = max(1, int(num_pages))
    restore(key, param, 1, lambda raw: _number(raw, int), "Page", lambda v: 1 <= v <= num_pages)
    box = container if container is not None else st
    value = int(box.pagination(num_pages, key=key, **kwargs))
    return publish(key, param, value, default=1, omit=True)


def url_value(
    key: str,
    param: str,
    parse: Callable[[str], Any],
    default=None,
    label: str = "Value",
    valid: Callable[[Any], bool] = lambda v: True,
    encode: Callable[[Any], str] = str,
):
    """A value that is no widget (a region drawn on a figure, the image being looked
    at) kept in `session_state[key]` and `?param=`; a callback changes it by assigning
    `session_state[key]` (None removes it from the URL)."""
    restore(key, param, default, parse, label, lambda v: v is None or valid(v))
    return publish(key, param, st.session_state[key], encode, default, omit=True)


def set_param(param: str, value) -> None:
    """Write one URL parameter (remove it for None); sent by `flush` at the end of the run."""
    st.session_state.setdefault(_PENDING, {})[param] = None if value is None else str(value)


def flush() -> None:
    """Send this run's URL changes in one message (one history entry)."""
    st.session_state.pop(_WARNED, None)
    st.session_state.pop(_CARRY, None)
    if not st.session_state.get(_PENDING):
        return
    new = current_params()
    del st.session_state[_PENDING]
    if new != st.query_params.to_dict():
        st.query_params.from_dict(new)


def stop(carry: bool = False) -> None:
    """st.stop() after sending this run's URL changes: once a stop is requested, Streamlit
    drops what the run sends next, so app.py's flush would lose them (a page that stops
    early, e.g. A = B on Checkpoints, left the old choice in the URL). `carry`: the page
    is whole only on the next run (components/defer.py `defer_rest`), which shows
    this run's warnings about the link again (otherwise they would vanish with it)."""
    warned = dict(st.session_state.get(_WARNED, {}))
    flush()
    if carry and warned:
        st.session_state[_CARRY] = warned
    st.stop()


def current_params() -> dict[str, str]:
    """The URL's parameters as this run will leave them (its pending changes applied):
    what a link or an export's provenance should say."""
    params = st.query_params.to_dict()
    for param, value in st.session_state.get(_PENDING, {}).items():
        if value is None:
            params.pop(param, None)
        else:
            params[param] = value
    return params
