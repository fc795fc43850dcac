"""conceptlens.metrics.compare and the page figures, on hand-worked cases."""

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from conceptlens.figures.checkpoints import (
    _LABEL_CHARS,
    CHECK_SIZES,
    anmi_heatmap,
    cl_id_scatter,
    cluster_sankey,
    correlation_forest,
    highlight_images,
    labelled_nodes,
    metrics_vs_epoch,
    node_label,
    place_labels,
    short_names,
)
from conceptlens.figures.clusters import projection_scatter, purity_coherence
from conceptlens.metrics.compare import (
    cluster_changes,
    contingency,
    epoch_long,
    filter_clusters,
    match_clusters,
    pairwise_anmi,
    purity_bins,
    runs_with_stages,
)


def assign(labels, prefix="i"):
    return pd.DataFrame({"image_id": [f"{prefix}{n}" for n in range(len(labels))], "cluster": labels})


# ---- purity bins ----------------------------------------------------------------------------
def test_purity_bins_pool_trials_like_laina2020():
    m = pd.DataFrame(
        {
            "purity": [0.35, 0.38, 0.95, 1.0, 0.0, None],
            "coherence_random": [0.5, 0.7, 1.0, 0.9, 0.4, 0.8],
            "coherence_hard": [0.5, 0.6, 0.7, 0.8, 0.5, 0.5],
            "coherence_trials": [20, 20, 20, 20, 20, 20],
        }
    )
    b = purity_bins(m).set_index("purity_range")
    # Null purity is left out, purity 0 goes into the first range, 1.0 into the last.
    assert list(b.index) == ["(0.0, 0.1]", "(0.3, 0.4]", "(0.9, 1.0]"]
    assert list(b["clusters"]) == [1, 2, 2]
    assert b.loc["(0.3, 0.4]", "coherence_random_mean"] == pytest.approx(0.6)
    assert b.loc["(0.9, 1.0]", "coherence_hard_mean"] == pytest.approx(0.75)
    # 24 of 40 pooled trials: Clopper-Pearson 95% interval.
    from scipy.stats import beta

    lo, hi = beta.ppf(0.025, 24, 17), beta.isf(0.025, 25, 16)
    assert b.loc["(0.3, 0.4]", "coherence_random_lo"] == pytest.approx(lo)
    assert b.loc["(0.3, 0.4]", "coherence_random_hi"] == pytest.approx(hi)
    assert b.loc["(0.3, 0.4]", "interval"] == "clopper-pearson"


def test_purity_bins_without_trials_use_normal_interval_and_custom_edges():
    m = pd.DataFrame({"purity": [0.1, 0.2, 0.3, 0.8], "coherence_random": [0.5, 0.7, 0.6, 0.9]})
    b = purity_bins(m, edges=(0, 0.5, 1)).set_index("purity_range")
    assert list(b.index) == ["(0.0, 0.5]", "(0.5, 1.0]"]
    x = np.array([0.5, 0.7, 0.6])
    half = 1.96 * x.std(ddof=1) / math.sqrt(3)
    assert b.loc["(0.0, 0.5]", "coherence_random_lo"] == pytest.approx(0.6 - half)
    assert b.loc["(0.0, 0.5]", "coherence_random_hi"] == pytest.approx(0.6 + half)
    # A single cluster has a mean but no interval.
    assert b.loc["(0.5, 1.0]", "coherence_random_mean"] == pytest.approx(0.9)
    assert math.isnan(b.loc["(0.5, 1.0]", "coherence_random_lo"])


def test_purity_bins_empty_and_bad_input():
    assert purity_bins(pd.DataFrame({"purity": [None], "coherence_random": [0.5]})).empty
    with pytest.raises(ValueError, match="coherence_hard"):
        purity_bins(pd.DataFrame({"purity": [0.5]}), values=("coherence_hard",))
    with pytest.raises(ValueError, match="increasing"):
        purity_bins(pd.DataFrame({"purity": [0.5], "coherence_random": [1]}), edges=(0, 0))


