"""AppTest of every page: the factory workspace, the demo, broken workspaces, links.

Every page is opened the way a link opens it: as the first request of a session, which
Streamlit's legacy `pages/` mode would run outside app.py (components/frame.py).
"""

import ast
import os
import re
import shutil
import sys

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import streamlit as st
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from components import nav
from components.cluster_tables import DASH
from conceptlens import analyses, schema, views
from conceptlens.db import WorkspaceDB, read_log
from conceptlens.validate import validate
from conceptlens.workspace import Workspace
from tests.conftest import ROOT, copy_ws
from tests.malformed import MALFORMATIONS

PAGES = [p.path for p in nav.PAGES]


def open_app(monkeypatch, workspace, page="pages/home.py", query=None) -> AppTest:
    """The app as a link to `page` (with `query`) opens it, on `workspace`."""
    # Reruns after a widget change read sys.argv again: keep it for the whole test.
    monkeypatch.setattr(sys, "argv", ["app.py", "--workspace", str(workspace)])
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    # The owner (the Studies page is theirs: docs/deploy.md, "Owner and participants").
    monkeypatch.setenv("CONCEPTLENS_OWNER_SECRET", "owner-secret-of-test-app")
    at.session_state["_owner_secret"] = "owner-secret-of-test-app"
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.switch_page(page)
    return at.run()


def plain(elements) -> str:
    """The text elements show, Markdown escapes removed."""
    return " ".join(re.sub(r"\\(.)", r"\1", e.value) for e in elements)


def assert_clean(at):
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def has_tables(root, spec) -> bool:
    """The workspace has every table the page reads (but those people save from it)."""
    ws = Workspace(root)
    return all(ws.has(t) for t in spec.tables if t in schema.TABLES_BY_NAME and t not in spec.may_lack)


def assert_renders(at, spec, root):
    """The page drew its content: its figures when the workspace has its tables, else the
    command that computes them."""
    assert_clean(at)
    assert "Workspace:" in plain(at.sidebar.caption), "page ran outside app.py's frame"
    if spec.default:
        assert at.get("image") and len(at.dataframe) == 2
        return
    assert at.title[0].value == spec.title
    if has_tables(root, spec):
        assert at.get("plotly_chart") and at.dataframe
    else:
        assert at.code, "no command for what is missing"


@pytest.mark.parametrize("spec", nav.PAGES, ids=lambda s: s.name)
def test_page_renders_on_factory_workspace(monkeypatch, factory_template, spec):
    at = open_app(monkeypatch, factory_template, spec.path)
    assert_renders(at, spec, factory_template)
    assert not at.warning, [w.value for w in at.warning]


@pytest.mark.parametrize("spec", nav.PAGES, ids=lambda s: s.name)
def test_page_renders_on_demo(monkeypatch, demo_ws, spec):
    assert_renders(open_app(monkeypatch, demo_ws, spec.path), spec, demo_ws)


def test_app_navigation_is_built_from_the_page_specs():
    tree = ast.parse((ROOT / "app.py").read_text())
    literal_paths = [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and str(n.value).startswith("pages/")
    ]
    assert not literal_paths, "app.py lists pages itself; declare them in components/nav.py"
    assert sorted(p.name for p in (ROOT / "pages").glob("*.py")) == sorted(os.path.basename(p) for p in PAGES)


