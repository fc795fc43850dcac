"""The layouts of figures whose structure carries meaning: rows aligned across panels,
columns under their group's name."""

from __future__ import annotations

import numpy as np
import pandas as pd

from conceptlens.figures.compmap import weights_heatmap
from conceptlens.figures.concepts import purity_heatmaps


def _purity_long() -> pd.DataFrame:
    concepts = ["shape", "size", "x"]
    rows = []
    # Learnt rows: three aligned concepts plus one never aligned (only in the learnt panel).
    learnt_names = ["c2 → shape", "c0 → size", "c1 → x", "c3"]
    for panel, names in (("learnt", learnt_names), ("oracle", concepts), ("difference", learnt_names[:3])):
        for i, r in enumerate(names):
            for j, c in enumerate(concepts):
                rows.append(dict(panel=panel, row=r, col=c, value=10 * i + j, row_order=i, col_order=j))
    return pd.DataFrame(rows)


def test_purity_panels_share_rows_so_row_i_is_one_line_across_them():
    fig = purity_heatmaps(_purity_long())
    learnt, oracle, diff = fig.data
    assert list(learnt.y) == list(oracle.y) == list(diff.y) == ["c2 → shape", "c0 → size", "c1 → x", "c3"]
    # Row i of every panel holds that panel's value for row_order i (10 i + j); the
    # oracle and difference panels have no value for the unaligned concept.
    for t in (learnt, oracle, diff):
        z = np.asarray(t.z, float)
        np.testing.assert_array_equal(z[:3], [[0, 1, 2], [10, 11, 12], [20, 21, 22]])
    assert (
        np.isnan(np.asarray(oracle.z, float)[3]).all() and not np.isnan(np.asarray(learnt.z, float)[3]).any()
    )
    # Names once, left of the first panel; one axis title under the middle one.
    assert [fig.layout[f"yaxis{s}"].showticklabels for s in ("", "2", "3")] == [True, False, False]
    assert [fig.layout[f"xaxis{s}"].title.text for s in ("", "2", "3")] == [None, "true concept", None]


def _weights_long() -> pd.DataFrame:
    prims = [
        ("color", "red"),
        ("color", "blue"),
        ("color", "green"),
        ("shape", "circle"),
        ("size", "small"),
        ("background", "white"),
    ]
    labels = [(0, "red circle"), (1, "blue small")]
    rows = []
    for r, (label, name) in enumerate(labels):
        for p, (g, v) in enumerate(prims):
            rows.append(
                dict(
                    label=label,
                    label_name=name,
                    row=r,
                    primitive=f"{g}:{v}",
                    group=g,
                    value=v,
                    position=p,
                    weight=float(p - r),
                    truth=float(v in name),
                )
            )
    return pd.DataFrame(rows)


def test_weight_columns_sit_under_their_group_names_split_by_lines():
    fig = weights_heatmap(_weights_long())
    top, truth = fig.data
    assert list(fig.layout.xaxis2.ticktext) == ["red", "blue", "green", "circle", "small", "white"]
    np.testing.assert_array_equal(np.asarray(top.z), [[0, 1, 2, 3, 4, 5], [-1, 0, 1, 2, 3, 4]])
    np.testing.assert_array_equal(np.asarray(truth.z), [[1, 0, 0, 1, 0, 0], [0, 1, 0, 0, 1, 0]])
    assert top.customdata[0][3] == "shape: circle"
    groups = {a.text: a.x for a in fig.layout.annotations if a.yref == "paper" and a.yanchor == "top"}
    assert groups == {"color": 1.0, "shape": 3.0, "size": 4.0, "background": 5.0}
    # Upright where the name is long for its columns; level where it has room.
    angle = {a.text: a.textangle for a in fig.layout.annotations if a.text in groups}
    assert angle["background"] == -90 and angle["color"] == 0
    assert sorted({s.x0 for s in fig.layout.shapes}) == [2.5, 3.5, 4.5]  # in both panels


def test_a_drop_of_0002_in_knn_accuracy_does_not_fill_the_axis_and_the_axis_says_where_it_starts():
    from conceptlens.figures.checkpoints import metrics_vs_epoch

    long = pd.DataFrame(
        dict(
            run="r",
            epoch=[5, 30],
            checkpoint_id=["a", "b"],
            metric="knn_acc",
            value=[0.9499, 0.9471],
            method="simclr",
        )
    )
    fig = metrics_vs_epoch(long)
    lo, hi = fig.layout.yaxis.range
    assert lo <= 0.9471 and hi >= 0.9499
    # At least a tenth of accuracy's scale [0, 1]: the drop takes under 3% of the axis.
    assert hi - lo >= 0.1 and (0.9499 - 0.9471) / (hi - lo) < 0.03
    assert fig.layout.yaxis.title.text == f"kNN accuracy (axis from {lo:.3g})"


def test_purity_vs_coherence_shows_where_the_clusters_are_and_says_the_axis_is_not_from_zero():
    from conceptlens.figures.clusters import purity_coherence

    m = pd.DataFrame(
        dict(
            cluster=[0, 1, 2],
            size=[10, 20, 30],
            purity=[0.48, 0.7, 1.0],
            coherence_random=[0.9, 0.95, 1.0],
            coherence_hard=[0.6, 0.8, 0.85],
        )
    )
    fig = purity_coherence(m)
    x0, x1 = fig.layout.xaxis.range
    y0, y1 = fig.layout.yaxis.range
    assert 0.4 <= x0 <= 0.48 and 1.0 <= x1 <= 1.07
    assert 0.4 <= y0 <= 0.5 and 1.0 <= y1 <= 1.07  # chance (0.5) stays in view
    assert fig.layout.xaxis.title.text == f"purity (axis from {x0:.3g})"
    assert fig.layout.yaxis.title.text == f"coherence (2AFC) (axis from {y0:.3g})"
    # Data down to 0.1 of the scale: the axis starts at 0 and needs no word.
    fig = purity_coherence(m.assign(purity=[0.1, 0.5, 1.0]))
    assert fig.layout.xaxis.range[0] < 0 and fig.layout.xaxis.title.text == "purity"


def test_data_range_keeps_a_minimum_span_inside_the_scale():
    from conceptlens.figures.theme import data_range

    lo, hi = data_range([0.999, 1.0], (0.0, 1.0))
    assert hi - lo >= 0.1 and hi <= 1.0 + 0.06 * 0.1 + 1e-9  # slid inside [0, 1]
    lo, hi = data_range([6.8, 8.8])  # no bounded scale: padded data
    assert lo < 6.8 and hi > 8.8 and hi - lo < 3


def test_no_category_colour_is_dark_enough_to_pass_for_the_black_selection_ring():
    from conceptlens.figures.clusters import HIGHLIGHT
    from conceptlens.figures.theme import MIN_LIGHTNESS, _hex_rgb, _lab, categorical

    ring = _lab(_hex_rgb([HIGHLIGHT]))[0]
    for n in (8, 17, 28, 48, 100):
        lab = _lab(_hex_rgb(categorical(n)))
        # CIELAB L* computed here from sRGB: at least MIN_LIGHTNESS (30) and far from the ring.
        assert lab[:, 0].min() >= MIN_LIGHTNESS, n
        assert np.linalg.norm(lab - ring, axis=1).min() > 30, n
    # Cluster 27 of 48 was #004E4E (L* 29), the Okabe-Ito palette's 8th colour black.
    assert "#004E4E" not in categorical(48) and "#000000" not in categorical(8)
