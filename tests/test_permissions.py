"""The permission table (conceptlens/permissions.py, issue 40 item 3): every state-changing or
private action declared once, and the server checking it, never the page.

Three layers, each enumerated from the table rather than listed by hand:

1. the table itself: every action has a rule; for every action x role x mode `require` raises
   exactly when `allowed` says no, naming the action and the reason; and the properties the
   deployment relies on (a read-only deployment changes no study and no workspace, a visitor
   reads nothing private, no owner where no secret is set and the server is not local);
2. the library's server functions (studies.service, selections.save_as): called for real in
   every mode a deployment can be in and by every role a session can have, they refuse exactly
   what the table refuses, and a refusal changes nothing in the store or the workspace;
3. the running app (Streamlit's AppTest): a link's parameters or a forged secret grant no role,
   and an owner's click that the table refuses (a disabled button clicked all the same) ends in
   a plain message, no traceback, nothing changed.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import sys
from types import SimpleNamespace

import pytest
from streamlit.testing.v1 import AppTest

from conceptlens import permissions as P
from conceptlens import selections as SEL
from conceptlens.db import WorkspaceDB
from conceptlens.permissions import MODES, RULES, Action, Changes, Mode, Role
from conceptlens.studies import service
from conceptlens.studies import store as S
from tests.conftest import ROOT
from tests.study_factory import answer_all, create

SECRET = "owner-secret-of-test-permissions"
OWNER_ONLY = frozenset({Role.OWNER})
PRIVATE_READS = [a for a, r in RULES.items() if r.changes is Changes.NOTHING]
# A role the server can give a session in a mode: the owner needs a secret or a local server;
# without a secret, a local server makes everyone the owner.
REALIZABLE = [
    (role, mode)
    for role, mode in itertools.product(Role, MODES)
    if (mode.has_owner if role is Role.OWNER else not (mode.loopback and not mode.secret_set))
]


# ---- 1. the table -----------------------------------------------------------------------------
def test_every_action_has_a_rule_and_every_rule_someone_who_may():
    assert set(RULES) == set(Action)
    for action, rule in RULES.items():
        assert rule.roles, action
        assert any(P.allowed(action, r, m) for r, m in itertools.product(Role, MODES)), action
    assert len(set(MODES)) == 16  # every combination of the mode's four flags


@pytest.mark.parametrize("action", list(Action), ids=lambda a: a.name)
def test_require_raises_exactly_when_allowed_says_no(action):
    for role, mode in itertools.product(Role, MODES):
        ok = P.allowed(action, role, mode)
        if ok:
            P.require(action, role, mode)
            continue
        with pytest.raises(P.PermissionDenied) as e:
            P.require(action, role, mode)
        err = e.value
        assert isinstance(err, P.ConceptLensError) and isinstance(err, PermissionError)
        assert (err.action, err.role, err.mode) == (action, role, mode)
        assert action.value in str(err), str(err)  # names the action...
        reason, why = P.refusal(action, role, mode)
        assert err.reason is reason and why in str(err)  # ...and why


def test_a_read_only_deployment_changes_nothing_but_participants_answers():
    """docs/deploy.md: a read-only deployment changes no study and no workspace, for anyone;
    it still stores participants' answers (outside every workspace)."""
    for action, role, mode in itertools.product(Action, Role, MODES):
        if mode.read_only and P.allowed(action, role, mode):
            assert RULES[action].changes in (Changes.NOTHING, Changes.ANSWERS), (action, role, mode)
    ro = Mode(read_only=True, secret_set=True)
    assert P.allowed(Action.STUDY_ANSWER, Role.PARTICIPANT, ro)
    assert P.allowed(Action.STUDY_READ, Role.OWNER, ro)  # the owner still follows a study


def test_a_remote_workspace_is_never_written():
    for action, role, mode in itertools.product(Action, Role, MODES):
        if mode.remote and RULES[action].changes is Changes.WORKSPACE:
            assert not P.allowed(action, role, mode), (action, role, mode)


