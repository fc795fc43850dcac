"""What a page draws is what `conceptlens figures` exports: every catalogue figure a page
shows is its spec's `build` with the page's URL parameters (conceptlens/figures/specs/).

The pages are run (AppTest) on a hard-linked copy of the demo; every figure handed to the
export control is recorded with its provenance, rebuilt from the catalogue with the
parameters the provenance carries, and compared as Plotly JSON: a page that draws a figure
its own way, or with arguments the catalogue does not know, fails here.
"""

from __future__ import annotations

import pytest

import components.export_button as E
from components import nav
from components.text import plain_figure
from conceptlens.db import WorkspaceDB
from conceptlens.figures import catalog
from conceptlens.figures.catalog import FIGURES, Unavailable, by_page
from tests.test_app import assert_clean, open_app

PAGES = {p.name: p.path for p in nav.PAGES}


def test_spec_modules_are_found_without_a_list():
    """Every page with figures has its module; no module adds another page's figures."""
    import pkgutil

    from conceptlens.figures import specs

    modules = {m.name for m in pkgutil.iter_modules(specs.__path__)}
    assert set(by_page()) == modules - {"common"}  # common: shared parameters, no figure
    for f in FIGURES.values():
        assert f.build.__module__ == f"{specs.__name__}.{f.page}", f.name
        assert f.page in PAGES, f"figure {f.name}: no page {f.page!r}"


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_a_figure_declares_what_its_page_shows_and_reads_nothing_else(factory_template, name):
    """A figure names steps of its page's spec (so the page validates the tables the figure
    reads), and building it on the factory workspace reads only the tables derived from those steps: a
    figure reading a table it does not declare would be drawn from an unchecked table, and
    `conceptlens figures` would not say what to compute when it is missing. One case per
    catalogue entry: a new figure is checked without an entry here."""
    from conceptlens import analyses
    from conceptlens import db as dbmod

    f = FIGURES[name]
    db = WorkspaceDB(factory_template)  # every analysis, small (a new one's from its declaration)
    page = nav.BY_NAME[f.page]
    assert set(f.steps + f.optional) <= set(page.steps), f"{f.name}: steps its page does not show"
    assert set(f.reads + f.optional_reads) <= set(page.reads + page.may_lack), (
        f"{f.name}: reads its page does not declare"
    )
    assert set(f.steps + f.optional) <= set(analyses.by_name()), f.name
    try:
        params = f.resolve(db)
    except Unavailable:
        # Nothing to draw (no target to choose) or an exported study's figure: the factory
        # holds every table the figure's steps write, so none of those is what is missing.
        steps = analyses.by_name()
        assert all(db.has(t) for s in f.steps for t in steps[s].tables), f.missing(db)
        return
    with dbmod.read_log() as reads:
        f.build(db, params)
    extra = reads - set(f.may_read) - set(nav.BASE_TABLES)
    assert not extra, f"figure {f.name} reads {sorted(extra)}: declare the step that writes it"


def test_the_factory_draws_most_figures(factory_template):
    db = WorkspaceDB(factory_template)
    built = 0
    for f in FIGURES.values():
        try:
            f.resolve(db)
        except Unavailable:
            continue
        built += 1
    assert built >= 16


def test_a_missing_table_names_the_command_that_computes_it(tmp_path):
    from harness.factory import make_workspace

    db = WorkspaceDB(make_workspace(tmp_path / "ws").root)  # features only, no analysis run
    why = FIGURES["cl_id"].missing(db)
    assert "checkpoint_metrics" in why and "analyze cluster_metrics" in why, why
    with pytest.raises(Unavailable, match="analyze cluster_metrics"):
        FIGURES["cl_id"].resolve(db)
    assert "analyze projections" in FIGURES["umap"].missing(db)


def _drawn(monkeypatch, demo_ws, page: str, query=None) -> list[tuple[str, dict]]:
    """(figure JSON, provenance) of every figure the page drew with an export control."""
    seen = []
    original = E.export_button

    def record(fig, name, provenance, key, title=None):
        # A page that draws its own view (the WebGL projection) exports the catalogue's
        # figure built when downloaded: a function, called here as the download would.
        seen.append(((fig() if callable(fig) else fig).to_json(), dict(provenance)))
        return original(fig, name, provenance, key, title=title)

    monkeypatch.setattr(E, "export_button", record)
    at = open_app(monkeypatch, demo_ws, PAGES[page], query)
    assert_clean(at)
    return seen


