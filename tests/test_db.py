"""The data layer: WorkspaceDB (named parameters, a cursor per query, threads) and the views
the dashboard and figure export share (conceptlens/views), on the factory workspace."""

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptlens import views
from conceptlens.db import WorkspaceDB
from conceptlens.metrics import compare, events
from harness.factory import COLORS, make_workspace


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("db") / "ws", derived=True).root


@pytest.fixture(scope="module")
def db(root):
    db = WorkspaceDB(root)
    yield db
    db.close()


def stored(root, table, **part) -> pd.DataFrame:
    parts = "/".join(f"{k}={v}" for k, v in part.items())
    return pd.read_parquet(root / table / parts / "part-0.parquet")


def test_views_for_present_tables(db):
    assert {"images", "checkpoints", "features", "clusters", "cluster_links"} <= db.tables
    # A view per table with files, none for the others (whichever the factory leaves out).
    from conceptlens import schema

    assert all(db.has(t.name) == bool(db.ws.files(t.name)) for t in schema.TABLES)


def test_named_parameters_only(db):
    sql = "SELECT count(*) AS n FROM images WHERE dataset = $ds"
    assert db.query(sql, {"ds": "toy"})["n"].iloc[0] == 48
    with pytest.raises(TypeError):
        db.query("SELECT count(*) AS n FROM images WHERE dataset = ?", ["toy"])
    # A hostile value is just a value: no rows, and the view still exists afterwards.
    assert db.query(sql, {"ds": "x'; DROP VIEW images; --"})["n"].iloc[0] == 0
    assert db.query("SELECT count(*) AS n FROM images")["n"].iloc[0] == 48


def test_features_roundtrip(db):
    ids, emb = db.features("ck1")
    assert emb.shape == (48, 8) and emb.dtype == np.float32
    assert list(ids) == sorted(ids)
    sub_ids, sub = db.features("ck1", image_ids=[ids[3], ids[0]])
    assert list(sub_ids) == [ids[0], ids[3]]
    np.testing.assert_array_equal(sub, emb[[0, 3]])


def test_views_from_8_threads(db):
    def work(i):
        cid, other = f"ck{i % 3}", f"ck{(i + 1) % 3}"
        return [
            (
                len(views.clusters.cluster_table(db, dataset="toy", checkpoint=cid, k=4)),
                len(views.home.sample_images(db, dataset="toy", n=5, seed=str(i))),
                views.checkpoints.cluster_changes(db, dataset="toy", k=4, a=cid, b=other)["anmi"].iloc[0],
            )
            for _ in range(15)
        ]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(8)))
    for res in results:
        assert len(set(res)) == 1 and res[0][:2] == (4, 5)


def test_unknown_table_identifier_refused(db):
    with pytest.raises(ValueError):
        db.columns("images; DROP")


