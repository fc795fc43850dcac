"""Turn a Plotly figure into a file for a paper, with its provenance embedded.

Every format carries the same provenance (workspace fingerprint, view URL, ConceptLens
version, date): PDF in its Info dictionary and XMP packet, SVG in `<metadata>`, PNG in
a text chunk, HTML in a JSON script. Sizes are paper column widths; `paper_figure` makes
any figure fit one: WebGL traces become SVG ones (a PDF keeps them as vectors, not as a
screenshot) and no text is smaller than the theme's minimum at the printed size.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime as _dt
import html
import io
import json
import logging
import math
import os
import re
import shutil
import threading

import numpy as np
import plotly.graph_objects as go

from .. import __version__
from ..errors import ConceptLensError
from .theme import MIN_FONT_PX

FORMATS = {"pdf": "application/pdf", "svg": "image/svg+xml", "png": "image/png", "html": "text/html"}
# Column widths of two-column venues, in inches.
WIDTHS = {"single": 3.5, "double": 7.0}
# What the dashboard's export offers: label -> width in inches.
SIZES = {"single column (3.5 in)": 3.5, "double column (7 in)": 7.0, "slide (10 in)": 10.0}
DEFAULT_ASPECT = 0.62  # height / width when a figure does not say
DPI = 96  # Plotly's layout unit is the CSS pixel
PNG_SCALE = 3  # ~300 dpi for raster output
PROVENANCE_KEY = "conceptlens-provenance"
RENDER_TIMEOUT = 180  # seconds for one figure


class ExportError(ConceptLensError):
    """A figure could not be rendered; the message says which and why."""


def parse_width(value) -> float:
    """`single`, `double` or a number of inches (from `--width` or a spec file)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        inches = float(value)
    else:
        text = str(value).strip().lower().removesuffix("in").strip()
        if text in WIDTHS:
            return WIDTHS[text]
        try:
            inches = float(text)
        except ValueError:
            raise ConceptLensError(
                f"width {value!r} is not 'single', 'double' or a number of inches"
            ) from None
    if not 1.0 <= inches <= 20.0:
        raise ConceptLensError(f"width {value!r}: expected between 1 and 20 inches")
    return inches


def provenance(workspace: str, fingerprint: str, url: str, **params) -> dict:
    """What every exported file says about where it came from."""
    return {
        "conceptlens_version": __version__,
        "date": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "workspace": str(workspace),
        "fingerprint": fingerprint,
        "url": url,
        **params,
    }


def _complete(prov: dict | None) -> dict:
    """Version and date are filled in when a caller did not (the app's pages give the rest)."""
    out = dict(prov or {})
    out.setdefault("conceptlens_version", __version__)
    out.setdefault("date", _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat())
    return out


# ---- making a figure fit a page -------------------------------------------------------------
def _raise_fonts(node, minimum: int, in_font: bool = False):
    """Every font size under a `*font` key, at least `minimum` (arrays element-wise)."""
    if isinstance(node, dict):
        for key, val in node.items():
            font_key = key.endswith("font")
            if in_font and key == "size":
                if isinstance(val, (int, float)) and not isinstance(val, bool):
                    node[key] = max(val, minimum)
                elif isinstance(val, (list, tuple)):
                    node[key] = [max(v, minimum) if isinstance(v, (int, float)) else v for v in val]
            else:
                _raise_fonts(val, minimum, font_key)
    elif isinstance(node, list):
        for item in node:
            _raise_fonts(item, minimum, False)


# A trace's `meta` for what only the dashboard needs (invisible click and selection
# targets): left out of PDF, SVG and PNG, where it would only add elements.
SCREEN_ONLY = "screen-only"


def _svg_traces(d: dict) -> dict:
    d["data"] = [t for t in d.get("data", []) if t.get("meta") != SCREEN_ONLY]
    # A WebGL trace is a canvas: a PDF or SVG would hold a screenshot of it (a raster image).
    for trace in d["data"]:
        if trace.get("type") == "scattergl":
            trace["type"] = "scatter"
    return d


def vector_figure(fig: go.Figure) -> go.Figure:
    """A copy of `fig` drawn without WebGL (every point an SVG element)."""
    return go.Figure(_svg_traces(copy.deepcopy(fig.to_plotly_json())), skip_invalid=True)


