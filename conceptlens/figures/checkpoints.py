"""Figures comparing a dataset's checkpoints: CL vs ID, predictor correlations, training
curves, aNMI, the cluster-matching Sankey, two linked projections.

Each must read at a paper's single column (3.5 in, which `figure_bytes` renders at 336 x
250 px) as well as at its double column and on the page: type of at least MIN_FONT_PX, no
label on another or cut at the edge. Where a figure has more names than room (29
checkpoints, 71 clusters), it writes only those that fit at every size of CHECK_SIZES and
keeps every name in the hover label.
"""

from __future__ import annotations

import math
import os
import textwrap

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..schema import MIN_STABLE_CHECKPOINTS
from .theme import (
    BASE_FONT_PX,
    MIN_FONT_PX,
    OKABE_ITO,
    SEQUENTIAL,
    break_name,
    categorical,
    data_range,
    range_title,
)

METRIC_TITLES = {
    "knn_acc": "kNN accuracy",
    "cl": "CL",
    "id": "ID",
    "clid": "CLID",
    "anmi": "aNMI",
    "mean_purity": "mean purity",
    "mean_coherence": "mean coherence (random)",
}
# The scale of each metric bounded to [0, 1] (a share): an axis spans at least a tenth of
# it (theme.data_range). ID and CLID have no bounded scale.
METRIC_SCALES = {m: (0.0, 1.0) for m in ("knn_acc", "cl", "anmi", "mean_purity", "mean_coherence")}
PREDICTOR_LABELS = {
    "cl": "CL",
    "cl_heldout": "CL held-out",
    "id": "ID",
    "clid": "CLID",
    "wclid": "W-CLID",
    "wclid_loo": "W-CLID LOO",
    "alignment": "alignment",
    "uniformity": "uniformity",
    "mcr2": "MCR² ΔR",
    "rotation": "rotation pred.",
    "source_entropy": "−H source*",
    "knn_acc": "kNN acc.*",
    "target_entropy": "−H target*",
}
GREY = "#999999"


def _rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


# Okabe-Ito hues: blue split, vermillion merge, reddish purple both, orange partial. Keyed
# by `compare.classify_links` kinds and by `events.label_links` events (the Sankey's colours).
KIND_COLOURS = {
    "one-to-one": _rgba(GREY, 0.45),
    "continuation": _rgba(GREY, 0.45),
    "split": _rgba(OKABE_ITO[4], 0.6),
    "merge": _rgba(OKABE_ITO[5], 0.6),
    "split+merge": _rgba(OKABE_ITO[6], 0.7),
    "partial": _rgba(OKABE_ITO[0], 0.45),
    "minor": _rgba("#CCCCCC", 0.3),
    "not significant": _rgba("#CCCCCC", 0.3),
}

# Width x height in px at which the page's figures are checked for overlaps and clipping:
# single column (3.5 x 2.6 in), double column (7 x 4 in and 7 x 5.25 in, the catalog's
# aspect of CL vs ID) and the page's columns.
CHECK_SIZES = ((336, 250), (672, 384), (672, 504), (560, 420), (760, 420))
CHAR_WIDTH = 0.6  # of the font size: a generous mean advance of Arial (digits are 0.556)


def _text_box(text: str, size: float = MIN_FONT_PX) -> tuple[float, float]:
    return CHAR_WIDTH * size * len(text) + 4, 1.3 * size + 2


def short_names(ids) -> list[str]:
    """The ids without the prefix they all share up to a '-' or '_' (`shapes-clip`,
    `shapes-pca` -> `clip`, `pca`), so tick labels spend their room on what differs."""
    ids = [str(i) for i in ids]
    if len(ids) < 2:
        return ids
    prefix = os.path.commonprefix(ids)
    cut = max(prefix.rfind("-"), prefix.rfind("_")) + 1
    out = [i[cut:] for i in ids]
    return out if all(out) and len(set(out)) == len(out) else ids


def _num(value, fmt: str = "{:.2f}") -> str:
    return "\u2014" if value is None or pd.isna(value) else fmt.format(value)


