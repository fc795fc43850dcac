"""The Clusters page's views and figures, without Streamlit: whole-word caption search,
sorting, selections (clusters, a drawn region), one image's details and neighbours, label
counts, and the figures' colours, draw order and highlight — each checked against a value
computed another way (the stored Parquet files, numpy, matplotlib, published CIELAB values)."""

import io

import numpy as np
import pandas as pd
import pytest

from conceptlens import views
from conceptlens.db import WorkspaceDB
from conceptlens.figures import theme
from conceptlens.figures.clusters import (
    FOCUS,
    MAX_LEGEND,
    OTHER,
    label_histogram,
    projection_scatter,
    purity_coherence,
)
from harness.factory import make_workspace

V = views.clusters


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("cviews") / "ws", derived=True).root


@pytest.fixture(scope="module")
def db(root):
    db = WorkspaceDB(root)
    yield db
    db.close()


def stored(root, table, **part) -> pd.DataFrame:
    parts = "/".join(f"{k}={v}" for k, v in part.items())
    return pd.read_parquet(root / table / parts / "part-0.parquet")


# ---- finding clusters ----------------------------------------------------------------------
def test_caption_search_matches_whole_words_in_any_order():
    caps = pd.Series(
        ["a red circle", "a checkered square", "Red, large", "a redder star", None, "circle (red)", "a.b c"]
    )

    def hits(text):
        return list(caps.index[V.caption_matches(caps, text)])

    assert hits("red") == [0, 2, 5]  # not "checkered", not "redder", case ignored
    assert hits("circle red") == [0, 5]  # every word, any order
    assert hits("RED circle") == [0, 5]
    assert hits("a.*") == [] and hits("(red)") == [5]  # plain text, no patterns
    assert hits("a.b") == [6]
    assert hits("") == hits("   ") == list(range(7))  # nothing typed: every caption, even none


def test_filtered_clusters_sorts_with_missing_values_last(db, root):
    t = V.filtered_clusters(db, "toy", "ck1", 4, sort="purity", descending=True)
    want = stored(root, "cluster_metrics", checkpoint_id="ck1", k=4).sort_values("purity", ascending=False)
    assert list(t["cluster"]) == list(want["cluster"])
    asc = V.filtered_clusters(db, "toy", "ck1", 4, sort="size")
    assert list(asc["size"]) == sorted(asc["size"])
    # Words must be whole: the factory's captions are "a <colour> shape".
    assert list(V.filtered_clusters(db, "toy", "ck1", 4, text="re")["cluster"]) == []
    assert set(V.filtered_clusters(db, "toy", "ck1", 4, text="shape RED")["caption"]) == {"a red shape"}
    with pytest.raises(ValueError, match="sort must be one of"):
        V.filtered_clusters(db, "toy", "ck1", 4, sort="caption; DROP")


def test_missing_purity_sorts_last():
    m = pd.DataFrame({"cluster": [0, 1, 2], "size": [3, 3, 3], "purity": [0.2, None, 0.9]})

    class FakeDB:
        def query(self, sql, params):
            return m.copy()

        def has(self, table):
            return False

    for desc, order in ((False, [0, 2, 1]), (True, [2, 0, 1])):
        t = V.filtered_clusters(FakeDB(), "d", "c", 3, sort="purity", descending=desc)
        assert list(t["cluster"]) == order


# ---- selections ------------------------------------------------------------------------------
def test_selection_images_are_every_image_of_the_clusters(db, root):
    assign = stored(root, "clusters", checkpoint_id="ck2", k=4)
    one = V.selection_images(db, "ck2", 4, (1,))
    want = assign[assign["cluster"] == 1].sort_values(["distance", "image_id"])
    assert list(one["image_id"]) == list(want["image_id"])  # all of them, nearest the centre first
    both = V.selection_images(db, "ck2", 4, (3, 1))
    assert sorted(both["image_id"]) == sorted(assign.loc[assign["cluster"].isin([1, 3]), "image_id"])
    assert list(both["cluster"]) == sorted(both["cluster"])
    assert V.selection_images(db, "ck2", 4, ()).empty