def _axis_key(ref: str) -> str:  # "x2" -> "xaxis2"
    return ref[0] + "axis" + ref[1:]


# A row of an axis up the side needs this many font sizes per line of its label.
ROW_EM = 1.3


# A figure grows for its rows up to this height / width (twice as tall as wide: a
# column's page); past it, every n-th row is labelled.
MAX_ROWS_ASPECT = 2.0
# Rows a figure names itself (its own tick labels: events, predictors) cannot be thinned
# without leaving a named row unlabelled: for them a figure grows up to this.
MAX_NAMED_ROWS_ASPECT = 3.0


def _room_for_rows(d: dict, width_px: int, height_px: int) -> int:
    """The figure made as tall as its rows need: every category of an axis up the side (a
    bar, a heatmap row, a predictor) keeps its label, one line of ROW_EM font sizes each,
    so at one column no row goes unlabelled and no two labels touch. A figure that would
    grow past MAX_ROWS_ASPECT labels every n-th row of its category axes instead; rows the
    figure names itself (its tick labels) grow it up to MAX_NAMED_ROWS_ASPECT.
    Returns the height."""
    layout = d.setdefault("layout", {})
    tmpl = (layout.get("template") or {}).get("layout") or {}
    margin = {**(tmpl.get("margin") or {}), **(layout.get("margin") or {})}
    cats = _categories(d)
    cap = max(height_px, round(width_px * MAX_ROWS_ASPECT))
    named_cap = max(height_px, round(width_px * MAX_NAMED_ROWS_ASPECT))
    grow = 0.0
    keys = [k for k, v in layout.items() if k.startswith("yaxis") and isinstance(v, dict)]
    for key in keys + [k for k in cats if k.startswith("yaxis") and k not in keys]:
        axis = layout.setdefault(key, {})
        if axis.get("showticklabels") is False:
            continue
        mine = axis.get("tickvals") is None  # the figure did not set its ticks
        labels = cats.get(key) if mine else axis.get("ticktext")
        if not labels or axis.get("type") not in (None, "category", "linear"):
            continue
        size = _font_size(d, {"font": axis.get("tickfont")})
        # Plotly spaces rows evenly: each needs the lines of the tallest label.
        row = max(str(t).count("<br>") + 1 for t in labels) * size * ROW_EM
        lo, hi = axis.get("domain") or (0.0, 1.0)
        xaxis = layout.get("xaxis") or {}
        bottom = margin.get("b", 80) + (size * 2.5 if (xaxis.get("title") or {}).get("text") else size * 1.5)
        fixed = margin.get("t", 100) + bottom
        need = (len(labels) * row) / max(hi - lo, 0.05) + fixed  # the figure's height
        if mine:
            at_cap = max(((cap - fixed) * (hi - lo)), 1.0)
            step = math.ceil(len(labels) * row / at_cap) if need > cap else 1
            if step > 1:
                axis["tickmode"] = "array"
                axis["tickvals"] = labels[::step]
            else:  # Plotly would label every n-th row itself
                axis["dtick"] = 1
        grow = max(grow, min(need, cap if mine else named_cap) - height_px)
    return height_px + math.ceil(max(grow, 0.0))