@pytest.mark.parametrize("path", sorted((ROOT / "pages").glob("*.py")), ids=lambda p: p.stem)
def test_pages_only_render(path):
    """Pages read views through the cached `ws.view`; computing is the library's job."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mod = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            assert not (mod or "").startswith(("conceptlens.analysis", "duckdb", "conceptlens.db")), mod
        if isinstance(node, ast.Attribute):
            assert node.attr not in ("cache_data", "cache_resource", "query"), (
                f"{path.name}:{node.lineno} uses .{node.attr}"
            )


# ---- which workspace: ?ws= ------------------------------------------------------------------
BAD_WS = {
    "outside": "../../etc",
    "missing": "no-such-workspace",
    "too-long": "w" * 3000,
    "nul": "bad\x00name",
    "markdown": "**bold** :red[x] <b>y</b>",
}


@pytest.mark.parametrize("value", BAD_WS.values(), ids=BAD_WS.keys())
def test_bad_ws_link_warns_once_and_leaves_the_url(monkeypatch, factory_template, value):
    at = open_app(monkeypatch, factory_template, query={"ws": value})
    assert not at.exception, [e.message for e in at.exception]
    assert len(at.warning) == 1, [w.value for w in at.warning]
    assert "not a workspace folder" in at.warning[0].value
    assert "ws" not in at.query_params
    assert at.title[0].value == "tiny"  # the default workspace is shown
    at.run()
    assert not at.warning


def test_bad_ws_link_is_shown_as_plain_text(monkeypatch, factory_template):
    at = open_app(monkeypatch, factory_template, query={"ws": BAD_WS["markdown"]})
    html = MarkdownIt().render(at.warning[0].value)
    assert "<strong>" not in html and "<b>" not in html
    assert "**bold** :red[x] &lt;b&gt;y&lt;/b&gt;" in html


def test_ws_link_opens_a_workspace_below_the_served_folder(monkeypatch, tmp_path, factory_template):
    from components import data

    copy_ws(factory_template, tmp_path / "served" / "mine")
    monkeypatch.setattr(data, "WORKSPACES_ROOT", tmp_path / "served")
    at = open_app(monkeypatch, tmp_path / "elsewhere", query={"ws": "mine"})
    assert_clean(at)
    assert not at.warning and at.query_params["ws"] in ("mine", ["mine"])
    assert at.title[0].value == "tiny"


def test_missing_workspace_folder(monkeypatch, tmp_path):
    at = open_app(monkeypatch, tmp_path / "nowhere")
    assert not at.exception
    assert "does not exist" in at.error[0].value


def test_link_values_are_shown_as_literal_text(monkeypatch, factory_template):
    value = "**bold** _it_ `code` :red[x] <b>y</b> [a](http://e.x)"
    at = open_app(monkeypatch, factory_template, "pages/clusters.py", query={"ckpt": value})
    assert_clean(at)
    (warning,) = at.warning
    html = MarkdownIt().render(warning.value)
    for tag in ("<strong>", "<em>", "<code>", "<b>", "<a "):
        assert tag not in html, html
    assert plain([warning]).count(value) == 1
    assert at.selectbox(key="clusters_ckpt").value == "ck0"


# ---- Home ----------------------------------------------------------------------------------------
def test_home_lists_datasets_checkpoints_analyses_and_images(monkeypatch, factory_template):
    at = open_app(monkeypatch, factory_template)
    ds = at.dataframe[0].value.set_index("dataset")
    assert ds.loc["toy"].to_dict() == {"images": 48, "labels": 3, "train": 36, "test": 12, "checkpoints": 3}
    assert list(at.dataframe[1].value["checkpoint_id"]) == ["ck0", "ck1", "ck2"]
    md = " ".join(m.value for m in at.markdown)
    assert ":green[:material/check_circle:] **Class-level captions" in md
    # The factory has ground-truth captions only: captioning is missing, with its command.
    assert "Image captions from a captioning model** — not in this workspace yet" in md
    assert f"conceptlens caption --workspace {factory_template} --dataset toy --captioner SPEC" in [
        c.value for c in at.code
    ]
    assert "shape" in plain(at.caption)
    grid = at.get("image")[0].proto.imgs
    assert len(grid) == 40
    assert all(not im.url.startswith("data:") for im in grid)  # served by the media endpoint


def page_links(at) -> list[tuple[str, str]]:
    """(label, page URL path) of every page link."""
    return [(e.proto.label, e.proto.page) for e in at.get("page_link")]


def test_home_links_each_analysis_to_the_page_that_shows_it(monkeypatch, factory_template):
    at = open_app(monkeypatch, factory_template)
    assert_clean(at)
    links = page_links(at)
    # The factory holds every step but image captions: one link per step present, to the
    # page whose spec names it (the registry once said page="concepts": "the **concepts** page").
    shown = [s for s in analyses.steps() if s.name != "image_captions"]
    assert len(links) == len(shown)
    for step, (label, page) in zip(shown, links):
        spec = nav.page_of(step.name)
        assert (label, page) == (f"see the {spec.title} page", spec.name), step.name
    assert ("see the Concepts page", "concepts") in links


def without(root, *tables):
    for t in tables:
        path = root / schema.TABLES_BY_NAME[t].path
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def test_home_says_what_input_an_analysis_without_units_needs(monkeypatch, factory_copy):
    """No similarity judgments: `analyze similarity` would compute nothing, so Home says what
    to import instead; convergence, which runs after it, needs them too."""
    without(factory_copy, "similarity_trials", "psych_embedding", "similarity_fit", "human_alignment")
    shutil.rmtree(factory_copy / "projections" / "checkpoint_id=psych@toy")  # the embedding's own
    without(factory_copy, "similarity_convergence", "vl_models", "compmap_scores")
    at = open_app(monkeypatch, factory_copy)
    assert_clean(at)
    md = plain(at.markdown)
    codes = [c.value for c in at.code]
    title = "Psychological embedding of similarity judgments and each checkpoint's agreement with people"
    assert (
        f"**{title}** — nothing to compute in this workspace: it needs **Similarity judgments of people**:"
        in md
    )
    assert "nothing to compute in this workspace: it needs **Primitive concepts of the classes and a" in md
    assert (
        codes.count(f"conceptlens import hsj --workspace {factory_copy} SOURCE --dataset toy") == 2
    )  # similarity, convergence
    assert f"conceptlens import cub --workspace {factory_copy} path/to/CUB_200_2011" in codes
    assert not [
        c for c in codes if "analyze similarity" in c or "analyze convergence" in c or "analyze compmap" in c
    ]
    assert "Similarity judgments of people** — not in" not in md  # said once, where it is needed


def test_home_shows_skipped_units_as_skipped_with_their_reason_not_done(monkeypatch, factory_copy):
    """Captions skipped for a missing input (issue 28: Home ticked them as done): the step is
    not ticked, says how many units were skipped and why (as text), and gives the command
    that tries them again."""
    from conceptlens.analysis import runner

    ws = Workspace(factory_copy)
    ws.write("captions", ws.read("captions").slice(0, 0))  # no caption for any image
    runner.run(factory_copy, "cluster_captions", {"describability": False}, force=True, progress_bars=False)
    assert runner.skipped(factory_copy)["cluster_captions"]
    at = open_app(monkeypatch, factory_copy)
    assert_clean(at)
    md = plain(at.markdown)
    assert ":green[:material/check_circle:] **Class-level captions" not in md
    assert "**Class-level captions" in md and "unit(s) skipped, not done" in md
    assert any("has no caption" in t.value for t in at.text), [t.value for t in at.text]
    assert f"conceptlens analyze cluster_captions --workspace {factory_copy}" in [c.value for c in at.code]


def test_a_page_section_says_its_analysis_was_skipped_and_why(monkeypatch, factory_copy):
    """Clusters' captions section after a skip: not "not computed yet, compute it with" (the
    command would skip again) but skipped, with the reason as text."""
    from conceptlens.analysis import runner

    ws = Workspace(factory_copy)
    ws.write("captions", ws.read("captions").slice(0, 0))
    for part in ws.partitions("cluster_captions"):
        ws.remove_partition("cluster_captions", **part)
    runner.run(factory_copy, "cluster_captions", {"describability": False}, progress_bars=False)
    at = open_app(monkeypatch, factory_copy, "pages/clusters.py")
    assert not at.exception, [e.message for e in at.exception]
    assert any("was skipped" in w.value for w in at.warning), [w.value for w in at.warning]
    assert any("has no caption" in t.value for t in at.text)
    assert not any("not computed yet" in i.value and "captions" in i.value for i in at.info)


def test_home_runs_what_an_analysis_waits_for_first(monkeypatch, factory_copy):
    """No clusters: cluster metrics and comparisons have nothing to compute until clustering
    has run; their commands run what they wait for first, in order."""
    without(factory_copy, "clusters", "cluster_metrics", "checkpoint_metrics", "clid_scores")
    at = open_app(monkeypatch, factory_copy)
    assert not at.exception, [e.message for e in at.exception]
    codes = [c.value for c in at.code]
    run = [
        f"conceptlens analyze {a} --workspace {factory_copy}"
        for a in ("clustering", "cluster_metrics", "comparisons")
    ]
    assert run[0] in codes and "\n".join(run[:2]) in codes and "\n".join(run) in codes
    assert "Purity, 2AFC coherence" in plain(at.markdown)


def test_home_shows_missing_values_as_an_em_dash(monkeypatch, factory_copy):
    from tests.test_app_checkpoints import rewrite

    rewrite(
        factory_copy,
        "checkpoints.parquet",
        lambda df: df.assign(epoch=df["epoch"].astype("Int64").where(df["checkpoint_id"] != "ck1")),
    )
    at = open_app(monkeypatch, factory_copy)
    assert_clean(at)
    t = at.dataframe[1]
    assert pd.isna(t.value.set_index("checkpoint_id").loc["ck1", "epoch"]) and t.proto.placeholder == DASH
    assert at.dataframe[0].proto.placeholder == DASH


def test_home_lists_factor_columns_with_any_name(monkeypatch, factory_copy):
    p = factory_copy / "images.parquet"
    t = pq.read_table(p)
    n = t.num_rows
    for name, values in (
        ('we"ird', ["a"] * n),
        ("x'); DROP VIEW images; --", list(range(n))),
        ("never_set", pa.nulls(n, pa.string())),
    ):
        t = t.append_column(name, pa.array(values) if isinstance(values, list) else values)
    pq.write_table(t, p)
    at = open_app(monkeypatch, factory_copy)
    assert_clean(at)
    factors = plain(at.caption)
    assert 'we"ird' in factors and "x'); DROP VIEW images; --" in factors and "shape" in factors
    assert "never_set" not in factors
    assert len(at.get("image")[0].proto.imgs) == 40


def test_undecodable_thumbnail_is_a_placeholder_and_checked_once(monkeypatch, factory_copy):
    shown = views.home.sample_images(WorkspaceDB(factory_copy), dataset="toy", n=40)
    # Replace, never write into, the file: the copy's files are hard links to the session's
    # template, which later tests (the study pages show this image) must find intact.
    broken = factory_copy / shown["thumbnail"].iloc[5]
    broken.unlink()
    broken.write_bytes(b"not a png")
    at = open_app(monkeypatch, factory_copy)
    assert_clean(at)
    captions = [im.caption for im in at.get("image")[0].proto.imgs]
    assert len(captions) == 40
    assert captions[5].startswith("unreadable image") and sum("unreadable" in c for c in captions) == 1

    from PIL import Image

    opened, real_open = [], Image.open

    def counting_open(fp, *args, **kwargs):
        if isinstance(fp, (str, os.PathLike)):  # st.image itself opens bytes, not paths
            opened.append(fp)
        return real_open(fp, *args, **kwargs)

    monkeypatch.setattr(Image, "open", counting_open)
    at.run()
    assert_clean(at)
    assert not opened, "thumbnails were decoded again on a rerun"


# ---- broken workspaces (tests/malformed.py) ------------------------------------------------------
SAMPLE = [
    "meta_format_1",
    "meta_without_description",
    "images_without_image_id",
    "checkpoints_random_bytes",
    "captions_truncated",
    "clusters_null_image_id",
    "clusters_partition_random_bytes",
    "cluster_metrics_purity_as_text",
    "hard_negative_beyond_k",
    "describability_above_one",
    "knn_acc_above_one",
    "projection_nan",
    "features_embedding_float64",
    "pearson_above_one",
    "similarity_pair_unordered",
    "links_count_above_size",
    "clid_scores_unknown_dataset",
    "analysis_runs_negative_seconds",
    "thumbnail_not_an_image",
]


_VIEW_READS: dict[tuple[str, str], set[str]] = {}


def view_reads(monkeypatch, root, spec) -> set[str]:
    """The tables `spec`'s page reads when a link opens it on `root` (which must stay as it
    is: recorded once per session), among those its spec declares (tests/test_page_tables.py)."""
    key = (str(root), spec.name)
    if key not in _VIEW_READS:
        st.cache_data.clear()  # a cached view runs no query
        st.cache_resource.clear()
        with read_log() as reads:
            assert_clean(open_app(monkeypatch, root, spec.path))
        _VIEW_READS[key] = reads & set(spec.tables)
    return _VIEW_READS[key]


@pytest.mark.parametrize("name", SAMPLE)
@pytest.mark.parametrize("spec", nav.PAGES, ids=lambda s: s.name)
def test_page_names_the_broken_table_or_renders(monkeypatch, factory_template, factory_copy, spec, name):
    """A page shows the problem of a table it reads (file, table, column) without a
    traceback, and renders normally next to a broken table it does not read."""
    m = MALFORMATIONS[name]
    # Home reports every table of its spec (each step present, missing or broken) without
    # reading them; another page, the tables its view reads; problems of the base tables
    # stop every page.
    reads = set(spec.tables) if spec.default else view_reads(monkeypatch, factory_template, spec)
    reads |= set(nav.BASE_TABLES)
    m.apply(Workspace(factory_copy))
    # Problems validate reports whatever tables are asked for make every page unreadable.
    blocking = bool(validate(factory_copy, deep=False, tables=()))
    complete = has_tables(factory_template, spec)
    at = open_app(monkeypatch, factory_copy, spec.path)
    assert not at.exception, [e.message for e in at.exception]
    if not complete and not blocking and at.code and not at.error:
        return  # the page stopped at a missing table, before it reads the broken one
    # Its spec declares more than this view reads (the Clusters page reads captions and
    # features when an image is open): the problems of those are shown where they are read.
    if (m.table in reads or blocking) and not m.deep_only:
        shown = plain(at.error)
        assert m.file in shown and f"table {m.table}" in shown, shown
        assert m.column is None or f"column {m.column}" in shown, shown
    else:
        assert_renders(at, spec, factory_copy)


@pytest.mark.parametrize("name", ["captions_truncated", "features_embedding_float64"])
def test_clusters_names_broken_captions_and_features_where_an_image_reads_them(
    monkeypatch, factory_copy, name
):
    m = MALFORMATIONS[name]
    m.apply(Workspace(factory_copy))
    image = pq.read_table(factory_copy / "clusters/checkpoint_id=ck0/k=4/part-0.parquet")["image_id"][0]
    at = open_app(
        monkeypatch, factory_copy, "pages/clusters.py", query={"ckpt": "ck0", "k": "4", "img": str(image)}
    )
    assert not at.exception, [e.message for e in at.exception]
    shown = plain(at.sidebar.error)
    assert m.file in shown and f"table {m.table}" in shown, shown
