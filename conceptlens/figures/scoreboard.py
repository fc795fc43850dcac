"""Figures of the Scoreboard page (views/scoreboard.py): every concept's purity against its
coherence, each source's scores against the nulls, a concept's members on the projection
and the concept across checkpoints. Legends name sources by their declared titles
(`analysis.scoreboard.SOURCES`), in that order; a source's colour and marker follow from
its place there and its role (concepts in colour, the null grey, the ceilings dark)."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..analysis.scoreboard import BY_NAME, SOURCES
from ..metrics import score_names
from . import theme
from .theme import data_range, range_title

_CONCEPT_COLOURS = theme.categorical(sum(s.role == "concept" for s in SOURCES))
_CEILING_COLOURS = ("#000000", "#6B6B6B")
NULL_COLOUR = "#8C8C8C"
SETS_COLOUR = "#56B4E9"
SYMBOLS = {"concept": "circle", "null": "x", "ceiling": "diamond"}
HIGHLIGHT = "#D55E00"
MEMBER_COLOUR = "#000000"
OTHER = "#C4C4C4"


def _interval_bars(value, lo, hi, color: str, thickness: float) -> dict:
    """Plotly error bars from `value` to each interval end (a missing end: no bar)."""
    value = np.asarray(value, np.float64)
    return dict(
        type="data",
        symmetric=False,
        thickness=thickness,
        width=3,
        color=color,
        array=np.nan_to_num(np.asarray(hi, np.float64) - value, nan=0.0).clip(0),
        arrayminus=np.nan_to_num(value - np.asarray(lo, np.float64), nan=0.0).clip(0),
    )


def _styles() -> dict[str, tuple[str, str]]:
    out, c, k = {}, 0, 0
    for s in SOURCES:
        if s.role == "concept":
            colour, c = _CONCEPT_COLOURS[c], c + 1
        elif s.role == "null":
            colour = NULL_COLOUR
        else:
            colour, k = _CEILING_COLOURS[k % len(_CEILING_COLOURS)], k + 1
        out[s.name] = (colour, SYMBOLS.get(s.role, "circle"))
    return out


STYLES = _styles()


def style(source: str) -> tuple[str, str]:
    """(colour, marker symbol) of a source; an undeclared one grey circles."""
    return STYLES.get(source, (OTHER, "circle"))


def source_title(source: str) -> str:
    return BY_NAME[source].title if source in BY_NAME else str(source)


def score_title(score: str) -> str:
    """A score's name as axes and tables show it (metrics/score_names.py, short)."""
    return score_names.title(score, short=True)


def _legend_above(fig: go.Figure) -> None:
    """A horizontal legend in rows above the plot: the export gives it the rows it needs
    at any width (figures/export.py), so a one-column figure keeps every entry readable."""
    fig.update_layout(
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, xanchor="left"),
        margin=dict(l=50, r=10, t=10, b=40),
    )


def _wrap(title: str, width: int = 18) -> str:
    """A source title on lines of at most `width` characters, broken at spaces only."""
    return "<br>".join(textwrap.wrap(title, width)) or title


def _empty_note(fig: go.Figure, text: str) -> None:
    fig.add_annotation(text=text, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)


def _band_shape(axis: str, lo, hi, colour: str, opacity: float = 0.18) -> list[dict]:
    """A shaded band from `lo` to `hi` on `axis` ("x" or "y") across the plot, edged by lines."""
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return []
    other = "y" if axis == "x" else "x"
    span = {f"{axis}0": lo, f"{axis}1": hi, f"{axis}ref": axis, f"{other}0": 0, f"{other}1": 1}
    span[f"{other}ref"] = f"{other} domain"
    return [
        dict(type="rect", layer="below", line=dict(width=0), fillcolor=colour, opacity=opacity, **span),
        *(
            dict(
                type="line",
                layer="below",
                line=dict(color=colour, width=1, dash="dot"),
                **{
                    f"{axis}0": v,
                    f"{axis}1": v,
                    f"{axis}ref": axis,
                    f"{other}0": 0,
                    f"{other}1": 1,
                    f"{other}ref": f"{other} domain",
                },
            )  # fmt: skip
            for v in (lo, hi)
        ),
    ]


