"""The studies service: every write of a study, and every read of what is private, decided on
the server for the role of whoever asks (docs/studies.md, "Owner and participants"), by the one
permission table, conceptlens/permissions.py (which also says who is the owner).

Two sides:

- the **owner** designs, follows, closes and exports studies (`Owner`). Who is the owner: with
  `CONCEPTLENS_OWNER_SECRET` set (an environment variable; Streamlit Community Cloud exports its
  secrets as such), whoever gave that secret, compared in constant time; without it, every
  visitor when the server listens on a loopback address only (a local `make run`), else nobody.
  Every method of `Owner` asks the permission table again (conceptlens/permissions.py), so a
  page that forgot to hide a button still cannot write. A read-only deployment
  (`CONCEPTLENS_READ_ONLY=1`) refuses every owner write too: studies are then created, closed
  and exported from the command line.
- a **participant** opens a study link (`enter`, `answer`): one place per browser session, an id
  the store issued, the images of the workspace the study was designed on.

Nothing here imports Streamlit: the page passes what it knows of the session (the secret the
owner typed, the session's places, the link's parameters, the address the server listens on).
"""

from __future__ import annotations

import io
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .. import permissions as P
from ..workspace import Workspace, WorkspaceError, inside
from . import store as S
from .design import StudyError, StudySpec, design
from .results import Results, answer_rows, checks, export, results


# ---- the owner -------------------------------------------------------------------------------
class Owner:
    """The owner's side of studies. Every call asks the permission table (conceptlens/
    permissions.py) before it touches the store or the workspace: the role from the secret the
    session gave, the mode from the deployment (and the workspace the call writes)."""

    def __init__(self, given: str | None, address: str | None):
        self._given, self._address = given, address

    @property
    def ok(self) -> bool:
        """Whether this session is the owner (a page's question: each call checks anyway)."""
        return P.role_of(self._given, P.mode_from_env(self._address)) is P.Role.OWNER

    def _may(self, action: P.Action, root=None) -> S.Store:
        mode = P.mode_from_env(self._address, root)
        P.require(action, P.role_of(self._given, mode), mode)
        return S.open_store()

    # reads ---------------------------------------------------------------------------------
    def store_label(self) -> str:
        return self._may(P.Action.STUDY_READ).label

    def studies(self) -> pd.DataFrame:
        return self._may(P.Action.STUDY_READ).studies()

    def study(self, study_id: str) -> S.Study:
        return self._may(P.Action.STUDY_READ).study(study_id)

    def status(self, study_id: str) -> str:
        return self._may(P.Action.STUDY_READ).status(study_id)

    def results(self, root, study_id: str, max_catch_failure: float | None) -> Results:
        """Results from the store as it is now; the proxy's values from the workspace at `root`
        (None: a study designed on another workspace, shown without them)."""
        store = self._may(P.Action.READ_ANSWERS)
        return results(store, study_id, None if root is None else Workspace(root), max_catch_failure)

    def answers_csv(self, root, study_id: str, max_catch_failure: float | None) -> bytes:
        """Every answer as the `study_answers` table has it, with the platform ids, as CSV."""
        res = self.results(root, study_id, max_catch_failure)
        ids = self._may(P.Action.READ_ANSWERS).participants(study_id)[
            ["participant_id", "platform", "platform_pid", "platform_study", "platform_session"]
        ]
        buf = io.StringIO()
        res.answers.merge(ids, on="participant_id", how="left").to_csv(buf, index=False)
        return buf.getvalue().encode()

    # writes --------------------------------------------------------------------------------
    def create(self, root, spec: StudySpec, study_id: str | None = None, token: bool = False) -> dict:
        """Design `spec` on the workspace at `root` and store it: study_id, token, sessions,
        planned answers, tasks, catch tasks, notes."""
        store = self._may(P.Action.STUDY_CREATE, root)
        d = design(Workspace(root), spec)
        sid, tok = store.create_study(d, study_id or None, token=True if token else None)
        return made(d, sid, tok)

    def set_status(self, study_id: str, value: str) -> None:
        action = P.Action.STUDY_CLOSE if value == "closed" else P.Action.STUDY_REOPEN
        self._may(action).set_status(study_id, value)

    def export(self, root, study_id: str, max_catch_failure: float | None) -> dict:
        return export(self._may(P.Action.STUDY_EXPORT, root), study_id, Workspace(root), max_catch_failure)

    def next_round(
        self, root, study_id: str, tasks: int | None, max_catch_failure: float | None, token: bool, step=None
    ) -> dict:
        """`conceptlens study next-round`: export the similarity study's answers, infer the
        embedding again, create the next (active) round; what `create` returns, plus the trials
        exported and the analysis' notes. `step(message)` hears each stage."""
        from .rounds import next_round as run  # local: the analyses load on use

        out = run(
            self._may(P.Action.STUDY_NEXT_ROUND, root),
            study_id,
            Workspace(root),
            tasks=tasks or None,
            max_catch_failure=max_catch_failure,
            token=True if token else None,
            progress_bars=False,
            step=step,
        )
        out_made = made(out.design, out.study_id, out.token)
        out_made["notes"] = out.notes + out_made["notes"]
        return out_made | {"exported": out.exported["similarity_trials"], "after": study_id}


def made(d, sid: str, tok: str | None) -> dict:
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