def test_a_selection_is_counted_and_paged_in_duckdb_as_pandas_would(db):
    everything = V.selection_images(db, "ck2", 4, (0, 1, 2, 3))
    # Paging: the pages, one after another, are the whole selection in its order.
    pages = [V.selection_images(db, "ck2", 4, (0, 1, 2, 3), offset=o, limit=7) for o in range(0, 70, 7)]
    assert all(len(p) <= 7 for p in pages)
    paged = pd.concat(pages, ignore_index=True)
    assert list(paged["image_id"]) == list(everything["image_id"])
    # Label counts: the same as counting the whole selection in pandas, cut included.
    for clusters, top in (((0, 1, 2, 3), 30), ((0, 1, 2, 3), 2), ((3,), 30)):
        counted = V.selection_labels(db, "ck2", 4, clusters)
        want = V.label_counts(V.selection_images(db, "ck2", 4, clusters), top=top)
        got = V.top_labels(counted, top=top)
        assert (
            got.astype({"label_name": str}).values.tolist()
            == want.astype({"label_name": str}).values.tolist()
        )
    assert int(V.selection_labels(db, "ck2", 4, (0, 1, 2, 3))["images"].sum()) == len(everything)


def test_points_in_polygon_agrees_with_matplotlib():
    from matplotlib.path import Path

    rng = np.random.default_rng(0)
    pts = rng.uniform(-1, 2, (4000, 2))
    # A concave "C" shape, with a horizontal edge (division by zero in the ray test).
    poly = np.array([[0, 0], [1, 0], [1, 0.3], [0.3, 0.3], [0.3, 0.7], [1, 0.7], [1, 1], [0, 1]], float)
    got = V.points_in_polygon(pts[:, 0], pts[:, 1], poly)
    want = Path(poly).contains_points(pts)
    assert got.sum() > 200 and (got == want).all()


def test_region_text_round_trip_and_bad_regions():
    kind, pts = V.parse_region(V.region_text("box", [2.0, -1.5], [0.25, 3.0]))
    assert kind == "box" and pts.tolist() == [[-1.5, 0.25], [2.0, 3.0]]
    xs, ys = np.linspace(0, 1, 500), np.sin(np.linspace(0, 3, 500))
    text = V.region_text("lasso", xs, ys)
    kind, pts = V.parse_region(text)
    assert kind == "lasso" and 60 <= len(pts) <= 80 and len(text) < 1500  # thinned for the URL
    for bad in ("box:1,2,3", "lasso:1,2,3,4", "circle:1,2,3", "box:a,b,c,d", "box:1,nan,2,3", ""):
        with pytest.raises(ValueError, match="region"):
            V.parse_region(bad)


def test_region_images_box_and_lasso(db, root):
    proj = stored(root, "projections", checkpoint_id="ck0", method="umap")
    everything = V.region_images(db, "ck0", 4, "box:-100,100,-100,100")
    assert sorted(everything["image_id"]) == sorted(proj["image_id"])
    tri = np.array([[-3.0, -3.0], [3.0, -3.0], [0.0, 0.5]])
    text = "lasso:" + ",".join(f"{v:g}" for v in tri.ravel())
    inside = proj[
        [
            # Barycentric test of the triangle: another way to the same set.
            _in_triangle(x, y, tri)
            for x, y in zip(proj["x"], proj["y"])
        ]
    ]
    got = V.region_images(db, "ck0", 4, text)
    assert 0 < len(got) < len(proj) and sorted(got["image_id"]) == sorted(inside["image_id"])
    assign = stored(root, "clusters", checkpoint_id="ck0", k=4).set_index("image_id")["cluster"]
    assert (got.set_index("image_id")["cluster"] == assign.loc[got["image_id"]]).all()


def _in_triangle(x, y, t) -> bool:
    (x1, y1), (x2, y2), (x3, y3) = t
    d = (y2 - y3) * (x1 - x3) + (x3 - x2) * (y1 - y3)
    a = ((y2 - y3) * (x - x3) + (x3 - x2) * (y - y3)) / d
    b = ((y3 - y1) * (x - x3) + (x1 - x3) * (y - y3)) / d
    return a >= 0 and b >= 0 and 1 - a - b >= 0


