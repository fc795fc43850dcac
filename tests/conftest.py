import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Studies' answers go to a store outside every workspace: in tests, a fresh folder, never the
# user's own (and never a PostgreSQL database named in the environment).
os.environ["CONCEPTLENS_STATE_DIR"] = tempfile.mkdtemp(prefix="conceptlens-state-")
# Removed when this process ends (each pytest process, xdist's workers included, has its
# own): 1,837 of them had piled up in /tmp after a day of runs.
atexit.register(shutil.rmtree, os.environ["CONCEPTLENS_STATE_DIR"], True)
os.environ.pop("CONCEPTLENS_ANSWERS_URL", None)

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "data" / "demo"


def has_demo() -> bool:
    return (DEMO / "workspace.json").exists()


def _link_or_copy(src, dst):
    try:
        os.link(src, dst)
    except OSError:  # another file system: hard links cannot cross it
        shutil.copy2(src, dst)


def _git(*args, cwd) -> bytes | None:
    import subprocess

    try:
        r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return r.stdout


def committed_copy(src: Path, dst: Path) -> Path:
    """`src` as git last committed it, hard-linked into `dst` (no file is copied).

    A file git does not track (a table a command added to the demo, e.g. `conceptlens
    study export --workspace data/demo`) is left out, and a tracked file changed or deleted
    since the last commit is written from the commit. Outside a git checkout (e.g. a
    Docker image), every file of `src`.
    """
    import subprocess

    src = Path(src).resolve()
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:  # GNU cp links 37,000 files in a second; Python's loop takes twice as long
        subprocess.run(["cp", "-al", str(src), str(dst)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, copy_function=_link_or_copy)
    if _git("rev-parse", "--is-inside-work-tree", cwd=src) is None:
        return dst

    def names(out: bytes | None) -> list[str]:
        return [os.fsdecode(n) for n in (out or b"").split(b"\0") if n]

    for rel in names(_git("ls-files", "-z", "--others", "--", ".", cwd=src)):
        (dst / rel).unlink()
    # Linking changed every file's ctime (its link count): compare contents by mtime and size,
    # or git would read all 200 MB again.
    diff = _git(
        "-c", "core.trustctime=false", "diff", "--name-only", "--relative", "-z", "HEAD", "--", ".", cwd=src
    )
    for rel in names(diff):
        blob = _git("show", f"HEAD:./{rel}", cwd=src)
        target = dst / rel
        if target.exists():
            target.unlink()  # a link to the changed file: replace it, never write into it
        if blob is not None:  # None: added to the index, never committed
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blob)
    return dst


@pytest.fixture(scope="session")
def demo_ws(tmp_path_factory) -> Path:
    """The committed demo workspace, hard-linked into a folder of this session (about a
    second): no test opens data/demo itself, so nothing written there (by a test or by
    hand) changes what the tests see. A test may add or replace files of the copy (the
    atomic writer replaces files) but never write into one: it is data/demo's too."""
    assert has_demo(), "data/demo is missing: run `conceptlens demo build`"
    return committed_copy(DEMO, tmp_path_factory.mktemp("demo") / "demo")


@pytest.fixture()
def demo_copy(tmp_path, demo_ws) -> Path:
    """A private copy of the demo's tables; thumbnails and models are hard-linked, not copied.

    Not symlinked: a symlink leading out of the workspace is a validation problem. Tests
    may rewrite the copied tables but must never write into a linked file.
    """
    out = tmp_path / "ws"
    out.mkdir()
    for p in demo_ws.iterdir():
        if p.is_dir() and p.name in ("thumbnails", "models"):
            shutil.copytree(p, out / p.name, copy_function=_link_or_copy)
        elif p.is_dir():
            shutil.copytree(p, out / p.name)
        else:
            shutil.copy2(p, out / p.name)
    return out


@pytest.fixture(scope="session")
def ws_template(tmp_path_factory) -> Path:
    """A 40-image shapes workspace (rendered PNGs) for tests that run real models."""
    from harness.factory import shapes_workspace

    return shapes_workspace(tmp_path_factory.mktemp("tpl") / "ws", n=40).root


@pytest.fixture
def ws(ws_template, tmp_path) -> Path:
    """A fresh copy of `ws_template` for each test."""
    return Path(shutil.copytree(ws_template, tmp_path / "ws"))


@pytest.fixture(scope="session")
def hf_models(tmp_path_factory):
    """Tiny transformers vision models saved with save_pretrained (random weights)."""
    import transformers as T

    d = tmp_path_factory.mktemp("hf")
    vit = dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        image_size=32,
        patch_size=8,
    )
    T.ViTModel(T.ViTConfig(**vit)).save_pretrained(d / "vit")
    T.ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(d / "vit")
    T.Dinov2Model(T.Dinov2Config(**vit)).save_pretrained(d / "dinov2")
    T.CLIPModel(
        T.CLIPConfig(
            vision_config=vit,
            projection_dim=16,
            text_config=dict(
                hidden_size=32,
                num_hidden_layers=1,
                num_attention_heads=2,
                intermediate_size=37,
                vocab_size=100,
                bos_token_id=0,
                eos_token_id=1,
            ),
        )
    ).save_pretrained(d / "clip")
    T.ResNetModel(
        T.ResNetConfig(
            embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic", image_size=32
        )
    ).save_pretrained(d / "resnet")
    return d


@pytest.fixture(scope="session")
def factory_template(tmp_path_factory) -> Path:
    """A tiny workspace with every table (harness/factory.py), shared by a session's tests."""
    from harness.factory import make_workspace

    root = tmp_path_factory.mktemp("factory") / "ws"
    make_workspace(root, derived=True)
    return root


def copy_ws(src, dst):
    """A copy with hard-linked files: tests.malformed replaces files, never writes into them."""

    def link(a, b):
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    shutil.copytree(src, dst, copy_function=link, symlinks=True)
    return dst


@pytest.fixture
def factory_copy(tmp_path, factory_template) -> Path:
    """A private copy of `factory_template` for a test that breaks it."""
    return copy_ws(factory_template, tmp_path / "ws")


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL server for the session (harness/pg.py: initdb + pg_ctl on a free port);
    skipped without PostgreSQL's binaries, except in CI, where it fails."""
    from harness import pg

    pg.require(pytest)
    with pg.postgres_server() as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    """Headless Debian Chromium through Playwright; never downloads a browser."""
    from playwright.sync_api import sync_playwright

    from harness.browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS

    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CHROMIUM} is missing in CI: `make test` installs Debian's chromium")
        pytest.skip(f"{CHROMIUM} is missing: apt-get install chromium")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


def pytest_sessionfinish(session, exitstatus):
    # Release cached DuckDB connections before interpreter exit (keeps the log free of
    # nanobind's leak report, which would otherwise follow pytest's summary line).
    import gc

    try:
        import streamlit as st

        st.cache_resource.clear()
    except Exception:
        pass
    gc.collect()


@pytest.fixture(autouse=True)
def conceptlens_plotly_template():
    """The ConceptLens template is plotly's default once `figures.theme` is imported (the
    library's figures name none). Importing Streamlit makes its own the default, once: in
    the app Streamlit comes first, but in a test process it may come after the theme, and
    figures built by later tests in that process would lose their fonts and sizes."""
    import sys

    theme = sys.modules.get("conceptlens.figures.theme")
    if theme is not None:
        import plotly.io as pio

        pio.templates.default = theme.TEMPLATE
    yield
