"""The answers store: studies with their tasks and sessions, participants, and their answers.

SQLite by default, in a writable folder outside every workspace (`$CONCEPTLENS_STATE_DIR`,
else `$XDG_STATE_HOME/conceptlens`, else `~/.local/state/conceptlens`), in WAL mode with
`synchronous=FULL`: a committed answer survives a killed process and a power cut, and a
read-only workspace stays untouched. PostgreSQL (psycopg 3) when `CONCEPTLENS_ANSWERS_URL` is a
`postgresql://` URL, for a deployed dashboard whose disk does not survive restarts
(`sqlite:///PATH` names another SQLite file).

Every answer is one transaction keyed by (study, participant, task): a replayed answer is
refused and nothing is stored twice. An answer is acknowledged (the call returns) only after
its transaction committed. Every value from a request is checked (alphabet, length, type)
before any SQL runs, and SQL takes values as parameters only.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import json
import os
import queue
import re
import secrets
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pandas as pd

from .design import Design, StudyError, StudySpec
from .shown import Shown, check_response, grade, short, shown

STUDY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
PARTICIPANT_ID = re.compile(r"[A-Za-z0-9_-]{8,64}")
TASK_ID = re.compile(r"[A-Za-z0-9_.-]{1,40}")
TOKEN = re.compile(r"[A-Za-z0-9_-]{8,128}")
MAX_RT_MS = 24 * 3600 * 1000.0

_DDL = (
    """CREATE TABLE IF NOT EXISTS studies (
        study_id TEXT PRIMARY KEY, created TEXT NOT NULL, kind TEXT NOT NULL, spec TEXT NOT NULL,
        workspace TEXT NOT NULL, images TEXT NOT NULL, notes TEXT NOT NULL, token_sha256 TEXT,
        status TEXT NOT NULL, n_sessions INTEGER NOT NULL, n_tasks INTEGER NOT NULL,
        n_slots INTEGER NOT NULL, root TEXT)""",
    """CREATE TABLE IF NOT EXISTS tasks (
        study_id TEXT NOT NULL, task_id TEXT NOT NULL, unit INTEGER, is_catch INTEGER NOT NULL,
        payload TEXT NOT NULL, PRIMARY KEY (study_id, task_id))""",
    """CREATE TABLE IF NOT EXISTS slots (
        study_id TEXT NOT NULL, session INTEGER NOT NULL, position INTEGER NOT NULL,
        task_id TEXT NOT NULL, layout TEXT NOT NULL,
        PRIMARY KEY (study_id, session, position), UNIQUE (study_id, session, task_id))""",
    """CREATE TABLE IF NOT EXISTS participants (
        study_id TEXT NOT NULL, participant_id TEXT NOT NULL, session INTEGER NOT NULL,
        started TEXT NOT NULL, last_active TEXT NOT NULL, finished TEXT, completion_code TEXT,
        platform TEXT, platform_pid TEXT, platform_study TEXT, platform_session TEXT, reclaimed TEXT,
        PRIMARY KEY (study_id, participant_id))""",
    "CREATE INDEX IF NOT EXISTS participants_session ON participants (study_id, session)",
    "CREATE INDEX IF NOT EXISTS participants_platform ON participants (platform_pid)",
    """CREATE TABLE IF NOT EXISTS answers (
        study_id TEXT NOT NULL, participant_id TEXT NOT NULL, task_id TEXT NOT NULL,
        session INTEGER NOT NULL, position INTEGER NOT NULL, response TEXT NOT NULL,
        correct INTEGER, grade {FLOAT}, chosen TEXT NOT NULL, rt_ms {FLOAT}, answered TEXT NOT NULL,
        PRIMARY KEY (study_id, participant_id, task_id))""",
)


# Columns added since the first stores: a store created before gets them on first use.
_ADDED = (
    ("studies", "root", "TEXT"),
    ("participants", "platform", "TEXT"),
    ("participants", "platform_pid", "TEXT"),
    ("participants", "platform_study", "TEXT"),
    ("participants", "platform_session", "TEXT"),
    ("participants", "reclaimed", "TEXT"),
)
_PARTICIPANT_COLUMNS = (
    "study_id, participant_id, session, started, last_active, finished, completion_code, "
    "platform, platform_pid, platform_study, platform_session, reclaimed"
)
# Crowd-sourcing platforms: the URL parameters they append to a study link (participant, study,
# session), as their documentation names them.
PLATFORMS = {
    "prolific": ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID"),
    "mturk": ("workerId", "hitId", "assignmentId"),
}
PLATFORM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class Platform:
    """Who a participant is on a crowd-sourcing platform (ids from the link)."""

    name: str  # a key of PLATFORMS
    participant: str
    study: str | None = None
    session: str | None = None


def platform_from(params) -> Platform | None:
    """The platform ids of a link's parameters (a mapping of str to str), checked; None when the
    link carries none. A StudyError names a malformed one."""
    for name, (pid, study, session) in PLATFORMS.items():
        if pid in params:
            vals = [params.get(k) for k in (pid, study, session)]
            for key, v in zip((pid, study, session), vals):
                if v is not None and not (isinstance(v, str) and PLATFORM_ID.fullmatch(v)):
                    raise StudyError(f"{key} {short(v)} is not valid: it must match {PLATFORM_ID.pattern}")
            if name == "mturk" and vals[2] == "ASSIGNMENT_ID_NOT_AVAILABLE":  # a HIT preview
                return None
            return Platform(name, *vals)
    return None


class AlreadyAnswered(StudyError):
    """The (study, participant, task) answer exists: the first one is kept."""


class UnknownStudy(StudyError):
    """No study of that id in the store."""


class StudyClosed(StudyError):
    """The study takes no more participants or answers."""


class StudyFull(StudyError):
    """Every session of the study is taken."""


class TokenRequired(StudyError):
    """The study's link carries an access token, and this request does not have it."""


