"""The dashboard's server entry (`make run`): app.py, served by Streamlit's ASGI app with
`components.serving.CachingMiddleware` in front (gzip of `/static/` once per file,
`immutable` thumbnails, ETags on component files) and the projection view's points served
as immutable files (`components.serving.POINTS`; docs/deploy.md). Arguments after `--`
reach app.py as with `streamlit run app.py`:

    .venv/bin/python -m streamlit run serve.py -- --workspace data/demo
"""

import streamlit as st
from starlette.middleware import Middleware

from components.serving import POINTS, CachingMiddleware

app = st.App("app.py", middleware=[Middleware(CachingMiddleware)], routes=[POINTS.route()])
