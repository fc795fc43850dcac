"""AppTest of where a scored selection comes from (issue 26 item 2) beyond the Clusters UMAP:
a box or lasso on the Checkpoints page's UMAP of A and on the Similarity page's map reach the
same *Score this selection* panel (components/selection_panel.py), and a caption filter picks
exactly the images whose captions contain a text (checked against captions.parquet read with
pandas). Each test fails if its source is ignored (other ids, or none, reach the scores)."""

import json
import sys

import numpy as np
import pandas as pd
from matplotlib.path import Path as MplPath
from streamlit.testing.v1 import AppTest

from conceptlens.db import WorkspaceDB
from conceptlens.embedding.psych import psych_id
from conceptlens.views import selection as VS
from tests.conftest import ROOT
from tests.test_app import assert_clean, plain
from tests.test_app_selection import assert_scores_match, scores_shown


def open_page(monkeypatch, root, page, query) -> AppTest:
    monkeypatch.setattr(sys, "argv", ["app.py", "--workspace", str(root)])
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    for k, v in query.items():
        at.query_params[k] = v
    at.switch_page(page)
    return at.run()


def projection_components(at) -> list:
    return [
        e for e in at.get("component_instance") if e.proto.component_name.endswith("projection.projection")
    ]


def inside(points: pd.DataFrame, polygon) -> set[str]:
    """The ids of `points` inside the closed polygon, by matplotlib (not the library's rule)."""
    poly = np.asarray(polygon, float)
    return set(points.image_id[MplPath(poly).contains_points(points[["x", "y"]].to_numpy())])


def lasso_text(poly) -> str:
    return "lasso:" + ",".join(f"{x:.5g},{y:.5g}" for x, y in poly)


def left_lasso(points: pd.DataFrame) -> list[tuple[float, float]]:
    """A triangle around roughly the left half of `points` (some inside, some out)."""
    x, y = points["x"], points["y"]
    cut = float(np.median(x))
    return [
        (float(x.min()) - 1, float(y.min()) - 1),
        (cut, float(np.median(y))),
        (float(x.min()) - 1, float(y.max()) + 1),
    ]


def test_a_lasso_on_checkpoint_a_is_scored_on_a(monkeypatch, factory_template):
    proj = pd.read_parquet(factory_template / "projections/checkpoint_id=ck0/method=umap")
    poly = left_lasso(proj)
    want = inside(proj, poly)
    assert 0 < len(want) < len(proj)
    at = open_page(
        monkeypatch,
        factory_template,
        "pages/checkpoints.py",
        {"a": "ck0", "b": "ck2", "region": lasso_text(poly), "score": "1", "nnull": "20"},
    )
    assert_clean(at)
    # A and B, both WebGL views, the page's last two (the aligned frame of "Along training"
    # comes before them on the factory's training run).
    assert len(projection_components(at)) == 3
    db = WorkspaceDB(factory_template)
    assert_scores_match(at, db, "ck0", sorted(want))
    assert "lasso on the UMAP of checkpoint A (ck0" in plain(at.markdown)
    # Without a region the page's own source scores nothing and says where to draw.
    at = open_page(
        monkeypatch, factory_template, "pages/checkpoints.py", {"a": "ck0", "b": "ck2", "score": "1"}
    )
    assert_clean(at)
    assert not [d for d in at.dataframe if "pct. among random sets" in d.value.columns]
    assert any("draw a box or lasso on A's UMAP" in i.value for i in at.info)


def test_a_caption_filter_scores_exactly_the_images_whose_captions_contain_the_text(
    monkeypatch, factory_template
):
    caps = pd.read_parquet(factory_template / "captions.parquet")
    images = pd.read_parquet(factory_template / "images.parquet")
    toy = set(images.loc[images["dataset"] == "toy", "image_id"])
    # Any captioner, ignoring case, a literal text: computed with pandas, not SQL.
    hit = caps[caps["text"].str.lower().str.contains("red", regex=False) & caps["image_id"].isin(toy)]
    want = sorted(set(hit["image_id"]))
    assert 0 < len(want) < len(toy)
    db = WorkspaceDB(factory_template)
    assert VS.captioned_ids(db, "toy", "RED") == want
    assert VS.captioned_ids(db, "toy", "red", captioner="no-such-captioner") == []
    at = open_page(
        monkeypatch,
        factory_template,
        "pages/clusters.py",
        {"ckpt": "ck0", "score": "1", "ssrc": "caption", "scap": "Red", "nnull": "20"},
    )
    assert_clean(at)
    assert at.text_input(key="selp_caption").value == "Red"
    assert_scores_match(at, db, "ck0", want)
    assert "captions (any captioner) containing 'Red'" in plain(at.markdown)
    # The same filter on the Checkpoints page, scored on A.
    at = open_page(
        monkeypatch,
        factory_template,
        "pages/checkpoints.py",
        {"a": "ck1", "b": "ck2", "score": "1", "ssrc": "caption", "scap": "red", "nnull": "20"},
    )
    assert_clean(at)
    assert_scores_match(at, db, "ck1", want)
    # Typing another text changes the images scored, and the link keeps it.
    at.text_input(key="selp_caption").set_value("square").run()
    assert_clean(at)
    square = sorted(set(caps.loc[caps["text"].str.contains("square", regex=False), "image_id"]) & toy)
    assert_scores_match(at, db, "ck1", square)
    assert at.query_params["scap"] == ["square"] or at.query_params["scap"] == "square"
    # A text no caption holds: nothing to score, said plainly.
    at.text_input(key="selp_caption").set_value("zebra").run()
    assert_clean(at)
    assert any("contains zebra" in i.value for i in at.info)
    assert not [d for d in at.dataframe if "pct. among random sets" in d.value.columns]


