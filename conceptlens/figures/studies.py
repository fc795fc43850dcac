"""Figures of a human study: people's 2AFC accuracy per cluster next to the proxy annotator's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .theme import OKABE_ITO

MEASURES = {
    "coherence_random": "semantic coherence, random negatives",
    "coherence_hard": "semantic coherence, hard negatives",
    "describability": "describability",
}
PEOPLE, PROXY = OKABE_ITO[4], OKABE_ITO[1]  # blue, orange


def _errors(y: pd.Series, lo: pd.Series, hi: pd.Series, colour: str) -> dict:
    ok = lo.notna() & hi.notna()
    if not ok.any():
        return {}
    return dict(
        error_y=dict(
            type="data",
            symmetric=False,
            array=(hi - y).where(ok, 0).clip(lower=0),
            arrayminus=(y - lo).where(ok, 0).clip(lower=0),
            thickness=1.2,
            width=3,
            color=colour,
        )
    )


def human_vs_proxy(clusters: pd.DataFrame, measure: str) -> go.Figure:
    """One column per cluster (people's accuracy, highest first): people with their
    Clopper-Pearson 95% interval, and the proxy annotator's value (with its interval where
    stored). laina2020 Tables 1-2 report the same quantities per purity bin."""
    fig = go.Figure()
    d = clusters.sort_values(["accuracy", "cluster"], ascending=[False, True]).reset_index(drop=True)
    # The cluster ids alone (the axis title says what they are): "cluster 12" at one
    # column ran into the y axis's labels.
    x = d["cluster"].map(str)
    people = d["accuracy"].astype(float)
    fig.add_trace(
        go.Scatter(
            x=x,
            y=people,
            mode="markers",
            name="people",
            marker=dict(color=PEOPLE, size=9, symbol="circle"),
            customdata=np.column_stack([d["n_correct"], d["n"], d["lo"], d["hi"]]),
            hovertemplate="cluster %{x}: %{y:.2f} (%{customdata[0]} of %{customdata[1]} correct)<br>"
            "95% CI [%{customdata[2]:.2f}, %{customdata[3]:.2f}]<extra>people</extra>",
            **_errors(people, d["lo"].astype(float), d["hi"].astype(float), PEOPLE),
        )
    )
    proxy = pd.to_numeric(d["proxy"], errors="coerce")
    if proxy.notna().any():
        fig.add_trace(
            go.Scatter(
                x=x,
                y=proxy,
                mode="markers",
                name="proxy annotator",
                marker=dict(color=PROXY, size=9, symbol="diamond-open", line=dict(width=2)),
                hovertemplate="cluster %{x}: %{y:.2f}<extra>proxy annotator</extra>",
                **_errors(
                    proxy,
                    pd.to_numeric(d["proxy_lo"], errors="coerce"),
                    pd.to_numeric(d["proxy_hi"], errors="coerce"),
                    PROXY,
                ),
            )
        )
    fig.add_hline(
        y=0.5,
        line=dict(color="gray", dash="dot", width=1),
        annotation_text="chance",
        annotation_position="bottom right",
    )
    fig.update_layout(
        xaxis=dict(title="cluster (people's accuracy, highest first)", type="category"),
        yaxis_title=MEASURES.get(measure, measure),
        yaxis=dict(range=[0, 1.05]),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
        margin=dict(l=60, r=20, t=30, b=60),
    )
    if d.empty:
        fig.add_annotation(text="no answers yet", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    return fig
