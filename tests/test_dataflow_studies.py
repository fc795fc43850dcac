"""Data-flow tests of studies (issue 29): who may read or write what, where each value comes
from and goes to, and nothing lost or silently dropped.

Each test is written against a data-flow bug a developer could make in conceptlens/studies/
(tools/dataflow_mutants.py makes them): the participant page judged on the wrong person, a
platform's ids not checked, the wrong idle session reclaimed, the owner's secret compared with
the address, a store that keeps serving a deleted file, a rule that is set but never counted.
Expected values come from the design (what was drawn) or are worked out by hand, never from a
snapshot of the code's output.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from conceptlens import permissions as P
from conceptlens.studies import results as R
from conceptlens.studies import service as V
from conceptlens.studies import store as S
from conceptlens.studies.design import StudyError, StudySpec, design
from conceptlens.workspace import Workspace
from tests.study_factory import SPECS, answer_all, create

SECRET = "owner-secret-of-the-dataflow-tests"


@pytest.fixture
def env(monkeypatch, tmp_path):
    """The default store under tmp_path, no owner secret, a writable deployment."""
    for var in ("CONCEPTLENS_ANSWERS_URL", P.OWNER_SECRET, "CONCEPTLENS_READ_ONLY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CONCEPTLENS_STATE_DIR", str(tmp_path / "state"))
    S.close_stores()
    yield tmp_path
    S.close_stores()


@pytest.fixture
def store(env):
    return S.open_store()


# ---- who is the owner --------------------------------------------------------------------------
def test_the_owner_is_who_gives_the_secret_not_who_names_an_address(env, monkeypatch):
    """The secret is compared with what the visitor gave, the mode decided by the address the
    server listens on: swapping the two lets nobody (or the wrong person) in."""
    monkeypatch.setenv(P.OWNER_SECRET, SECRET)
    assert V.Owner(SECRET, "0.0.0.0").ok and V.Owner(SECRET, "127.0.0.1").ok
    for given, address in (
        (None, "127.0.0.1"),
        ("wrong", "0.0.0.0"),
        ("0.0.0.0", SECRET),
        (SECRET * 2, "::1"),
    ):
        assert not V.Owner(given, address).ok, (given, address)
    monkeypatch.delenv(P.OWNER_SECRET)
    assert V.Owner(None, "127.0.0.1").ok and V.Owner(None, "[::1]").ok  # a local `make run`
    for given, address in ((None, "0.0.0.0"), ("127.0.0.1", "0.0.0.0"), (SECRET, "10.1.2.3")):
        assert not V.Owner(given, address).ok, (given, address)


def test_owner_writes_create_what_the_design_says_and_refusals_write_nothing(
    env, monkeypatch, factory_template
):
    spec = replace(SPECS["coherence"], answers=1)
    d = design(Workspace(factory_template), spec)
    stranger = V.Owner("guess", "0.0.0.0")  # no secret, listening beyond this machine
    with pytest.raises(P.PermissionDenied, match="closed on this server"):
        stranger.create(factory_template, spec, "stranger1")
    monkeypatch.setenv("CONCEPTLENS_READ_ONLY", "1")
    with pytest.raises(P.PermissionDenied, match="read-only"):
        V.Owner(None, "127.0.0.1").create(factory_template, spec, "readonly1")
    monkeypatch.delenv("CONCEPTLENS_READ_ONLY")
    assert S.open_store().studies().empty  # neither refusal wrote anything

    owner = V.Owner(None, "127.0.0.1")
    made = owner.create(factory_template, spec, "mine1")
    real = sum(not t.is_catch for t in d.tasks)
    assert made == {
        "study_id": "mine1",
        "token": None,
        "sessions": d.n_sessions,
        "planned": len(d.slots),
        "tasks": real,
        "catch": len(d.tasks) - real,
        "notes": d.notes,
    }
    assert owner.status("mine1") == "open"
    owner.set_status("mine1", "closed")
    assert S.open_store().status("mine1") == "closed"
    with pytest.raises(P.PermissionDenied, match="closed on this server"):
        stranger.set_status("mine1", "open")
    assert S.open_store().status("mine1") == "closed"


def test_owner_next_round_reports_the_new_round_and_what_the_last_one_exported(
    env, monkeypatch, factory_copy
):
    """`Owner.next_round` (the Studies page's button): the new study's sessions and tasks, the
    trials the previous round exported, and the analysis' notes first. The analysis itself is
    test_study_rounds' (here it is replaced by a stand-in that keeps the factory's embedding)."""
    from types import SimpleNamespace

    from conceptlens.analysis import runner

    calls = []
    monkeypatch.setattr(
        runner,
        "run",
        lambda root, name, options, **kw: calls.append((name, kw)) or SimpleNamespace(notes=["inferred"]),
    )
    store = S.open_store()
    sid, _, d = create(store, factory_copy, "similarity", study_id="round0")
    p = store.join(sid).participant_id
    n = len(answer_all(store, sid, p))
    out = V.Owner(None, "127.0.0.1").next_round(factory_copy, sid, 12, None, False)
    nxt = store.study(out["study_id"])
    assert calls == [("similarity", {"progress_bars": False, "dataset": "toy"})]
    assert (nxt.spec.round, nxt.spec.after, nxt.spec.selection, nxt.spec.tasks) == (1, sid, "active", 12)
    assert out["after"] == sid and out["exported"] == n and out["token"] is None
    assert out["notes"][0] == "inferred" and out["tasks"] == 12 and out["sessions"] == nxt.n_sessions
    assert out["planned"] == nxt.n_slots and out["catch"] == nxt.n_tasks - 12


# ---- the participant -----------------------------------------------------------------------
def test_a_participant_id_comes_from_a_wellformed_link_else_the_cookie():
    link, cookie = "L" * 16, "C" * 16
    assert V.participant_id_from(link, cookie) == link
    assert V.participant_id_from(None, cookie) == cookie
    assert V.participant_id_from("bad id; --", cookie) == cookie  # a malformed link falls back
    assert V.participant_id_from(["x" * 16], cookie) == cookie
    assert V.participant_id_from("short", "also bad!") is None


def test_what_a_participant_reads_never_shows_the_store():
    where = "answers store /srv/secret/state/answers.sqlite: database is locked"
    said = {}
    for cls in (
        S.UnknownStudy,
        S.StudyClosed,
        S.StudyFull,
        S.StoreUnavailable,
        S.TokenRequired,
        S.PlaceReclaimed,
        S.AlreadyTookPart,
    ):
        said[cls] = V.for_participant(cls(where))
        assert "/srv/secret" not in said[cls] and "sqlite" not in said[cls], cls
    assert len(set(said.values())) == len(said)  # each says what happened to them
    assert (
        V.for_participant(StudyError("task x is not yours")) == "This link is not valid: task x is not yours"
    )
    assert V.for_participant(StudyError("bad"), answering=True) == "That answer was not stored: bad"


def _served_pair(factory_template, tmp_path):
    """served/mine (the factory, named 'tiny') and served/other (the same tables, named 'another')."""
    from tests.conftest import copy_ws

    served = tmp_path / "served"
    mine = copy_ws(factory_template, served / "mine")
    other = copy_ws(factory_template, served / "other")
    (other / Workspace.META).unlink()  # a hard link: replaced, not written into
    Workspace(other).write_meta({**Workspace(mine).meta(), "name": "another"})
    return served, mine, other


def test_a_study_shows_the_images_of_its_own_workspace_only(env, factory_template):
    served, mine, other = _served_pair(factory_template, env)
    store = S.open_store()
    sid, _, _ = create(store, mine, answers=1)
    study = store.study(sid)
    assert V.study_root(study, [other]) == mine  # where it was designed, whatever is served
    moved = replace(study, root=str(env / "gone"))
    assert V.study_root(moved, [other, mine]) == mine  # else a served workspace of its name
    assert V.study_root(moved, [other]) is None
    renamed = replace(study, root=str(other))  # a folder that now holds another workspace
    assert V.study_root(renamed, [other, mine]) == mine
    # A link's ws= must name the study's workspace, inside the served folder.
    for raw, ok in (("mine", True), ("other", False), ("../..", False), ("/etc", False)):
        e = V.enter(sid, None, None, {}, {}, [mine], link_workspace=(served, raw))
        assert (e.error is None) == ok, (raw, e.error)
        if ok:
            assert e.root == mine


def test_enter_and_answer_use_the_sessions_own_place(env, factory_template):
    store = S.open_store()
    sid, _, d = create(store, factory_template, answers=1)
    places: dict = {}
    e = V.enter(sid, None, None, places, {}, [factory_template])
    assert e.error is None and places == {sid: e.participant_id} and e.kind == "coherence"
    first = next(s for s in d.slots if s.session == 0 and s.position == 0)
    assert e.current.participant_id == e.participant_id and e.current.task_id == first.task_id
    assert e.root == factory_template
    # An answer of another place is refused, one of this session's stored under its id.
    other = store.join(sid).participant_id
    said = V.answer(sid, other, first.task_id, "left", 500.0, places)
    assert said and "not stored" in said and store.answers(sid).empty
    assert V.answer(sid, e.participant_id, first.task_id, "left", 500.0, places) is None
    a = store.answers(sid)
    assert list(zip(a["participant_id"], a["task_id"], a["response"])) == [
        (e.participant_id, first.task_id, "left")
    ]
    # The same browser asking for another place keeps its own.
    again = V.enter(sid, None, other, places, {}, [factory_template])
    assert again.error and "already holds a place" in again.error and places[sid] == e.participant_id
    resumed = V.enter(sid, None, None, places, {}, [factory_template])
    assert resumed.participant_id == e.participant_id and resumed.current.answered == 1


def test_a_finisher_gets_the_code_of_their_own_checks(env, factory_template):
    store = S.open_store()
    sid, _, d = create(
        store, factory_template, answers=1, completion_code="DONE1", excluded_code="OUT1",
        completion_url="https://example.org/done", min_minutes=30, max_side_bias=0.8,
    )  # fmt: skip
    left, mixed = {}, {}
    for places, pick in ((left, lambda n: "left"), (mixed, lambda n: ("left", "right")[n % 2])):
        e = V.enter(sid, None, None, places, {}, [factory_template])
        for n in range(e.current.total):
            cur = store.current(sid, e.participant_id)
            assert V.answer(sid, e.participant_id, cur.task_id, pick(n), 300.0, places) is None
    out = V.enter(sid, None, None, left, {}, [factory_template])  # fast and one-sided: two checks
    assert (out.error, out.code, out.redirect, out.excluded) == (None, "OUT1", None, True)
    ok = V.enter(sid, None, None, mixed, {}, [factory_template])  # fast only: one check
    assert (ok.error, ok.code, ok.redirect, ok.excluded) == (None, "DONE1", "https://example.org/done", False)
    assert ok.participant_id == mixed[sid] and ok.current.answered == ok.current.total


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


def _set_last_active(store, sid, when: dict) -> None:
    for session, t in when.items():
        store._transact(
            lambda c, t=t, session=session: c.run(
                "UPDATE participants SET last_active = ? WHERE study_id = ? AND session = ?",
                [t, sid, session],
            ),
            True,
        )


def test_a_full_study_reclaims_the_session_idle_longest_and_never_a_finished_one(store, factory_template):
    sid, _, d = create(store, factory_template, answers=1, reclaim_minutes=30)
    people = [store.join(sid).participant_id for _ in range(d.n_sessions)]
    answer_all(store, sid, people[0])
    assert d.n_sessions >= 4
    _set_last_active(
        store,
        sid,
        {0: "1999-01-01T00:00:00.000000+00:00",  # finished long ago: never reclaimed
         3: "2001-01-01T00:00:00.000000+00:00",
         1: "2000-01-01T00:00:00.000000+00:00"},  # idle longest
    )  # fmt: skip
    assert store.join(sid).session == 1
    assert store.join(sid).session == 3
    with pytest.raises(S.StudyFull):
        store.join(sid)  # the others were active a moment ago
    parts = store.participants(sid).set_index("participant_id")
    assert pd.isna(parts.loc[people[0], "reclaimed"]) and pd.notna(parts.loc[people[0], "finished"])
    assert parts["reclaimed"].notna().sum() == 2


def test_the_server_side_of_the_shown_task_follows_the_participant(store, factory_template):
    """shown_task (what a simulated observer answers) is the task `current` shows, with the
    slot's layout of the design, at every step; a perfect observer is always right."""
    import random

    from conceptlens.studies.plan import simulated_response

    sid, _, d = create(store, factory_template, answers=1)
    p = store.join(sid).participant_id
    tasks = {t.task_id: t for t in d.tasks}
    slots = [s for s in d.slots if s.session == 0]
    rng = random.Random(0)
    for n, slot in enumerate(slots):
        cur = store.current(sid, p)
        assert (cur.answered, cur.task_id) == (n, slot.task_id)
        t = tasks[slot.task_id]
        assert store.shown_task(sid, p) == (t.unit, t.is_catch, slot.layout)
        side = simulated_response(store, sid, p, {c: 1.0 for c in range(4)}, rng)
        assert side == slot.layout["positive_side"]
        r = store.answer(sid, p, slot.task_id, side, 100.0)
        assert (r.task_id, r.answered, r.total) == (slot.task_id, n + 1, len(slots))
    assert store.shown_task(sid, p) is None
    done = store.current(sid, p)
    assert (done.participant_id, done.answered, done.total, done.task_id) == (p, len(slots), len(slots), None)
    assert done.completion_code == r.completion_code and r.completion_code
    assert store.answers(sid)["correct"].all()


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

    from tests.pg import fresh_database

    url = fresh_database(pg_server)
    store = S.PostgresStore(url)
    try:
        sid, _, _ = create(store, factory_template, answers=1)
        p = store.join(sid).participant_id
        task = store.current(sid, p).task_id
        cons = [store._pool.get()[0] for _ in range(2)]
        backends = [c.info.backend_pid for c in cons]
        for c in cons:
            store._pool.put(c)
        with psycopg.connect(url, autocommit=True) as admin:
            for b in backends:
                admin.execute("SELECT pg_terminate_backend(%s)", [b])
        try:
            r = store.answer(sid, p, task, "left")
        except S.StoreUnavailable:
            r = None
            assert store.answers(sid).empty
        else:
            assert isinstance(r, S.Receipt) and r.task_id == task
        if r is None:
            r = store.answer(sid, p, task, "left")
        assert isinstance(r, S.Receipt) and len(store.answers(sid)) == 1
    finally:
        store.close()


