"""AppTest of the Checkpoints page's controls and of what it shows for missing or left-out
values, on the factory workspace (harness/factory.py: toy dataset, ck0..ck2, k = 4)."""

import json
import os

import numpy as np
import pandas as pd
import plotly.io
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from components.formats import CHECKPOINT_FORMATS
from conceptlens import views
from conceptlens.db import WorkspaceDB
from tests.test_app import assert_clean, open_app, plain
from tests.test_app_clusters import projection_args

CHECKPOINTS = "pages/checkpoints.py"
DASH = "\u2014"


def rewrite(ws, rel: str, change) -> None:
    """Replace one Parquet file (`rel` below the workspace) by `change(DataFrame)`, keeping
    its schema. A new file is renamed over it: the copy's files are hard links to the
    session's template, which must not change."""
    path = ws / rel
    old = pq.read_table(path)
    df = change(old.to_pandas())
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(pa.Table.from_pandas(df, schema=old.schema, preserve_index=False), tmp)
    os.replace(tmp, path)


def figures(at) -> list:
    return [plotly.io.from_json(c.proto.spec) for c in at.get("plotly_chart")]


def array(value) -> np.ndarray:
    """A figure's array as sent to the browser (typed arrays travel as base64)."""
    if isinstance(value, dict) and "bdata" in value:
        import base64

        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
    return np.asarray(value, dtype=float)


def table_with(at, column: str) -> pd.DataFrame:
    (t,) = [d for d in at.dataframe if column in d.value.columns]
    return t


def ab_args(at, side: int) -> dict:
    """A's (0) or B's (1) linked UMAP: the page's last two WebGL views (the aligned frame of
    'Along training', components/aligned_section.py, comes before them)."""
    n = sum(e.proto.component_name.endswith("projection.projection") for e in at.get("component_instance"))
    return projection_args(at, n - 2 + side)


def query(at) -> dict:
    return {k: at.query_params[k] for k in at.query_params}


def test_every_choice_round_trips_through_the_url(monkeypatch, factory_template):
    link = {
        "ds": "toy",
        "k": "4",
        "a": "ck2",
        "b": "ck0",
        "sort": "knn_acc",
        "desc": "1",
        "metric": "cl",
        "color": "label_name",
        "share": "0.3",
        "flows": "all flows",
    }
    at = open_app(monkeypatch, factory_template, CHECKPOINTS, query=link)
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]
    assert query(at) == link
    assert at.selectbox(key="ckpts_sort").value == "knn_acc" and at.toggle(key="ckpts_desc").value
    assert at.selectbox(key="ckpts_metric").value == "cl"
    assert at.selectbox(key="ckpts_color").value == "label_name"
    assert at.slider(key="ckpts_share").value == pytest.approx(0.3)
    assert at.radio(key="ckpts_flows").value == "all flows"
    # What the choices show: the table by kNN accuracy, highest first (0.9, 0.8, 0.7)...
    assert list(table_with(at, "knn_acc").value["checkpoint_id"]) == ["ck0", "ck1", "ck2"]
    # ... CL against epoch, and both UMAPs coloured by label.
    (epoch,) = [f for f in figures(at) if f.layout.xaxis.title.text == "epoch"]
    assert epoch.layout.yaxis.title.text.startswith("CL")  # "(axis from ...)" where not from 0
    umaps = [ab_args(at, side) for side in (0, 1)]
    assert all(set(u["names"]) == {"red", "green", "blue"} and u["title"] == "label_name" for u in umaps)

    at.selectbox(key="ckpts_sort").set_value("id").run()
    assert_clean(at)
    assert query(at) == {**link, "sort": "id"}
    assert list(table_with(at, "knn_acc").value["checkpoint_id"]) == ["ck2", "ck1", "ck0"]  # ID 7, 6, 5
    at.toggle(key="ckpts_desc").set_value(False).run()
    assert "desc" not in query(at)
    assert list(table_with(at, "knn_acc").value["checkpoint_id"]) == ["ck0", "ck1", "ck2"]