def _padded(v: np.ndarray, share: float = 0.06) -> list[float]:
    lo, hi = float(np.min(v)), float(np.max(v))
    span = hi - lo if hi > lo else max(abs(hi), 1.0) * 0.1
    return [lo - share * span, hi + share * span]


# ---- CL vs ID -----------------------------------------------------------------------------
_SCATTER_MARGIN = dict(l=56, r=86, t=14, b=44)
_MARKER = 10  # px, diameter
_DIRECTIONS = ((1, 0), (-1, 0), (0, -1), (0, 1), (1, -1), (-1, -1), (1, 1), (-1, 1))
_REACH = (0, 16, 32, 52)  # px further out than adjacent; beyond 0 a leader line is drawn


def _anchor(u: int, side: float, extent: float) -> float:
    """Where a box of `extent` starts, along one axis, next to an anchor point `side` px away."""
    return side if u > 0 else side - extent if u < 0 else side - extent / 2


def place_labels(
    x: np.ndarray,
    y: np.ndarray,
    labels: dict[int, str],
    xrange: list[float],
    yrange: list[float],
    margin: dict,
    sizes=CHECK_SIZES,
    marker: float = _MARKER,
    font: float = MIN_FONT_PX,
) -> dict[int, tuple[int, int, float, float, bool]]:
    """Where to write the labels of the points `labels` names (index -> text), so that at
    every figure size of `sizes` no label leaves the plot area or touches another label,
    covering as few markers as possible.

    Returns index -> (ux, uy, tx, ty, leader): the label lies in direction (ux, uy) of
    its point (screen y down), its near edge at (tx, ty) px from the point, with a leader
    line when it is not next to the marker. Offsets in px keep their length at every size
    while points move apart: a placement is accepted only when it holds at all sizes.
    Labels that fit nowhere are left out (their names stay in the hover label).
    """
    r = marker / 2 + 1
    frames = []
    for w, h in sizes:
        pw, ph = w - margin["l"] - margin["r"], h - margin["t"] - margin["b"]
        px = margin["l"] + (x - xrange[0]) / (xrange[1] - xrange[0]) * pw
        py = margin["t"] + (1 - (y - yrange[0]) / (yrange[1] - yrange[0])) * ph
        frames.append((px, py, (margin["l"], margin["t"], margin["l"] + pw, margin["t"] + ph)))
    placed: dict[int, tuple[int, int, float, float, bool]] = {}
    boxes: list[list[tuple[float, float, float, float]]] = [[] for _ in sizes]
    for i, text in labels.items():
        tw, th = _text_box(text, font)
        best, best_cost, best_box = None, math.inf, None
        for tier, reach in enumerate(_REACH):
            for d, (ux, uy) in enumerate(_DIRECTIONS):
                norm = math.hypot(ux, uy)
                tx, ty = ux * (r + 2) + ux / norm * reach, uy * (r + 2) + uy / norm * reach
                bx, by = _anchor(ux, tx, tw), _anchor(uy, ty, th)
                cost, ok = tier * 3 + d * 0.1, True
                for (px, py, (x0, y0, x1, y1)), taken in zip(frames, boxes):
                    box = (px[i] + bx, py[i] + by, px[i] + bx + tw, py[i] + by + th)
                    if box[0] < x0 or box[1] < y0 or box[2] > x1 or box[3] > y1:
                        ok = False
                        break
                    if any(
                        box[0] < b[2] + 1 and b[0] < box[2] + 1 and box[1] < b[3] + 1 and b[1] < box[3] + 1
                        for b in taken
                    ):
                        ok = False
                        break
                    covered = (px > box[0] - r) & (px < box[2] + r) & (py > box[1] - r) & (py < box[3] + r)
                    if reach:  # the leader line, from the marker's edge to the label
                        t = np.linspace(0, 1, 12)[:, None]
                        lx, ly = px[i] + t * tx, py[i] + t * ty
                        near = (np.hypot(px[None, :] - lx, py[None, :] - ly) < r).any(axis=0)
                        covered |= near
                        if any(((lx > b[0]) & (lx < b[2]) & (ly > b[1]) & (ly < b[3])).any() for b in taken):
                            ok = False
                            break
                    covered[i] = False
                    cost += 5 * int(covered.sum())
                if ok and cost < best_cost:
                    best, best_cost, best_box = (ux, uy, tx, ty, tier > 0), cost, (bx, by)
            if best is not None and best_cost < (tier + 1) * 3:
                break  # nothing further out can be cheaper
        if best is None:
            continue
        placed[i] = best
        for (px, py, _), taken in zip(frames, boxes):
            bx, by = best_box
            taken.append((px[i] + bx, py[i] + by, px[i] + bx + tw, py[i] + by + th))
    return placed


