"""components/url_state.py: `NOWHERE` reads a choice from the link without drawing its
widget; a link's warning survives a page run that stopped before the page was whole
(`stop(carry=True)`, the Clusters page's view-first run) and shows on the run that completes
it, once; without `carry` it is gone on the next run, as before."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _script():
    import streamlit as st

    from components import url_state as U

    U.url_selectbox("Pick", ["a", "b"], key="pick", param="p")
    st.session_state["runs"] = st.session_state.get("runs", 0) + 1
    if st.session_state["runs"] == 1:
        U.stop(carry=st.session_state.get("carry", False))
    U.flush()


def _warnings(at) -> list[str]:
    return [w.value for w in at.warning]


def _run(carry: bool) -> list[list[str]]:
    at = AppTest.from_function(_script)
    at.session_state["carry"] = carry
    at.query_params["p"] = "zzz"
    seen = []
    for _ in range(3):
        at.run()
        assert not at.exception
        seen.append(_warnings(at))
    assert at.selectbox(key="pick").value == "a"
    return seen


def test_a_carried_warning_shows_on_the_run_that_completes_the_page():
    first, second, third = _run(carry=True)
    assert len(first) == 1 and "zzz" in first[0] and "a" in first[0]
    assert second == first  # the page's completing run says it again
    assert third == []  # and only that run


def test_without_carry_the_warning_is_shown_once():
    first, second, third = _run(carry=False)
    assert len(first) == 1 and "zzz" in first[0]
    assert second == [] and third == []


def _nowhere_script():
    import streamlit as st

    from components import url_state as U

    where = U.NOWHERE if st.session_state.get("hidden", True) else None
    st.session_state["got"] = (
        U.url_selectbox("Pick", ["a", "b", "c"], key="pick", param="p", container=where),
        U.url_slider("Range", 0.0, 1.0, "rng", "r", default=(0.0, 1.0), step=0.05, container=where),
    )
    U.flush()


def test_nowhere_reads_the_link_without_drawing_the_widget():
    at = AppTest.from_function(_nowhere_script)
    at.query_params["p"] = "b"
    at.query_params["r"] = "0.2,0.6"
    at.run()
    assert not at.exception
    assert at.session_state["got"] == ("b", (0.2, 0.6))
    assert len(at.selectbox) == 0 and len(at.slider) == 0
    # The next run draws the widgets, which show the same values (the link's).
    at.session_state["hidden"] = False
    at.run()
    assert at.selectbox(key="pick").value == "b"
    assert tuple(at.slider(key="rng").value) == (0.2, 0.6)
