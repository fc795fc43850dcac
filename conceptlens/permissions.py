"""Who may do what: the one table of the dashboard's state-changing and private actions (issue 40).

Every action that changes something (a study, the workspace, the answers store) or shows what is
private (a study's answers, the completion codes) is declared once in `RULES`: the roles that may
do it and what it changes. The deployment's `Mode` then refuses some changes to everyone: a
read-only deployment changes no study and no workspace, a workspace read over HTTP is never
written. The library's functions call `require` before they act, whatever the page drew; a page
only asks `allowed` to decide whether to draw a button.

Who is who is decided on the server, never from a link or a form:

- the **owner**: with `CONCEPTLENS_OWNER_SECRET` set, the session that gave that secret (kept in
  the server's session state, compared in constant time); without it, every session when the
  server listens on a loopback address only (a local `make run`), else nobody;
- a **participant** of a study: the session that holds a place in it (the store issued the id,
  the server's session state keeps it);
- a **visitor**: anyone else.

Participants' answers are the one change a read-only deployment still takes: they go to the
answers store, outside every workspace (`CONCEPTLENS_STATE_DIR` or `CONCEPTLENS_ANSWERS_URL`,
docs/deploy.md), and taking them is what a deployed study is for.
"""

from __future__ import annotations

import enum
import hmac
import itertools
import os
from dataclasses import dataclass

from .errors import ConceptLensError
from .remote import is_url
from .workspace import READ_ONLY_ENV, read_only

OWNER_SECRET = "CONCEPTLENS_OWNER_SECRET"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
# A secret longer than this is not compared: nobody types one, and it bounds the work a forged
# value can ask of the server.
MAX_SECRET = 1024


class Role(enum.Enum):
    OWNER = "owner"
    PARTICIPANT = "participant"
    VISITOR = "visitor"


class Changes(enum.Enum):
    """What an action changes; the deployment's mode refuses some of these to everyone."""

    NOTHING = "nothing"  # a read (of something private: the rule's roles say whose)
    ANSWERS = "answers"  # a participant's place and answers, in the answers store
    STUDIES = "studies"  # a study itself (design, status), in the answers store
    WORKSPACE = "workspace"  # a table of the workspace


class Action(enum.Enum):
    """Each value is the action in words, as a refusal names it."""

    STUDY_READ = "see the studies of the answers store"
    READ_ANSWERS = "read a study's answers, participants and completion codes"
    STUDY_CREATE = "create a study"
    STUDY_CLOSE = "close a study"
    STUDY_REOPEN = "reopen a study"
    STUDY_EXPORT = "export a study into the workspace"
    STUDY_NEXT_ROUND = "start a study's next round (an analysis, then a new study)"
    SELECTION_SAVE = "save a selection into the workspace"
    STUDY_JOIN = "take a place in a study"
    STUDY_ANSWER = "answer a study's task"
    READ_OWN_CODE = "read one's own completion code"


@dataclass(frozen=True)
class Rule:
    roles: frozenset[Role]
    changes: Changes


_OWNER = frozenset({Role.OWNER})
# ---- THE table: every action, once ---------------------------------------------------------------
RULES: dict[Action, Rule] = {
    Action.STUDY_READ: Rule(_OWNER, Changes.NOTHING),
    Action.READ_ANSWERS: Rule(_OWNER, Changes.NOTHING),
    Action.STUDY_CREATE: Rule(_OWNER, Changes.STUDIES),
    Action.STUDY_CLOSE: Rule(_OWNER, Changes.STUDIES),
    Action.STUDY_REOPEN: Rule(_OWNER, Changes.STUDIES),
    Action.STUDY_EXPORT: Rule(_OWNER, Changes.WORKSPACE),
    # Exports the answers into the workspace, infers an embedding there, then creates a study.
    Action.STUDY_NEXT_ROUND: Rule(_OWNER, Changes.WORKSPACE),
    Action.SELECTION_SAVE: Rule(_OWNER, Changes.WORKSPACE),
    # Whoever opens a study link takes a place (the owner too, trying their own link); the
    # store's token and limits decide the rest.
    Action.STUDY_JOIN: Rule(frozenset(Role), Changes.ANSWERS),
    Action.STUDY_ANSWER: Rule(frozenset({Role.PARTICIPANT}), Changes.ANSWERS),
    Action.READ_OWN_CODE: Rule(frozenset({Role.PARTICIPANT}), Changes.NOTHING),
}


