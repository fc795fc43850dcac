"""Concept-quality figures (the concept-quality paper): the purity heatmaps (learnt, oracle,
difference) on one colour scale, impurity against dependency per method (its Figures 3, 4,
11), the niche heatmap, and niche purity / impurity / size against beta (its Figure 6)."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .theme import DIVERGING, SEQUENTIAL, categorical

PANELS = {"learnt": "learnt purity", "oracle": "oracle purity", "difference": "learnt − oracle"}
SWEEP_SCORES = {"ois": "oracle impurity (OIS)", "non_oracle_impurity": "non-oracle impurity"}
NICHE_SCORES = {"nps": "niche purity (AUC)", "nis": "niche impurity (AUC)", "niche_size": "niche size"}
FONT = dict(size=11)


def _empty(fig: go.Figure, text: str) -> go.Figure:
    fig.add_annotation(text=text, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    return fig


def method_colours(methods) -> dict[str, str]:
    """One colour per method, the same in every figure of a page (sorted names)."""
    names = sorted(set(methods))
    return dict(zip(names, categorical(len(names))))


def purity_heatmaps(long: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Learnt purity, oracle purity and their difference side by side, on one diverging
    colour scale from -1 to 1 (an AUC is in [0, 1], a difference in [-1, 1]); rows are
    learnt concepts (aligned to the true concept of the same row), columns true concepts.
    `long` is `views.concepts.heatmaps`."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=list(PANELS.values()), horizontal_spacing=0.12)
    fig.update_annotations(font=dict(size=12))
    if long.empty:
        return _empty(fig, "no purity matrix")
    # Every panel has the learnt panel's rows (the others lack its unaligned concepts), so
    # that row i is one line across the three and is named once, left of the first.
    names = long[long["panel"] == "learnt"].drop_duplicates("row_order").set_index("row_order")["row"]
    orders = sorted(names.index)
    for c, panel in enumerate(PANELS, start=1):
        d = long[long["panel"] == panel]
        cols = d.drop_duplicates("col").sort_values("col_order")["col"].tolist()
        Z = d.pivot(index="row_order", columns="col", values="value").reindex(index=orders, columns=cols)
        fig.add_trace(
            go.Heatmap(
                z=Z.to_numpy(),
                x=cols,
                y=[names[o] for o in orders],
                coloraxis="coloraxis",
                text=np.vectorize(lambda v: "" if np.isnan(v) else f"{v:.2f}")(Z.to_numpy(float)),
                texttemplate="%{text}",
                textfont=dict(size=10),
                name=PANELS[panel],
                hovertemplate="%{y} → %{x}<br>%{z:.3f}<extra>%{fullData.name}</extra>",
            ),
            row=1,
            col=c,
        )
        fig.update_yaxes(autorange="reversed", type="category", showticklabels=c == 1, row=1, col=c)
        # One axis title under the middle panel: three would run into each other at one column.
        fig.update_xaxes(
            type="category", tickangle=-30, title_text="true concept" if c == 2 else None, row=1, col=c
        )
    fig.update_yaxes(title_text="learnt concept", row=1, col=1)
    n_rows = long.loc[long["panel"] == "learnt", "row"].nunique()
    fig.update_layout(
        title=title,
        font=FONT,
        coloraxis=dict(
            colorscale=DIVERGING,
            cmin=-1,
            cmax=1,
            cmid=0,
            colorbar=dict(
                title=dict(text="AUC / Δ", font=dict(size=10)), thickness=10, tickfont=dict(size=9)
            ),
        ),
        height=max(320, 34 * n_rows + 190),
        margin=dict(l=10, r=10, t=60 if title else 40, b=10),
    )
    return fig


def _error(d: pd.DataFrame) -> dict:
    hi = (d["hi"] - d["mean"]).clip(lower=0).fillna(0)
    lo = (d["mean"] - d["lo"]).clip(lower=0).fillna(0)
    return dict(type="data", symmetric=False, array=hi, arrayminus=lo, thickness=1, width=3)


def _hover(d: pd.DataFrame, x: str) -> tuple[np.ndarray, str]:
    data = np.column_stack([d["lo"], d["hi"], d["n"], d["over"]])
    text = (
        "%{fullData.name}<br>" + x + " %{x}: %{y:.3f} [%{customdata[0]:.3f}, %{customdata[1]:.3f}]<br>"
        "n = %{customdata[2]} %{customdata[3]}<extra></extra>"
    )
    return data, text


def _method_lines(fig: go.Figure, df: pd.DataFrame, scores: dict, x: str, x_name: str, marker: int) -> None:
    """One subplot per score, a line per method with its 95% intervals (legend once)."""
    colours = method_colours(df["method"])
    for c, score in enumerate(scores, start=1):
        for method, colour in colours.items():
            d = df[(df["method"] == method) & (df["score"] == score)].sort_values(x)
            if d.empty:
                continue
            data, text = _hover(d, x_name)
            fig.add_trace(
                go.Scatter(
                    x=d[x],
                    y=d["mean"],
                    name=method,
                    legendgroup=method,
                    showlegend=c == 1,
                    mode="lines+markers",
                    line=dict(color=colour),
                    marker=dict(size=marker),
                    error_y=dict(_error(d), color=colour),
                    customdata=data,
                    hovertemplate=text,
                ),
                row=1,
                col=c,
            )


def _lines_layout(fig: go.Figure, title: str | None) -> go.Figure:
    """The frame of the method lines' figures: one horizontal legend above the plots."""
    fig.update_layout(
        title=title,
        font=FONT,
        height=360,
        legend=dict(orientation="h", yanchor="bottom", y=1.1, x=0, font=dict(size=10)),
        margin=dict(l=50, r=10, t=80 if title else 60, b=40),
    )
    return fig