def test_a_visitor_reads_nothing_private_and_a_participant_only_their_own_code():
    for action, mode in itertools.product(PRIVATE_READS, MODES):
        assert not P.allowed(action, Role.VISITOR, mode), (action, mode)
    for mode in MODES:
        assert not P.allowed(Action.READ_ANSWERS, Role.PARTICIPANT, mode)
        assert not P.allowed(Action.STUDY_READ, Role.PARTICIPANT, mode)
    # Only the owner changes a study or the workspace.
    for action, rule in RULES.items():
        if rule.changes in (Changes.STUDIES, Changes.WORKSPACE):
            assert rule.roles == OWNER_ONLY, action


def test_no_secret_and_no_local_server_means_no_owner(monkeypatch):
    monkeypatch.setenv(P.OWNER_SECRET, SECRET)
    for mode in MODES:
        if not mode.has_owner:
            for action in Action:  # the table refuses a role that could not have come from role_of
                assert not P.allowed(action, Role.OWNER, mode), (action, mode)
            for given in (None, "", SECRET, "127.0.0.1", "owner", "1"):
                assert P.role_of(given, mode) is not Role.OWNER, (given, mode)


def test_the_owner_is_whoever_gives_the_secret(monkeypatch):
    monkeypatch.setenv(P.OWNER_SECRET, SECRET)
    mode = P.mode_from_env("0.0.0.0")
    assert mode.secret_set and P.role_of(SECRET, mode) is Role.OWNER
    for given in (None, "", SECRET + "x", SECRET[:-1], SECRET.upper(), 1, [SECRET], SECRET * 200):
        assert P.role_of(given, mode) is Role.VISITOR, given
        assert P.role_of(given, mode, holds_place=True) is Role.PARTICIPANT
    # A secret set: a local server no longer makes everyone the owner.
    assert P.role_of(None, P.mode_from_env("127.0.0.1")) is Role.VISITOR
    monkeypatch.delenv(P.OWNER_SECRET)
    for address in ("127.0.0.1", "localhost", "::1", "[::1]"):
        assert P.role_of(None, P.mode_from_env(address)) is Role.OWNER, address
    for address in ("0.0.0.0", "10.1.2.3", "", None, "127.0.0.1.evil"):
        assert P.role_of(SECRET, P.mode_from_env(address)) is Role.VISITOR, address


@pytest.mark.parametrize(
    "env, address, root, want",
    [
        ({}, None, None, Mode()),
        ({"CONCEPTLENS_READ_ONLY": "yes"}, "127.0.0.1", "/w", Mode(read_only=True, loopback=True)),
        ({"CONCEPTLENS_READ_ONLY": "0", P.OWNER_SECRET: "s"}, "0.0.0.0", None, Mode(secret_set=True)),
        ({P.OWNER_SECRET: "   "}, "[::1]", "https://h/ws", Mode(loopback=True, remote=True)),
    ],
)
def test_the_mode_comes_from_the_environment(monkeypatch, env, address, root, want):
    for var in ("CONCEPTLENS_READ_ONLY", P.OWNER_SECRET):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert P.mode_from_env(address, root) == want


# ---- 2. the library's server functions ----------------------------------------------------------
def deploy(monkeypatch, mode: Mode) -> str:
    """Set the environment to `mode`; the address the server listens on."""
    monkeypatch.setenv("CONCEPTLENS_READ_ONLY", "1" if mode.read_only else "0")
    if mode.secret_set:
        monkeypatch.setenv(P.OWNER_SECRET, SECRET)
    else:
        monkeypatch.delenv(P.OWNER_SECRET, raising=False)
    return "127.0.0.1" if mode.loopback else "0.0.0.0"


