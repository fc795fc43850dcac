"""What mutation testing found untested in `conceptlens analyze comparisons`
(tools/mutate.py): the order of the tables it writes."""

from __future__ import annotations

import numpy as np
import pytest

from conceptlens import schema
from tests.test_pipeline_wiring import DIM, analyse, blobs, build


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    labels = np.repeat(np.arange(3), 15)
    split = np.where(np.arange(45) % 3 == 0, "test", "train")
    feats = {
        f"ck{j}": blobs(np.eye(DIM)[:3], labels, noise, seed=20 + j)
        for j, noise in enumerate((0.1, 0.9, 1.5))
    }
    ws = build(tmp_path_factory.mktemp("order") / "ws", labels, split, feats)
    analyse(ws, ["comparisons"], k=[3])
    return ws


@pytest.mark.parametrize("name", ["clustering_similarity", "cluster_links"])
def test_comparison_tables_are_written_in_key_order(compared, name):
    """Rows sorted by the table's key: the same inputs give the same file, and pages read
    pairs in order."""
    df = compared.read(name, dataset="syn").to_pandas()
    key = [c for c in schema.TABLES_BY_NAME[name].key if c in df.columns and c != "dataset"]
    assert len(df) >= 3 and df[key].duplicated().sum() == 0
    want = df.sort_values(key).reset_index(drop=True)
    assert df.reset_index(drop=True).equals(want)
