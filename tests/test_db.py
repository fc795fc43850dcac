"""The data layer: parameterised queries, a cursor per query, 8 concurrent threads."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from conceptlens.db import WorkspaceDB
from conceptlens import queries
from tests.helpers import tiny_workspace


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    ws = tiny_workspace(tmp_path_factory.mktemp("db") / "ws", n_shapes=60, dims=(8, 16))
    db = WorkspaceDB(ws.root)
    yield db
    db.close()


def test_views_for_present_tables(db):
    assert {"images", "checkpoints", "captions"} <= db.tables
    assert not db.has("clusters")
    assert db.has("features")


def test_parameterised_query(db):
    df = db.query("SELECT count(*) AS n FROM images WHERE dataset = ?", ["shapes"])
    assert df["n"].iloc[0] == 60
    # A hostile value is just a value: no rows, and the table still exists afterwards.
    df = db.query("SELECT count(*) AS n FROM images WHERE dataset = ?", ["x'; DROP VIEW images; --"])
    assert df["n"].iloc[0] == 0
    assert db.query("SELECT count(*) AS n FROM images")["n"].iloc[0] == 60 + 1797


def test_dataset_summary(db):
    df = db.query(queries.DATASETS).set_index("dataset")
    assert df.loc["shapes", "images"] == 60 and df.loc["digits", "labels"] == 10
    assert df.loc["digits", "train"] + df.loc["digits", "test"] == 1797


def test_features_roundtrip(db):
    ids, emb = db.features("rand1")
    assert emb.shape == (60, 16) and emb.dtype == np.float32
    assert list(ids) == sorted(ids)
    sub_ids, sub = db.features("rand1", image_ids=[ids[3], ids[0]])
    assert list(sub_ids) == [ids[0], ids[3]]
    np.testing.assert_array_equal(sub, emb[[0, 3]])


def test_concurrent_queries_from_8_threads(db):
    def work(i):
        ds = "shapes" if i % 2 else "digits"
        out = []
        for _ in range(25):
            n = db.query("SELECT count(*) AS n FROM images WHERE dataset = ?", [ds])["n"].iloc[0]
            s = db.query(queries.SAMPLE_IMAGES, [ds, str(i), 5])
            _, emb = db.features("rand0")
            out.append((int(n), len(s), emb.shape))
        return out

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(8)))
    for i, res in enumerate(results):
        expect = 60 if i % 2 else 1797
        assert all(r == (expect, 5, (60, 8)) for r in res)


def test_sample_is_stable(db):
    a = db.query(queries.SAMPLE_IMAGES, ["shapes", "seed", 10])
    b = db.query(queries.SAMPLE_IMAGES, ["shapes", "seed", 10])
    assert a.equals(b)


def test_unknown_table_identifier_refused(db):
    with pytest.raises(ValueError):
        db.columns("images; DROP")  # noqa: not a schema table