@dataclass(frozen=True)
class Mode:
    """The deployment, as far as permissions go."""

    read_only: bool = False  # CONCEPTLENS_READ_ONLY
    secret_set: bool = False  # CONCEPTLENS_OWNER_SECRET
    loopback: bool = False  # the server listens on a loopback address only
    remote: bool = False  # the workspace is read from a URL

    @property
    def has_owner(self) -> bool:
        """Whether any session can be the owner here."""
        return self.secret_set or self.loopback


# Every mode there is: what tests/test_permissions.py enumerates.
MODES = tuple(Mode(*flags) for flags in itertools.product((False, True), repeat=4))


class Reason(enum.Enum):
    READ_ONLY = "read_only"
    REMOTE = "remote"
    NO_OWNER = "no_owner"
    ROLE = "role"


class PermissionDenied(ConceptLensError, PermissionError):
    """An action the table refuses to this role in this mode; the message names the action and
    why (`reason` says it for a page that words it its own way)."""

    def __init__(self, action: Action, role: Role, mode: Mode, reason: Reason, why: str):
        super().__init__(f"not allowed to {action.value}: {why}")
        self.action, self.role, self.mode, self.reason = action, role, mode, reason


# ---- the mode and the role, each decided in one place -------------------------------------------
def owner_secret() -> str | None:
    value = os.environ.get(OWNER_SECRET, "").strip()
    return value or None


def mode_from_env(address: str | None = None, root=None) -> Mode:
    """The mode of this deployment: the environment (or the host's secrets, which Streamlit
    Community Cloud exports as environment variables), the address the server listens on (the
    page reads Streamlit's `server.address`) and, when an action concerns one, the workspace's
    root (a URL: read over HTTP)."""
    return Mode(
        read_only=read_only(),
        secret_set=owner_secret() is not None,
        loopback=(address or "").strip().strip("[]") in LOOPBACK,
        remote=is_url(root),
    )


def role_of(given_secret, mode: Mode, holds_place: bool = False) -> Role:
    """The role of a session from what the server keeps of it: the secret it gave (None when it
    gave none) and whether it holds a place in the study at hand."""
    secret = owner_secret()
    if mode.secret_set and secret is not None:
        if isinstance(given_secret, str) and len(given_secret) <= MAX_SECRET:
            if hmac.compare_digest(given_secret.encode(), secret.encode()):
                return Role.OWNER
    elif mode.loopback:  # no secret, a local server: whoever reaches it is on this machine
        return Role.OWNER
    return Role.PARTICIPANT if holds_place else Role.VISITOR


# ---- the decision ---------------------------------------------------------------------------------
def refusal(action: Action, role: Role, mode: Mode) -> tuple[Reason, str] | None:
    """Why `role` may not do `action` in `mode`, or None when it may. A reason of the mode
    comes first: signing in does not help on a read-only deployment, so that is what to say."""
    rule = RULES[action]
    if mode.read_only and rule.changes in (Changes.STUDIES, Changes.WORKSPACE):
        return Reason.READ_ONLY, (
            f"this deployment is read-only ({READ_ONLY_ENV}=1): it changes no study and no workspace; "
            "create, close and export studies, and save selections, from the command line"
        )
    if mode.remote and rule.changes is Changes.WORKSPACE:
        return Reason.REMOTE, "this workspace is read from a URL: nothing is written to it"
    if role not in rule.roles:
        if rule.roles == _OWNER and not mode.has_owner:
            return Reason.NO_OWNER, (
                "the owner's pages are closed on this server: it listens beyond this machine and no "
                f"{OWNER_SECRET} is set (docs/deploy.md)"
            )
        if rule.roles == _OWNER:
            return Reason.ROLE, "only the owner may: give the owner secret first (the Studies page's sign-in)"
        return Reason.ROLE, f"only a {' or '.join(sorted(r.value for r in rule.roles))} may"
    if role is Role.OWNER and not mode.has_owner:
        # Nobody is the owner here: a role that says otherwise did not come from `role_of`.
        return Reason.NO_OWNER, f"nobody is the owner on this server: no {OWNER_SECRET} is set"
    return None


def allowed(action: Action, role: Role, mode: Mode) -> bool:
    return refusal(action, role, mode) is None


def require(action: Action, role: Role, mode: Mode) -> None:
    """Raise PermissionDenied unless `role` may do `action` in `mode`."""
    why = refusal(action, role, mode)
    if why is not None:
        raise PermissionDenied(action, role, mode, *why)
