"""The app's door to a workspace: which one, its validation, and cached views.

app.py opens the workspace once per rerun (`open_workspace`); each page then calls
`open_page(name)`, which checks the tables that page reads (components/nav.py) and
hands back the same object. Caches (components/cache.py) are keyed by what they read: a
view by the fingerprints of the tables it read, the database and the workspace's metadata
by the workspace's fingerprint, so a rebuilt workspace is never served stale and a view of
tables that did not change is not computed again.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import threading
from pathlib import Path

import duckdb
import pandas as pd
import streamlit as st

from components import nav, url_state
from components.cache import cached
from components.frame import ensure_app_frame, enter_frame
from components.text import literal
from conceptlens.cache import ALL, pinned
from conceptlens.db import WorkspaceDB
from conceptlens.remote import RemoteWorkspace, is_url, workspace_at
from conceptlens.validate import Problem, validate, validate_remote
from conceptlens.workspace import Workspace, WorkspaceError, inside

APP_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WORKSPACE = APP_ROOT / "data" / "demo"
# `?ws=NAME` may only name a folder below this root, so a link cannot open arbitrary paths.
WORKSPACES_ROOT = Path(os.environ.get("CONCEPTLENS_WORKSPACES", APP_ROOT / "data"))
_SESSION_KEY = "_conceptlens_workspace"
MAX_PROBLEMS = 20


def _cli_workspace() -> str | None:
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--workspace")
    args, _ = ap.parse_known_args(sys.argv[1:])
    return args.workspace


def _from_link() -> Path | None:
    """The workspace `?ws=` names, if it is one below WORKSPACES_ROOT. Otherwise warn, and
    drop the parameter so the warning is not repeated and the link shows what is shown."""
    raw = st.query_params.get("ws")
    if not raw:
        return None
    try:
        root = inside(WORKSPACES_ROOT, raw)
        if (root / Workspace.META).is_file():
            return root
    # OSError: a name longer than the file system allows; ValueError: a NUL byte.
    except (WorkspaceError, OSError, ValueError):
        pass
    del st.query_params["ws"]
    st.warning(
        f"Workspace {literal(raw, limit=80)} from the link is not a workspace folder below "
        "the served workspaces folder; showing the default workspace.",
        icon=":material/link_off:",
    )
    return None


def served_root() -> Path | str:
    """The workspace the server was started on, whatever a link says: --workspace, else
    $CONCEPTLENS_WORKSPACE, else data/demo; a URL (conceptlens/remote.py) is kept as text."""
    chosen = _cli_workspace() or os.environ.get("CONCEPTLENS_WORKSPACE")
    if is_url(chosen):
        return chosen
    return Path(chosen) if chosen else DEFAULT_WORKSPACE


def workspace_root() -> Path | str:
    """`?ws=` (below CONCEPTLENS_WORKSPACES), else `served_root()`."""
    return _from_link() or served_root()


@cached(resource=True, max_entries=8, reads=())
def _db(root: str, fp: str) -> WorkspaceDB:
    # A database per version of the workspace (`fp`, its fingerprint: the tables present and
    # the images table copied in are those of when it was opened).
    return WorkspaceDB(root)


class _Checks:
    """The workspace check of each table, done once per workspace fingerprint per server
    process and shared by every session: a page checks only the tables no page has checked
    yet. The fingerprint changes with any file of the workspace, so a changed workspace is
    checked again. (Cached per page's table set in each process before, the check of a
    cold load was 23 % of the server's time in issue 25's profile, and every page re-read
    the tables another page had already checked.)"""

    KEEP = 8  # fingerprints remembered (oldest forgotten first)

    def __init__(self):
        self.lock = threading.Lock()
        # (root, fp) -> {table: its problems; "": those of the workspace itself}
        self.done: dict[tuple[str, str], dict[str, list[Problem]]] = {}

    def problems(self, root: str, fp: str, tables: tuple[str, ...]) -> list[Problem]:
        # One check at a time: two sessions opening the same page wait for one check.
        with self.lock:
            done = self.done.pop((root, fp), {})
            self.done[(root, fp)] = done  # most recently used last
            while len(self.done) > self.KEEP:
                del self.done[next(iter(self.done))]
            todo = [t for t in tables if t not in done]
            if todo or "" not in done:
                found = (
                    validate_remote(root, set(todo), _db(root, fp))
                    if is_url(root)
                    else validate(root, deep=False, tables=set(todo))
                )
                for t in todo:
                    done[t] = [p for p in found if p.table == t]
                # What validate reports of no table asked for: workspace.json's problems.
                done.setdefault("", [p for p in found if p.table not in todo])
            return done[""] + [p for t in tables for p in done[t]]


@cached(resource=True, reads=())
def _checks() -> _Checks:
    """The process's one _Checks (st.cache_resource: shared by sessions; cleared with it)."""
    return _Checks()


