"""Studies in a real browser (headless Chromium): a participant answers with the keyboard,
reloads and resumes, opens the plain link again in the same browser and resumes (cookie),
finishes and gets the completion code; nothing in the page's HTML or websocket messages tells
the correct answer. The owner's page shows the study and its results."""

from __future__ import annotations

import re

import pytest

from conceptlens.studies.store import SqliteStore
from harness.browser import main_text, open_page, screenshot, serve, wait_for_script
from tests.study_factory import answer_all, create

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from harness.factory import make_workspace

    root = tmp_path_factory.mktemp("studies") / "ws"
    make_workspace(root, derived=True)
    state = tmp_path_factory.mktemp("state")
    store = SqliteStore(state / "answers.sqlite")
    with serve(root, env={"CONCEPTLENS_STATE_DIR": str(state)}) as url:
        yield url, store, root
    store.close()


def task_number(page) -> int:
    m = re.search(r"Task (\d+) of (\d+)", main_text(page))
    return int(m.group(1)) if m else 0


def press(page, key: str, expect: int | None = None) -> None:
    page.keyboard.press(key)
    if expect is not None:
        page.get_by_text(f"Task {expect} of").wait_for(timeout=60_000)
    wait_for_script(page)


def test_participant_answers_with_the_keyboard_resumes_and_finishes(browser, served):
    url, store, _ = served
    sid, _, d = create(store, served[2], study_id="kb")
    context = browser.new_context(viewport={"width": 1300, "height": 1100})
    page = context.new_page()
    sent = []
    page.on(
        "websocket",
        lambda ws: ws.on("framereceived", lambda f: sent.append(f if isinstance(f, bytes) else f.encode())),
    )
    page.goto(f"{url}/?study={sid}")
    page.get_by_text("Task 1 of 10").wait_for(timeout=120_000)
    wait_for_script(page)
    assert page.get_by_test_id("stSidebarNav").count() == 0  # no owner's navigation
    screenshot(page, "study-participant-coherence")
    pid = re.search(r"[?&]p=([A-Za-z0-9_-]+)", page.url).group(1)
    assert {c["name"]: c["value"] for c in context.cookies()}[f"conceptlens_p_{sid}"] == pid
    for n, key in enumerate(["ArrowLeft", "ArrowRight", "ArrowLeft"], start=2):
        press(page, key, expect=n)
    assert list(store.answers(sid)["response"]) == ["left", "right", "left"]

    page.reload()  # a reload resumes at the task shown
    page.get_by_text("Task 4 of 10").wait_for(timeout=60_000)
    wait_for_script(page)
    again = context.new_page()  # the plain link again, in the same browser: the cookie
    again.goto(f"{url}/?study={sid}")
    again.get_by_text("Task 4 of 10").wait_for(timeout=60_000)
    wait_for_script(again)
    assert f"p={pid}" in again.url
    again.close()
    assert len(store.participants(sid)) == 1

    # What the browser received for the task on screen tells nothing of its answer.
    cur = store.current(sid, pid)
    task = next(t for t in d.tasks if t.task_id == cur.task_id)
    p = task.payload
    secrets = [task.task_id, p["positive"], p["negative"], d.images[p["positive"]], d.images[p["negative"]]]
    html = page.content()
    for s in [*secrets, "positive", "negative", "correct"]:
        assert s not in html, s
        assert not any(s.encode() in f for f in sent), s

    for n in range(5, 12):
        press(page, "ArrowRight", expect=n if n <= 10 else None)
    page.get_by_text("Thank you!").wait_for(timeout=60_000)
    wait_for_script(page)
    screenshot(page, "study-participant-thank-you")
    code = page.get_by_test_id("stCode").inner_text().strip()
    assert code == store.current(sid, pid).completion_code
    assert len(store.answers(sid)) == 10
    context.close()


def test_similarity_trial_with_the_keyboard(browser, served):
    url, store, root = served
    sid, _, _ = create(store, root, "similarity", study_id="sim")
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    page.goto(f"{url}/?study={sid}")
    page.get_by_text("Task 1 of 6").wait_for(timeout=120_000)
    wait_for_script(page)
    for key in ("4", "7", "4", "2", "8"):  # 4, 7; 4 again takes it back; 2; an 8th is one too many
        press(page, key)
    assert "7 · 1st" in main_text(page) and "2 · 2nd" in main_text(page)
    screenshot(page, "study-participant-similarity")
    press(page, "Enter", expect=2)
    assert store.answers(sid)["response"].iloc[0] == [6, 1]  # 0-based positions, in choice order
    context.close()


def test_owner_page_shows_the_study_and_its_results(browser, served):
    url, store, root = served
    sid, _, d = create(store, root, study_id="owner")
    for i in range(4):
        answer_all(store, sid, store.join(sid).participant_id, seed=i)
    page = open_page(browser, f"{url}/studies?sid={sid}", "study-owner")
    text = main_text(page)
    for words in ("New study", "Studies in the answers store", "Results", "Participants", "40 of 226"):
        assert words in text, words
    assert page.get_by_test_id("stPlotlyChart").count() == 1
    assert f"/?study={sid}" in text
    page.close()


def test_owner_starts_the_next_round_of_a_similarity_study(browser, served):
    url, store, root = served
    sid, _, d = create(store, root, "similarity", study_id="round0", tasks=12)
    for i in range(d.n_sessions):
        answer_all(store, sid, store.join(sid).participant_id, seed=i)
    page = open_page(browser, f"{url}/studies?sid={sid}&ntasks=9", "study-next-round")
    text = main_text(page)
    assert "Next round" in text and "This is round 0 (random trials)" in text
    assert "conceptlens study next-round round0" in text and "--tasks 9" in text
    page.get_by_role("button", name="Start the next round").click()
    # Export, a fit of the embedding (analyze similarity's defaults) and the active design.
    page.get_by_text("Round 1 started after study round0").wait_for(timeout=300_000)
    wait_for_script(page)
    text = main_text(page)
    new = [s for s in store.studies()["study_id"] if store.study(s).spec.after == "round0"]
    assert len(new) == 1 and f"/?study={new[0]}" in text
    assert "This is round 1 (active trials, after study round0)" in text
    screenshot(page, "study-next-round")
    page.close()
