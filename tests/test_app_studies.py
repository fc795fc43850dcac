"""AppTest of the Studies page (design, progress, results, export) and of the participant page
(`?study=ID`): answering to the end, resuming, refusals, and nothing that tells the correct
answer in what the page sends."""

from __future__ import annotations

import re
import sys

import pytest
from streamlit.testing.v1 import AppTest

from conceptlens.studies import store as S
from conceptlens.validate import validate
from conceptlens.workspace import Workspace
from tests.conftest import ROOT
from tests.study_factory import answer_all, create


@pytest.fixture
def store(monkeypatch, tmp_path):
    monkeypatch.setenv("CONCEPTLENS_STATE_DIR", str(tmp_path / "state"))
    s = S.open_store()
    yield s
    S.close_stores()


OWNER_SECRET = "the-owner-secret-of-the-tests"


def app(monkeypatch, workspace, page=None, query=None, owner=True) -> AppTest:
    """The app on `workspace`, an owner secret set; `owner`: this session gave it."""
    monkeypatch.setattr(sys, "argv", ["app.py", "--workspace", str(workspace)])
    monkeypatch.setenv("CONCEPTLENS_OWNER_SECRET", OWNER_SECRET)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    if owner:
        at.session_state["_owner_secret"] = OWNER_SECRET
    for k, v in (query or {}).items():
        at.query_params[k] = v
    if page:
        at.switch_page(page)
    return at.run()


def clean(at):
    assert not at.exception, [e.message for e in at.exception]
    return at


def plain(elements) -> str:
    return " ".join(re.sub(r"\\(.)", r"\1", e.value) for e in elements)


def protos(node):
    """Every element the run drew, serialized: what the browser receives."""
    out = []
    if getattr(node, "proto", None) is not None:
        out.append(node.proto.SerializeToString())
    for child in getattr(node, "children", {}).values():
        out += protos(child)
    return out


# ---- the owner's page -------------------------------------------------------------------------
def test_design_a_study_from_the_page(monkeypatch, store, factory_copy):
    at = clean(app(monkeypatch, factory_copy, "pages/studies.py", {"refs": "5", "per": "10", "seed": "7"}))
    assert at.title[0].value == "Studies" and "Answers store: SQLite" in plain(at.caption)
    cli = at.code[0].value
    for flag in (
        "--kind coherence",
        "--checkpoint ck0",
        "--k 4",
        "--refs 5",
        "--per-participant 10",
        "--seed 7",
    ):
        assert flag in cli
    assert at.info and "holds no study yet" in plain(at.info)
    at.button(key="st_create").click().run()
    clean(at)
    assert not at.error, [e.value for e in at.error]
    assert "created: 60 tasks (+46 catch tasks) in 23 sessions, 226 answers planned" in plain(at.success)
    sid = store.studies()["study_id"].iloc[0]
    assert at.code[0].value.endswith(f"/?study={sid}")  # the participant link
    assert "cluster 3" in plain(at.caption)  # the note on the cluster left out
    spec = store.study(sid).spec
    assert (spec.refs, spec.per_participant, spec.seed, spec.clusters) == (5, 10, 7, None)
    assert at.selectbox(key="st_sid").value == sid


def test_design_errors_are_shown_not_raised(monkeypatch, store, factory_copy):
    q = {"kind": "describability", "per": "10"}
    at = clean(app(monkeypatch, factory_copy, "pages/studies.py", q))
    at.button(key="st_create").click().run()
    (err,) = at.error
    assert "per_participant: a person answers at most one describability task per cluster" in plain([err])
    assert store.studies().empty


