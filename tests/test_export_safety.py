"""Exports are safe (issue 29, item 3): a value from the workspace embedded in an HTML
export (the report, a figure exported as HTML) is escaped, so `</script><script>...` in a
provenance field, a label name or a caption cannot close the element it is in and start
a script of its own; exported files get the mode of any file the user creates (0644 under
umask 022), not a temporary file's 0600."""

from __future__ import annotations

import json
import os
import stat
from html.parser import HTMLParser

import plotly.graph_objects as go
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from conceptlens.cli import main
from conceptlens.figures import export as E
from conceptlens.workspace import Workspace
from tests.conftest import copy_ws

EVIL = "</script><script>alert(1)</script>"


class Scripts(HTMLParser):
    """The <script> elements of a page (their attributes) and the text outside them."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.scripts: list[dict] = []
        self.text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self.scripts.append(dict(attrs))
            self._in_script = True

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if not self._in_script:
            self.text.append(data)


def parse(page: str) -> Scripts:
    p = Scripts()
    p.feed(page)
    p.close()
    return p


def _poison(root, text: str) -> None:
    """`text` in the workspace's name and description, in every label name and cluster caption."""
    ws = Workspace(root)
    meta = json.loads(ws.meta_path.read_text())
    meta["name"] = f"ws {text}"
    meta["description"] = f"about {text}"
    ws.meta_path.unlink()  # a hard link to the template's file: replace it, never write into it
    ws.meta_path.write_text(json.dumps(meta))
    images = ws.read("images")
    i = images.schema.get_field_index("label_name")
    ws.write(
        "images",
        images.set_column(i, "label_name", pc.binary_join_element_wise(images["label_name"], text, "")),
    )
    for p in ws.partitions("cluster_captions"):
        t = ws.read("cluster_captions", **p)
        md = ws.read_metadata("cluster_captions", **p)
        t = t.drop_columns([c for c in p if c in t.column_names])
        j = t.schema.get_field_index("caption")
        t = t.set_column(j, "caption", pc.binary_join_element_wise(t["caption"], pa.scalar(text), ""))
        ws.write("cluster_captions", t, metadata=md or None, **p)


def _report(root, out) -> str:
    assert main(["report", "--workspace", str(root), "--out", str(out), "--quiet"]) == 0
    return out.read_text()


@pytest.fixture(scope="module")
def reports(factory_template, tmp_path_factory):
    """The report of the factory workspace, and of a copy whose name, description, label
    names and cluster captions carry a script-closing payload."""
    d = tmp_path_factory.mktemp("safety")
    clean = _report(factory_template, d / "clean.html")
    root = copy_ws(factory_template, d / "ws")
    _poison(root, EVIL)
    return clean, _report(root, d / "evil.html"), d / "evil.html"


def test_report_escapes_workspace_name_labels_and_captions(reports):
    """Catches a value inlined raw into the report's HTML (an `html.escape` dropped around
    the name, a caption or a thumbnail's label, or the `</` of the provenance JSON left as
    is): the payload then adds <script> elements the clean report does not have."""
    clean, evil, _ = reports
    a, b = parse(clean), parse(evil)
    assert b.scripts == a.scripts, "a value from the workspace opened a <script> element"
    text = "".join(b.text)
    # Shown as text where it is shown: the name (title, h1), the description, labels, captions.
    assert text.count(EVIL) >= 4, text.count(EVIL)
    assert f"about {EVIL}" in text and f"ws {EVIL}" in text
    assert EVIL not in evil  # never raw in the file, not even inside JSON


def test_report_provenance_json_round_trips_the_value(reports):
    """The provenance script holds the workspace's values as JSON that parses back to them
    (escaping `</` as `<\\/` keeps the JSON valid)."""
    _, evil, path = reports
    start = evil.index('id="conceptlens-provenance">') + len('id="conceptlens-provenance">')
    prov = json.loads(evil[start : evil.index("</script>", start)])
    assert prov["workspace"] == str(path.parent / "ws")


def test_report_file_mode_is_0644_under_umask_022(reports):
    """Catches the report left with the temporary file's private 0600 mode."""
    _, _, path = reports
    old = os.umask(0o022)
    os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~old
    if old == 0o022:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_html_figure_export_escapes_provenance_title_label_and_caption():
    """Catches the provenance JSON or the title inlined raw into an HTML figure, and a
    trace name (label) or a figure title (caption) breaking out of plotly's script."""

    def fig(text):
        f = go.Figure(go.Scatter(x=[0, 1], y=[1, 0], name=f"label {text}", text=[text, text]))
        return f.update_layout(title=f"caption {text}", showlegend=True)

    def page(text):
        prov = E.provenance(f"ws {text}", "abc", f"?ds={text}", figure=f"umap {text}")
        return E.figure_bytes(fig(text), "html", provenance=prov, title=f"title {text}").decode()

    clean, evil = page("plain"), page(EVIL)
    a, b = parse(clean), parse(evil)
    assert b.scripts == a.scripts, "a value opened a <script> element"
    assert f"title {EVIL}" in "".join(b.text)
    assert EVIL not in evil
    got = E.read_provenance(evil.encode(), "html")
    assert got["workspace"] == f"ws {EVIL}" and got["url"] == f"?ds={EVIL}"


@pytest.mark.parametrize("fmt", ["html", "svg"])
def test_figures_cli_files_are_0644(factory_template, tmp_path, fmt):
    """`conceptlens figures` in another format than the html of tests/test_export.py:
    every file (figure and manifest) has the default mode, not 0600."""
    if fmt == "svg":
        pytest.importorskip("kaleido")
    spec = tmp_path / "figures.toml"
    spec.write_text(f'formats = ["{fmt}"]\n[[figure]]\nfigure = "umap"\npage = "clusters"\n')
    out = tmp_path / "out"
    old = os.umask(0o022)
    try:
        args = ["figures", "--workspace", str(factory_template), "--out", str(out), "--spec", str(spec)]
        assert main([*args, "--quiet"]) == 0
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert len(modes) == 2 and set(modes.values()) == {0o644}, modes
