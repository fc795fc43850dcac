"""The app's door to a workspace: which one, cached queries, and its validation.

Caches are keyed by the workspace's fingerprint, so a rebuilt workspace is
never served stale.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd
import streamlit as st

from conceptlens.db import WorkspaceDB
from conceptlens.validate import Problem, validate
from conceptlens.workspace import Workspace, WorkspaceError, inside

APP_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WORKSPACE = APP_ROOT / "data" / "demo"
# `?ws=NAME` may only name a folder below this root, so a link cannot open arbitrary paths.
WORKSPACES_ROOT = Path(os.environ.get("CONCEPTLENS_WORKSPACES", APP_ROOT / "data"))


def _cli_workspace() -> str | None:
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--workspace")
    args, _ = ap.parse_known_args(sys.argv[1:])
    return args.workspace


def workspace_root() -> Path:
    """`?ws=` (below CONCEPTLENS_WORKSPACES), else --workspace, else $CONCEPTLENS_WORKSPACE, else data/demo."""
    ws = st.query_params.get("ws")
    if ws:
        try:
            return inside(WORKSPACES_ROOT, ws)
        except WorkspaceError:
            st.warning(f"Workspace `{ws}` is not below the served workspaces folder; "
                       "showing the default workspace.")
    chosen = _cli_workspace() or os.environ.get("CONCEPTLENS_WORKSPACE")
    return Path(chosen) if chosen else DEFAULT_WORKSPACE


def fingerprint(root: Path) -> str:
    return Workspace(root).fingerprint()


@st.cache_resource(show_spinner=False, max_entries=8)
def _db(root: str, fp: str) -> WorkspaceDB:
    return WorkspaceDB(root)


@st.cache_data(show_spinner=False, max_entries=16)
def _problems(root: str, fp: str) -> list[Problem]:
    return validate(root, deep=False)


@st.cache_data(show_spinner=False, max_entries=512)
def _query(root: str, fp: str, sql: str, params: tuple) -> pd.DataFrame:
    return _db(root, fp).query(sql, list(params))


@st.cache_data(show_spinner=False, max_entries=8)
def _meta(root: str, fp: str) -> dict:
    return Workspace(root).meta()


class AppWorkspace:
    """The workspace of this session, as pages use it."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.fp = fingerprint(self.root)

    @property
    def label(self) -> str:
        try:
            return str(self.root.resolve().relative_to(APP_ROOT))
        except ValueError:
            return str(self.root)

    def problems(self) -> list[Problem]:
        return _problems(str(self.root), self.fp)

    def meta(self) -> dict:
        return _meta(str(self.root), self.fp)

    def db(self) -> WorkspaceDB:
        return _db(str(self.root), self.fp)

    def has(self, table: str) -> bool:
        return self.db().has(table)

    def query(self, sql: str, *params) -> pd.DataFrame:
        return _query(str(self.root), self.fp, sql, tuple(params))

    def columns(self, table: str) -> list[str]:
        return self.db().columns(table)

    def path(self, rel: str) -> Path:
        return inside(self.root, rel)


def current() -> AppWorkspace:
    return AppWorkspace(workspace_root())


def require_valid(ws: AppWorkspace) -> None:
    """Show a broken workspace's problems as a readable message and stop the page."""
    if not ws.root.is_dir():
        st.error(f"Workspace folder `{ws.label}` does not exist. Start the dashboard with "
                 "`--workspace PATH` or set `CONCEPTLENS_WORKSPACE`.")
        st.stop()
    problems = ws.problems()
    if problems:
        lines = "\n".join(f"- {p}" for p in problems[:50])
        more = f"\n- … and {len(problems) - 50} more" if len(problems) > 50 else ""
        st.error(f"**This workspace has {len(problems)} problem(s)** and cannot be shown. "
                 f"Run `conceptlens validate {ws.label}` for the full list.\n\n{lines}{more}")
        st.stop()


def open_page() -> AppWorkspace:
    """What every page does first: run inside the app frame, open the workspace, check it."""
    from components.frame import ensure_app_frame
    ensure_app_frame()
    ws = current()
    require_valid(ws)
    return ws