def test_filter_clusters():
    m = pd.DataFrame(
        {
            "cluster": [0, 1, 2, 3],
            "size": [5, 50, 40, 30],
            "purity": [0.9, 0.2, 0.6, None],
            "caption": ["a red circle", "A RED square", None, "blue"],
        }
    )
    assert list(filter_clusters(m)["cluster"]) == [0, 1, 2, 3]
    assert list(filter_clusters(m, min_size=10)["cluster"]) == [1, 2, 3]
    assert list(filter_clusters(m, purity_range=(0.5, 1.0))["cluster"]) == [0, 2]
    assert list(filter_clusters(m, text="red")["cluster"]) == [0, 1]
    assert list(filter_clusters(m, min_size=10, text="red ")["cluster"]) == [1]
    assert list(filter_clusters(m, text="(")["cluster"]) == []  # no regex


# ---- aNMI between clusterings ------------------------------------------------------------------
def test_pairwise_anmi_identical_relabelled_and_unrelated():
    a = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    rows = [
        assign(a).assign(checkpoint_id="A"),
        assign([2, 2, 2, 0, 0, 0, 1, 1, 1]).assign(checkpoint_id="B"),  # same partition
        assign([0, 1, 2, 0, 1, 2, 0, 1, 2]).assign(checkpoint_id="C"),
    ]  # independent
    mat = pairwise_anmi(pd.concat(rows))
    assert list(mat.index) == ["A", "B", "C"] and list(mat.columns) == ["A", "B", "C"]
    assert np.allclose(np.diag(mat), 1.0)
    assert mat.loc["A", "B"] == pytest.approx(1.0)
    assert mat.loc["A", "C"] == pytest.approx(mat.loc["C", "A"])
    assert mat.loc["A", "C"] < 0.05
    from sklearn.metrics import adjusted_mutual_info_score

    assert mat.loc["A", "C"] == pytest.approx(
        adjusted_mutual_info_score(a, [0, 1, 2] * 3, average_method="arithmetic")
    )


def test_pairwise_anmi_uses_shared_images_and_order():
    a = assign([0, 0, 1, 1]).assign(checkpoint_id="A")
    b = assign([5, 5, 6, 6, 7], prefix="i").assign(checkpoint_id="B")  # one extra image
    mat = pairwise_anmi(pd.concat([a, b]), order=["B", "A", "missing"])
    assert list(mat.index) == ["B", "A", "missing"]
    assert mat.loc["A", "B"] == pytest.approx(1.0)
    assert mat["missing"].isna().all()


# ---- cluster matching ---------------------------------------------------------------------------
def test_identical_clusterings_match_one_to_one():
    a = assign([0, 0, 1, 1, 2, 2])
    b = assign([7, 7, 8, 8, 9, 9])
    links = match_clusters(a, b)
    assert list(zip(links["a"], links["b"], links["count"])) == [(0, 7, 2), (1, 8, 2), (2, 9, 2)]
    assert (links["kind"] == "one-to-one").all()
    assert (links["share_a"] == 1).all() and (links["share_b"] == 1).all()
    assert cluster_changes(links) == {"splits": 0, "merges": 0, "one_to_one": 3}


def test_a_cluster_split_in_two_is_a_split_and_the_reverse_a_merge():
    a = assign([0] * 10 + [1] * 4)
    b = assign([0] * 5 + [1] * 5 + [2] * 4)
    links = match_clusters(a, b).set_index(["a", "b"])
    assert links.loc[(0, 0), "kind"] == "split" and links.loc[(0, 1), "kind"] == "split"
    assert links.loc[(0, 0), "share_a"] == pytest.approx(0.5)
    assert links.loc[(1, 2), "kind"] == "one-to-one"
    assert cluster_changes(links.reset_index()) == {"splits": 1, "merges": 0, "one_to_one": 1}
    rev = match_clusters(b, a).set_index(["a", "b"])
    assert rev.loc[(0, 0), "kind"] == "merge" and rev.loc[(1, 0), "kind"] == "merge"
    assert cluster_changes(rev.reset_index()) == {"splits": 0, "merges": 1, "one_to_one": 1}


