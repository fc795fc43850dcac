"""What the page benchmarks share: a page opened in AppTest as a link opens it, one timed
script run, and the bytes a run sends."""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = [0.0]  # seconds spent running the scripts themselves (app.py and the page)


def _timed_scripts() -> None:
    """Time the script execution inside each AppTest run: `wall` also holds AppTest's own
    work (starting its script runner, parsing every element the run sent). Once."""
    import streamlit.runtime.scriptrunner.script_runner as runner

    inner = runner.exec_func_with_error_handling
    if getattr(inner, "timed", False):
        return

    def timed(func, ctx):
        t = time.perf_counter()
        try:
            return inner(func, ctx)
        finally:
            SCRIPT[0] += time.perf_counter() - t

    timed.timed = True
    runner.exec_func_with_error_handling = timed


def open_page(workspace, page_path: str, query: dict, clear: bool = True, timeout: int = 600):
    """An AppTest of app.py on `workspace` at `page_path` with `query` in its URL; `clear`:
    st.cache_data and st.cache_resource emptied first (the next run is cold)."""
    import streamlit as st
    from streamlit import logger
    from streamlit.testing.v1 import AppTest

    # Clearing caches outside a server, and AppTest's bare mode, log warnings: not ours.
    logger.set_log_level("error")
    _timed_scripts()
    sys.argv = ["app.py", "--workspace", str(workspace)]  # reruns read it again
    if clear:
        st.cache_data.clear()
        st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    for k, v in query.items():
        at.query_params[k] = v
    at.switch_page(page_path)
    return at


def run_once(at) -> tuple[float, float, float]:
    """One run: wall seconds, CPU seconds (all threads), seconds in the scripts."""
    t, c = time.perf_counter(), time.process_time()
    SCRIPT[0] = 0.0
    at.run()
    return time.perf_counter() - t, time.process_time() - c, SCRIPT[0]


def _elements(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _elements(child)


def sent(at) -> dict:
    """Bytes of the Plotly JSON this run sent: the UMAP's and every chart's, and of all
    elements' messages together."""
    charts = [c.proto.spec for c in at.get("plotly_chart")]
    umap = [s for s in charts if '"UMAP 1"' in s]
    total = sum(e.proto.ByteSize() for e in _elements(at._tree) if getattr(e, "proto", None) is not None)
    return {
        "umap_bytes": sum(len(s.encode()) for s in umap),
        "charts_bytes": sum(len(s.encode()) for s in charts),
        "elements_bytes": total,
    }