def default_labels(summary: pd.DataFrame) -> dict[str, str]:
    """The checkpoints with the highest and the lowest kNN accuracy, by name."""
    s = summary[summary["cl"].notna() & summary["id"].notna()]
    if "knn_acc" not in s.columns or s["knn_acc"].isna().all():
        return {}
    acc = s.set_index("checkpoint_id")["knn_acc"].astype(float)
    return {str(acc.idxmax()): str(acc.idxmax()), str(acc.idxmin()): str(acc.idxmin())}


def cl_id_scatter(
    summary: pd.DataFrame, title: str | None = None, labels: dict[str, str] | None = None
) -> go.Figure:
    """lu2022 Fig. 1: each checkpoint at (ID, CL), coloured by kNN accuracy.

    Every checkpoint's name is in its hover label; `labels` (checkpoint id -> text,
    default: the best and worst by kNN accuracy) are written next to their points, ringed,
    where they fit (`place_labels`).
    """
    s = summary[summary["cl"].notna() & summary["id"].notna()].reset_index(drop=True)
    acc = s["knn_acc"].astype(float) if "knn_acc" in s.columns else pd.Series(np.nan, index=s.index)
    # A colour scale needs two accuracies to span: one value (one checkpoint) would get a
    # colour bar around itself (-0.2..0.6 for 0.2), so it is drawn in one colour instead.
    has_acc = acc.nunique() >= 2
    ids = s["checkpoint_id"].astype(str)
    x, y = s["id"].astype(float).to_numpy(), s["cl"].astype(float).to_numpy()
    margin = dict(_SCATTER_MARGIN, t=40 if title else _SCATTER_MARGIN["t"])
    fig = go.Figure(
        go.Scatter(
            x=x,
            y=y,
            mode="markers",
            text=ids,
            # Names are data, markup is the template's (the dashboard escapes data: components/text.py).
            customdata=[[c, _num(v, "{:.3f}")] for c, v in zip(ids, acc)],
            hovertemplate=(
                "<b>%{customdata[0]}</b><br>kNN acc %{customdata[1]}<br>"
                "ID %{x:.2f} · CL %{y:.3f}<extra></extra>"
            ),
            marker=dict(
                size=_MARKER,
                line=dict(width=0.8, color="#333"),
                color=acc if has_acc else OKABE_ITO[4],
                colorscale=SEQUENTIAL if has_acc else None,
                showscale=has_acc,
                colorbar=dict(title=dict(text="kNN acc", side="right"), thickness=10, x=1.02, xanchor="left")
                if has_acc
                else None,
            ),
            showlegend=False,
        )
    )
    layout = dict(
        title=title,
        height=420,
        xaxis_title="intrinsic dimension (ID)",
        yaxis_title="cluster learnability (CL)",
        margin=dict(margin, autoexpand=False),
    )
    if s.empty:
        fig.update_layout(**layout)
        fig.add_annotation(
            text="no checkpoint has both CL and ID", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5
        )
        return fig
    xr, yr = _padded(x), _padded(y)
    layout |= dict(xaxis=dict(range=xr), yaxis=dict(range=yr))
    labels = default_labels(s) if labels is None else labels
    index = {c: i for i, c in enumerate(ids)}
    wanted = {index[c]: str(t) for c, t in labels.items() if c in index}
    placed = place_labels(x, y, wanted, xr, yr, margin)
    if wanted:
        ring = sorted(wanted)
        fig.add_trace(
            go.Scatter(
                x=x[ring],
                y=y[ring],
                mode="markers",
                marker=dict(size=_MARKER + 6, symbol="circle-open", color="#222", line=dict(width=1.5)),
                hoverinfo="skip",
                showlegend=False,
            )
        )
    for i, (ux, uy, tx, ty, leader) in placed.items():
        common = dict(x=x[i], y=y[i], text=wanted[i], font=dict(size=MIN_FONT_PX))
        if leader:
            # Plotly starts a leader line at the edge of a text box centred on its tail.
            tw, th = _text_box(wanted[i])
            fig.add_annotation(
                **common,
                showarrow=True,
                ax=_anchor(ux, tx, tw) + tw / 2,
                ay=_anchor(uy, ty, th) + th / 2,
                arrowhead=0,
                arrowwidth=1,
                arrowcolor="#555",
                standoff=_MARKER / 2 + 2,
            )
        else:
            fig.add_annotation(
                **common,
                showarrow=False,
                xshift=tx,
                yshift=-ty,
                xanchor="left" if ux > 0 else "right" if ux < 0 else "center",
                yanchor="top" if uy > 0 else "bottom" if uy < 0 else "middle",
            )
    fig.update_layout(**layout)
    return fig


