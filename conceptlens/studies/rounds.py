"""A similarity study in rounds (roads2021 section 4.3): select, collect, infer again.

`next_round` closes the loop once: the study's answers go into the workspace (`export`), the
psychological embedding is inferred again by the `similarity` analysis (the very
run `conceptlens analyze similarity` makes), and the next round is designed on it: the same
spec with round + 1, `after` the study, and its trials chosen actively from the new ensemble.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..analysis import runner
from ..workspace import Workspace
from .design import Design, StudyError, design
from .results import export
from .store import Store


@dataclass
class NextRound:
    exported: dict  # what `export` wrote of the previous round
    notes: list[str]  # the similarity analysis' notes
    study_id: str
    token: str | None
    design: Design


def next_round(
    store: Store,
    study_id: str,
    ws: Workspace,
    *,
    tasks: int | None = None,
    selection: str = "active",
    max_catch_failure: float | None = None,
    new_id: str | None = None,
    token: bool | None = None,
    options: dict | None = None,
    progress_bars: bool = True,
    step=None,
) -> NextRound:
    """Export `study_id`, infer the embedding again, create the next round; `step(message)`
    hears each stage (the page's progress). `options` are `analyze similarity`'s."""
    say = step or (lambda message: None)
    study = store.study(study_id)
    spec = study.spec
    if spec.kind != "similarity":
        raise StudyError(f"study {study_id} is a {spec.kind} study; only similarity studies run in rounds")
    say(f"Exporting the answers of {study_id} into the workspace")
    exported = export(store, study_id, ws, max_catch_failure)
    say(f"Inferring the psychological embedding of {spec.dataset!r} again (analyze similarity)")
    ctx = runner.run(ws.root, "similarity", options, progress_bars=progress_bars, dataset=spec.dataset)
    nxt = replace(
        spec,
        round=spec.round + 1,
        after=study_id,
        selection=selection,
        tasks=spec.tasks if tasks is None else tasks,
    )
    say(f"Choosing the trials of round {nxt.round} ({selection})")
    d = design(ws, nxt)
    if not exported["similarity_trials"]:
        d.notes.insert(0, f"study {study_id} added no trial (no new finished participant)")
    sid, tok = store.create_study(d, new_id, token=token)
    return NextRound(exported, ctx.notes, sid, tok, d)
