"""Text in the exported figures is readable at one column (issue 28 item 5): no two texts
overlap and none is cut off by the figure's edge.

Each figure of the catalogue is rendered once as SVG through the export path (`render_jobs`,
as `conceptlens figures` does) on a hard-linked copy of the demo. Each text element's box
is estimated from its x/y, font size, anchor, line breaks and the transforms of the groups
around it; its width is measured with Liberation Sans, which has Arial's metrics (the
theme's font, see figures/theme.py).
"""

from __future__ import annotations

import functools
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from conceptlens.db import WorkspaceDB
from conceptlens.figures import catalog
from conceptlens.figures.catalog import Job, render_jobs
from conceptlens.figures.export import paper_figure
from conceptlens.workspace import Workspace
from tests.conftest import copy_ws

SVG = "{http://www.w3.org/2000/svg}"
FONT = Path("/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf")
# Boxes are estimates: two texts closer than this are not counted as overlapping, a text
# this far past the edge is not counted as cut off.
SLACK_PX = 1.0
# Above and below the baseline, in font sizes (Arial's ascender and descender).
ASCENT, DESCENT = 0.78, 0.21


@functools.lru_cache(maxsize=1)
def _font():
    from PIL import ImageFont

    return ImageFont.truetype(str(FONT), 100) if FONT.exists() else None


def text_width(text: str, size: float) -> float:
    font = _font()
    if font is None:  # Arial's mean advance
        return len(text) * 0.55 * size
    return font.getlength(text) * size / 100


def _matrix(transform: str | None) -> np.ndarray:
    """The affine matrix (3x3) of an SVG transform attribute."""
    m = np.eye(3)
    for op, args in re.findall(r"(\w+)\s*\(([^)]*)\)", transform or ""):
        v = [float(a) for a in re.split(r"[\s,]+", args.strip()) if a]
        if op == "translate":
            t = np.array([[1, 0, v[0]], [0, 1, v[1] if len(v) > 1 else 0], [0, 0, 1]])
        elif op == "scale":
            t = np.diag([v[0], v[1] if len(v) > 1 else v[0], 1])
        elif op == "rotate":
            a = math.radians(v[0])
            cx, cy = (v[1], v[2]) if len(v) == 3 else (0, 0)
            r = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])
            t = _matrix(f"translate({cx},{cy})") @ r @ _matrix(f"translate({-cx},{-cy})")
        elif op == "matrix":
            t = np.array([[v[0], v[2], v[4]], [v[1], v[3], v[5]], [0, 0, 1]])
        else:
            raise ValueError(f"transform {op} not handled")
        m = m @ t
    return m


def _style(el) -> dict:
    return dict(
        (k.strip(), v.strip())
        for k, _, v in (s.partition(":") for s in (el.get("style") or "").split(";"))
        if k
    )


def _em(value: str | None, size: float) -> float:
    if not value:
        return 0.0
    return float(value[:-2]) * size if value.endswith("em") else float(value.removesuffix("px"))


@dataclass
class Box:
    text: str
    kind: str  # the class of the group the text is in: xtick, ytick, annotation, legend, ...
    corners: np.ndarray  # 4 x 2, in order around the box (turned with its text)

    @property
    def x0(self) -> float:
        return float(self.corners[:, 0].min())

    @property
    def x1(self) -> float:
        return float(self.corners[:, 0].max())

    @property
    def y0(self) -> float:
        return float(self.corners[:, 1].min())

    @property
    def y1(self) -> float:
        return float(self.corners[:, 1].max())

    def overlap(self, other: Box) -> float:
        """How far the two boxes reach into each other, in px (<= 0: apart): the least
        overlap of their shadows on the four directions of their edges (two slanted labels
        side by side do not overlap where their upright bounding boxes would)."""
        depth = math.inf
        for poly in (self.corners, other.corners):
            for i in range(2):
                edge = poly[i + 1] - poly[i]
                axis = np.array([-edge[1], edge[0]]) / (np.hypot(*edge) or 1)
                a, b = self.corners @ axis, other.corners @ axis
                depth = min(depth, min(a.max(), b.max()) - max(a.min(), b.min()))
        return float(depth)


def _lines(el, size: float) -> list[tuple[str, float | None, float]]:
    """(text, x or None, y) of each line of a <text>, in its own coordinates."""
    x0, y0 = float(el.get("x") or 0), float(el.get("y") or 0) + _em(el.get("dy"), size)
    lines = [["".join([el.text or ""]), None, y0]]
    for ts in el.iter(SVG + "tspan"):
        if "line" in (ts.get("class") or "").split():
            y = float(ts.get("y")) if ts.get("y") is not None else lines[-1][2]
            lines.append(
                [ts.text or "", float(ts.get("x")) if ts.get("x") else None, y + _em(ts.get("dy"), size)]
            )
        else:  # a sub/superscript or styled run: part of the current line
            lines[-1][0] += ts.text or ""
        lines[-1][0] += ts.tail or ""
    return [(t, x if x is not None else x0, y) for t, x, y in lines if t.strip()]


