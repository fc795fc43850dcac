"""Figure and table export for papers (issue 13; issue 8 bugs 7 and 8): provenance in every
format, a self-contained HTML file, vector PDFs with embedded fonts, paper sizes with type
no smaller than 7 pt, LaTeX tables with intervals as papers print them, and the copy-link
control of every page."""

import base64
import io
import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from PIL import Image
from pypdf import PdfReader

from conceptlens import __version__
from conceptlens.errors import ConceptLensError
from conceptlens.figures import export as E
from conceptlens.figures.theme import MIN_FONT_PX, TEMPLATE
from conceptlens.tables import cells, find_intervals, to_csv, to_latex
from conceptlens.workspace import Workspace

PROV = E.provenance("data/demo", "0123456789abcdef", "/clusters?ds=shapes&ckpt=c&k=5", figure="umap", k=5)


def scatter(n=3000, gl=True) -> go.Figure:
    rng = np.random.default_rng(0)
    cls = go.Scattergl if gl else go.Scatter
    fig = go.Figure(cls(x=rng.normal(size=n), y=rng.normal(size=n), mode="markers", name="points"))
    return fig.update_layout(template=TEMPLATE, title="scatter", xaxis_title="x", yaxis_title="y")


def values(arr) -> np.ndarray:
    """A trace's numbers, decoded when plotly keeps them as a typed array."""
    if isinstance(arr, dict):
        return np.frombuffer(base64.b64decode(arr["bdata"]), dtype=arr["dtype"])
    return np.asarray(arr)


def svg_font_sizes(svg: str) -> list[float]:
    return [float(v) for v in re.findall(r"font-size:\s*([\d.]+)px", svg)]


# ---- provenance in every format (bug 8 for PDF) --------------------------------------------------------
@pytest.fixture(scope="module")
def exported():
    fig = scatter(400)
    with E.renderer():
        return {fmt: E.figure_bytes(fig, fmt, 3.5, PROV, aspect=0.75, title="UMAP") for fmt in E.FORMATS}


@pytest.mark.parametrize("fmt", list(E.FORMATS))
def test_every_format_carries_the_provenance(exported, fmt):
    got = E.read_provenance(exported[fmt], fmt)
    assert got == json.loads(json.dumps(PROV))
    for key in ("fingerprint", "url", "conceptlens_version", "date", "workspace"):
        assert got[key], key
    assert got["conceptlens_version"] == __version__


def test_pdf_metadata_is_conceptlens_not_kaleido(exported):
    reader = PdfReader(io.BytesIO(exported["pdf"]))
    info = reader.metadata
    assert info["/Title"] == "UMAP"  # kaleido's page title was "Kaleido-fier"
    assert info["/Subject"] == PROV["url"]
    assert "0123456789abcdef" in info["/Keywords"]
    assert info["/Creator"] == f"ConceptLens {__version__}"
    xmp = reader.xmp_metadata
    assert xmp is not None and xmp.dc_title["x-default"] == "UMAP"
    assert json.loads(xmp.dc_description["x-default"])["url"] == PROV["url"]


def test_pdf_fonts_are_embedded(exported):
    fonts = E.inspect_pdf(exported["pdf"])["fonts"]
    assert fonts, "the figure's text was drawn without fonts"
    assert all(embedded for _, embedded in fonts), fonts


def test_paper_widths(exported):
    # PNG at 3x: 3.5 in x 96 px x 3; PDF page: 3.5 in x 72 pt, height = aspect x width.
    png = Image.open(io.BytesIO(exported["png"]))
    assert png.size == (round(3.5 * 96) * 3, round(3.5 * 96 * 0.75) * 3)
    box = PdfReader(io.BytesIO(exported["pdf"])).pages[0].mediabox
    assert float(box.width) == pytest.approx(3.5 * 72, abs=1)
    assert float(box.height) == pytest.approx(3.5 * 72 * 0.75, abs=1)