def test_results_export_and_closing(monkeypatch, store, factory_copy):
    sid, _, d = create(store, factory_copy)

    def side(session: int, right: bool):
        def respond(cur):
            slot = next(s for s in d.slots if s.task_id == cur.task_id and s.session == session)
            return (
                slot.layout["positive_side"]
                if right
                else {"left": "right", "right": "left"}[slot.layout["positive_side"]]
            )

        return respond

    people = [store.join(sid).participant_id for _ in range(4)]
    for i, p in enumerate(people):  # participant 0 always misses, the others never do
        answer_all(store, sid, p, respond=side(i, i > 0))
    at = clean(app(monkeypatch, factory_copy, "pages/studies.py", {"sid": sid, "excl": "0.5"}))
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["participants"] == "4 of 23" and metrics["answers"] == "40 of 226"
    assert metrics["people left out"] == "1" and metrics["answers counted"] == "24"
    assert len(at.get("plotly_chart")) == 1
    clusters = next(t.value for t in at.dataframe if "n_correct" in t.value.columns)
    assert clusters["n"].sum() == 24 and (clusters["accuracy"] == 1).all()
    assert {"lo", "hi", "proxy", "proxy_lo", "proxy_hi", "purity"} <= set(clusters.columns)
    people_table = next(t.value for t in at.dataframe if "catch_failure_rate" in t.value.columns)
    people_table = people_table.set_index("participant_id")
    assert (
        people_table.loc[people[0], "excluded"] and people_table.loc[people[0], "catch_failure_rate"] == 1.0
    )
    at.button(key="st_export").click().run()
    clean(at)
    assert "40 new answer(s) appended to study_answers" in plain(at.success)
    ws = Workspace(factory_copy)
    assert len(ws.read("study_answers", study_id=sid)) == 40 and validate(factory_copy) == []
    assert ws.read("study_summary", study_id=sid).to_pandas()["excluded"].iloc[0] == 1
    at.button(key="st_close").click().run()
    assert store.status(sid) == "closed" and {m.label: m.value for m in at.metric}["status"] == "closed"


def test_a_bad_answers_store_is_an_error_not_a_traceback(monkeypatch, factory_copy):
    monkeypatch.setenv("CONCEPTLENS_ANSWERS_URL", "mysql://owner:secret@db/answers")
    try:
        at = clean(app(monkeypatch, factory_copy, "pages/studies.py"))
        text = plain(at.error)
        assert "The answers store cannot be opened" in text and "must start with postgresql://" in text
        assert "secret" not in text
    finally:
        S.close_stores()


# ---- the participant's page -------------------------------------------------------------------
def task_number(at) -> int | None:
    bars = at.get("progress")
    m = re.search(r"Task (\d+) of", bars[0].proto.text) if bars else None
    return int(m.group(1)) if m else None


def test_participant_answers_to_the_end_and_gets_a_code(monkeypatch, store, factory_copy):
    sid, _, d = create(store, factory_copy)
    at = clean(app(monkeypatch, factory_copy, query={"study": sid}))
    assert not at.sidebar.caption  # none of the owner's frame (no workspace, no navigation)
    pid = at.query_params["p"]
    pid = pid[0] if isinstance(pid, list) else pid
    assert S.PARTICIPANT_ID.fullmatch(pid)
    for n in range(1, 11):
        assert task_number(at) == n
        assert {b.key for b in at.button} == {f"answer-{n - 1}-left", f"answer-{n - 1}-right"}
        assert len(at.get("image")) == 5 + 2  # references and the two candidates
        at.button(key=f"answer-{n - 1}-{'left' if n % 2 else 'right'}").click().run()
        clean(at)
    assert at.title[0].value == "Thank you!"
    code = at.code[0].value
    assert store.current(sid, pid).completion_code == code
    a = store.answers(sid)
    assert len(a) == 10 and list(a["response"]) == ["left", "right"] * 5 and a["rt_ms"].notna().all()
    # A reload (the link with its `p`): the thank-you again, nothing re-answered.
    again = clean(app(monkeypatch, factory_copy, query={"study": sid, "p": pid}))
    assert again.title[0].value == "Thank you!" and again.code[0].value == code


def test_participant_resumes_where_they_were(monkeypatch, store, factory_copy):
    sid, _, _ = create(store, factory_copy, "similarity")
    at = clean(app(monkeypatch, factory_copy, query={"study": sid}))
    pid = at.query_params["p"]
    pid = pid[0] if isinstance(pid, list) else pid
    at.button(key="pick-0-6").click().run()
    at.button(key="pick-0-2").click().run()
    assert at.button(key="pick-0-6").label.endswith("1st") and at.button(key="pick-0-2").label.endswith("2nd")
    assert not at.button(key="submit-0").disabled
    at.button(key="submit-0").click().run()
    assert task_number(clean(at)) == 2
    assert store.answers(sid)["response"].iloc[0] == [6, 2]
    resumed = clean(app(monkeypatch, factory_copy, query={"study": sid, "p": pid}))
    assert task_number(resumed) == 2 and len(store.participants(sid)) == 1
    assert resumed.button(key="submit-1").disabled  # nothing chosen yet


