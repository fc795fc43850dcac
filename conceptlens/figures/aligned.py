"""Figures of aligned projections along a sequence (issue 27; views/aligned.py gives their
data): small multiples of the frames in one shared frame, and the drift of the images
between consecutive frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.base import AXIS_NAMES
from . import theme
from .clusters import FOCUS, HIGHLIGHT, MAX_LEGEND, OTHER, categories, is_categorical
from .theme import MIN_FONT_PX

FADED = 0.3  # opacity of the images outside a selection
ALL = "all images"


def frame_title(epoch, checkpoint_id: str, axis: str = "epoch") -> str:
    """A frame's name: `epoch 3` along training, `layer 2` along a depth sequence (`axis`
    `depth`: its `epoch` column holds the depth), else its checkpoint."""
    if epoch is None or pd.isna(epoch):
        return str(checkpoint_id)
    return f"{AXIS_NAMES[axis]} {int(epoch)}"


def _colour_map(vals: pd.Series) -> tuple[dict, list]:
    """(value -> colour, values in legend order): up to MAX_LEGEND values each a colour, more
    and the FOCUS most frequent ones, the others grey."""
    cats = categories(vals)
    shown = cats
    if len(cats) > MAX_LEGEND:
        counts = vals.value_counts()
        shown = sorted(counts.index[:FOCUS], key=cats.index)
    colours = dict(zip(shown, theme.categorical(len(shown))))
    return colours, shown


def aligned_frames(
    points: pd.DataFrame,
    colour: str = "label_name",
    steps: list[int] | None = None,
    ids=None,
    columns: int = 2,
    axis: str = "epoch",
) -> go.Figure:
    """Small multiples of the frames `steps` of `points` (`views.aligned.points`: step,
    epoch, checkpoint_id, image_id, x, y and the `colour` column), one panel per frame with
    the same axes, titled by epoch (by layer along a depth sequence: `axis` `depth`),
    coloured by `colour` (categorical: one legend entry per value; numeric: one colour
    scale). The images `ids` (a selection) are ringed in black in every panel and the others
    faded, so a group can be followed along the sequence."""
    if points.empty:
        raise ValueError("aligned_frames needs at least one point")
    all_steps = sorted(points["step"].unique())
    steps = all_steps if steps is None else [s for s in steps if s in set(all_steps)]
    pts = points[points["step"].isin(steps)]
    cols = min(columns, len(steps))
    rows = -(-len(steps) // cols)
    meta = pts.groupby("step")[["epoch", "checkpoint_id"]].first()
    titles = [frame_title(meta.loc[s, "epoch"], meta.loc[s, "checkpoint_id"], axis) for s in steps]
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=titles,
        shared_xaxes="all",
        shared_yaxes="all",
        horizontal_spacing=0.03,
        vertical_spacing=0.08 if rows > 1 else 0.0,
    )
    chosen = set(map(str, ids)) if ids is not None else set()
    picked_all = pts["image_id"].astype(str).isin(chosen).to_numpy() if chosen else np.zeros(len(pts), bool)
    vals = pts[colour] if colour in pts.columns else pd.Series("", index=pts.index)
    cat = colour not in pts.columns or colour in ("label", "label_name") or is_categorical(vals)
    size = 3 if len(pts) / max(len(steps), 1) > 1000 else 4
    opacity = FADED if chosen else 0.75
    if cat:
        text = vals.astype("string").fillna("(none)")
        cmap, shown = _colour_map(text)
        colour_of = text.map(lambda v: cmap.get(v, OTHER)).to_numpy(object)
    else:
        num = vals.to_numpy("float64")
        lo, hi = np.nanmin(num), np.nanmax(num)
    hover = "%{customdata[0]}<br>" + f"{colour}: " + "%{customdata[1]}<extra></extra>"
    for i, s in enumerate(steps):
        r, c = i // cols + 1, i % cols + 1
        here = (pts["step"] == s).to_numpy()
        sub = pts[here]
        custom = np.column_stack([sub["image_id"].astype(str), vals[here].astype("string").fillna("—")])
        xs, ys = sub["x"].to_numpy("float32"), sub["y"].to_numpy("float32")
        if cat:
            col = colour_of[here]
            for g, v in enumerate([*shown, None]):
                mask = col == (cmap[v] if v is not None else OTHER)
                if v is None and not mask.any():
                    continue
                fig.add_trace(
                    go.Scattergl(
                        x=xs[mask],
                        y=ys[mask],
                        mode="markers",
                        name=str(v) if v is not None else f"other {colour} values",
                        legendgroup=f"g{g}",  # an id, not workspace text
                        showlegend=i == 0,
                        marker=dict(size=size, color=cmap[v] if v is not None else OTHER, opacity=opacity),
                        customdata=custom[mask],
                        hovertemplate=hover,
                    ),
                    row=r,
                    col=c,
                )
        else:
            fig.add_trace(
                go.Scattergl(
                    x=xs,
                    y=ys,
                    mode="markers",
                    showlegend=False,
                    marker=dict(
                        size=size,
                        color=num[here].astype("float32"),
                        cmin=lo,
                        cmax=hi,
                        colorscale=theme.SEQUENTIAL,
                        opacity=opacity,
                        showscale=i == 0,
                        colorbar=dict(title=dict(text=colour), thickness=10),
                    ),
                    customdata=custom,
                    hovertemplate=hover,
                ),
                row=r,
                col=c,
            )
        if chosen:
            mine = picked_all[here]
            fig.add_trace(
                go.Scattergl(
                    x=xs[mine],
                    y=ys[mine],
                    mode="markers",
                    name=f"selected ({int(mine.sum())} images)",
                    legendgroup="selected",
                    legendrank=1,
                    showlegend=i == 0,
                    marker=dict(symbol="circle-open", size=size + 3, color=HIGHLIGHT, line=dict(width=1)),
                    customdata=custom[mine],
                    hovertemplate=hover,
                ),
                row=r,
                col=c,
            )
    pad = 0.04
    xr = [float(pts["x"].min()), float(pts["x"].max())]
    yr = [float(pts["y"].min()), float(pts["y"].max())]
    xr = [xr[0] - pad * (xr[1] - xr[0] or 1), xr[1] + pad * (xr[1] - xr[0] or 1)]
    yr = [yr[0] - pad * (yr[1] - yr[0] or 1), yr[1] + pad * (yr[1] - yr[0] or 1)]
    fig.update_xaxes(
        range=xr, showticklabels=False, zeroline=False, showgrid=False, mirror=True, showline=True
    )
    fig.update_yaxes(
        range=yr, showticklabels=False, zeroline=False, showgrid=False, mirror=True, showline=True
    )
    fig.update_layout(
        # What the colours are, as a title: a legend title beside its entries makes the
        # legend's rows wider than the export's layout of a legend above the plots counts.
        title=dict(
            text=f"coloured by {colour}",
            font=dict(size=MIN_FONT_PX + 1),
            yref="container",
            y=0.995,
            yanchor="top",
        ),
        legend=dict(
            itemsizing="constant",
            orientation="h",
            yanchor="bottom",
            y=1.06,
            x=0,
            xanchor="left",
            font=dict(size=MIN_FONT_PX),
        ),
        margin=dict(l=10, r=10, t=110, b=10),
        height=260 * rows + 130,
        dragmode="pan",
    )
    fig.update_annotations(font=dict(size=MIN_FONT_PX + 1))
    return fig


def drift_lines(
    summary: pd.DataFrame, colour: str = "label_name", most: int = FOCUS, axis: str = "epoch"
) -> go.Figure:
    """Mean drift per step (`views.aligned.drift_by`: step, epoch, value, mean, median,
    images): one line per value of `colour` (the `most` that move most over the run, by
    their summed mean drift) and a thick black one for every image, against the epoch the
    images moved to (the layer, along a depth sequence: `axis` `depth`)."""
    word = AXIS_NAMES[axis]
    if summary.empty:
        raise ValueError("drift_lines needs a sequence of two or more frames")
    s = summary.copy()
    s["x"] = s["epoch"].where(s["epoch"].notna(), s["step"]).astype(float)
    byval = s[s["value"] != ALL].groupby("value")["mean"].sum().sort_values(ascending=False)
    keep = list(byval.index[:most])
    # The frames' colours (figures of one run side by side agree), when they colour them all.
    cats = categories(pd.Series(list(byval.index), dtype="string"))
    if len(cats) <= MAX_LEGEND:
        colours = dict(zip(cats, theme.categorical(len(cats))))
    else:
        colours = dict(zip(keep, theme.categorical(len(keep))))
    fig = go.Figure()
    for v in [*keep, ALL]:
        g = s[s["value"] == v].sort_values("x")
        fig.add_trace(
            go.Scatter(
                x=g["x"],
                y=g["mean"],
                mode="lines+markers",
                name=str(v),
                line=dict(color="#000000" if v == ALL else colours[v], width=3 if v == ALL else 1.5),
                marker=dict(size=6 if v == ALL else 5),
                legendrank=1 if v == ALL else 100 + keep.index(v),
                customdata=np.column_stack([g["median"].astype(float), g["images"].astype(int)]),
                hovertemplate=f"{v}<br>{word} %{{x}}: mean drift %{{y:.3g}}"
                "<br>median %{customdata[0]:.3g} · %{customdata[1]} images<extra></extra>",
            )
        )
    by_epoch = s["epoch"].notna().all()
    left_out = len(byval) - len(keep)
    fig.update_layout(
        xaxis=dict(
            title=f"{word} (drift since the previous {'checkpoint' if axis == 'epoch' else 'layer'})"
            if by_epoch
            else "step",
            tickvals=sorted(s["x"].unique()),
        ),
        yaxis=dict(title="mean drift", rangemode="tozero"),
        title=dict(
            text=f"mean drift by {colour}"
            + (f" ({left_out} values moving least not drawn)" if left_out > 0 else ""),
            font=dict(size=MIN_FONT_PX + 1),
        ),
        legend=dict(
            orientation="h", yanchor="bottom", y=1.02, x=0, xanchor="left", font=dict(size=MIN_FONT_PX)
        ),
        margin=dict(l=50, r=10, t=90, b=40),
        height=460,
    )
    return fig
