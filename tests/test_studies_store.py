"""The answers store, on SQLite and on a real PostgreSQL server (started by the test session,
harness/pg.py): one transaction per answer, idempotent by (study, participant, task); bad input
refused with a clear message and nothing stored twice; concurrent participants; and a process
killed with SIGKILL mid-study keeps every answer it had acknowledged."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pandas as pd
import pytest

from conceptlens.studies import store as S
from conceptlens.studies.design import StudyError
from tests import helpers_studies
from tests.conftest import ROOT
from tests.study_factory import answer_all, count, create


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'answers.sqlite'}"
    from harness.pg import fresh_database

    return fresh_database(request.getfixturevalue("pg_server"))


@pytest.fixture
def store(store_url):
    s = (
        S.SqliteStore(store_url[len("sqlite:///") :])
        if store_url.startswith("sqlite")
        else S.PostgresStore(store_url)
    )
    yield s
    s.close()


def test_answers_are_idempotent_and_a_replay_is_refused(store, factory_template):
    sid, _, _ = create(store, factory_template)
    p = store.join(sid).participant_id
    cur = store.current(sid, p)
    r = store.answer(sid, p, cur.task_id, "left", 812.5)
    assert (r.answered, r.total, r.completion_code) == (1, 10, None)
    for response in ("left", "right"):  # the same answer again, or a changed one
        with pytest.raises(
            S.AlreadyAnswered, match=f"task {cur.task_id} .* already answered .* first answer is kept"
        ):
            store.answer(sid, p, cur.task_id, response)
    a = store.answers(sid)
    assert len(a) == 1 and a["response"].iloc[0] == "left" and a["rt_ms"].iloc[0] == 812.5
    assert store.current(sid, p).answered == 1


def test_resume_and_completion_code(store, factory_template):
    sid, _, _ = create(store, factory_template, "similarity")
    j = store.join(sid)
    assert j.new and j.session == 0
    store.answer(sid, j.participant_id, store.current(sid, j.participant_id).task_id, [3, 5])
    again = store.join(sid, j.participant_id)  # a reload: the same place, nothing new
    assert again == S.Joined(j.participant_id, 0, False)
    assert store.current(sid, j.participant_id).answered == 1
    receipts = answer_all(store, sid, j.participant_id)
    code = receipts[-1].completion_code
    assert code and len(code) == 9 and all(r.completion_code is None for r in receipts[:-1])
    assert store.current(sid, j.participant_id).completion_code == code
    assert store.join(sid).session == 1  # the next person gets the next session


@pytest.mark.parametrize(
    "what, call, words",
    [
        ("forged task id", lambda s, sid, p: s.answer(sid, p, "c0-99", "left"), "not one of participant"),
        ("another session's task", None, "not one of participant"),
        ("a task ahead", None, "is not the task shown to participant"),
        ("unknown study", lambda s, sid, p: s.answer("nope", p, "c0-00", "left"), "no study nope"),
        ("unknown participant", lambda s, sid, p: s.answer(sid, "x" * 16, "c0-00", "left"), "has not joined"),
        (
            "huge response",
            lambda s, sid, p: s.answer(sid, p, "c0-00", "x" * 10_000_000),
            "must be 'left' or 'right'",
        ),
        (
            "malformed response",
            lambda s, sid, p: s.answer(sid, p, "c0-00", {"side": "left"}),
            "must be 'left'",
        ),
        (
            "list response",
            lambda s, sid, p: s.answer(sid, p, "c0-00", ["left"] * 1000),
            "a list of 1,000 items",
        ),
        ("huge task id", lambda s, sid, p: s.answer(sid, p, "t" * 1_000_000, "left"), "task id 'tttt"),
        (
            "sql in task id",
            lambda s, sid, p: s.answer(sid, p, "x'; DROP TABLE answers; --", "left"),
            "task id",
        ),
        (
            "huge participant",
            lambda s, sid, p: s.answer(sid, "p" * 100_000, "c0-00", "left"),
            "participant id",
        ),
        ("huge study id", lambda s, sid, p: s.join("s" * 100_000), "study id 'ssss"),
        ("bytes study id", lambda s, sid, p: s.join(b"abc"), "study id b'abc'"),
        ("negative time", lambda s, sid, p: s.answer(sid, p, "c0-00", "left", -5), "response time"),
        ("nan time", lambda s, sid, p: s.answer(sid, p, "c0-00", "left", float("nan")), "response time"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_stored(store, factory_template, what, call, words):
    sid, _, d = create(store, factory_template)
    p = store.join(sid).participant_id
    shown = store.current(sid, p).task_id
    if what == "another session's task":
        theirs = next(
            s.task_id
            for s in d.slots
            if s.session == 1 and s.task_id not in {x.task_id for x in d.slots if x.session == 0}
        )
        call = lambda s, sid, p: s.answer(sid, p, theirs, "left")  # noqa: E731
    if what == "a task ahead":
        ahead = next(s.task_id for s in d.slots if s.session == 0 and s.position == 3)
        call = lambda s, sid, p: s.answer(sid, p, ahead, "left")  # noqa: E731
    t = time.monotonic()
    with pytest.raises(StudyError, match=words) as e:
        call(store, sid, p)
    assert len(str(e.value)) < 300  # a clear message, not the payload echoed back
    assert time.monotonic() - t < 5
    assert count(store, sid) == (0, 0) and store.current(sid, p).task_id == shown
    store.answer(sid, p, shown, "left")  # the participant goes on as if nothing happened
    assert count(store, sid) == (1, 1)


def test_closed_study_takes_no_answers_and_no_participants(store, factory_template):
    sid, _, _ = create(store, factory_template)
    p = store.join(sid).participant_id
    store.set_status(sid, "closed")
    with pytest.raises(S.StudyClosed, match="closed: it takes no more answers"):
        store.answer(sid, p, store.current(sid, p).task_id, "left")
    with pytest.raises(S.StudyClosed, match="no more participants"):
        store.join(sid)
    assert store.join(sid, p).session == 0  # who joined before still sees where they are
    store.set_status(sid, "open")
    store.answer(sid, p, store.current(sid, p).task_id, "left")
    assert count(store, sid) == (1, 1)
    with pytest.raises(StudyError, match="status must be"):
        store.set_status(sid, "finished")


def test_access_token(store, factory_template):
    sid, token, _ = create(store, factory_template, token=True)
    assert token and S.TOKEN.fullmatch(token)
    for wrong in (None, "", "x" * 12, token + "x", "y" * 10_000):
        with pytest.raises(S.TokenRequired, match="needs the access token"):
            store.join(sid, token=wrong)
    assert store.join(sid, token=token).new
    assert store.study(sid).token_sha256 != token  # only its hash is stored


def test_a_full_study_and_reclaimed_sessions(store, factory_template):
    sid, _, d = create(store, factory_template, reclaim_minutes=30)
    people = [store.join(sid).participant_id for _ in range(d.n_sessions)]
    answer_all(store, sid, people[0])
    with pytest.raises(S.StudyFull, match=f"all {d.n_sessions} sessions are taken"):
        store.join(sid)
    # Someone left session 2 an hour ago: it goes to the next person; finished ones never do.
    past = "2000-01-01T00:00:00.000000+00:00"
    store._transact(
        lambda c: c.run(
            "UPDATE participants SET last_active = ? WHERE study_id = ? AND session IN (0, 2)", [past, sid]
        ),
        True,
    )
    taker = store.join(sid)
    assert taker.session == 2 and taker.participant_id != people[2]
    with pytest.raises(S.StudyFull):
        store.join(sid)
    # The previous holder's place is gone (their answers stay); the new holder starts afresh.
    with pytest.raises(S.PlaceReclaimed, match="went to someone else"):
        store.join(sid, people[2])
    with pytest.raises(S.PlaceReclaimed):
        store.answer(sid, people[2], "c0-00", "left")
    assert store.current(sid, taker.participant_id).answered == 0


def test_drawn_study_ids_carry_64_bits(store, factory_template):
    import re

    ids = {create(store, factory_template)[0] for _ in range(3)}
    assert len(ids) == 3 and all(re.fullmatch(r"coh-[0-9a-f]{16}", i) for i in ids), ids


def test_study_ids_are_unique(store, factory_template):
    create(store, factory_template, study_id="mine")
    with pytest.raises(StudyError, match="study mine already exists"):
        create(store, factory_template, study_id="mine")
    with pytest.raises(StudyError, match="study id 'a b' is not valid"):
        create(store, factory_template, study_id="a b")


def test_concurrent_participants_store_every_answer_once(store, factory_template):
    """Sessions are claimed once each and every answer is stored once, with 12 threads
    joining and answering at the same time (each also replays one of its answers)."""
    sid, _, d = create(store, factory_template, answers=4)
    errors, replays = [], []

    def person(i):
        try:
            p = store.join(sid).participant_id
            receipts = answer_all(store, sid, p, seed=i)
            try:
                store.answer(sid, p, receipts[0].task_id, "left")
            except S.AlreadyAnswered:
                replays.append(p)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=person, args=(i,)) for i in range(d.n_sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert len(replays) == d.n_sessions
    parts = store.participants(sid)
    assert sorted(parts["session"]) == list(range(d.n_sessions))
    assert count(store, sid) == (len(d.slots), len(d.slots))
    assert parts["finished"].notna().all() and parts["completion_code"].nunique() == d.n_sessions


ANSWERING = """
import sys
from conceptlens.studies.store import open_store
from tests.study_factory import response
import random
store = open_store(sys.argv[1]); sid = sys.argv[2]; rng = random.Random(0)
# A restart resumes the ids the store issued (an id it did not issue would get a new place).
issued = list(store.participants(sid)["participant_id"])
people = issued or [store.join(sid).participant_id for i in range(int(sys.argv[3]))]
people = [store.join(sid, p).participant_id for p in people]
while True:
    for p in people:
        cur = store.current(sid, p)
        if cur.task_id is None:
            continue
        store.answer(sid, p, cur.task_id, response(store.study(sid).spec.kind, rng))
        print(p, cur.answered, flush=True)  # acknowledged: the transaction committed
    if all(store.current(sid, p).task_id is None for p in people):
        break