@pytest.mark.parametrize(
    "query, words",
    [
        ({"study": "nope"}, "there is no such study here"),
        ({"study": "x" * 5000}, "This link is not valid: study id"),
        ({"study": "**bold** <b>x</b>"}, "This link is not valid"),
        ({"study": "tok"}, "needs the access token"),
        ({"study": "tok", "token": "wrong-token"}, "needs the access token"),
    ],
)
def test_participant_refusals_are_plain_and_say_nothing_of_the_store(
    monkeypatch, store, factory_copy, query, words
):
    create(store, factory_copy, study_id="tok", token="right-token")
    at = clean(app(monkeypatch, factory_copy, query=query))
    text = plain(at.error)
    assert words in text and str(store.path) not in text and "SQLite" not in text
    assert not at.button and not at.get("image")


def test_closed_and_full_studies(monkeypatch, store, factory_copy):
    sid, _, d = create(store, factory_copy, study_id="small", answers=1, per_participant=20)
    first = clean(app(monkeypatch, factory_copy, query={"study": sid}))
    for _ in range(d.n_sessions - 1):
        store.join(sid)
    assert "Every place in this study is taken" in plain(
        clean(app(monkeypatch, factory_copy, query={"study": sid})).error
    )
    store.set_status(sid, "closed")
    first.button(key="answer-0-left").click().run()  # closed while they were answering
    assert "This study has closed" in plain(first.error) and store.answers(sid).empty
    assert not first.button
    # The next visit says so at once, not the next task.
    pid = first.query_params["p"]
    pid = pid[0] if isinstance(pid, list) else pid
    resumed = clean(app(monkeypatch, factory_copy, query={"study": sid, "p": pid}))
    assert "This study has closed" in plain(resumed.error) and not resumed.button


def test_nothing_in_the_page_tells_the_correct_answer(monkeypatch, store, factory_copy):
    sid, _, d = create(store, factory_copy)
    at = clean(app(monkeypatch, factory_copy, query={"study": sid}))
    pid = at.query_params["p"]
    pid = pid[0] if isinstance(pid, list) else pid
    for _ in range(4):
        task = next(t for t in d.tasks if t.task_id == store.current(sid, pid).task_id)
        sent = b"".join(protos(at.main))
        p = task.payload
        secrets = [
            task.task_id,
            p["positive"],
            p["negative"],
            d.images[p["positive"]],
            d.images[p["negative"]],
        ]
        secrets += [*p["references"], "positive", "negative", "correct", "catch", f"cluster {task.unit}"]
        for s in secrets:
            assert s.encode() not in sent, s
        keys = [b.key for b in at.button]
        assert keys == [
            f"answer-{store.current(sid, pid).answered}-left",
            f"answer-{store.current(sid, pid).answered}-right",
        ]
        at.button(key=keys[0]).click().run()


def test_describability_shows_the_description_and_blank_catch_images(monkeypatch, store, factory_copy):
    sid, _, d = create(store, factory_copy, "describability")
    at = clean(app(monkeypatch, factory_copy, query={"study": sid}))
    pid = at.query_params["p"]
    pid = pid[0] if isinstance(pid, list) else pid
    blank_seen = False
    for n in range(3):
        task = next(t for t in d.tasks if t.task_id == store.current(sid, pid).task_id)
        assert f"“{task.payload['description']}”" in plain(at.markdown)
        assert len(at.get("image")) == 2  # no references: the description replaces them
        if task.is_catch:  # an image of the cluster against a blank one
            urls = [im.proto.imgs[0].url for im in at.get("image")]
            assert len(set(urls)) == 2
            blank_seen = True
        at.button(key=f"answer-{n}-left").click().run()
        clean(at)
    assert blank_seen and at.title[0].value == "Thank you!"


def test_owner_page_for_a_similarity_study(monkeypatch, store, factory_copy):
    at = clean(app(monkeypatch, factory_copy, "pages/studies.py", {"kind": "similarity", "tasks": "30"}))
    assert "--kind similarity" in at.code[0].value and "--dataset toy" in at.code[0].value
    at.button(key="st_create").click().run()
    clean(at)
    sid = store.studies()["study_id"].iloc[0]
    assert (
        store.study(sid).spec.dataset == "toy"
        and store.study(sid).n_tasks == 30 + 2 * store.study(sid).n_sessions
    )
    assert not at.get("plotly_chart")  # no per-cluster figure for similarity
    assert {m.label for m in at.metric} >= {"answers counted", "Krippendorff's alpha"}