# ---- results ---------------------------------------------------------------------------------
def _people(rows):
    return pd.DataFrame(rows, columns=["participant_id", "started", "finished", "last_active"])


def test_every_rule_that_is_set_counts_one_failed_check():
    """With only max_minutes and max_side_bias set, failing both is two failed checks (excluded);
    each alone is one. Worked out by hand from the answers below."""
    spec = StudySpec("coherence", "ck0", 4, max_minutes=10, max_side_bias=0.7)
    assert spec.rules == {"max_minutes": 10, "max_side_bias": 0.7} and SPECS["coherence"].rules == {}
    t0 = "2026-01-01T00:00:00+00:00"
    people = _people(
        [
            ("slowleft", t0, "2026-01-01T00:20:00+00:00", "2026-01-01T00:20:00+00:00"),  # 20 min, all left
            ("slowmix", t0, "2026-01-01T00:20:00+00:00", "2026-01-01T00:20:00+00:00"),  # 20 min, half left
            ("fastleft", t0, "2026-01-01T00:05:00+00:00", "2026-01-01T00:05:00+00:00"),  # 5 min, all left
        ]
    )
    rows = pd.DataFrame(
        [(p, False, 1.0, side) for p, sides in (
            ("slowleft", "LLLL"), ("slowmix", "LRLR"), ("fastleft", "LLLL")) for side in sides],
        columns=["participant_id", "is_catch", "grade", "chosen_side"],
    )  # fmt: skip
    rows["chosen_side"] = rows["chosen_side"].map({"L": "left", "R": "right"})
    out = R.checks(spec, people, rows).set_index("participant_id")
    assert out.loc["slowleft", "minutes"] == 20 and out.loc["slowmix", "left_share"] == 0.5
    assert out["failed_checks"].to_dict() == {"slowleft": 2, "slowmix": 1, "fastleft": 1}
    assert out["excluded"].to_dict() == {"slowleft": True, "slowmix": False, "fastleft": False}
    table = R.checks(spec, people, rows)
    assert R.excluded_by(spec, table) == {"max_minutes": 1, "max_side_bias": 1}


