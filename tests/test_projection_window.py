"""views.projection_window and figures.projection: a projection too large to draw point by
point is binned in DuckDB (checked against numpy's histogram2d and a pandas mode), zooming
in far enough returns the points, and a drawn region selects from the whole table."""

import numpy as np
import pandas as pd
import pytest
from matplotlib.path import Path as MplPath

from conceptlens.db import WorkspaceDB
from conceptlens.errors import ConceptLensError
from conceptlens.figures.projection import projection_density, projection_window_figure
from conceptlens.views import clusters as C
from conceptlens.views import projection_window as W

N = 900  # images of the test workspace


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    from harness.factory import make_workspace

    root = tmp_path_factory.mktemp("projection-window") / "ws"
    make_workspace(root, n_images=N, n_checkpoints=1, derived=True)
    return root


@pytest.fixture(scope="module")
def db(root):
    return WorkspaceDB(root)


@pytest.fixture(scope="module")
def table(root) -> pd.DataFrame:
    """Each image's projection, cluster (k = 4) and its cluster's purity, read from the files."""
    proj = pd.read_parquet(root / "projections/checkpoint_id=ck0/method=umap/part-0.parquet")
    cl = pd.read_parquet(root / "clusters/checkpoint_id=ck0/k=4/part-0.parquet")
    pur = pd.read_parquet(root / "cluster_metrics/checkpoint_id=ck0/k=4/part-0.parquet")
    return proj.merge(cl[["image_id", "cluster"]]).merge(pur[["cluster", "purity"]])


def grid_of(bins: pd.DataFrame, n: int, column: str = "count") -> np.ndarray:
    g = np.zeros((n, n))
    g[bins["ix"].to_numpy(), bins["iy"].to_numpy()] = bins[column].to_numpy(float)
    return g


@pytest.mark.parametrize("viewport", [None, (-1.0, 0.7, -0.3, 1.9)])
def test_bin_counts_equal_numpy_histogram2d(db, table, viewport):
    win = W.window(db, "ck0", 4, viewport=viewport, max_points=50, bins=13)
    assert win.attrs["kind"] == "bins" and win.attrs["total"] == N
    vp = win.attrs["viewport"]
    if viewport is None:  # the whole projection: its bounding box
        assert vp == (table.x.min(), table.x.max(), table.y.min(), table.y.max())
    ex, ey = W.bin_edges(vp, 13)
    want, _, _ = np.histogram2d(table.x, table.y, bins=(ex, ey))
    np.testing.assert_array_equal(grid_of(win, 13), want)
    assert win.attrs["n"] == want.sum() and (win["count"] > 0).all()
    # Bin centres sit between the edges numpy uses.
    np.testing.assert_allclose(win["x"], (ex[win.ix] + ex[win.ix + 1]) / 2)
    np.testing.assert_allclose(win["y"], (ey[win.iy] + ey[win.iy + 1]) / 2)


def test_majority_cluster_share_and_mean_purity_per_bin(db, table):
    win = W.window(db, "ck0", 4, max_points=50, bins=6)
    ex, ey = W.bin_edges(win.attrs["viewport"], 6)
    t = table.assign(
        ix=np.clip(np.searchsorted(ex, table.x, side="right") - 1, 0, 5),
        iy=np.clip(np.searchsorted(ey, table.y, side="right") - 1, 0, 5),
    )
    for (ix, iy), g in t.groupby(["ix", "iy"]):
        row = win[(win.ix == ix) & (win.iy == iy)].iloc[0]
        counts = g["cluster"].value_counts()
        top = counts[counts == counts.max()].index.min()  # ties: the smallest id
        assert row["cluster"] == top
        assert row["share"] == pytest.approx(counts.max() / len(g))
        assert row["purity"] == pytest.approx(g["purity"].mean())


def test_a_viewport_with_few_enough_points_returns_exactly_them(db, table):
    vp = (-0.4, 0.3, -0.5, 0.2)
    inside = table[table.x.between(vp[0], vp[1]) & table.y.between(vp[2], vp[3])]
    assert 20 < len(inside) < N
    win = W.window(db, "ck0", 4, viewport=vp, max_points=len(inside))
    assert win.attrs["kind"] == "points" and win.attrs["n"] == len(inside)
    assert sorted(win["image_id"]) == sorted(inside["image_id"])
    # Its columns are the full-size view's (labels, factors, the cluster at k).
    assert set(C.projection(db, "ck0", 4, limit=5).columns) == set(win.columns)
    merged = win.merge(inside, on="image_id")
    assert (merged["cluster_x"] == merged["cluster_y"]).all()
    # One point more than allowed: the same viewport is binned.
    fewer = W.window(db, "ck0", 4, viewport=vp, max_points=len(inside) - 1, bins=4)
    assert fewer.attrs["kind"] == "bins" and fewer["count"].sum() == len(inside)


