"""A deployed dashboard installs only requirements.txt: no page may need the pipeline."""

import re
import subprocess
import sys

from components import nav
from tests.conftest import ROOT

PIPELINE_ONLY = (
    "torch",
    "torchvision",
    "open_clip",
    "transformers",
    "timm",
    "sentence_transformers",
    "umap",
    "tqdm",
)


def test_requirements_stay_small():
    reqs = (ROOT / "requirements.txt").read_text().lower()
    names = {
        re.split(r"[<>=\[ ]", line.strip())[0]
        for line in reqs.splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert not names & {
        "torch",
        "torchvision",
        "open_clip_torch",
        "open-clip-torch",
        "transformers",
        "timm",
        "sentence-transformers",
    }, names


def test_every_page_runs_without_pipeline_packages(demo_ws):
    pages = [p.path for p in nav.PAGES]
    script = f"""
import sys

class Blocker:
    # As if these packages were not installed (a None in sys.modules confuses libraries
    # that probe sys.modules for optional packages).
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {PIPELINE_ONLY!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)")
        return None

sys.meta_path.insert(0, Blocker())
sys.argv = ["app.py", "--workspace", {str(demo_ws)!r}]
from streamlit.testing.v1 import AppTest
for page in {pages!r}:
    at = AppTest.from_file("app.py", default_timeout=120)
    at.switch_page(page).run()
    assert not at.exception, (page, [e.message for e in at.exception])
    assert not at.error, (page, [e.value for e in at.error])
print("ok", len({pages!r}))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().startswith("ok")