# ---- bug 7: the HTML export works offline ------------------------------------------------------------
def test_html_export_is_self_contained(exported):
    page = exported["html"].decode()
    assert not re.search(r"<script[^>]+src=", page), "a script is loaded from elsewhere"
    assert "cdn.plot.ly" not in re.sub(r"<script>.*?</script>", "", page, flags=re.S)
    assert len(page) > 3_000_000, "plotly.js is not inlined"
    assert "<title>UMAP</title>" in page


@pytest.mark.browser
def test_html_export_draws_offline(exported, browser, tmp_path):
    path = tmp_path / "figure.html"
    path.write_bytes(exported["html"])
    ctx = browser.new_context(offline=True)
    outside = []
    ctx.route(
        "**/*",
        lambda route: (
            route.continue_()
            if route.request.url.startswith(("file:", "data:"))
            else (outside.append(route.request.url), route.abort())
        ),
    )
    page = ctx.new_page()
    page.goto(path.as_uri())
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
    assert page.evaluate("typeof Plotly") == "object"
    assert page.locator(".js-plotly-plot .scatterlayer .point, .js-plotly-plot canvas").count() > 0
    assert outside == []
    ctx.close()


# ---- vector output --------------------------------------------------------------------------------------
def test_scatter_pdf_has_no_raster_image():
    fig = scatter(3000, gl=True)
    with E.renderer():
        vector = E.figure_bytes(fig, "pdf", 3.5, PROV)
        # The same WebGL figure rendered as it is: the canvas becomes an image in the PDF.
        raw = E._render(fig.update_layout(width=336, height=250), "pdf", 1)
    assert E.inspect_pdf(vector)["images"] == 0
    assert E.inspect_pdf(raw)["images"] >= 1, "the inspector cannot see images: the check above is void"


def test_paper_figure_draws_webgl_as_svg_and_keeps_the_data():
    fig = scatter(50, gl=True)
    out = E.paper_figure(fig, 7.0)
    assert [t.type for t in out.data] == ["scatter"]
    np.testing.assert_array_equal(values(out.data[0].x), fig.data[0].x)
    assert out.layout.width == 672 and out.layout.height == round(672 * E.DEFAULT_ASPECT)
    assert fig.data[0].type == "scattergl", "the page's figure must not change"


# ---- type size ---------------------------------------------------------------------------------------------
def test_small_type_is_raised_to_the_minimum():
    fig = go.Figure(
        go.Bar(x=["a", "b"], y=[1, 2], text=["1", "2"], textfont=dict(size=[4, 14])),
        layout=dict(template=TEMPLATE, xaxis=dict(tickfont=dict(size=6)), legend=dict(font=dict(size=7))),
    )
    fig.add_annotation(text="note", font=dict(size=5), x=0, y=1)
    out = E.paper_figure(fig, 3.5)
    assert out.layout.xaxis.tickfont.size == MIN_FONT_PX
    assert out.layout.legend.font.size == MIN_FONT_PX
    assert out.layout.annotations[0].font.size == MIN_FONT_PX
    assert list(out.data[0].textfont.size) == [MIN_FONT_PX, 14]  # larger type is kept


def test_rendered_svg_has_no_type_below_7pt():
    fig = scatter(20, gl=False).update_layout(xaxis=dict(tickfont=dict(size=6)), font=dict(size=8))
    fig.add_annotation(text="tiny", font=dict(size=4), x=0, y=0)
    svg = E.figure_bytes(fig, "svg", 3.5, PROV).decode()
    sizes = svg_font_sizes(svg)
    assert sizes and min(sizes) >= MIN_FONT_PX  # 10 px at 96 dpi = 7.5 pt


def test_crowded_category_axis_labels_every_nth_along_the_bottom():
    cats = [f"label {i:02d}" for i in range(60)]
    fig = go.Figure(go.Heatmap(z=np.zeros((3, 60)), x=cats, y=["a", "b", "c"]))
    narrow = E.paper_figure(fig, 3.5, aspect=1.0)
    vals = list(narrow.layout.xaxis.tickvals)
    step = cats.index(vals[1]) - cats.index(vals[0])
    # Each shown label gets at least 1.25 x the type size of the plot's assumed 60% width.
    assert step * (336 * 0.6 / 60) >= MIN_FONT_PX * 1.25
    assert vals[0] == cats[0] and set(vals) < set(cats)
    assert narrow.layout.yaxis.tickvals is None  # three labels fit
    wide = E.paper_figure(fig, 20.0, aspect=1.0)
    assert wide.layout.xaxis.tickvals is None


