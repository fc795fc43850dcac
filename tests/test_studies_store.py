"""The answers store, on SQLite and on a real PostgreSQL server (started by the test session,
tests/pg.py): one transaction per answer, idempotent by (study, participant, task); bad input
refused with a clear message and nothing stored twice; concurrent participants; and a process
killed with SIGKILL mid-study keeps every answer it had acknowledged."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conceptlens.studies import store as S
from conceptlens.studies.design import StudyError
from tests.conftest import ROOT
from tests.study_factory import answer_all, count, create


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'answers.sqlite'}"
    from tests.pg import fresh_database

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

    from tests.pg import fresh_database

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
