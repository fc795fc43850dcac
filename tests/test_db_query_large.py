"""`WorkspaceDB.query_large` (through Arrow) returns the frame `query` (DuckDB's pandas
conversion) returns: same columns, dtypes and values, nulls included."""

import pandas as pd
import pytest

from conceptlens.db import WorkspaceDB
from conceptlens.views import clusters as V


def test_same_frame_as_query_with_nulls_of_every_kind(demo_ws):
    db = WorkspaceDB(demo_ws)
    sql = """
        SELECT * FROM (VALUES
            (1, NULL::VARCHAR, NULL::INTEGER, 'a', 2.5, NULL::BIGINT, true,
             '2020-01-01'::DATE, [1, 2], 1::TINYINT, 0.5::DOUBLE),
            (2, NULL::VARCHAR, 3::INTEGER, NULL, NULL, NULL::BIGINT, NULL, NULL, NULL, NULL, NULL),
            ($n, NULL::VARCHAR, NULL::INTEGER, 'c', 1.0, NULL::BIGINT, false,
             '2021-05-06'::DATE, [], 3::TINYINT, 2.0::DOUBLE)
        ) t(i, all_null_text, some_null_int, text, dec, all_null_int, flag, day, list, tiny, real)"""
    a, b = db.query_large(sql, {"n": 7}), db.query(sql, {"n": 7})
    pd.testing.assert_frame_equal(a, b)
    assert str(a["some_null_int"].dtype) == "Int32" and a["some_null_int"].isna().tolist() == [
        True,
        False,
        True,
    ]


@pytest.mark.parametrize("ckpt", ["shapes-simclr-e20", "clipart-effnet-lite0", "fashion-effnet-lite0-random"])
def test_the_projection_view_is_the_frame_query_made(demo_ws, ckpt):
    """The large projection view switched to query_large: on demo checkpoints with
    factor columns that are null for the whole dataset, the frame is unchanged."""
    db = WorkspaceDB(demo_ws)
    k = int(db.query("SELECT min(k) AS k FROM clusters WHERE checkpoint_id = $c", {"c": ckpt})["k"][0])
    fast = V.projection(db, ckpt, k, limit=100_000)
    db.query_large = db.query  # the plain path, on this instance only
    pd.testing.assert_frame_equal(fast, V.projection(db, ckpt, k, limit=100_000))
    assert len(fast) > 0


def test_query_large_takes_named_parameters_only(demo_ws):
    with pytest.raises(TypeError, match="named parameters"):
        WorkspaceDB(demo_ws).query_large("SELECT $1", [1])