# ---- the participant ------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """A participant at the door: their id, where they are and the workspace whose images they
    see; or why they cannot go in (`error`, plain text for them)."""

    participant_id: str | None = None
    current: S.Current | None = None
    kind: str | None = None
    root: Path | None = None
    code: str | None = None  # finished: the code to give the platform
    redirect: str | None = None  # finished: where the platform wants them back
    excluded: bool = False  # finished, and excluded by the study's checks
    error: str | None = None


def participant_id_from(link_value, cookie_value) -> str | None:
    """The link's `p` when it is well formed, else the browser's cookie, else None (whether the
    store issued it is `join`'s to decide)."""
    for v in (link_value, cookie_value):
        if isinstance(v, str) and S.PARTICIPANT_ID.fullmatch(v):
            return v
    return None


def for_participant(e: StudyError, answering: bool = False) -> str:
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
    if isinstance(e, S.PlaceReclaimed):
        return (
            "Your place in this study went to someone else after a long time without an answer. "
            "Thank you for your time."
        )
    if isinstance(e, S.AlreadyTookPart):
        return "You have already taken part in a study of this series: each person takes one."
    return f"That answer was not stored: {e}" if answering else f"This link is not valid: {e}"


def _meta_name(root: Path) -> str | None:
    try:
        return str(Workspace(root).meta().get("name", ""))
    except (WorkspaceError, OSError, ValueError):
        return None


def study_root(study: S.Study, served: list[Path]) -> Path | None:
    """The workspace a study's images come from: where it was designed, else a workspace this
    dashboard serves with the same name; never one a link names."""
    for r in [Path(study.root)] if study.root else []:
        if r.is_dir() and _meta_name(r) == study.workspace:
            return r
    return next((r for r in served if r.is_dir() and _meta_name(r) == study.workspace), None)


def place_role(places: MutableMapping, study_id, participant_id) -> P.Role:
    """A session's role toward a study's place: its participant when the session's places (kept
    on the server) hold that very id, else a visitor, whatever a link or a cookie says."""
    held = places.get(study_id) if isinstance(study_id, str) else None
    return P.Role.PARTICIPANT if held is not None and held == participant_id else P.Role.VISITOR


def enter(
    study_id,
    token,
    participant_id: str | None,
    places: MutableMapping,
    params: dict,
    served: list[Path],
    link_workspace: tuple[Path, str] | None = None,
) -> Entry:
    """Join (or resume) a study from a link and say what to show.

    `places` is the browser session's {study_id: participant_id}: a session holds one place per
    study, and asking for another (another `p=`) is refused. `params` are the link's parameters
    (platform ids: PROLIFIC_PID, ...). `served` are the workspaces this dashboard serves;
    `link_workspace` is (folder of served workspaces, `ws=` of the link) when the link has one.
    """
    try:
        mode = P.mode_from_env()
        P.require(P.Action.STUDY_JOIN, place_role(places, study_id, participant_id), mode)
        store = S.open_store()
        study = store.study(study_id)
        if link_workspace is not None:
            base, raw = link_workspace
            try:
                named = _meta_name(inside(base, raw))
            except (WorkspaceError, OSError, ValueError):
                named = None
            if named != study.workspace:
                return Entry(
                    error="This link names another workspace than its study's: open the link exactly "
                    "as you were given it."
                )
        root = study_root(study, served)
        if root is None:
            return Entry(
                error="This study's images are not on this dashboard: please tell whoever sent you the link."
            )
        platform = S.platform_from(params)
        held = places.get(study_id)
        if held is not None and participant_id is not None and participant_id != held:
            return Entry(
                error="This browser already holds a place in this study: go on with it, from the link you "
                "opened first."
            )
        joined = store.join(study_id, held or participant_id, token, platform)
        places[study_id] = joined.participant_id
        cur = store.current(study_id, joined.participant_id)
        kind = study.spec.kind
        if cur.task_id is None:
            P.require(P.Action.READ_OWN_CODE, place_role(places, study_id, joined.participant_id), mode)
            spec = study.spec
            excluded = bool(spec.rules) and _excluded(store, study, joined.participant_id)
            code = (spec.excluded_code if excluded else spec.completion_code) or cur.completion_code
            redirect = None if excluded else spec.completion_url
            return Entry(joined.participant_id, cur, kind, root, code, redirect, excluded)
        if store.status(study_id) != "open":
            raise S.StudyClosed(f"study {study_id} is closed")
        return Entry(joined.participant_id, cur, kind, root)
    except StudyError as e:
        return Entry(error=for_participant(e))
    except P.PermissionDenied:
        return Entry(error="This link cannot be opened on this dashboard.")


def _excluded(store: S.Store, study: S.Study, participant_id: str) -> bool:
    people = store.participants(study.study_id)
    people = people[people["participant_id"] == participant_id]
    rows = answer_rows(study, store.answers(study.study_id, participant_id))
    table = checks(study.spec, people, rows)
    return bool(table["excluded"].any())


def answer(
    study_id: str, participant_id: str, task_id: str, response, rt_ms: float | None, places: MutableMapping
) -> str | None:
    """Store an answer of the session's place; None when it was stored, else what to tell the
    participant."""
    try:
        P.require(P.Action.STUDY_ANSWER, place_role(places, study_id, participant_id), P.mode_from_env())
    except P.PermissionDenied:
        return "That answer was not stored: this browser holds no such place in the study."
    try:
        S.open_store().answer(study_id, participant_id, task_id, response, rt_ms)
        return None
    except S.AlreadyAnswered:
        return "That answer had already been saved; here is your next task."
    except StudyError as e:
        return for_participant(e, answering=True)