class PlaceReclaimed(StudyError):
    """The participant's place went to someone else after being idle (reclaim_minutes)."""


class AlreadyTookPart(StudyError):
    """The platform participant took another study of the same workspace (once_per_workspace)."""


class StoreUnavailable(StudyError):
    """The store could not be reached or stayed locked (the message names it); nothing was
    stored, and trying again later is the remedy."""


@dataclass(frozen=True)
class Study:
    """What never changes about a study once created (its status does: see `status`)."""

    study_id: str
    spec: StudySpec
    created: str
    workspace: str
    images: dict
    notes: list
    token_sha256: str | None
    n_sessions: int
    n_tasks: int
    n_slots: int
    root: str | None = None  # where the workspace was when the study was designed


@dataclass(frozen=True)
class Joined:
    participant_id: str
    session: int
    new: bool


@dataclass(frozen=True)
class Current:
    """Where a participant is: the task to show (None once finished) and their progress."""

    participant_id: str
    answered: int
    total: int
    task_id: str | None
    shown: Shown | None
    completion_code: str | None


@dataclass(frozen=True)
class Receipt:
    """An acknowledged answer: its transaction has committed."""

    task_id: str
    answered: int
    total: int
    completion_code: str | None


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def _check(pattern: re.Pattern, value, what: str) -> str:
    if isinstance(value, str) and pattern.fullmatch(value):
        return value
    raise StudyError(f"{what} {short(value)} is not valid: it must match {pattern.pattern}")


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def new_participant_id() -> str:
    return secrets.token_urlsafe(12)


def new_study_id(kind: str) -> str:
    """A drawn study id: 64 bits of randomness, so a link cannot be guessed."""
    return f"{kind[:3]}-{secrets.token_hex(8)}"


def _completion_code() -> str:
    raw = secrets.token_hex(4).upper()
    return f"{raw[:4]}-{raw[4:]}"