def test_someone_who_answered_nothing_has_zero_answers_not_missing(store, factory_template):
    sid, _, _ = create(store, factory_template, answers=1)
    busy = store.join(sid).participant_id
    idle = store.join(sid).participant_id
    answer_all(store, sid, busy)
    parts = R.results(store, sid).participants.set_index("participant_id")
    row = parts.loc[idle]
    assert (row["answers"], row["catch_answers"], row["catch_failed"]) == (0, 0, 0)
    for c in ("answers", "catch_answers", "catch_failed"):
        assert parts[c].dtype == np.int64, c
    assert parts.loc[busy, "catch_answers"] == SPECS["coherence"].catch


@pytest.mark.parametrize("kind", ["coherence", "describability"])
def test_each_cluster_row_carries_its_own_proxy_values(store, factory_copy, kind):
    """study_clusters: every row's proxy and purity are those cluster_metrics has for that cluster
    (describability: no VL 2AFC in the factory, so no proxy, but the purity)."""
    ws = Workspace(factory_copy)
    sid, _, _ = create(store, factory_copy, kind, answers=1)
    for _ in range(3):
        answer_all(store, sid, store.join(sid).participant_id)
    res = R.results(store, sid, ws)
    spec = store.study(sid).spec
    m = ws.read("cluster_metrics", checkpoint_id="ck0", k=4).to_pandas().set_index("cluster")
    got = res.clusters.set_index("cluster")
    assert len(got) >= 2
    assert got["purity"].to_dict() == m.loc[got.index, "purity"].to_dict()
    if kind == "coherence":
        col = spec.measure
        for c in got.index:
            assert (got.loc[c, "proxy"], got.loc[c, "proxy_lo"], got.loc[c, "proxy_hi"]) == (
                m.loc[c, col], m.loc[c, f"{col}_lo"], m.loc[c, f"{col}_hi"],
            )  # fmt: skip
    else:
        assert got[["proxy", "proxy_lo", "proxy_hi"]].isna().all().all()