def test_correlations_show_their_intervals_and_a_dash_for_what_is_missing(monkeypatch, factory_copy):
    def intervals(df):
        df = df.set_index("predictor")
        df.loc["cl", ["pearson_lo", "pearson_hi", "kendall_lo", "kendall_hi"]] = [0.1, 0.8, -0.2, 0.6]
        # Half an interval: shown as "[nan, 0.99]" before.
        df.loc["id", ["pearson_lo", "pearson_hi"]] = [np.nan, 0.99]
        return df.reset_index()

    rewrite(factory_copy, "predictor_correlations/dataset=toy/part-0.parquet", intervals)
    at = open_app(monkeypatch, factory_copy, CHECKPOINTS)
    assert_clean(at)
    t = table_with(at, "r 95% CI")
    rows = t.value.set_index("predictor")
    assert rows.loc["CL", "r 95% CI"] == "[0.10, 0.80]" and rows.loc["CL", "τ 95% CI"] == "[-0.20, 0.60]"
    assert rows.loc["CL", "Pearson r"] == 0.5 and rows.loc["CL", "r p"] == 0.2 and rows.loc["CL", "n"] == 3
    assert pd.isna(rows.loc["ID", "r 95% CI"]) and pd.isna(rows.loc["CLID", "τ 95% CI"])
    assert t.proto.placeholder == DASH
    cells = " ".join(str(v) for v in rows.to_numpy().ravel() if isinstance(v, str))
    assert "nan" not in cells.lower() and "None" not in cells
    # The figure draws the same intervals: bars from 0.1 to 0.8 around r = 0.5.
    (forest,) = [f for f in figures(at) if (f.layout.xaxis.title.text or "").startswith("correlation")]
    pearson = forest.data[0]
    assert pearson.name == "Pearson r"
    r, lo, hi = array(pearson.x)[0], array(pearson.error_x.arrayminus)[0], array(pearson.error_x.array)[0]
    assert (r - lo, r + hi) == (pytest.approx(0.1), pytest.approx(0.8))


def test_checkpoints_left_out_of_clid_are_named_with_why(monkeypatch, factory_copy, factory_template):
    at = open_app(monkeypatch, factory_template, CHECKPOINTS)
    assert "All 3 checkpoints with CL, ID and kNN accuracy were embedded on the same images" in plain(
        at.caption
    )
    # What `analyze comparisons` stores for a checkpoint embedded on other images: no CLID.
    rewrite(
        factory_copy,
        "clid_scores/dataset=toy/part-0.parquet",
        lambda df: df.assign(clid=df["clid"].where(df["checkpoint_id"] != "ck2")),
    )
    rewrite(
        factory_copy,
        "checkpoint_metrics/checkpoint_id=ck2/k=4/part-0.parquet",
        lambda df: df.assign(n_images=40),
    )
    at = open_app(monkeypatch, factory_copy, CHECKPOINTS)
    assert_clean(at)
    (info,) = [i for i in at.info if "Left out" in i.value]
    text = plain([info])
    assert "ck2 (40 images)" in text and "the 2 compared checkpoints (48 images each)" in text
    assert pd.isna(table_with(at, "clid").value.set_index("checkpoint_id").loc["ck2", "clid"])


def test_missing_values_show_as_an_em_dash(monkeypatch, factory_copy):
    rewrite(
        factory_copy,
        "checkpoints.parquet",
        lambda df: df.assign(epoch=df["epoch"].astype("Int64").where(df["checkpoint_id"] != "ck1")),
    )
    rewrite(
        factory_copy,
        "clustering_similarity/dataset=toy/part-0.parquet",
        lambda df: df.assign(anmi=df["anmi"].where(df["checkpoint_b"] != "ck1")),
    )
    at = open_app(monkeypatch, factory_copy, CHECKPOINTS, query={"a": "ck0", "b": "ck1"})
    assert_clean(at)
    t = table_with(at, "epoch")
    assert pd.isna(t.value.set_index("checkpoint_id").loc["ck1", "epoch"]) and t.proto.placeholder == DASH
    config = json.loads(t.proto.columns)
    shown = {
        c: cfg["type_config"]["format"] for c, cfg in config.items() if "format" in cfg.get("type_config", {})
    }
    assert shown == CHECKPOINT_FORMATS  # every number of the table in its format
    assert {m.label: m.value for m in at.metric}["aNMI(A, B)"] == DASH