class _Cursor:
    """The few calls the store makes, with `?` placeholders in either dialect."""

    def __init__(self, raw, dialect: str):
        self.raw, self.dialect = raw, dialect

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.dialect == "postgresql" else sql

    def rows(self, sql: str, params=()) -> list[tuple]:
        cur = self.raw.execute(self._sql(sql), tuple(params))
        return cur.fetchall() if cur.description else []

    def one(self, sql: str, params=()):
        rows = self.rows(sql, params)
        return rows[0] if rows else None

    def run(self, sql: str, params=()) -> int:
        return self.raw.execute(self._sql(sql), tuple(params)).rowcount

    def many(self, sql: str, rows: list[tuple]) -> None:
        if self.dialect == "postgresql":
            with self.raw.cursor() as cur:
                cur.executemany(self._sql(sql), rows)
        else:
            self.raw.executemany(sql, rows)

    def frame(self, sql: str, params=()) -> pd.DataFrame:
        cur = self.raw.execute(self._sql(sql), tuple(params))
        return pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])


class Store:
    """Operations shared by both backends; subclasses provide `_transact` and `label`."""

    dialect = "sqlite"

    def __init__(self):
        self._static: dict[str, Study] = {}
        self._static_lock = threading.Lock()

    # backends ------------------------------------------------------------------------------
    def _transact(self, fn, write: bool):
        raise NotImplementedError

    def exists(self) -> bool:
        return True

    @property
    def label(self) -> str:
        raise NotImplementedError

    def close(self) -> None:
        pass

    # studies -------------------------------------------------------------------------------
    def create_study(self, design: Design, study_id: str | None = None, token: str | bool | None = None):
        """Store a design; returns (study_id, token) — token None when the link needs none."""
        spec = design.spec
        study_id = _check(STUDY_ID, study_id, "study id") if study_id else new_study_id(spec.kind)
        if token is True:
            token = secrets.token_urlsafe(9)
        token = _check(TOKEN, token, "access token") if token else None
        slots = design.slots
        if not slots:
            raise StudyError(f"study {study_id}: the design has no task")

        def fn(c: _Cursor):
            if c.one("SELECT 1 FROM studies WHERE study_id = ?", [study_id]):
                raise StudyError(f"study {study_id} already exists in the answers store ({self.label})")
            c.run(
                "INSERT INTO studies (study_id, created, kind, spec, workspace, images, notes, token_sha256, "
                "status, n_sessions, n_tasks, n_slots, root) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'open', ?, ?, ?, ?)",
                [
                    study_id,
                    now(),
                    spec.kind,
                    spec.to_json(),
                    design.workspace,
                    json.dumps(design.images, sort_keys=True),
                    json.dumps(design.notes),
                    _sha256(token) if token else None,
                    design.n_sessions,
                    len(design.tasks),
                    len(slots),
                    design.root or None,
                ],
            )
            c.many(
                "INSERT INTO tasks VALUES (?, ?, ?, ?, ?)",
                [
                    (study_id, t.task_id, t.unit, int(t.is_catch), json.dumps(t.payload, sort_keys=True))
                    for t in design.tasks
                ],
            )
            c.many(
                "INSERT INTO slots VALUES (?, ?, ?, ?, ?)",
                [(study_id, s.session, s.position, s.task_id, json.dumps(s.layout)) for s in slots],
            )

        self._transact(fn, write=True)
        return study_id, token

    def study(self, study_id: str) -> Study:
        """The study's fixed part (cached: it never changes); a StudyError if there is none."""
        _check(STUDY_ID, study_id, "study id")
        with self._static_lock:
            if study_id in self._static:
                return self._static[study_id]
        row = (
            self._transact(
                lambda c: c.one(
                    "SELECT study_id, spec, created, workspace, images, notes, token_sha256, n_sessions, "
                    "n_tasks, n_slots, root FROM studies WHERE study_id = ?",
                    [study_id],
                ),
                write=False,
            )
            if self.exists()
            else None
        )
        if row is None:
            raise UnknownStudy(f"no study {study_id} in the answers store ({self.label})")
        s = Study(
            row[0],
            StudySpec.from_json(row[1]),
            row[2],
            row[3],
            json.loads(row[4]),
            json.loads(row[5]),
            *row[6:],
        )
        with self._static_lock:
            self._static[study_id] = s
        return s

    def status(self, study_id: str) -> str:
        self.study(study_id)
        return self._transact(
            lambda c: c.one("SELECT status FROM studies WHERE study_id = ?", [study_id])[0], False
        )

    def set_status(self, study_id: str, status: str) -> None:
        if status not in ("open", "closed"):
            raise StudyError(f"status must be 'open' or 'closed', got {status!r}")
        self.study(study_id)
        self._transact(
            lambda c: c.run("UPDATE studies SET status = ? WHERE study_id = ?", [status, study_id]), True
        )

    def studies(self) -> pd.DataFrame:
        """One row per study, newest first, with its progress."""
        cols = [
            "study_id", "kind", "created", "status", "workspace", "sessions", "planned",
            "participants", "finished", "answers",
        ]  # fmt: skip
        if not self.exists():
            return pd.DataFrame(columns=cols)
        return self._transact(
            lambda c: c.frame(
                """SELECT s.study_id, s.kind, s.created, s.status, s.workspace, s.n_sessions AS sessions,
                          s.n_slots AS planned,
                          (SELECT count(*) FROM participants p WHERE p.study_id = s.study_id) AS participants,
                          (SELECT count(*) FROM participants p WHERE p.study_id = s.study_id
                                                                AND p.finished IS NOT NULL) AS finished,
                          (SELECT count(*) FROM answers a WHERE a.study_id = s.study_id) AS answers
                   FROM studies s ORDER BY s.created DESC, s.study_id"""
            ),
            write=False,
        )

    # participants --------------------------------------------------------------------------
    def join(
        self,
        study_id: str,
        participant_id: str | None = None,
        token: str | None = None,
        platform: Platform | None = None,
    ) -> Joined:
        """A participant's place in the study. Theirs if the store issued `participant_id` for
        this study (resume), or if `platform`'s participant joined before (one place per
        platform id); else a new place under a new id the store draws (an id the store did not
        issue is never taken): the first session nobody has taken, else (with reclaim_minutes)
        the session idle longest that nobody finished, whose holder loses it. Refused for a
        wrong token, a closed or full study, a reclaimed place, and with once_per_workspace a
        platform participant who took another study of the same workspace."""
        s = self.study(study_id)
        if participant_id is not None:
            _check(PARTICIPANT_ID, participant_id, "participant id")
        if s.token_sha256 is not None:
            if (
                not isinstance(token, str)
                or len(token) > 128
                or not hmac.compare_digest(_sha256(token), s.token_sha256)
            ):
                raise TokenRequired(f"study {study_id} needs the access token of its link")

        def theirs(c: _Cursor) -> Joined | None:
            row = None
            if platform is not None:
                row = c.one(
                    "SELECT participant_id, session, reclaimed FROM participants "
                    "WHERE study_id = ? AND platform = ? AND platform_pid = ? ORDER BY started LIMIT 1",
                    [study_id, platform.name, platform.participant],
                )
            if row is None and participant_id is not None:
                row = c.one(
                    "SELECT participant_id, session, reclaimed FROM participants "
                    "WHERE study_id = ? AND participant_id = ?",
                    [study_id, participant_id],
                )
            if row is None:
                return None
            if row[2] is not None:
                raise PlaceReclaimed(
                    f"participant {row[0]}'s place in study {study_id} went to someone else after "
                    f"{s.spec.reclaim_minutes} minutes without an answer"
                )
            return Joined(row[0], int(row[1]), False)

        # Every page view of a participant comes here: a resume takes no write lock.
        known = self._transact(theirs, write=False)
        if known:
            return known

        def fn(c: _Cursor):
            if self.dialect == "postgresql":  # one claim at a time per study
                c.rows("SELECT pg_advisory_xact_lock(hashtext(?))", [study_id])
            known = theirs(c)  # joined meanwhile, from another tab
            if known:
                return known
            if c.one("SELECT status FROM studies WHERE study_id = ?", [study_id])[0] != "open":
                raise StudyClosed(f"study {study_id} is closed: it takes no more participants")
            if platform is not None and s.spec.once_per_workspace:
                other = c.one(
                    "SELECT p.study_id FROM participants p JOIN studies t ON t.study_id = p.study_id "
                    "WHERE p.platform = ? AND p.platform_pid = ? AND t.workspace = ? AND p.study_id <> ? "
                    "LIMIT 1",
                    [platform.name, platform.participant, s.workspace, study_id],
                )
                if other:
                    raise AlreadyTookPart(
                        f"{platform.name} participant {platform.participant} took study {other[0]} of "
                        f"the same workspace; study {study_id} takes each person once"
                    )
            taken = c.rows(
                "SELECT session, max(last_active), count(finished) FROM participants "
                "WHERE study_id = ? AND reclaimed IS NULL GROUP BY session",
                [study_id],
            )
            busy = {int(r[0]) for r in taken}
            session = next((i for i in range(s.n_sessions) if i not in busy), None)
            t = now()
            if session is None and s.spec.reclaim_minutes > 0:
                cutoff = (
                    _dt.datetime.now(_dt.timezone.utc) - _dt.timedelta(minutes=s.spec.reclaim_minutes)
                ).isoformat(timespec="microseconds")
                idle = sorted((r[1], int(r[0])) for r in taken if r[2] == 0 and r[1] < cutoff)
                session = idle[0][1] if idle else None
                if session is not None:  # its holder loses it (their answers stay)
                    c.run(
                        "UPDATE participants SET reclaimed = ? "
                        "WHERE study_id = ? AND session = ? AND reclaimed IS NULL",
                        [t, study_id, session],
                    )
            if session is None:
                raise StudyFull(f"study {study_id} is full: all {s.n_sessions} sessions are taken")
            pid = new_participant_id()
            p = platform or Platform("", "")
            c.run(
                f"INSERT INTO participants ({_PARTICIPANT_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?, ?, NULL)",
                [study_id, pid, session, t, t, p.name or None, p.participant or None, p.study, p.session],
            )
            return Joined(pid, session, True)

        return self._transact(fn, write=True)

    def _progress(self, c: _Cursor, study_id: str, participant_id: str, lock: bool = False):
        row = c.one(
            "SELECT session, completion_code, reclaimed FROM participants "
            "WHERE study_id = ? AND participant_id = ?"
            + (" FOR UPDATE" if lock and self.dialect == "postgresql" else ""),
            [study_id, participant_id],
        )
        if row is None:
            raise StudyError(f"participant {participant_id} has not joined study {study_id}")
        if row[2] is not None:
            raise PlaceReclaimed(
                f"participant {participant_id}'s place in study {study_id} went to someone else"
            )
        slots = c.rows(
            """SELECT s.position, s.task_id, s.layout, a.task_id IS NOT NULL
               FROM slots s LEFT JOIN answers a ON a.study_id = s.study_id AND a.task_id = s.task_id
                                                AND a.participant_id = ?
               WHERE s.study_id = ? AND s.session = ? ORDER BY s.position""",
            [participant_id, study_id, row[0]],
        )
        return int(row[0]), row[1], slots

    def _task(self, c: _Cursor, study_id: str, task_id: str):
        unit, is_catch, payload = c.one(
            "SELECT unit, is_catch, payload FROM tasks WHERE study_id = ? AND task_id = ?",
            [study_id, task_id],
        )
        return unit, bool(is_catch), json.loads(payload)

    def current(self, study_id: str, participant_id: str) -> Current:
        """The next task to show a participant (what the page may see of it), or their code."""
        s = self.study(study_id)
        _check(PARTICIPANT_ID, participant_id, "participant id")

        def fn(c: _Cursor):
            _, code, slots = self._progress(c, study_id, participant_id)
            done = sum(bool(r[3]) for r in slots)
            nxt = next((r for r in slots if not r[3]), None)
            if nxt is None:
                return Current(participant_id, done, len(slots), None, None, code)
            _, _, payload = self._task(c, study_id, nxt[1])
            view = shown(s.spec.kind, payload, json.loads(nxt[2]), s.images)
            return Current(participant_id, done, len(slots), nxt[1], view, None)

        return self._transact(fn, write=False)

    def shown_task(self, study_id: str, participant_id: str):
        """(unit, is_catch, layout) of the task a participant is shown now, None once finished:
        the server's side of it, for simulated observers (conceptlens.studies.plan); never for
        a page."""
        self.study(study_id)
        _check(PARTICIPANT_ID, participant_id, "participant id")

        def fn(c: _Cursor):
            _, _, slots = self._progress(c, study_id, participant_id)
            nxt = next((r for r in slots if not r[3]), None)
            if nxt is None:
                return None
            unit, is_catch, _ = self._task(c, study_id, nxt[1])
            return (None if unit is None else int(unit)), is_catch, json.loads(nxt[2])

        return self._transact(fn, write=False)

    def answer(
        self, study_id: str, participant_id: str, task_id: str, response, rt_ms: float | None = None
    ) -> Receipt:
        """Store one answer in one transaction. Refused (StudyError, nothing stored) for an
        unknown or closed study, a participant who never joined, a task that is not the one
        shown to them, a malformed response; AlreadyAnswered for a replay."""
        s = self.study(study_id)
        _check(PARTICIPANT_ID, participant_id, "participant id")
        _check(TASK_ID, task_id, "task id")
        response = check_response(s.spec.kind, response, task_id)
        if rt_ms is not None:
            if isinstance(rt_ms, bool) or not isinstance(rt_ms, (int, float)) or not 0 <= rt_ms <= MAX_RT_MS:
                raise StudyError(
                    f"response time must be a number of milliseconds in [0, {MAX_RT_MS:.0f}], got {rt_ms!r}"
                )
            rt_ms = float(rt_ms)

        def fn(c: _Cursor):
            if c.one("SELECT status FROM studies WHERE study_id = ?", [study_id])[0] != "open":
                raise StudyClosed(f"study {study_id} is closed: it takes no more answers")
            session, _, slots = self._progress(c, study_id, participant_id, lock=True)
            mine = {r[1]: r for r in slots}
            if task_id not in mine:
                raise StudyError(
                    f"task {task_id} is not one of participant {participant_id}'s tasks in study {study_id}"
                )
            if mine[task_id][3]:
                raise AlreadyAnswered(
                    f"task {task_id} of study {study_id} was already answered by participant "
                    f"{participant_id}; the first answer is kept"
                )
            nxt = next(r for r in slots if not r[3])
            if nxt[1] != task_id:
                raise StudyError(
                    f"task {task_id} is not the task shown to participant {participant_id} in study "
                    f"{study_id} (task {nxt[0] + 1} of {len(slots)} is)"
                )
            _, is_catch, payload = self._task(c, study_id, task_id)
            g = grade(s.spec.kind, is_catch, payload, json.loads(nxt[2]), response)
            t = now()
            added = c.run(
                "INSERT INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [
                    study_id,
                    participant_id,
                    task_id,
                    session,
                    nxt[0],
                    json.dumps(response),
                    None if g["correct"] is None else int(g["correct"]),
                    g["grade"],
                    json.dumps(g["chosen"]),
                    rt_ms,
                    t,
                ],
            )
            if added != 1:
                raise AlreadyAnswered(
                    f"task {task_id} of study {study_id} was already answered; the first answer is kept"
                )
            answered = 1 + sum(bool(r[3]) for r in slots)
            code = _completion_code() if answered == len(slots) else None
            c.run(
                "UPDATE participants SET last_active = ?, finished = ?, completion_code = ? "
                "WHERE study_id = ? AND participant_id = ?",
                [t, t if code else None, code, study_id, participant_id],
            )
            return Receipt(task_id, answered, len(slots), code)

        return self._transact(fn, write=True)

    # reading for results ---------------------------------------------------------------------
    def answers(self, study_id: str, participant_id: str | None = None) -> pd.DataFrame:
        """Every answer (of one participant, when given) with its task (unit, is_catch, payload),
        slot layout and the participant's platform ids, JSON decoded."""
        self.study(study_id)
        if participant_id is not None:
            _check(PARTICIPANT_ID, participant_id, "participant id")
        df = self._transact(
            lambda c: c.frame(
                """SELECT a.participant_id, a.task_id, a.session, a.position, a.response, a.correct,
                          a.grade, a.chosen, a.rt_ms, a.answered, t.unit, t.is_catch, t.payload, s.layout,
                          p.platform, p.platform_pid, p.platform_study, p.platform_session
                   FROM answers a
                   JOIN participants p ON p.study_id = a.study_id AND p.participant_id = a.participant_id
                   JOIN tasks t ON t.study_id = a.study_id AND t.task_id = a.task_id
                   JOIN slots s ON s.study_id = a.study_id AND s.session = a.session
                                AND s.position = a.position
                   WHERE a.study_id = ? AND (CAST(? AS TEXT) IS NULL OR a.participant_id = ?)
                   ORDER BY a.participant_id, a.position""",
                [study_id, participant_id, participant_id],
            ),
            write=False,
        )
        for col in ("response", "chosen", "payload", "layout"):
            df[col] = df[col].map(json.loads)
        df["is_catch"] = df["is_catch"].astype(bool)
        df["correct"] = df["correct"].map(lambda v: None if v is None or pd.isna(v) else bool(v))
        return df

    def participants(self, study_id: str) -> pd.DataFrame:
        self.study(study_id)
        return self._transact(
            lambda c: c.frame(
                """SELECT p.participant_id, p.session, p.started, p.last_active, p.finished,
                          p.completion_code, p.platform, p.platform_pid, p.platform_study,
                          p.platform_session, p.reclaimed,
                          (SELECT count(*) FROM slots s WHERE s.study_id = p.study_id
                                                          AND s.session = p.session) AS tasks,
                          (SELECT count(*) FROM answers a WHERE a.study_id = p.study_id
                                                          AND a.participant_id = p.participant_id) AS answered
                   FROM participants p WHERE p.study_id = ? ORDER BY p.started, p.participant_id""",
                [study_id],
            ),
            write=False,
        )


