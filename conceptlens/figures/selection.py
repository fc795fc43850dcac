"""The scores of one selection across the checkpoints of its dataset (issue 26 item 3): one
panel per score, checkpoints by epoch within each run, the value with its interval bars and
the random-set null's median (views.selection.across builds the table)."""

from __future__ import annotations

import math
import os

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..metrics import score_names
from . import theme  # noqa: F401  (the ConceptLens template)
from .theme import MIN_FONT_PX

# Panels in this order, those the table has.
SCORES = (
    "learnability",
    "coherence_random",
    "coherence_hard",
    "describability_top1",
    "intrinsic_dim",
    "purity_label",
)


MAX_TICKS = 12  # checkpoint names along the x axis at most (every n-th beyond)


def score_name(score: str) -> str:
    """What the page's table and the figure's panels call a score (metrics/score_names.py)."""
    return score_names.title(score)


def across_figure(table: pd.DataFrame, scores: tuple[str, ...] | None = None) -> go.Figure:
    """Each score per checkpoint (x: the checkpoints by run then epoch, labelled with the
    epoch when there is one), value and interval bars per run, the null median dotted. A
    run's checkpoints are joined by a line; checkpoints outside any run (unrelated models)
    are points alone. By default purity is left out: it is a property of the images, the
    same on every checkpoint (the table keeps it)."""
    if table is None or table.empty:
        raise ValueError("no score to plot: the selection was scored on no checkpoint")
    have = list(dict.fromkeys(table["score"]))
    if scores is None:
        of_checkpoint = [s for s in have if not s.startswith(score_names.PURITY)]
        names = [s for s in SCORES if s in of_checkpoint] or of_checkpoint[:6] or have[:6]
    else:
        names = [s for s in scores if s in have] or have[:6]
    order = list(dict.fromkeys(table["checkpoint_id"]))
    fig = make_subplots(
        rows=len(names),
        cols=1,
        shared_xaxes=True,
        subplot_titles=[score_name(n) for n in names],
        # Room between panels for the next panel's title (6 panels: 0.06 of the height).
        vertical_spacing=min(0.12, 0.36 / max(len(names), 1)),
    )
    runs = list(dict.fromkeys(table["run"].fillna("")))
    for i, name in enumerate(names, start=1):
        t = table[table["score"] == name]
        for j, run in enumerate(runs):
            r = t[t["run"].fillna("") == run]
            if r.empty:
                continue
            lo = (r["value"] - r["lo"]).where(r["lo"].notna())
            hi = (r["hi"] - r["value"]).where(r["hi"].notna())
            fig.add_trace(
                go.Scatter(
                    x=r["checkpoint_id"],
                    y=r["value"],
                    mode="lines+markers" if run else "markers",
                    name=str(run) or "checkpoints outside a run",
                    legendgroup=str(run),
                    showlegend=i == 1,
                    line={"color": _colour(j)},
                    error_y={
                        "type": "data",
                        "array": hi.tolist(),
                        "arrayminus": lo.tolist(),
                        "visible": True,
                    },
                    customdata=r[["pct_random"]].to_numpy(),
                    hovertemplate=(
                        "%{x}<br>%{y:.3f}<br>percentile among random sets %{customdata[0]:.0f}<extra></extra>"
                    ),
                ),
                row=i,
                col=1,
            )
        fig.add_trace(
            go.Scatter(
                x=t["checkpoint_id"],
                y=t["null_random_median"],
                mode="markers",
                marker={"symbol": "line-ew-open", "size": 12, "color": "grey"},
                name="random sets (median)",
                legendgroup="null",
                showlegend=i == 1,
            ),
            row=i,
            col=1,
        )
    epochs = table.drop_duplicates("checkpoint_id").set_index("checkpoint_id")["epoch"]
    # Names without the prefix they all share (the dataset's), and at most MAX_TICKS of them:
    # 29 names along 3.5 in ran into each other; every point keeps its name in the hover.
    prefix = os.path.commonprefix(order) if len(order) > 1 else ""
    prefix = prefix[: prefix.rfind("-") + 1] if "-" in prefix else ""
    every = max(1, math.ceil(len(order) / MAX_TICKS))
    ticks = [
        (c[len(prefix) :] or c)
        + ("" if epochs.get(c) is None or _missing(epochs.get(c)) else f" (e{int(epochs.get(c))})")
        for c in order
    ]
    shown = [c for j, c in enumerate(order) if j % every == 0]
    fig.update_xaxes(
        categoryorder="array",
        categoryarray=order,
        tickvals=shown,
        ticktext=[t for j, t in enumerate(ticks) if j % every == 0],
        row=len(names),
        col=1,
    )
    # Three y ticks a panel, so that a short panel (one column, 3.5 in) keeps its labels
    # apart and off the titles; the scores in [0, 1] on that whole range.
    for i, name in enumerate(names, start=1):
        if _unit(name):
            fig.update_yaxes(range=[-0.08, 1.08], tickvals=[0, 0.5, 1], row=i, col=1)
        else:
            fig.update_yaxes(nticks=3, row=i, col=1)
    fig.update_annotations(font={"size": MIN_FONT_PX + 1})  # the panels' titles
    fig.update_layout(
        height=180 * len(names) + 120,
        margin={"t": 40},
        # Above the panels, where the export makes room for its rows (a legend on the
        # right takes half the width of one column).
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0, "font": {"size": MIN_FONT_PX}},
    )
    return fig


# Scores that are a share or an AUC: their panels span [0, 1].
UNIT_SCORES = ("learnability", "coherence_", "describability_", "purity_")


def _unit(score: str) -> bool:
    return any(score == u or (u.endswith("_") and score.startswith(u)) for u in UNIT_SCORES)


def _missing(v) -> bool:
    try:
        return v is None or pd.isna(v) or (isinstance(v, float) and math.isnan(v))
    except (TypeError, ValueError):
        return False


def _colour(j: int) -> str:
    import plotly.express as px

    pal = px.colors.qualitative.Plotly
    return pal[j % len(pal)]
