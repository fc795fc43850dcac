"""Every page in a real browser (headless Chromium): reached from the app's navigation,
opened as the first request of a fresh server, with hostile links and a broken table.
Screenshots in tests/artifacts/."""

from urllib.parse import quote

import pytest

from components import nav
from conceptlens.workspace import Workspace
from harness.browser import main_text, open_page, query_of, screenshot, serve, wait_for_script
from tests.conftest import copy_ws
from tests.malformed import MALFORMATIONS
from tests.test_app import has_tables

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def app_url(factory_template):
    with serve(factory_template) as url:
        yield url


@pytest.fixture(scope="module")
def demo_url(demo_ws):
    with serve(demo_ws) as url:
        yield url


def heading(page) -> str:
    return page.locator('[data-testid="stMain"] h1').first.inner_text()


def test_deep_link_as_the_first_request_of_a_fresh_server(browser, factory_template):
    """Streamlit's legacy `pages/` mode would run /clusters without app.py (no navigation,
    no workspace): components/frame.py must put it back in the app's frame."""
    with serve(factory_template) as url:
        page = open_page(browser, f"{url}/clusters?ckpt=ck1", "first-request-clusters")
        sidebar = page.get_by_test_id("stSidebar").inner_text()
        links = page.get_by_test_id("stSidebarNav").get_by_role("link")
        assert links.count() == len(nav.PAGES)
        for i, spec in enumerate(nav.PAGES):  # app.py's titles, not the legacy file names
            assert links.nth(i).inner_text().endswith(spec.title)
        assert "Workspace:" in sidebar
        assert heading(page) == "Clusters"
        assert page.get_by_role("combobox", name="Checkpoint").input_value() == "ck1"
        page.close()


@pytest.mark.parametrize("spec", nav.PAGES, ids=lambda s: s.name)
def test_every_page_from_the_navigation(browser, app_url, factory_template, spec):
    # Start on another page, so following the link really navigates.
    start = next(p for p in nav.PAGES if p != spec)
    page = open_page(browser, f"{app_url}/{start.url}", f"nav-{spec.name}-before")
    page.get_by_test_id("stSidebarNav").get_by_role("link", name=spec.title).click()
    page.wait_for_function(f"() => location.pathname === '/{spec.url}'")
    wait_for_script(page)
    assert page.get_by_role("dialog").count() == 0
    screenshot(page, f"page-{spec.name}")
    assert page.get_by_test_id("stException").count() == 0
    assert page.get_by_test_id("stAlertContentError").count() == 0, main_text(page)
    assert heading(page) == ("tiny" if spec.default else spec.title)
    if not spec.default:
        # Its figures when the factory has the page's tables, else the command for them.
        shown = ".js-plotly-plot" if has_tables(factory_template, spec) else '[data-testid="stCode"]'
        assert page.locator(f'[data-testid="stMain"] {shown}').count() >= 1
    page.close()


@pytest.mark.parametrize("spec", nav.PAGES, ids=lambda s: s.name)
def test_every_page_on_the_demo(browser, demo_url, demo_ws, spec):
    page = open_page(browser, f"{demo_url}/{spec.url}", f"demo-{spec.name}")
    assert page.get_by_test_id("stAlertContentError").count() == 0, main_text(page)
    if spec.default:
        text = main_text(page)
        assert "shapes" in text and "digits" in text
        src = page.locator('[data-testid="stImage"] img').first.get_attribute("src")
        assert "/media/" in src and not src.startswith("data:")
    else:
        shown = ".js-plotly-plot" if has_tables(demo_ws, spec) else '[data-testid="stCode"]'
        assert page.locator(f'[data-testid="stMain"] {shown}').count() >= 1
    page.close()


def test_link_values_render_as_literal_text(browser, app_url):
    value = "**bold** :red[x] <b>y</b> $x^2$"
    page = open_page(browser, f"{app_url}/clusters?ckpt={quote(value)}", "literal-link-value")
    alert = page.get_by_test_id("stAlertContentWarning")
    assert alert.count() == 1
    assert value in alert.inner_text()
    assert alert.locator("strong, b, span[class*='color'], .katex").count() == 0
    page.close()


def test_too_long_ws_link_warns_once_and_is_dropped(browser, app_url):
    page = open_page(browser, f"{app_url}/?ws={'w' * 3000}", "too-long-ws-link")
    assert page.get_by_test_id("stAlertContentWarning").count() == 1
    assert "ws" not in query_of(page)
    assert heading(page) == "tiny"
    page.close()


def test_a_broken_table_is_named_where_it_is_used(browser, tmp_path, factory_template):
    root = copy_ws(factory_template, tmp_path / "ws")
    MALFORMATIONS["projection_nan"].apply(Workspace(root))
    with serve(root) as url:
        page = open_page(browser, f"{url}/clusters", "broken-projections-clusters")
        error = page.get_by_test_id("stAlertContentError")
        assert error.count() == 1
        assert "table projections, column x" in error.inner_text()
        # The rest of the page is there: the cluster table, purity vs coherence and the
        # selection's label histogram; only the UMAP (which reads projections) is missing.
        assert page.get_by_test_id("stDataFrame").count() >= 2
        assert page.locator('[data-testid="stMain"] .js-plotly-plot').count() == 2
        assert page.get_by_text("UMAP of the features").count() == 1
        page.close()
        # The Checkpoints page draws A's and B's UMAPs too: it names the same problem.
        page = open_page(browser, f"{url}/checkpoints", "broken-projections-checkpoints")
        error = page.get_by_test_id("stAlertContentError")
        assert error.count() == 1 and "table projections, column x" in error.inner_text()
        page.close()