# ---- SQLite ---------------------------------------------------------------------------------
class _Pool:
    """Idle connections for reuse (one thread at a time each), created on demand."""

    def __init__(self, connect, size: int = 8):
        self._connect, self._idle = connect, queue.LifoQueue(size)

    def get(self):
        try:
            return self._idle.get_nowait(), True
        except queue.Empty:
            return self._connect(), False

    def put(self, con) -> None:
        try:
            self._idle.put_nowait(con)
        except queue.Full:
            con.close()

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return


class SqliteStore(Store):
    dialect = "sqlite"

    def __init__(self, path: str | os.PathLike):
        super().__init__()
        self.path = Path(path)
        self._pool = _Pool(self._connect)
        self._init_lock = threading.Lock()
        self._ready = False

    @property
    def label(self) -> str:
        return f"SQLite {self.path}"

    def exists(self) -> bool:
        return self.path.is_file()

    def _connect(self):
        con = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
        con.execute("PRAGMA busy_timeout = 60000")
        # FULL: the WAL is synced at every commit, so an acknowledged answer survives a power cut too.
        con.execute("PRAGMA synchronous = FULL")
        return con

    def _init(self) -> None:
        with self._init_lock:
            if self._ready:
                return
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                con = self._connect()
            except (OSError, sqlite3.Error) as e:
                raise StoreUnavailable(f"answers store {self.path} cannot be opened: {e}") from None
            try:
                con.execute("PRAGMA journal_mode = WAL")
                con.execute("BEGIN IMMEDIATE")
                for table, column, kind in _ADDED:  # a store from before: its new columns first
                    have = {r[1] for r in con.execute(f"PRAGMA table_info({table})").fetchall()}
                    if have and column not in have:
                        con.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                for ddl in _DDL:
                    con.execute(ddl.format(FLOAT="REAL"))
                con.execute("COMMIT")
            finally:
                con.close()
            self._ready = True

    def _transact(self, fn, write: bool):
        self._init()
        con, _ = self._pool.get()
        try:
            con.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                out = fn(_Cursor(con, "sqlite"))
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            con.close()
            raise StoreUnavailable(f"answers store {self.path}: {e}") from None
        self._pool.put(con)
        return out

    def close(self) -> None:
        self._pool.close()


