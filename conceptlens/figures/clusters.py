"""Figures of one checkpoint's clusters: purity vs coherence, the 2-D projection."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..cache import cached
from . import theme
from .theme import MIN_FONT_PX, OKABE_ITO, data_range, range_title

SERIES = {
    "coherence_random": ("random negatives", OKABE_ITO[4], "circle"),
    "coherence_hard": ("hard negatives", OKABE_ITO[5], "diamond"),
}
# Legends of more categories than this (figures/similarity.py) are left out there.
MAX_LEGEND = 24
# Distinct colours for up to 48 categories (colour-blind-safe ones first).
PALETTE = theme.categorical(48)
HIGHLIGHT = "#000000"
# A projection coloured by more categories than MAX_LEGEND (224 clusters, 1,000 labels)
# colours only the FOCUS ones that matter here and greys the rest: hundreds of colours
# cannot be told apart and no legend holds them (the hover still names every point's).
FOCUS = 10
OTHER = "#C4C4C4"


@cached(reads=(), maxsize=65_536)  # the same captions on every rerun; textwrap is slow
def _short(text, width: int = 60) -> str:
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return ""
    return textwrap.shorten(str(text), width=width, placeholder="…")


def purity_coherence(
    metrics: pd.DataFrame, title: str | None = None, selected: int | None = None
) -> go.Figure:
    """laina2020 Fig. 2: each cluster's purity (x) against its 2AFC coherence (y).

    Random and hard negatives are two series; error bars are the clusters'
    95% intervals (`coherence_*_lo/hi`). customdata[0] of every point is its cluster
    (a click on it names the cluster); the `selected` cluster's points are ringed.
    """
    fig = go.Figure()
    ringed_x, ringed_y = [], []
    for col, (name, colour, symbol) in SERIES.items():
        if col not in metrics.columns:
            continue
        m = metrics[metrics[col].notna() & metrics["purity"].notna()]
        if m.empty:
            continue
        y = m[col].astype(float)
        err = {}
        if f"{col}_lo" in m.columns and f"{col}_hi" in m.columns:
            err = dict(
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=(m[f"{col}_hi"].astype(float) - y).clip(lower=0),
                    arrayminus=(y - m[f"{col}_lo"].astype(float)).clip(lower=0),
                    thickness=1,
                    width=0,
                    color=colour,
                )
            )
        captions = m["caption"].map(_short) if "caption" in m.columns else pd.Series("", index=m.index)
        fig.add_trace(
            go.Scatter(
                x=m["purity"].astype(float),
                y=y,
                mode="markers",
                name=name,
                marker=dict(
                    color=colour, symbol=symbol, size=7, opacity=0.8, line=dict(width=0.5, color="white")
                ),
                customdata=np.column_stack(
                    [m["cluster"].to_numpy(), m["size"].to_numpy(), captions.to_numpy()]
                ),
                hovertemplate=(
                    "cluster %{customdata[0]} (%{customdata[1]} images)<br>"
                    "purity %{x:.2f} · coherence %{y:.2f}<br>%{customdata[2]}"
                    f"<extra>{name}</extra>"
                ),
                **err,
            )
        )
        if selected is not None:
            mine = m["cluster"].astype(int) == int(selected)
            ringed_x += list(m.loc[mine, "purity"].astype(float))
            ringed_y += list(y[mine])
    if ringed_x:
        fig.add_trace(
            go.Scatter(
                x=ringed_x,
                y=ringed_y,
                mode="markers",
                name=f"cluster {selected}",
                marker=dict(symbol="circle-open", size=13, color=HIGHLIGHT, line=dict(width=2)),
                customdata=[[int(selected), "", ""]] * len(ringed_x),
                hoverinfo="skip",
            )
        )
    # Ranges that show where the clusters are (both are shares, chance at 0.5 is kept in
    # view); an axis that does not start at 0 says so in its title.
    shown = [t for t in fig.data if t.x is not None and len(t.x)]
    xrange = data_range(np.concatenate([np.asarray(t.x, float) for t in shown]) if shown else [], (0.0, 1.0))
    ys = [np.asarray(t.y, float) for t in shown]
    ys += [
        np.asarray(t.y, float) + np.asarray(t.error_y.array, float)
        for t in shown
        if t.error_y.array is not None
    ]
    ys += [
        np.asarray(t.y, float) - np.asarray(t.error_y.arrayminus, float)
        for t in shown
        if t.error_y.arrayminus is not None
    ]
    yrange = data_range(np.concatenate(ys) if ys else [], (0.0, 1.0), include=[0.5])
    fig.update_layout(
        # What add_hline(0.5, annotation_text="chance") draws, written out: add_hline
        # costs a quarter of this figure's build.
        shapes=[
            dict(
                type="line",
                x0=0,
                x1=1,
                xref="x domain",
                y0=0.5,
                y1=0.5,
                yref="y",
                line=dict(color="gray", dash="dot", width=1),
            )
        ],
        annotations=[
            dict(
                text="chance",
                showarrow=False,
                x=1,
                xanchor="right",
                xref="x domain",
                y=0.5,
                yanchor="top",
                yref="y",
            )
        ],
        title=title,
        xaxis=dict(range=xrange, title=range_title("purity", xrange)),
        yaxis=dict(range=yrange, title=range_title("coherence (2AFC)", yrange)),
        # Above the plot, in one row: inside it covered the low-purity clusters' error bars
        # (issue 47); the export gives the row its room at any width.
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, xanchor="left"),
        margin=dict(l=50, r=10, t=40 if title else 10, b=40),
        clickmode="event+select",
    )
    if not fig.data:
        fig.add_annotation(
            text="no cluster has both purity and coherence",
            showarrow=False,
            xref="paper",
            yref="paper",
            x=0.5,
            y=0.5,
        )
    return fig


def is_categorical(s: pd.Series) -> bool:
    return (
        not (pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s))
        or s.dropna().nunique() <= 12
        and pd.api.types.is_integer_dtype(s)
    )


def categories(vals: pd.Series) -> list[str]:
    """The distinct values, numeric ones (cluster ids) in numeric order, missing last."""

    def key(v):
        try:
            return (0, float(v), "")
        except ValueError:
            return (1 if v != "(none)" else 2, 0.0, v)

    return sorted(vals.unique(), key=key)


def _label_positions(pts: pd.DataFrame, first=None, spacing: float = 0.1) -> pd.DataFrame:
    """Median point of each cluster, largest clusters (and `first`) first, leaving out one
    closer than `spacing` (a share of the plot's width and height) to one kept: ids that
    would print over each other at a single column's width (two digits at 10 px: a tenth
    of the plot there)."""
    key = pts["cluster"].astype("string")
    med = pts.groupby(key)[["x", "y"]].median()
    size = key.value_counts()
    order = sorted(med.index, key=lambda c: (c != str(first), -size[c], c))
    span = (pts[["x", "y"]].max() - pts[["x", "y"]].min()).replace(0, 1.0)
    # Arrays, not a pandas lookup per pair: 224 clusters made 25,000 of them (1.3 s).
    p = (med.loc[order] / span).to_numpy()
    kept: list[int] = []
    for i in range(len(order)):
        if not kept or (np.abs(p[kept] - p[i]) > spacing).any(axis=1).all():
            kept.append(i)
    return med.loc[[order[i] for i in kept]]


def focus_categories(vals: pd.Series, cats: list, clusters: pd.Series | None, highlight) -> list:
    """The FOCUS categories coloured when there are too many to colour all: the most
    frequent among the `highlight` cluster's points (so colouring by label shows where
    the chosen cluster's labels lie), then the largest of all (colouring by cluster: the
    chosen one and the largest others); ties in category order."""
    rank = {c: i for i, c in enumerate(cats)}

    def by_size(pool: pd.Series) -> list:
        counts = pool.value_counts()
        return sorted(counts.index, key=lambda c: (-counts[c], rank[c]))

    first = []
    if highlight is not None and clusters is not None:
        mine = clusters.astype("Int64").eq(int(highlight)).fillna(False).to_numpy(bool)
        first = by_size(vals[mine]) if mine.any() else []
    return (first + [c for c in by_size(vals) if c not in first])[:FOCUS]


def region_shape(region) -> dict:
    """A drawn selection (`views.clusters.parse_region`'s kind and vertices) as a
    `layout.selections` entry, so a region restored from a link is drawn again."""
    kind, pts = region
    if kind == "box":
        return dict(type="rect", x0=pts[0][0], x1=pts[1][0], y0=pts[0][1], y1=pts[1][1])
    path = "M" + "L".join(f"{x},{y}" for x, y in pts) + "Z"
    return dict(type="path", path=path)


def projection_scatter(
    points: pd.DataFrame,
    color: str | None = "cluster",
    title: str | None = None,
    categorical: bool | None = None,
    highlight: int | None = None,
    region=None,
    dragmode: str = "select",
) -> go.Figure:
    """2-D projection (x, y) of a checkpoint's images, coloured by a column.

    customdata of every point is [image_id, cluster, colour value], so a click or a
    box or lasso selection names its images. Categorical colours: one trace and one
    distinct colour per value (`theme.categorical`), the legend in value order, the
    largest categories drawn first so small ones are never buried; past MAX_LEGEND
    values only the FOCUS ones of `focus_categories` are coloured, over one grey trace of
    the others. Numeric colours: a colour scale. The `highlight` cluster's points are ringed
    on top; `region` (kind, vertices) is drawn as the plot's selection. With
    `dragmode="zoom"` a click selects the point under it (in "select" mode Plotly only
    clears the selection).
    """
    fig = go.Figure()
    pts = points
    hover = (
        "%{customdata[0]}<br>cluster %{customdata[1]}"
        + (f"<br>{color}: %{{customdata[2]}}" if color and color != "cluster" else "")
        + "<extra></extra>"
    )

    # Built once for all points and cut per trace with boolean masks.
    val = pts[color] if color in pts.columns else pd.Series("", index=pts.index)
    if pd.api.types.is_float_dtype(val):
        val = val.round(4)  # the hover's digits: 0.123 rather than 0.12345678901234 per point
    clus = pts["cluster"] if "cluster" in pts.columns else pd.Series("", index=pts.index)
    all_custom = np.column_stack(
        [
            pts["image_id"].astype(str).to_numpy(),
            clus.astype("string").fillna("\u2014").to_numpy(),
            val.astype("string").fillna("\u2014").to_numpy(),
        ]
    )
    # float32: Plotly sends arrays as typed binary, so this halves their bytes per rerun
    # (7 significant digits are far finer than a pixel).
    xs, ys = pts["x"].to_numpy("float32"), pts["y"].to_numpy("float32")

    def points(mask=None, **trace):
        """One WebGL trace of the points in `mask` (all: None), with their hover data."""
        sel = slice(None) if mask is None else mask
        fig.add_trace(
            go.Scattergl(
                x=xs[sel], y=ys[sel], mode="markers", customdata=all_custom[sel], hovertemplate=hover, **trace
            )
        )

    n = len(pts)
    marker = dict(size=7 if n <= 2_000 else 5 if n <= 10_000 else 3, opacity=0.7)
    cat = (
        categorical
        if categorical is not None
        else color in pts.columns and (color in ("cluster", "label") or is_categorical(pts[color]))
    )
    if color is None or color not in pts.columns:
        points(marker=marker, showlegend=False)
    elif not cat:
        points(
            showlegend=False,
            marker=dict(
                **marker,
                color=pts[color].to_numpy("float32"),
                colorscale="Viridis",
                showscale=True,
                colorbar=dict(title=dict(text=color)),
            ),
        )
    else:
        vals = pts[color].astype("string").fillna("(none)")
        cats = categories(vals)
        rank = {c: i for i, c in enumerate(cats)}
        shown = cats
        if len(cats) > MAX_LEGEND:
            clusters = pts["cluster"] if "cluster" in pts.columns else None
            shown = focus_categories(vals, cats, clusters, highlight)
            rest = ~vals.isin(shown).to_numpy(bool)
            points(
                rest,
                name=f"{len(cats) - len(shown)} other {color} values",
                legendrank=2,
                marker=dict(**marker, color=OTHER),
            )
        colours = dict(zip(shown, theme.categorical(len(shown))))
        codes = vals.to_numpy(object)
        sizes = vals.value_counts()
        # Large categories first: every later (smaller) one is drawn over them.
        for v in sorted(shown, key=lambda c: (-sizes[c], rank[c])):
            points(
                codes == v, name=str(v), legendrank=1000 + rank[v], marker=dict(**marker, color=colours[v])
            )
    many = cat and color in pts.columns and pts[color].nunique(dropna=False) > 12
    if highlight is not None and "cluster" in pts.columns:
        mine = pts["cluster"].astype("Int64").eq(int(highlight)).fillna(False).to_numpy(bool)
        points(
            mine,
            name=f"cluster {highlight} (selected)",
            legendrank=1,
            marker=dict(symbol="circle-open", size=marker["size"] + 4, color=HIGHLIGHT, line=dict(width=1.5)),
        )
    if cat and color == "cluster" and many:
        # Many clusters: each one's id at its median point, so a printed figure (where
        # the legend cannot hold them all) still says which cluster is where.
        med = _label_positions(pts, highlight)
        fig.add_trace(
            go.Scatter(
                x=med["x"],
                y=med["y"],
                text=list(med.index),
                mode="text",
                textfont=dict(size=MIN_FONT_PX, color="#222"),
                hoverinfo="skip",
                showlegend=False,
            )
        )
    fig.update_layout(
        title=title,
        dragmode=dragmode,
        clickmode="event+select",
        xaxis=theme.umap_axis(1),
        yaxis=theme.umap_axis(2),
        legend=dict(
            title=dict(text=color or ""),
            itemsizing="constant",
            font=dict(size=MIN_FONT_PX if many else None),
            tracegroupgap=0,
        ),
        margin=dict(l=40, r=20, t=50 if title else 20, b=40),
        height=560,
        selections=[region_shape(region)] if region is not None else None,
    )
    return fig


# Legend entries a figure's side holds at one column (3.5 in, 0.85 as tall as wide).
SIDE_LEGEND = 12


def legend_above(fig: go.Figure, most: int = SIDE_LEGEND) -> go.Figure:
    """`fig` with its legend in rows above the plot when it has more than `most` entries
    (a UMAP coloured by 22 clusters): on the right they run past the bottom of a printed
    figure, above it the export gives the legend the rows it needs at any width."""
    names = {t.legendgroup or t.name for t in fig.data if t.showlegend is not False and t.name}
    if len(names) > most:
        fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, xanchor="left"))
    return fig


def label_histogram(counts: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Horizontal bars of `views.clusters.label_counts` (label_name, images), the most
    frequent label on top."""
    fig = go.Figure(
        go.Bar(
            x=counts["images"],
            y=counts["label_name"].astype(str).map(lambda t: _short(t, 28)),
            orientation="h",
            marker=dict(color=OKABE_ITO[4]),
            customdata=counts["label_name"].astype(str),
            hovertemplate="%{customdata}: %{x} images<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        xaxis=dict(title="images", rangemode="tozero"),
        yaxis=dict(autorange="reversed", automargin=True, tickfont=dict(size=MIN_FONT_PX)),
        margin=dict(l=10, r=20, t=40 if title else 10, b=40),
        height=max(220, 18 * len(counts) + 80),
        bargap=0.15,
    )
    if counts.empty:
        fig.add_annotation(
            text="no images selected", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5
        )
    return fig
