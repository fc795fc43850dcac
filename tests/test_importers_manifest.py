"""conceptlens/importers/manifest.py: unlabeled rows keep the labels in place, and a manifest without a
path column names its columns."""

from __future__ import annotations

import pytest

from conceptlens.importers import images as imp
from conceptlens.importers import manifest as M
from tests.helpers_importers import RGB, draw


# ---- manifests ------------------------------------------------------------------------------
def test_unlabeled_rows_of_a_label_name_column_do_not_shift_the_labels(tmp_path):
    import pandas as pd

    for i in range(4):
        draw(tmp_path / f"{i}.png", RGB["red"], i)
    names = ["zebra", None, "apple", "zebra"]
    pd.DataFrame({"path": [f"{i}.png" for i in range(4)], "label_name": names}).to_csv(
        tmp_path / "m.csv", index=False
    )
    items = M.scan(tmp_path / "m.csv", unlabeled=True).items
    # labels 0..K-1 over the names present, in sorted order; an empty name is no label
    assert [(it.label, it.label_name) for it in items] == [
        (1, "zebra"),
        (None, None),
        (0, "apple"),
        (1, "zebra"),
    ]


# ---- manifest.scan ------------------------------------------------------------------------
def test_a_manifest_without_a_path_column_names_its_columns(tmp_path):
    """swap_args of `map(str, cols)` in the no-`path` error: a TypeError instead of the error
    naming the columns the manifest has."""
    from conceptlens.importers import manifest as M

    (tmp_path / "m.csv").write_text("file,label\na.png,0\n")
    with pytest.raises(imp.ImportInputError, match=r"m.csv: no `path` column \(columns: file, label\)"):
        M.scan(tmp_path / "m.csv")