# ---- PostgreSQL -----------------------------------------------------------------------------
class PostgresStore(Store):
    dialect = "postgresql"

    def __init__(self, url: str):
        super().__init__()
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise StudyError(
                "CONCEPTLENS_ANSWERS_URL names a PostgreSQL database: install psycopg "
                "(pip install 'psycopg[binary]')"
            ) from None
        self.url = url
        self._pool = _Pool(self._connect)
        self._init_lock = threading.Lock()
        self._ready = False

    @property
    def label(self) -> str:
        u = urlsplit(self.url)
        host = u.hostname or "localhost"
        netloc = (f"{u.username}@" if u.username else "") + host + (f":{u.port}" if u.port else "")
        return "PostgreSQL " + urlunsplit((u.scheme, netloc, u.path, "", ""))

    def _connect(self):
        import psycopg

        return psycopg.connect(self.url, autocommit=True, connect_timeout=10)

    def _init(self) -> None:
        with self._init_lock:
            if self._ready:
                return

            def ddl(c: _Cursor):
                c.rows("SELECT pg_advisory_xact_lock(7254331)")  # two processes creating at once
                for table, column, kind in _ADDED:  # a store from before: its new columns first
                    c.run(f"ALTER TABLE IF EXISTS {table} ADD COLUMN IF NOT EXISTS {column} {kind}")
                for d in _DDL:
                    c.run(d.format(FLOAT="DOUBLE PRECISION"))

            self._run(ddl)
            self._ready = True

    def _transact(self, fn, write: bool):
        self._init()
        return self._run(fn)

    def _run(self, fn):
        import psycopg

        for attempt in (0, 1):
            try:
                con, pooled = self._pool.get()
            except psycopg.Error as e:
                raise StoreUnavailable(f"answers store {self.label}: {str(e).strip()}") from None
            try:
                with con.transaction():
                    out = fn(_Cursor(con, "postgresql"))
            except psycopg.OperationalError as e:
                con.close()
                # A pooled connection the server dropped (it restarted): once more on a new one.
                if pooled and attempt == 0:
                    continue
                raise StoreUnavailable(f"answers store {self.label}: {str(e).strip()}") from None
            except psycopg.Error as e:
                con.close()
                raise StoreUnavailable(f"answers store {self.label}: {str(e).strip()}") from None
            except BaseException:
                if con.closed:
                    raise
                self._pool.put(con)
                raise
            self._pool.put(con)
            return out

    def close(self) -> None:
        self._pool.close()


