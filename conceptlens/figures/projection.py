"""A projection of any size: the binned overview of `views.projection_window`, or its
points in the viewport (`figures.clusters.projection_scatter`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .clusters import projection_scatter, region_shape
from .export import SCREEN_ONLY
from .theme import SEQUENTIAL, umap_axis

# What the overview's bins can be coloured by: column of `binned`, colour bar title.
DENSITY = {"images": ("count", "images"), "purity": ("purity", "mean purity")}


PAD = 0.02  # share of the viewport left around the overview's bins


def _padded(lo: float, hi: float) -> list[float]:
    return [lo - PAD * (hi - lo), hi + PAD * (hi - lo)]


def _grid(bins: pd.DataFrame, n: int, column: str) -> np.ndarray:
    z = np.full((n, n), np.nan)
    z[bins["iy"].to_numpy(int), bins["ix"].to_numpy(int)] = bins[column].astype(float).to_numpy()
    return z


def projection_density(
    bins: pd.DataFrame,
    viewport,
    n_bins: int,
    value: str = "images",
    title: str | None = None,
    region=None,
    dragmode: str = "zoom",
) -> go.Figure:
    """The overview of a projection too large to draw point by point: `views.
    projection_window.binned`'s bins as a heatmap over `viewport`, coloured by the
    number of images (log scale) or the mean purity of their clusters (`value`).

    An invisible marker at each non-empty bin's centre carries its hover text (images,
    majority cluster and its share, purity) and makes the plot selectable: a box or a
    lasso drawn on it reports its outline, a click the bin's centre. `region` (kind,
    vertices) is drawn as the plot's selection.
    """
    if value not in DENSITY:
        raise ValueError(f"value must be one of {', '.join(DENSITY)}, got {value!r}")
    column, label = DENSITY[value]
    x0, x1, y0, y1 = viewport
    dx, dy = (x1 - x0) / n_bins, (y1 - y0) / n_bins
    z = _grid(bins, n_bins, column)
    bar = dict(title=dict(text=label))
    if value == "images":
        z = np.log10(z)
        top = max(1, math.ceil(np.nanmax(z))) if len(bins) else 1
        bar.update(tickvals=list(range(top + 1)), ticktext=[f"{10**t:,}" for t in range(top + 1)])
    fig = go.Figure(
        go.Heatmap(
            z=z.astype(np.float32),  # sent as binary: half the bytes of float64
            x0=x0 + dx / 2,
            dx=dx,
            y0=y0 + dy / 2,
            dy=dy,
            colorscale=SEQUENTIAL,
            zmin=0 if value == "images" else 0.0,
            zmax=None if value == "images" else 1.0,
            colorbar=bar,
            hoverinfo="skip",
            name=label,
        )
    )
    # Hover data as float32 numbers: plotly sends them as one binary array and copies them
    # in one piece, where an object array of strings costs a deep copy per value (40 ms and
    # 0.6 MB per rerun at 14,000 bins). Bins lacking a cluster or a purity, rare, keep text.
    cluster = bins["cluster"].astype(float).to_numpy()
    purity = bins["purity"].astype(float).round(2).to_numpy()
    share = (100 * bins["share"].astype(float)).round().to_numpy()
    count = bins["count"].astype(float).to_numpy()
    whole = np.isfinite(cluster) & np.isfinite(purity)
    xs, ys = bins["x"].to_numpy(np.float32), bins["y"].to_numpy(np.float32)
    parts = [(whole, np.column_stack([count, cluster, share, purity]).astype(np.float32), ":.2f")]
    if not whole.all():
        text = np.column_stack(
            [
                count,
                bins["cluster"].astype("string").fillna("\u2014").to_numpy(),
                share,
                bins["purity"].astype(float).round(2).astype("string").fillna("\u2014").to_numpy(),
            ]
        )
        parts.append((~whole, text, ""))
    # A hover template has no plural: bins of one image get a trace of their own.
    for rows, custom, purity_format in parts:
        for noun, of_noun in (("images", count != 1), ("image", count == 1)):
            take = rows & of_noun
            if not take.any():
                continue
            fig.add_trace(
                go.Scattergl(
                    x=xs[take],
                    y=ys[take],
                    mode="markers",
                    marker=dict(size=6, opacity=0),
                    selected=dict(marker=dict(opacity=0)),
                    unselected=dict(marker=dict(opacity=0)),
                    customdata=custom[take],
                    hovertemplate=f"%{{customdata[0]:,}} {noun}<br>mostly cluster %{{customdata[1]}} "
                    f"(%{{customdata[2]}}%)<br>mean purity %{{customdata[3]{purity_format}}}"
                    "<br>click to zoom in<extra></extra>",
                    showlegend=False,
                    name="bins",
                    meta=SCREEN_ONLY,
                )
            )
    fig.update_layout(
        title=title,
        dragmode=dragmode,
        clickmode="event+select",
        # A margin of PAD around the bins, so the outermost can be boxed or clicked.
        xaxis=umap_axis(1, range=_padded(x0, x1), showgrid=False),
        yaxis=umap_axis(2, range=_padded(y0, y1), showgrid=False),
        margin=dict(l=40, r=20, t=50 if title else 20, b=40),
        height=560,
        selections=[region_shape(region)] if region is not None else None,
    )
    if bins.empty:
        fig.add_annotation(text="no images here", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    return fig


def projection_window_figure(
    window: pd.DataFrame,
    color: str | None = "cluster",
    value: str = "images",
    highlight: int | None = None,
    region=None,
    zoomed: bool = False,
    title: str | None = None,
) -> go.Figure:
    """`views.projection_window.window`'s answer drawn: its bins (`projection_density`,
    coloured by `value`) or its points (`projection_scatter`, coloured by `color`, the
    `highlight` cluster ringed), the axes fixed to the viewport when `zoomed`."""
    a = window.attrs
    if a.get("kind") == "bins":
        return projection_density(window, a["viewport"], a["bins"], value, title=title, region=region)
    fig = projection_scatter(
        window, color=color, title=title, highlight=highlight, region=region, dragmode="zoom"
    )
    if zoomed and a.get("viewport") is not None:
        x0, x1, y0, y1 = a["viewport"]
        fig.update_layout(xaxis_range=[x0, x1], yaxis_range=[y0, y1])
    return fig
