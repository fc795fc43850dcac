"""Analyses a page section needs: shown when present and sound, otherwise a readable
message where the section would be — the command that computes a missing one, the
problems of a broken one — never a traceback."""

from __future__ import annotations

import streamlit as st

from components import url_state
from components.data import show_problems
from conceptlens.analyses import by_name, command_for
from conceptlens.views.home import skipped_units

BY_NAME = by_name()


def available(ws, name: str, dataset: str = "DATASET", tables: tuple[str, ...] | None = None) -> bool:
    """True when the analysis `name` (conceptlens.analyses) is in the workspace and its
    tables (or only `tables` of them, those a section reads) have no problem; otherwise
    say what is wrong here and return False."""
    a = BY_NAME[name]
    needed = a.tables if tables is None else tuple(t for t in a.tables if t in tables)
    problems = ws.problems(needed)
    if problems:
        show_problems(ws, problems, f"{a.title}: its tables have problems")
        return False
    missing = [t for t in needed if not ws.has(t)]
    skips = ws.view(skipped_units, analysis=name) if missing and a.analysis else None
    if skips is not None and len(skips):
        st.warning(
            f"**{a.title}** was skipped ({len(skips)} unit(s)): an input it needs is missing. "
            "The latest reason:",
            icon=":material/error:",
        )
        st.text(skips["reason"].iloc[-1])  # from the workspace's log: shown as text
        st.caption("Once that input is there, the same command computes it:")
        st.code(command(ws, name, dataset), language="bash")
        return False
    if missing:
        st.info(
            f"**{a.title}** not computed yet (missing table "
            + ", ".join(f"`{t}`" for t in missing)
            + "). Compute it with:",
            icon=":material/pending:",
        )
        st.code(command(ws, name, dataset), language="bash")
        return False
    return True


def command(ws, name: str, dataset: str = "DATASET") -> str:
    """The command that computes the analysis `name` in this workspace."""
    return command_for(BY_NAME[name], ws.label, dataset or "DATASET")


def require(ws, names: tuple[str, ...], dataset: str = "DATASET") -> None:
    """Stop the page unless every analysis of `names` is available."""
    for name in names:
        if not available(ws, name, dataset):
            url_state.stop()