"""


@pytest.mark.parametrize("kind", ["coherence", "similarity"])
def test_sigkill_mid_study_keeps_every_acknowledged_answer(store, store_url, factory_template, kind):
    sid, _, d = create(store, factory_template, kind)
    people = 4
    planned = sum(1 for s in d.slots if s.session < people)
    cmd = [sys.executable, "-c", ANSWERING, store_url, sid, str(people)]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    acked = []
    while len(acked) < planned // 2:
        line = proc.stdout.readline()
        assert line, "the answering process ended early"
        acked.append(tuple(line.split()))
    os.kill(proc.pid, signal.SIGKILL)  # mid-study, maybe mid-transaction
    proc.wait()
    proc.stdout.close()
    stored = store.answers(sid)
    have = {(p, str(pos)) for p, pos in zip(stored["participant_id"], stored["position"])}
    assert set(acked) <= have
    assert count(store, sid)[0] == count(store, sid)[1] >= len(acked)
    # The study resumes: the same people go on where they were, and finish.
    done = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert count(store, sid) == (planned, planned)
    assert store.participants(sid)["finished"].notna().sum() == people
    final = store.answers(sid)
    assert set(acked) <= {(p, str(pos)) for p, pos in zip(final["participant_id"], final["position"])}


def test_postgres_reconnects_after_its_connection_was_dropped(pg_server, factory_template):
    """A pooled connection the server dropped (a restart, an idle timeout) is replaced, once,
    without the participant noticing."""
    import psycopg

    from harness.pg import fresh_database

    url = fresh_database(pg_server)
    store = S.PostgresStore(url)
    sid, _, _ = create(store, factory_template)
    p = store.join(sid).participant_id
    con, _ = store._pool.get()
    backend = con.info.backend_pid
    store._pool.put(con)
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [backend])
    store.answer(sid, p, store.current(sid, p).task_id, "left")
    assert count(store, sid) == (1, 1)
    store.close()


def test_a_store_from_before_gets_the_new_columns(store, store_url, factory_template):
    """A store created before platform ids, reclaimed places and pinned workspaces: opened
    again, its tables get the new columns and its studies go on."""
    sid, _, _ = create(store, factory_template)
    p = store.join(sid).participant_id
    store.answer(sid, p, store.current(sid, p).task_id, "left")

    def downgrade(c):
        c.run("DROP INDEX participants_platform")
        for table, column, _ in S._ADDED:
            c.run(f"ALTER TABLE {table} DROP COLUMN {column}")

    store._transact(downgrade, True)
    store.close()
    again = (
        S.SqliteStore(store_url[len("sqlite:///") :])
        if store_url.startswith("sqlite")
        else S.PostgresStore(store_url)
    )
    try:
        assert again.study(sid).root is None  # stored before: no folder, found by its name
        assert again.join(sid, p).participant_id == p
        again.answer(sid, p, again.current(sid, p).task_id, "right")
        platform = S.Platform("prolific", "abc123", "st", "se")
        new = again.join(sid, platform=platform)
        row = again.participants(sid).set_index("participant_id").loc[new.participant_id]
        assert (row["platform"], row["platform_pid"]) == ("prolific", "abc123")
        assert count(again, sid) == (2, 2)
    finally:
        again.close()


# Fixtures shared with other test modules, named here so that pytest finds them for this one.
default_store = helpers_studies.default_store
env = helpers_studies.env


# ---- the store -------------------------------------------------------------------------------
def test_platform_ids_of_every_platform_are_read_and_checked():
    assert S.platform_from({"PROLIFIC_PID": "p1", "STUDY_ID": "s1", "SESSION_ID": "e1"}) == S.Platform(
        "prolific", "p1", "s1", "e1"
    )
    assert S.platform_from({"workerId": "W1", "hitId": "H1", "assignmentId": "A1"}) == S.Platform(
        "mturk", "W1", "H1", "A1"
    )
    assert S.platform_from({"workerId": "W1"}) == S.Platform("mturk", "W1", None, None)
    assert S.platform_from({"p": "x"}) is None
    for params, key in (
        ({"PROLIFIC_PID": "p 1"}, "PROLIFIC_PID"),
        ({"PROLIFIC_PID": "p1", "STUDY_ID": "s'1"}, "STUDY_ID"),
        ({"PROLIFIC_PID": "p1", "STUDY_ID": "s1", "SESSION_ID": "e" * 65}, "SESSION_ID"),
        ({"workerId": "W1", "hitId": ["H1"]}, "hitId"),
        ({"workerId": "W1", "hitId": "H1", "assignmentId": "<a>"}, "assignmentId"),
    ):
        with pytest.raises(StudyError, match=f"^{key} .* is not valid"):
            S.platform_from(params)


def _set_last_active(default_store, sid, when: dict) -> None:
    for session, t in when.items():
        default_store._transact(
            lambda c, t=t, session=session: c.run(
                "UPDATE participants SET last_active = ? WHERE study_id = ? AND session = ?",
                [t, sid, session],
            ),
            True,
        )


def test_a_full_study_reclaims_the_session_idle_longest_and_never_a_finished_one(
    default_store, factory_template
):
    sid, _, d = create(default_store, factory_template, answers=1, reclaim_minutes=30)
    people = [default_store.join(sid).participant_id for _ in range(d.n_sessions)]
    answer_all(default_store, sid, people[0])
    assert d.n_sessions >= 4
    _set_last_active(
        default_store,
        sid,
        {0: "1999-01-01T00:00:00.000000+00:00",  # finished long ago: never reclaimed
         3: "2001-01-01T00:00:00.000000+00:00",
         1: "2000-01-01T00:00:00.000000+00:00"},  # idle longest
    )  # fmt: skip
    assert default_store.join(sid).session == 1
    assert default_store.join(sid).session == 3
    with pytest.raises(S.StudyFull):
        default_store.join(sid)  # the others were active a moment ago
    parts = default_store.participants(sid).set_index("participant_id")
    assert pd.isna(parts.loc[people[0], "reclaimed"]) and pd.notna(parts.loc[people[0], "finished"])
    assert parts["reclaimed"].notna().sum() == 2


def test_the_server_side_of_the_shown_task_follows_the_participant(default_store, factory_template):
    """shown_task (what a simulated observer answers) is the task `current` shows, with the
    slot's layout of the design, at every step; a perfect observer is always right."""
    import random

    from conceptlens.studies.plan import simulated_response

    sid, _, d = create(default_store, factory_template, answers=1)
    p = default_store.join(sid).participant_id
    tasks = {t.task_id: t for t in d.tasks}
    slots = [s for s in d.slots if s.session == 0]
    rng = random.Random(0)
    for n, slot in enumerate(slots):
        cur = default_store.current(sid, p)
        assert (cur.answered, cur.task_id) == (n, slot.task_id)
        t = tasks[slot.task_id]
        assert default_store.shown_task(sid, p) == (t.unit, t.is_catch, slot.layout)
        side = simulated_response(default_store, sid, p, {c: 1.0 for c in range(4)}, rng)
        assert side == slot.layout["positive_side"]
        r = default_store.answer(sid, p, slot.task_id, side, 100.0)
        assert (r.task_id, r.answered, r.total) == (slot.task_id, n + 1, len(slots))
    assert default_store.shown_task(sid, p) is None
    done = default_store.current(sid, p)
    assert (done.participant_id, done.answered, done.total, done.task_id) == (p, len(slots), len(slots), None)
    assert done.completion_code == r.completion_code and r.completion_code
    assert default_store.answers(sid)["correct"].all()