# ---- the design --------------------------------------------------------------------------------
def _shown_ids(d) -> set:
    out = set()
    for t in d.tasks:
        p = t.payload
        out.update(i for i in (p.get("positive"), p.get("negative"), p.get("query")) if i is not None)
        out.update(p.get("references", ()))
    return out


def test_every_image_of_a_coherence_catch_task_is_where_it_must_be(factory_template):
    """A catch task is an obviously correct pair: its references and positive from its cluster,
    its negative from outside it."""
    ws = Workspace(factory_template)
    d = design(ws, replace(SPECS["coherence"], catch=3, per_participant=9))
    cluster = ws.read("clusters", checkpoint_id="ck0", k=4).to_pandas().set_index("image_id")["cluster"]
    catches = [t for t in d.tasks if t.is_catch]
    assert len({t.unit for t in catches}) >= 2  # several clusters drawn
    for t in catches:
        p = t.payload
        assert {int(cluster[r]) for r in p["references"]} == {t.unit}
        assert p["positive"] in p["references"] and int(cluster[p["negative"]]) != t.unit


def _with_another_dataset(root) -> Workspace:
    """The factory plus dataset `other`: the same labels under other names (sorting first), and a
    checkpoint on it listed before ck0."""
    import pyarrow as pa

    ws = Workspace(root)
    img = ws.read("images")
    other = img.to_pandas()
    other["image_id"] = "other-" + other["image_id"]
    other["dataset"] = "other"
    other["label_name"] = "aaa " + other["label_name"].astype(str)
    ws.write(
        "images",
        pa.concat_tables([img, pa.Table.from_pandas(other, schema=img.schema, preserve_index=False)]),
    )
    ck = ws.read("checkpoints")
    first = ck.slice(0, 1).to_pandas()
    first["checkpoint_id"], first["dataset"] = "aaa", "other"
    ws.write(
        "checkpoints",
        pa.concat_tables([pa.Table.from_pandas(first, schema=ck.schema, preserve_index=False), ck]),
    )
    return ws


