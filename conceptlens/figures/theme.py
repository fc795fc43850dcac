"""The look of every ConceptLens figure, in one place: template, fonts and colours.

Figures pass `template=TEMPLATE` and take categorical colours from `categorical(n)`;
nothing else in `conceptlens/figures/` sets a font family or a palette of its own.
"""

from __future__ import annotations

import colorsys

import plotly.graph_objects as go
import plotly.io as pio

TEMPLATE = "conceptlens"
FONT_FAMILY = "Arial, Helvetica, sans-serif"
# Plotly sizes type in CSS pixels (96 per inch): 10 px is 7.5 pt, the smallest type a
# paper figure may carry at its printed size.
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
PALETTE = OKABE_ITO + TOL_MUTED
# Sequential and diverging scales that are perceptually uniform and colour-blind safe.
SEQUENTIAL = "Viridis"
DIVERGING = "RdBu_r"


def categorical(n: int) -> list[str]:
    """`n` distinct colours: the colour-blind-safe palette first, then further hues spaced
    by the golden angle at alternating lightness, so no two categories share a colour."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    out = list(PALETTE[:n])
    i = 0
    while len(out) < n:
        h = (0.61803398875 * i) % 1.0
        light = (0.35, 0.55, 0.72)[i % 3]
        sat = (0.75, 0.55)[(i // 3) % 2]
        r, g, b = colorsys.hls_to_rgb(h, light, sat)
        c = f"#{round(r * 255):02X}{round(g * 255):02X}{round(b * 255):02X}"
        if c not in out:
            out.append(c)
        i += 1
    return out


def _register() -> None:
    base = pio.templates["plotly_white"]
    t = go.layout.Template(base)
    t.layout.font = dict(family=FONT_FAMILY, size=BASE_FONT_PX, color="#222")
    t.layout.colorway = list(PALETTE)
    t.layout.colorscale = dict(sequential=SEQUENTIAL, diverging=DIVERGING)
    pio.templates[TEMPLATE] = t


_register()
