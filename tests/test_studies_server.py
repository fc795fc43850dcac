"""Studies through the real running app, spoken to over Streamlit's websocket (harness/st_client.py)
as browsers do: the server killed with SIGKILL mid-study keeps every acknowledged answer and the
study resumes, on SQLite and on PostgreSQL; replayed, forged and malformed messages store
nothing twice."""

from __future__ import annotations

import asyncio
import os
import time
from urllib.parse import parse_qs

import pytest

from conceptlens.studies import store as S
from harness.st_client import Client, Outcome, Server, participate
from tests.study_factory import count, create

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request, tmp_path):
    """(store, environment for the server) of an empty answers store."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'answers.sqlite'}"
        store = S.SqliteStore(tmp_path / "answers.sqlite")
    else:
        from harness.pg import fresh_database

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
            resume = c.query  # with the id the server issued in place of replayer0001
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
            again = Client(server.url, resume)
            await again.connect()
            assert (await again.run()).task == (2, 10)
            await again.close()

        _run(main)
    finally:
        server.stop()
    assert count(store, sid) == (1, 1)
    store.close()


# ---- the server attacked as a participant can: the websocket the page really uses ------------
SECRET = "owner-secret-0123456789"
# The attack: a study of 200,000 planned answers from a link and one click.
HUGE = "kind=similarity&ds=toy&tasks=100000&answers=2&per=20&catch=2&id=dos"


def _text(view) -> str:
    return " ".join(view.alerts + view.markdown + view.codes + view.headings)


def _sent(view) -> bytes:
    return b"".join(view.raw)


def test_owner_page_refused_without_the_secret(factory_template, tmp_path):
    """A participant who drops `?study=` (or opens /studies, with the issue's link) sees the
    sign-in only: no study id, completion code or store path in anything sent; a forged click
    on Create stores nothing. With the secret, the owner sees the study."""
    store = S.SqliteStore(tmp_path / "answers.sqlite")
    sid, _, _ = create(store, factory_template)
    pid = store.join(sid).participant_id
    from tests.study_factory import answer_all

    answer_all(store, sid, pid)
    code = store.participants(sid)["completion_code"].iloc[0]
    server = Server(
        factory_template, {"CONCEPTLENS_STATE_DIR": str(tmp_path), "CONCEPTLENS_OWNER_SECRET": SECRET}
    )
    server.start()
    try:

        async def main():
            c = Client(server.url, HUGE, page="studies")
            await c.connect()
            view = await c.run()
            sent = _sent(view)
            assert "owner secret" in _text(view) and not view.exceptions
            for private in (sid, code, pid, str(tmp_path), "answers.sqlite"):
                assert private.encode() not in sent, private
            assert "st_create" not in view.buttons
            # A forged click on the owner's buttons: the widgets were never drawn, nothing runs.
            for forged in ("$$ID-00000000000000000000000000000000-st_create", "$$ID-x-st_close"):
                view = await c.run(forged)
                assert not view.exceptions
            await c.close()
            # A participant's cookie, no study in the link: their page, whatever the address.
            p = Client(server.url, "", cookies={f"conceptlens_p_{sid}": pid}, page="clusters")
            await p.connect()
            view = await p.run()
            assert "Thank you!" in view.headings and code in view.codes
            await p.close()
            # The owner: a wrong secret is refused; the right one, typed once, shows the study.
            o = Client(server.url, "", page="studies")
            await o.connect()
            view = await o.run()
            box, submit = (
                view.inputs["st_owner_given"],
                next(b for k, b in view.buttons.items() if "FormSubmitter" in b or "owner" in k),
            )
            view = await o.run(submit, texts={box: "not-" + SECRET})
            assert "That is not the owner secret" in _text(view) and sid.encode() not in _sent(view)
            view = await o.run(submit, texts={box: SECRET})
            assert sid.encode() in _sent(view) and "st_close" in view.buttons
            view = await o.run()  # once per session: the next run needs no secret
            assert sid.encode() in _sent(view)
            await o.close()

        _run(main)
    finally:
        server.stop()
    assert list(store.studies()["study_id"]) == [sid]
    assert store.status(sid) == "open"
    store.close()


def test_read_only_deployment_writes_nothing(factory_copy, tmp_path):
    """CONCEPTLENS_READ_ONLY=1 on a local server (the owner by default): Create, Close and Export
    are pressed through the websocket anyway; the store and the workspace do not change."""
    from tests.test_readonly import snapshot

    store = S.SqliteStore(tmp_path / "answers.sqlite")
    sid, _, _ = create(store, factory_copy)
    before_ws, before = snapshot(factory_copy), store.studies()
    env = {"CONCEPTLENS_STATE_DIR": str(tmp_path), "CONCEPTLENS_READ_ONLY": "1"}
    server = Server(factory_copy, env)
    server.start()
    try:

        async def main():
            c = Client(server.url, f"sid={sid}&kind=coherence&refs=5&per=10", page="studies")
            await c.connect()
            view = await c.run()
            assert sid.encode() in _sent(view)  # the owner (local server) sees the study
            for key in ("st_create", "st_close", "st_export"):
                assert key in view.buttons, (key, sorted(view.buttons))
                view = await c.run(view.buttons[key])
                assert not view.exceptions
            await c.close()

        _run(main)
    finally:
        server.stop()
    after = store.studies()
    assert list(after["study_id"]) == list(before["study_id"]) and store.status(sid) == "open"
    assert snapshot(factory_copy) == before_ws
    store.close()


def test_a_second_place_per_session_and_unissued_ids_are_refused(factory_template, tmp_path):
    store = S.SqliteStore(tmp_path / "answers.sqlite")
    sid, _, _ = create(store, factory_template)
    other = store.join(sid).participant_id  # someone else's place
    server = Server(
        factory_template, {"CONCEPTLENS_STATE_DIR": str(tmp_path), "CONCEPTLENS_OWNER_SECRET": SECRET}
    )
    server.start()
    try:

        async def main():
            # An id the server did not issue: a new place under an issued id instead.
            c = Client(server.url, f"study={sid}&p=forged-id-0001")
            await c.connect()
            view = await c.run()
            assert view.task == (1, 10)
            mine = parse_qs(c.query)["p"][0]
            assert mine != "forged-id-0001"
            # Another place from the same session: by another issued id, or with no id at all.
            c.query = f"study={sid}&p={other}"
            view = await c.run()
            assert any("already holds a place" in a for a in view.alerts) and view.task is None
            c.query = f"study={sid}"
            view = await c.run()
            assert view.task == (1, 10) and parse_qs(c.query)["p"][0] == mine
            # Dropping the study from the link: still the participant page.
            c.query = ""
            view = await c.run()
            assert view.task == (1, 10) and not view.exceptions
            await c.close()
            return mine

        mine = _run(main)
    finally:
        server.stop()
    people = set(store.participants(sid)["participant_id"])
    assert people == {other, mine} and "forged-id-0001" not in people
    store.close()


def test_an_oversized_study_is_refused(factory_template, tmp_path):
    store = S.SqliteStore(tmp_path / "answers.sqlite")
    server = Server(factory_template, {"CONCEPTLENS_STATE_DIR": str(tmp_path)})  # local: the owner
    server.start()
    try:

        async def main():
            c = Client(server.url, HUGE, page="studies")
            await c.connect()
            view = await c.run()
            t0 = time.monotonic()
            view = await c.run(view.buttons["st_create"])
            took = time.monotonic() - t0
            await c.close()
            return view, took

        view, took = _run(main)
    finally:
        server.stop()
    assert any("tasks 100,000 is above the limit of 1,000" in a for a in view.alerts), view.alerts
    assert "CONCEPTLENS_STUDY_MAX_TASKS" in _text(view).replace("\\", "") and took < 30
    assert store.studies().empty
    store.close()


def test_a_link_naming_another_workspace_is_refused_cleanly(factory_template, tmp_path):
    """The study's images come from its own workspace; `ws=` naming another one gets a plain
    message (it was a FileNotFoundError from participant/study.py)."""
    from conceptlens.workspace import Workspace
    from tests.conftest import copy_ws

    served = tmp_path / "served"
    mine = copy_ws(factory_template, served / "mine")
    other = copy_ws(factory_template, served / "other")
    (other / Workspace.META).unlink()  # a hard link: replaced, not written into
    Workspace(other).write_meta({**Workspace(mine).meta(), "name": "another"})
    for thumbs in (other / "thumbnails",):
        import shutil

        shutil.rmtree(thumbs, ignore_errors=True)
    store = S.SqliteStore(tmp_path / "answers.sqlite")
    sid, _, _ = create(store, mine)
    env = {"CONCEPTLENS_STATE_DIR": str(tmp_path), "CONCEPTLENS_WORKSPACES": str(served)}
    server = Server(other, env)  # the server's own workspace is the other one
    server.start()
    try:

        async def main():
            views = []
            for q in (
                f"study={sid}&ws=other",
                f"study={sid}&ws=../../etc",
                f"study={sid}",
                f"study={sid}&ws=mine",
            ):
                c = Client(server.url, q)
                await c.connect()
                views.append(await c.run())
                await c.close()
            return views

        foreign, outside, plain, named = _run(main)
    finally:
        server.stop()
    for v in (foreign, outside):
        assert any("names another workspace" in a for a in v.alerts) and not v.exceptions and v.task is None
    # No ws=: the images come from where the study was designed, not the server's workspace.
    assert plain.task == (1, 10) and not plain.exceptions
    assert named.task == (1, 10) and not named.exceptions
    store.close()


def test_simulated_observers_answer_a_study_through_the_participant_page(factory_template, tmp_path):
    """The simulation mode: observers who pick the cluster's image with a given probability
    answer through the running page; with probability 1 every counted answer is right, so the
    page clicked the side the server graded as the cluster's."""
    import numpy as np

    from conceptlens.studies.plan import simulated_response
    from conceptlens.studies.results import results

    store = S.SqliteStore(tmp_path / "answers.sqlite")
    sid, _, d = create(store, factory_template, answers=1, per_participant=6, catch=1)
    rng = np.random.default_rng(0)
    server = Server(factory_template, {"CONCEPTLENS_STATE_DIR": str(tmp_path)})
    server.start()
    try:

        async def main():
            outs = [Outcome(f"sim-{i:04d}-person") for i in range(3)]
            respond = lambda pid: simulated_response(store, sid, pid, {0: 1.0, 1: 1.0, 2: 1.0}, rng)  # noqa: E731
            return await asyncio.gather(
                *(participate(server.url, sid, o.participant_id, outcome=o, respond=respond) for o in outs)
            )

        outs = _run(main)
    finally:
        server.stop()
    res = results(store, sid)
    assert all(o.code for o in outs) and res.summary["finished"] == 3
    assert res.summary["accuracy"] == 1.0 and (res.participants["catch_failed"] == 0).all()
    store.close()