def test_minor_and_partial_links_and_threshold():
    # A0 (10 images): 9 to B0, 1 to B1. B1 also gets all 10 of A1.
    a = assign([0] * 10 + [1] * 10)
    b = assign([0] * 9 + [1] + [1] * 10)
    links = match_clusters(a, b).set_index(["a", "b"])
    assert links.loc[(0, 1), "kind"] == "minor"  # 1/10 of A0, 1/11 of B1
    assert links.loc[(0, 0), "kind"] == "one-to-one"
    assert links.loc[(1, 1), "kind"] == "one-to-one"
    # With a 5% threshold the stray image makes A0 a split and B1 a merge.
    low = match_clusters(a, b, min_share=0.05).set_index(["a", "b"])
    assert low.loc[(0, 1), "kind"] == "split+merge"
    # Big cluster absorbed by a bigger one whose other sources are small: partial.
    a2 = assign([0] * 2 + [1] * 2 + [2] * 2 + [3] * 2 + [4] * 2 + [5] * 2)
    b2 = assign([0] * 12)
    k2 = match_clusters(a2, b2, min_share=0.2)
    assert set(k2["kind"]) == {"partial"}


def test_match_clusters_only_shared_images_and_errors():
    a = assign([0, 0, 1])
    b = pd.DataFrame({"image_id": ["i0", "i1", "x"], "cluster": [3, 3, 4]})
    links = match_clusters(a, b)
    assert list(zip(links["a"], links["b"], links["count"])) == [(0, 3, 2)]
    assert match_clusters(a, pd.DataFrame({"image_id": ["z"], "cluster": [0]})).empty
    with pytest.raises(ValueError, match="more than once"):
        match_clusters(pd.DataFrame({"image_id": ["i0", "i0"], "cluster": [0, 1]}), b)
    with pytest.raises(ValueError, match="min_share"):
        match_clusters(a, b, min_share=0)


# ---- runs over training ---------------------------------------------------------------------------
def test_runs_with_stages_and_epoch_long():
    ck = pd.DataFrame(
        {
            "checkpoint_id": ["r0", "a1", "a2", "b1", "m1", "m2"],
            "model": ["x", "x", "x", "y", "z", "z"],
            "method": ["random", "s", "s", "s", "sup", "sup"],
            "run": [None, "A", "A", "B", None, None],
            "epoch": [None, 2, 1, 1, 5, 10],
            "knn_acc": [0.1, 0.5, 0.4, 0.3, 0.6, 0.7],
            "cl": [0.2] * 6,
        }
    )
    st = runs_with_stages(ck)
    # Run B has one stage; z / sup (no run column value) has two.
    assert list(zip(st["run"], st["epoch"])) == [("A", 1), ("A", 2), ("z / sup", 5), ("z / sup", 10)]
    assert list(st["checkpoint_id"]) == ["a2", "a1", "m1", "m2"]
    long = epoch_long(st)
    assert set(long["metric"]) == {"knn_acc", "cl"} and len(long) == 8
    assert set(long.loc[long["run"] == "A", "method"]) == {"s"}
    fig = metrics_vs_epoch(long, "cl")
    # One line per run, coloured by method: one legend entry per method.
    # The axis shows the data (theme.data_range) and says where it starts when not at 0.
    assert len(fig.data) == 2 and fig.layout.yaxis.title.text == "CL (axis from 0.14)"
    assert [t.name for t in fig.data if t.showlegend is not False] == ["s", "sup"]
    assert list(fig.data[0].y) == [0.2, 0.2] and list(fig.data[1].x) == [5, 10]
    assert metrics_vs_epoch(long).layout.yaxis.title.text.startswith("kNN accuracy")  # the first metric
    # Without a run column, model / method is the run: x / s has 2 epochs, y / s one.
    assert list(runs_with_stages(ck.drop(columns="run").iloc[:4])["checkpoint_id"]) == ["a2", "a1"]