def test_an_unreachable_store_asks_the_participant_to_come_back(monkeypatch, factory_copy, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "answers.sqlite").write_bytes(b"not a database" * 100)  # a broken store
    monkeypatch.setenv("CONCEPTLENS_STATE_DIR", str(state))
    try:
        at = clean(app(monkeypatch, factory_copy, query={"study": "any"}))
        text = plain(at.error)
        assert "cannot be reached right now" in text and str(state) not in text
        owner = clean(app(monkeypatch, factory_copy, "pages/studies.py"))
        assert "cannot be" in plain(owner.error) and str(state) in plain(
            owner.error
        )  # the owner is told where
    finally:
        S.close_stores()


def test_a_malformed_participant_id_in_the_link_gets_a_new_one(monkeypatch, store, factory_copy):
    sid, _, _ = create(store, factory_copy)
    at = clean(app(monkeypatch, factory_copy, query={"study": sid, "p": "<script>x</script>"}))
    pid = at.query_params["p"]
    pid = pid[0] if isinstance(pid, list) else pid
    assert S.PARTICIPANT_ID.fullmatch(pid) and list(store.participants(sid)["participant_id"]) == [pid]
    assert task_number(at) == 1


# ---- a similarity study's next round ----------------------------------------------------------
def test_next_round_from_the_page(monkeypatch, store, factory_copy):
    sid, _, d = create(store, factory_copy, "similarity", study_id="round0", tasks=12)
    for i in range(d.n_sessions):
        answer_all(store, sid, store.join(sid).participant_id, seed=i)
    at = clean(app(monkeypatch, factory_copy, "pages/studies.py", {"sid": sid, "ntasks": "9"}))
    assert "This is round 0 (random trials)" in plain(at.caption)
    assert "conceptlens study next-round round0" in at.code[-1].value and "--tasks 9" in at.code[-1].value
    at.button(key="st_next").click().run()
    clean(at)
    new = [s for s in store.studies()["study_id"] if s != sid]
    assert len(new) == 1
    spec = store.study(new[0]).spec
    assert (spec.round, spec.after, spec.selection, spec.tasks) == (1, sid, "active", 9)
    # The page now shows the new round, with its link and what was exported.
    assert "This is round 1 (active trials, after study round0)" in plain(at.caption)
    assert f"Round 1 started after study round0 ({len(d.slots)} trial(s) exported" in plain(at.success)
    assert any(f"/?study={new[0]}" in c.value for c in at.code)
    trials = Workspace(factory_copy).read("similarity_trials", dataset="toy").to_pandas()
    assert (trials.loc[trials["trial_id"].str.startswith("round0."), "round"] == 0).all()


def test_next_round_failure_is_shown_not_raised(monkeypatch, store, factory_copy):
    from conceptlens.analysis import runner
    from conceptlens.workspace import WorkspaceError

    def broken(*args, **kwargs):
        raise WorkspaceError("similarity_trials/dataset=toy: cannot fit <b>here</b>")

    monkeypatch.setattr(runner, "run", broken)
    sid, _, _ = create(store, factory_copy, "similarity", study_id="round0", tasks=12)
    at = clean(app(monkeypatch, factory_copy, "pages/studies.py", {"sid": sid}))
    at.button(key="st_next").click().run()
    clean(at)
    assert "The next round could not be started" in plain(at.error) and "cannot fit" in plain(at.error)
    assert list(store.studies()["study_id"]) == [sid]


def test_create_an_active_similarity_study_from_the_page(monkeypatch, store, factory_copy):
    query = {"kind": "similarity", "sel": "active", "tasks": "12"}
    at = clean(app(monkeypatch, factory_copy, "pages/studies.py", query))
    assert "--selection active" in at.code[0].value
    at.button(key="st_create").click().run()
    clean(at)
    spec = store.study(store.studies()["study_id"].iloc[0]).spec
    assert (spec.selection, spec.round, spec.tasks) == ("active", 0, 12)
    assert "active selection (round 0): 9 trials by information gain" in plain(at.caption)