def test_rows_up_the_side_each_keep_their_label_and_the_figure_grows_for_them():
    def rows(n):
        cats = [f"label {i:02d}" for i in range(n)]
        return cats, go.Figure(go.Heatmap(z=np.zeros((n, 3)), y=cats, x=["a", "b", "c"]))

    cats, fig = rows(30)
    narrow = E.paper_figure(fig, 3.5, aspect=1.0)
    assert narrow.layout.yaxis.tickvals is None and narrow.layout.yaxis.dtick == 1
    # 30 rows of ROW_EM x 10 px type, plus the margins (Plotly's 100 + 80 by default).
    assert narrow.layout.height >= 30 * E.ROW_EM * MIN_FONT_PX + 180
    few = go.Figure(go.Heatmap(z=np.zeros((3, 3)), y=["a", "b", "c"], x=["a", "b", "c"]))
    assert E.paper_figure(few, 3.5, aspect=1.0).layout.height == 336  # room enough
    # 60 rows would need a figure three times as tall as wide: it stops at twice, and
    # labels every other row.
    cats, fig = rows(60)
    narrow = E.paper_figure(fig, 3.5, aspect=1.0)
    assert narrow.layout.height == 2 * 336
    assert list(narrow.layout.yaxis.tickvals) == cats[::2]


def _lines_figure(names, titles):
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=len(titles), subplot_titles=titles)
    for c in range(1, len(titles) + 1):
        for n in names:
            fig.add_trace(
                go.Scatter(x=[0, 1], y=[0, 1], name=n, legendgroup=n, showlegend=c == 1), row=1, col=c
            )
    fig.update_layout(
        template=TEMPLATE, legend=dict(orientation="h", yanchor="bottom", y=1.1, x=0), margin=dict(t=60)
    )
    return fig


def test_a_legend_that_wraps_at_one_column_gets_its_own_room_and_the_plots_keep_theirs():
    fig = _lines_figure([f"method number {i}" for i in range(6)], ["left panel", "right panel"])
    narrow = E.paper_figure(fig, 3.5, aspect=0.5)
    grown = narrow.layout.height - round(336 * 0.5)
    # The figure grows by what the top margin grows: the plots stay 336 x 0.5 minus margins.
    assert grown > 0 and narrow.layout.margin.t - 60 == grown
    assert narrow.layout.legend.yref == "container" and narrow.layout.legend.yanchor == "top"
    # Six entries of ~95 px do not fit one row of ~280 px: at least three rows of type.
    assert narrow.layout.margin.t >= 3 * MIN_FONT_PX * 1.5
    # Two short entries at two columns: one row, nothing to move.
    wide = E.paper_figure(_lines_figure(["a", "b"], ["left", "right"]), 7.0, aspect=0.5)
    assert wide.layout.height == round(672 * 0.5) and wide.layout.margin.t == 60
    # The figure itself is not changed.
    assert fig.layout.legend.yref is None and fig.layout.height is None


def test_subplot_titles_wider_than_their_subplot_are_wrapped():
    fig = _lines_figure(["a"], ["niche impurity (AUC) of concepts", "size", "purity"])
    narrow = E.paper_figure(fig, 3.5)
    texts = [a.text for a in narrow.layout.annotations]
    assert "<br>" in texts[0] and texts[0].replace("<br>", " ") == "niche impurity (AUC) of concepts"
    assert texts[1:] == ["size", "purity"]
    assert all("<br>" not in a.text for a in E.paper_figure(fig, 14.0).layout.annotations)


