"""Values from a link or a workspace shown as literal text: inside Markdown (`literal`,
for every st.* text that Streamlit renders as Markdown: bodies, captions, labels, help,
radio and pill options) and inside Plotly figures (`plain_figure`)."""

from __future__ import annotations

import re

import numpy as np

# CommonMark lets a backslash escape any ASCII punctuation; these are the characters that
# start emphasis, code, links, HTML, tables, headings, and Streamlit's :colour[...],
# :material/icon: and $math$ syntax.
_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-!<>|~:$&])")


def literal(value, limit: int | None = None) -> str:
    """`value` as Markdown source that renders as exactly its text, on one line
    (cut to `limit` characters with an ellipsis)."""
    text = " ".join(str(value).split())
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    return _SPECIAL.sub(r"\\\1", text)


# Plotly draws a subset of HTML in a figure's text (`<b>`, `<a href>`, `<br>`): strings in
# its data are escaped but for the line breaks figures put between the lines of a hover
# (a `<br>` in workspace text breaks a line, nothing more). Templates (`hovertemplate`)
# are the code's own markup and stay. An entity already escaped stays as it is, so
# escaping twice changes nothing.
_MARKUP = re.compile(r"<(?!br>)|(?<!<br)>|&(?!(?:amp|lt|gt|quot|#\d+);)")
_ENTITY = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


# The properties of a trace that hold text it shows (Sankey's node and link, a table's
# header and cells, parallel categories' dimensions hold theirs inside).
_TEXT_KEYS = (
    "x",
    "y",
    "z",
    "text",
    "hovertext",
    "customdata",
    "labels",
    "ids",
    "parents",
    "name",
    "node",
    "link",
    "header",
    "cells",
    "dimensions",
)


def _marked(text: str) -> bool:
    # `in` first: a C scan, where the pattern's look-arounds cost 0.3 s on 50,000 points.
    return ("<" in text or ">" in text or "&" in text) and _MARKUP.search(text) is not None


def _needs(node) -> bool:
    if isinstance(node, str):
        return _marked(node)
    if isinstance(node, dict):
        return any(_needs(v) for k, v in node.items() if not k.endswith("template"))
    if isinstance(node, (list, tuple)):
        return any(_needs(v) for v in node)
    if isinstance(node, np.ndarray) and node.dtype.kind in "OU" and node.size:
        # One search through all the strings (a NUL between them: no match spans two).
        return _marked("\0".join(map(str, node.ravel().tolist())))
    return False


def _plain(node):
    if isinstance(node, str):
        return _MARKUP.sub(lambda m: _ENTITY[m.group(0)], node)
    if isinstance(node, dict):
        return {k: v if k.endswith("template") else _plain(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [_plain(v) for v in node]
    if isinstance(node, np.ndarray) and node.dtype.kind in "OU":
        return np.array([_plain(v) for v in node.tolist()], dtype=object).reshape(node.shape)
    return node


def plain_figure(fig):
    """Plotly figure `fig` with its data (points' text, custom data, categories, legend
    names) and axis categories escaped to show as the text they are, never as HTML.
    Changed in place, only where a string holds markup (a 50,000-point figure without
    any is looked through in milliseconds); returns `fig`."""
    for trace in fig.data:
        for key in _TEXT_KEYS:
            if key not in trace or trace[key] is None:
                continue
            value = trace[key]
            value = value.to_plotly_json() if hasattr(value, "to_plotly_json") else value
            if _needs(value):
                trace[key] = _plain(value)
    for key in fig.layout:
        if key.startswith(("xaxis", "yaxis")):
            for field in ("categoryarray", "ticktext"):
                value = fig.layout[key][field]
                if value is not None and _needs(value):
                    fig.layout[key][field] = _plain(value)
    return fig
