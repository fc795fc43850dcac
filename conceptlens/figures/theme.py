"""The look of every ConceptLens figure, in one place: template, fonts and colours.

Importing this module makes TEMPLATE plotly's default template, so every figure built
after it has it without naming it: a template named in `update_layout` is deep-copied
into each figure (8 ms a figure, a quarter of a small figure's build). Figures take
categorical colours from `categorical(n)`; nothing else in `conceptlens/figures/` sets a
font family or a palette of its own.
"""

from __future__ import annotations

import math
import re

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from ..cache import cached

TEMPLATE = "conceptlens"
# Liberation Sans has Arial's metrics: where Arial is missing (Linux servers, the Docker
# image) text keeps its width, and the PDF embeds whichever of the two was used.
FONT_FAMILY = "Arial, 'Liberation Sans', Helvetica, sans-serif"
# Plotly sizes type in CSS pixels (96 per inch): 10 px is 7.5 pt, the smallest type a
# paper figure may carry at its printed size. figures/export.py raises anything smaller.
MIN_FONT_PX = 10
BASE_FONT_PX = 11

# Okabe & Ito (2008): distinguishable with every common colour-vision deficiency.
OKABE_ITO = (
    "#E69F00",
    "#56B4E9",
    "#009E73",
    "#F0E442",
    "#0072B2",
    "#D55E00",
    "#CC79A7",
    "#000000",
)
# Paul Tol's "muted" scheme, colour-blind safe, for 9-17 categories together with the above.
TOL_MUTED = (
    "#332288",
    "#88CCEE",
    "#44AA99",
    "#117733",
    "#999933",
    "#DDCC77",
    "#CC6677",
    "#882255",
    "#AA4499",
)
# Sequential and diverging scales that are perceptually uniform and colour-blind safe.
SEQUENTIAL = "Viridis"
DIVERGING = "RdBu_r"


def _lab(rgb: np.ndarray) -> np.ndarray:
    """CIELAB (D65) of sRGB colours in [0, 1], shape (n, 3)."""
    lin = np.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    xyz = lin @ np.array([[0.4124, 0.2126, 0.0193], [0.3576, 0.7152, 0.1192], [0.1805, 0.0722, 0.9505]])
    xyz = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.column_stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])])


def _hex_rgb(colours) -> np.ndarray:
    return np.array([[int(c[i : i + 2], 16) / 255 for i in (1, 3, 5)] for c in colours])


def lightness(colour: str) -> float:
    """CIELAB L* (0 black .. 100 white) of a `#RRGGBB` colour."""
    return float(_lab(_hex_rgb([colour]))[0, 0])


# No category is drawn darker than this (CIELAB L*): the selection ring is black, and a
# near-black cluster (Okabe-Ito's black, Tol's indigo, a dark teal at 48 colours) looked
# like a ringed one. Added colours lighter than MAX_LIGHTNESS would be hard to see on white.
MIN_LIGHTNESS, MAX_LIGHTNESS = 30, 88
PALETTE = tuple(c for c in OKABE_ITO + TOL_MUTED if lightness(c) >= MIN_LIGHTNESS)


@cached(reads=(), maxsize=8)
def _extended(n: int) -> tuple[str, ...]:
    # Greedy farthest-point choice in CIELAB over an sRGB grid: each added colour is the
    # one farthest from every colour taken so far, so no two categories look alike (a
    # golden-angle hue walk gave pairs 3 units apart at 48 colours). Colours too light
    # to see on white are left out.
    levels = np.linspace(0, 1, 14)
    grid = np.array(np.meshgrid(levels, levels, levels, indexing="ij")).reshape(3, -1).T
    lab = _lab(grid)
    keep = (lab[:, 0] < MAX_LIGHTNESS) & (lab[:, 0] > MIN_LIGHTNESS)
    grid, lab = grid[keep], lab[keep]
    out = list(PALETTE)
    nearest = np.min(np.linalg.norm(lab[:, None, :] - _lab(_hex_rgb(out))[None, :, :], axis=2), axis=1)
    while len(out) < n:
        i = int(np.argmax(nearest))
        r, g, b = (round(v * 255) for v in grid[i])
        out.append(f"#{r:02X}{g:02X}{b:02X}")
        nearest = np.minimum(nearest, np.linalg.norm(lab - lab[i], axis=1))
    return tuple(out)


