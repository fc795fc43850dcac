"""Studies through the real running app, spoken to over Streamlit's websocket (tests/st_client.py)
as browsers do: the server killed with SIGKILL mid-study keeps every acknowledged answer and the
study resumes, on SQLite and on PostgreSQL; replayed, forged and malformed messages store
nothing twice."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from conceptlens.studies import store as S
from tests.st_client import Client, Outcome, Server, participate
from tests.study_factory import count, create

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request, tmp_path):
    """(store, environment for the server) of an empty answers store."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'answers.sqlite'}"
        store = S.SqliteStore(tmp_path / "answers.sqlite")
    else:
        from tests.pg import fresh_database

        url = fresh_database(request.getfixturevalue("pg_server"))
        store = S.PostgresStore(url)
    yield store, {"CONCEPTLENS_ANSWERS_URL": url}
    store.close()


def _run(main):
    """asyncio.run in its own thread: Playwright's sync API (the browser tests of the same
    session) leaves an event loop running in the main thread, where asyncio.run refuses."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


def test_sigkill_of_the_server_mid_study_keeps_every_acknowledged_answer(backend, factory_template):
    store, env = backend
    sid, _, d = create(store, factory_template, answers=2, per_participant=6, catch=1)
    people = 8
    planned = sum(1 for s in d.slots if s.session < people)
    server = Server(factory_template, env)
    server.start()
    try:

        async def main():
            until = time.monotonic() + 300
            shared = [Outcome(f"person{i:04d}xyz") for i in range(people)]
            tasks = [
                asyncio.create_task(
                    participate(server.url, sid, o.participant_id, seed=i, outcome=o, retry_until=until)
                )
                for i, o in enumerate(shared)
            ]
            # Kill the server once a third of the answers are acknowledged, then start it again.
            while sum(len(o.acked) for o in shared) < planned // 3:
                await asyncio.sleep(0.05)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, server.kill)
            acked_before = {(o.participant_id, n) for o in shared for n in o.acked}
            killed = store.answers(sid)
            assert acked_before <= set(zip(killed["participant_id"], killed["position"]))
            await loop.run_in_executor(None, server.start)
            return await asyncio.gather(*tasks), acked_before

        outcomes, acked_before = _run(main)
    finally:
        server.stop()
    a = store.answers(sid)
    assert count(store, sid) == (planned, planned)  # the study resumed and finished, none twice
    assert {(o.participant_id, n) for o in outcomes for n in o.acked} <= set(
        zip(a["participant_id"], a["position"])
    )
    assert sum(o.reconnects for o in outcomes) >= 1 and len(acked_before) >= planned // 3
    parts = store.participants(sid).set_index("participant_id")
    for o in outcomes:
        assert o.code == parts.loc[o.participant_id, "completion_code"]


def test_replayed_forged_and_malformed_messages_store_nothing_twice(factory_template, tmp_path):
    store = S.SqliteStore(tmp_path / "answers.sqlite")
    sid, _, d = create(store, factory_template)
    server = Server(factory_template, {"CONCEPTLENS_STATE_DIR": str(tmp_path)})
    server.start()
    try:

        async def main():
            c = Client(server.url, f"study={sid}&p=replayer0001")
            await c.connect()
            first = await c.run()
            assert first.task == (1, 10)
            old = first.buttons["answer-0-left"]
            second = await c.run(old)
            assert second.task == (2, 10)
            # The same click again (a replayed message), and a forged widget id: nothing stored.
            for click in (
                old,
                old.replace("answer-0", "answer-1"),
                "$$ID-deadbeef-answer-1-left",
                "x" * 100_000,
            ):
                view = await c.run(click)
                assert view.task == (2, 10) and not view.exceptions
            assert count(store, sid) == (1, 1)
            # A huge query string: a plain refusal, and the server goes on.
            big = Client(server.url, "study=" + "s" * 200_000)
            await big.connect()
            view = await big.run()
            assert any("This link is not valid" in a for a in view.alerts) and not view.buttons
            await big.close()
            # Garbage instead of a protobuf message: the connection may end, the server does not.
            await c._ws.send(os.urandom(5000))
            await c.close()
            again = Client(server.url, f"study={sid}&p=replayer0001")
            await again.connect()
            assert (await again.run()).task == (2, 10)
            await again.close()

        _run(main)
    finally:
        server.stop()
    assert count(store, sid) == (1, 1)
    store.close()