def test_close_stores_closes_every_store_and_forgets_it(env):
    """After close_stores the next open_store reads the database afresh (a test that removed the
    state folder gets a new, empty store) and no pooled connection of any store stays open."""
    urls = [f"sqlite:///{env / n / 'answers.sqlite'}" for n in ("a", "b", "c")]
    stores = [S.open_store(u) for u in urls]
    pooled = []
    for s in stores:
        assert s._transact(lambda c: c.one("SELECT count(*) FROM studies"), False) == (0,)  # pools one
        pooled.extend(s._pool._idle.queue)
    assert len(pooled) >= 3
    S.close_stores()
    for con in pooled:
        with pytest.raises(sqlite3.ProgrammingError):
            con.execute("SELECT 1")
    for u in urls:
        S.SqliteStore(u[len("sqlite:///") :]).path.unlink()
    fresh = S.open_store(urls[0])
    assert fresh is not stores[0] and not fresh.exists()
    assert fresh.studies().empty


def test_a_store_reopened_after_close_stores_does_not_serve_a_deleted_study(env, factory_template):
    url = f"sqlite:///{env / 'x' / 'answers.sqlite'}"
    sid, _, _ = create(S.open_store(url), factory_template, answers=1)
    S.close_stores()
    (env / "x" / "answers.sqlite").unlink()
    with pytest.raises(S.UnknownStudy):
        S.open_store(url).study(sid)
    create(S.open_store(url), factory_template, answers=1, study_id="again1")  # the tables are made anew
    assert list(S.open_store(url).studies()["study_id"]) == ["again1"]