def test_a_region_in_the_link_highlights_the_same_images_in_b(monkeypatch, factory_template):
    region = "box:-0.5,1,-1,0.5"
    at = open_app(
        monkeypatch, factory_template, CHECKPOINTS, query={"a": "ck0", "b": "ck2", "region": region}
    )
    assert_clean(at)
    xy = pd.read_parquet(factory_template / "projections/checkpoint_id=ck0/method=umap/part-0.parquet")
    inside = set(xy.loc[xy.x.between(-0.5, 1) & xy.y.between(-1, 0.5), "image_id"])
    assert 0 < len(inside) < len(xy)
    umap_a, umap_b = ab_args(at, 0), ab_args(at, 1)
    assert umap_a["region"] == {"kind": "box", "x": [-0.5, 1.0], "y": [-1.0, 0.5]}

    def highlighted(u) -> set:
        return set() if u["ring"] is None else {i for i, r in zip(u["ids"], u["ring"]) if r}

    assert highlighted(umap_b) == inside and umap_b["region"] is None
    # Where they lie in B, counted from B's stored clusters.
    b = pd.read_parquet(factory_template / "clusters/checkpoint_id=ck2/k=4/part-0.parquet")
    want = b[b.image_id.isin(inside)].groupby("cluster").size()
    where = table_with(at, "cluster in B").value.set_index("cluster in B")["images"]
    assert where.sort_index().to_dict() == want.sort_index().to_dict()
    assert f"{len(inside)} images selected in A" in plain(at.markdown)
    # The region was drawn in A's coordinates: another A forgets it.
    at.selectbox(key="ckpts_a").set_value("ck1").run()
    assert_clean(at)
    assert "region" not in query(at)
    assert not highlighted(ab_args(at, 1)) and ab_args(at, 0)["region"] is None


def test_largest_keeps_the_links_of_as_largest_clusters(factory_template):
    db = WorkspaceDB(factory_template)
    a = pd.read_parquet(factory_template / "clusters/checkpoint_id=ck1/k=4/part-0.parquet")
    sizes = a.groupby("cluster").size()
    top2 = set(sorted(sizes.index, key=lambda c: (-sizes[c], c))[:2])
    links = views.checkpoints.cluster_links(db, dataset="toy", k=4, a="ck1", b="ck0", largest=2)
    assert set(links["a"]) == top2
    every = views.checkpoints.cluster_links(db, dataset="toy", k=4, a="ck1", b="ck0")
    pd.testing.assert_frame_equal(links, every[every["a"].isin(top2)].reset_index(drop=True))


def test_every_number_of_the_checkpoint_table_has_a_format_declared_once(factory_template):
    """The view returns the columns (in order), components/formats.py how each number is
    shown: a column added to the view without a format would show raw floats."""
    from components.checkpoint_tables import checkpoint_formats

    t = views.checkpoints.checkpoint_table(WorkspaceDB(factory_template), dataset="toy", k=4)
    assert list(t.columns) == list(views.checkpoints.TABLE_COLUMNS)
    numbers = {c for c in t.columns if pd.api.types.is_numeric_dtype(t[c])}
    assert len(numbers) > 10 and set(checkpoint_formats(t)) == numbers
    assert set(CHECKPOINT_FORMATS) <= set(views.checkpoints.TABLE_COLUMNS)


