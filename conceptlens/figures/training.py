"""Figures of a training run (issue 27): the timeline of concept events and the learning
curves of labels and factors (views/training.py gives their data)."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .theme import MIN_FONT_PX, categorical

# One colour and one symbol per kind, so a black-and-white print still tells them apart.
KIND_STYLE = {
    "split": ("#0072B2", "triangle-right"),
    "merge": ("#D55E00", "triangle-left"),
    "birth": ("#009E73", "circle"),
    "death": ("#555555", "x"),
    "continuation": ("#999999", "line-ew"),
}
LABEL_CHARS = 24  # a line of an event's label at least (labels wrap onto two lines, never cut)
LABEL_LINES = 2
DEFAULT_CAP = 30  # events drawn at most by default (the largest); the rest are counted


def short_text(text: str | None, limit: int = LABEL_CHARS) -> str:
    """A caption cut at a word boundary to at most `limit` characters (… marks a cut), its
    leading article dropped."""
    if not text:
        return ""
    t = " ".join(str(text).split())
    for article in ("a ", "an ", "the "):
        if t.lower().startswith(article):
            t = t[len(article) :]
            break
    if len(t) <= limit:
        return t
    cut = t[: limit - 1].rsplit(" ", 1)[0].rstrip(",;: ")
    return (cut or t[: limit - 1]) + "…"


def wrap_words(words: list[str], width: int = LABEL_CHARS, lines: int = LABEL_LINES) -> str:
    """`words` broken at spaces into at most `lines` lines joined by `<br>` (Plotly's line
    break), each about `width` characters; a longer text gets wider lines, never a cut."""
    words = [w for w in words if w]
    total = len(" ".join(words))
    for w in range(max(width, -(-total // lines)), total + 1):
        out: list[str] = []
        for word in words:
            if out and len(out[-1]) + 1 + len(word) <= w:
                out[-1] += " " + word
            else:
                out.append(word)
        if len(out) <= lines:
            return "<br>".join(out)
    return " ".join(words)


def _no_article(text: str) -> str:
    t = " ".join(str(text).split())
    for article in ("a ", "an ", "the "):
        if t.lower().startswith(article):
            return t[len(article) :]
    return t


def event_label(kind: str, main: int, name: str | None, before: list, after: list) -> str:
    """`name · c12` (the cluster naming the event), plus where it goes / comes from; a long
    name wraps onto a second line at a word boundary (the whole caption, as the hover has it)."""
    words = _no_article(name).split() if name else ["cluster"]
    # The cluster's id and the arrow stay on one line with the word next to them.
    words[-1] += f" · c{main}" if name else f" {main}"
    if kind == "split":
        words[-1] += f" → {len(after)}"
    elif kind == "merge":
        words[0] = f"{len(before)} → {words[0]}"
    return wrap_words(words)


def _hover(e, axis: str = "epoch") -> str:
    def caps(ids, captions):
        return "<br>".join(
            f"  c{c}: {html.escape(str(t))}" if isinstance(t, str) and t else f"  c{c}"
            for c, t in zip(ids, captions)
        )

    purity = "" if np.isnan(e.purity_before) and np.isnan(e.purity_after) else (
        f"<br>purity {e.purity_before:.2f} → {e.purity_after:.2f}"
    )  # fmt: skip
    p = "" if e.p_value is None or pd.isna(e.p_value) else f"<br>largest p = {e.p_value:.2g}"
    lines = [
        f"<b>{e.kind}</b>, {'depth' if axis == 'depth' else 'epoch'} {e.epoch_from} → {e.epoch_to}",
        f"{e.images} images on its links{purity}{p}",
    ]
    if len(e.before):
        lines.append(f"before ({e.size_before} images):<br>{caps(e.before, e.captions_before)}")
    if len(e.after):
        lines.append(f"after ({e.size_after} images):<br>{caps(e.after, e.captions_after)}")
    return "<br>".join(lines)


AXIS_TITLES = {"epoch": "checkpoint epoch", "depth": "layer (input → output)"}


def event_timeline(
    events: pd.DataFrame,
    epochs: pd.DataFrame,
    cap: int = DEFAULT_CAP,
    title: str | None = None,
    axis: str = "epoch",
) -> go.Figure:
    """The concept events of a run against training: one row per event, labelled with the
    caption (else the top label, else the id) of the cluster it is about, its mark between
    the two checkpoints it happened between (x: the run's checkpoints, named by epoch),
    colour and symbol by kind, size by its images. At most `cap` events, the largest (by
    images); a note above the plot counts the others.

    `events`: `views.training.events`; `epochs`: `views.training.epochs` (checkpoint_id,
    epoch, in order; `tick`, where given, names each on the axis). `axis`: `epoch`, or
    `depth` for the layers of one network (x: the layers, named by module)."""
    n_all = len(events)
    shown = events
    if cap and n_all > cap:
        keep = events.sort_values(["images", "step"], ascending=[False, True], kind="stable").index[:cap]
        shown = events.loc[sorted(keep)]
    shown = shown.reset_index(drop=True)
    pos = {str(c): i for i, c in enumerate(epochs["checkpoint_id"])}
    y = -np.arange(len(shown), dtype=float)
    fig = go.Figure()
    if len(shown):
        x_from = np.array([pos.get(str(c), np.nan) for c in shown["checkpoint_from"]], float)
        x_to = np.array([pos.get(str(c), np.nan) for c in shown["checkpoint_to"]], float)
        # The span of each event: from the earlier checkpoint to the later one.
        xs = np.column_stack([x_from, x_to, np.full(len(shown), np.nan)]).ravel()
        ys = np.column_stack([y, y, np.full(len(shown), np.nan)]).ravel()
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                line=dict(color="#CCCCCC", width=1),
                hoverinfo="skip",
                showlegend=False,
            )
        )
        size = 7 + 9 * np.sqrt(shown["images"].to_numpy(float) / max(1.0, float(shown["images"].max())))
        for kind, (colour, symbol) in KIND_STYLE.items():
            m = (shown["kind"] == kind).to_numpy()
            if not m.any():
                continue
            fig.add_trace(
                go.Scatter(
                    x=(x_from[m] + x_to[m]) / 2,
                    y=y[m],
                    mode="markers",
                    name=kind,
                    marker=dict(
                        color=colour,
                        symbol=symbol,
                        size=size[m],
                        line=dict(width=1.5 if symbol in ("x", "line-ew") else 0.5, color=colour),
                    ),
                    text=[_hover(e, axis) for e in shown[m].itertuples(index=False)],
                    hovertemplate="%{text}<extra></extra>",
                )
            )
    labels = [event_label(e.kind, e.main, e.name, e.before, e.after) for e in shown.itertuples(index=False)]
    n_ck = len(epochs)
    more = n_all - len(shown)
    note = f"The {len(shown)} largest of {n_all} events ({more} more in the table)" if more else ""
    heading = "<br>".join(t for t in (title, note) if t)
    fig.update_layout(
        title=dict(
            text=heading or None, x=0.01, xanchor="left", xref="container", font=dict(size=MIN_FONT_PX + 1)
        ),
        # A row as tall as its label's lines (a long caption wraps onto two).
        height=120 + (28 if any("<br>" in t for t in labels) else 17) * max(len(shown), 3),
        xaxis=dict(
            title=dict(text=AXIS_TITLES[axis]),
            tickvals=list(range(n_ck)),
            ticktext=[str(e) for e in (epochs["tick"] if "tick" in epochs else epochs["epoch"])],
            range=[-0.3, n_ck - 0.7],
            # Layer names upright: slanted, the last one ran off the right edge and was dropped.
            tickangle=-90 if axis == "depth" else None,
            automargin=True,
            showgrid=True,
            zeroline=False,
        ),
        yaxis=dict(
            tickvals=list(y),
            ticktext=labels,
            range=[y.min() - 0.7 if len(y) else -1, 0.7],
            showgrid=False,
            zeroline=False,
            automargin=True,
        ),
        legend=dict(
            orientation="h",
            yanchor="bottom",
            y=1.0,
            xanchor="right",
            x=1,
            font=dict(size=MIN_FONT_PX),
            itemsizing="constant",
        ),
        margin=dict(l=10, r=10, t=30 + 16 * heading.count("<br>") + (18 if heading else 0), b=44),
    )
    return fig


def learning_curves(
    curves: pd.DataFrame, by: str = "factor", title: str | None = None, axis: str = "epoch"
) -> go.Figure:
    """AUC against epoch (or depth) with its 95% interval as a band: a line per factor
    (`by="factor"`, the factors' whole-factor rows) or per value of one factor
    (`by="value"`). A filled marker: learned there (the interval's low end above the
    threshold, the dotted line).

    `curves`: `views.training.curves`; `axis` `depth`: x is the layers of one network,
    named by module (`layer`; `embedding` for the default one)."""
    names = list(dict.fromkeys(curves[by].astype(str))) if len(curves) else []
    colours = dict(zip(names, categorical(len(names))))
    fig = go.Figure()
    for name in names:
        g = curves[curves[by].astype(str) == name].sort_values("epoch")
        x = g["epoch"].to_numpy(float)
        lo, hi = g["auc_lo"].to_numpy(float), g["auc_hi"].to_numpy(float)
        colour = colours[name]
        fig.add_trace(
            go.Scatter(
                x=np.concatenate([x, x[::-1]]),
                y=np.concatenate([hi, lo[::-1]]),
                mode="lines",
                fill="toself",
                fillcolor=_alpha(colour, 0.18),
                line=dict(width=0),
                hoverinfo="skip",
                showlegend=False,
                legendgroup=name,
            )
        )
        learned = g["learned"].astype(bool).to_numpy()
        fig.add_trace(
            go.Scatter(
                x=x,
                y=g["auc"].to_numpy(float),
                mode="lines+markers",
                name=name,
                legendgroup=name,
                line=dict(color=colour, width=1.5),
                marker=dict(
                    size=7,
                    color=[colour if v else "white" for v in learned],
                    line=dict(color=colour, width=1.5),
                ),
                customdata=np.column_stack([lo, hi, g["checkpoint_id"].astype(str)]),
                hovertemplate=(
                    f"{html.escape(name)}<br>{'depth' if axis == 'depth' else 'epoch'} %{{x}}"
                    "<br>AUC %{y:.3f} "
                    "[%{customdata[0]:.3f}, %{customdata[1]:.3f}]<br>%{customdata[2]}<extra></extra>"
                ),
            )
        )
    if len(curves):
        thr = float(curves["threshold"].iloc[0])
        fig.add_hline(y=thr, line=dict(color="#555555", dash="dot", width=1))
        epochs = sorted(set(curves["epoch"].astype(int)))
        ticks = [str(e) for e in epochs]
        if axis == "depth" and "layer" in curves:
            named = curves.drop_duplicates("epoch").set_index("epoch")["layer"]
            ticks = [str(named[e]) if isinstance(named.get(e), str) else "embedding" for e in epochs]
        lo = float(np.nanmin(curves["auc_lo"].astype(float))) if curves["auc_lo"].notna().any() else 0.5
        fig.update_layout(
            xaxis=dict(tickvals=epochs, ticktext=ticks),
            yaxis=dict(range=[min(0.5, lo) - 0.02, 1.01]),
        )
    fig.update_layout(
        title=title,
        height=380,
        xaxis_title=AXIS_TITLES[axis],
        yaxis_title="held-out kNN AUC (one vs rest)",
        legend=dict(orientation="h", yanchor="bottom", y=1.01, x=0, font=dict(size=MIN_FONT_PX)),
        margin=dict(l=56, r=14, t=40 if title else 30, b=44),
    )
    return fig


def _alpha(colour: str, a: float) -> str:
    c = colour.lstrip("#")
    r, g, b = (int(c[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{a})"
