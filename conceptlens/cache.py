"""One cache layer: every cached value of the product goes through `cached`, whose key is
derived, never typed by hand.

The key of a call is
- the function (module and qualified name) and its `version`;
- every argument, bound to the signature with defaults applied (`freeze`), except the
  workspace database, which stands for
- the fingerprint of every workspace table the call read: a function with a parameter
  `db` (a `WorkspaceDB`) gets a `ReadLog` in its place, which records each table a query
  names (and each table asked about with `has`/`columns`, or `features`), taking that
  table's fingerprint (`table_fingerprint`: its files' names, sizes, times and inodes)
  when first touched, before it is read. Anything else the function takes from the
  database (its folder, `ws`, its set of tables) counts as a read of the whole workspace
  (`ALL`, the workspace's own fingerprint).

The tables a call read are learned by running it: the first call with some arguments
records them, later calls with those arguments look their fingerprints up and hit when
none changed. When a run reads other tables than the ones learned (a table appeared, a
branch on its content went the other way) the answer is stored under what that run read.
A function that takes no database declares `reads=()`: its arguments are its key (the
registry of analyses, a colour ramp, a file keyed by its size and time).

Every function wrapped is listed in `REGISTRY` (tests/test_cache.py changes each input of
each one and checks the answer follows). The library keeps values in a bounded LRU per
function (`Cached`); components/cache.py keeps them in Streamlit's caches, under the key
derived here (`Cached.key`, `Cached.compute`).

A table's fingerprint is a listing and an os.stat of its files, taken at every call. Inside
`pinned(memo)` each table is looked at once and its fingerprint kept in `memo`: the
dashboard pins one per rerun (a rerun already reads the workspace as it was when it began),
so twenty views of a page do not list the same partitioned table twenty times.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import inspect
import os
import pickle
import re
import threading
from collections import OrderedDict
from collections.abc import Callable

# A read of the whole workspace (its folder, its metadata, every table): keyed by
# `Workspace.fingerprint()`.
ALL = "*"
DB_PARAM = "db"  # the parameter that holds the workspace database

# Every function wrapped, in the order wrapped (a registry, not a cache: it never grows
# after import, one entry per decorated function).
REGISTRY: list[Cached] = []

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLAIN = (str, int, type(None))  # types whose values are keys as they are (see Cached.call)

# (workspace root, table) -> fingerprint, while `pinned` is open (None: look every time).
_PINNED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("cache_pinned", default=None)


@contextlib.contextmanager
def pinned(memo: dict):
    """Inside, each table's fingerprint is taken once and kept in `memo` (see the module's
    docstring): a file changed meanwhile is seen under the next memo, never served under
    its new fingerprint with the old value (the value computed now is keyed by the old one)."""
    token = _PINNED.set(memo)
    try:
        yield memo
    finally:
        _PINNED.reset(token)


class ReadsChanged(Exception):  # noqa: N818  (control flow of the Streamlit storage)
    """A run read other tables (or other versions of them) than its key was derived from:
    its value belongs under `key`, not the key it was asked under."""

    def __init__(self, key, value):
        super().__init__("the tables read changed while deriving the key")
        self.key, self.value = key, value


def table_fingerprint(db, table: str) -> str:
    """The version of one table of `db`'s workspace: its files' names, sizes, modification
    times and inodes (files are replaced by rename), "" when it has none. `ALL`, and any
    table of a remote workspace (whose listings carry no sizes), give the workspace's
    fingerprint."""
    memo = _PINNED.get()
    if memo is None:
        return _table_fingerprint(db, table)
    at = (str(db.root), table)
    if at not in memo:
        memo[at] = _table_fingerprint(db, table)
    return memo[at]


def _table_fingerprint(db, table: str) -> str:
    ws = db.ws
    if table == ALL or getattr(db, "remote", False):
        return "ws:" + ws.fingerprint()
    try:
        files = ws.files(table)
    except Exception:  # noqa: BLE001  a name the format does not know (`has("x")`): no files
        return "unknown"
    h = hashlib.sha1()
    for p in files:
        try:
            st = os.stat(p)
        except OSError:
            continue
        h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino};".encode())
    return h.hexdigest()[:16]


class ReadLog:
    """A `WorkspaceDB` as a cached function sees it: every call goes to the database, and
    every table it reads is recorded in `fingerprints` (table -> its fingerprint when first
    touched). Nested inside another ReadLog, it records into both."""

    def __init__(self, db, parent: ReadLog | None = None):
        if isinstance(db, ReadLog):
            db, parent = db.db, db
        self.db, self.parent = db, parent
        self.fingerprints: dict[str, str] = {}
        self._known = set(getattr(db, "tables", ())) | set(getattr(db, "errors", ()))

    def touch(self, tables) -> None:
        for t in tables:
            if t not in self.fingerprints:
                self.fingerprints[t] = table_fingerprint(self.db, t)
        if self.parent is not None:
            self.parent.touch(tables)

    def touch_sql(self, sql: str) -> None:
        """Touch every table of the workspace whose name appears in `sql` as a word: a
        superset of the tables it reads (a column named like a table only adds a table)."""
        self.touch(sorted(self._known.intersection(_WORD.findall(sql))))

    def query(self, sql: str, params: dict | None = None):
        self.touch_sql(sql)
        return self.db.query(sql, params)

    def query_large(self, sql: str, params: dict | None = None):
        self.touch_sql(sql)
        return self.db.query_large(sql, params)

    def has(self, table: str) -> bool:
        self.touch([table])
        return self.db.has(table)

    def columns(self, table: str) -> list[str]:
        self.touch([table])
        return self.db.columns(table)

    def features_path(self, checkpoint_id: str):
        self.touch(["features"])
        return self.db.features_path(checkpoint_id)

    def features(self, checkpoint_id: str, image_ids=None):
        self.touch(["features"])
        return self.db.features(checkpoint_id, image_ids)

    @property
    def remote(self) -> bool:
        return self.db.remote

    def __getattr__(self, name: str):
        # root, ws, tables, errors, cursor, ...: whatever the function does with them, the
        # whole workspace counts as read.
        self.touch([ALL])
        return getattr(self.db, name)


def freeze(value, what: str = "argument"):
    """`value` as a hashable key part that changes whenever the value does: containers
    element by element, frames and arrays by their bytes, functions by their name, objects
    with `cache_key()` by it, other objects that hash by identity by their pickled state.
    Numbers carry their type: 1, 1.0 and True are equal in Python, not to a function that
    prints them. TypeError (naming `what`) for anything else unhashable."""
    t = type(value)
    if value is None or t is str or t is int:
        return value
    if t is float or t is bool:
        return (t.__name__, repr(value))  # repr: -0.0 and nan are keys like any other
    if t is bytes:
        return ("bytes", value)
    if isinstance(value, (tuple, list)):
        return (t.__name__, tuple(freeze(v, what) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted((freeze(v, what) for v in value), key=repr)))
    if isinstance(value, dict):
        items = ((freeze(k, what), freeze(v, what)) for k, v in value.items())
        return ("dict", tuple(sorted(items, key=repr)))
    if callable(getattr(value, "cache_key", None)):
        return (t.__name__, freeze(value.cache_key(), what))
    if inspect.isfunction(value) or inspect.ismethod(value) or inspect.isbuiltin(value):
        return ("fn", f"{value.__module__}.{value.__qualname__}")
    if isinstance(value, Cached):
        return ("fn", value.name)
    digest = _content_digest(value)
    if digest is not None:
        return (t.__name__, digest)
    if isinstance(value, (str, int, float, bytes)):  # a subclass (an enum of strings, ...)
        return (f"{t.__module__}.{t.__qualname__}", repr(value))
    if isinstance(value, type):
        return ("type", f"{value.__module__}.{value.__qualname__}")
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"{what}: cannot derive a cache key from a {t.__name__}") from None
    if t.__hash__ is object.__hash__:
        # Hashed by identity: two states of one object would share a key. Its pickled state
        # is what it holds (what st.cache_data hashed too).
        try:
            return (f"{t.__module__}.{t.__qualname__}", hashlib.sha1(pickle.dumps(value)).hexdigest())
        except Exception:  # noqa: BLE001  (pickling raises many types)
            raise TypeError(f"{what}: cannot derive a cache key from a {t.__name__}") from None
    return (f"{t.__module__}.{t.__qualname__}", value)


def _content_digest(value) -> str | None:
    """SHA-1 of a frame's or an array's values, labels and types; None for other types."""
    mod = type(value).__module__.split(".")[0]
    if mod == "pandas" and hasattr(value, "dtypes"):  # a DataFrame or a Series
        import pandas as pd

        h = hashlib.sha1(pd.util.hash_pandas_object(value, index=True).to_numpy().tobytes())
        if isinstance(value, pd.DataFrame):
            labels = (list(value.columns), [str(d) for d in value.dtypes])
        else:
            labels = (value.name, str(value.dtype))
        h.update(repr((type(value).__name__, labels, freeze(dict(value.attrs)))).encode())
        return h.hexdigest()
    if mod == "numpy" and hasattr(value, "tobytes") and hasattr(value, "dtype"):
        if value.dtype == object:  # tobytes() of objects is their addresses
            return hashlib.sha1(repr((value.shape, freeze(value.tolist()))).encode()).hexdigest()
        return hashlib.sha1(repr((value.dtype, value.shape)).encode() + value.tobytes()).hexdigest()
    return None


class Cached:
    """A function and the derivation of its keys (see the module's docstring); called, it
    answers from a bounded LRU of `maxsize` values. `calls` counts the times the function
    itself ran (tests check a repeated call does not run it)."""

    def __init__(self, fn: Callable, *, reads, maxsize: int, version: str = "", copy: bool = False):
        if not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError(f"maxsize must be a positive integer, got {maxsize!r}")
        if reads not in (None, ()):
            raise ValueError(f"reads must be None (learned from `db`) or () (nothing), got {reads!r}")
        self.fn, self.maxsize, self.version, self.copy = fn, maxsize, version, copy
        self.name = f"{fn.__module__}.{fn.__qualname__}"
        self.signature = inspect.signature(fn)
        self.takes_db = DB_PARAM in self.signature.parameters
        if reads == () and self.takes_db:
            raise ValueError(f"{self.name} takes `{DB_PARAM}`: its reads are learned, not declared")
        if reads is None and not self.takes_db:
            raise ValueError(f"{self.name} takes no `{DB_PARAM}`: declare reads=() (it reads nothing)")
        self.reads = reads
        self.calls = 0
        self._lock = threading.RLock()
        self._values: OrderedDict = OrderedDict()  # key -> value, most recently used last
        self._learned: OrderedDict = OrderedDict()  # (call, workspace) -> tables its last run read
        functools.update_wrapper(self, fn)
        # A module run again (a test's reload, Streamlit's rerun of a changed file) replaces
        # its functions' entries instead of adding to them: the registry stays one per name.
        REGISTRY[:] = [c for c in REGISTRY if c.name != self.name]
        REGISTRY.append(self)

    # ---- keys ---------------------------------------------------------------------------
    def call(self, args: tuple, kwargs: dict):
        """(the database or None, the frozen call): the function's name and version and
        every argument but `db`. Without a database, arguments that are all strings, ints or
        None are the key as given (a call spelling a default out is another entry with the
        same value); else they are bound to the signature, defaults applied, and frozen."""
        if not self.takes_db and all(type(v) in _PLAIN for v in (*args, *kwargs.values())):
            # Strings, ints and None are their own keys (and no two of them are equal): the
            # key of the hot callers (a caption shortened 60,000 times a rerun) is a tuple.
            return None, (self.name, self.version, args, tuple(kwargs.items()))
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.name}: {e}") from None
        bound.apply_defaults()
        db = bound.arguments.pop(DB_PARAM, None)
        frozen = tuple((k, freeze(v, f"{self.name}({k}=...)")) for k, v in bound.arguments.items())
        return db, (self.name, self.version, frozen)

    def _key(self, call, db, fingerprints: dict):
        if db is None:
            return call
        return (call, _where(db), tuple(sorted(fingerprints.items())))

    def key(self, args: tuple, kwargs: dict):
        """(the key, the database, the frozen call) of a call; the key is None while the
        tables a call with these arguments reads are not known yet."""
        db, call = self.call(args, kwargs)
        if db is None:
            return call, None, call
        with self._lock:
            tables = self._learned.get((call, _where(db)))
        if tables is None:
            return None, db, call
        log = ReadLog(db)
        log.touch(tables)
        return self._key(call, log.db, log.fingerprints), db, call

    def compute(self, args: tuple, kwargs: dict, db, call):
        """Run the function (its `db` replaced by a ReadLog): (its value, the key derived
        from what it read). Learns those tables for later calls."""
        with self._lock:
            self.calls += 1
        if db is None:
            return self.fn(*args, **kwargs), call
        log = ReadLog(db)
        bound = self.signature.bind(*args, **kwargs)
        bound.arguments[DB_PARAM] = log
        value = self.fn(*bound.args, **bound.kwargs)
        # Learned per workspace: another workspace may hold other tables, and a call of one
        # must not make the next call of the other derive its key from the wrong tables.
        learned = (call, _where(log.db))
        with self._lock:
            self._learned[learned] = tuple(sorted(log.fingerprints))
            self._learned.move_to_end(learned)
            while len(self._learned) > 4 * self.maxsize:
                self._learned.popitem(last=False)
        return value, self._key(call, log.db, log.fingerprints)

    def compute_for(self, key, args: tuple, kwargs: dict, db, call):
        """`compute`, raising ReadsChanged when what it read gives another key than `key`."""
        value, got = self.compute(args, kwargs, db, call)
        if got != key:
            raise ReadsChanged(got, value)
        return value

    # ---- the library's storage ----------------------------------------------------------
    def __call__(self, *args, **kwargs):
        key, db, call = self.key(args, kwargs)
        if key is not None:
            with self._lock:
                if key in self._values:
                    self._values.move_to_end(key)
                    return self._out(self._values[key])
        value, key = self.compute(args, kwargs, db, call)
        with self._lock:
            self._values[key] = value
            while len(self._values) > self.maxsize:
                self._values.popitem(last=False)
        return self._out(value)

    def _out(self, value):
        return value.copy() if self.copy else value

    def cache_clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._learned.clear()


def _where(db) -> str:
    """The workspace a database reads (a ReadLog's, through it)."""
    db = db.db if isinstance(db, ReadLog) else db
    return str(getattr(db, "root", ""))


def cached(*, reads=None, maxsize: int = 128, version: str = "", copy: bool = False):
    """Decorator: the library's one cache (see the module's docstring). `reads=None`: the
    function takes `db` and the tables it reads are learned; `reads=()`: it reads nothing
    but its arguments. `copy`: hand out `value.copy()` (a frame a caller may change)."""

    def wrap(fn):
        return Cached(fn, reads=reads, maxsize=maxsize, version=version, copy=copy)

    return wrap


def digest(key) -> str:
    """A key as text (Streamlit hashes its arguments: a short string hashes fastest)."""
    return hashlib.sha1(repr(key).encode()).hexdigest()