def text_boxes(svg: str) -> tuple[list[Box], float, float]:
    """Every visible text's box in the figure's coordinates, and the figure's width and height."""
    root = ET.fromstring(svg)
    width, height = float(root.get("width")), float(root.get("height"))
    boxes: list[Box] = []

    def walk(el, m, kind, hidden):
        style = _style(el)
        hidden = hidden or style.get("display") == "none" or style.get("opacity") in ("0", "0.0")
        m = m @ _matrix(el.get("transform"))
        cls = (el.get("class") or "").split()
        kind = next(
            (c for c in cls if c in ("xtick", "ytick", "annotation", "legend", "cbaxis", "g-gtitle")),
            kind,
        )
        if el.tag == SVG + "text":
            size = float(style.get("font-size", "12px").removesuffix("px"))
            if hidden or style.get("fill-opacity") in ("0", "0.0"):
                return
            anchor = el.get("text-anchor") or style.get("text-anchor") or "start"
            for text, x, y in _lines(el, size):
                w = text_width(text, size)
                left = x - {"start": 0, "middle": w / 2, "end": w}[anchor]
                top, bottom = y - ASCENT * size, y + DESCENT * size
                corners = np.array(
                    [[left, top, 1], [left + w, top, 1], [left + w, bottom, 1], [left, bottom, 1]]
                )
                boxes.append(Box(text, kind, (m @ corners.T)[:2].T))
            return
        for child in el:
            walk(child, m, kind, hidden)

    walk(root, np.eye(3), "", False)
    return boxes, width, height


def text_problems(svg: str) -> list[str]:
    """Texts that overlap each other or leave the figure, described for a failure message."""
    boxes, width, height = text_boxes(svg)
    out = []
    for b in boxes:
        if b.x0 < -SLACK_PX or b.y0 < -SLACK_PX or b.x1 > width + SLACK_PX or b.y1 > height + SLACK_PX:
            out.append(
                f"{b.kind} {b.text!r} is cut off: ({b.x0:.0f}, {b.y0:.0f})-({b.x1:.0f}, {b.y1:.0f}) "
                f"outside {width:.0f} x {height:.0f}"
            )
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            if a.overlap(b) > SLACK_PX:
                out.append(f"{a.kind} {a.text!r} overlaps {b.kind} {b.text!r} by {a.overlap(b):.1f} px")
    return out


def tick_labels(svg: str, letter: str) -> list[str]:
    """The text of every tick label of the x or y axes (lines joined)."""
    root = ET.fromstring(svg)
    return [
        "".join(t.itertext())
        for g in root.iter(SVG + "g")
        if f"{letter}tick" in (g.get("class") or "").split()
        for t in g.iter(SVG + "text")
    ]


def _plain(label) -> str:
    return re.sub(r"<[^>]+>", "", str(label).replace("<br>", ""))


def unlabelled_rows(fig, svg: str) -> list[str]:
    """Rows of an axis up the side (bars, heatmap rows) whose label is not in the SVG. A
    figure grown to MAX_ROWS_ASPECT may label every n-th row (the rows it names)."""
    from conceptlens.figures.export import MAX_ROWS_ASPECT, _categories

    d = fig.to_plotly_json()
    capped = d["layout"]["height"] >= d["layout"]["width"] * MAX_ROWS_ASPECT
    shown = set(tick_labels(svg, "y"))
    missing = []
    for key, values in _categories(d).items():
        axis = d["layout"].get(key) or {}
        if not key.startswith("y") or axis.get("showticklabels") is False:
            continue
        labels = axis.get("ticktext") or (axis.get("tickvals") if capped else None) or values
        missing += [str(v) for v in labels if _plain(v) not in shown]
    return missing


# ---- the checker on texts whose boxes are known -------------------------------------------------
def _svg(*texts: str, w=200, h=100) -> str:
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}">{"".join(texts)}</svg>'


def _t(text, x, y, anchor="start", size=10, transform=None) -> str:
    tr = f' transform="{transform}"' if transform else ""
    return f'<text x="{x}" y="{y}" text-anchor="{anchor}" style="font-size: {size}px;"{tr}>{text}</text>'


def test_the_checker_measures_text_as_the_font_draws_it():
    (box,), _, _ = text_boxes(_svg(_t("background", 100, 50, anchor="middle")))
    assert 48 < box.x1 - box.x0 < 56  # Arial's "background" at 10 px is 52 px wide
    assert box.x0 + box.x1 == pytest.approx(200)  # centred on x = 100
    assert box.y1 - box.y0 == pytest.approx(10 * (ASCENT + DESCENT))