# ---- predictor correlations ----------------------------------------------------------------
def correlation_forest(
    corr: pd.DataFrame, title: str | None = None, target: str = "kNN acc.", over: str | None = None
) -> go.Figure:
    """Each predictor's Pearson r and Kendall τ with kNN accuracy, with their 95%
    intervals as bars (`views.checkpoints.predictor_correlations`); a missing interval draws no
    bar, a missing coefficient no point. A correlation over fewer than 10 checkpoints
    (`unstable`) is drawn hollow and the axis says its interval is unstable. `over`: the
    population the correlations are over ("training checkpoints"), said on the axis, so an
    exported file says it too."""
    preds = list(corr["predictor"])
    if "unstable" in corr.columns:
        unstable = corr["unstable"].fillna(False).astype(bool).to_numpy()
    else:
        unstable = (corr["n_checkpoints"].fillna(0) < MIN_STABLE_CHECKPOINTS).to_numpy()
    perm = {
        c: corr[c].astype(float) if c in corr.columns else pd.Series(np.nan, index=corr.index)
        for c in ("pearson_perm_p", "kendall_perm_p")
    }
    names = [PREDICTOR_LABELS.get(p, p) for p in preds]
    pos = np.arange(len(preds), dtype=float)
    n = corr["n_checkpoints"].dropna()
    fig = go.Figure()
    for j, (col, name, symbol, colour) in enumerate(
        (("pearson", "Pearson r", "circle", OKABE_ITO[4]), ("kendall", "Kendall τ", "diamond", OKABE_ITO[5]))
    ):
        v = corr[col].astype(float).to_numpy()
        lo, hi = corr[f"{col}_lo"].astype(float).to_numpy(), corr[f"{col}_hi"].astype(float).to_numpy()
        fig.add_trace(
            go.Scatter(
                x=v,
                y=pos + (0.17 if j == 0 else -0.17),
                mode="markers",
                name=name,
                marker=dict(
                    size=8, symbol=[f"{symbol}-open" if u else symbol for u in unstable], color=colour
                ),
                error_x=dict(
                    type="data",
                    symmetric=False,
                    array=np.where(np.isnan(hi), 0, hi - np.nan_to_num(v)),
                    arrayminus=np.where(np.isnan(lo), 0, np.nan_to_num(v) - lo),
                    thickness=1.5,
                    width=3,
                    color=colour,
                ),
                customdata=[
                    f"{nm}: {name} {_num(c)}<br>95% CI [{_num(a)}, {_num(b)}]<br>p {_num(p, '{:.3g}')}"
                    f", permutation p {_num(q, '{:.3g}')}"
                    + ("<br>fewer than 10 checkpoints: interval unstable, not a finding" if u else "")
                    for nm, c, a, b, p, q, u in zip(
                        names, v, lo, hi, corr[f"{col}_p"].astype(float), perm[f"{col}_perm_p"], unstable
                    )
                ],
                hovertemplate="%{customdata}<extra></extra>",
            )
        )
    n_text = f" (n = {int(n.iloc[0])})" if len(n) and n.nunique() == 1 else ""
    if over:
        n_text += f"<br>over {over}"
    if unstable.any():
        # Two short lines: one line is wider than the plot at one column (3.5 in).
        n_text += f"<br>hollow: fewer than {MIN_STABLE_CHECKPOINTS} checkpoints,<br>interval unstable"
    fig.add_vline(x=0, line=dict(color=GREY, width=1, dash="dot"))
    fig.update_layout(
        title=title,
        height=max(300, 34 * len(preds) + 110),
        xaxis=dict(range=[-1.05, 1.05], title=f"correlation with {target}{n_text}"),
        yaxis=dict(
            tickmode="array",
            tickvals=pos,
            ticktext=names,
            range=[len(preds) - 0.5, -0.5],
            automargin=True,
            zeroline=False,
        ),
        legend=dict(orientation="h", yanchor="bottom", y=1.01, x=0, font=dict(size=MIN_FONT_PX)),
        margin=dict(l=10, r=14, t=40 if title else 26, b=44 + 14 * max(0, n_text.count("<br>") - 1)),
    )
    return fig