# ---- figures ------------------------------------------------------------------------------------
def cluster_metrics_frame():
    return pd.DataFrame(
        {
            "cluster": [0, 1, 2],
            "size": [10, 20, 30],
            "purity": [0.2, 0.5, None],
            "coherence_random": [0.6, 0.9, 0.7],
            "coherence_random_lo": [0.4, 0.7, 0.5],
            "coherence_random_hi": [0.8, 1.0, 0.9],
            "coherence_hard": [0.5, None, 0.5],
            "coherence_hard_lo": [0.3, None, 0.3],
            "coherence_hard_hi": [0.7, None, 0.7],
            "caption": ["a", "b", None],
        }
    )


def test_purity_coherence_figure_has_two_series_with_error_bars():
    fig = purity_coherence(cluster_metrics_frame())
    assert [t.name for t in fig.data] == ["random negatives", "hard negatives"]
    rnd = fig.data[0]
    assert list(rnd.x) == [0.2, 0.5]  # null purity left out
    assert list(np.round(rnd.error_y.array, 6)) == [0.2, 0.1]
    assert list(np.round(rnd.error_y.arrayminus, 6)) == [0.2, 0.2]
    assert len(fig.data[1].x) == 1


def test_projection_scatter_carries_image_ids():
    pts = pd.DataFrame(
        {
            "image_id": ["a", "b", "c"],
            "x": [0, 1, 2],
            "y": [0, 1, 0],
            "cluster": [0, 1, 1],
            "orientation": [1.5, 2.5, 3.5],
        }
    )
    fig = projection_scatter(pts, "cluster")
    # Each image once, with its cluster, whatever the order the categories are drawn in.
    carried = sorted((row[0], row[1]) for t in fig.data for row in t.customdata)
    assert len(fig.data) == 2 and carried == [("a", "0"), ("b", "1"), ("c", "1")]
    num = projection_scatter(pts, "orientation")
    assert len(num.data) == 1 and num.data[0].marker.showscale


def test_checkpoint_figures():
    summary = pd.DataFrame(
        {"checkpoint_id": ["a", "b"], "cl": [0.5, 0.7], "id": [10, 12], "knn_acc": [0.3, 0.8]}
    )
    fig = cl_id_scatter(summary)
    assert list(fig.data[0].text) == ["a", "b"] and list(fig.data[0].x) == [10, 12]
    mat = pd.DataFrame([[1, 0.5], [0.5, 1]], index=["a", "b"], columns=["a", "b"])
    assert isinstance(anmi_heatmap(mat), go.Figure)
    links = match_clusters(assign([0] * 4 + [1] * 2), assign([0, 0, 1, 1, 2, 2]))
    meta = pd.DataFrame(
        {"size": [4, 2], "purity": [0.5, 1.0], "coherence_random": [0.7, 0.9], "caption": ["x", "y"]},
        index=pd.Index([0, 1], name="cluster"),
    )
    s = cluster_sankey(links, meta, None)
    # Labels: the id and the caption; the hover names the side.
    assert list(s.data[0].node.label) == ["0 x", "1 y", "0", "1", "2"]
    assert [h[0] for h in s.data[0].node.customdata] == ["A:0", "A:1", "B:0", "B:1", "B:2"]
    assert "purity 0.50" in s.data[0].node.customdata[0][1]
    assert list(s.data[0].link.value) == [2, 2, 2]
    assert isinstance(cluster_sankey(links.iloc[:0]), go.Figure)


def test_node_label_shortens_the_caption_to_fit():
    caption = "a small green striped circle on a plain background"
    assert node_label(7, caption, chars=22) == "7 small green striped…"
    assert node_label(7, None) == node_label(7, "  ") == "7"
    assert node_label(123456, "the red one", chars=8) == "123456"
    assert len(node_label(3, "word " * 40)) <= _LABEL_CHARS