@pytest.mark.parametrize("name", list(SPECS))
def test_a_design_holds_the_thumbnails_of_the_images_it_shows_and_no_other(factory_copy, name):
    """Design.images is what the participant page may fetch: every image a task shows (catch
    tasks included), with its own thumbnail, and nothing else of the workspace (here: none of
    another dataset's images)."""
    ws = _with_another_dataset(factory_copy)
    d = design(ws, SPECS[name])
    img = ws.read("images", columns=["image_id", "thumbnail"]).to_pandas().set_index("image_id")["thumbnail"]
    used = _shown_ids(d)
    assert set(d.images) == used and len(used) < len(img)
    assert d.images == {i: img[i] for i in used}


def test_a_study_draws_from_its_own_dataset_only(factory_copy):
    ws = _with_another_dataset(factory_copy)
    toy = set(ws.read("images").to_pandas().query("dataset == 'toy'")["image_id"])
    sim = design(ws, SPECS["similarity"])
    assert _shown_ids(sim) <= toy
    names = ws.read("images").to_pandas().query("dataset == 'toy'").groupby("label")["label_name"].first()
    top = ws.read("cluster_metrics", checkpoint_id="ck0", k=4).to_pandas().set_index("cluster")["top_label"]
    d = design(ws, replace(SPECS["describability"], caption_source="label"))
    described = {t.unit: t.payload["description"] for t in d.tasks}
    assert described and all(v == names[top[c]] for c, v in described.items()), described