# ---- over training --------------------------------------------------------------------------
_DASHES = ("solid", "dash", "dot", "dashdot")


def metrics_vs_epoch(long: pd.DataFrame, metric: str | None = None, title: str | None = None) -> go.Figure:
    """One metric (default: the first of `long`) against epoch, a line per run, coloured
    by method (one legend entry each), the runs of one method told apart by dash.

    `long` has columns run, epoch, checkpoint_id, metric, value and method
    (`conceptlens.metrics.compare.epoch_long`).
    """
    metrics = list(dict.fromkeys(long["metric"].astype(str)))
    metric = metric or (metrics[0] if metrics else None)
    d = long[long["metric"].astype(str) == metric] if metric else long.iloc[:0]
    method = d["method"].astype(str) if "method" in d.columns else d["run"].astype(str)
    d = d.assign(method=method)
    methods = sorted(d["method"].unique())
    colours = dict(zip(methods, categorical(len(methods))))
    fig = go.Figure()
    for m in methods:
        runs = sorted(d.loc[d["method"] == m, "run"].unique())
        for j, run in enumerate(runs):
            r = d[(d["method"] == m) & (d["run"] == run)].sort_values("epoch")
            fig.add_trace(
                go.Scatter(
                    x=r["epoch"],
                    y=r["value"],
                    mode="lines+markers",
                    name=m,
                    legendgroup=m,
                    showlegend=j == 0,
                    line=dict(color=colours[m], dash=_DASHES[j % len(_DASHES)], width=1.5),
                    marker=dict(size=5),
                    customdata=np.column_stack([r["checkpoint_id"].astype(str), r["run"].astype(str)]),
                    hovertemplate=(
                        "%{customdata[1]}<br>epoch %{x}<br>"
                        f"{METRIC_TITLES.get(metric, metric)} %{{y:.3f}}<br>%{{customdata[0]}}<extra></extra>"
                    ),
                )
            )
    scale = METRIC_SCALES.get(metric)
    yrange = data_range(d["value"].astype(float), scale) if len(d) else None
    name = METRIC_TITLES.get(metric, metric or "")
    fig.update_layout(
        title=title,
        height=380,
        xaxis=dict(title="epoch", tickformat="d"),
        yaxis=dict(title=range_title(name, yrange, scale[0]) if yrange and scale else name, range=yrange),
        legend=dict(orientation="h", yanchor="bottom", y=1.01, x=0, font=dict(size=MIN_FONT_PX)),
        margin=dict(l=56, r=14, t=40 if title else 30, b=44),
    )
    return fig