def test_sankey_draws_a_legend_of_the_colours_it_draws_and_headers():
    from conceptlens.figures.checkpoints import KIND_COLOURS
    from conceptlens.metrics.events import label_links

    before, after = np.repeat([0, 1, 2], 40), np.repeat([0, 1, 2], 40)
    after[:20] = 3  # A0 splits into B0 and B3
    links = label_links(contingency(assign(before), assign(after)))
    fig = cluster_sankey(links, headers=("A: e01", "B: e05"))
    legend = {t.name: t.marker.color for t in fig.data[1:] if t.showlegend}
    assert legend == {k: KIND_COLOURS[k] for k in ("split", "continuation")}
    assert set(fig.data[0].link.color) == set(legend.values())
    assert fig.layout.showlegend and not fig.layout.xaxis.visible
    assert [a.text for a in fig.layout.annotations] == ["A: e01", "B: e05"]
    # Only the splits: no continuation in the legend either.
    only = cluster_sankey(links[links["event"] == "split"])
    assert [t.name for t in only.data[1:]] == ["split"]


# ---- readable at a single column --------------------------------------------------------------
def font_sizes(obj, inside_font=False):
    """Every font size a figure (as a dict) sets."""
    if isinstance(obj, dict):
        for key, v in obj.items():
            if key == "size" and inside_font and isinstance(v, (int, float)):
                yield v
            yield from font_sizes(v, key in ("font", "textfont", "tickfont") or key.endswith("font"))
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from font_sizes(v, inside_font)


def many_checkpoints(n=29, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "checkpoint_id": [f"shapes-run{i % 7}-s{i % 3}-e{i:02d}" for i in range(n)],
            # A dense blob and a few outliers, as the demo has.
            "cl": np.r_[0.9 + 0.02 * rng.standard_normal(n - 3), [0.8, 0.75, 0.98]],
            "id": np.r_[7 + rng.standard_normal(n - 3), [3, 15, 6.5]],
            "knn_acc": rng.uniform(0.1, 0.5, n),
        }
    )


def boxes_of(fig, width, height):
    """The px boxes of a CL-ID figure's labels at a figure size, from the annotations as
    Plotly places them (anchor, shift, leader offset) and the estimated text size."""
    from conceptlens.figures.checkpoints import _text_box

    m, xr, yr = fig.layout.margin, fig.layout.xaxis.range, fig.layout.yaxis.range
    pw, ph = width - m.l - m.r, height - m.t - m.b
    out = []
    for a in fig.layout.annotations:
        px = m.l + (a.x - xr[0]) / (xr[1] - xr[0]) * pw
        py = m.t + (1 - (a.y - yr[0]) / (yr[1] - yr[0])) * ph
        tw, th = _text_box(a.text)
        if a.showarrow:  # the box is centred on the leader's tail
            cx, cy = px + a.ax, py + a.ay
            out.append((cx - tw / 2, cy - th / 2, cx + tw / 2, cy + th / 2))
            continue
        x0 = {"left": px + a.xshift, "right": px + a.xshift - tw}.get(a.xanchor, px + a.xshift - tw / 2)
        y0 = {"top": py - a.yshift, "bottom": py - a.yshift - th}.get(a.yanchor, py - a.yshift - th / 2)
        out.append((x0, y0, x0 + tw, y0 + th))
    return out, (m.l, m.t, m.l + pw, m.t + ph)


