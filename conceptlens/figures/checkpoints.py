"""Figures comparing a dataset's checkpoints: CL vs ID, training curves, aNMI, Sankey."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .clusters import PALETTE
from .theme import TEMPLATE

METRIC_TITLES = {
    "knn_acc": "kNN accuracy",
    "cl": "CL",
    "id": "ID",
    "clid": "CLID",
    "anmi": "aNMI",
    "mean_purity": "mean purity",
    "mean_coherence": "mean coherence (random)",
}
KIND_COLOURS = {
    "one-to-one": "rgba(120,120,120,0.35)",
    "split": "rgba(31,119,180,0.55)",
    "merge": "rgba(214,39,40,0.55)",
    "split+merge": "rgba(148,103,189,0.6)",
    "partial": "rgba(188,189,34,0.35)",
    "minor": "rgba(200,200,200,0.25)",
}


def cl_id_scatter(summary: pd.DataFrame, title: str | None = None) -> go.Figure:
    """lu2022 Fig. 1: each checkpoint at (ID, CL), coloured by kNN accuracy (red high).

    Checkpoint names are in the hover label and written next to the points.
    """
    s = summary[summary["cl"].notna() & summary["id"].notna()]
    acc = s["knn_acc"].astype(float) if "knn_acc" in s.columns else pd.Series(np.nan, index=s.index)
    has_acc = acc.notna().any()
    fig = go.Figure(
        go.Scatter(
            x=s["id"].astype(float),
            y=s["cl"].astype(float),
            mode="markers+text",
            text=s["checkpoint_id"],
            textposition="top center",
            textfont=dict(size=10),
            customdata=np.column_stack([s["checkpoint_id"].to_numpy(), acc.to_numpy()]),
            hovertemplate=(
                "<b>%{customdata[0]}</b><br>ID %{x:.2f} · CL %{y:.3f}"
                "<br>kNN acc %{customdata[1]:.3f}<extra></extra>"
            ),
            marker=dict(
                size=14,
                line=dict(width=1, color="black"),
                color=acc if has_acc else "#1f77b4",
                colorscale="RdBu_r" if has_acc else None,
                showscale=bool(has_acc),
                colorbar=dict(title=dict(text="kNN acc")) if has_acc else None,
            ),
        )
    )
    fig.update_layout(
        title=title,
        template=TEMPLATE,
        xaxis_title="intrinsic dimension (ID, expressiveness)",
        yaxis_title="cluster learnability (CL)",
        margin=dict(l=60, r=20, t=50 if title else 30, b=50),
    )
    if s.empty:
        fig.add_annotation(
            text="no checkpoint has both CL and ID", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5
        )
    return fig


def metrics_vs_epoch(long: pd.DataFrame, title: str | None = None, cols: int = 4) -> go.Figure:
    """Small multiples: each metric (own y axis) against epoch, one line per run.

    `long` has columns run, epoch, checkpoint_id, metric, value
    (`conceptlens.analysis.compare.epoch_long`).
    """
    metrics = [
        m
        for m in (
            long["metric"].cat.categories if hasattr(long["metric"], "cat") else long["metric"].unique()
        )
        if (long["metric"] == m).any()
    ]
    rows = max(1, -(-len(metrics) // cols))
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[METRIC_TITLES.get(m, m) for m in metrics],
        horizontal_spacing=0.07,
        vertical_spacing=0.18,
    )
    runs = sorted(long["run"].unique())
    for i, m in enumerate(metrics):
        r, c = i // cols + 1, i % cols + 1
        for j, run in enumerate(runs):
            d = long[(long["metric"] == m) & (long["run"] == run)].sort_values("epoch")
            fig.add_trace(
                go.Scatter(
                    x=d["epoch"],
                    y=d["value"],
                    mode="lines+markers",
                    name=str(run),
                    legendgroup=str(run),
                    showlegend=i == 0,
                    line=dict(color=PALETTE[j % len(PALETTE)]),
                    customdata=d["checkpoint_id"],
                    hovertemplate=(
                        f"{run}<br>epoch %{{x}}<br>{m} %{{y:.3f}}<br>%{{customdata}}<extra></extra>"
                    ),
                ),
                row=r,
                col=c,
            )
        epochs = sorted(long["epoch"].dropna().unique())
        ticks = dict(tickmode="array", tickvals=epochs) if len(epochs) <= 12 else dict(tickformat="d")
        fig.update_xaxes(title_text="epoch" if r == rows else None, row=r, col=c, **ticks)
    fig.update_layout(
        title=title,
        template=TEMPLATE,
        height=280 * rows + 80,
        legend=dict(orientation="h", yanchor="bottom", y=1.06, x=0, title="run"),
        margin=dict(l=50, r=20, t=90, b=50),
    )
    return fig


def anmi_heatmap(matrix: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Square heatmap of aNMI between checkpoints' clusterings, values written in the cells."""
    z = matrix.to_numpy(dtype=float)
    text = np.where(np.isnan(z), "", np.vectorize(lambda v: f"{v:.2f}")(np.nan_to_num(z)))
    n = len(matrix)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[str(c) for c in matrix.columns],
            y=[str(i) for i in matrix.index],
            zmin=0,
            zmax=1,
            colorscale="Blues",
            text=text,
            texttemplate="%{text}" if n <= 20 else None,
            hovertemplate="%{y} vs %{x}<br>aNMI %{z:.3f}<extra></extra>",
            colorbar=dict(title=dict(text="aNMI")),
        )
    )
    fig.update_layout(
        title=title,
        template=TEMPLATE,
        yaxis=dict(autorange="reversed"),
        xaxis=dict(tickangle=-35),
        height=max(380, 40 * n + 180),
        margin=dict(l=120, r=20, t=50 if title else 30, b=120),
    )
    return fig