# ---- aNMI between clusterings --------------------------------------------------------------
TICK_CHARS = 16  # a tick label's characters at most (the full name is in the hover label)


def anmi_heatmap(matrix: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Square heatmap of aNMI between checkpoints' clusterings.

    Tick labels drop the prefix all ids share and break onto lines of at most TICK_CHARS
    characters (never cut inside a word); past 8 checkpoints every step-th is named, at most
    8 per axis (every name is in the hover label). Values are written in
    the cells up to 12 checkpoints, where they still fit a single column."""
    z = matrix.to_numpy(dtype=float)
    full = [str(c) for c in matrix.columns]
    ticks = [break_name(s, TICK_CHARS) for s in short_names(full)]
    if len(set(ticks)) < len(ticks):
        ticks = full
    n = len(matrix)
    text = np.where(np.isnan(z), "", np.vectorize(lambda v: f"{v:.2f}")(np.nan_to_num(z)))
    names = np.array(full, dtype=object)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=ticks,
            y=ticks,
            zmin=0,
            zmax=1,
            colorscale=SEQUENTIAL,
            text=text,
            texttemplate="%{text}" if n <= 12 else None,
            textfont=dict(size=MIN_FONT_PX),
            customdata=np.stack([np.repeat(names[:, None], n, 1), np.repeat(names[None, :], n, 0)], -1),
            hovertemplate="%{customdata[0]} vs %{customdata[1]}<br>aNMI %{z:.3f}<extra></extra>",
            colorbar=dict(title=dict(text="aNMI", side="right"), thickness=10),
        )
    )
    # At most 8 names along each axis (every step-th checkpoint): 12 names ran into each other
    # at one column; every name is in the hover label.
    step = -(-n // 8)
    shown = dict(tickvals=ticks[::step], ticktext=ticks[::step]) if step > 1 else {}
    angle = -90 if step > 1 else -45  # upright names take a cell's width, not more
    fig.update_layout(
        title=title,
        yaxis=dict(autorange="reversed", automargin=True, tickfont=dict(size=MIN_FONT_PX), **shown),
        xaxis=dict(tickangle=angle, automargin=True, tickfont=dict(size=MIN_FONT_PX), **shown),
        height=max(420, min(900, 18 * n + 200)),
        margin=dict(l=10, r=10, t=40 if title else 10, b=10),
    )
    return fig


# ---- cluster matching --------------------------------------------------------------------------
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


_SANKEY_PAD = 4  # px between nodes
_SANKEY_MARGIN = dict(l=10, r=10, t=10, b=10)


def labelled_nodes(values_a, values_b, height: float, pad: float = _SANKEY_PAD, font=MIN_FONT_PX):
    """Which nodes of each column are tall enough for a label at plot height `height`
    (px): Plotly scales node heights by the column that needs it most (its total and
    its padding), as d3-sankey does; a label needs its font size plus 2 px."""
    a, b = np.asarray(values_a, float), np.asarray(values_b, float)
    scales = [(height - (len(v) - 1) * pad) / v.sum() for v in (a, b) if len(v) and v.sum() > 0]
    ky = max(min(scales), 0.0) if scales else 0.0
    return a * ky >= font + 2, b * ky >= font + 2


# Nodes light enough for the dark label text (and outlined, so they show on white).
_NODE_COLOUR, _NODE_LINE, _TEXT_COLOUR = "#D4D4D4", "#6E6E6E", "#222222"
_NODE_THICKNESS = 12
# The longest node label (characters) that fits between the columns at one column's width.
_LABEL_CHARS = int(
    ((CHECK_SIZES[0][0] - _SANKEY_MARGIN["l"] - _SANKEY_MARGIN["r"]) / 2 - _NODE_THICKNESS - 8)
    / (CHAR_WIDTH * MIN_FONT_PX)
)
_ARTICLES = ("a ", "an ", "the ")
_LEGEND_PX, _HEADER_PX = 24, 18  # the margins above (legend) and below (column headers)
# Height / width of the exported Sankey (the catalogue's aspect): node labels are chosen to
# fit at one column of this aspect.
SANKEY_ASPECT = 1.0


def node_label(cluster, caption=None, chars: int = _LABEL_CHARS) -> str:
    """A node's label: its cluster id and as much of its caption (less a leading article)
    as fits in `chars` characters, cut at a word with an ellipsis."""
    label = str(cluster)
    if not isinstance(caption, str) or not caption.strip():
        return label
    text = " ".join(caption.split())
    for art in _ARTICLES:
        if text.lower().startswith(art):
            text = text[len(art) :]
            break
    room = chars - len(label) - 1
    if room < 4:
        return label
    return f"{label} {textwrap.shorten(text, room, placeholder='…')}".rstrip()


def cluster_sankey(
    links: pd.DataFrame,
    meta_a: pd.DataFrame | None = None,
    meta_b: pd.DataFrame | None = None,
    name_a: str = "A",
    name_b: str = "B",
    title: str | None = None,
    headers: tuple[str, str] | None = None,
) -> go.Figure:
    """Flows of images from A's clusters (left) to B's (right).

    `links` comes from `conceptlens.views.checkpoints.cluster_links` (or
    `conceptlens.metrics.events.label_links`); a link's colour is its concept event
    (`event`: split, merge, split+merge, continuation, not significant) or, without that
    column, its `compare.classify_links` kind, and a legend drawn in the figure names the
    colours drawn. `meta_a`/`meta_b` are cluster rows (`views.clusters.cluster_table`)
    with a `cluster` column or indexed by cluster; their size, purity, coherence and
    caption go into node hovers, and the caption, shortened, into the node's label. A
    node is labelled only when it is tall enough for its label at a single column's
    height (`labelled_nodes`); every node names itself in its hover label. `headers`
    (default: the names) are written under the two columns.
    """
    meta_a, meta_b = (
        m.set_index("cluster") if m is not None and "cluster" in m.columns else m for m in (meta_a, meta_b)
    )
    col = "event" if "event" in links.columns else "kind"
    a_nodes = sorted(links["a"].unique()) if not links.empty else []
    b_nodes = sorted(links["b"].unique()) if not links.empty else []
    idx_a = {c: i for i, c in enumerate(a_nodes)}
    idx_b = {c: len(a_nodes) + i for i, c in enumerate(b_nodes)}
    names = [f"{name_a}:{c}" for c in a_nodes] + [f"{name_b}:{c}" for c in b_nodes]

    def caption(meta, c):
        if meta is None or "caption" not in meta.columns or c not in meta.index:
            return None
        return meta.loc[c, "caption"]

    full = [node_label(c, caption(meta_a, c)) for c in a_nodes] + [
        node_label(c, caption(meta_b, c)) for c in b_nodes
    ]
    top_px = _SANKEY_MARGIN["t"] + (30 if title else 0) + _LEGEND_PX
    bottom_px = _SANKEY_MARGIN["b"] + _HEADER_PX
    small = CHECK_SIZES[0][0] * SANKEY_ASPECT - top_px - bottom_px
    fit_a, fit_b = labelled_nodes(
        [links.loc[links["a"] == c, "count"].sum() for c in a_nodes],
        [links.loc[links["b"] == c, "count"].sum() for c in b_nodes],
        small,
    )
    labels = [n if fit else "" for n, fit in zip(full, [*fit_a, *fit_b])]
    hover = [_hover_lines(meta_a, c) for c in a_nodes] + [_hover_lines(meta_b, c) for c in b_nodes]
    hover = [[n, f"{h}<br>" if h else ""] for n, h in zip(names, hover)]  # bold in the template
    kinds = links[col].tolist() if not links.empty else []
    # An empty Sankey cannot be exported (Kaleido: "Invalid array length"): no flows, no trace.
    fig = go.Figure()
    if kinds:
        fig.add_trace(
            go.Sankey(
                arrangement="snap",
                textfont=dict(color=_TEXT_COLOUR, size=MIN_FONT_PX),
                node=dict(
                    label=labels,
                    customdata=hover,
                    pad=_SANKEY_PAD,
                    thickness=_NODE_THICKNESS,
                    color=_NODE_COLOUR,
                    line=dict(width=0.5, color=_NODE_LINE),
                    hovertemplate="<b>%{customdata[0]}</b><br>%{customdata[1]}%{value} images<extra></extra>",
                ),
                link=dict(
                    source=[idx_a[a] for a in links["a"]],
                    target=[idx_b[b] for b in links["b"]],
                    value=links["count"].tolist(),
                    color=[KIND_COLOURS.get(k, KIND_COLOURS["minor"]) for k in kinds],
                    customdata=np.column_stack(
                        [
                            [names[idx_a[a]] for a in links["a"]],
                            [names[idx_b[b]] for b in links["b"]],
                            kinds,
                            links["share_a"].round(2),
                            links["share_b"].round(2),
                        ]
                    ),
                    hovertemplate=(
                        "%{customdata[0]} → %{customdata[1]}: %{value} images<br>"
                        "%{customdata[2]} · %{customdata[3]} of source, "
                        "%{customdata[4]} of target<extra></extra>"
                    ),
                ),
            )
        )
    # A Sankey has no legend entries: one empty trace per colour drawn makes them.
    drawn = set(kinds)
    for kind in [k for k in KIND_COLOURS if k in drawn] + sorted(drawn - set(KIND_COLOURS)):
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=kind,
                marker=dict(
                    symbol="square",
                    size=11,
                    color=KIND_COLOURS.get(kind, KIND_COLOURS["minor"]),
                    line=dict(width=0.5, color=_NODE_LINE),  # so the palest one shows
                ),
                hoverinfo="skip",
                showlegend=True,
            )
        )
    top_a, top_b = headers if headers is not None else (name_a, name_b)
    for text, x in ((top_a, 0.0), (top_b, 1.0)):
        fig.add_annotation(
            text=str(text),
            x=x,
            xanchor="left" if x == 0 else "right",
            y=0,
            yanchor="top",
            xref="paper",
            yref="paper",
            showarrow=False,
            font=dict(size=MIN_FONT_PX, color=_TEXT_COLOUR),
        )
    n = max(len(a_nodes), len(b_nodes), 1)
    fig.update_layout(
        title=title,
        height=min(1200, max(380, 20 * n + 120)),
        margin=dict(_SANKEY_MARGIN, t=top_px, b=bottom_px),
        font=dict(size=BASE_FONT_PX),
        showlegend=bool(kinds),
        legend=dict(orientation="h", x=0, xanchor="left", y=1, yanchor="bottom", font=dict(size=MIN_FONT_PX)),
        xaxis=dict(visible=False),
        yaxis=dict(visible=False),
        plot_bgcolor="rgba(0,0,0,0)",
    )
    if not kinds:
        fig.add_annotation(text="no flows to show", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    return fig


# ---- linked projections ------------------------------------------------------------------------
def highlight_images(fig: go.Figure, ids, dim: str = "#C8C8C8") -> go.Figure:
    """Mark the points whose image (customdata[0], as `projection_scatter` sets it) is in
    `ids` as selected, every other point faded grey; nothing changes for no ids."""
    wanted = {str(i) for i in ids}
    if not wanted:
        return fig
    for t in fig.data:
        if t.customdata is not None and len(t.customdata):
            # Plain assignments: `t.update(...)` validates again and costs 30x more (71 traces).
            ids_ = np.asarray(t.customdata, dtype=object)[:, 0].astype(str)
            t.selectedpoints = np.flatnonzero(np.isin(ids_, list(wanted))).tolist()  # a JSON list
            t.selected = {"marker": {"opacity": 1.0}}
            t.unselected = {"marker": {"opacity": 0.25, "color": dim}}
    return fig