def test_cl_id_labels_neither_overlap_nor_leave_the_plot_at_any_width():
    s = many_checkpoints()
    ids = list(s["checkpoint_id"])
    # As the page labels: A and B (two in the dense blob), the best and the worst.
    page = {
        ids[5]: "A: run5-s2-e05",
        ids[6]: "B: run6-s0-e06",
        ids[28]: "run0-s1-e28",
        ids[26]: "run5-s2-e26",
    }
    crowded = {c: c for c in ids[::3]}  # ten long names: more than fit at 3.5 in
    for wanted in (page, crowded):
        fig = cl_id_scatter(s, labels=wanted)
        assert list(fig.data[0].text) == ids  # every name in the hover
        assert all(a.font.size >= 10 for a in fig.layout.annotations)
        for w, h in CHECK_SIZES:
            boxes, (x0, y0, x1, y1) = boxes_of(fig, w, h)
            for i, b in enumerate(boxes):
                assert x0 <= b[0] and b[2] <= x1 and y0 <= b[1] and b[3] <= y1, (w, h, b)
                for c in boxes[i + 1 :]:
                    assert not (b[0] < c[2] and c[0] < b[2] and b[1] < c[3] and c[1] < b[3]), (w, h, b, c)
        if wanted is page:
            assert sorted(a.text for a in fig.layout.annotations) == sorted(page.values())
        else:
            assert 0 < len(fig.layout.annotations) < len(crowded)


def test_place_labels_gives_up_rather_than_overlap():
    # Three points on one spot with long names: a plot 40 px wide has room for none beside them.
    x, y = np.array([0.0, 0.0, 0.0]), np.array([0.0, 0.0, 0.0])
    margin = dict(l=0, r=0, t=0, b=0)
    placed = place_labels(x, y, {0: "x" * 30, 1: "y" * 30}, [-1, 1], [-1, 1], margin, sizes=((40, 40),))
    assert placed == {}
    roomy = place_labels(x, y, {0: "ab", 1: "cd"}, [-1, 1], [-1, 1], margin, sizes=((200, 200),))
    assert set(roomy) == {0, 1} and roomy[0][:2] != roomy[1][:2]


def test_every_checkpoint_figure_uses_type_of_at_least_10_px():
    s = many_checkpoints()
    corr = pd.DataFrame(
        {
            "predictor": ["cl", "id"],
            "pearson": [0.4, np.nan],
            "pearson_lo": [0.04, np.nan],
            "pearson_hi": [0.67, np.nan],
            "pearson_p": [0.03, np.nan],
            "kendall": [0.43, 0.1],
            "kendall_lo": [0.12, np.nan],
            "kendall_hi": [0.69, 0.3],
            "kendall_p": [0.001, 0.5],
            "n_checkpoints": [29, 29],
        }
    )
    mat = pd.DataFrame(np.eye(29), index=s["checkpoint_id"], columns=s["checkpoint_id"])
    links = match_clusters(assign([0] * 4 + [1] * 2), assign([0, 0, 1, 1, 2, 2]))
    long = epoch_long(runs_with_stages(s.assign(model="m", method="simclr", run="r", epoch=range(29))))
    for fig in (
        cl_id_scatter(s),
        correlation_forest(corr),
        metrics_vs_epoch(long),
        anmi_heatmap(mat),
        cluster_sankey(links),
    ):
        d = fig.to_dict()
        assert d["layout"]["template"]["layout"]["font"]["size"] >= 10
        assert min(font_sizes(d), default=10) >= 10, fig.data[0].type


def test_correlation_forest_draws_each_interval_and_none_for_a_missing_one():
    corr = pd.DataFrame(
        {
            "predictor": ["cl", "wclid_loo"],
            "pearson": [0.4, 0.06],
            "pearson_lo": [0.04, np.nan],
            "pearson_hi": [0.67, 0.42],
            "pearson_p": [0.03, 0.7],
            "kendall": [0.43, 0.34],
            "kendall_lo": [0.12, 0.01],
            "kendall_hi": [0.69, 0.62],
            "kendall_p": [0.001, 0.01],
            "n_checkpoints": [29, 29],
        }
    )
    fig = correlation_forest(corr)
    pearson, kendall = fig.data
    assert list(fig.layout.yaxis.ticktext) == ["CL", "W-CLID LOO"]
    assert np.allclose(pearson.error_x.array, [0.27, 0.36]) and np.allclose(
        pearson.error_x.arrayminus, [0.36, 0]
    )
    assert np.allclose(kendall.error_x.arrayminus, [0.31, 0.33])
    assert "95% CI [\u2014, 0.42]" in pearson.customdata[1]
    assert fig.layout.xaxis.title.text.endswith("(n = 29)")


