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
# are the code's own markup and stay.
_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def _plain(node):
    if isinstance(node, str):
        return node.translate(_HTML).replace("&lt;br&gt;", "<br>")
    if isinstance(node, dict):
        return {k: v if k.endswith("template") else _plain(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [_plain(v) for v in node]
    if isinstance(node, np.ndarray) and node.dtype.kind in "OU":
        return np.array([_plain(v) for v in node.tolist()], dtype=object).reshape(node.shape)
    return node


def plain_figure(fig):
    """A copy of Plotly figure `fig` whose data (points' text, custom data, categories,
    legend names) and axis categories show as the text they are, never as HTML."""
    import plotly.graph_objects as go

    d = fig.to_dict()
    d["data"] = [_plain(t) for t in d.get("data", [])]
    for key, axis in d.get("layout", {}).items():
        if isinstance(axis, dict) and key.startswith(("xaxis", "yaxis")):
            for field in ("categoryarray", "ticktext"):
                if field in axis:
                    axis[field] = _plain(axis[field])
    return go.Figure(d)
