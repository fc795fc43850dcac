"""Values from a link or a workspace shown as literal text inside Markdown."""

from __future__ import annotations

import re

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
