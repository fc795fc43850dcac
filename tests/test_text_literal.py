"""Workspace text is text (issue 24): label names, captions, checkpoint names and the like
from a workspace are shown literally on every page, never as Markdown, links or HTML."""

import json
import re
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from components import nav
from conceptlens.validate import validate
from tests.conftest import ROOT, copy_ws

# What a workspace may hold in its text: a link, bold, HTML and the end of a script.
LINK, BOLD, HTML, SCRIPT = "[click me](http://x)", "**bold**", "<b>x</b>", "</script>"
# Whole words of the factory workspace's text, each made hostile (label names, factor
# values, captions, checkpoint runs and methods, cluster captions).
HOSTILE = {
    "red": f"{LINK} red",
    "green": f"{BOLD} green",
    "blue": f"{HTML} blue {SCRIPT}",
    "circle": f"{LINK} circle",
    "square": f"{HTML} square",
    "toy-run": f"{HTML} run {LINK} {SCRIPT}",
    "toy-net": f"{BOLD} net",
    "groundtruth": f"{LINK} truth",
}
_WORD = re.compile(r"\b(" + "|".join(map(re.escape, HOSTILE)) + r")\b")


def _hostile(text):
    return None if text is None else _WORD.sub(lambda m: HOSTILE[m.group(1)], text)


def _rewrite(path):
    t = pq.read_table(path)
    for i, name in enumerate(t.column_names):
        col = t[name]
        if pa.types.is_string(col.type):
            t = t.set_column(i, name, pa.array([_hostile(v) for v in col.to_pylist()], col.type))
        elif pa.types.is_list(col.type) and pa.types.is_string(col.type.value_type):
            vals = [None if v is None else [_hostile(s) for s in v] for v in col.to_pylist()]
            t = t.set_column(i, name, pa.array(vals, col.type))
    path.unlink()  # a hard-linked copy: replace, never write through
    pq.write_table(t, path)


def make_hostile(template, root):
    """A copy of the factory workspace `template` at `root` with hostile text in every
    string it shows (also used by tests/test_browser_clusters.py)."""
    root = copy_ws(template, root)
    for path in root.rglob("*.parquet"):
        _rewrite(path)
    names = pq.read_table(root / "images.parquet")["label_name"]
    assert pc.any(pc.match_substring(names, LINK)).as_py()
    assert validate(root, deep=False) == []
    return root


@pytest.fixture(scope="module")
def hostile(factory_template, tmp_path_factory):
    return make_hostile(factory_template, tmp_path_factory.mktemp("hostile") / "ws")


# Fields Streamlit shows as plain text (select box options), not as Markdown.
PLAIN = {
    ("selectbox", "options"),
    ("selectbox", "raw_value"),
    ("multiselect", "options"),
    ("multiselect", "raw_values"),
    ("multiselect", "default"),
}
# Custom components whose frontend sets every string of their arguments as text
# (textContent / createTextNode; components/projection_frontend/src/index.js), never HTML.
TEXT_ONLY = {"components.projection.projection"}
MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
# What hostile text turns into when it is not shown literally.
RENDERED = ('<a href="http://x"', "<strong>bold</strong>", "<b>x</b>", "</script>")


def _strings(msg, path=()):
    """(field path, text) of every string field of a protobuf message, recursively."""
    for field, value in msg.ListFields():
        for v in value if field.is_repeated else [value]:
            if isinstance(v, str):
                yield path + (field.name,), v
            elif hasattr(v, "ListFields"):
                yield from _strings(v, path + (field.name,))


def _elements(node):
    proto = getattr(node, "proto", None)
    if proto is not None:
        yield node.type, proto
    for child in getattr(node, "children", {}).values():
        yield from _elements(child)


def _figure_strings(node, key=""):
    if isinstance(node, str):
        if not key.endswith("template"):  # the code's own markup
            yield key, node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from _figure_strings(v, k)
    elif isinstance(node, list):
        for v in node:
            yield from _figure_strings(v, key)


def not_literal(at) -> list[tuple[str, str, str]]:
    """(element, field, text) of every hostile string a page would render as Markdown,
    a link or HTML: Markdown fields rendered as CommonMark, figures' text as Plotly's HTML."""
    bad, seen = [], 0
    for kind, proto in _elements(at._tree):
        for path, text in _strings(proto):
            field = ".".join(path)
            if "click me" not in text and "<b>" not in text:
                continue
            seen += 1
            if (kind, field) in PLAIN:
                continue
            if kind == "component_instance" and field == "json_args" and proto.component_name in TEXT_ONLY:
                continue
            if kind == "plotly_chart" and field == "spec":
                for key, s in _figure_strings(json.loads(text)):
                    if re.search(r"<(?!br>)[a-z/]", s):  # a tag Plotly would draw (line breaks aside)
                        bad.append((kind, key, s))
            elif kind == "iframe":
                bad.append((kind, field, text))  # an HTML component: no workspace text at all
            elif any(r in MD.render(text) for r in RENDERED):
                bad.append((kind, field, text))
    assert seen, "the page showed no workspace text: the test would not see a bug"
    return bad


@pytest.mark.parametrize("spec", nav.PAGES, ids=lambda s: s.name)
def test_workspace_text_is_shown_literally(hostile, monkeypatch, spec):
    monkeypatch.setattr(sys, "argv", ["app.py", "--workspace", str(hostile)])
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    # The owner, signed in: the Studies page shows its studies' workspace text only to them.
    monkeypatch.setenv("CONCEPTLENS_OWNER_SECRET", "owner-secret-of-test-text")
    at.session_state["_owner_secret"] = "owner-secret-of-test-text"
    at.switch_page(spec.path).run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    bad = not_literal(at)
    assert not bad, bad
