"""Pieces of the participant page (the per-browser id cookie, large task images) and of the
owner's (the sign-in), and who is a participant (`participant_study`, app.py's router).

The session's role and the deployment's mode come from conceptlens/permissions.py, from what
the server keeps (the secret this session gave, its places): a page asks `refused` whether to draw
a button, and the library's function checks the same table again when it runs."""

from __future__ import annotations

import streamlit as st

from components.text import literal
from conceptlens import permissions as P
from conceptlens.studies import service
from conceptlens.studies.store import STUDY_ID
from conceptlens.views import studies as V
from conceptlens.workspace import WorkspaceError

PLACES = "_study_places"  # session_state: {study_id: participant_id} of this browser session
OWNER = "_owner_secret"  # session_state: the owner secret given in this session
# `?owner=1`: a browser carrying a study's cookie opens the dashboard, as any visitor, and so
# reaches the sign-in. It grants no role: the owner is whoever gives the secret (`role`).
OWNER_PARAM = "owner"


def participant_study(param: str) -> str | None:
    """The study whose participant page this run shows, or None for the dashboard: the link's
    `?study=`; else a study this session holds a place in (whatever the address says since);
    else, for a visitor who is not the owner, a study whose participant cookie the browser
    carries (`?owner=1` lets the owner reach the sign-in from such a browser)."""
    asked = st.query_params.get(param)
    if asked:
        return asked
    places = st.session_state.get(PLACES) or {}
    if places:
        return next(iter(places))
    if st.query_params.get(OWNER_PARAM) or is_owner():  # the dashboard: no role granted by this
        return None
    cookies = sorted(c for c in st.context.cookies if c.startswith(V.COOKIE_PREFIX))
    for c in cookies:
        sid = c[len(V.COOKIE_PREFIX) :]
        if STUDY_ID.fullmatch(sid):
            return sid
    return None


def bind_address() -> str | None:
    return st.get_option("server.address")


def mode(root=None) -> P.Mode:
    """The deployment's mode (`root`: the workspace an action writes, when it writes one)."""
    return P.mode_from_env(bind_address(), root)


def role() -> P.Role:
    """This session's role, from the server's session state only: the secret it gave at the
    sign-in, the places it holds; never from a link's parameter or a form's value."""
    return P.role_of(st.session_state.get(OWNER), mode(), holds_place=bool(st.session_state.get(PLACES)))


def is_owner() -> bool:
    return role() is P.Role.OWNER


def refused(action: P.Action, root=None) -> str | None:
    """Why this session may not do `action` here (a disabled button's help), or None when it
    may: the page draws by it, and the server function asks the table again when it runs."""
    why = P.refusal(action, role(), mode(root))
    return None if why is None else f"Not allowed here: {why[1]}."


def owner() -> service.Owner:
    """The owner's side of studies for this session (each call checks again)."""
    return service.Owner(st.session_state.get(OWNER), bind_address())


def sign_in() -> bool:
    """True for the owner; else the sign-in (when an owner secret is set) and False."""
    if is_owner():
        return True
    if not mode().has_owner:
        st.info(
            "The owner's side of studies is closed on this server: it listens beyond this machine and "
            f"no owner secret is set. Set {P.OWNER_SECRET} in the deployment's environment or "
            "secrets (docs/deploy.md).",
            icon=":material/lock:",
        )
        return False

    def check() -> None:
        given = st.session_state.get("st_owner_given", "")
        st.session_state[OWNER] = given
        st.session_state["st_owner_failed"] = not is_owner()

    st.info("Studies are the owner's: give the owner secret to see and change them.", icon=":material/lock:")
    with st.form("st_owner_form"):
        st.text_input("Owner secret", type="password", key="st_owner_given")
        st.form_submit_button("Sign in", on_click=check)
    if st.session_state.get("st_owner_failed"):
        st.error("That is not the owner secret.", icon=":material/error:")
    return False


def remember_participant(cookie: str, participant_id: str) -> None:
    """Keep the participant id in a cookie, so the study's plain link resumes in this browser.
    Both values were checked against the store's alphabet (letters, digits, - and _)."""
    st.html(
        f"<script>document.cookie = '{cookie}={participant_id}; path=/; max-age=31536000; "
        "samesite=lax';</script>",
        unsafe_allow_javascript=True,
    )


def picture(root, pic, side: int) -> None:
    """One task image, re-encoded at `side` pixels: no file name, caption or alt text."""
    try:
        png = V.picture(root, pic, side)
    except (OSError, WorkspaceError, ValueError):
        st.error(
            literal("An image of this task cannot be shown: please tell whoever sent you the link."),
            icon=":material/broken_image:",
        )
        st.stop()
    # Already a PNG of this width: Streamlit serves the bytes as they are, no re-encoding.
    st.image(png, width=side, output_format="PNG")


def picture_grid(root, pictures, per_row: int, side: int) -> None:
    for start in range(0, len(pictures), per_row):
        for col, pic in zip(st.columns(per_row), pictures[start : start + per_row]):
            with col:
                picture(root, pic, side)


def count(n: int, singular: str, plural: str | None = None) -> str:
    """'1 person', '3 people', '20 tasks'."""
    return f"{n:,} {singular if n == 1 else plural or singular + 's'}"


def shown_clusters(clusters):
    """A study's per-cluster results as the page's table shows them: missing text as an em dash."""
    out = clusters.drop(columns=["study_id", "checkpoint_id", "k"])
    out["description"] = out["description"].astype(object).where(out["description"].notna(), "—")
    return out