def test_heatmap_values_and_level_labels_that_overflow_are_dropped_or_turned():
    names = [f"a long label number {i}" for i in range(8)]
    fig = go.Figure(
        go.Heatmap(
            z=np.ones((3, 8)),
            x=names,
            y=["p", "q", "r"],
            text=np.full((3, 8), "0.123"),
            texttemplate="%{text}",
        )
    )
    fig.update_xaxes(tickangle=0)
    narrow = E.paper_figure(fig, 3.5)
    assert narrow.data[0].text is None and narrow.layout.xaxis.tickangle == -90
    wide = E.paper_figure(go.Figure(fig).update_xaxes(tickangle=0), 40.0)
    assert wide.data[0].texttemplate == "%{text}" and wide.layout.xaxis.tickangle == 0
    # A slant the figure chose is kept where slanted labels have room.
    few = go.Figure(go.Heatmap(z=np.ones((1, 3)), x=names[:3], y=["p"])).update_xaxes(tickangle=-30)
    assert E.paper_figure(few, 3.5).layout.xaxis.tickangle == -30


@pytest.mark.parametrize(
    "value,inches", [("single", 3.5), ("double", 7.0), ("5", 5.0), ("4.25in", 4.25), (6, 6.0)]
)
def test_parse_width(value, inches):
    assert E.parse_width(value) == inches


@pytest.mark.parametrize("value", ["triple", "0.2", "-3", ""])
def test_parse_width_names_the_bad_value(value):
    with pytest.raises(ConceptLensError, match="width"):
        E.parse_width(value)


def test_unknown_format_is_refused():
    with pytest.raises(ConceptLensError, match="eps"):
        E.figure_bytes(scatter(5), "eps")


# ---- tables ---------------------------------------------------------------------------------------------
def table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "checkpoint_id": ["simclr_e50", "pca & 50%"],
            "knn_acc": [0.6213, np.nan],
            "knn_acc_lo": [0.5512, np.nan],
            "knn_acc_hi": [0.6934, np.nan],
            "Pearson r": [0.41, -0.2],
            "r 95% CI": ["[0.12, 0.64]", None],
            "n": [24, 7],
            "method": ["SimCLR", "τ-test"],
        }
    )


def test_intervals_are_found_in_each_shape():
    assert find_intervals(table()) == {"knn_acc": ("knn_acc_lo", "knn_acc_hi"), "Pearson r": ("r 95% CI",)}
    long = pd.DataFrame({"label": ["a"], "value": [0.5], "lo": [0.4], "hi": [0.6]})
    assert find_intervals(long) == {"value": ("lo", "hi")}


def test_cells_print_value_and_interval_as_papers_do():
    cols, numeric, rows = cells(table(), {"knn_acc": "%.2f", "Pearson r": "%.2f"})
    assert cols == ["checkpoint_id", "knn_acc", "Pearson r", "n", "method"]
    assert numeric == [False, True, True, True, False]
    assert rows[0] == ["simclr_e50", "0.62 [0.55, 0.69]", "0.41 [0.12, 0.64]", "24", "SimCLR"]
    assert rows[1][1:4] == ["--", "-0.20", "7"]


def _strip_escaped(tex: str) -> str:
    return re.sub(r"\\[{}&%$#_]", "", tex)


def test_latex_is_a_balanced_booktabs_tabular():
    tex = to_latex(table(), {"knn_acc": "%.2f", "Pearson r": "%.2f"}, provenance={"url": "/checkpoints?k=5"})
    body = [ln for ln in tex.splitlines() if not ln.startswith("%")]
    assert body[0] == r"\begin{tabular}{lrrrl}" and body[-1] == r"\end{tabular}"
    assert [ln for ln in body if ln in (r"\toprule", r"\midrule", r"\bottomrule")] == [
        r"\toprule",
        r"\midrule",
        r"\bottomrule",
    ]
    plain = _strip_escaped(tex)
    assert plain.count("{") == plain.count("}")
    text = _strip_escaped("\n".join(body)).replace(" & ", " ")
    assert text.count("$") % 2 == 0, "unbalanced math mode"
    assert not re.search(r"[_&%$#]", re.sub(r"\$[^$]*\$", "", text)), tex  # outside math: all escaped
    rows = [ln for ln in body if ln.endswith(r"\\")]
    assert all(len(re.findall(r"(?<!\\)&", ln)) == 4 for ln in rows)  # five columns
    assert r"simclr\_e50 & 0.62 [0.55, 0.69] & 0.41 [0.12, 0.64] & 24 & SimCLR \\" in rows
    assert r"pca \& 50\% & -- & -0.20 & 7 & $\tau$-test \\" in rows
    assert r"checkpoint\_id & knn\_acc & Pearson r & n & method \\" in rows
    assert tex.splitlines()[0].startswith("% ") and "/checkpoints?k=5" in tex.splitlines()[0]


