"""CompMap figures (yun2023): composition weights next to the ground truth, one class's top
weights (the paper's Figure 3), accuracy by setting, and Delta per VL model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import theme  # noqa: F401  (makes its template plotly's default)

MODEL_STYLE = {  # paper name -> (colour, marker)
    "Prim": ("#1f77b4", "circle"),
    "Interv(Full)": ("#d62728", "square"),
    "Interv(Partial)": ("#ff7f0e", "diamond"),
    "Oracle-Prim": ("#2ca02c", "star"),
}
GT_COLOUR, OTHER_COLOUR = "#1f77b4", "#b0b0b0"
FONT = dict(size=11)
COLORBARS_PX = 48  # the two horizontal colour bars under the heatmaps, with their titles
TICK_PX = 10  # the paper minimum: a paper export keeps the size the layout was made for


def _empty(fig: go.Figure, text: str) -> go.Figure:
    fig.add_annotation(text=text, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    return fig


def weights_heatmap(
    long: pd.DataFrame, learned_title: str = "learned weights", title: str | None = None
) -> go.Figure:
    """Classes (rows, in `row` order) x primitives (columns grouped by attribute group, in
    `position` order): a full-shot model's weights (diverging, 0 white) above the ground
    truth (share of the class showing the primitive), on one primitive axis so a column
    reads down both. `long` is `views.compmap.weights`."""
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.1,
        subplot_titles=(learned_title, "ground truth"),
    )
    fig.update_annotations(font=dict(size=12))
    if long.empty:
        return _empty(fig, "no weights")
    cols = long.drop_duplicates("primitive").sort_values("position")
    rows = long.drop_duplicates("label").sort_values("row")
    W = long.pivot(index="label", columns="primitive", values="weight")
    T = long.pivot(index="label", columns="primitive", values="truth")
    W, T = (m.reindex(index=rows["label"], columns=cols["primitive"]) for m in (W, T))
    # Columns at 0..n-1 named by their value; each attribute group's name stands upright
    # under its columns (Plotly's two-level axis writes group names level, where a group of
    # two columns has no room for "background" at one column), groups split by lines.
    names = cols["value"].astype(str).tolist()
    groups = cols["group"].astype(str).tolist()
    x = np.arange(len(cols))
    y = rows["label_name"].tolist()
    lim = float(np.nanmax(np.abs(W.to_numpy()))) or 1.0
    custom = np.array([[f"{g}: {v}" for g, v in zip(groups, names)]] * len(rows))
    hover = "%{y}<br>%{customdata}<br>%{z:.3f}<extra>%{fullData.name}</extra>"
    for r, (Z, name, scale, lo, bar) in enumerate(
        (
            (W, "weight", "RdBu_r", -lim, dict(title="weight", x=0.0)),
            (T, "ground truth", "Blues", 0, dict(title="share", x=0.55)),
        ),
        start=1,
    ):
        fig.add_trace(
            go.Heatmap(
                z=Z.to_numpy(),
                x=x,
                y=y,
                name=name,
                colorscale=scale,
                zmid=0 if r == 1 else None,
                zmin=lo,
                zmax=lim if r == 1 else 1,
                customdata=custom,
                hovertemplate=hover,
                # Side by side along the bottom, below the group names: beside the plots
                # they would take a fifth of a single column's width from 22 columns.
                colorbar=dict(
                    title=dict(text=bar["title"], font=dict(size=10), side="top"),
                    orientation="h",
                    thickness=8,
                    len=0.4,
                    x=bar["x"],
                    xanchor="left",
                    xref="paper",
                    y=0,
                    yref="container",
                    yanchor="bottom",
                    tickfont=dict(size=9),
                ),
            ),
            row=r,
            col=1,
        )
    starts = [i for i in range(len(groups)) if i == 0 or groups[i] != groups[i - 1]]
    for i in starts[1:]:
        fig.add_vline(x=i - 0.5, line=dict(color="#444", width=1))
    # Tick labels are written at TICK_PX: the group names go below their longest one, upright
    # where a name is longer than about two characters per column of its group.
    below = max(len(v) for v in names) * 0.55 * TICK_PX + 8
    depth = 1.4 * TICK_PX
    for a, b in zip(starts, starts[1:] + [len(groups)]):
        upright = len(groups[a]) > 2 * (b - a)
        depth = max(depth, len(groups[a]) * 0.55 * TICK_PX if upright else 0)
        fig.add_annotation(
            x=(a + b - 1) / 2,
            xref="x2",
            y=0,
            yref="paper",
            yanchor="top",
            yshift=-below,
            text=groups[a],
            textangle=-90 if upright else 0,
            showarrow=False,
            font=dict(size=TICK_PX),
        )
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=9))
    fig.update_xaxes(
        tickmode="array",
        tickvals=x,
        ticktext=names,
        tickfont=dict(size=TICK_PX),
        tickangle=-90,
        automargin=False,
    )
    # Screens: rows of up to 16 px, the whole figure at most ~1800 px tall.
    per_row = max(3, min(16, 800 // max(1, len(rows))))
    fig.update_layout(
        title=title,
        font=FONT,
        height=2 * per_row * len(rows) + 220 + round(below + depth) + COLORBARS_PX,
        margin=dict(l=10, r=10, t=60 if title else 30, b=round(below + depth + 10) + COLORBARS_PX),
    )
    return fig


def top_weights_bar(weights: pd.DataFrame, n: int = 15, title: str | None = None) -> go.Figure:
    """yun2023 Figure 3: one class's `n` largest weights, its ground-truth primitives in blue.
    `weights` is `views.compmap.class_weights`."""
    fig = go.Figure()
    top = weights.sort_values("rank").head(n)
    if top.empty:
        return _empty(fig, "no weights for this class")
    names = [f"{v} ({g})" for g, v in zip(top["group"], top["value"])]
    for is_gt, name, colour in (
        (True, "ground-truth primitive", GT_COLOUR),
        (False, "other primitive", OTHER_COLOUR),
    ):
        m = (top["gt"] == is_gt).to_numpy()
        fig.add_trace(
            go.Bar(
                x=[nm for nm, k in zip(names, m) if k],
                y=top.loc[m, "weight"],
                name=name,
                marker_color=colour,
                hovertemplate="%{x}<br>weight %{y:.3f}<extra>%{fullData.name}</extra>",
            )
        )
    fig.update_layout(
        title=title,
        font=FONT,
        barmode="overlay",
        xaxis=dict(categoryorder="array", categoryarray=names, tickangle=-45, tickfont=dict(size=9)),
        yaxis_title="weight",
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, font=dict(size=9)),
        margin=dict(l=50, r=10, t=60 if title else 30, b=10),
    )
    return fig


def _error(df: pd.DataFrame) -> dict:
    return dict(
        type="data",
        symmetric=False,
        array=(df["hi"] - df["value"]).clip(lower=0),
        arrayminus=(df["value"] - df["lo"]).clip(lower=0),
        thickness=1,
        width=3,
    )


def accuracy_by_setting(acc: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Accuracy of Prim, Interv(Full), Interv(Partial) and Oracle-Prim in every setting (n-way
    k-shot episodes, then full shot), with 95% intervals. `acc` is `views.compmap.scores`
    for metric `accuracy`."""
    fig = go.Figure()
    order = list(dict.fromkeys(acc["setting_label"]))
    for name, (colour, symbol) in MODEL_STYLE.items():
        d = acc[acc["model_name"] == name]
        if d.empty:
            continue
        # Markers side by side within a setting, no lines: the settings are not a continuum.
        fig.add_trace(
            go.Scatter(
                x=d["setting_label"],
                y=d["value"],
                name=name,
                mode="markers",
                offsetgroup=name,
                marker=dict(symbol=symbol, size=9, color=colour),
                error_y=dict(_error(d), color=colour),
                customdata=np.column_stack([d["lo"], d["hi"], d["episodes"]]),
                hovertemplate=(
                    f"{name}<br>%{{x}}: %{{y:.3f}} [%{{customdata[0]:.3f}}, %{{customdata[1]:.3f}}]"
                    "<br>%{customdata[2]} episode(s)<extra></extra>"
                ),
            )
        )
    fig.update_layout(
        title=title,
        font=FONT,
        scattermode="group",
        scattergap=0.5,
        xaxis=dict(categoryorder="array", categoryarray=order, title=None),
        yaxis=dict(title="accuracy", range=[0, 1.05]),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, font=dict(size=9), itemwidth=30),
        margin=dict(l=55, r=10, t=60 if title else 30, b=40),
    )
    if acc.empty:
        _empty(fig, "no accuracy scores")
    return fig