def test_a_pairs_links_counted_from_clusters_are_the_stored_contingency(factory_template):
    """The page counts the links of the two checkpoints it shows from their clusters: the
    same cells as `compare.contingency` and the comparisons analysis' `cluster_links`."""
    from conceptlens.metrics.compare import contingency
    from conceptlens.views.checkpoints import _pair_links

    db = WorkspaceDB(factory_template)
    stored = pd.read_parquet(factory_template / "cluster_links")
    cl = {
        c: pd.read_parquet(factory_template / f"clusters/checkpoint_id={c}/k=4/part-0.parquet")
        for c in ("ck0", "ck1", "ck2")
    }
    cols = ["a", "b", "count", "size_a", "size_b"]
    for a, b in (("ck0", "ck1"), ("ck1", "ck0"), ("ck0", "ck2"), ("ck2", "ck1")):
        got = _pair_links(db, 4, a, b)[cols].astype("int64")
        want = contingency(cl[a], cl[b]).sort_values(["a", "b"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want)
        lo, hi = sorted((a, b))
        row = stored[(stored["checkpoint_a"] == lo) & (stored["checkpoint_b"] == hi) & (stored["k"] == 4)]
        assert int(row["count"].sum()) == int(got["count"].sum()) and len(row) == len(got)


def test_a_choice_that_stops_the_page_still_reaches_the_url(monkeypatch, factory_template):
    # A = B stops the page early (st.stop): its URL change must still be sent.
    at = open_app(
        monkeypatch, factory_template, CHECKPOINTS, query={"ds": "toy", "k": "4", "a": "ck2", "b": "ck1"}
    )
    at.selectbox(key="ckpts_a").set_value("ck1").run()
    assert_clean(at)
    assert any("two different checkpoints" in i.value for i in at.info)
    assert query(at)["a"] == "ck1"


@pytest.fixture(scope="module")
def one_checkpoint(tmp_path_factory):
    """The factory workspace with a single checkpoint (ck0)."""
    from harness.factory import make_workspace

    root = tmp_path_factory.mktemp("one") / "ws"
    make_workspace(root, n_checkpoints=1, derived=True)
    return root


def test_one_checkpoint_says_what_is_needed_instead_of_empty_plots(monkeypatch, one_checkpoint):
    at = open_app(monkeypatch, one_checkpoint, CHECKPOINTS)
    assert_clean(at)
    assert at.selectbox(key="ckpts_a").value == at.selectbox(key="ckpts_b").value == "ck0"
    info = plain(at.info)
    # No empty correlation plot, no table of dashes: what is missing, in words.
    assert "No correlation with kNN accuracy yet" in info and "has 1 at k = 4" in info
    assert not [d for d in at.dataframe if "Pearson r" in d.value.columns or "pearson" in d.value.columns]
    assert "Add a second checkpoint to compare" in info
    assert not [
        f for f in figures(at) if f.layout.xaxis.title.text and "correlation" in f.layout.xaxis.title.text
    ]
    # CL vs ID: one point, one colour, no colour bar spanning a range around one value.
    (clid,) = [f for f in figures(at) if f.layout.xaxis.title.text == "intrinsic dimension (ID)"]
    assert clid.data[0].marker.showscale is False
    # Defaults are not written into the link.
    assert not {"ds", "k", "a", "b"} & set(query(at))


def test_b_defaults_to_another_checkpoint_than_a(monkeypatch, factory_template):
    at = open_app(monkeypatch, factory_template, CHECKPOINTS)
    assert_clean(at)
    a, b = at.selectbox(key="ckpts_a").value, at.selectbox(key="ckpts_b").value
    assert a != b
    # A link that picks B's default as A: B is then another one, not A again.
    at = open_app(monkeypatch, factory_template, CHECKPOINTS, query={"a": b})
    assert_clean(at)
    assert at.selectbox(key="ckpts_a").value == b and at.selectbox(key="ckpts_b").value != b


def test_a_choice_equal_to_its_default_is_left_out_of_the_link(monkeypatch, factory_template):
    """docs/dashboard.md: values equal to their default are left out of the link."""
    at = open_app(monkeypatch, factory_template, CHECKPOINTS)
    assert_clean(at)
    assert query(at) == {}
    order = [o.split(" ")[0] for o in at.selectbox(key="ckpts_b").options]  # "ck0 (run · epoch 3)"
    default_b = at.selectbox(key="ckpts_b").value
    other = next(o for o in order if o not in (default_b, at.selectbox(key="ckpts_a").value))
    at.selectbox(key="ckpts_b").set_value(other).run()
    assert query(at) == {"b": other}
    at.selectbox(key="ckpts_b").set_value(default_b).run()
    assert query(at) == {}
    # A link that names a default keeps it: the reader's link is not rewritten.
    at = open_app(monkeypatch, factory_template, CHECKPOINTS, query={"k": "4"})
    assert_clean(at)
    assert query(at) == {"k": "4"}
