"""Every page in a real browser: no exception element, a screenshot per page."""
import pytest

from tests.browser import ARTIFACTS, serve, wait_for_script

pytestmark = pytest.mark.browser

PAGES = [("home", "")]


@pytest.fixture(scope="module")
def app_url(demo_ws):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serve(demo_ws) as url:
        yield url


def open_page(browser, url, name):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url)
    wait_for_script(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    return page


@pytest.mark.parametrize("name,path", PAGES)
def test_page_renders(browser, app_url, name, path):
    page = open_page(browser, f"{app_url}/{path}", name)
    assert page.locator('[data-testid="stMain"]').count() == 1
    page.close()


def test_home_shows_both_datasets_and_images(browser, app_url):
    page = open_page(browser, app_url, "home-datasets")
    text = page.locator('[data-testid="stMain"]').inner_text()
    assert "shapes" in text and "digits" in text
    imgs = page.locator('[data-testid="stImage"] img')
    assert imgs.count() >= 40
    # Thumbnails come from the media endpoint, not base64 data URLs.
    src = imgs.first.get_attribute("src")
    assert "/media/" in src and not src.startswith("data:")
    page.close()


def test_broken_workspace_shows_message(browser, demo_copy):
    import pyarrow.parquet as pq
    p = demo_copy / "images.parquet"
    pq.write_table(pq.read_table(p).drop_columns(["image_id"]), p)
    with serve(demo_copy) as url:
        page = browser.new_page()
        page.goto(url)
        wait_for_script(page)
        assert page.locator('[data-testid="stException"]').count() == 0
        alert = page.locator('[data-testid="stAlert"]').first.inner_text()
        assert "images.parquet" in alert and "image_id" in alert
        page.screenshot(path=str(ARTIFACTS / "broken-workspace.png"), full_page=True)
        page.close()
