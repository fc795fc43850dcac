"""Pieces of the participant page: the per-browser id cookie and large task images."""

from __future__ import annotations

import streamlit as st

from conceptlens.views import studies as V


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
    # Already a PNG of this width: Streamlit serves the bytes as they are, no re-encoding.
    st.image(V.picture(root, pic, side), width=side, output_format="PNG")


def picture_grid(root, pictures, per_row: int, side: int) -> None:
    for start in range(0, len(pictures), per_row):
        for col, pic in zip(st.columns(per_row), pictures[start : start + per_row]):
            with col:
                picture(root, pic, side)