def test_an_empty_caption_is_no_description(factory_copy):
    import pyarrow as pa

    ws = Workspace(factory_copy)
    cap = ws.read("cluster_captions", checkpoint_id="ck0", k=4).to_pandas()
    cap.loc[cap["cluster"] == 1, "caption"] = "   "
    sch = ws.read("cluster_captions", checkpoint_id="ck0", k=4).schema
    ws.write(
        "cluster_captions",
        pa.Table.from_pandas(cap, schema=sch, preserve_index=False),
        checkpoint_id="ck0",
        k=4,
    )
    d = design(ws, replace(SPECS["describability"], per_participant=2))
    assert {t.unit for t in d.tasks} == {0, 2}
    assert all(t.payload["description"].strip() for t in d.tasks)
    assert any("cluster 1 of checkpoint 'ck0' at k=4 has no 'caption' description" in n for n in d.notes), (
        d.notes
    )


def test_notes_and_errors_name_the_cluster_they_are_about(factory_template):
    ws = Workspace(factory_template)
    d = design(ws, SPECS["coherence"])
    assert d.notes == [
        "1 cluster(s) left out: cluster 3 of checkpoint 'ck0' at k=4 has 1 images; a task needs refs + 1 = 6"
    ]
    with pytest.raises(
        StudyError,
        match=r"^cluster 7 is not a cluster of checkpoint 'ck0' at k=4 \(clusters: 0\.\.3\) \(and 1 more\)$",
    ):
        design(ws, replace(SPECS["coherence"], clusters=(9, 7)))


@pytest.mark.parametrize(
    "changes, words",
    [
        (
            {"kind": "similarity", "dataset": "../x", "checkpoint_id": None, "k": None},
            "dataset: .*may only use letters",
        ),
        ({"min_minutes": -1}, "min_minutes: must be a number in \\[0, 1440\\]"),
        ({"max_minutes": 1441}, "max_minutes: must be a number in \\[0, 1440\\]"),
        ({"max_side_bias": True}, "max_side_bias: must be a number"),
        ({"excluded_code": "a b"}, "excluded_code: must be 1-64 letters"),
        ({"kind": "similarity", "dataset": "toy", "stimuli": 8}, "stimuli: must be at least 9 images"),
        ({"clusters": (0, True)}, "clusters: must be a non-empty list"),
        ({"per_participant": True}, "per_participant: must be an integer"),
        ({"round": 1, "after": 7, "kind": "similarity", "dataset": "toy"}, "after: must be a study id"),
    ],
)  # fmt: skip
def test_every_spec_parameter_is_checked(factory_template, changes, words):
    with pytest.raises(StudyError, match=words):
        design(Workspace(factory_template), replace(SPECS["coherence"], **changes))


