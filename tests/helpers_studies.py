"""Fixtures for the studies tests (a test module names them: `env = helpers_studies.env`): the default
answers store under tmp_path, no owner secret, a writable deployment."""

from __future__ import annotations

import pytest

from conceptlens import permissions as P
from conceptlens.studies import store as S


@pytest.fixture
def env(monkeypatch, tmp_path):
    """The default store under tmp_path, no owner secret, a writable deployment."""
    for var in ("CONCEPTLENS_ANSWERS_URL", P.OWNER_SECRET, "CONCEPTLENS_READ_ONLY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CONCEPTLENS_STATE_DIR", str(tmp_path / "state"))
    S.close_stores()
    yield tmp_path
    S.close_stores()


@pytest.fixture
def default_store(env):
    return S.open_store()
