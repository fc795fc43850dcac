"""`conceptlens report`: one self-contained HTML file that opens without a server and
without network: interactive figures, embedded thumbnails (issue 13)."""

import json
import re

import pytest

from conceptlens.cli import main
from conceptlens.db import WorkspaceDB
from conceptlens.figures import catalog
from conceptlens.workspace import Workspace


@pytest.fixture(scope="module")
def report(factory_template, tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["report", "--workspace", str(factory_template), "--out", str(out), "--quiet"]) == 0
    return out


def drawable(root) -> set[str]:
    """Default figures whose tables the workspace has, but transfer correlations: the
    factory's one dataset leaves that table empty, with no target to draw."""
    db = WorkspaceDB(root)
    have = {f.name for f in catalog.FIGURES.values() if f.default and all(db.has(t) for t in f.tables)}
    assert db.query("SELECT count(*) AS n FROM transfer_correlations")["n"].iloc[0] == 0
    return have - {"transfer_correlations"}


def test_report_is_one_file_with_nothing_from_elsewhere(report, factory_template):
    page = report.read_text()
    # No element loads anything: every src/href is a data: URI or an anchor. (The inlined
    # plotly.js holds link text in its strings; the browser test shows nothing is fetched.)
    markup = re.sub(r"<script>.*?</script>", "", page, flags=re.S)
    assert len(page) - len(markup) > 3_000_000, "plotly.js is not inlined"
    for attr in re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)""", markup):
        assert attr.startswith(("data:", "#")), attr
    assert "<link" not in page and "@import" not in page and "url(http" not in page
    specs = re.findall(r'<script type="application/json" id="(fig\d+)-spec">', page)
    assert len(specs) == len(drawable(factory_template))
    prov = json.loads(re.search(r'id="conceptlens-provenance">(.*?)</script>', page).group(1))
    assert prov["fingerprint"] == Workspace(factory_template).fingerprint()


def test_report_figures_carry_no_webgl(report):
    for spec in re.findall(r'-spec">(.*?)</script>', report.read_text(), flags=re.S):
        types = {t.get("type") for t in json.loads(spec)["data"]}
        assert "scattergl" not in types, types


@pytest.mark.browser
def test_report_opens_offline_in_chromium(report, factory_template, browser):
    ctx = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
    outside, errors = [], []

    def route(r):
        if r.request.url.startswith(("file:", "data:")):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    ctx.route("**/*", route)
    page = ctx.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(report.as_uri())
    n = len(drawable(factory_template))
    page.wait_for_function(
        f"document.querySelectorAll('.plot.js-plotly-plot').length >= {n}"
        " && Array.from(document.querySelectorAll('.plot')).every(d => d.querySelector('.main-svg'))",
        timeout=120_000,
    )
    assert page.locator(".plot.js-plotly-plot").count() == n
    images = page.evaluate("Array.from(document.images).map(i => i.complete && i.naturalWidth > 0)")
    assert images and all(images), "a thumbnail did not decode"
    # Interactive: hovering a point of the first scatter shows Plotly's hover label.
    first = page.locator(".plot.js-plotly-plot").first
    first.scroll_into_view_if_needed()
    point = first.locator(".scatterlayer .point").first
    point.hover(force=True)
    page.wait_for_selector(".hoverlayer .hovertext", timeout=10_000)
    page.screenshot(path=str(report.parent / "report.png"), full_page=False)
    assert outside == [] and errors == [], (outside, errors)
    ctx.close()


def test_report_on_a_folder_is_refused(factory_template, tmp_path, capsys):
    assert main(["report", "--workspace", str(factory_template), "--out", str(tmp_path), "--quiet"]) == 1
    assert "is a folder" in capsys.readouterr().err
