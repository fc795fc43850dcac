"""The Studies page (owner: design, progress, results, export) and the participant page.

Workspace queries take the page's `db` (cached by the workspace's fingerprint); what comes from
the answers store changes with every answer and is read fresh on each run.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import pandas as pd

from ..studies import store as S
from ..studies.design import StudyError, StudySpec, design
from ..studies.results import Results, export, results
from ..studies.shown import Picture, picture_bytes
from ..workspace import Workspace

KIND_NAMES = {
    "coherence": "Coherence (2AFC with reference images)",
    "describability": "Describability (2AFC with a description)",
    "similarity": "Similarity (8-rank-2 trials)",
}
INSTRUCTIONS = {
    "coherence": (
        "The images at the top form a group. Which of the two images below belongs to the same group?"
    ),
    "describability": "Which of the two images fits the description best?",
    "similarity": (
        "Which two images on the right are most similar to the image on the left? "
        "Choose the most similar first, then the second most similar."
    ),
}
COOKIE_PREFIX = "conceptlens_p_"


# ---- the workspace: what a study can be designed on ------------------------------------------
def clusterings(db) -> pd.DataFrame:
    """Every clustering (checkpoint_id, k) with its dataset, from folder names alone."""
    parts = pd.DataFrame(db.ws.partitions("clusters"), columns=["checkpoint_id", "k"])
    if parts.empty or not db.has("checkpoints"):
        return parts.assign(dataset=pd.Series(dtype=str))
    ck = db.query("SELECT checkpoint_id, dataset FROM checkpoints")
    return parts.merge(ck, on="checkpoint_id").sort_values(["checkpoint_id", "k"]).reset_index(drop=True)


def cluster_options(db, checkpoint: str, k: int) -> pd.DataFrame:
    """The clusters of one clustering: size, and purity / coherence / caption where computed."""
    sizes = db.query(
        "SELECT cluster, count(*) AS size FROM clusters WHERE checkpoint_id = $ckpt AND k = $k "
        "GROUP BY cluster ORDER BY cluster",
        {"ckpt": checkpoint, "k": int(k)},
    )
    if db.has("cluster_metrics"):
        m = db.query(
            "SELECT cluster, purity, coherence_random, coherence_hard FROM cluster_metrics "
            "WHERE checkpoint_id = $ckpt AND k = $k",
            {"ckpt": checkpoint, "k": int(k)},
        )
        sizes = sizes.merge(m, on="cluster", how="left")
    if db.has("cluster_captions"):
        c = db.query(
            "SELECT cluster, caption FROM cluster_captions WHERE checkpoint_id = $ckpt AND k = $k",
            {"ckpt": checkpoint, "k": int(k)},
        )
        sizes = sizes.merge(c, on="cluster", how="left")
    return sizes


def datasets(db) -> pd.DataFrame:
    return db.query("SELECT dataset, count(*) AS images FROM images GROUP BY dataset ORDER BY dataset")


# ---- the answers store ----------------------------------------------------------------------
def store_label() -> str:
    return S.open_store().label


def studies() -> pd.DataFrame:
    return S.open_store().studies()


def study(study_id: str) -> S.Study:
    return S.open_store().study(study_id)


def status(study_id: str) -> str:
    return S.open_store().status(study_id)


def set_status(study_id: str, value: str) -> None:
    S.open_store().set_status(study_id, value)


def create(root, spec: StudySpec, study_id: str | None = None, token: bool = False) -> dict:
    """Design `spec` on the workspace at `root` and store it: study_id, token, sessions,
    planned answers, tasks, catch tasks, notes."""
    d = design(Workspace(root), spec)
    sid, tok = S.open_store().create_study(d, study_id or None, token=True if token else None)
    return _made(d, sid, tok)


def _made(d, sid: str, tok: str | None) -> dict:
    real = sum(not t.is_catch for t in d.tasks)
    return {
        "study_id": sid,
        "token": tok,
        "sessions": d.n_sessions,
        "planned": len(d.slots),
        "tasks": real,
        "catch": len(d.tasks) - real,
        "notes": d.notes,
    }


def next_round(
    root, study_id: str, tasks: int | None, max_catch_failure: float | None, token: bool, step=None
) -> dict:
    """`conceptlens study next-round`: export the similarity study's answers, infer the
    embedding again, create the next (active) round; what `create` returns, plus the trials
    exported and the analysis' notes. `step(message)` hears each stage."""
    from ..studies.rounds import next_round as run

    out = run(
        S.open_store(),
        study_id,
        Workspace(root),
        tasks=tasks or None,
        max_catch_failure=max_catch_failure,
        token=True if token else None,
        progress_bars=False,
        step=step,
    )
    made = _made(out.design, out.study_id, out.token)
    made["notes"] = out.notes + made["notes"]
    return made | {"exported": out.exported["similarity_trials"], "after": study_id}