def test_csv_keeps_every_column():
    back = pd.read_csv(io.BytesIO(to_csv(table())))
    pd.testing.assert_frame_equal(back, table(), check_dtype=False)


def test_metric_table_offers_csv_and_latex():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_string(
        """
import pandas as pd
from components.metric_table import metric_table
metric_table(pd.DataFrame({"a": [1.0], "a_lo": [0.5], "a_hi": [1.5]}), key="t", formats={"a": "%.1f"})
""",
        default_timeout=60,
    ).run()
    assert not at.exception, [e.message for e in at.exception]
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["CSV", "LaTeX (booktabs)"]


# ---- copy link on every page ------------------------------------------------------------------------
@pytest.mark.browser
def test_copy_link_on_every_page(browser, factory_copy):
    from components import nav
    from harness.browser import open_export, screenshot, serve, wait_for_script

    with serve(factory_copy) as url:
        ctx = browser.new_context(viewport={"width": 1400, "height": 1200})
        ctx.grant_permissions(["clipboard-read", "clipboard-write"], origin=url)
        for spec in nav.PAGES:
            page = ctx.new_page()
            page.goto(f"{url}/{spec.url}")
            page.get_by_test_id("stSidebarNav").wait_for(timeout=120_000)
            wait_for_script(page)
            buttons = [f.locator("#copy") for f in page.frames if f.locator("#copy").count()]
            assert len(buttons) == 1, f"{spec.name}: {len(buttons)} copy-link buttons"
            buttons[0].click()
            page.wait_for_timeout(300)
            copied = page.evaluate("navigator.clipboard.readText()")
            # The address with every choice the page wrote into it (none at their defaults).
            assert copied == page.url, (spec.name, copied, page.url)
            if spec.name == "clusters":
                # The dashboard's own PDF export: the provenance names this very view.
                popover = open_export(page, 1)  # the purity figure's (the UMAP's comes first)
                popover.get_by_role("combobox").first.click()
                page.get_by_role("option", name="pdf", exact=True).click()
                with page.expect_download(timeout=120_000) as dl:
                    popover.get_by_role("button", name="Download PDF").click()
                pdf = Path(dl.value.path()).read_bytes()
                prov = E.read_provenance(pdf, "pdf")
                # The URL as it stood when the figure was drawn: the choices above it (later
                # widgets, such as the UMAP's colour, add theirs after it).
                got, now = urlsplit(prov["url"]), urlsplit(page.url)
                assert got.path == now.path == "/clusters"
                assert parse_qsl(got.query) == parse_qsl(now.query)[: len(parse_qsl(got.query))]
                # Defaults are left out of the URL: the provenance names the view's data itself.
                assert {"dataset", "checkpoint", "k"} <= prov.keys()
                assert prov["fingerprint"] == Workspace(factory_copy).fingerprint()
                # Titled as `conceptlens figures` titles it (the catalogue's title).
                title = PdfReader(io.BytesIO(pdf)).metadata["/Title"]
                assert title == "Purity vs coherence (laina2020 Fig. 2)"
            screenshot(page, f"copy-link-{spec.name}")
            page.close()
        ctx.close()


