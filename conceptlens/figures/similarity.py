"""Figures of people's similarity judgments (roads2021): the map of the psychological
embedding with thumbnails, each checkpoint's agreement with people (overall and per
label), and the fit's diagnostics."""

from __future__ import annotations

import base64
import io

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..remote import open_source
from .checkpoints import short_names
from .clusters import MAX_LEGEND, PALETTE, is_categorical
from .theme import break_name, data_range, range_title, umap_axis

METRICS = {"triplet_accuracy": "triplet accuracy", "rsa": "RSA (Spearman)"}
SCALES = {"triplet_accuracy": (0.0, 1.0), "rsa": (-1.0, 1.0)}
DISTANCE_NAMES = {"l1": "L1", "l2": "L2", "cosine": "cosine"}
CHANCE = {"triplet_accuracy": 0.5, "rsa": 0.0}
FONT = dict(size=12)
TITLE_FONT = dict(size=12)
TICK_FONT = dict(size=10)
# Above this many points the map draws with WebGL (static export then needs it too).
WEBGL_ABOVE = 5000


def thumbnail_uris(paths: dict[str, str], size: int = 48) -> dict[str, str]:
    """image_id -> a small PNG as a data URI (so the figure carries its images when exported)."""
    from PIL import Image  # local: off the dashboard's cold start

    out = {}
    for iid, path in paths.items():
        try:
            with Image.open(open_source(path)) as im:  # a local path or a remote workspace's URL
                im = im.convert("RGB")
                im.thumbnail((size, size))
                buf = io.BytesIO()
                im.save(buf, format="PNG", optimize=True)
        except Exception:  # an unreadable thumbnail is simply not drawn
            continue
        out[iid] = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    return out