def study_results(root, study_id: str, max_catch_failure: float | None) -> Results:
    """Results from the store as it is now; the proxy's values from the workspace at `root`
    (None: a study designed on another workspace, shown without them)."""
    return results(S.open_store(), study_id, None if root is None else Workspace(root), max_catch_failure)


def export_study(root, study_id: str, max_catch_failure: float | None) -> dict:
    return export(S.open_store(), study_id, Workspace(root), max_catch_failure)


def answers_csv(root, study_id: str, max_catch_failure: float | None) -> bytes:
    """Every answer as the `study_answers` table has it, as CSV."""
    buf = io.StringIO()
    study_results(root, study_id, max_catch_failure).answers.to_csv(buf, index=False)
    return buf.getvalue().encode()


# ---- the participant's page -----------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """A participant at the door: their id and where they are, or why they cannot go in."""

    participant_id: str | None
    current: S.Current | None
    kind: str | None
    error: str | None


def cookie_name(study_id: str) -> str:
    return COOKIE_PREFIX + study_id


def participant_id_from(link_value, cookie_value) -> str | None:
    """The link's `p` when it is a valid participant id, else the browser's cookie, else None."""
    for v in (link_value, cookie_value):
        if isinstance(v, str) and S.PARTICIPANT_ID.fullmatch(v):
            return v
    return None


def _for_participant(e: StudyError, answering: bool = False) -> str:
    """What a participant reads: never the store's location or internals."""
    if isinstance(e, S.UnknownStudy):
        return "This link does not open a study: there is no such study here."
    if isinstance(e, S.StudyClosed):
        return "This study has closed and takes no more answers. Thank you for your interest."
    if isinstance(e, S.StudyFull):
        return "Every place in this study is taken. Thank you for your interest."
    if isinstance(e, S.StoreUnavailable):
        return "The study cannot be reached right now: please reload this page in a minute."
    if isinstance(e, S.TokenRequired):
        return (
            "This study needs the access token of the link you were given: open that link exactly as it is."
        )
    return f"That answer was not stored: {e}" if answering else f"This link is not valid: {e}"


def enter(study_id, token, participant_id: str | None) -> Entry:
    """Join (or resume) a study from a link and say what to show."""
    try:
        store = S.open_store()
        joined = store.join(study_id, participant_id, token)
        return Entry(
            joined.participant_id,
            store.current(study_id, joined.participant_id),
            store.study(study_id).spec.kind,
            None,
        )
    except StudyError as e:
        return Entry(None, None, None, _for_participant(e))


def answer(study_id: str, participant_id: str, task_id: str, response, rt_ms: float | None) -> str | None:
    """Store an answer; None when it was stored, else what to tell the participant."""
    try:
        S.open_store().answer(study_id, participant_id, task_id, response, rt_ms)
        return None
    except S.AlreadyAnswered:
        return "That answer had already been saved; here is your next task."
    except StudyError as e:
        return _for_participant(e, answering=True)


def picture(root, pic: Picture, side: int) -> bytes:
    return picture_bytes(str(root), pic, side)