def test_a_lasso_on_the_similarity_map_is_scored_on_the_page_checkpoint(monkeypatch, factory_template):
    proj = pd.read_parquet(factory_template / f"projections/checkpoint_id={psych_id('toy')}/method=umap")
    poly = left_lasso(proj)
    want = inside(proj, poly)
    assert 0 < len(want) < len(proj)
    at = open_page(
        monkeypatch,
        factory_template,
        "pages/similarity.py",
        {"ds": "toy", "ckpt": "ck1", "region": lasso_text(poly), "score": "1", "nnull": "20"},
    )
    assert_clean(at)
    # The map is the WebGL view (no Plotly map), with every embedded point and the region.
    (el,) = projection_components(at)
    args = json.loads(el.proto.json_args)
    assert args["region"]["kind"] == "lasso"
    xy = np.frombuffer(next(a.bytes for a in el.proto.special_args if a.key == "xy"), "float32")
    assert len(xy) == 2 * len(proj)
    assert "People's similarity map" not in [
        json.loads(c.proto.spec).get("layout", {}).get("title", {}).get("text")
        for c in at.get("plotly_chart")
    ]
    db = WorkspaceDB(factory_template)
    assert sorted(VS.region_ids(db, psych_id("toy"), lasso_text(poly))) == sorted(want)
    assert_scores_match(at, db, "ck1", sorted(want))
    assert "lasso on people's similarity map of toy" in plain(at.markdown)
    assert len(scores_shown(at)) > 3


def test_the_command_line_scores_a_caption_filter_as_the_view_does(factory_template, capsys):
    from conceptlens.cli import main

    caps = pd.read_parquet(factory_template / "captions.parquet")
    want = sorted(set(caps.loc[caps["text"].str.lower().str.contains("blue", regex=False), "image_id"]))
    db = WorkspaceDB(factory_template)
    expected = VS.format_scores(VS.score(db, "ck0", image_ids=want, n_null=20, seed=0))
    args = ["score", "--workspace", str(factory_template), "--checkpoint", "ck0", "--null", "20"]
    assert main([*args, "--caption", "BLUE"]) == 0
    assert capsys.readouterr().out.strip() == expected.strip()
    # A text no caption holds, or a captioner that wrote none: a clear error naming it.
    assert main([*args, "--caption", "zebra"]) != 0
    assert "no caption (any captioner) of dataset 'toy' contains 'zebra'" in capsys.readouterr().err
    assert main([*args, "--caption", "blue", "--captioner", "nobody"]) != 0
    assert "captioner 'nobody'" in capsys.readouterr().err


def test_average_ranks_are_scipys_rankdata():
    """metrics.selection.average_ranks (the learnability AUC's ranks without scipy.stats)
    gives scipy's average ranks bit for bit, ties and all, so no score changes."""
    from scipy.stats import rankdata

    from conceptlens.metrics.selection import auc_rows, average_ranks

    rng = np.random.default_rng(5)
    for shape, values in (((7, 300), 4), ((3, 50), 50), ((5, 1), 2), ((4, 200), 10**9)):
        a = rng.integers(0, values, shape) / 7  # many ties with few values
        assert np.array_equal(average_ranks(a), rankdata(a, axis=1))
    a = rng.random((6, 400))
    pos = rng.random((6, 400)) < 0.3
    from sklearn.metrics import roc_auc_score

    np.testing.assert_allclose(auc_rows(a, pos), [roc_auc_score(p, x) for p, x in zip(pos, a)], rtol=1e-12)


def test_a_cluster_of_another_checkpoint_is_scored_on_the_page_checkpoint(monkeypatch, factory_template):
    """`ssrc=cluster`: the images of cluster 1 of ck2 (read from its clusters file here),
    scored on the Checkpoints page's A (ck0)."""
    cl = pd.read_parquet(factory_template / "clusters/checkpoint_id=ck2/k=4")
    want = sorted(cl.loc[cl["cluster"] == 1, "image_id"])
    assert 0 < len(want) < len(cl)
    at = open_page(
        monkeypatch,
        factory_template,
        "pages/checkpoints.py",
        {
            "a": "ck0",
            "b": "ck1",
            "score": "1",
            "ssrc": "cluster",
            "sfck": "ck2",
            "sfk": "4",
            "sfc": "1",
            "nnull": "20",
        },
    )
    assert_clean(at)
    assert_scores_match(at, WorkspaceDB(factory_template), "ck0", want)
    assert "cluster 1 of checkpoint ck2 (k=4)" in plain(at.markdown)