def test_postgres_never_returns_nothing_for_a_call_on_dropped_connections(pg_server, factory_template):
    """Every pooled connection dropped by the server: an answer is either stored and
    acknowledged, or refused with StoreUnavailable; never a silent None."""
    import psycopg

    from harness.pg import fresh_database

    url = fresh_database(pg_server)
    default_store = S.PostgresStore(url)
    try:
        sid, _, _ = create(default_store, factory_template, answers=1)
        p = default_store.join(sid).participant_id
        task = default_store.current(sid, p).task_id
        cons = [default_store._pool.get()[0] for _ in range(2)]
        backends = [c.info.backend_pid for c in cons]
        for c in cons:
            default_store._pool.put(c)
        with psycopg.connect(url, autocommit=True) as admin:
            for b in backends:
                admin.execute("SELECT pg_terminate_backend(%s)", [b])
        try:
            r = default_store.answer(sid, p, task, "left")
        except S.StoreUnavailable:
            r = None
            assert default_store.answers(sid).empty
        else:
            assert isinstance(r, S.Receipt) and r.task_id == task
        if r is None:
            r = default_store.answer(sid, p, task, "left")
        assert isinstance(r, S.Receipt) and len(default_store.answers(sid)) == 1
    finally:
        default_store.close()


def test_an_mturk_preview_is_no_participant_even_with_a_worker_id():
    """MTurk marks a HIT's preview by its assignmentId, not its workerId."""
    from conceptlens.studies.store import Platform, platform_from

    preview = {"workerId": "W1", "hitId": "H1", "assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"}
    assert platform_from(preview) is None
    accepted = {**preview, "assignmentId": "A1"}
    assert platform_from(accepted) == Platform("mturk", "W1", "H1", "A1")


# ---- store URLs and empty stores -----------------------------------------------------------------
def test_an_unknown_store_url_is_refused_naming_its_scheme_not_its_password():
    with pytest.raises(
        StudyError, match=r"must start with postgresql:// or sqlite:/// \(it has 'no scheme'\)"
    ):
        S.open_store("answers.sqlite")
    with pytest.raises(StudyError) as e:
        S.open_store("mysql://admin:hunter2@db.example/answers")
    assert "(it has 'mysql')" in str(e.value) and "hunter2" not in str(e.value)


def test_an_empty_store_lists_no_studies_with_the_columns_of_a_full_one(tmp_path, factory_template):
    empty = S.SqliteStore(tmp_path / "none" / "answers.sqlite").studies()
    full = S.SqliteStore(tmp_path / "answers.sqlite")
    create(full, factory_template)
    listed = full.studies()
    full.close()
    assert empty.empty and len(listed) == 1
    assert list(empty.columns) == list(listed.columns)