def _hover_lines(meta: pd.DataFrame | None, cluster) -> str:
    if meta is None or cluster not in meta.index:
        return ""
    r = meta.loc[cluster]
    out = []
    for col, name in (
        ("size", "size"),
        ("purity", "purity"),
        ("coherence_random", "coherence (random)"),
        ("coherence_hard", "coherence (hard)"),
    ):
        if col in r.index and pd.notna(r[col]):
            out.append(f"{name} {r[col]:.0f}" if col == "size" else f"{name} {r[col]:.2f}")
    if "caption" in r.index and isinstance(r["caption"], str):
        out.append(textwrap.shorten(r["caption"], 60, placeholder="…"))
    return "<br>".join(out)


def cluster_sankey(
    links: pd.DataFrame,
    meta_a: pd.DataFrame | None = None,
    meta_b: pd.DataFrame | None = None,
    name_a: str = "A",
    name_b: str = "B",
    title: str | None = None,
) -> go.Figure:
    """Flows of images from A's clusters (left) to B's (right).

    `links` comes from `conceptlens.views.checkpoints.cluster_links` (or
    `conceptlens.analysis.compare.classify_links`); link colour is its kind (split,
    merge, ...). `meta_a`/`meta_b` are cluster rows (`views.clusters.cluster_table`)
    with a `cluster` column or indexed by cluster; their size, purity, coherence and
    caption go into node hovers.
    """
    meta_a, meta_b = (
        m.set_index("cluster") if m is not None and "cluster" in m.columns else m for m in (meta_a, meta_b)
    )
    a_nodes = sorted(links["a"].unique()) if not links.empty else []
    b_nodes = sorted(links["b"].unique()) if not links.empty else []
    idx_a = {c: i for i, c in enumerate(a_nodes)}
    idx_b = {c: len(a_nodes) + i for i, c in enumerate(b_nodes)}
    labels = [f"{name_a}:{c}" for c in a_nodes] + [f"{name_b}:{c}" for c in b_nodes]
    hover = [_hover_lines(meta_a, c) for c in a_nodes] + [_hover_lines(meta_b, c) for c in b_nodes]
    node_colours = ["#4c78a8"] * len(a_nodes) + ["#f58518"] * len(b_nodes)
    kinds = links["kind"].tolist() if not links.empty else []
    fig = go.Figure(
        go.Sankey(
            arrangement="snap",
            textfont=dict(color="#222", size=12),
            node=dict(
                label=labels,
                customdata=hover,
                pad=6,
                thickness=14,
                color=node_colours,
                line=dict(width=0.5, color="white"),
                hovertemplate="<b>%{label}</b><br>%{customdata}<br>%{value} images<extra></extra>",
            ),
            link=dict(
                source=[idx_a[a] for a in links["a"]] if kinds else [],
                target=[idx_b[b] for b in links["b"]] if kinds else [],
                value=links["count"].tolist() if kinds else [],
                color=[KIND_COLOURS.get(k, KIND_COLOURS["minor"]) for k in kinds],
                customdata=np.column_stack([kinds, links["share_a"].round(2), links["share_b"].round(2)])
                if kinds
                else None,
                hovertemplate=(
                    "%{source.label} → %{target.label}: %{value} images<br>"
                    "%{customdata[0]} · %{customdata[1]} of source, "
                    "%{customdata[2]} of target<extra></extra>"
                ),
            ),
        )
    )
    n = max(len(a_nodes), len(b_nodes), 1)
    fig.update_layout(
        title=title,
        height=min(1600, max(420, 22 * n + 120)),
        margin=dict(l=20, r=20, t=50 if title else 20, b=20),
        font=dict(size=11),
    )
    if not kinds:
        fig.add_annotation(text="no flows to show", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    return fig