def test_short_names_drop_the_shared_prefix_only_while_names_stay_distinct():
    assert short_names(["shapes-clip", "shapes-pca", "shapes-simclr-e01"]) == ["clip", "pca", "simclr-e01"]
    assert short_names(["run-a", "run-a-e2"]) == ["a", "a-e2"]
    assert short_names(["abc", "abd"]) == ["abc", "abd"]  # no separator in the shared part
    assert short_names(["only-one"]) == ["only-one"]


def test_labelled_nodes_follow_the_column_that_needs_most_room():
    # Left: 10 + 1 images; right: 11 images in one node. Height 100 px, 4 px padding:
    # the left column sets the scale, (100 - 4) / 11 px per image.
    a, b = labelled_nodes([10, 1], [11], 100, pad=4, font=10)
    assert list(a) == [True, False] and list(b) == [True]  # 87 px, 8.7 px, 96 px
    a, _ = labelled_nodes([1] * 40, [40], 250, pad=4, font=10)
    assert not a.any()  # 40 nodes of 2.25 px


def test_highlight_images_selects_exactly_the_given_images():
    fig = go.Figure(
        [
            go.Scattergl(x=[0, 1], y=[0, 1], customdata=[["a", "0"], ["b", "0"]]),
            go.Scattergl(x=[2, 3], y=[2, 3], customdata=[["c", "1"], ["d", "1"]]),
        ]
    )
    highlight_images(fig, ["b", "c", "zzz"])
    assert list(fig.data[0].selectedpoints) == [1] and list(fig.data[1].selectedpoints) == [0]
    assert fig.data[0].unselected.marker.opacity < 1
    untouched = go.Figure(go.Scattergl(x=[0], y=[0], customdata=[["a", "0"]]))
    assert highlight_images(untouched, []).data[0].selectedpoints is None


# ---- compare: purity bins pool only the clusters with a value --------------------------------
def test_a_bin_without_trials_averages_only_the_clusters_with_a_value():
    """A cluster whose coherence is null is not a cluster with coherence 0 or NaN: the normal
    interval is that of the clusters with a value."""
    m = pd.DataFrame({"purity": [0.3, 0.35, 0.4, 0.32], "coherence_random": [0.5, np.nan, 0.7, 0.6]})
    b = purity_bins(m, edges=(0, 0.5, 1)).iloc[0]
    x = np.array([0.5, 0.7, 0.6])
    half = 1.96 * x.std(ddof=1) / math.sqrt(3)
    assert (b["coherence_random_lo"], b["coherence_random_hi"]) == pytest.approx((0.6 - half, 0.6 + half))
    assert b["coherence_random_n"] == 3 and b["clusters"] == 4


def test_pooled_trials_are_those_of_the_clusters_with_a_value():
    """A cluster with trials but no coherence value (a study not scored yet) adds no trials to
    its bin's pool: 12 of 20 + 16 of 20 = 28 of 40, not of 60."""
    from scipy.stats import beta

    m = pd.DataFrame(
        {
            "purity": [0.31, 0.33, 0.36],
            "coherence_random": [0.6, np.nan, 0.8],
            "coherence_trials": [20, 20, 20],
        }
    )
    b = purity_bins(m, values=("coherence_random",)).iloc[0]
    assert b["interval"] == "clopper-pearson"
    lo, hi = beta.ppf(0.025, 28, 13), beta.isf(0.025, 29, 12)
    assert (b["coherence_random_lo"], b["coherence_random_hi"]) == pytest.approx((lo, hi))


