"""The dashboard's caches: Streamlit's storage under keys derived by `conceptlens.cache`.

`cached` wraps a function as `conceptlens.cache.cached` does (its key is the function,
its arguments, `version` and, for a function of `db`, the fingerprint of every table the
call read), and keeps the values in Streamlit's caches: st.cache_data for values (each
session gets its own copy; `max_entries` bounds them), st.cache_resource for objects
shared by every session (a database, a lock). So "Clear cache" in the app's menu clears
them, and they live as long as the server, as before. Streamlit only sees a digest of
the derived key: nothing here keys on arguments picked by hand (a workspace's folder
where the tables it read are what changes the answer).

How a call is served (`StCached.__call__`):
- the tables a call reads are learned by running it (`Cached.key` gives no key the first
  time): it runs, and its value is stored under the key derived from what it read;
- later calls derive the key before running (a stat of the learned tables' files) and ask
  Streamlit for it; on a miss the function runs inside Streamlit's cache, and if that run
  read other tables than the ones learned, `ReadsChanged` carries its value out to be
  stored under the key it belongs to (Streamlit caches no raised call).

Every function wrapped here is also in `conceptlens.cache.REGISTRY`, so tests/test_cache.py
checks its keys as it checks the library's.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable

import streamlit as st

from conceptlens.cache import Cached, ReadsChanged, digest

# How many calls' learned tables a function without `max_entries` keeps (its values are
# Streamlit's to bound).
LEARNED = 1024


class StCached(Cached):
    """A `Cached` whose values Streamlit keeps (see the module's docstring)."""

    def __init__(
        self, fn: Callable, *, resource: bool, max_entries: int | None, reads, version: str, copy: bool
    ):
        super().__init__(fn, reads=reads, maxsize=max_entries or LEARNED, version=version, copy=copy)
        self.resource = resource

        def store(key: str, _make):
            # `key` is all Streamlit hashes; `_make` (not hashed: its name starts with _)
            # computes the value on a miss.
            return _make()

        # Streamlit names a cache by its function's module, qualified name and source: each
        # wrapped function gets its own (its own max_entries), renamed when its source
        # changes (a server that reloads an edited module does not serve the old values).
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            source = fn.__code__.co_code.hex()
        store.__module__ = fn.__module__
        store.__qualname__ = f"{fn.__qualname__}.<{hashlib.sha1(source.encode()).hexdigest()[:12]}>"
        store.__name__ = fn.__name__
        keep = st.cache_resource if resource else st.cache_data
        self._store = keep(show_spinner=False, max_entries=max_entries)(store)

    def __call__(self, *args, **kwargs):
        key, db, call = self.key(args, kwargs)
        if key is None:  # what it reads is not known yet: run it, keep it under what it read
            value, key = self.compute(args, kwargs, db, call)
            return self._out(self._store(digest(key), lambda: value))
        try:
            return self._out(self._store(digest(key), lambda: self.compute_for(key, args, kwargs, db, call)))
        except ReadsChanged as changed:
            key, value = changed.key, changed.value
        return self._out(self._store(digest(key), lambda: value))

    def _out(self, value):
        # st.cache_data hands each call its own unpickled copy already.
        return value.copy() if self.copy and self.resource else value

    def cache_clear(self) -> None:
        super().cache_clear()
        self._store.clear()


def cached(
    *,
    resource: bool = False,
    max_entries: int | None = None,
    reads=None,
    version: str = "",
    copy: bool = False,
):
    """Decorator: `conceptlens.cache.cached`'s keys, Streamlit's storage. `resource`: one
    object shared by every session (st.cache_resource; `copy` hands out `value.copy()`),
    else a value pickled per session (st.cache_data). `reads` as in conceptlens.cache:
    None for a function of `db` (the tables are learned), () for one that reads nothing but
    its arguments."""

    def wrap(fn):
        return StCached(
            fn, resource=resource, max_entries=max_entries, reads=reads, version=version, copy=copy
        )

    return wrap