def test_the_checker_finds_overlapping_and_cut_off_text_and_passes_text_apart():
    # Two tick labels 8 px apart at 10 px type overlap; 14 px apart they do not.
    assert any("overlaps" in p for p in text_problems(_svg(_t("alpha", 10, 20), _t("beta", 10, 28))))
    assert text_problems(_svg(_t("alpha", 10, 20), _t("beta", 10, 34))) == []
    # Anchored at its end left of the figure; turned upright past the bottom edge.
    assert "cut off" in text_problems(_svg(_t("name", 5, 50, anchor="end")))[0]
    upright = _t("background", 0, 0, transform="translate(100,90) rotate(-90)")
    (box,), _, _ = text_boxes(_svg(upright))
    assert box.y1 - box.y0 > 48 and box.x1 - box.x0 < 12  # upright: tall and narrow
    assert text_problems(_svg(upright)) == []
    assert "cut off" in text_problems(_svg(_t("background", 0, 0, transform="rotate(90,100,90)")))[0]


def test_lines_of_a_wrapped_title_are_boxed_one_under_the_other():
    title = (
        '<text x="50" y="20" style="font-size: 12px;"><tspan class="line" dy="0em" x="50" y="20">a</tspan>'
        '<tspan class="line" dy="1.3em" x="50" y="20">b</tspan></text>'
    )
    a, b = text_boxes(_svg(title))[0]
    assert b.y0 - a.y0 == pytest.approx(1.3 * 12)
    assert text_problems(_svg(title)) == []


# ---- every figure of the catalogue at one column --------------------------------------------------
# Drawn from an exported human study, which the demo cannot have (its text: test_studies).
PEOPLE_ONLY = {"human_vs_proxy"}
DRAWN = sorted(set(catalog.FIGURES) - PEOPLE_ONLY)


@pytest.fixture(scope="module")
def exported(demo_ws, tmp_path_factory):
    """Every figure of the catalogue (the non-default ones too) as SVG at one column."""
    import plotly.io as pio

    from conceptlens.figures.theme import TEMPLATE

    # A Streamlit AppTest run earlier in the session makes "streamlit" plotly's default
    # template; `conceptlens figures` runs without Streamlit, with the theme's.
    before, pio.templates.default = pio.templates.default, TEMPLATE
    from conceptlens import selections

    ws = copy_ws(demo_ws, tmp_path_factory.mktemp("demo") / "ws")
    # What people add to a workspace, which the demo ships none of: a saved selection (its
    # scores on the 7 digits checkpoints); an exported human study is drawn in test_studies.
    db = WorkspaceDB(ws)
    threes = db.query("SELECT image_id FROM images WHERE dataset = 'digits' AND label = 3")["image_id"]
    selections.save(ws, "threes", "digits", list(threes), "label=3")
    out = tmp_path_factory.mktemp("figures")
    db = WorkspaceDB(ws)
    # The default dataset (the first clustered one: `clipart`) holds ImageNet checkpoints and
    # their random inits, no training run with epochs: the epoch figures are drawn for shapes.
    given = {
        "selection_across": {"ds": "digits", "saved": "threes", "nnull": 20},
        "metrics_vs_epoch": {"ds": "shapes"},
    }
    jobs = [Job(f, given.get(f.name, {})) for f in catalog.FIGURES.values() if f.name not in PEOPLE_ONLY]
    manifest = render_jobs(db, jobs, out, str(ws), Workspace(ws).fingerprint(), 3.5, ("svg",), progress=False)
    files = {}
    for f in manifest["files"]:
        spec = catalog.FIGURES[f["figure"]]
        paper = paper_figure(spec.build(db, f["params"]), 3.5, spec.aspect_at(3.5))
        files[f["figure"]] = ((out / f["path"]).read_text(), paper)
    pio.templates.default = before
    return files, manifest["skipped"]


def test_the_demo_draws_every_figure_of_the_catalogue(exported):
    files, skipped = exported
    assert skipped == [] and set(files) == set(DRAWN)


@pytest.mark.parametrize("name", DRAWN)
def test_no_text_overlaps_or_is_cut_off_at_one_column(exported, name):
    svg, _ = exported[0][name]
    assert text_problems(svg) == [], name


@pytest.mark.parametrize("name", DRAWN)
def test_every_row_is_labelled_with_its_whole_name(exported, name):
    """Bars and heatmap rows are labelled every one (the figure grows to give them room),
    and no tick label is a name cut in the middle ("shapes-auto…coder-s1-e05")."""
    svg, paper = exported[0][name]
    assert unlabelled_rows(paper, svg) == [], name
    assert [t for letter in "xy" for t in tick_labels(svg, letter) if "…" in t] == [], name