def _delta_range(delta: pd.DataFrame) -> list[float]:
    lo = float(delta["lo"].min()) if len(delta) else 0.0
    hi = float(delta["hi"].max()) if len(delta) else 0.0
    return [min(-0.02, lo * 1.1), max(0.1, hi * 1.15)]


def delta_by_model(delta: pd.DataFrame, setting_label: str = "", title: str | None = None) -> go.Figure:
    """Delta = accuracy(Oracle-Prim) - accuracy(Interv(Full)) per VL model (yun2023 Table 3):
    lower means the learned composition is closer to the ground truth."""
    fig = go.Figure()
    if not delta.empty:
        fig.add_trace(
            go.Bar(
                x=delta["vl_model"],
                y=delta["value"],
                marker_color="#9467bd",
                error_y=dict(_error(delta), color="black"),
                width=0.5,
                hovertemplate="%{x}: Δ = %{y:.3f}<extra></extra>",
            )
        )
    fig.add_hline(y=0, line=dict(color="gray", width=1))
    fig.update_layout(
        title=title,
        font=FONT,
        showlegend=False,
        xaxis_title=f"VL model{' · ' + setting_label if setting_label else ''}",
        yaxis=dict(title="Δ = Oracle-Prim − Interv(Full)", range=_delta_range(delta)),
        margin=dict(l=60, r=10, t=50 if title else 20, b=50),
    )
    if delta.empty:
        _empty(fig, "no Delta at this setting")
    return fig
