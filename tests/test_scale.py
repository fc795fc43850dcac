"""Scale (issue 14): the shared neighbour pass, faiss k-means, the scale generator, and
extraction with Ray and shards. The timings live in bench/, never here."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from conceptlens import metrics as M
from conceptlens.metrics import neighbors as N


def _clustered(n, d, k, spread, seed, dup=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    X = rng.normal(size=(k, d))[y] + spread * rng.normal(size=(n, d))
    if dup:  # exact duplicate rows, as repeated images give
        X, y = np.vstack([X, X[:dup]]), np.concatenate([y, y[:dup]])
    return M.l2_normalize(X), y


# ---- the one pass ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "n,d,m,block,chunk,threads",
    [(300, 8, 5, 64, 64, 1), (300, 8, 5, 64, 64, 3), (1000, 16, 20, 100, 250, 2), (50, 3, 49, 7, 7, 2)],
)
def test_top_self_equals_a_full_sort(n, d, m, block, chunk, threads):
    X = np.random.default_rng(n).normal(size=(n, d)).astype(np.float32)
    S = X @ X.T
    np.fill_diagonal(S, -np.inf)
    s, j = N.top_self(X, m, block_size=block, chunk=chunk, threads=threads)
    assert np.array_equal(j, np.argsort(-S, axis=1, kind="stable")[:, :m])
    np.testing.assert_allclose(s, -np.sort(-S, axis=1)[:, :m], rtol=1e-5, atol=1e-5)
    bias = (X * X).sum(axis=1) / 2
    _, j = N.top_self(X, m, bias=bias, block_size=block, chunk=chunk, threads=threads)
    assert np.array_equal(j, np.argsort(-(S - bias[None]), axis=1, kind="stable")[:, :m])


@pytest.mark.parametrize("threads", [1, 2])
def test_top_self_ties_by_lower_index(threads):
    X = np.repeat(np.eye(3, dtype=np.float32), 4, axis=0)  # rows 0-3 equal, 4-7 equal, ...
    _, j = N.top_self(X, 3, block_size=5, chunk=5, threads=threads)
    assert j[0].tolist() == [1, 2, 3] and j[5].tolist() == [4, 6, 7]
    X = np.ones((40, 2), np.float32)  # every pair tied, offered by different threads
    _, j = N.top_self(X, 4, block_size=3, chunk=3, threads=threads)
    assert j[0].tolist() == [1, 2, 3, 4] and j[39].tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "n,d,k,spread,dup,m",
    [(600, 16, 5, 1.0, 0, 64), (800, 8, 4, 0.6, 20, 10), (500, 32, 6, 2.0, 5, 3), (300, 5, 3, 0.3, 0, 299)],
)
def test_shared_metrics_equal_the_separate_ones(n, d, k, spread, dup, m):
    # Small m forces the direct search for many rows: the answers must not change.
    Xn, y = _clustered(n, d, k, spread, n + d, dup)
    nb = M.SelfNeighbours(Xn, m=m, block_size=97)
    rng = np.random.default_rng(0)
    te = rng.random(len(Xn)) < 0.25
    tr = ~te
    for kk in (1, 20):
        assert M.knn_accuracy_shared(nb, tr, y, te, k=kk) == M.knn_accuracy(
            Xn[tr], y[tr], Xn[te], y[te], k=kk
        )
    labels = M.kmeans(Xn, k, 2, 0).labels
    for lab, chunks, orders, seed in ((labels, 10, 3, 0), (y, 7, 2, 1)):
        assert M.cluster_learnability_shared(nb, lab, chunks, orders, seed) == M.cluster_learnability(
            Xn, lab, chunks, orders, seed
        )
    assert M.cluster_learnability_heldout_shared(nb, tr, te, k, 2, 0) == M.cluster_learnability_heldout(
        Xn[tr], Xn[te], k, 2, 0
    )
    assert M.twonn_shared(nb) == M.twonn(Xn)  # bit for bit: same exact distances
    if m < 20:
        assert nb.fallback_rows > 0  # the direct search was exercised


def test_shared_twonn_exact_on_a_blob_of_near_duplicates():
    # More near-duplicates than the list holds, closer than float32 can rank: every one is
    # re-measured in float64, or the direct search takes over.
    rng = np.random.default_rng(0)
    c = rng.normal(size=64)
    c /= np.linalg.norm(c)
    X = M.l2_normalize(np.vstack([rng.normal(size=(1500, 64)), c + 1e-5 * rng.normal(size=(60, 64))]))
    nb = M.SelfNeighbours(X, m=16)
    rows, d, j = nb.euclidean(np.ones(len(X), bool), k=2)
    ref_d, ref_j = M.nearest_euclidean_self(X, k=2)
    assert np.array_equal(j, ref_j) and np.array_equal(d, ref_d)
    X64 = X.astype(np.float64)
    D = ((X64[1500:, None] - X64[None, :]) ** 2).sum(-1)
    D[np.arange(60), 1500 + np.arange(60)] = np.inf
    assert np.array_equal(j[1500:], np.argsort(D, axis=1, kind="stable")[:, :2])
    assert nb.fallback_rows > 0


# ---- k-means ---------------------------------------------------------------------------
def test_faiss_kmeans_matches_sklearn_and_uses_every_point():
    pytest.importorskip("faiss")
    from sklearn.metrics import adjusted_rand_score

    rng = np.random.default_rng(0)
    y = rng.integers(0, 8, 5000)
    X = (3 * rng.normal(size=(8, 16))[y] + rng.normal(size=(5000, 16))).astype(np.float32)
    a = M.kmeans(X, 8, 3, 0, engine="sklearn")
    b = M.kmeans(X, 8, 3, 0, engine="faiss")
    assert adjusted_rand_score(a.labels, b.labels) == 1.0
    inertia = [float(((X - f.centres[f.labels]) ** 2).sum()) for f in (a, b)]
    assert inertia[1] == pytest.approx(inertia[0], rel=1e-5)
    # Every point used: each centre is the mean of all its points. faiss's default samples
    # 256 per centroid (2,048 of the 5,000 here), whose centres are off by ~1e-2.
    means = np.stack([X[b.labels == c].mean(axis=0) for c in range(8)])
    np.testing.assert_allclose(b.centres, means, atol=1e-4)
    assert np.array_equal(b.predict(X[:100]), b.labels[:100])


def test_kmeans_engine_choice():
    X = np.random.default_rng(0).normal(size=(50, 3)).astype(np.float32)
    assert M.kmeans(X, 3, 1, 0, engine="sklearn").model.__class__.__name__ == "KMeans"
    with pytest.raises(ValueError, match="engine"):
        M.kmeans(X, 3, engine="gpu")
    with pytest.raises(ValueError, match="k=60"):
        M.kmeans(X, 60)


# ---- extraction: Ray engine and shards ---------------------------------------------------
TINY = "torch:tests.tiny_models:TinyConv"


def _features(root, cid):
    return pq.read_table(root / "features" / f"checkpoint_id={cid}" / "part-0.parquet")


@pytest.fixture
def tiny(ws):
    from tests.tiny_models import TinyConv, save_torch_weights

    (ws / "models").mkdir()
    return save_torch_weights(ws / "models" / "enc.pt", TinyConv(width=4, dim=6), {"width": 4, "dim": 6})


def test_shards_write_the_features_once_all_are_done(ws, tiny):
    import conceptlens.extract as ex
    from conceptlens.validate import validate

    ex.extract(ws, "shapes", TINY, weights=tiny, batch_size=8, checkpoint_id="one", progress=False)
    for i in (2, 0):
        ex.extract(
            ws, "shapes", TINY, weights=tiny, batch_size=8, checkpoint_id="sh", shard=(i, 3), progress=False
        )
        assert not (ws / "features" / "checkpoint_id=sh").exists()  # a shard is still missing
        assert not validate(ws)
    ex.extract(
        ws, "shapes", TINY, weights=tiny, batch_size=8, checkpoint_id="sh", shard="1/3", progress=False
    )
    assert _features(ws, "sh").equals(_features(ws, "one"))
    assert not (ws / ".partial" / "features" / "sh").exists()
    with pytest.raises(ValueError, match="--shard"):
        ex.parse_shard("3/3")


@pytest.mark.slow
def test_ray_engine_writes_what_the_local_engine_writes(ws, tiny):
    pytest.importorskip("ray")
    import ray

    import conceptlens.extract as ex
    from conceptlens.cli import main

    ex.extract(ws, "shapes", TINY, weights=tiny, batch_size=8, checkpoint_id="local", progress=False)
    try:
        ex.extract(
            ws,
            "shapes",
            TINY,
            weights=tiny,
            batch_size=8,
            checkpoint_id="ray",
            engine="ray",
            actors=2,
            progress=False,
        )
        # A shard through Ray, the rest locally: the two engines share their parts.
        rc = main(
            [
                "extract",
                "--workspace",
                str(ws),
                "--dataset",
                "shapes",
                "--model",
                TINY,
                "--weights",
                str(tiny),
            ]
            + [
                "--batch-size",
                "8",
                "--checkpoint-id",
                "mixed",
                "--engine",
                "ray",
                "--shard",
                "0/2",
                "--quiet",
            ]
        )
        assert rc == 0 and not (ws / "features" / "checkpoint_id=mixed").exists()
    finally:
        ray.shutdown()
    ex.extract(
        ws, "shapes", TINY, weights=tiny, batch_size=8, checkpoint_id="mixed", shard=(1, 2), progress=False
    )
    local = _features(ws, "local")
    assert _features(ws, "ray").equals(local) and _features(ws, "mixed").equals(local)


# ---- the scale workspace generator -----------------------------------------------------
def test_scale_generator_is_deterministic_valid_and_structured(tmp_path):
    from conceptlens.demo.scale import build_scale, checkpoint_plan
    from conceptlens.validate import validate
    from conceptlens.workspace import Workspace

    a = build_scale(tmp_path / "a", n_images=400, n_checkpoints=12, dim=32, analyses="none", progress=False)
    b = build_scale(tmp_path / "b", n_images=400, n_checkpoints=12, dim=32, analyses="none", progress=False)
    assert validate(a.root) == []
    for name in ("images", "captions", "checkpoints"):
        assert a.read(name).equals(b.read(name)), name
    plan = checkpoint_plan(12)
    for ck in plan:
        fa = a.read("features", checkpoint_id=ck["checkpoint_id"])
        assert fa.equals(b.read("features", checkpoint_id=ck["checkpoint_id"]))
    assert (tmp_path / "a" / a.read("images")["thumbnail"][0].as_py()).read_bytes() == (
        tmp_path / "b" / b.read("images")["thumbnail"][0].as_py()
    ).read_bytes()
    img = a.read("images").to_pandas()
    assert img["label"].nunique() == 8 and img.groupby("label")["superclass"].nunique().max() == 1
    assert {"background", "size", "pose", "brightness"} <= set(img.columns)
    assert (img["split"] == "test").mean() == pytest.approx(0.2)
    # A run's checkpoints get better with epochs: the well-trained one classifies better.
    Xs = {}
    for ck in plan:
        t = Workspace(a.root).read("features", checkpoint_id=ck["checkpoint_id"])
        Xs[ck["checkpoint_id"]] = M.l2_normalize(np.stack(t["embedding"].to_numpy(zero_copy_only=False)))
    y, te = img["label"].to_numpy(), (img["split"] == "test").to_numpy()
    acc = {c: M.knn_accuracy(X[~te], y[~te], X[te], y[te]) for c, X in Xs.items()}
    sup = sorted((ck for ck in plan if ck["method"] == "supervised"), key=lambda ck: ck["epoch"])
    assert acc[sup[-1]["checkpoint_id"]] > acc[sup[0]["checkpoint_id"]] + 0.2
    assert len({ck["checkpoint_id"] for ck in checkpoint_plan(28)}) == 28


def test_demo_scale_command_runs_the_analyses(tmp_path, capsys):
    from conceptlens.cli import main
    from conceptlens.workspace import Workspace

    out = tmp_path / "s"
    args = ["demo", "scale", "--images", "120", "--checkpoints", "2", "--dim", "8", "--workspace", str(out)]
    assert main(args + ["--analyses", "clustering,cluster_metrics", "--quiet"]) == 0
    ws = Workspace(out)
    assert {p["checkpoint_id"] for p in ws.partitions("checkpoint_metrics")} == {
        "supervised-e1000",
        "dino-e1000",
    }
    assert main(args[:-1] + [str(tmp_path / "t"), "--classes", "500", "--quiet"]) == 1
    assert "--classes" in capsys.readouterr().err


def test_first_occurrences_as_np_unique():
    from conceptlens.metrics.intrinsic import first_occurrences

    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 5)).astype(np.float32)
    X[rng.integers(0, 300, 40)] = X[rng.integers(0, 300, 40)]  # duplicates, some chained
    X[7] = 0.0
    X[9] = -0.0  # equal to row 7 as numbers, not as bytes
    _, first = np.unique(X, axis=0, return_index=True)
    ref = np.zeros(300, bool)
    ref[first] = True
    assert np.array_equal(first_occurrences(X), ref) and not ref[9]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("collide", [False, True])
def test_first_occurrences_compare_rows_whose_keys_collide(monkeypatch, dtype, collide):
    """Rows are compared exactly wherever their 64-bit keys are equal: with every key made
    equal (collide) distinct rows still stay, and equal rows in blocks of by_rows (over
    1,024 rows) are found across blocks."""
    from conceptlens.metrics import intrinsic

    rng = np.random.default_rng(4)
    X = rng.normal(size=(2500, 3)).astype(dtype)  # 3 columns: not whole 64-bit words in float32
    X[2400:] = X[rng.integers(0, 2400, 100)]  # equal to rows in earlier blocks
    X[300:400] = X[rng.integers(0, 300, 100)]
    X[5], X[2300], X[350] = 0.0, -0.0, -0.0
    if collide:
        monkeypatch.setattr(intrinsic, "_row_keys", lambda B: np.zeros(len(B), np.uint64))
        X = X[:400]  # every pair of rows is compared: keep it small
    _, first = np.unique(X, axis=0, return_index=True)
    ref = np.zeros(len(X), bool)
    ref[first] = True
    assert np.array_equal(intrinsic.first_occurrences(X), ref)
    assert ref.sum() < len(X)


def test_wide_tables_are_written_in_row_groups_small_ones_in_one(tmp_path):
    # Readers decode row groups in parallel: a 50k x 2048 features file in one group reads
    # on one core. Narrow tables (the demo's) keep one group, so their bytes do not change.
    import pyarrow as pa

    from conceptlens.workspace import ROW_GROUP_BYTES, atomic_write_table

    n, d = 6000, ROW_GROUP_BYTES // (4 * 4096) + 1  # 4,096 rows come just above the target
    emb = pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(n * d, np.float32)), d)
    atomic_write_table(tmp_path / "wide.parquet", pa.table({"embedding": emb}))
    assert pq.ParquetFile(tmp_path / "wide.parquet").metadata.num_row_groups == 2
    atomic_write_table(tmp_path / "narrow.parquet", pa.table({"x": np.arange(200_000)}))
    assert pq.ParquetFile(tmp_path / "narrow.parquet").metadata.num_row_groups == 1
