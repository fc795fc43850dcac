"""A deployed dashboard installs only requirements.txt: no page may need the pipeline."""

import re
import shutil
import subprocess
import sys

import pytest

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


# ---- the Docker image and Streamlit Community Cloud (issue 13) ----------------------------------------
def _local_imports() -> set[str]:
    """Top-level local packages and modules the dashboard's files import."""
    import ast

    files = [ROOT / "app.py", *(ROOT / "pages").glob("*.py"), *(ROOT / "components").glob("*.py")]
    files += list((ROOT / "participant").glob("*.py"))
    names = set()
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
    return {n for n in names if (ROOT / n).is_dir() or (ROOT / f"{n}.py").is_file()}


def _dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def test_the_image_installs_the_dashboard_requirements_and_chromium_only():
    text = _dockerfile()
    installs = re.findall(r"pip install ([^\n]+)", text)
    assert installs == ["-r requirements.txt"], installs  # no torch, no `-e .[dev]`
    assert re.search(r"apt-get install[^\n]*\bchromium\b", text)
    assert "BROWSER_PATH=/usr/bin/chromium" in text  # kaleido uses it, never downloads one
    assert "CONCEPTLENS_READ_ONLY=1" in text and "CONCEPTLENS_STATE_DIR=/state" in text


def test_the_image_copies_everything_the_dashboard_imports():
    copied = set(re.findall(r"^COPY (\S+) ", _dockerfile(), flags=re.M))
    for name in sorted(_local_imports()):
        assert name in copied or f"{name}.py" in copied, f"{name} is imported but not in the image"
    assert "app.py" in copied and ".streamlit" in copied
    # The server's entry (app.py behind components/serving.py's middleware) is in the image.
    entry = re.search(r'^ENTRYPOINT \["streamlit", "run", "([^"]+)"', _dockerfile(), flags=re.M).group(1)
    assert entry == "serve.py" and entry in copied, entry
    ignored = (ROOT / ".dockerignore").read_text().split()
    for name in copied - {"requirements.txt"}:
        assert name not in ignored, f"{name} is copied but .dockerignore leaves it out"
    assert {".venv", "data", ".git"} <= set(ignored)  # a small build context


def test_streamlit_cloud_files():
    packages = (ROOT / "packages.txt").read_text().split()
    assert "chromium" in packages and "fonts-liberation" in packages
    reqs = (ROOT / "requirements.txt").read_text().lower()
    for name in ("pypdf", "fsspec", "aiohttp", "kaleido", "streamlit"):
        assert re.search(rf"^{name}\b", reqs, flags=re.M), name


def test_deploy_doc_gives_the_commands_of_each_way():
    doc = (ROOT / "docs" / "deploy.md").read_text()
    for command in (
        "make run",
        "docker build -t conceptlens .",
        "docker run",
        "CONCEPTLENS_READ_ONLY=1",
        "CONCEPTLENS_STATE_DIR",
        "--workspace https://",
        "packages.txt",
        "conceptlens figures --workspace",
        "conceptlens report --workspace",
    ):
        assert command in doc, command


def test_the_image_builds_where_docker_runs():
    docker = shutil.which("docker")
    if not docker or subprocess.run([docker, "info"], capture_output=True).returncode != 0:
        pytest.skip("no Docker daemon here (`docker info` fails): the image was not built")
    out = subprocess.run(
        [docker, "build", "-t", "conceptlens-test", str(ROOT)], capture_output=True, text=True, timeout=3000
    )
    assert out.returncode == 0, out.stderr[-3000:]
    check = "import conceptlens.figures.export, pypdf, fsspec, aiohttp, kaleido; print('ok')"
    run = subprocess.run(
        [docker, "run", "--rm", "--entrypoint", "python", "conceptlens-test", "-c", check],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.stdout.strip() == "ok", run.stderr[-2000:]
