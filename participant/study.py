"""A study as its participants see it, opened by `?study=ID` (with `&token=` when the study
has one); app.py shows nothing else to such a link, nor to a session that holds a place.

No login: a participant id the server issues (kept in `?p=` and a cookie), so a reload, or the
plain link opened again in the same browser, resumes where the person was; one place per
browser session (`conceptlens.studies.service.enter`). Platform ids (PROLIFIC_PID, workerId,
...) from the link are stored with the place. Images come from the workspace the study was
designed on, never from the link's `ws=`. One task at a time, large images, keyboard
shortcuts, progress, then a thank-you, the completion code and the platform's return link.
The page only gets what `conceptlens.studies.shown` lets it see (images and a description, in
the order the server drew); which image is correct never leaves the server, and each answer is
stored in one transaction before the next task is drawn.
"""

import time
from pathlib import Path

import streamlit as st

from components import data
from components.frame import ensure_app_frame
from components.study import picture, picture_grid, remember_participant
from components.text import literal
from conceptlens.studies import service
from conceptlens.studies.store import PLATFORMS
from conceptlens.views import studies as V

ensure_app_frame()
sid = st.query_params.get("study")
cookie = V.cookie_name(sid or "")
pid = service.participant_id_from(st.query_params.get("p"), st.context.cookies.get(cookie))
# The session's places, on the server: one per study, whatever the link says next.
places = st.session_state.setdefault("_study_places", {})
served = data.served_root()
entry = service.enter(
    sid,
    st.query_params.get("token"),
    pid,
    places,
    {k: st.query_params.get(k) for ids in PLATFORMS.values() for k in ids if k in st.query_params},
    [served] if isinstance(served, Path) else [],
    (data.WORKSPACES_ROOT, st.query_params.get("ws")) if st.query_params.get("ws") else None,
)
if entry.error:
    st.title("Study")
    st.error(literal(entry.error), icon=":material/link_off:")
    st.stop()
pid, cur, kind, root = entry.participant_id, entry.current, entry.kind, entry.root
if st.query_params.get("p") != pid:
    st.query_params["p"] = pid
if st.context.cookies.get(cookie) != pid:
    remember_participant(cookie, pid)

message = st.session_state.pop("_study_message", None)
if message:
    st.info(literal(message), icon=":material/info:")

if cur.task_id is None:
    st.title("Thank you!")
    st.success(
        "You have answered every task of this study. Thank you for your time.", icon=":material/check_circle:"
    )
    st.markdown("Your completion code:")
    st.code(entry.code, language=None)
    if entry.redirect:
        st.link_button("Return to the study platform", entry.redirect, type="primary")
    st.stop()

n = cur.answered  # the position of the task shown: keys carry it, never the task itself
started = f"_study_shown_{sid}_{pid}_{n}"
st.session_state.setdefault(started, time.monotonic())
picked = f"_study_picked_{sid}_{pid}_{n}"


def submit(task_id: str, response=None) -> None:
    """Runs before the next rerun: the answer is stored (and acknowledged) before the next
    task is drawn. `task_id` was bound when this task was drawn, so a late click of an old
    task's button can never answer a newer one (its widget is gone, and with it the call)."""
    rt = (time.monotonic() - st.session_state.get(started, time.monotonic())) * 1000
    if response is None:
        response = list(st.session_state.get(picked, []))
    st.session_state["_study_message"] = service.answer(sid, pid, task_id, response, rt, places)


st.progress(n / cur.total, text=f"Task {n + 1} of {cur.total}")
st.subheader(V.INSTRUCTIONS[kind])
shown = cur.shown
if kind in ("coherence", "describability"):
    if kind == "coherence":
        picture_grid(root, shown.references, per_row=5, side=150)
    else:
        st.markdown(f"#### “{literal(shown.description)}”")
    st.divider()
    left, right = st.columns(2, gap="large")
    for col, side, key, pic in (
        (left, "left", "Left", shown.candidates[0]),
        (right, "right", "Right", shown.candidates[1]),
    ):
        with col:
            picture(root, pic, 320)
            st.button(
                "This one",
                key=f"answer-{n}-{side}",
                on_click=submit,
                args=(cur.task_id, side),
                shortcut=key,
                type="primary",
                width=320,
            )
    st.caption("Keyboard: ← picks the left image, → the right one.")
else:
    chosen = st.session_state.setdefault(picked, [])

    def toggle(i: int) -> None:
        sel = st.session_state[picked]
        if i in sel:
            sel.remove(i)
        elif len(sel) < 2:
            sel.append(i)

    q, refs = st.columns([1, 2], gap="large")
    with q:
        st.markdown("**This image**")
        picture(root, shown.query, 300)
    with refs:
        for row in range(2):
            for i, col in zip(range(4 * row, 4 * row + 4), st.columns(4)):
                with col:
                    picture(root, shown.references[i], 160)
                    mark = {0: " · 1st", 1: " · 2nd"}.get(chosen.index(i)) if i in chosen else ""
                    st.button(
                        f"{i + 1}{mark}",
                        key=f"pick-{n}-{i}",
                        on_click=toggle,
                        args=(i,),
                        shortcut=str(i + 1),
                        type="primary" if i in chosen else "secondary",
                        width=160,
                    )
    b1, b2, _ = st.columns([1, 1, 3])
    b1.button(
        "Submit",
        key=f"submit-{n}",
        on_click=submit,
        args=(cur.task_id,),
        disabled=len(chosen) != 2,
        shortcut="Enter",
        type="primary",
        icon=":material/send:",
    )
    b2.button(
        "Clear", key=f"clear-{n}", on_click=lambda: st.session_state[picked].clear(), shortcut="Backspace"
    )
    st.caption("Keyboard: 1–8 choose or unchoose an image, Enter submits, Backspace clears.")
