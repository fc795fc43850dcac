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
