"""conceptlens/studies/service.py: who is the owner, what a participant reads and writes, and where
each answer goes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conceptlens import permissions as P
from conceptlens.studies import service as V
from conceptlens.studies import store as S
from conceptlens.studies.design import StudyError, design
from conceptlens.workspace import Workspace
from tests import helpers_studies
from tests.study_factory import SPECS, answer_all, create

# Fixtures shared with other test modules, named here so that pytest finds them for this one.
env = helpers_studies.env


# ---- who may read or write what, and where each value goes -------------------------------------
SECRET = "owner-secret-of-the-dataflow-tests"


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
    default_store = S.open_store()
    sid, _, d = create(default_store, factory_copy, "similarity", study_id="round0")
    p = default_store.join(sid).participant_id
    n = len(answer_all(default_store, sid, p))
    out = V.Owner(None, "127.0.0.1").next_round(factory_copy, sid, 12, None, False)
    nxt = default_store.study(out["study_id"])
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
    default_store = S.open_store()
    sid, _, _ = create(default_store, mine, answers=1)
    study = default_store.study(sid)
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
    default_store = S.open_store()
    sid, _, d = create(default_store, factory_template, answers=1)
    places: dict = {}
    e = V.enter(sid, None, None, places, {}, [factory_template])
    assert e.error is None and places == {sid: e.participant_id} and e.kind == "coherence"
    first = next(s for s in d.slots if s.session == 0 and s.position == 0)
    assert e.current.participant_id == e.participant_id and e.current.task_id == first.task_id
    assert e.root == factory_template
    # An answer of another place is refused, one of this session's stored under its id.
    other = default_store.join(sid).participant_id
    said = V.answer(sid, other, first.task_id, "left", 500.0, places)
    assert said and "not stored" in said and default_store.answers(sid).empty
    assert V.answer(sid, e.participant_id, first.task_id, "left", 500.0, places) is None
    a = default_store.answers(sid)
    assert list(zip(a["participant_id"], a["task_id"], a["response"])) == [
        (e.participant_id, first.task_id, "left")
    ]
    # The same browser asking for another place keeps its own.
    again = V.enter(sid, None, other, places, {}, [factory_template])
    assert again.error and "already holds a place" in again.error and places[sid] == e.participant_id
    resumed = V.enter(sid, None, None, places, {}, [factory_template])
    assert resumed.participant_id == e.participant_id and resumed.current.answered == 1


def test_a_finisher_gets_the_code_of_their_own_checks(env, factory_template):
    default_store = S.open_store()
    sid, _, d = create(
        default_store, factory_template, answers=1, completion_code="DONE1", excluded_code="OUT1",
        completion_url="https://example.org/done", min_minutes=30, max_side_bias=0.8,
    )  # fmt: skip
    left, mixed = {}, {}
    for places, pick in ((left, lambda n: "left"), (mixed, lambda n: ("left", "right")[n % 2])):
        e = V.enter(sid, None, None, places, {}, [factory_template])
        for n in range(e.current.total):
            cur = default_store.current(sid, e.participant_id)
            assert V.answer(sid, e.participant_id, cur.task_id, pick(n), 300.0, places) is None
    out = V.enter(sid, None, None, left, {}, [factory_template])  # fast and one-sided: two checks
    assert (out.error, out.code, out.redirect, out.excluded) == (None, "OUT1", None, True)
    ok = V.enter(sid, None, None, mixed, {}, [factory_template])  # fast only: one check
    assert (ok.error, ok.code, ok.redirect, ok.excluded) == (None, "DONE1", "https://example.org/done", False)
    assert ok.participant_id == mixed[sid] and ok.current.answered == ok.current.total