def test_a_spec_with_every_option_set_designs(factory_template):
    """Well-formed values of the optional parameters pass the checks (a check that tested the
    wrong way round would refuse them)."""
    spec = replace(
        SPECS["coherence"], clusters=(0, 2), completion_code="C0DE1", excluded_code="OUT1",
        completion_url="https://example.org/done", min_catch_pass=0.5, min_minutes=1, max_minutes=60,
        max_side_bias=0.9,
    )  # fmt: skip
    d = design(Workspace(factory_template), spec)
    assert {t.unit for t in d.tasks} == {0, 2} and d.spec == spec
    assert StudySpec.from_json(spec.to_json()) == spec
    sim = replace(SPECS["similarity"], stimuli=20, round=1, after="sim-1", selection="random")
    ids = _shown_ids(design(Workspace(factory_template), sim))
    assert len(ids) <= 20


def test_a_spec_stored_by_a_newer_version_loads_without_its_unknown_fields():
    """The store keeps each study's spec as JSON: a field this version does not know (written by
    a newer one sharing the store) is left out, the rest loads as it was."""
    import json

    spec = replace(SPECS["coherence"], clusters=(0, 2), min_minutes=3)
    newer = json.dumps({**json.loads(spec.to_json()), "a_future_field": [1, 2], "another": None})
    assert StudySpec.from_json(newer) == spec


@pytest.mark.parametrize("tasks", [10, 14])
def test_an_active_round_has_as_many_trials_as_asked(factory_copy, tasks):
    """Trials are selected three per query: when the trials asked are not a multiple of three,
    the least informative selected ones are dropped, not shown as extra tasks."""
    from tests.test_study_rounds import SPEC as ROUND

    spec = replace(ROUND, selection="active", round=1, after="sim-0", tasks=tasks)
    d = design(Workspace(factory_copy), spec)
    real = [t for t in d.tasks if not t.is_catch]
    assert len(real) == tasks and len({t.task_id for t in real}) == tasks
    assert not any("distinct trials" in n for n in d.notes)


def test_an_active_round_does_not_count_catch_trials_as_asked_queries(factory_copy):
    """The queries already asked (fewer asked: more likely chosen) are those of real trials:
    catch trials added to similarity_trials leave the active design as it was, the same trials
    added as real ones change it."""
    import pyarrow as pa

    from conceptlens import schema
    from tests.test_study_rounds import SPEC as ROUND
    from tests.test_study_rounds import write_embedding

    ws = Workspace(factory_copy)
    write_embedding(ws)
    spec = replace(ROUND, selection="active", round=1, after="sim-0", tasks=12)
    before = [t.payload for t in design(ws, spec).tasks if not t.is_catch]
    ids = sorted(ws.read("images", columns=["image_id"]).to_pandas()["image_id"])

    def add(is_catch: bool):
        rows = [
            {"trial_id": f"x{is_catch}{n}", "agent_id": "a", "query": q,
             "references": ids[:8], "chosen": ids[:2], "n_select": 2, "kind": "8rank2",
             "weight": 1.0, "rt_ms": 1.0, "split": "train",
             "is_catch": is_catch, "round": 0}
            for n, q in enumerate(q for q in ids[: len(ids) // 2] for _ in range(6))
        ]  # fmt: skip
        new = pd.DataFrame(rows)
        sch = schema.arrow_schema("similarity_trials", partition=False)
        ws.append(
            "similarity_trials",
            pa.Table.from_pandas(new[[f.name for f in sch]], schema=sch, preserve_index=False),
            dataset="toy",
        )
        return [t.payload for t in design(ws, spec).tasks if not t.is_catch]

    assert add(is_catch=True) == before
    assert add(is_catch=False) != before


def test_an_mturk_preview_is_no_participant_even_with_a_worker_id():
    """MTurk marks a HIT's preview by its assignmentId, not its workerId."""
    from conceptlens.studies.store import Platform, platform_from

    preview = {"workerId": "W1", "hitId": "H1", "assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"}
    assert platform_from(preview) is None
    accepted = {**preview, "assignmentId": "A1"}
    assert platform_from(accepted) == Platform("mturk", "W1", "H1", "A1")
