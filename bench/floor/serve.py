"""bench/floor/page.py served as serve.py serves app.py (the same middleware and points route)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import streamlit as st  # noqa: E402
from starlette.middleware import Middleware  # noqa: E402

from components.serving import POINTS, CachingMiddleware  # noqa: E402

app = st.App(
    str(Path(__file__).with_name("page.py")),
    middleware=[Middleware(CachingMiddleware)],
    routes=[POINTS.route()],
)