def test_label_counts_and_other_labels():
    imgs = pd.DataFrame({"label_name": ["a"] * 5 + ["b"] * 3 + ["c"] * 3 + ["d"] + [None] * 2})
    c = V.label_counts(imgs)
    assert c.values.tolist() == [["a", 5], ["b", 3], ["c", 3], ["no label", 2], ["d", 1]]
    top = V.label_counts(imgs, top=3)
    assert top.values.tolist() == [["a", 5], ["b", 3], ["other labels (3)", 6]]
    assert top["images"].sum() == len(imgs)


# ---- one image -------------------------------------------------------------------------------------
def test_neighbours_are_the_cosine_nearest(db, root):
    ids, emb = db.features("ck1")
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    i = 5
    sims = unit @ unit[i]
    order = [j for j in np.lexsort((ids, -sims)) if j != i][:8]
    near = V.neighbours(db, "ck1", 4, ids[i], n=8)
    assert list(near["image_id"]) == [ids[j] for j in order]
    np.testing.assert_allclose(near["similarity"], sims[order], atol=1e-5)
    assign = stored(root, "clusters", checkpoint_id="ck1", k=4).set_index("image_id")["cluster"]
    assert list(near["cluster"]) == list(assign.loc[near["image_id"]])
    assert V.neighbours(db, "ck1", 4, "no-such-image").empty


def test_image_details_and_captions(db, root):
    d = V.image_details(db, "toy-0007", "ck2", 4)
    assert len(d) == 1
    r = d.iloc[0]
    assign = stored(root, "clusters", checkpoint_id="ck2", k=4).set_index("image_id")
    proj = stored(root, "projections", checkpoint_id="ck2", method="umap").set_index("image_id")
    assert (r["label_name"], r["shape"], r["cluster"]) == (
        "green",
        "circle",
        assign.loc["toy-0007", "cluster"],
    )
    assert (r["x"], r["y"]) == tuple(proj.loc["toy-0007", ["x", "y"]])
    assert V.image_details(db, "nope", "ck2", 4).empty
    caps = V.image_captions(db, "toy-0007")
    assert caps.values.tolist() == [["groundtruth", "a green circle"]]


# ---- figures -----------------------------------------------------------------------------------
def test_theme_colour_space_against_published_cielab_values():
    # sRGB -> CIELAB (D65) reference values (e.g. Bruce Lindbloom's calculator).
    got = theme._lab(np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]))
    want = [[100.0, 0.0, 0.0], [53.24, 80.09, 67.20], [32.30, 79.19, -107.86], [0.0, 0.0, 0.0]]
    np.testing.assert_allclose(got, want, atol=0.05)


@pytest.mark.parametrize("n", [5, 17, 24, 30, 71, 120])
def test_categorical_colours_are_distinct(n):
    colours = theme.categorical(n)
    assert len(colours) == n and len(set(colours)) == n
    assert colours[: min(n, len(theme.PALETTE))] == list(theme.PALETTE[:n])
    lab = theme._lab(theme._hex_rgb(colours))
    d = np.linalg.norm(lab[:, None] - lab[None], axis=2)
    np.fill_diagonal(d, np.inf)
    # The palette's own closest pair (two blues, 14.4 apart) bounds it; a hue walk gave 3.4.
    assert d.min() > 14
    assert (lab[:, 0] < 90).all()  # none too light to see on white


def test_many_categories_get_a_legend_distinct_colours_and_small_ones_on_top():
    rng = np.random.default_rng(1)
    n_cl = MAX_LEGEND  # the most that are each coloured
    sizes = np.arange(1, n_cl + 1)[::-1] * 3  # 72 down to 3 points
    cl = np.repeat(np.arange(n_cl), sizes)
    pts = pd.DataFrame(
        {
            "image_id": [f"i{j}" for j in range(len(cl))],
            "x": rng.normal(size=len(cl)),
            "y": 0.0,
            "cluster": cl,
        }
    )
    fig = projection_scatter(pts, "cluster", highlight=7)
    cats = [t for t in fig.data if t.mode == "markers" and not t.name.endswith("(selected)")]
    assert len(cats) == n_cl and all(t.showlegend is not False for t in cats)
    assert len({t.marker.color for t in cats}) == n_cl
    drawn = [len(t.x) for t in cats]
    assert drawn == sorted(drawn, reverse=True)  # largest first: small ones are drawn over them
    legend = sorted(cats, key=lambda t: t.legendrank)
    assert [t.name for t in legend] == [str(c) for c in range(n_cl)]  # legend in cluster order
    (ring,) = [t for t in fig.data if t.name == "cluster 7 (selected)"]
    assert len(ring.x) == sizes[7] and {row[1] for row in ring.customdata} == {"7"}
    # Every cluster id is printed at its median point, unless it would cover another one.
    (ids,) = [t for t in fig.data if t.mode == "text"]
    assert ids.text[0] == "7" and set(ids.text) <= {str(c) for c in range(n_cl)}
    med = pts[pts["cluster"] == 7][["x", "y"]].median()
    assert (ids.x[0], ids.y[0]) == (med["x"], med["y"])