# ---- which store --------------------------------------------------------------------------
def state_dir() -> Path:
    """The writable folder of the default SQLite store (never inside a workspace)."""
    if os.environ.get("CONCEPTLENS_STATE_DIR"):
        return Path(os.environ["CONCEPTLENS_STATE_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "conceptlens"


def store_url() -> str:
    """`CONCEPTLENS_ANSWERS_URL`, else the default SQLite file under `state_dir()`."""
    return os.environ.get("CONCEPTLENS_ANSWERS_URL") or f"sqlite:///{state_dir() / 'answers.sqlite'}"


# The open stores, one per URL for the process: not a cache of a computed value but a pool
# of open connections each, which must be closed (`close_stores`), never dropped by an LRU
# (the conceptlens.cache layer evicts without closing) nor opened twice for one database.
_STORES: dict[str, Store] = {}
_STORES_LOCK = threading.Lock()


def open_store(url: str | None = None) -> Store:
    """The store `url` names (default `store_url()`), one object per URL and process: its
    connection pool is shared by every page run."""
    url = url or store_url()
    with _STORES_LOCK:
        if url not in _STORES:
            if url.startswith(("postgresql://", "postgres://")):
                _STORES[url] = PostgresStore(url)
            elif url.startswith("sqlite:///"):
                _STORES[url] = SqliteStore(url[len("sqlite:///") :])
            else:
                scheme = url.split("://", 1)[0][:20] if "://" in url else "no scheme"
                # The URL itself is not repeated: it may hold a password.
                raise StudyError(
                    f"CONCEPTLENS_ANSWERS_URL must start with postgresql:// or sqlite:/// (it has {scheme!r})"
                )
        return _STORES[url]


def close_stores() -> None:
    """Close and forget every store opened so far (tests that change the environment)."""
    with _STORES_LOCK:
        for s in _STORES.values():
            s.close()
        _STORES.clear()