def impurity_sweep(sweep: pd.DataFrame, dependency: str = "level", title: str | None = None) -> go.Figure:
    """OIS and the non-oracle impurity against the dependency level, a line per method with
    95% intervals. `sweep` is `views.concepts.sweep`."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=list(SWEEP_SCORES.values()), horizontal_spacing=0.1)
    fig.update_annotations(font=dict(size=12))
    if sweep.empty:
        return _empty(fig, "no scores")
    _method_lines(fig, sweep, SWEEP_SCORES, "level", dependency, marker=7)
    for c in range(1, len(SWEEP_SCORES) + 1):
        fig.update_xaxes(title_text=dependency, row=1, col=c)
    fig.update_yaxes(title_text="impurity", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(rangemode="tozero", row=1, col=2)
    return _lines_layout(fig, title)


def niche_heatmap(matrix: pd.DataFrame, beta: float, title: str | None = None) -> go.Figure:
    """|correlation| of each learnt concept (rows) with each label (columns); the cells of
    the labels' niches at `beta` (|corr| > beta) outlined. `matrix` is
    `views.concepts.niche_matrix`."""
    fig = go.Figure()
    if matrix.empty:
        return _empty(fig, "no niches at this beta")
    rows = list(dict.fromkeys(matrix.sort_values("learnt_concept")["learnt_concept"]))
    labels = matrix.drop_duplicates("label").sort_values("label")
    cols = [str(n) for n in labels["label_name"]]
    Z = matrix.pivot(index="learnt_concept", columns="label", values="corr").reindex(
        index=rows, columns=labels["label"]
    )
    inside = matrix.pivot(index="learnt_concept", columns="label", values="in_niche").reindex(
        index=rows, columns=labels["label"]
    )
    fig.add_trace(
        go.Heatmap(
            z=Z.to_numpy(float),
            x=list(range(len(cols))),
            y=list(range(len(rows))),
            colorscale=SEQUENTIAL,
            zmin=0,
            zmax=1,
            customdata=np.array([[f"{r} · {c}" for c in cols] for r in rows]),
            hovertemplate="%{customdata}<br>|corr| = %{z:.3f}<extra></extra>",
            colorbar=dict(title=dict(text="|corr|", font=dict(size=10)), thickness=10, tickfont=dict(size=9)),
        )
    )
    for i in range(len(rows)):
        for j in range(len(cols)):
            if bool(inside.iat[i, j]):
                fig.add_shape(
                    type="rect",
                    x0=j - 0.5,
                    x1=j + 0.5,
                    y0=i - 0.5,
                    y1=i + 0.5,
                    line=dict(color="#D55E00", width=3),
                )
    # Names like "square or ellipse, large, right" differ at their ends: wrapped where there is
    # room; many labels are slanted and cut, their full names in the hover.
    many = len(cols) > 10
    short = [
        (c if len(c) <= 24 else c[:23] + "…")
        if many
        else "<br>".join(textwrap.wrap(c, 16, max_lines=3, placeholder="…")) or c
        for c in cols
    ]
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(range(len(cols))),
        ticktext=short,
        tickangle=-60 if many else 0,
        title_text="label",
    )
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(len(rows))),
        ticktext=rows,
        autorange="reversed",
        title_text="learnt concept",
    )
    fig.update_layout(
        title=title or f"concept niches at β = {beta:g} (outlined: |corr| > β)",
        font=FONT,
        height=max(320, 26 * len(rows) + 200),
        margin=dict(l=10, r=10, t=50, b=10),
    )
    return fig


def niche_curves(curves: pd.DataFrame, beta: float | None = None, title: str | None = None) -> go.Figure:
    """Niche purity, impurity and size against beta, a line per method with 95% intervals;
    the chosen `beta` dotted. `curves` is `views.concepts.niche_curves`."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=list(NICHE_SCORES.values()), horizontal_spacing=0.08)
    fig.update_annotations(font=dict(size=12))
    if curves.empty:
        return _empty(fig, "no niche scores")
    _method_lines(fig, curves, NICHE_SCORES, "beta", "β", marker=5)
    for c in range(1, len(NICHE_SCORES) + 1):
        if beta is not None:
            fig.add_vline(x=beta, line=dict(color="#555", dash="dot", width=1), row=1, col=c)
        fig.update_xaxes(title_text="β", range=[-0.02, 1.0], row=1, col=c)
    return _lines_layout(fig, title)