def categorical(n: int) -> list[str]:
    """`n` distinct colours: the colour-blind-safe palette first, then, for more
    categories, colours chosen as far (in CIELAB) from all earlier ones as possible."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if n <= len(PALETTE):
        return list(PALETTE[:n])
    return list(_extended(n))


# An axis spans at least this share of its metric's scale (of [0, 1] for a share), so a
# change of 0.002 in an accuracy does not fill the axis; and the data are padded by PAD.
MIN_SPAN_SHARE = 0.1
PAD_SHARE = 0.06


def _nice_step(span: float) -> float:
    raw = span / 10
    mag = 10 ** math.floor(math.log10(raw))
    return next(s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw)


def data_range(
    values, scale: tuple[float, float] | None = None, include=(), min_share: float = MIN_SPAN_SHARE
) -> list[float]:
    """An axis range that shows the data honestly: every finite value of `values` (and of
    `include`, e.g. chance) with padding, at least `min_share` of the metric's `scale`
    wide (of the data's magnitude when the metric has no bounded scale), inside the scale
    but for the padding. The ends are rounded out to a tenth of the span. Where the data
    reach near the scale's lower end the axis starts there."""
    v = np.asarray([*np.ravel(np.asarray(values, dtype=float)), *include], dtype=float)
    v = v[np.isfinite(v)]
    if not v.size:
        return list(scale) if scale else [0.0, 1.0]
    lo, hi = float(v.min()), float(v.max())
    width = (scale[1] - scale[0]) if scale else max(abs(lo), abs(hi)) or 1.0
    need = min_share * width
    if hi - lo < need:
        mid = (lo + hi) / 2
        lo, hi = mid - need / 2, mid + need / 2
        if scale:  # slid inside the scale, keeping the width
            shift = max(0.0, scale[0] - lo) - max(0.0, hi - scale[1])
            lo, hi = lo + shift, hi + shift
    step = _nice_step(hi - lo)
    pad = PAD_SHARE * (hi - lo)
    if scale and lo - scale[0] <= 2 * step:  # the data almost reach the scale's start
        lo = scale[0]
    lo = math.floor((lo - pad) / step) * step if not (scale and lo == scale[0]) else lo - pad
    hi = math.ceil((hi + pad) / step) * step
    if scale and hi > scale[1] + pad:
        hi = scale[1] + pad
    return [round(lo, 10), round(hi, 10)]


def range_title(title: str, rng, zero: float = 0.0) -> str:
    """`title`, saying so where the axis does not start at `zero` (the scale's start)."""
    lo = rng[0]
    if lo <= zero + 1e-9 or (rng[1] - lo) and (lo - zero) / (rng[1] - lo) < 0.08:
        return title
    return f"{title} (axis from {lo:.3g})"


def break_name(name: str, limit: int = 18) -> str:
    """A long name broken onto lines of at most `limit` characters after '-', '_' or a
    space (never inside a word), so a tick label keeps every character."""
    name = str(name)
    if len(name) <= limit:
        return name
    parts = re.findall(r"[^-_ ]+[-_ ]?|[-_ ]", name)
    lines = [""]
    for p in parts:
        if lines[-1] and len(lines[-1]) + len(p.rstrip()) > limit:
            lines.append("")
        lines[-1] += p
    return "<br>".join(line.rstrip(" ") for line in lines)


def umap_axis(n: int, **extra) -> dict:
    """Axis `n` (1 or 2) of a UMAP: named, without ticks (its coordinates mean nothing)."""
    return dict(title=f"UMAP {n}", showticklabels=False, zeroline=False, **extra)


def _register() -> None:
    base = pio.templates["plotly_white"]
    t = go.layout.Template(base)
    t.layout.font = dict(family=FONT_FAMILY, size=BASE_FONT_PX, color="#222")
    t.layout.colorway = list(PALETTE)
    t.layout.colorscale = dict(sequential=SEQUENTIAL, diverging=DIVERGING)
    pio.templates[TEMPLATE] = t
    pio.templates.default = TEMPLATE


_register()