def test_purity_bins_do_not_depend_on_the_index_of_the_cluster_table():
    """Two checkpoints' cluster tables concatenated keep their repeated row labels: each bin's
    trials must still be its own rows', as with a fresh index."""
    one = pd.DataFrame(
        {
            "purity": [0.15, 0.55, 0.95, 0.52],
            "coherence_random": [0.5, 0.7, 0.9, 0.6],
            "coherence_hard": [0.4, 0.6, 0.8, 0.5],
            "coherence_trials": [10, 20, 30, 40],
        }
    )
    two = one.assign(purity=[0.58, 0.12, 0.91, 0.14], coherence_trials=[5, 15, 25, 35])
    repeated = pd.concat([one, two])
    assert repeated.index.has_duplicates
    got = purity_bins(repeated)
    ref = purity_bins(repeated.reset_index(drop=True))
    pd.testing.assert_frame_equal(got, ref)
    assert (got["interval"] == "clopper-pearson").all()


# ---- compare: checkpoints over training ------------------------------------------------------
def test_a_checkpoint_without_an_epoch_is_left_out_of_a_run_with_stages():
    """A run's final checkpoint stored without an epoch is not a stage: the run keeps its
    other checkpoints, in epoch order."""
    ck = pd.DataFrame(
        {
            "checkpoint_id": ["a_final", "a3", "a1", "b1", "b2"],
            "model": ["x"] * 5,
            "method": ["s"] * 5,
            "run": ["A", "A", "A", "B", "B"],
            "epoch": [None, 3, 1, 2, 1],
        }
    )
    st = runs_with_stages(ck)
    assert list(st["checkpoint_id"]) == ["a1", "a3", "b2", "b1"]
    assert st["epoch"].tolist() == [1, 3, 1, 2]


@pytest.mark.parametrize("lacking", ["checkpoint_id", "image_id", "cluster"])
def test_every_missing_assignment_column_is_named(lacking):
    """Each required column is checked, not only the first of the list: a table without it
    is refused with its name (not a KeyError from deep inside pandas)."""
    full = pd.DataFrame(
        {"checkpoint_id": ["a", "a", "b", "b"], "image_id": [1, 2, 1, 2], "cluster": [0, 1, 1, 0]}
    )
    with pytest.raises(ValueError, match=f"assignments lacks column '{lacking}'"):
        pairwise_anmi(full.drop(columns=lacking))
    if lacking != "checkpoint_id":
        one = full[full["checkpoint_id"] == "a"].drop(columns="checkpoint_id")
        with pytest.raises(ValueError, match=f"b lacks column '{lacking}'"):
            contingency(one, one.drop(columns=lacking))


def test_a_bin_names_its_interval_methods_in_a_fixed_order():
    """Coherence pooled over trials, describability by the normal interval: the bin names
    both, sorted (a set's order changes from one process to the next)."""
    m = pd.DataFrame(
        {
            "purity": [0.31, 0.33, 0.36],
            "coherence_random": [0.6, 0.7, 0.8],
            "coherence_trials": [20, 20, 20],
            "describability_binary": [0.2, 0.5, 0.4],
        }
    )
    b = purity_bins(m).iloc[0]
    assert b["interval"] == "clopper-pearson, normal"


# ---- link kinds and purity bins' checks --------------------------------------------------------
def test_a_split_and_merge_link_counts_as_both():
    links = pd.DataFrame(
        {"a": [3, 5, 6], "b": [4, 7, 8], "kind": ["split+merge", "one-to-one", "one-to-one"], "n": [9, 4, 4]}
    )
    assert cluster_changes(links) == {"splits": 1, "merges": 1, "one_to_one": 2}


def test_purity_bins_name_every_missing_column():
    with pytest.raises(ValueError, match=r"metrics lacks column\(s\) coherence_hard, describability_binary$"):
        purity_bins(pd.DataFrame({"purity": [0.5]}), values=("coherence_hard", "describability_binary"))