def _problems(root: str, fp: str, tables: tuple[str, ...]) -> list[Problem]:
    return _checks().problems(root, fp, tables)


@cached(max_entries=1024)
def _view(db, fn, args: dict) -> pd.DataFrame:
    # Keyed by `fn`'s name, `args` and the fingerprints of the tables the view read.
    return fn(db, **args)


# Views marked `large` (a projection's points, a drawn region's images: up to tens of
# thousands of rows, megabytes each) get a cache of few entries, so flipping through
# checkpoints and colours cannot grow the server's memory by gigabytes.
@cached(max_entries=24)
def _large_view(db, fn, args: dict) -> pd.DataFrame:
    return fn(db, **args)


@cached(max_entries=8)
def _meta(db) -> dict:
    # Reads the workspace itself (`db.ws`): keyed by the workspace's fingerprint.
    return db.ws.meta()


class AppWorkspace:
    """The workspace of this session, as pages use it."""

    def __init__(self, root: Path | str):
        self.remote = is_url(root)
        self.root = root if self.remote else Path(root)
        self.fp = workspace_at(self.root).fingerprint()
        self.checked: tuple[str, ...] = ()
        self._problems: list[Problem] = []
        # The fingerprints of the tables this run's views read, each taken once per run
        # (`conceptlens.cache.pinned`): the run reads the workspace as it was when it began,
        # whose own fingerprint is `fp`, taken above.
        self._fingerprints: dict = {}

    @property
    def label(self) -> str:
        if self.remote:
            return self.root
        try:
            return str(self.root.resolve().relative_to(APP_ROOT))
        except (ValueError, OSError):
            return str(self.root)

    def check(self, tables: tuple[str, ...]) -> list[Problem]:
        """Validate `tables` (cached per fingerprint); `problems` then answers for them."""
        self.checked = tuple(sorted(set(tables)))
        self._problems = _problems(str(self.root), self.fp, self.checked)
        return self._problems

    def problems(self, tables) -> list[Problem]:
        """Problems of `tables`, which must have been checked for this page."""
        unchecked = set(tables) - set(self.checked)
        if unchecked:
            raise ValueError(
                f"tables {sorted(unchecked)} are not among the page's tables in components/nav.py"
            )
        return [p for p in self._problems if p.table in set(tables)]

    def blocking(self) -> list[Problem]:
        """Problems that make every table unreadable (workspace.json, its format version)."""
        return _problems(str(self.root), self.fp, ())

    def broken(self) -> tuple[str, ...]:
        return tuple(sorted({p.table for p in self._problems if p.table in self.checked}))

    def _pinned(self):
        db = self.db()
        self._fingerprints.setdefault((str(db.root), ALL), "ws:" + self.fp)
        return db, pinned(self._fingerprints)

    def meta(self) -> dict:
        db, pin = self._pinned()
        with pin:
            return _meta(db)

    def db(self) -> WorkspaceDB:
        return _db(str(self.root), self.fp)

    def has(self, table: str) -> bool:
        return self.db().has(table)

    def view(self, fn, **args) -> pd.DataFrame:
        """`fn(db, **args)`, a function of `conceptlens.views`, cached per fingerprint of the
        tables it reads."""
        cache = _large_view if getattr(fn, "large", False) else _view
        db, pin = self._pinned()
        with pin:
            return cache(db, fn, args)

    def path(self, rel: str) -> Path | str:
        """A file of the workspace (its URL for a remote one; `remote.open_source` opens both)."""
        return RemoteWorkspace(self.root).loc(rel) if self.remote else inside(self.root, rel)

    def validate_command(self) -> str:
        return f"conceptlens validate --workspace {shlex.quote(self.label)}"