def _band_legend(fig: go.Figure, name: str, colour: str) -> None:
    """A legend entry for a band (shapes have none): an empty trace with a square marker."""
    fig.add_trace(
        go.Scatter(
            x=[None],
            y=[None],
            mode="markers",
            name=name,
            hoverinfo="skip",
            marker=dict(symbol="square", size=10, color=colour, opacity=0.35),
        )  # fmt: skip
    )


def scatter(points: pd.DataFrame, bands: pd.DataFrame, x_score: str, y_score: str) -> go.Figure:
    """Every scored concept's `y_score` (purity) against its `x_score` (coherence), one
    trace per source (SOURCES order); the random directions' 2.5-97.5% band of each
    score shaded (`views.scoreboard.null_bands`)."""
    fig = go.Figure()
    for src in sorted(
        set(points["source"]), key=lambda s: (list(BY_NAME).index(s) if s in BY_NAME else 99, s)
    ):
        m = points[points["source"] == src]
        colour, symbol = style(src)
        fig.add_trace(
            go.Scatter(
                x=m["x"].to_numpy(np.float64),
                y=m["y"].to_numpy(np.float64),
                mode="markers",
                name=source_title(src),
                marker=dict(
                    color=colour, symbol=symbol, size=7, opacity=0.8, line=dict(width=0.5, color=colour)
                ),
                customdata=m[["name"]].astype(str).to_numpy(),
                hovertemplate="%{customdata[0]}<br>%{x:.2f}, %{y:.2f}<extra>"
                + source_title(src)
                + "</extra>",
            )
        )
    d = bands[bands["null"] == "random_directions"].set_index("score")
    shapes = []
    for axis, score in (("x", x_score), ("y", y_score)):
        if score in d.index:
            shapes += _band_shape(axis, d.loc[score, "lo"], d.loc[score, "hi"], NULL_COLOUR, 0.12)
    if shapes:
        _band_legend(fig, "random directions, 95%", NULL_COLOUR)
    xs = np.concatenate([points["x"].to_numpy(np.float64), d["lo"].reindex([x_score]).to_numpy(np.float64)])
    ys = np.concatenate([points["y"].to_numpy(np.float64), d["hi"].reindex([y_score]).to_numpy(np.float64)])
    xr = data_range(xs, (0.0, 1.0), include=[0.5])
    yr = data_range(ys, (0.0, 1.0))
    fig.update_layout(
        shapes=shapes,
        xaxis=dict(range=xr, title=range_title(score_title(x_score), xr)),
        yaxis=dict(range=yr, title=range_title(score_title(y_score), yr)),
    )
    _legend_above(fig)
    if points.empty:
        _empty_note(fig, "no concept has both scores")
    return fig