def test_views_never_import_streamlit():
    out = subprocess.run(
        [sys.executable, "-c", "import sys, conceptlens.views; print('streamlit' in sys.modules)"],
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == "False", out.stderr


# ---- Home ------------------------------------------------------------------------------------
def test_datasets_and_sample(db):
    ds = views.home.datasets(db).set_index("dataset")
    assert ds.loc["toy"].to_dict() == {"images": 48, "labels": 3, "train": 36, "test": 12, "checkpoints": 3}
    a = views.home.sample_images(db, dataset="toy", n=10, seed="s")
    assert a.equals(views.home.sample_images(db, dataset="toy", n=10, seed="s"))
    assert not a.equals(views.home.sample_images(db, dataset="toy", n=10, seed="t"))


def test_factor_columns_of_any_name(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    p = ws.root / "images.parquet"
    t = pq.read_table(p)
    hostile = 'x"); DROP VIEW images; --'
    t = t.append_column(hostile, pa.array(["v"] * 24 + [None] * 24))
    t = t.append_column("never_set", pa.nulls(48, pa.string()))
    pq.write_table(t, p)
    db = WorkspaceDB(ws.root)
    f = views.home.factors(db, dataset="toy").set_index("column")["images"].to_dict()
    assert f == {"shape": 48, hostile: 24}
    assert db.query("SELECT count(*) AS n FROM images")["n"].iloc[0] == 48
    assert views.home.factors(db, dataset="none").empty


def test_analyses_status(db, root):
    a = views.home.analyses(db, workspace=str(root), dataset="toy").set_index("name")
    assert a.loc["image_captions", "status"] == "missing"  # ground truth only
    assert a.loc["comparisons", "status"] == "present"
    broken = views.home.analyses(db, workspace="w", dataset="toy", broken=("cluster_links",))
    assert broken.set_index("name").loc["comparisons", "status"] == "broken"


# ---- Clusters ----------------------------------------------------------------------------------
def test_cluster_table_joins_captions_and_label_names(db, root):
    t = views.clusters.cluster_table(db, dataset="toy", checkpoint="ck1", k=4)
    m = stored(root, "cluster_metrics", checkpoint_id="ck1", k=4)
    c = stored(root, "cluster_captions", checkpoint_id="ck1", k=4)
    assert list(t["cluster"]) == [0, 1, 2, 3] and list(t["size"]) == list(m["size"])
    assert list(t["caption"]) == list(c["caption"])
    assert list(t["describability_binary"]) == list(c["describability_binary"])
    assert list(t["top_label_name"]) == [COLORS[lbl] for lbl in m["top_label"]]
    plain = views.clusters.cluster_table(db, dataset="toy", checkpoint="ck1", k=4, captions=False)
    assert "caption" not in plain and plain["size"].equals(t["size"])


def test_filtered_clusters_and_purity_bins(db):
    kw = dict(dataset="toy", checkpoint="ck0", k=4)
    t = views.clusters.cluster_table(db, **kw)
    red = views.clusters.filtered_clusters(db, **kw, text="RED")
    assert list(red["cluster"]) == [0, 3]  # captions: red, green, blue, red
    assert views.clusters.filtered_clusters(db, **kw, text="a.*").empty
    big = views.clusters.filtered_clusters(db, **kw, min_size=int(t["size"].median()) + 1)
    assert (big["size"] > t["size"].median()).all() and len(big) < 4
    pd.testing.assert_frame_equal(views.clusters.purity_bins(db, **kw), compare.purity_bins(t))


def test_cluster_and_hard_negative(db, root):
    m = stored(root, "cluster_metrics", checkpoint_id="ck2", k=4)
    pair = views.clusters.cluster_and_hard_negative(db, dataset="toy", checkpoint="ck2", k=4, cluster=1)
    assert list(pair["role"]) == ["cluster", "hard negative"]
    assert list(pair["cluster"]) == [1, int(m.loc[m.cluster == 1, "hard_negative"].iloc[0])]


def test_cluster_images_nearest_first(db, root):
    c = stored(root, "clusters", checkpoint_id="ck0", k=4)
    got = views.clusters.cluster_images(db, checkpoint="ck0", k=4, cluster=1, limit=5)
    want = c[c.cluster == 1].sort_values(["distance", "image_id"]).head(5)
    assert list(got["image_id"]) == list(want["image_id"])
    # Two clusters in one query: each one's own first five, not the first five of both.
    sizes = c.cluster.value_counts()
    pair = tuple(int(x) for x in sizes.index[:2][::-1])
    assert sizes.iloc[1] > 5
    both = views.clusters.clusters_images(db, checkpoint="ck0", k=4, clusters=pair, limit=5)
    for cl in pair:
        one = views.clusters.cluster_images(db, checkpoint="ck0", k=4, cluster=cl, limit=5)
        assert list(both.loc[both.cluster == cl, "image_id"]) == list(one["image_id"]) and len(one) == 5


def test_pair_rows_of_a_table_at_hand(db):
    kw = dict(dataset="toy", checkpoint="ck2", k=4)
    table = views.clusters.cluster_table(db, **kw)
    for c in table["cluster"]:
        want = views.clusters.cluster_and_hard_negative(db, **kw, cluster=int(c))
        assert views.clusters.pair_rows(table, int(c)).equals(want)


def test_projection_sample_is_bounded_stable_and_clustered(db, root):
    kw = dict(checkpoint="ck1", k=4, method="umap")
    assert views.clusters.projection_size(db, checkpoint="ck1")["n"].iloc[0] == 48
    pts = views.clusters.projection(db, **kw, limit=20)
    assert len(pts) == 20 and pts.equals(views.clusters.projection(db, **kw, limit=20))
    c = stored(root, "clusters", checkpoint_id="ck1", k=4).set_index("image_id")["cluster"]
    assert (pts.set_index("image_id")["cluster"] == c.loc[pts["image_id"]]).all()
    assert {"shape", "label_name", "split"} <= set(pts.columns)
    assert list(views.clusters.colour_options(db, dataset="toy")["column"]) == [
        "cluster",
        "label_name",
        "shape",
        "split",
    ]


# ---- Checkpoints -------------------------------------------------------------------------------
def test_summary_joins_metrics_clid_and_cluster_means(db, root):
    s = views.checkpoints.summary(db, dataset="toy", k=4).set_index("checkpoint_id")
    clid = stored(root, "clid_scores", dataset="toy").set_index("checkpoint_id")
    assert s["clid"].to_dict() == clid["clid"].to_dict()
    cm = stored(root, "cluster_metrics", checkpoint_id="ck2", k=4)
    assert s.loc["ck2", "mean_purity"] == pytest.approx(cm["purity"].mean())
    assert s.loc["ck2", "knn_acc"] == pytest.approx(0.7)
    assert "clid" not in views.checkpoints.summary(db, dataset="toy", k=4, clid=False)


def test_names_and_training_curves(db):
    names = views.checkpoints.names(db, dataset="toy", k=4)
    assert list(names["name"]) == [
        "ck0 (toy-run · epoch 3)",
        "ck1 (toy-run · epoch 2)",
        "ck2 (toy-run · epoch 1)",
    ]
    curves = views.checkpoints.training(db, dataset="toy", k=4)
    knn = curves[curves.metric == "knn_acc"].sort_values("epoch")
    assert list(knn["value"]) == pytest.approx([0.7, 0.8, 0.9])


def test_anmi_matrix_is_the_stored_one(db, root):
    m = views.checkpoints.anmi_matrix(db, dataset="toy", k=4)
    sim = stored(root, "clustering_similarity", dataset="toy")
    assert list(m.index) == list(m.columns) == ["ck0", "ck1", "ck2"]
    assert np.allclose(np.diag(m), 1) and np.allclose(m, m.T)
    for r in sim.itertuples():
        assert m.loc[r.checkpoint_b, r.checkpoint_a] == pytest.approx(r.anmi)
    # The stored values are those of the clusterings themselves.
    assign = pd.concat(
        [
            stored(root, "clusters", checkpoint_id=c, k=4).assign(checkpoint_id=c)
            for c in ("ck0", "ck1", "ck2")
        ]
    )
    assert np.allclose(m, compare.pairwise_anmi(assign, ["ck0", "ck1", "ck2"]))


@pytest.mark.parametrize("a,b", [("ck0", "ck2"), ("ck2", "ck0")])
def test_cluster_links_match_the_assignments_in_either_order(db, root, a, b):
    want = compare.match_clusters(
        stored(root, "clusters", checkpoint_id=a, k=4),
        stored(root, "clusters", checkpoint_id=b, k=4),
        min_share=0.3,
    )
    got = views.checkpoints.cluster_links(db, dataset="toy", k=4, a=a, b=b, min_share=0.3)
    pd.testing.assert_frame_equal(got[want.columns].astype(str), want.astype(str))
    # The page's flows and counts are the concept events (metrics/events.py) of the pair.
    cells = compare.contingency(
        stored(root, "clusters", checkpoint_id=a, k=4), stored(root, "clusters", checkpoint_id=b, k=4)
    )
    labelled = events.label_links(cells, min_share=0.3)
    assert sorted(got["event"]) == sorted(labelled["event"])
    only = views.checkpoints.cluster_links(
        db, dataset="toy", k=4, a=a, b=b, min_share=0.3, flows="splits and merges only"
    )
    assert set(only["event"]) <= {"split", "merge", "split+merge"}
    assert len(only) == labelled["event"].isin(["split", "merge", "split+merge"]).sum()
    changes = views.checkpoints.cluster_changes(db, dataset="toy", k=4, a=a, b=b, min_share=0.3)
    kinds = events.events_from_links(cells, min_share=0.3)["kind"].value_counts()
    assert changes.iloc[0][["splits", "merges", "one_to_one", "births", "deaths"]].tolist() == [
        kinds.get(k, 0) for k in ("split", "merge", "continuation", "birth", "death")
    ]
    sim = stored(root, "clustering_similarity", dataset="toy")
    pair = sim[(sim.checkpoint_a == "ck0") & (sim.checkpoint_b == "ck2")]
    assert changes["anmi"].iloc[0] == pytest.approx(pair["anmi"].iloc[0])


def test_a_corrupt_table_is_left_out_not_fatal(tmp_path):
    """One unreadable file must not take the whole workspace down: its table is left out
    (with the error kept for the page that needs it), every other table still answers."""
    from harness.factory import make_workspace

    ws = make_workspace(tmp_path / "w", derived=True)
    p = ws.table_path("cluster_links", dataset="toy")
    p.write_bytes(b"not parquet at all")
    db = WorkspaceDB(ws.root)
    try:
        assert "cluster_links" not in db.tables and "cluster_links" in db.errors
        assert db.query("SELECT count(*) AS n FROM clusters")["n"].iloc[0] > 0
    finally:
        db.close()


def test_small_images_table_is_held_in_memory_a_large_one_stays_a_view(root, monkeypatch):
    from conceptlens import db as D

    def kind(db):
        q = "SELECT table_type FROM information_schema.tables WHERE table_name = 'images'"
        return db.query(q).iloc[0, 0]

    small = D.WorkspaceDB(root)
    monkeypatch.setattr(D, "IMAGES_IN_MEMORY", 0)
    large = D.WorkspaceDB(root)
    assert (kind(small), kind(large)) == ("BASE TABLE", "VIEW")
    q = "SELECT * FROM images ORDER BY image_id"
    assert small.query(q).equals(large.query(q)) and len(small.query(q)) > 0