# Beyond the first view: the page's interactive state (filters, a ringed cluster, a drawn
# region, the selection, the Sankey's options) must reach the build as parameters.
STATES = [
    ("clusters", {"min_size": "3", "purity": "0.2,1", "cluster": "2", "region": "box:-100,100,-100,100"}),
    ("clusters", {"region": "lasso:-100,-100,100,-100,0,100", "sel": "region"}),
    ("clusters", {"sel": "filter", "purity": "0.5,1"}),
    ("checkpoints", {"share": "0.3", "flows": "all flows", "top": "0"}),
]


# Every page with catalogue figures, on the demo and on the factory workspace (which holds
# every analysis' tables, a new analysis' too: its page's figures are drawn there).
VISITS = [(p, None, w) for w in ("demo", "factory") for p in sorted(by_page())] + [
    (p, q, "demo") for p, q in STATES
]


@pytest.mark.parametrize(
    "page, query, where",
    VISITS,
    ids=[f"{p}-{w}" for p, _, w in VISITS[: -len(STATES)]]
    + [f"{p}-state{i}" for i, (p, _) in enumerate(STATES)],
)
def test_page_draws_the_catalogue_build(monkeypatch, request, page, query, where):
    root = request.getfixturevalue("demo_ws" if where == "demo" else "factory_template")
    check_page_draws_the_catalogue_build(monkeypatch, root, page, query)


def check_page_draws_the_catalogue_build(monkeypatch, root, page, query) -> None:
    """The page `page` opened on `root` with `query` draws each catalogue figure it shows by
    its entry's build with the page's parameters, and every default figure it can."""
    db = WorkspaceDB(root)
    drawn = _drawn(monkeypatch, root, page, query)
    shown = {}
    for fig_json, prov in drawn:
        name = prov.get("figure")
        if name not in FIGURES or FIGURES[name].page != page:
            continue
        spec = FIGURES[name]
        missing = [p.name for p in spec.params if p.name not in prov and not p.optional]
        assert not missing, f"{name}: the page's provenance lacks the figure's parameters {missing}"
        params = spec.resolve(db, {p.name: prov[p.name] for p in spec.params if p.name in prov})
        for key, value in (query or {}).items():  # the page's state reached the figure
            if key in params:
                assert catalog.as_text(params[key]) == value, (name, key)
        # The page shows workspace text as text (components/text.py plain_figure).
        rebuilt = plain_figure(spec.build(db, params))
        rebuilt.update_layout(**prov.get("on_page", {}))  # the page's chart size and drag mode only
        assert set(prov.get("on_page", {})) <= {"height", "dragmode"}, "on_page carries no data"
        assert rebuilt.to_json() == fig_json, f"{name}: the page draws another figure"
        shown[name] = params
    expected = set()
    for f in by_page()[page]:
        try:
            f.resolve(db)
        except Unavailable:
            continue
        if f.default:
            expected.add(f.name)
    assert expected <= set(shown), (
        f"catalogue figures the page does not draw by their build: {expected - set(shown)}"
    )


def test_show_catalog_figure_names_and_titles_as_the_cli(monkeypatch, demo_ws):
    """The page's export file and title are those `conceptlens figures` writes."""
    calls = []
    monkeypatch.setattr(
        E, "show_figure", lambda fig, name, prov, key, title=None, **kw: calls.append((name, prov, title))
    )
    db = WorkspaceDB(demo_ws)
    f = FIGURES["accuracy_by_setting"]
    params = f.resolve(db)
    E.show_catalog_figure(db, f.name, {**params, "extra": 1}, {"workspace": "w"}, key="k")
    ((name, prov, title),) = calls
    assert name == catalog.stem(f, params) and title == f.title
    assert prov == {"workspace": "w", **params, "figure": f.name}