def sources(values: pd.DataFrame, summary: pd.DataFrame, bands: pd.DataFrame, score: str) -> go.Figure:
    """Per source (a row each, SOURCES order top down): its concepts' `score` as points,
    their mean with its 95% interval (`views.scoreboard.source_summary`) as a black bar,
    and the two nulls' 2.5-97.5% bands: random directions (grey) and random sets of N
    images (blue)."""
    order = sorted(set(values["source"]), key=lambda s: (list(BY_NAME).index(s) if s in BY_NAME else 99, s))
    labels = {s: _wrap(source_title(s)) for s in order}
    fig = go.Figure()
    for i, src in enumerate(order):
        m = values[values["source"] == src]
        colour, symbol = style(src)
        # Spread within the row by rank, not at random: a figure is the same at every draw.
        n = len(m)
        offset = (np.arange(n) % 5 - 2) * 0.08 if n > 1 else np.zeros(n)
        fig.add_trace(
            go.Scatter(
                x=m["value"].to_numpy(np.float64),
                y=i + offset,
                mode="markers",
                name=source_title(src),
                showlegend=False,
                marker=dict(
                    color=colour, symbol=symbol, size=6, opacity=0.6, line=dict(width=0.5, color=colour)
                ),
                customdata=m[["name"]].astype(str).to_numpy(),
                hovertemplate="%{customdata[0]}: %{x:.3f}<extra>" + source_title(src) + "</extra>",
            )
        )
    s = summary[summary["score"] == score].set_index("source").reindex(order)
    if len(s):
        mean = s["mean"].to_numpy(np.float64)
        fig.add_trace(
            go.Scatter(
                x=mean,
                y=np.arange(len(order)) + 0.3,
                mode="markers",
                name="mean, 95% interval",
                marker=dict(color="#000000", symbol="line-ns-open", size=12, line=dict(width=2)),
                error_x=_interval_bars(mean, s["lo"], s["hi"], "#000000", 1.5),
                customdata=np.column_stack([s["n"].fillna(0).astype(int), s["lo"], s["hi"]]),
                hovertemplate="mean %{x:.3f} [%{customdata[1]:.3f}, %{customdata[2]:.3f}] "
                "over %{customdata[0]} concepts<extra></extra>",
            )
        )
    shapes = []
    b = bands[bands["score"] == score].set_index("null")
    for null, name, colour in (
        ("random_directions", "random directions, 95%", NULL_COLOUR),
        ("random_sets", "random sets of N images, 95%", SETS_COLOUR),
    ):
        if null in b.index:
            band = _band_shape("x", b.loc[null, "lo"], b.loc[null, "hi"], colour)
            if band:
                shapes += band
                _band_legend(fig, name, colour)
    xs = [values["value"].to_numpy(np.float64)]
    xs += [b[c].to_numpy(np.float64) for c in ("lo", "hi") if c in b]
    xr = data_range(np.concatenate(xs) if xs else [], score_names.scale(score))
    fig.update_layout(
        shapes=shapes,
        xaxis=dict(range=xr, title=range_title(score_title(score), xr)),
        yaxis=dict(
            tickmode="array",
            tickvals=list(range(len(order))),
            ticktext=[labels[s] for s in order],
            range=[len(order) - 0.5, -0.6],
            automargin=True,
            showgrid=False,
            zeroline=False,
        ),  # fmt: skip
    )
    _legend_above(fig)
    if values.empty:
        _empty_note(fig, f"no concept has a value of {score_title(score)}")
    return fig


def projection(points: pd.DataFrame, name: str, density: pd.DataFrame | None = None) -> go.Figure:
    """The checkpoint's 2-D projection, the concept's members (`member`) in black on the
    other images in grey; with `density` (`views.scoreboard.projection_density`: a
    projection too large to draw point by point) the images are a grey histogram, darker
    where more lie (log scale), under the members' points."""
    fig = go.Figure()
    binned = density is not None and len(density) > 0
    if binned:
        d = density.iloc[0]
        n = int(d["bins"])
        z = np.full((n, n), np.nan)
        z[density["iy"].to_numpy(int), density["ix"].to_numpy(int)] = np.log10(
            density["count"].to_numpy(np.float64)
        )
        fig.add_trace(
            go.Heatmap(
                z=z.astype(np.float32),
                x0=float(d["x0"]) + float(d["dx"]) / 2,
                dx=float(d["dx"]),
                y0=float(d["y0"]) + float(d["dy"]) / 2,
                dy=float(d["dy"]),
                colorscale=[[0.0, "#e4e4e4"], [1.0, "#7a7a7a"]],
                showscale=False,
                hoverinfo="skip",
                name="all images",
            )  # fmt: skip
        )
        _band_legend(fig, f"all {int(density['count'].sum()):,} images (density)", OTHER)
    rest, mine = points[~points["member"].astype(bool)], points[points["member"].astype(bool)]
    if not binned:
        fig.add_trace(
            go.Scattergl(
                x=rest["x"].to_numpy(np.float64),
                y=rest["y"].to_numpy(np.float64),
                mode="markers",
                name="other images",
                marker=dict(color=OTHER, size=4),
                hoverinfo="skip",
            )  # fmt: skip
        )
    fig.add_trace(
        go.Scattergl(
            x=mine["x"].to_numpy(np.float64),
            y=mine["y"].to_numpy(np.float64),
            mode="markers",
            name=f"members of {name}",
            marker=dict(color=MEMBER_COLOUR, size=7, symbol="circle"),
            customdata=mine[["image_id"]].astype(str).to_numpy(),
            hovertemplate="%{customdata[0]}<extra></extra>",
        )  # fmt: skip
    )
    fig.update_layout(xaxis=theme.umap_axis(1), yaxis=theme.umap_axis(2))
    _legend_above(fig)
    if points.empty and not binned:
        _empty_note(fig, "no projection of this checkpoint")
    return fig


