"""conceptlens/importers/captions.py: each caption reaches its own image."""

from __future__ import annotations

import pyarrow.parquet as pq

from conceptlens.importers.captions import import_captions
from tests import helpers_importers
from tests.helpers_importers import dataset_image_ids

# Fixtures shared with other test modules, named here so that pytest finds them for this one.
feat_ws = helpers_importers.feat_ws


# ---- captions -----------------------------------------------------------------------------
def test_each_caption_lands_on_its_own_image(tmp_path, feat_ws):
    import pandas as pd

    ws = feat_ws
    ids = dataset_image_ids(ws, "d")
    rows = [{"image_id": i, "text": f"caption of {i}"} for i in reversed(ids)]
    pd.DataFrame(rows).to_csv(tmp_path / "c.csv", index=False)
    assert import_captions(ws, "me", tmp_path / "c.csv", dataset="d") == len(ids)
    caps = pq.read_table(ws.table_path("captions")).to_pylist()
    assert sorted((r["image_id"], r["text"]) for r in caps) == sorted((i, f"caption of {i}") for i in ids)