# ---- crowd-sourcing and planning ----------------------------------------------------------------
def test_prolific_ids_are_stored_once_and_the_platform_gets_its_codes(monkeypatch, store, factory_copy):
    done = "https://app.prolific.com/submissions/complete?cc=C0DE1"
    sid, _, d = create(
        store, factory_copy, completion_url=done, completion_code="C0DE1", excluded_code="OUT1",
        min_catch_pass=1.0, min_minutes=30, once_per_workspace=True,
    )  # fmt: skip
    other, _, _ = create(store, factory_copy, once_per_workspace=True)
    link = {"study": sid, "PROLIFIC_PID": "5f0c0ffee0000000000000aa", "STUDY_ID": "st1", "SESSION_ID": "se1"}
    at = clean(app(monkeypatch, factory_copy, query=link))
    pid = at.query_params["p"]
    pid = pid[0] if isinstance(pid, list) else pid
    # The same Prolific id from another browser (no p, no cookie): the same place, not a second.
    again = clean(app(monkeypatch, factory_copy, query=link))
    assert again.query_params["p"] in (pid, [pid]) and len(store.participants(sid)) == 1
    row = store.participants(sid).iloc[0]
    assert (row["platform"], row["platform_pid"], row["platform_study"], row["platform_session"]) == (
        "prolific", "5f0c0ffee0000000000000aa", "st1", "se1",
    )  # fmt: skip
    # Fast and right on every catch task: one failed check (time), not excluded: the completion code.
    import random

    from conceptlens.studies.plan import simulated_response

    for n in range(10):  # an observer who is always right (catch tasks included)
        side = simulated_response(store, sid, pid, {c: 1.0 for c in range(4)}, random.Random(0))
        at.button(key=f"answer-{n}-{side}").click().run()
    assert at.title[0].value == "Thank you!" and at.code[0].value == "C0DE1"
    assert [b.proto.url for b in at.get("link_button")] == [done]
    assert set(store.answers(sid)["platform_pid"]) == {"5f0c0ffee0000000000000aa"}
    # The same person, another study of the same workspace: refused.
    refused = clean(app(monkeypatch, factory_copy, query=link | {"study": other}))
    assert "already taken part" in plain(refused.error) and store.participants(other).empty


def test_a_finisher_excluded_by_two_failed_checks_gets_the_excluded_code(monkeypatch, store, factory_copy):
    sid, _, d = create(store, factory_copy, completion_code="C0DE1", excluded_code="OUT1", min_minutes=30,
                       max_side_bias=0.8, completion_url="https://example.org/done")  # fmt: skip
    at = clean(app(monkeypatch, factory_copy, query={"study": sid}))
    for n in range(10):  # left every time, in seconds: two failed checks
        at.button(key=f"answer-{n}-left").click().run()
    assert at.title[0].value == "Thank you!" and at.code[0].value == "OUT1" and not at.get("link_button")
    s = store.study(sid)
    from conceptlens.studies.results import results

    summary = results(store, sid).summary
    assert summary["excluded"] == 1 and summary["excluded_by"] == {"min_minutes": 1, "max_side_bias": 1}
    assert s.spec.excluded_code == "OUT1"


def test_the_plan_is_shown_before_create(monkeypatch, store, factory_copy):
    from conceptlens.db import WorkspaceDB
    from conceptlens.studies import plan as P
    from conceptlens.views.studies import cluster_options

    at = clean(
        app(monkeypatch, factory_copy, "pages/studies.py", {"refs": "5", "width": "20", "tasks": "20"})
    )
    opts = cluster_options(WorkspaceDB(factory_copy), "ck0", 4)
    want = P.plan(
        P.observers(opts, "proxy", "coherence_random"), tasks=20, width=0.2, per_participant=20, catch=2
    )
    a = want.attrs["people_per_task"]
    assert a and f"{a} {'person' if a == 1 else 'people'} per task" in plain(at.markdown)


def test_exported_studies_a_single_person_and_missing_descriptions(
    monkeypatch, store, factory_copy, tmp_path
):
    """Issue 28 item 7: the page lists the studies exported into the workspace when the store
    holds none ("No study yet" before), says "1 person", and shows a missing description as —."""
    from conceptlens.studies.results import export

    sid, _, _ = create(store, factory_copy, answers=1)
    answer_all(store, sid, store.join(sid).participant_id)
    export(store, sid, Workspace(factory_copy))
    at = clean(app(monkeypatch, factory_copy, "pages/studies.py", {"sid": sid}))
    assert "1 person per task" in plain(at.caption) and "1 people" not in plain(at.caption)
    table = next(t for t in at.dataframe if "description" in t.value.columns)
    assert set(table.value["description"]) == {"—"}
    S.close_stores()
    monkeypatch.setenv("CONCEPTLENS_STATE_DIR", str(tmp_path / "empty-state"))
    empty = clean(app(monkeypatch, factory_copy, "pages/studies.py"))
    assert "holds 1 exported study" in plain(empty.caption) and "No study yet" not in plain(empty.info)
    assert any(
        sid in " ".join(map(str, t.value["study_id"])) for t in empty.dataframe if "study_id" in t.value
    )