def _empty(fig: go.Figure, text: str) -> go.Figure:
    fig.add_annotation(text=text, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    return fig


def embedding_map(
    points: pd.DataFrame,
    color: str | None = "label_name",
    thumbnails: dict[str, str] | None = None,
    selected: str | None = None,
    neighbours: list[str] | None = None,
    title: str | None = None,
) -> go.Figure:
    """The 2-D UMAP of the psychological embedding: a point per image, coloured by `color`,
    with `thumbnails` (image_id -> image URI) drawn at their points. `selected` is ringed,
    its `neighbours` (for people) marked. customdata of every point: [image_id, label]."""
    fig = go.Figure()
    if points.empty:
        return _empty(fig, "no embedding to show")
    labels = (
        points["label_name"].fillna("").astype(str)
        if "label_name" in points
        else pd.Series("", index=points.index)
    )
    hover = "<b>%{customdata[0]}</b><br>%{customdata[1]}<extra></extra>"
    scatter = go.Scattergl if len(points) > WEBGL_ABOVE else go.Scatter
    values = points[color] if color in points.columns else pd.Series("", index=points.index)
    if is_categorical(values):
        cats = sorted(values.dropna().astype(str).unique())
        for k, cat in enumerate(cats):
            m = values.astype(str) == cat
            fig.add_trace(
                scatter(
                    x=points.loc[m, "x"],
                    y=points.loc[m, "y"],
                    mode="markers",
                    name=cat,
                    showlegend=len(cats) <= MAX_LEGEND,
                    marker=dict(size=6, color=PALETTE[k % len(PALETTE)], opacity=0.85),
                    customdata=np.column_stack([points.loc[m, "image_id"], labels[m]]),
                    hovertemplate=hover,
                )
            )
    else:
        fig.add_trace(
            scatter(
                x=points["x"],
                y=points["y"],
                mode="markers",
                name=str(color),
                showlegend=False,
                marker=dict(
                    size=6,
                    color=values.astype(float),
                    colorscale="Viridis",
                    showscale=True,
                    colorbar=dict(title=dict(text=str(color))),
                ),
                customdata=np.column_stack([points["image_id"], labels]),
                hovertemplate=hover,
            )
        )
    span = max(np.ptp(points["x"].to_numpy()), np.ptp(points["y"].to_numpy()), 1e-9)
    side = span * (0.05 if len(thumbnails or {}) <= 150 else 0.035)
    xy = points.set_index("image_id")[["x", "y"]]
    for iid, uri in (thumbnails or {}).items():
        if iid in xy.index:
            x, y = xy.loc[iid]
            fig.add_layout_image(
                source=uri,
                x=x,
                y=y,
                xref="x",
                yref="y",
                sizex=side,
                sizey=side,
                xanchor="center",
                yanchor="middle",
                layer="above",
                opacity=0.95,
            )
    for ids, name, marker in (
        (
            neighbours or [],
            "people's nearest",
            dict(size=14, color="rgba(0,0,0,0)", line=dict(width=2, color="#ff7f0e")),
        ),
        (
            [selected] if selected else [],
            "selected",
            dict(size=18, color="rgba(0,0,0,0)", line=dict(width=3, color="black")),
        ),
    ):
        ids = [i for i in ids if i in xy.index]
        if ids:
            fig.add_trace(
                go.Scatter(
                    x=xy.loc[ids, "x"],
                    y=xy.loc[ids, "y"],
                    mode="markers",
                    name=name,
                    marker=marker,
                    hoverinfo="skip",
                )
            )
    fig.update_layout(
        title=title,
        font=FONT,
        dragmode="pan",
        xaxis=umap_axis(1),
        yaxis=umap_axis(2, scaleanchor="x"),
        legend=dict(font=dict(size=10), itemsizing="constant"),
        margin=dict(l=40, r=10, t=40 if title else 10, b=40),
        height=560,
    )
    return fig


def _names(ids: pd.Series, width: int = 18) -> list[str]:
    """Ids without the prefix they all share, a long one broken onto lines after a '-'
    or '_' (never cut: the whole name is the label)."""
    return [break_name(i, width) for i in short_names(list(map(str, ids)))]


def agreement_bars(
    alignment: pd.DataFrame, distance: str, reference: float | None = None, title: str | None = None
) -> go.Figure:
    """Each checkpoint's triplet accuracy and RSA against people at `distance`, with 95%
    bootstrap intervals: two panels of horizontal bars sharing the checkpoints, best on top.
    `reference`: the psychological embedding's held-out triplet accuracy (roads2021 Table 2)."""
    a = alignment[alignment["distance"] == distance]
    metrics = [m for m in METRICS if (a["metric"] == m).any()]
    fig = make_subplots(
        rows=1,
        cols=max(1, len(metrics)),
        shared_yaxes=True,
        horizontal_spacing=0.05,
        subplot_titles=[METRICS[m].split(" (")[0] for m in metrics],
    )
    if a.empty:
        return _empty(fig, "no checkpoint scored against people yet")
    first = metrics[0]
    order = a[a["metric"] == first].sort_values("value")["checkpoint_id"].tolist()
    order += sorted(set(a["checkpoint_id"]) - set(order))
    for c, m in enumerate(metrics, start=1):
        d = a[a["metric"] == m].set_index("checkpoint_id").reindex(order)
        v = d["value"].astype(float)
        fig.add_trace(
            go.Bar(
                x=v,
                y=_names(pd.Series(order), 26),
                orientation="h",
                name=METRICS[m],
                showlegend=False,
                marker_color=PALETTE[c - 1],
                error_x=dict(
                    type="data",
                    symmetric=False,
                    array=(d["hi"].astype(float) - v).clip(lower=0),
                    arrayminus=(v - d["lo"].astype(float)).clip(lower=0),
                    thickness=1.2,
                    width=3,
                ),
                customdata=np.column_stack([order, d["lo"], d["hi"], d["n"]]),
                hovertemplate=(
                    "<b>%{customdata[0]}</b><br>%{x:.3f} [%{customdata[1]:.3f}, "
                    "%{customdata[2]:.3f}]<br>n = %{customdata[3]}<extra></extra>"
                ),
            ),
            row=1,
            col=c,
        )
        fig.add_vline(x=CHANCE[m], line=dict(color="gray", dash="dot", width=1), row=1, col=c)
        if m == "triplet_accuracy" and reference is not None and not np.isnan(reference):
            fig.add_vline(x=reference, line=dict(color="#d62728", dash="dash", width=1.5), row=1, col=c)
            fig.add_trace(
                go.Scatter(
                    x=[None],
                    y=[None],
                    mode="lines",
                    showlegend=True,
                    line=dict(color="#d62728", dash="dash", width=1.5),
                    name="people's own embedding (held-out trials)",
                ),
                row=1,
                col=c,
            )
        # Chance, the reference and every interval in view; an axis not from 0 says so.
        extra = [CHANCE[m]] + ([reference] if m == "triplet_accuracy" and reference is not None else [])
        rng = data_range(np.concatenate([v, d["lo"].astype(float), d["hi"].astype(float)]), SCALES[m], extra)
        fig.update_xaxes(
            range=rng,
            title=dict(text=range_title("", rng).strip(), font=TICK_FONT),
            nticks=5,
            tickfont=TICK_FONT,
            row=1,
            col=c,
        )
    fig.update_annotations(font=TITLE_FONT)
    fig.update_layout(
        title=title or f"Agreement with people ({DISTANCE_NAMES[distance]})",
        title_font=TITLE_FONT,
        font=FONT,
        bargap=0.25,
        height=max(260, 22 * len(order) + 130),
        legend=dict(orientation="h", yanchor="top", y=-0.12, x=0, font=TICK_FONT),
        margin=dict(l=10, r=15, t=55, b=30),
    )
    fig.update_yaxes(automargin=True, tickfont=TICK_FONT)
    return fig


def label_heatmap(by_label: pd.DataFrame, metric: str, distance: str, title: str | None = None) -> go.Figure:
    """Per label (rows) and checkpoint (columns): agreement with people on the images of
    that label — which concepts a checkpoint sees as people do."""
    fig = go.Figure()
    if by_label.empty:
        return _empty(fig, "no per-label scores")
    t = by_label.assign(name=by_label["label_name"].fillna(by_label["label"].astype(str)))
    z = t.pivot_table(index="name", columns="checkpoint_id", values="value", sort=False)
    z = z.loc[:, z.mean().sort_values(ascending=False).index]
    mid = CHANCE[metric]
    fig.add_trace(
        go.Heatmap(
            z=z.to_numpy(),
            x=_names(pd.Series(z.columns), 40),
            y=list(z.index),
            colorscale="RdBu",
            zmid=mid,
            colorbar=dict(title=dict(text=METRICS[metric]), thickness=12),
            customdata=np.repeat(np.array(z.columns, dtype=object)[None, :], len(z), axis=0),
            hovertemplate="%{y}<br>%{customdata}<br>%{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        font=FONT,
        height=max(300, 16 * len(z) + 170),
        xaxis=dict(tickangle=-45, tickfont=dict(size=9), title=None, dtick=1),
        yaxis=dict(autorange="reversed", tickfont=dict(size=9), title=None, dtick=1),
        margin=dict(l=10, r=10, t=50 if title else 20, b=10),
    )
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return fig


def fit_diagnostics(fit: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Held-out accuracy, log-likelihood and the ensemble's agreement against the embedding's
    dimensionality: a point per member, a line through the means; the kept one shaded."""
    panels = [
        ("heldout_accuracy", "accuracy"),
        ("heldout_loglik", "log-lik./trial"),
        ("agreement", "agreement"),
    ]
    fig = make_subplots(rows=1, cols=3, subplot_titles=[p for _, p in panels], horizontal_spacing=0.11)
    if fit.empty:
        return _empty(fig, "no fit yet")
    dims = sorted(fit["dim"].unique())
    kept = fit.loc[fit["selected"], "dim"]
    for c, (col, name) in enumerate(panels, start=1):
        d = fit[fit[col].notna()]
        fig.add_trace(
            go.Scatter(
                x=d["dim"],
                y=d[col],
                mode="markers",
                name="member",
                showlegend=c == 1,
                marker=dict(size=7, color="#1f77b4", opacity=0.6),
                customdata=d["member"],
                hovertemplate=f"d = %{{x}}, member %{{customdata}}<br>{name} %{{y:.4f}}<extra></extra>",
            ),
            row=1,
            col=c,
        )
        mean = d.groupby("dim")[col].mean()
        fig.add_trace(
            go.Scatter(
                x=mean.index,
                y=mean.to_numpy(),
                mode="lines",
                name="mean",
                showlegend=c == 1,
                line=dict(color="#1f77b4", width=2),
                hoverinfo="skip",
            ),
            row=1,
            col=c,
        )
        if col == "heldout_accuracy" and "chance_accuracy" in fit and fit["chance_accuracy"].notna().any():
            fig.add_hline(
                y=float(fit["chance_accuracy"].iloc[0]),
                line=dict(color="gray", dash="dot", width=1),
                row=1,
                col=c,
                annotation_text="chance",
                annotation_position="bottom right",
                annotation_font=dict(size=10),
            )
        if len(kept):
            fig.add_vrect(
                x0=kept.iloc[0] * 0.9,
                x1=kept.iloc[0] * 1.1,
                fillcolor="#2ca02c",
                opacity=0.15,
                line_width=0,
                row=1,
                col=c,
            )
        fig.update_xaxes(
            type="log",
            tickvals=dims,
            ticktext=[str(x) for x in dims],
            title_text="dims",
            tickfont=TICK_FONT,
            row=1,
            col=c,
        )
        fig.update_yaxes(tickfont=TICK_FONT, nticks=5, row=1, col=c)
    fig.update_annotations(font=TITLE_FONT)
    fig.update_layout(
        title=title,
        font=FONT,
        height=330,
        legend=dict(orientation="h", yanchor="bottom", y=1.12, x=0),
        margin=dict(l=50, r=10, t=80 if title else 60, b=45),
    )
    return fig


def thumbnail_sample(points: pd.DataFrame, cells: int = 12) -> list[str]:
    """Image ids to draw as thumbnails: the first point (in the given order) of each cell of
    a cells x cells grid over the map, so thumbnails cover it without piling up."""
    if points.empty or cells < 1:
        return []
    x, y = points["x"].to_numpy(float), points["y"].to_numpy(float)

    def cell(v):
        span = np.ptp(v) or 1.0
        return np.minimum(((v - v.min()) / span * cells).astype(int), cells - 1)

    key = pd.Series(cell(x) * cells + cell(y), index=points.index)
    return points.loc[~key.duplicated(), "image_id"].tolist()


def convergence_curves(conv: pd.DataFrame, title: str | None = None) -> go.Figure:
    """roads2021 Figure 3 for one dataset: coarse-grained loss, within-ensemble agreement and
    agreement with the previous share, against the trials fitted."""
    panels = [
        ("coarse_loss", "coarse-grained<br>loss"),
        ("within_agreement", "within-ensemble<br>agreement r²"),
        ("across_agreement", "agreement with<br>last share r²"),
    ]
    fig = make_subplots(rows=1, cols=3, subplot_titles=[p for _, p in panels], horizontal_spacing=0.12)
    if conv.empty:
        return _empty(fig, "not computed yet")
    for c, (col, name) in enumerate(panels, start=1):
        d = conv[conv[col].notna()]
        fig.add_trace(
            go.Scatter(
                x=d["n_trials"],
                y=d[col],
                mode="lines+markers",
                name=name,
                showlegend=False,
                marker=dict(size=7, color=PALETTE[4]),
                line=dict(color=PALETTE[4], width=2),
                hovertemplate=f"%{{x}} trials<br>{name.replace('<br>', ' ')} %{{y:.4f}}<extra></extra>",
            ),
            row=1,
            col=c,
        )
        fig.update_xaxes(title_text="trials", tickfont=TICK_FONT, nticks=4, row=1, col=c)
        fig.update_yaxes(tickfont=TICK_FONT, nticks=5, row=1, col=c)
        if col != "coarse_loss":
            fig.update_yaxes(range=[0, 1.02], row=1, col=c)
    fig.update_annotations(font=TITLE_FONT)
    fig.update_layout(
        title=title,
        font=FONT,
        height=300,
        margin=dict(l=50, r=10, t=90 if title else 60, b=45),
    )
    return fig