def test_export_button_adds_url_version_and_date(monkeypatch):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_string(
        """
import plotly.graph_objects as go
import streamlit as st
from components.export_button import view_provenance
st.query_params["ds"] = "shapes"
st.session_state["_url_pending"] = {"k": "5", "gone": None}
st.query_params["gone"] = "x"
st.json(view_provenance(figure="umap"))
""",
        default_timeout=60,
    ).run()
    assert not at.exception, [e.message for e in at.exception]
    prov = json.loads(at.json[0].value)
    assert prov["url"] == "?ds=shapes&k=5"  # the run's pending URL changes applied
    assert prov["conceptlens_version"] == __version__ and prov["date"] and prov["figure"] == "umap"


def test_exported_files_are_written_whole_and_readable_by_everyone(factory_template, tmp_path):
    """`conceptlens figures` writes through the workspace's atomic writer: each file is
    renamed into place (no temporary file left) with the mode of any other file the user
    creates (0644 under the default umask 022), not mkstemp's private 0600."""
    import os
    import stat

    from conceptlens.cli import main

    spec = tmp_path / "figures.toml"
    spec.write_text('formats = ["html"]\n[[figure]]\nfigure = "umap"\npage = "clusters"\n')
    out = tmp_path / "out"
    args = ["figures", "--workspace", str(factory_template), "--out", str(out), "--spec", str(spec)]
    assert main([*args, "--quiet"]) == 0
    umask = os.umask(0o022)
    os.umask(umask)
    files = sorted(p.name for p in out.iterdir())
    assert len(files) == 2 and "manifest.json" in files and files[0].endswith(".html"), files
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert set(modes.values()) == {0o666 & ~umask}, modes
    if umask == 0o022:
        assert set(modes.values()) == {0o644}


def _side_legend_figure(names, title="label_name"):
    fig = go.Figure([go.Scatter(x=[0, 1], y=[0, 1], mode="markers", name=n, legendgroup=n) for n in names])
    fig.update_layout(template=TEMPLATE, legend=dict(title=dict(text=title)), margin=dict(l=40, r=20, t=20))
    return fig


def test_a_wide_side_legend_goes_above_at_one_column_with_a_row_for_each_line():
    """Issue 47: a UMAP's ten label names took 45% of a one-column PDF's width. Above the plot
    they get the rows they need (one per entry when two do not fit side by side, and one for
    the title), so none is clipped; at two columns the side legend stays."""
    names = ["animals", "computer", "food", "geography", "office", "people", "recreation"]
    names += ["signs_and_symbols", "tools", "transportation"]
    fig = _side_legend_figure(names)
    narrow = E.paper_figure(fig, 3.5, aspect=0.85)
    legend = narrow.layout.legend
    assert legend.orientation == "h" and legend.entrywidth and legend.yref == "container"
    per_row = max(1, int((336 - 40 - 20) // (legend.entrywidth + E.ENTRY_SYMBOL_PX)))
    rows = -(-len(names) // per_row) + 1  # and the title's
    assert narrow.layout.margin.t >= rows * MIN_FONT_PX * 1.5
    assert narrow.layout.height - round(336 * 0.85) == narrow.layout.margin.t - 20  # the plot keeps its size
    wide = E.paper_figure(fig, 7.0, aspect=0.85)
    assert wide.layout.legend.orientation is None and wide.layout.height == round(672 * 0.85)
    # Short names fit on the side at one column: left as they are.
    short = E.paper_figure(_side_legend_figure(["a", "b", "c"], title="k"), 3.5, aspect=0.85)
    assert short.layout.legend.orientation is None


def test_purity_vs_coherence_keeps_its_legend_off_the_points():
    from conceptlens.figures.clusters import purity_coherence

    rows = pd.DataFrame(
        {
            "cluster": [0, 1, 2],
            "purity": [0.05, 0.5, 0.9],
            "coherence_random": [0.3, 0.7, 0.9],
            "coherence_hard": [0.2, 0.6, 0.8],
            "size": [10, 10, 10],
        }
    )
    fig = E.paper_figure(purity_coherence(rows), 3.5)
    legend = fig.layout.legend
    # In the top margin, given its room there (inside, it covered the low-purity error bars).
    assert (
        legend.orientation == "h" and legend.yref == "container" and fig.layout.margin.t >= MIN_FONT_PX * 1.5
    )