def warm() -> str:
    """What a server does once at start, before its first visitor (serve.py runs it on a
    thread): check every page's tables of the served workspace (the check is kept per
    fingerprint for the process, `_Checks`) and open its database. A visitor's first page
    then finds both done: at 1,000,000 images the Clusters page's check alone took 3.2 s of
    its first load. Returns what was done, for the server's log."""
    root = served_root()
    fp = workspace_at(root).fingerprint()
    tables = tuple(dict.fromkeys(t for p in nav.PAGES for t in p.tables))
    problems = _problems(str(root), fp, tables)
    try:
        _db(str(root), fp)
    except duckdb.Error:
        pass  # open_page says what is wrong, in the page
    return f"checked {len(tables)} tables of {root} ({len(problems)} problems)"


def open_workspace() -> AppWorkspace:
    """app.py's one call per rerun: the session's workspace, kept for the page it runs."""
    ws = AppWorkspace(workspace_root())
    st.session_state[_SESSION_KEY] = ws
    enter_frame()
    return ws


def session_workspace() -> AppWorkspace | None:
    """The workspace app.py opened for this run, or None when a component runs on its own
    (an AppTest of one component): what the export control names in a figure's provenance."""
    return st.session_state.get(_SESSION_KEY)


def show_problems(ws: AppWorkspace, problems: list[Problem], what: str) -> None:
    """Problems as plain text (file, table, column, message), never a traceback."""
    lines = "\n".join(f"- {literal(p)}" for p in problems[:MAX_PROBLEMS])
    more = f"\n- … and {len(problems) - MAX_PROBLEMS} more" if len(problems) > MAX_PROBLEMS else ""
    st.error(
        f"**{what}** ({len(problems)} problem{'s' * (len(problems) != 1)}):\n\n{lines}{more}"
        "\n\nThe full list, with every table checked:",
        icon=":material/error:",
    )
    st.code(ws.validate_command(), language="bash")


def open_page(name: str) -> AppWorkspace:
    """What every page does first: run inside the app frame, take this run's workspace,
    check the tables the page reads. Problems of the workspace itself or of the tables
    every page needs stop the page; those of other tables are shown where they are used."""
    ensure_app_frame()
    ws: AppWorkspace = st.session_state[_SESSION_KEY]
    if not ws.remote and not ws.root.is_dir():
        st.error(
            f"Workspace folder {literal(ws.label)} does not exist. Start the dashboard with "
            "`--workspace PATH` or set `CONCEPTLENS_WORKSPACE`."
        )
        url_state.stop()
    problems = ws.check(nav.BY_NAME[name].tables)
    # Validating no table reports only what makes the whole workspace unreadable.
    fatal = ws.blocking() + [p for p in problems if p.table in nav.BASE_TABLES]
    if fatal:
        show_problems(ws, fatal, "This workspace cannot be shown")
        url_state.stop()
    try:
        ws.db()
    except duckdb.Error as e:
        # A file DuckDB cannot open that validation did not flag as this page's: say which.
        st.error(f"**This workspace cannot be read:** {literal(e)}", icon=":material/error:")
        if problems:
            show_problems(ws, problems, "Problems of the tables this page shows")
        else:
            st.code(ws.validate_command(), language="bash")
        url_state.stop()
    return ws
