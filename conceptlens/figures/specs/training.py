"""The Checkpoints page's figures of a training run (issue 27): the timeline of concept
events and the learning curves (components/training_section.py draws them on the page)."""

from __future__ import annotations

from ...views import training as T
from ..catalog import Figure, Param, add, view
from .common import needs

KINDS = {"changes": T.CHANGE_KINDS, "all": (*T.CHANGE_KINDS, "continuation")}
CAPS = (30, 15, 60, 0)  # events drawn at most (0: all); the first is the default


def _datasets(db, p) -> list[str]:
    out: set[str] = set()
    for table in ("concept_events", "learning_curves"):
        if db.has(table):
            out |= set(db.query(f"SELECT DISTINCT dataset FROM {table}")["dataset"].astype(str))
    return sorted(out)


DS = Param("ds", _datasets, help="dataset")
RUN = Param("run", lambda db, p: view(db, T.runs, dataset=p["ds"]), help="training run")


def _timeline(db, p):
    from ..training import event_timeline

    events = view(db, T.events, dataset=p["ds"], run=p["run"], kinds=KINDS[p["kinds"]])
    needs(events, f"no {p['kinds']} events in run {p['run']}")
    epochs = view(db, T.epochs, dataset=p["ds"], run=p["run"])
    return event_timeline(events, epochs, cap=p["cap"])


def _curves(db, p):
    from ..training import learning_curves

    if p["factor"] == "all":
        curves = view(db, T.curves, dataset=p["ds"], run=p["run"], factor=None)
        return learning_curves(needs(curves, f"no learning curves of run {p['run']}"), by="factor")
    curves = view(db, T.curves, dataset=p["ds"], run=p["run"], factor=p["factor"])
    curves = needs(curves[curves["value"].notna()], f"no learning curves of {p['factor']}")
    return learning_curves(curves, by="value")


add(
    Figure(
        "checkpoints",
        "event_timeline",
        "Concept events along training",
        (
            DS,
            RUN,
            Param("kinds", lambda db, p: list(KINDS), help="changes: splits, merges, births, deaths"),
            Param("cap", lambda db, p: list(CAPS), kind=int, help="events drawn at most (0: all)"),
        ),
        _timeline,
        aspect=1.2,
        tables=("concept_events", "checkpoints"),
    )
)
add(
    Figure(
        "checkpoints",
        "learning_curves",
        "Learning curves along training",
        (
            DS,
            RUN,
            Param(
                "factor",
                lambda db, p: ["all", *view(db, T.factors, dataset=p["ds"], run=p["run"])],
                help="all: one line per factor; else one per value",
            ),
        ),
        _curves,
        aspect=0.75,
        tables=("learning_curves",),
    )
)