def test_the_whole_projection_under_the_limit_is_drawn_whole(db):
    win = W.window(db, "ck0", 4, max_points=N)
    assert win.attrs["kind"] == "points" and len(win) == N == win.attrs["total"]


def test_an_unknown_checkpoint_has_no_points(db):
    win = W.window(db, "nope", 4, max_points=10)
    assert win.attrs["kind"] == "points" and win.empty and win.attrs["viewport"] is None


def test_region_ids_come_from_the_whole_table_not_the_bins(db, table):
    """A lasso drawn on the overview selects every image inside it (matplotlib's point in
    polygon test on all the points), not the bins' centres."""
    # A concave (U-shaped) lasso across the middle of the plot.
    poly = np.array([[-1.5, -1.5], [1.5, -1.5], [1.5, 1.5], [0.8, 1.5], [0.8, -0.6], [-0.8, -0.6],
                     [-0.8, 1.5], [-1.5, 1.5]])  # fmt: skip
    region = C.region_text("lasso", poly[:, 0], poly[:, 1])
    got = C.region_images(db, "ck0", 4, region)
    want = table[MplPath(poly).contains_points(table[["x", "y"]].to_numpy())]
    assert len(want) > 100
    assert sorted(got["image_id"]) == sorted(want["image_id"])
    box = C.region_images(db, "ck0", 4, "box:-0.5,0.25,-2,0.1")
    inside = table[table.x.between(-0.5, 0.25) & table.y.between(-2, 0.1)]
    assert sorted(box["image_id"]) == sorted(inside["image_id"])


def test_viewports_parse_and_zoom():
    assert W.parse_viewport("-1,2.5,0,4") == (-1.0, 2.5, 0.0, 4.0)
    assert W.parse_viewport(W.viewport_text((-1.0, 2.5, 0.0, 4.0))) == (-1.0, 2.5, 0.0, 4.0)
    # 4x narrower along each axis, centred on the click.
    assert W.zoom_at((0, 8, -4, 4), 1.0, 2.0) == (0.0, 2.0, 1.0, 3.0)
    for bad in ("1,2,3", "a,b,c,d", "2,1,0,1", "0,1,5,5", "0,inf,0,1"):
        with pytest.raises(ConceptLensError, match="viewport"):
            W.parse_viewport(bad)
    with pytest.raises(ConceptLensError, match="bins"):
        W.binned(None, "ck0", 4, (0, 1, 0, 1), bins=0)
    with pytest.raises(ConceptLensError, match="max_points"):
        W.window(None, "ck0", 4, max_points=0)


