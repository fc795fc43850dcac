"""Figures of one checkpoint's clusters: purity vs coherence, the 2-D projection."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .theme import TEMPLATE, categorical

SERIES = {
    "coherence_random": ("random negatives", "#1f77b4", "circle"),
    "coherence_hard": ("hard negatives", "#d62728", "diamond"),
}
# Above this many categories a legend is useless: one trace, colours cycled, no legend.
MAX_LEGEND = 24
# Distinct colours for up to 48 categories (colour-blind-safe ones first).
PALETTE = categorical(48)


def _short(text, width: int = 60) -> str:
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return ""
    return textwrap.shorten(str(text), width=width, placeholder="…")


def purity_coherence(metrics: pd.DataFrame, title: str | None = None) -> go.Figure:
    """laina2020 Fig. 2: each cluster's purity (x) against its 2AFC coherence (y).

    Random and hard negatives are two series; error bars are the clusters'
    95% intervals (`coherence_*_lo/hi`). customdata carries the cluster index.
    """
    fig = go.Figure()
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
    fig.add_hline(
        y=0.5,
        line=dict(color="gray", dash="dot", width=1),
        annotation_text="chance",
        annotation_position="bottom right",
    )
    fig.update_layout(
        title=title,
        xaxis_title="purity",
        yaxis_title="semantic coherence (2AFC)",
        xaxis=dict(range=[-0.02, 1.02]),
        yaxis=dict(range=[0, 1.05]),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
        margin=dict(l=60, r=20, t=60 if title else 30, b=50),
        template=TEMPLATE,
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


def projection_scatter(
    points: pd.DataFrame,
    color: str | None = "cluster",
    title: str | None = None,
    categorical: bool | None = None,
) -> go.Figure:
    """2-D projection (x, y) of a checkpoint's images, coloured by a column.

    customdata of every point is [image_id, cluster, colour value], so a box or
    lasso selection names its images. Categorical colours get a legend entry
    per value (up to 24 values; beyond, colours cycle without a legend);
    numeric ones a colour scale.
    """
    fig = go.Figure()
    pts = points
    hover = (
        "%{customdata[0]}<br>cluster %{customdata[1]}"
        + (f"<br>{color}: %{{customdata[2]}}" if color and color != "cluster" else "")
        + "<extra></extra>"
    )

    def custom(d: pd.DataFrame):
        val = d[color] if color else pd.Series("", index=d.index)
        clus = d["cluster"] if "cluster" in d.columns else pd.Series("", index=d.index)
        return np.column_stack(
            [
                d["image_id"].astype(str).to_numpy(),
                clus.astype("string").fillna("–").to_numpy(),
                val.astype("string").fillna("–").to_numpy(),
            ]
        )

    n = len(pts)
    marker = dict(size=7 if n <= 2_000 else 5 if n <= 10_000 else 3, opacity=0.75)
    if color is None or color not in pts.columns:
        fig.add_trace(
            go.Scattergl(
                x=pts["x"],
                y=pts["y"],
                mode="markers",
                marker=marker,
                customdata=custom(pts),
                hovertemplate=hover,
                showlegend=False,
            )
        )
    else:
        cat = (
            categorical
            if categorical is not None
            else (color in ("cluster", "label") or is_categorical(pts[color]))
        )
        if not cat:
            fig.add_trace(
                go.Scattergl(
                    x=pts["x"],
                    y=pts["y"],
                    mode="markers",
                    customdata=custom(pts),
                    hovertemplate=hover,
                    showlegend=False,
                    marker=dict(
                        **marker,
                        color=pts[color].astype(float),
                        colorscale="Viridis",
                        showscale=True,
                        colorbar=dict(title=dict(text=color)),
                    ),
                )
            )
        else:
            vals = pts[color].astype("string").fillna("(none)")
            # Numeric categories (cluster ids) in numeric order.
            try:
                cats = sorted(vals.unique(), key=lambda v: (0, float(v)) if v != "(none)" else (1, 0))
            except ValueError:
                cats = sorted(vals.unique())
            if len(cats) <= MAX_LEGEND:
                for i, v in enumerate(cats):
                    d = pts[vals == v]
                    fig.add_trace(
                        go.Scattergl(
                            x=d["x"],
                            y=d["y"],
                            mode="markers",
                            name=str(v),
                            customdata=custom(d),
                            hovertemplate=hover,
                            marker=dict(**marker, color=PALETTE[i % len(PALETTE)]),
                        )
                    )
            else:
                idx = {v: i for i, v in enumerate(cats)}
                colours = [PALETTE[idx[v] % len(PALETTE)] for v in vals]
                fig.add_trace(
                    go.Scattergl(
                        x=pts["x"],
                        y=pts["y"],
                        mode="markers",
                        customdata=custom(pts),
                        hovertemplate=hover,
                        showlegend=False,
                        marker=dict(**marker, color=colours),
                    )
                )
    fig.update_layout(
        title=title,
        template=TEMPLATE,
        dragmode="select",
        xaxis=dict(title="UMAP 1", showticklabels=False, zeroline=False),
        yaxis=dict(title="UMAP 2", showticklabels=False, zeroline=False),
        legend=dict(title=dict(text=color or ""), itemsizing="constant"),
        margin=dict(l=40, r=20, t=50 if title else 20, b=40),
        height=560,
    )
    return fig