def _matched_by(rows: pd.DataFrame) -> str:
    how = set(rows["matched"].dropna()) if "matched" in rows else set()
    if how == {"atoms"}:
        return "matched atom (|cos|)"
    if how == {"members"}:
        return "best match (Jaccard)"
    return "match (atoms by |cos|, else Jaccard)" if how else "match"


def across(rows: pd.DataFrame, score: str, axis: str) -> go.Figure:
    """The concept's match in each checkpoint (x, in `rows`' order: epoch or depth) with
    its `score` and 95% interval; the chosen checkpoint's own concept ringed. The legend
    names how it was matched (atoms by |cosine|, else by members). Hover: the matched
    concept, its Jaccard overlap and |cosine|."""
    fig = go.Figure()
    x = [theme.break_name(str(c), 16) for c in rows["checkpoint_id"]]
    v = rows["value"].to_numpy(np.float64)
    fig.add_trace(
        go.Scatter(
            x=x,
            y=v,
            mode="lines+markers",
            name=_matched_by(rows),
            line=dict(color="#0072B2", width=1.5),
            marker=dict(color="#0072B2", size=7),
            error_y=_interval_bars(v, rows["lo"], rows["hi"], "#0072B2", 1),
            customdata=np.column_stack(
                [
                    rows["name"].astype(str),
                    rows["jaccard"].to_numpy(np.float64),
                    rows["cosine"].to_numpy(np.float64),
                ]
            ),
            hovertemplate="%{customdata[0]}<br>Jaccard %{customdata[1]:.2f} · |cos| %{customdata[2]:.2f}"
            "<br>%{y:.3f}<extra></extra>",
        )  # fmt: skip
    )
    this = rows["this"].astype(bool).to_numpy()
    fig.add_trace(
        go.Scatter(
            x=[xi for xi, t in zip(x, this) if t],
            y=v[this],
            mode="markers",
            name="chosen concept",
            marker=dict(symbol="circle-open", size=14, color=HIGHLIGHT, line=dict(width=2)),
            hoverinfo="skip",
        )  # fmt: skip
    )
    ys = np.concatenate([v, rows["lo"].to_numpy(np.float64), rows["hi"].to_numpy(np.float64)])
    yr = data_range(ys, score_names.scale(score))
    fig.update_layout(
        # Room left of the first category: its (wrapped) name must not reach the y ticks.
        xaxis=dict(
            title=axis, type="category", categoryorder="array", categoryarray=x, range=[-0.8, len(x) - 0.2]
        ),
        yaxis=dict(range=yr, title=range_title(score_title(score), yr)),
    )
    _legend_above(fig)
    if rows.empty:
        _empty_note(fig, "the concept has no members")
    return fig