def test_density_figure_puts_each_bin_in_its_cell(db):
    win = W.window(db, "ck0", 4, max_points=50, bins=9)
    fig = projection_window_figure(win)
    heat, *targets = fig.data
    assert heat.type == "heatmap" and {t.type for t in targets} == {"scattergl"}
    z = np.asarray(heat.z, float)
    # z[row iy][column ix] = log10(count); empty bins are blank.
    np.testing.assert_allclose(10 ** z[win.iy, win.ix], win["count"], rtol=1e-6)  # sent as float32
    assert np.isnan(z).sum() == 81 - len(win)
    x0, x1, y0, y1 = win.attrs["viewport"]
    assert heat.x0 == pytest.approx(x0 + (x1 - x0) / 18)
    lo, hi = fig.layout.xaxis.range  # the bins and a margin around them
    assert lo < x0 and hi > x1 and hi - lo == pytest.approx(1.04 * (x1 - x0))
    # The invisible targets carry each bin's hover values and sit at its centre; a bin of
    # one image says "1 image".
    xs = np.concatenate([t.x for t in targets])
    ys = np.concatenate([t.y for t in targets])
    custom = np.concatenate([t.customdata for t in targets])
    order = np.lexsort((ys, xs))
    want = win.sort_values(["x", "y"])
    np.testing.assert_allclose(xs[order], want["x"], rtol=1e-6)
    assert [int(c[0]) for c in custom[order]] == list(want["count"])
    np.testing.assert_allclose([c[3] for c in custom[order]], want["purity"].round(2), rtol=1e-6)
    assert (win["count"] == 1).any() and (win["count"] > 1).any()
    for t in targets:
        counts = {int(c[0]) for c in t.customdata}
        noun = "image" if counts == {1} else "images"
        assert t.hovertemplate.startswith("%{customdata[0]:,} " + noun + "<br>")
        assert counts == {1} or 1 not in counts
    by_purity = projection_density(win, win.attrs["viewport"], 9, value="purity")
    np.testing.assert_allclose(
        np.asarray(by_purity.data[0].z, float)[win.iy, win.ix], win["purity"], rtol=1e-6
    )
    # A bin without a purity keeps its place and says so in words, not as NaN.
    gap = win.copy()
    gap.loc[gap.index[0], "purity"] = np.nan
    _, *gap_targets = projection_density(gap, gap.attrs["viewport"], 9).data
    text = [t for t in gap_targets if any(c[3] == "\u2014" for c in t.customdata)]
    assert [len(t.x) for t in text] == [1] and text[0].x[0] == pytest.approx(win["x"].iloc[0])
    assert sum(len(t.x) for t in gap_targets) == len(win) and "NaN" not in text[0].hovertemplate
    with pytest.raises(ValueError, match="value"):
        projection_density(win, win.attrs["viewport"], 9, value="size")


def test_zoomed_points_figure_keeps_the_viewport(db):
    vp = (-0.4, 0.3, -0.5, 0.2)
    win = W.window(db, "ck0", 4, viewport=vp, max_points=N)
    fig = projection_window_figure(win, color="cluster", highlight=1, zoomed=True)
    assert {t.type for t in fig.data} == {"scattergl"}
    assert tuple(fig.layout.xaxis.range) == vp[:2] and tuple(fig.layout.yaxis.range) == vp[2:]
    ids = {c[0] for t in fig.data for c in t.customdata}
    assert ids == set(win["image_id"])


def test_the_catalog_draws_the_overview_of_the_whole_projection(db):
    from conceptlens.figures import catalog

    f = catalog.FIGURES["umap_density"]
    p = f.resolve(db, {"density": "images"})
    assert (p["ckpt"], p["k"]) == ("ck0", 4) and not f.default
    heat = f.build(db, p).data[0]
    assert np.nansum(np.round(10 ** np.asarray(heat.z, float))) == N


@pytest.mark.parametrize(
    "region",
    [
        "box:-0.5,0.25,-2,0.1",
        # concave, with a horizontal edge (its division by zero must not count)
        "lasso:-1.5,-1.5,1.5,-1.5,1.5,1.5,0.8,1.5,0.8,-0.6,-0.8,-0.6,-0.8,1.5,-1.5,1.5",
    ],
)
def test_region_selection_in_duckdb_equals_the_numpy_one(db, region):
    """The page's selection of a large UMAP (labels counted and pages cut in DuckDB) is
    the selection of `views.clusters.region_images`, row for row."""
    want = C.region_images(db, "ck0", 4, region)
    assert len(want) > 50
    got = W.region_images(db, "ck0", 4, region)
    pd.testing.assert_frame_equal(got, want)
    page = W.region_images(db, "ck0", 4, region, offset=20, limit=20)
    pd.testing.assert_frame_equal(page, want.iloc[20:40].reset_index(drop=True))
    labels = C.top_labels(W.region_labels(db, "ck0", 4, region))
    pd.testing.assert_frame_equal(labels, C.label_counts(want), check_dtype=False)


def test_paper_exports_leave_out_the_invisible_targets(db):
    """A PDF of the overview held one invisible SVG marker per bin (2.5 MB of SVG at
    12,657 bins); on paper only the heatmap is drawn, on screen both."""
    from conceptlens.figures.export import paper_figure

    fig = projection_window_figure(W.window(db, "ck0", 4, max_points=50, bins=9))
    assert [t.type for t in paper_figure(fig, 7.0).data] == ["heatmap"]
    assert [t.type for t in fig.data][:2] == ["heatmap", "scattergl"]