def _thin_category_ticks(d: dict, width_px: int, height_px: int) -> None:
    """Label every n-th category of a crowded category axis along the bottom, so that no
    two tick labels overlap at the paper size (an axis whose ticks the figure sets itself
    is left alone; the rows of an axis up the side get room instead, `_room_for_rows`)."""
    layout = d.setdefault("layout", {})
    font = max(MIN_FONT_PX, (layout.get("font") or {}).get("size") or MIN_FONT_PX)
    for key, values in _categories(d).items():
        if not key.startswith("x"):
            continue
        axis = layout.setdefault(key, {})
        if axis.get("tickvals") is not None or axis.get("type") not in (None, "category"):
            continue
        lo, hi = axis.get("domain") or (0.0, 1.0)
        # Margins and the other axis's labels take part of the figure: assume 60% is plot.
        span = (width_px if key.startswith("x") else height_px) * 0.6 * (hi - lo)
        size = max(font, ((axis.get("tickfont") or {}).get("size") or font))
        step = -(-len(values) * size * 1.25 // max(span, 1))
        if step > 1:
            axis["tickmode"] = "array"
            axis["tickvals"] = values[:: int(step)]


# Average advance of a character of the theme's sans-serif, in font sizes.
CHAR_EM = 0.5


def _text_px(text: str, size: float) -> float:
    return len(re.sub(r"<[^>]+>", "", str(text))) * CHAR_EM * size


def _wrap(text: str, size: float, width_px: float) -> list[str]:
    """`text` broken at spaces into lines no wider than `width_px` where words allow."""
    lines: list[str] = []
    for word in str(text).split(" "):
        if lines and _text_px(lines[-1] + " " + word, size) <= width_px:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _font_size(d: dict, *nodes) -> float:
    """The font size in effect: the first node's own, else the layout's, at least the minimum."""
    layout = d.get("layout", {})
    base = (layout.get("font") or {}).get("size") or ((layout.get("template") or {}).get("layout") or {}).get(
        "font", {}
    ).get("size")
    for node in nodes:
        size = ((node or {}).get("font") or {}).get("size")
        if size:
            return max(size, MIN_FONT_PX)
    return max(base or MIN_FONT_PX, MIN_FONT_PX)


def _title_size(d: dict) -> float:
    """The size of the figure title's type: Plotly's is 1.4 times the figure's unless set."""
    layout = d.get("layout", {})
    tmpl = (layout.get("template") or {}).get("layout") or {}
    given = ((layout.get("title") or {}).get("font") or {}).get("size") or (
        (tmpl.get("title") or {}).get("font") or {}
    ).get("size")
    return max(given, MIN_FONT_PX) if given else _font_size(d) * 1.4


def _make_room_above(d: dict, width_px: int, height_px: int) -> int:
    """Subplot titles wrapped to their subplot's width, and a horizontal legend above the
    plots moved into a top margin as tall as its rows need at this width: at one column
    a legend that wraps to a second row otherwise lands on the subplot titles. The figure
    grows by what the margin grows, so the plots keep their size. Returns the new height."""
    layout = d.setdefault("layout", {})
    tmpl = (layout.get("template") or {}).get("layout") or {}
    margin = {**(tmpl.get("margin") or {}), **(layout.get("margin") or {})}
    left, top = margin.get("l", 80), margin.get("t", 100)
    plot_w = _plot_width(d, width_px)
    domains = [
        v.get("domain") or [0, 1] for k, v in layout.items() if k.startswith("xaxis") and isinstance(v, dict)
    ]
    titles_h = titles_room = 0.0
    for a in layout.get("annotations") or []:
        # make_subplots's titles: centred on a subplot, anchored on its top edge.
        if a.get("yanchor") != "bottom" or a.get("xref") != "paper" or (a.get("y") or 0) < 0.99:
            continue
        size = _font_size(d, a)
        x = a.get("x", 0.5)
        dom = min(domains, key=lambda dm: abs((dm[0] + dm[1]) / 2 - x)) if domains else [0, 1]
        lines = _wrap(a.get("text", ""), size, (dom[1] - dom[0]) * plot_w * 1.2)
        a["text"] = "<br>".join(lines)
        titles_h = max(titles_h, len(lines) * size * 1.25 + 4)
        # Plotly draws each line 1.3 type sizes apart, in a box padded a few px.
        titles_room = max(titles_room, len(lines) * size * 1.3 + 8)
    legend = layout.get("legend") or {}
    shown = layout.get("showlegend", True) is not False
    above = (
        legend.get("orientation") == "h" and (legend.get("y") or 0) >= 1 and legend.get("yref") != "container"
    )
    if not (above and shown):
        if titles_room + 6 > top:
            layout["margin"] = {**margin, "t": round(titles_room + 6)}
            return height_px + round(titles_room + 6 - top)
        return height_px
    size = _font_size(d, legend)
    names = []
    for t in d.get("data", []):
        group = t.get("legendgroup")
        if t.get("showlegend", True) is not False and t.get("name") and (group is None or group not in names):
            names.append(group if group is not None else t["name"])
    item = legend.get("itemwidth", 30) + 8 + 12
    rows, used = 1, 0.0
    room = width_px - left - (legend.get("x") or 0) * plot_w - 4
    fixed = legend.get("entrywidth") if legend.get("entrywidthmode", "pixels") == "pixels" else None
    if fixed:  # entries of one width wrap at the plot's width
        room = plot_w * (1 - (legend.get("x") or 0))
    for name in names:
        w = (fixed + ENTRY_SYMBOL_PX) if fixed else item + _text_px(name, size)
        if used and used + w > room:
            rows, used = rows + 1, 0.0
        used += w
    if ((legend.get("title") or {}).get("text")) and (legend.get("title") or {}).get("side") == "top":
        rows += 1  # the legend's title on a row of its own
    title = layout.get("title") or {}
    title_h = (
        _title_size(d) * 1.3 * (str(title.get("text")).count("<br>") + 1) + 6 if title.get("text") else 0.0
    )
    legend_h = rows * max(size * 1.5, 20) + 6
    new_top = round(title_h + legend_h + titles_h + 8)
    new_h = height_px + max(0, new_top - top)
    if title_h:  # the title on top (Plotly centres it in the margin, where the legend now is)
        layout["title"] = {**title, "yref": "container", "y": 1 - 4 / new_h, "yanchor": "top"}
    layout["legend"] = {**legend, "yref": "container", "y": 1 - (title_h + 2) / new_h, "yanchor": "top"}
    layout["legend"]["tracegroupgap"] = 0
    layout["margin"] = {**margin, "t": max(top, new_top)}
    return new_h


def _categories(d: dict) -> dict[str, list[str]]:
    """The text categories of each axis ("xaxis2": [...]), in order of appearance."""
    cats: dict[str, list] = {}
    for trace in d.get("data", []):
        if trace.get("type") in ("pie", "sankey", "table", "parcats", "parcoords", "indicator"):
            continue
        for letter in ("x", "y"):
            values = trace.get(letter)
            # Numbers come as typed arrays ({"dtype", "bdata"}): only lists of text are categories.
            if isinstance(values, dict) or values is None or not len(values):
                continue
            if not all(isinstance(v, str) for v in values):
                continue
            seen = cats.setdefault(_axis_key(trace.get(letter + "axis", letter)), [])
            seen.extend(v for v in dict.fromkeys(values) if v not in seen)
    return cats


def _plot_width(d: dict, width_px: int) -> float:
    """Roughly what Plotly leaves for the plots: the margins, widened (as its automargin
    does) by the first y axis's labels and title and by a colour bar."""
    layout = d.get("layout", {})
    tmpl = (layout.get("template") or {}).get("layout") or {}
    margin = {**(tmpl.get("margin") or {}), **(layout.get("margin") or {})}
    y = layout.get("yaxis") or {}
    size = _font_size(d, {"font": y.get("tickfont")})
    labels = y.get("ticktext") or _categories(d).get("yaxis") or []
    left = max(t for t in [0.0] + [_text_px(line, size) for t in labels for line in str(t).split("<br>")])
    left += (size * 2 if (y.get("title") or {}).get("text") else 0) + 8
    bars = any(
        (t.get("showscale", True) and t.get("type") in ("heatmap", "contour")) for t in d.get("data", [])
    ) or any(isinstance(v, dict) and "colorbar" in v for k, v in layout.items() if k.startswith("coloraxis"))
    right = margin.get("r", 80) + (60 if bars else 0)
    return max(width_px - max(margin.get("l", 80), left) - right, 1)


def _fit_texts(d: dict, width_px: int) -> None:
    """Texts that would collide at this width made to fit: the title wrapped, the labels of
    an x axis turned upright (their lines joined) where they are wider than a tick's share
    of the axis, and a heatmap's cell values left out where they overflow a cell."""
    layout = d.setdefault("layout", {})
    plot_w = _plot_width(d, width_px)
    title = layout.get("title")
    if isinstance(title, dict) and title.get("text") and "<br>" not in title["text"]:
        title["text"] = "<br>".join(_wrap(title["text"], _title_size(d), width_px - 20))
    cats = _categories(d)
    for key, axis in list(layout.items()):
        if not (key.startswith("xaxis") and isinstance(axis, dict)):
            continue
        labels = axis.get("ticktext") or cats.get(key)
        if not labels:
            continue
        lo, hi = axis.get("domain") or (0.0, 1.0)
        span = plot_w * (hi - lo) / len(labels)
        size = _font_size(d, {"font": axis.get("tickfont")})
        angle = axis.get("tickangle")
        if angle in (None, "auto"):  # Plotly slants crowded labels itself
            continue
        # Level labels need their width; slanted ones their height across the axis.
        widest = max(_text_px(line, size) for t in labels for line in str(t).split("<br>"))
        need = widest if angle % 180 == 0 else size / abs(math.sin(math.radians(angle)))
        if need > span:
            if axis.get("ticktext"):
                axis["ticktext"] = [str(t).replace("<br>", " ") for t in axis["ticktext"]]
            axis["tickangle"] = -90
    for trace in d.get("data", []):
        if trace.get("type") != "heatmap" or trace.get("text") is None:
            continue
        text = np.asarray(trace["text"], dtype=object)
        if text.ndim != 2 or not text.size:
            continue
        xaxis = layout.get(_axis_key(trace.get("xaxis", "x"))) or {}
        lo, hi = xaxis.get("domain") or (0.0, 1.0)
        cell = plot_w * (hi - lo) / text.shape[1]
        size = _font_size(d, {"font": trace.get("textfont")})
        if max(_text_px(t, size) for t in text.ravel()) > cell - 2:
            trace.pop("texttemplate", None)
            trace["text"] = None


# What Plotly adds to a legend entry's `entrywidth` (its symbol and gaps), in px.
ENTRY_SYMBOL_PX = 45
# A legend on the right may take this share of the figure's width; a wider one goes above.
SIDE_LEGEND_SHARE = 0.3


def _side_legend_above(d: dict, width_px: int) -> None:
    """A vertical legend to the right of the plots (Plotly's default place) that would take
    more than SIDE_LEGEND_SHARE of the width (a UMAP's ten label names at one column took
    45%) is laid out in rows above the plots instead; `_make_room_above` then gives it the
    rows it needs."""
    layout = d.setdefault("layout", {})
    legend = layout.get("legend") or {}
    if layout.get("showlegend", True) is False or legend.get("orientation") == "h":
        return
    if legend.get("x") is not None and legend["x"] < 1:  # placed inside the plot on purpose
        return
    size = _font_size(d, legend)
    names = [
        str(t.get("name"))
        for t in d.get("data", [])
        if t.get("showlegend", True) is not False and t.get("name")
    ]
    if not names:
        return
    title = ((legend.get("title") or {}).get("text")) or ""
    wide = max([_text_px(n, size) for n in names] + [_text_px(title, size)])
    if wide + legend.get("itemwidth", 30) + 20 > SIDE_LEGEND_SHARE * width_px:
        # Entries of one width make a grid whose rows `_make_room_above` can count.
        legend.update(
            orientation="h", yanchor="bottom", y=1.02, x=0, xanchor="left", entrywidth=round(wide * 1.1 + 4)
        )
        if title:
            legend["title"] = {**(legend.get("title") or {}), "side": "top"}
        layout["legend"] = legend


def paper_figure(fig: go.Figure, width_in: float, aspect: float | None = None) -> go.Figure:
    """A copy of `fig` sized `width_in` inches wide (height: `aspect` x width), with WebGL
    traces drawn as SVG and every text at least MIN_FONT_PX (7.5 pt at that size)."""
    d = _svg_traces(copy.deepcopy(fig.to_plotly_json()))
    for trace in d.get("data", []):
        _raise_fonts(trace, MIN_FONT_PX)
    # The template is walked too: it holds the base font every other size defaults to.
    _raise_fonts(d.get("layout", {}), MIN_FONT_PX)
    w = round(width_in * DPI)
    h = _room_for_rows(d, w, round(w * (aspect or DEFAULT_ASPECT)))
    _thin_category_ticks(d, w, h)
    _fit_texts(d, w)
    _side_legend_above(d, w)
    h = _make_room_above(d, w, h)
    out = go.Figure(d, skip_invalid=True)
    out.update_layout(width=w, height=h, autosize=False)
    return out


def paper_height_in(fig: go.Figure, width_in: float, aspect: float | None = None) -> float:
    """The height of `fig` on paper at `width_in` inches (room made above the plots included)."""
    return paper_figure(fig, width_in, aspect).layout.height / DPI


# ---- rendering --------------------------------------------------------------------------------
def _browser() -> None:
    # choreographer (kaleido's Chromium driver) logs a message of Chromium's it cannot parse
    # as an error with its traceback, then ignores it: on a user's terminal (and in the
    # stderr of whatever runs next) that reads as a crash of ours. Its real failures raise.
    # kaleido first: it creates that logger as logistro's class, which choreographer needs.
    import kaleido  # noqa: F401

    logging.getLogger("choreographer.channels.pipe").setLevel(logging.CRITICAL)
    # kaleido drives a Chromium; point it at the system one instead of downloading its own.
    if "BROWSER_PATH" not in os.environ:
        for cand in (
            "/usr/bin/chromium",
            shutil.which("chromium") or "",
            shutil.which("google-chrome") or "",
        ):
            if cand and os.path.exists(cand):
                os.environ["BROWSER_PATH"] = cand
                break


# MathJax would come from a CDN: figures here use no TeX, and offline the page would wait.
_KOPTS = {"mathjax": False}


class _Renderer:
    """One Chromium kept open for many figures (kaleido starts one per call otherwise)."""

    def __init__(self):
        import kaleido

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._k = kaleido.Kaleido(n=1, **_KOPTS)
        self._run(self._k.open())

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(RENDER_TIMEOUT)

    def render(self, fig: dict, opts: dict) -> bytes:
        return self._run(self._k.calc_fig(fig, opts=opts))

    def close(self) -> None:
        try:
            self._run(self._k.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


_RENDERER: _Renderer | None = None


@contextlib.contextmanager
def renderer():
    """Keep one browser open while rendering many figures (the figures CLI)."""
    global _RENDERER
    if _RENDERER is not None:
        yield
        return
    _browser()
    _RENDERER = _Renderer()
    try:
        yield
    finally:
        r, _RENDERER = _RENDERER, None
        r.close()


def _render(fig: go.Figure, fmt: str, scale: float) -> bytes:
    import kaleido

    _browser()
    d = fig.to_plotly_json()
    opts = dict(format=fmt, width=fig.layout.width, height=fig.layout.height, scale=scale)
    try:
        if _RENDERER is not None:
            return _RENDERER.render(d, opts)
        return kaleido.calc_fig_sync(d, opts=opts, kopts=dict(_KOPTS))
    except Exception as e:
        raise ExportError(f"could not render the figure as {fmt.upper()}: {type(e).__name__}: {e}") from e


# ---- provenance in each format ------------------------------------------------------------------
@contextlib.contextmanager
def _quiet_pypdf():
    # Chromium's PDFs declare a cross-reference size pypdf warns about; the files are fine.
    log = logging.getLogger("pypdf")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _pdf_with_provenance(data: bytes, prov: dict, title: str) -> bytes:
    from pypdf import PdfReader, PdfWriter
    from pypdf.xmp import XmpInformation

    text = json.dumps(prov, sort_keys=True, default=str)
    with _quiet_pypdf():
        writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.add_metadata(
        {
            "/Title": title,
            "/Subject": str(prov.get("url", "")),
            "/Keywords": f"conceptlens fingerprint={prov.get('fingerprint', '')}",
            "/Creator": f"ConceptLens {prov.get('conceptlens_version', __version__)}",
            "/Producer": f"ConceptLens {__version__} (kaleido, pypdf)",
            "/ConceptLensProvenance": text,
        }
    )
    xmp = XmpInformation.create()
    xmp.dc_title = {"x-default": title}
    xmp.dc_source = str(prov.get("url", ""))
    xmp.dc_description = {"x-default": text}
    xmp.xmp_creator_tool = f"ConceptLens {prov.get('conceptlens_version', __version__)}"
    writer.xmp_metadata = xmp
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def read_provenance(data: bytes, fmt: str) -> dict:
    """The provenance embedded in an exported file (what a test or a reader checks)."""
    fmt = fmt.lower()
    if fmt == "pdf":
        from pypdf import PdfReader

        with _quiet_pypdf():
            return json.loads(PdfReader(io.BytesIO(data)).metadata["/ConceptLensProvenance"])
    if fmt == "png":
        from PIL import Image  # local: off the dashboard's cold start

        return json.loads(Image.open(io.BytesIO(data)).text[PROVENANCE_KEY])
    text = data.decode()
    tag = "metadata" if fmt == "svg" else "script"
    start = text.index(">", text.index(f'id="{PROVENANCE_KEY}"')) + 1
    raw = text[start : text.index(f"</{tag}>", start)]
    return json.loads(html.unescape(raw) if fmt == "svg" else raw.replace("<\\/", "</"))


def figure_bytes(
    fig: go.Figure,
    fmt: str,
    width_in: float = WIDTHS["double"],
    provenance: dict | None = None,
    aspect: float | None = None,
    title: str | None = None,
) -> bytes:
    """Render `fig` as `fmt` at `width_in` inches; provenance goes into the file's metadata."""
    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise ExportError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    prov = _complete(provenance)
    title = title or str(prov.get("figure") or "ConceptLens figure")
    text = json.dumps(prov, sort_keys=True, default=str)
    if fmt == "html":
        # plotly.js inlined: the file works offline and without a server.
        page = fig.to_html(include_plotlyjs=True, full_html=True, config={"displaylogo": False})
        script = text.replace("</", "<\\/")  # a value cannot close the script element
        head = (
            f"<title>{html.escape(title)}</title>"
            f'<meta name="generator" content="ConceptLens {__version__}">'
            f'<script type="application/json" id="{PROVENANCE_KEY}">{script}</script>'
        )
        return page.replace("<head>", "<head>" + head, 1).encode()
    paper = paper_figure(fig, width_in, aspect)
    data = _render(paper, fmt, PNG_SCALE if fmt == "png" else 1)
    if fmt == "svg":
        s = data.decode()
        i = s.index(">", s.index("<svg")) + 1
        meta = (
            f"<title>{html.escape(title)}</title>"
            f'<metadata id="{PROVENANCE_KEY}">{html.escape(text, quote=False)}</metadata>'
        )
        return (s[:i] + meta + s[i:]).encode()
    if fmt == "png":
        from PIL import Image, PngImagePlugin  # local: off the dashboard's cold start

        im = Image.open(io.BytesIO(data))
        info = PngImagePlugin.PngInfo()
        info.add_text(PROVENANCE_KEY, text)
        info.add_text("Title", title)
        info.add_text("Source", str(prov.get("url", "")))
        info.add_text("Software", f"ConceptLens {__version__}")
        out = io.BytesIO()
        im.save(out, format="PNG", pnginfo=info, dpi=(DPI * PNG_SCALE, DPI * PNG_SCALE))
        return out.getvalue()
    return _pdf_with_provenance(data, prov, title)


# ---- checking a PDF ---------------------------------------------------------------------------
def inspect_pdf(data: bytes) -> dict:
    """`images`: raster images drawn on the pages (inside form XObjects too); `fonts`:
    (name, embedded) of every font used."""
    from pypdf import PdfReader

    images, fonts, seen = 0, {}, set()

    def walk(resources):
        nonlocal images
        if resources is None:
            return
        resources = resources.get_object()
        for _, ref in (resources.get("/Font") or {}).items():
            font = ref.get_object()
            descendants = [d.get_object() for d in font.get("/DescendantFonts", [])] or [font]
            embedded = any(
                any(k in (d.get("/FontDescriptor") or {}) for k in ("/FontFile", "/FontFile2", "/FontFile3"))
                for d in descendants
            )
            fonts[str(font.get("/BaseFont"))] = embedded
        for _, ref in (resources.get("/XObject") or {}).items():
            key = getattr(ref, "idnum", None) or id(ref)
            if key in seen:
                continue
            seen.add(key)
            x = ref.get_object()
            if x.get("/Subtype") == "/Image":
                images += 1
            elif x.get("/Subtype") == "/Form":
                walk(x.get("/Resources"))

    with _quiet_pypdf():
        for page in PdfReader(io.BytesIO(data)).pages:
            walk(page.get("/Resources"))
    return {"images": images, "fonts": [[name, embedded] for name, embedded in sorted(fonts.items())]}