def snapshot(root, store) -> tuple:
    """Every file of the workspace (size and digest) and the store's studies, places, answers."""
    files = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            with open(p, "rb") as f:
                files[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
    return files, store.studies().drop(columns=["created"]).to_csv()


@pytest.fixture
def world(monkeypatch, tmp_path, factory_copy):
    """A writable workspace and a store holding: `open1` (with one finished participant),
    `closed1`, an answered similarity study `sim0`, `ans1` (places for many sessions) and the
    closed `done1` with one finished participant. The similarity analysis is replaced by a
    stand-in (the next round's analysis is test_study_rounds')."""
    from conceptlens.analysis import runner

    monkeypatch.setattr(runner, "run", lambda *a, **kw: SimpleNamespace(notes=[]))
    monkeypatch.delenv("CONCEPTLENS_ANSWERS_URL", raising=False)
    monkeypatch.setenv("CONCEPTLENS_STATE_DIR", str(tmp_path / "state"))
    S.close_stores()
    store = S.open_store()
    create(store, factory_copy, study_id="open1")
    answer_all(store, "open1", store.join("open1").participant_id)
    create(store, factory_copy, study_id="closed1")
    store.set_status("closed1", "closed")
    create(store, factory_copy, "similarity", study_id="sim0", tasks=12)
    answer_all(store, "sim0", store.join("sim0").participant_id)
    create(store, factory_copy, study_id="ans1", per_participant=3, catch=1)
    create(store, factory_copy, study_id="done1")
    done = store.join("done1").participant_id
    answer_all(store, "done1", done)
    store.set_status("done1", "closed")
    images = SEL.ids_where(WorkspaceDB(factory_copy), "toy", "label", "1")
    yield SimpleNamespace(root=factory_copy, store=store, done=done, images=images)
    S.close_stores()


def act(action: Action, w, given, address, places: dict, root, place: str):
    """Do `action` through its server function as a session that gave `given` and holds
    `places`; `place` is a place of `ans1` the store issued (the session's, or someone else's).
    Raises PermissionDenied when refused (the participant's functions answer in words: turned
    into PermissionDenied here)."""
    own = service.Owner(given, address)
    if action is Action.STUDY_READ:
        return own.studies()
    if action is Action.READ_ANSWERS:
        return own.answers_csv(root, "open1", None)
    if action is Action.STUDY_CREATE:
        from tests.study_factory import SPECS

        return own.create(root, SPECS["coherence"], None)
    if action is Action.STUDY_CLOSE:
        return own.set_status("open1", "closed")
    if action is Action.STUDY_REOPEN:
        return own.set_status("closed1", "open")
    if action is Action.STUDY_EXPORT:
        return own.export(root, "open1", None)
    if action is Action.STUDY_NEXT_ROUND:
        return own.next_round(root, "sim0", 6, None, False)
    if action is Action.SELECTION_SAVE:
        return SEL.save_as(given, address, root, name="g", dataset="toy", image_ids=w.images, origin="o")
    refused = None
    if action is Action.STUDY_JOIN:
        refused = service.enter("ans1", None, places.get("ans1"), places, {}, [w.root]).error
    if action is Action.STUDY_ANSWER:
        task = w.store.current("ans1", place).task_id
        refused = service.answer("ans1", place, task, "left", 900.0, places)
    if action is Action.READ_OWN_CODE:  # a closed study: only a place it holds opens it
        entry = service.enter("done1", None, places.get("done1"), places, {}, [w.root])
        refused = None if entry.code else entry.error
    if action not in (Action.STUDY_JOIN, Action.STUDY_ANSWER, Action.READ_OWN_CODE):
        raise AssertionError(f"{action}: no server function in this test: add one")
    if refused:
        raise P.PermissionDenied(action, Role.VISITOR, Mode(), P.Reason.ROLE, refused)


def session_for(role: Role, mode: Mode, w, place: str) -> tuple:
    """(the secret the session gave, its places) for a session of `role`."""
    given = (SECRET if mode.secret_set else None) if role is Role.OWNER else "not-" + SECRET
    places = {"ans1": place, "done1": w.done} if role is Role.PARTICIPANT else {}
    return given, places


@pytest.mark.parametrize("action", list(Action), ids=lambda a: a.name)
def test_the_server_functions_refuse_what_the_table_refuses(monkeypatch, world, action):
    w = world
    for role, mode in REALIZABLE:
        address = deploy(monkeypatch, mode)
        place = w.store.join("ans1").participant_id
        given, places = session_for(role, mode, w, place)
        if RULES[action].roles == OWNER_ONLY:  # the owner's side sees participants as visitors
            server_role = Role.OWNER if role is Role.OWNER else Role.VISITOR
            assert P.role_of(given, P.mode_from_env(address)) is server_role
        root = "https://example.org/ws" if mode.remote else w.root
        want = P.allowed(action, role, mode)
        before = snapshot(w.root, w.store)
        try:
            act(action, w, given, address, places, root, place)
        except P.PermissionDenied as e:
            assert not want, (action, role, mode, str(e))
            assert snapshot(w.root, w.store) == before, (action, role, mode)  # nothing changed
        except P.ConceptLensError as e:
            # Past the table, a URL's workspace is not a local one: any other refusal is fine.
            assert want and mode.remote, (action, role, mode, str(e))
        else:
            assert want, (action, role, mode)


# ---- 3. the running app --------------------------------------------------------------------------
@pytest.fixture
def app_env(monkeypatch, tmp_path):
    monkeypatch.delenv("CONCEPTLENS_ANSWERS_URL", raising=False)
    monkeypatch.setenv("CONCEPTLENS_STATE_DIR", str(tmp_path / "state"))
    S.close_stores()
    yield S.open_store()
    S.close_stores()


def open_app(monkeypatch, root, mode: Mode, page=None, query=None, given=None, places=None) -> AppTest:
    """The app on `root` in `mode` (its address set as a server would be started); the session
    gave `given` as the owner secret and holds `places`."""
    from components import study

    address = deploy(monkeypatch, mode)
    monkeypatch.setattr(study, "bind_address", lambda: address)
    monkeypatch.setattr(sys, "argv", ["app.py", "--workspace", str(root)])
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    if given is not None:
        at.session_state["_owner_secret"] = given
    if places:
        at.session_state["_study_places"] = places
    for k, v in (query or {}).items():
        at.query_params[k] = v
    if page:
        at.switch_page(page)
    return at.run()


def clean(at) -> AppTest:
    assert not at.exception, [e.message for e in at.exception]
    return at


def text_of(at) -> str:
    """What the page says, as read (markdown's escapes removed)."""
    said = " ".join(e.value for kind in ("error", "info", "caption", "success") for e in getattr(at, kind))
    return re.sub(r"\\(.)", r"\1", said)


def protos(node) -> list[bytes]:
    """Every element the run drew, serialized: what the browser receives."""
    out = [node.proto.SerializeToString()] if getattr(node, "proto", None) is not None else []
    for child in getattr(node, "children", {}).values():
        out += protos(child)
    return out


# What a link or a form might carry to pass for the owner: the secret itself included (a secret in
# a link would be in every log on the way).
FORGED = {"owner": "1", "role": "owner", "_owner_secret": SECRET, "st_owner_given": SECRET, "admin": "1"}


@pytest.mark.parametrize("mode", [m for m in MODES if not m.remote], ids=repr)
def test_a_link_or_a_forged_secret_grants_no_role(monkeypatch, app_env, factory_template, mode):
    """The Studies page in every mode, for each role a session can have there, opened with a
    link that claims the owner: it shows the studies exactly when the table lets the session's
    real role read them; the sign-in refuses a wrong secret."""
    store = app_env
    create(store, factory_template, study_id="mine1")
    create(store, factory_template, study_id="other1")
    answer_all(store, "other1", store.join("other1").participant_id)
    code = store.participants("other1")["completion_code"].iloc[0]  # someone else's code
    for role, m in REALIZABLE:
        if m != mode:
            continue
        given = (SECRET if mode.secret_set else None) if role is Role.OWNER else None
        places = {"mine1": store.join("mine1").participant_id} if role is Role.PARTICIPANT else None
        at = clean(open_app(monkeypatch, factory_template, mode, "pages/studies.py", FORGED, given, places))
        sent = b"".join(protos(at.main))
        sees = P.allowed(Action.STUDY_READ, role, mode)
        listed = [o for s in at.selectbox if s.key == "st_sid" for o in s.options]
        assert ("other1" in listed) is sees, (role, mode)
        if not sees:
            assert b"other1" not in sent and code.encode() not in sent, (role, mode)
            assert not [b for b in at.button if b.key and b.key.startswith("st_") and "owner" not in b.key]
        if role is Role.PARTICIPANT:  # their own page, whatever the link says
            assert not at.get("metric") and at.get("progress"), (role, mode)
        if role is Role.VISITOR and mode.secret_set:  # a wrong secret typed in the sign-in
            at.text_input(key="st_owner_given").input("not-" + SECRET)
            next(b for b in at.button if b.label == "Sign in").click().run()
            assert "That is not the owner secret" in text_of(clean(at))
            assert not [s for s in at.selectbox if s.key == "st_sid"]


# The owner's buttons, one per action that changes something on the owner's side. A new such
# action in the table fails this test until it says where its button is.
BUTTONS = {
    Action.STUDY_CREATE: ("pages/studies.py", {}, "st_create"),
    Action.STUDY_CLOSE: ("pages/studies.py", {"sid": "open1"}, "st_close"),
    Action.STUDY_REOPEN: ("pages/studies.py", {"sid": "closed1"}, "st_open"),
    Action.STUDY_EXPORT: ("pages/studies.py", {"sid": "open1"}, "st_export"),
    Action.STUDY_NEXT_ROUND: ("pages/studies.py", {"sid": "sim0"}, "st_next"),
    Action.SELECTION_SAVE: (
        "pages/clusters.py",
        {"ssrc": "label", "slabel": "1", "nnull": "20", "score": "1"},
        "Save selection",
    ),
}


def test_every_owner_change_has_a_button_here():
    assert set(BUTTONS) == {a for a, r in RULES.items() if r.changes in (Changes.STUDIES, Changes.WORKSPACE)}


@pytest.mark.parametrize(
    "action, mode",
    [
        (a, m)
        for a in BUTTONS
        for m in MODES
        if m.has_owner and not m.remote and not P.allowed(a, Role.OWNER, m)
    ],
    ids=lambda x: x.name if isinstance(x, Action) else repr(x),
)
def test_a_refused_click_is_a_plain_message_and_changes_nothing(monkeypatch, world, action, mode):
    """The owner's page drawn where the table allows the action, then the deployment switched
    to a mode where it refuses it (a restart into read-only mode, between the page and the
    click): the click reaches the server, which asks the table; the page says why, plainly, and
    neither the store nor the workspace changes. Drawn in that mode from the start, the button
    is disabled with the same reason."""
    w = world
    page, query, button = BUTTONS[action]
    given = SECRET if mode.secret_set else None
    permissive = Mode(secret_set=mode.secret_set, loopback=mode.loopback)
    assert P.allowed(action, Role.OWNER, permissive)
    at = clean(open_app(monkeypatch, w.root, permissive, page, query, given))
    if action is Action.SELECTION_SAVE:
        at.text_input(key="selp_name").input("greens")
    before = snapshot(w.root, w.store)
    deploy(monkeypatch, mode)
    found = [b for b in at.button if button in (b.key, b.label)]
    assert len(found) == 1, (button, [b.key for b in at.button])
    found[0].click().run()
    clean(at)
    assert snapshot(w.root, w.store) == before
    reason = P.refusal(action, Role.OWNER, mode)[1]
    assert f"not allowed to {action.value}" in text_of(at) and reason in text_of(at), text_of(at)
    assert "Traceback" not in text_of(at)
    # Drawn in the refusing mode: disabled, the reason as its help (the selection's form: not drawn).
    again = clean(open_app(monkeypatch, w.root, mode, page, query, given))
    drawn = [b for b in again.button if button in (b.key, b.label)]
    if action is Action.SELECTION_SAVE:
        assert not drawn and "selections are saved with" in text_of(again)
    else:
        assert drawn[0].disabled and reason in drawn[0].help


def test_participants_still_answer_on_a_read_only_deployment(monkeypatch, app_env, factory_template):
    store = app_env
    create(store, factory_template, study_id="ro1")
    mode = Mode(read_only=True, secret_set=True)
    assert P.allowed(Action.STUDY_ANSWER, Role.PARTICIPANT, mode)
    at = clean(open_app(monkeypatch, factory_template, mode, query={"study": "ro1", **FORGED}))
    at.button(key="answer-0-left").click().run()
    clean(at)
    assert len(store.answers("ro1")) == 1