def _scale_points(n=6000, n_clusters=224, n_labels=300, seed=2):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "image_id": [f"i{j}" for j in range(n)],
            "x": rng.normal(size=n),
            "y": rng.normal(size=n),
            "cluster": rng.integers(0, n_clusters, n),
            "label_name": [f"label {v:03d}" for v in rng.integers(0, n_labels, n)],
        }
    )


def test_hundreds_of_clusters_colour_the_chosen_one_over_grey():
    pts = _scale_points()
    fig = projection_scatter(pts, "cluster", highlight=5)
    markers = [t for t in fig.data if t.mode == "markers"]
    # Grey others, the chosen cluster in colour and then the largest others, its ring: not
    # 224 traces of look-alike colours.
    sizes = pts["cluster"].value_counts()
    largest = [c for c in sorted(sizes.index, key=lambda c: (-sizes[c], c)) if c != 5][: FOCUS - 1]
    assert markers[0].name == f"{224 - FOCUS} other cluster values"
    assert markers[-1].name == "cluster 5 (selected)"
    assert {t.name for t in markers[1:-1]} == {"5", *map(str, largest)}
    grey, mine = markers[0], next(t for t in markers if t.name == "5")
    assert grey.marker.color == OTHER and mine.marker.color != OTHER
    assert len({t.marker.color for t in markers[1:-1]}) == FOCUS
    assert sum(len(t.x) for t in markers[:-1]) == len(pts) and len(mine.x) == (pts["cluster"] == 5).sum()
    # Every point still carries its own cluster in the hover, the grey ones too.
    got = {row[0]: row[1] for t in markers[:-1] for row in t.customdata}
    assert got == dict(zip(pts["image_id"], pts["cluster"].astype(str)))
    # Without a chosen cluster the FOCUS largest are coloured, largest drawn first.
    free = [t for t in projection_scatter(pts, "cluster").data if t.mode == "markers"]
    sizes = pts["cluster"].value_counts()
    want = sorted(sizes.index, key=lambda c: (-sizes[c], c))[:FOCUS]
    assert [t.name for t in free[1:]] == [str(c) for c in want]


def test_hundreds_of_labels_colour_those_of_the_chosen_cluster():
    pts = _scale_points()
    fig = projection_scatter(pts, "label_name", highlight=3)
    coloured = [t for t in fig.data if t.mode == "markers"][1:-1]  # between grey and the ring
    mine = pts.loc[pts["cluster"] == 3, "label_name"].value_counts()
    want = sorted(mine.index, key=lambda v: (-mine[v], v))[:FOCUS]
    # The chosen cluster's labels, then (it has fewer) the largest others.
    sizes = pts["label_name"].value_counts()
    largest = [v for v in sorted(sizes.index, key=lambda v: (-sizes[v], v)) if v not in want]
    assert {t.name for t in coloured} == {*want, *largest[: FOCUS - len(want)]}
    # ...and each holds every point of its label, not only the chosen cluster's.
    for t in coloured:
        assert len(t.x) == (pts["label_name"] == t.name).sum()


def test_region_is_drawn_as_the_plot_selection():
    pts = pd.DataFrame({"image_id": ["a", "b"], "x": [0.0, 1.0], "y": [0.0, 1.0], "cluster": [0, 1]})
    box = projection_scatter(pts, region=V.parse_region("box:0,1,2,3")).layout.selections[0]
    assert (box.type, box.x0, box.x1, box.y0, box.y1) == ("rect", 0, 1, 2, 3)
    lasso = projection_scatter(pts, region=V.parse_region("lasso:0,0,1,0,1,1")).layout.selections[0]
    assert lasso.type == "path" and lasso.path == "M0.0,0.0L1.0,0.0L1.0,1.0Z"


