"""The dashboard's server entry (`make run`): app.py, served by Streamlit's ASGI app with
`components.serving.CachingMiddleware` in front (gzip of `/static/` once per file,
`immutable` thumbnails, ETags on component files), the projection view's points served as
immutable files (`components.serving.POINTS`; docs/deploy.md) and the hover captions of a
view too large to send them, by the block (`components.serving.CAPTIONS`). At start it
checks the served workspace on a thread (`components.serving.WARMUP`; `/conceptlens/ready`
says when that is done). Arguments after `--` reach app.py as with `streamlit run app.py`:

    .venv/bin/python -m streamlit run serve.py -- --workspace data/demo
"""

from contextlib import asynccontextmanager

import streamlit as st
from starlette.middleware import Middleware

from components.serving import CAPTIONS, POINTS, WARMUP, CachingMiddleware, precompress_static


@asynccontextmanager
async def lifespan(app):
    """The server's one-time work starts with it, on a thread (`components.serving.Warmup`):
    Streamlit's bundles compressed, then the served workspace's check and database
    (`components.data.warm`)."""

    def work() -> str:
        from components.data import warm

        return f"{precompress_static()}; {warm()}"

    WARMUP.start(work)
    yield None


app = st.App(
    "app.py",
    lifespan=lifespan,
    middleware=[Middleware(CachingMiddleware)],
    routes=[POINTS.route(), CAPTIONS.route(), WARMUP.route()],
)
