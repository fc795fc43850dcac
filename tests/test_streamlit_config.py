"""The project's .streamlit/config.toml as Streamlit reads it (issue 28, item 7)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_streamlit_watches_no_files():
    """Streamlit's watcher schedules a recursive inotify watch on the app's folder, .venv and
    data/ included: it overflowed the limit. The served dashboard watches nothing."""
    code = (
        "from streamlit import config; config.get_config_options(); "
        "print(config.get_option('server.fileWatcherType'))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "none"
