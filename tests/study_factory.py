"""Small studies on the factory workspace (harness/factory.py: dataset `toy`, 48 images;
clusters of ck0 at k=4 have 15, 16, 16 and 1 images, so 3 clusters can be tested with up to
14 references), and helpers that answer them."""

from __future__ import annotations

import random

from conceptlens.studies.design import StudySpec, design
from conceptlens.workspace import Workspace

SPECS = {
    "coherence": StudySpec("coherence", "ck0", 4, refs=5, answers=3, per_participant=10, catch=2, seed=3),
    "hard": StudySpec("coherence", "ck0", 4, negatives="hard", refs=5, answers=2, per_participant=8, catch=1),
    "describability": StudySpec("describability", "ck0", 4, refs=5, answers=3, per_participant=3, catch=1),
    "similarity": StudySpec("similarity", dataset="toy", tasks=30, answers=2, per_participant=6, catch=2),
}


def create(store, root, name: str = "coherence", study_id: str | None = None, token=None, **changes):
    """(study_id, token, design) of SPECS[name] (with `changes`) stored in `store`."""
    from dataclasses import replace

    d = design(Workspace(root), replace(SPECS[name], **changes))
    sid, tok = store.create_study(d, study_id, token=token)
    return sid, tok, d


def response(kind: str, rng: random.Random):
    return rng.sample(range(8), 2) if kind == "similarity" else rng.choice(["left", "right"])


def answer_all(store, study_id: str, participant_id: str, seed: int = 0, respond=None) -> list:
    """Answer every task of the participant's session; `respond(current)` picks the response
    (default: random). Returns the receipts."""
    rng = random.Random(seed)
    kind = store.study(study_id).spec.kind
    out = []
    while True:
        cur = store.current(study_id, participant_id)
        if cur.task_id is None:
            return out
        r = respond(cur) if respond else response(kind, rng)
        out.append(store.answer(study_id, participant_id, cur.task_id, r, 1000.0))


def count(store, study_id: str) -> tuple[int, int]:
    """(answers stored, distinct (participant, task) among them)."""
    a = store.answers(study_id)
    return len(a), len(set(zip(a["participant_id"], a["task_id"])))