def test_purity_plot_rings_the_chosen_cluster_and_clicks_name_clusters():
    m = pd.DataFrame(
        {
            "cluster": [0, 1, 2],
            "size": [4, 5, 6],
            "purity": [0.2, 0.5, 0.9],
            "coherence_random": [0.6, 0.7, 0.8],
            "coherence_hard": [0.55, 0.65, 0.75],
        }
    )
    fig = purity_coherence(m, selected=1)
    assert [int(row[0]) for row in fig.data[0].customdata] == [0, 1, 2]
    ring = fig.data[-1]
    assert list(ring.x) == [0.5, 0.5] and list(ring.y) == [0.7, 0.65]
    assert fig.layout.clickmode == "event+select"
    assert len(purity_coherence(m).data) == 2  # nothing ringed without a choice


def test_label_histogram_most_frequent_on_top():
    fig = label_histogram(pd.DataFrame({"label_name": ["a", "b"], "images": [5, 2]}))
    assert list(fig.data[0].x) == [5, 2] and fig.layout.yaxis.autorange == "reversed"
    assert fig.layout.yaxis.tickfont.size >= theme.MIN_FONT_PX


def test_selection_csv_lists_every_image_once(db):
    from components.cluster_tables import selection_csv

    rows = V.selection_images(db, "ck0", 4, (0, 1, 2, 3))
    back = pd.read_csv(io.BytesIO(selection_csv(rows)))
    assert list(back.columns) == ["image_id", "label_name", "cluster"]
    assert sorted(back["image_id"]) == [f"toy-{i:04d}" for i in range(48)]


def test_views_of_many_rows_get_the_app_cache_of_few_entries(monkeypatch, root):
    from components import data

    calls = []

    def name(fn):
        return f"{fn.__module__}.{fn.__qualname__}"

    monkeypatch.setattr(data, "_view", lambda db, fn, args: calls.append(("few rows", name(fn))))
    monkeypatch.setattr(data, "_large_view", lambda db, fn, args: calls.append(("many", name(fn))))
    ws = data.AppWorkspace(root)
    ws.view(V.projection, checkpoint="ck0", k=4)
    ws.view(V.region_images, checkpoint="ck0", k=4, region="box:0,1,0,1")
    ws.view(views.checkpoints.linked_projection, dataset="toy", k=4, a="ck0", b="ck1", side="a")
    ws.view(V.cluster_table, dataset="toy", checkpoint="ck0", k=4)
    assert [kind for kind, _ in calls] == ["many", "many", "many", "few rows"]
    assert calls[0][1] == "conceptlens.views.clusters.projection"


@pytest.mark.parametrize("colour", ["cluster in A", "cluster in B", "label_name"])
@pytest.mark.parametrize("limit", [10_000, 9])
def test_linked_projection_is_the_merge_of_both_projections(db, colour, limit):
    # The merge of the two sampled projections, as the page first computed it.
    pa_, pb = V.projection(db, "ck0", 4, limit=limit), V.projection(db, "ck1", 4, limit=limit)
    both = pa_.merge(pb[["image_id", "x", "y", "cluster"]], on="image_id", suffixes=("_a", "_b"))
    want_colour = {
        "cluster in A": both["cluster_a"].astype("Int64"),
        "cluster in B": both["cluster_b"].astype("Int64"),
        "label_name": both["label_name"],
    }[colour]
    for side in ("a", "b"):
        got = views.checkpoints.linked_projection(db, "toy", 4, "ck0", "ck1", side, colour, limit=limit)
        assert list(got.columns) == ["image_id", "x", "y", "cluster", colour]
        assert list(got["image_id"]) == list(both["image_id"]) and 0 < len(got) <= limit
        np.testing.assert_array_equal(got["x"], both[f"x_{side}"])
        np.testing.assert_array_equal(got["y"], both[f"y_{side}"])
        assert list(got["cluster"].astype(int)) == list(both[f"cluster_{side}"].astype(int))
        assert list(got[colour].astype(str)) == list(want_colour.astype(str))
    with pytest.raises(ValueError, match="colour"):
        views.checkpoints.linked_projection(db, "toy", 4, "ck0", "ck1", "a", "no such column")
