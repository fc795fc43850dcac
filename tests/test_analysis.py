"""The cluster analyses (clustering, cluster_metrics, cluster_captions, projections,
comparisons) through the runner, on a small synthetic workspace."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptlens import schema
from conceptlens.analysis import by_name, comparisons, registered, runner
from conceptlens.analysis.base import Scope, Unit
from conceptlens.analysis.common import Context, factor_matrix
from conceptlens.db import WorkspaceDB
from conceptlens.validate import validate
from conceptlens.workspace import Workspace, WorkspaceError
from harness.factory import FACTOR_COLORS as COLORS
from harness.factory import FACTOR_SHAPES as SHAPES
from harness.factory import factor_workspace as make_workspace

N = 240  # images of the default factor workspace

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def table(ws, name):
    """A whole table through DuckDB (what the dashboard sees), sorted by its key."""
    key = list(schema.TABLES_BY_NAME[name].key)
    db = WorkspaceDB(ws.root)
    try:
        return db.query(f'SELECT * FROM "{name}"').sort_values(key).reset_index(drop=True)
    finally:
        db.close()


def analyse(ws, names="all", checkpoint=None, force=False, **opts):
    return runner.run(ws.root, names, opts, checkpoint=checkpoint, force=force, progress_bars=False)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("ws"))
    ctx = analyse(ws, k=[12], rouge_ablation=True)
    return ws, ctx.notes


def test_analysis_writes_valid_tables(analysed):
    ws, notes = analysed
    assert validate(ws.root) == []
    cl = table(ws, "clusters")
    assert len(cl) == 3 * N and set(cl["k"]) == {12}
    cm = table(ws, "checkpoint_metrics").set_index("checkpoint_id")
    assert list(cm.index) == ["toy-ckpt0", "toy-ckpt1", "toy-ckpt2"]
    # Cleaner features: better clusters, neighbours and learnability.
    assert cm.loc["toy-ckpt0", "anmi"] > 0.9 and cm.loc["toy-ckpt0", "knn_acc"] > 0.95
    assert cm["anmi"].is_monotonic_decreasing and cm["cl"].is_monotonic_decreasing
    assert (cm["n_duplicates"] == 0).all() and (cm["n_images"] == N).all()
    cs = table(ws, "clid_scores").set_index("checkpoint_id")
    assert cs["clid"].notna().all() and cs["wclid"].notna().all()
    assert cs["clid"].sum() == pytest.approx(0, abs=1e-9)
    # CLID is z(CL) + z(ID) over the three checkpoints (population std).
    z = lambda v: (v - v.mean()) / v.std(ddof=0)  # noqa: E731
    assert cs["clid"].to_numpy() == pytest.approx((z(cm["cl"]) + z(cm["id"])).to_numpy())
    pc = table(ws, "predictor_correlations")
    assert set(pc["predictor"]) == set(comparisons.PREDICTORS)
    # Leave-one-out W-CLID needs 4 checkpoints: with 3 it has no value to correlate. The
    # toy checkpoints have no loadable model: no alignment or rotation baseline either.
    none = pc["predictor"].isin(["wclid_loo", "alignment", "rotation"])
    assert (pc.loc[~none, "n_checkpoints"] == 3).all()
    assert (pc.loc[none, "n_checkpoints"] == 0).all()
    pr = table(ws, "projections")
    assert len(pr) == 3 * N and pr[["x", "y"]].notna().all().all()
    assert any("describability skipped" in n for n in notes)


def test_comparisons_match_a_direct_computation(analysed):
    """clustering_similarity and cluster_links agree with the clusterings they compare."""
    from conceptlens.metrics.compare import match_clusters
    from conceptlens.metrics.scores import anmi

    ws, _ = analysed
    cl = table(ws, "clusters")
    sim = table(ws, "clustering_similarity")
    assert len(sim) == 3 and (sim["checkpoint_a"] < sim["checkpoint_b"]).all()
    a = cl[cl.checkpoint_id == "toy-ckpt0"][["image_id", "cluster"]]
    b = cl[cl.checkpoint_id == "toy-ckpt2"][["image_id", "cluster"]]
    j = a.merge(b, on="image_id")
    row = sim[(sim.checkpoint_a == "toy-ckpt0") & (sim.checkpoint_b == "toy-ckpt2")].iloc[0]
    assert row["anmi"] == pytest.approx(anmi(j["cluster_x"], j["cluster_y"]))
    assert row["n_shared"] == N
    links = table(ws, "cluster_links")
    links = links[(links.checkpoint_a == "toy-ckpt0") & (links.checkpoint_b == "toy-ckpt2")]
    direct = match_clusters(a, b).sort_values(["a", "b"]).reset_index(drop=True)
    assert (
        links[["a", "b", "count", "size_a", "size_b"]].to_numpy().tolist()
        == direct[["a", "b", "count", "size_a", "size_b"]].to_numpy().tolist()
    )
    assert links["count"].sum() == N


def test_cluster_metrics_content(analysed):
    ws, _ = analysed
    m = table(ws, "cluster_metrics").merge(
        table(ws, "cluster_captions"), on=["checkpoint_id", "k", "cluster"]
    )
    clean = m[m["checkpoint_id"] == "toy-ckpt0"]
    assert len(clean) == 12 and clean["size"].sum() == N
    assert clean["purity"].mean() > 0.9
    big = clean[clean["size"] >= 11]
    assert (big["coherence_random"] > 0.9).all() and (big["annotator"] == "factors").all()
    assert (big["coherence_random_lo"] <= big["coherence_random"]).all()
    assert (big["coherence_trials"] == 20).all()
    assert (clean["hard_negative"] != clean["cluster"]).all()
    assert (clean["caption_source"] == "groundtruth").all()
    # A pure cluster's caption names its top label's colour and shape.
    images = ws.read("images").to_pandas()
    for _, r in big.iterrows():
        name = images.query("label == @r.top_label")["label_name"].iloc[0]
        colour, shape = name.split()
        assert colour in r["caption"] and shape in r["caption"]
        assert isinstance(r["caption_rouge"], str) and isinstance(r["caption_noneg"], str)


def test_a_copied_or_renamed_workspace_stays_analysed(analysed, tmp_path):
    """Fingerprints name files inside the workspace only: a clone into another folder (or a
    renamed workspace) must not look stale, yet a changed input still must."""
    import shutil

    from conceptlens.workspace import files_signature

    ws, _ = analysed
    copy = Path(shutil.copytree(ws.root, tmp_path / "another-name" / "elsewhere"))
    assert not any(runner.missing(copy).values())
    f = ws.files("images")
    assert files_signature(f) == files_signature(Workspace(copy).files("images"))
    clusters = Workspace(copy).partition_files("clusters", checkpoint_id="toy-ckpt0", k=12)
    t = pq.read_table(clusters[0])
    pq.write_table(t.slice(1), clusters[0])
    assert runner.missing(copy, ["cluster_metrics"])["cluster_metrics"] == ["checkpoint_id=toy-ckpt0/k=12"]


def test_resume_skips_done_and_force_recomputes(analysed):
    ws, _ = analysed
    files = {
        p: p.stat().st_mtime_ns for p in ws.root.rglob("*.parquet") if "analysis_runs" not in p.parts[-3]
    }
    analyse(ws, k=[12])
    assert {p: p.stat().st_mtime_ns for p in files} == files, "a rerun must not rewrite done units"
    analyse(ws, ["clustering", "cluster_metrics"], checkpoint="toy-ckpt1", k=[5])
    assert runner.missing(ws.root)["comparisons"] == ["dataset=toy"]
    analyse(ws, "comparisons")
    cm = table(ws, "checkpoint_metrics")
    assert set(zip(cm["checkpoint_id"], cm["k"])) == {
        ("toy-ckpt0", 12),
        ("toy-ckpt1", 12),
        ("toy-ckpt2", 12),
        ("toy-ckpt1", 5),
    }
    # A lone checkpoint at k=5 has nothing to be compared with.
    cs = table(ws, "clid_scores")
    assert cs.loc[cs["k"] == 5, "clid"].isna().all()
    assert len(table(ws, "clusters")) == 3 * N + N
    # --force recomputes: the same numbers (seeded), a new file.
    p = ws.table_path("checkpoint_metrics", checkpoint_id="toy-ckpt0", k=12)
    before, mtime = pq.read_table(p), p.stat().st_mtime_ns
    analyse(ws, "cluster_metrics", checkpoint="toy-ckpt0", force=True)
    assert p.stat().st_mtime_ns != mtime and pq.read_table(p).equals(before)
    assert validate(ws.root) == []


def test_reclustering_makes_metrics_and_comparisons_stale(tmp_path):
    """A clustering recomputed with another seed invalidates what was measured on it."""
    ws = make_workspace(tmp_path / "w", n=120)
    analyse(ws, ["cluster_metrics", "comparisons"], k=[6])
    assert not any(runner.missing(ws.root, ["comparisons"]).values())
    analyse(ws, "clustering", checkpoint="toy-ckpt2", force=True, seed=7, k=[6])
    todo = runner.missing(ws.root, ["comparisons"])
    assert todo["cluster_metrics"] == ["checkpoint_id=toy-ckpt2/k=6"]
    assert todo["comparisons"] == ["dataset=toy"]


def test_adding_a_checkpoint_reads_and_writes_only_its_own_files(tmp_path):
    """The storage promise: adding one checkpoint to a workspace of many neither reads nor
    rewrites another checkpoint's files. The others' files are replaced by garbage of the
    same size: any read of them would fail, any write would change them."""
    ws = make_workspace(tmp_path / "w", n=80)
    analyse(ws, ["cluster_metrics", "cluster_captions", "projections"], k=[5], describability=False)
    others = [p for p in ws.root.rglob("*.parquet") if "checkpoint_id=toy-ckpt" in str(p)]
    assert len(others) == 3 * 6
    for p in others:
        p.write_bytes(b"\0" * p.stat().st_size)
    garbage = {p: p.read_bytes() for p in others}
    rng = np.random.default_rng(5)
    ids = ws.read("images").to_pandas()["image_id"].tolist()
    ws.write(
        "features",
        pa.table(
            {
                "image_id": ids,
                "embedding": pa.array(
                    list(rng.normal(size=(80, 16)).astype(np.float32)), type=pa.list_(pa.float32())
                ),
            }
        ),
        checkpoint_id="new",
    )
    ck = ws.read("checkpoints").to_pandas()
    ck.loc[len(ck)] = {
        "checkpoint_id": "new",
        "dataset": "toy",
        "model": "mlp",
        "method": "random",
        "epoch": 0,
        "feature_dim": 16,
        "source": "synthetic",
    }
    ws.write(
        "checkpoints", pa.Table.from_pandas(ck, schema=ws.read("checkpoints").schema, preserve_index=False)
    )
    analyse(
        ws,
        ["cluster_metrics", "cluster_captions", "projections"],
        checkpoint="new",
        k=[5],
        describability=False,
    )
    assert {p: p.read_bytes() for p in others} == garbage
    for name in ("clusters", "cluster_metrics", "cluster_captions", "checkpoint_metrics"):
        assert ws.has(name, checkpoint_id="new", k=5), name
    assert ws.has("projections", checkpoint_id="new", method="umap")


def test_checkpoint_annotator_and_errors(tmp_path):
    ws = make_workspace(tmp_path / "w", n=120)
    ctx = analyse(ws, ["cluster_metrics"], k=[6], annotator="checkpoint:toy-ckpt0")
    m = table(ws, "cluster_metrics")
    assert set(m.loc[m["checkpoint_id"] != "toy-ckpt0", "annotator"].dropna()) == {"checkpoint:toy-ckpt0"}
    assert m.loc[m["checkpoint_id"] == "toy-ckpt0", "coherence_random"].isna().all()
    assert any("coherence skipped" in n for n in ctx.notes)
    with pytest.raises(WorkspaceError, match="not in checkpoints.parquet"):
        analyse(ws, checkpoint="nope")
    with pytest.raises(ValueError, match="--trials must be at least 20"):
        analyse(ws, "cluster_metrics", trials=5, force=True)
    with pytest.raises(ValueError, match="unknown option"):
        analyse(ws, "clustering", n_clusters=5)
    ws.remove_partition("features", checkpoint_id="toy-ckpt2")
    # A checkpoint without features has nothing to cluster (validate reports the gap).
    assert by_name()["clustering"].units(Context(ws), {"k": [7]}, Scope(checkpoint="toy-ckpt2")) == []


def test_dependency_order_and_unknown_analysis():
    names = [a.name for a in runner.in_order(["comparisons"])]
    assert names == ["clustering", "cluster_metrics", "comparisons"]
    assert [a.name for a in runner.in_order(["cluster_captions"])] == ["clustering", "cluster_captions"]
    with pytest.raises(ValueError, match="unknown analysis 'nope'"):
        runner.in_order(["nope"])
    # Every table an analysis writes is in the schema. Two analyses share a table only when it
    # is partitioned, so their units write different files (similarity's UMAP of people's
    # embedding is its own `projections` partition, checkpoint_id=psych@DATASET).
    written = [t for a in registered() for t in a.writes]
    assert set(written) <= set(schema.TABLES_BY_NAME)
    shared = {t for t in written if written.count(t) > 1}
    assert shared <= {"projections"}, shared
    assert all(schema.TABLES_BY_NAME[t].partitioned for t in shared)


def test_describability_with_a_vl_model(tmp_path, monkeypatch):
    """A stand-in VL model that sees colour and shape: captions retrieve their clusters."""
    import sys
    import types

    ws = make_workspace(tmp_path / "w", n=160)
    img = ws.read("images").to_pandas()
    # One thumbnail per image so the stand-in can tell them apart.
    ws.write(
        "images", pa.Table.from_pandas(img.assign(thumbnail=["thumbs/x.png?" + i for i in img["image_id"]]))
    )
    words = list(SHAPES) + list(COLORS)
    by_path = {}

    def vec(text):
        v = np.array([float(w in text.split()) for w in words])
        return v / max(np.linalg.norm(v), 1e-9)

    for _, r in img.iterrows():
        by_path[r["image_id"]] = vec(f"{r['shape']} {r['color']}")

    class FakeVL:
        @classmethod
        def from_workspace(cls, root, dataset):
            assert dataset == "toy"
            return cls()

        def encode_text(self, texts):
            return np.stack([vec(t) for t in texts])

        def encode_images(self, paths):
            return np.stack([by_path[str(p).split("?")[-1]] for p in paths])

    monkeypatch.setitem(sys.modules, "conceptlens.vl", types.SimpleNamespace(VLModel=FakeVL))
    monkeypatch.setattr(Workspace, "resolve", lambda self, rel: rel)
    ws.write(
        "vl_models",
        pa.table(
            {
                "vl_model_id": ["fake"],
                "dataset": ["toy"],
                "spec": ["fake"],
                "config": pa.array([None], pa.string()),
                "weights": pa.array([None], pa.string()),
                "weights_sha256": pa.array([None], pa.string()),
            }
        ),
    )
    analyse(ws, ["cluster_metrics", "cluster_captions"], checkpoint="toy-ckpt0", k=[12], rouge_ablation=False)
    m = table(ws, "cluster_metrics").merge(
        table(ws, "cluster_captions"), on=["checkpoint_id", "k", "cluster"]
    )
    pure = m[m["purity"] > 0.99]
    assert len(pure) >= 6
    # The caption retrieves images of the cluster's label, a few from a twin cluster of it.
    assert (pure["describability_top1"] >= 0.8).all() and (pure["describability_binary"] > 0.85).all()
    assert (pure["describability_2afc"] == 1.0).all() and not pure["describability_self"].any()
    assert pure["describability_hits"].between(1, 10).all()


def test_factor_matrix():
    import pandas as pd

    df = pd.DataFrame(
        {
            "image_id": ["a", "b", "c"],
            "dataset": "d",
            "label": [0, 1, 1],
            "shape": ["x", "y", "x"],
            "size": [1.0, 2.0, 3.0],
            "empty": [None] * 3,
        }
    )
    A, cols = factor_matrix(df)
    assert cols == ["label", "shape", "size"] and A.shape == (3, 2 + 2 + 1)


def test_one_hot_is_get_dummies():
    import pandas as pd

    from conceptlens.analysis.common import one_hot

    for s in (
        pd.Series(["b", None, "a", "B", "é", "10", "9", None, "a"]),
        pd.Series([3, 1, 20, 1]),
        pd.Series([True, None, False], dtype=object),
    ):
        want = pd.get_dummies(s.astype("string"), dtype=float).to_numpy()
        got = one_hot(s)
        assert got.dtype == np.float32 and np.array_equal(got, want)


def test_analysis_runs_log_every_unit(analysed):
    ws, _ = analysed
    runs = table(ws, "analysis_runs")
    units = runs[runs["analysis"] == "clustering"]["unit"]
    assert {"checkpoint_id=toy-ckpt0/k=12", "checkpoint_id=toy-ckpt2/k=12"} <= set(units)
    import json

    assert json.loads(runs.iloc[0]["options"])["seed"] == 0


def test_cli_runs(tmp_path, capsys):
    from conceptlens.cli import main

    ws = make_workspace(tmp_path / "w", n=100)
    assert main(["analyze", "cluster_metrics", "--workspace", str(ws.root), "--quiet"]) == 0
    assert "not done everywhere" in capsys.readouterr().err  # clustering has not run yet
    assert (
        main(["analyze", "all", "--workspace", str(ws.root), "--k", "4", "--no-describability", "--quiet"])
        == 0
    )
    assert ws.has("predictor_correlations", dataset="toy")
    capsys.readouterr()
    assert main(["analyze", "all", "--workspace", str(ws.root), "--checkpoint", "zz"]) == 1
    err = capsys.readouterr().err
    assert "checkpoint 'zz' is not in checkpoints.parquet" in err and "Traceback" not in err
    # Checked when the arguments are parsed, before anything runs (argparse exits with 2).
    for args, why in (
        (["--k", "1"], "argument --k: must be at least 2, got 1"),
        (["--kmeans", "fast"], "argument --kmeans: must be one of auto, faiss, sklearn, got 'fast'"),
        (["--n-init", "many"], "argument --n-init: not a valid int: 'many'"),
    ):
        with pytest.raises(SystemExit) as stop:
            main(["analyze", "clustering", "--workspace", str(ws.root), *args])
        assert stop.value.code == 2 and why in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["analyze", "concepts", "--workspace", str(ws.root), "--niche-beta", "1.5"])
    assert "argument --niche-beta: must be at most 1, got 1.5" in capsys.readouterr().err


def test_demo_analysis_stage(tmp_path):
    from conceptlens.demo.analysis import build_analysis

    ws = make_workspace(tmp_path / "w", n=100)
    build_analysis(ws, seed=0, progress=False)
    cm = table(ws, "checkpoint_metrics")
    assert len(cm) == 3 and set(cm["k"]) == {10}  # round(sqrt(100))
    assert validate(ws.root) == []


def test_demo_numbers_are_what_the_code_computes(demo_copy):
    """Smoke test on the demo: recomputing one checkpoint's clustering and metrics with the
    current code gives exactly the numbers the bundled workspace ships. Its k-means (and
    held-out CL's) were made by scikit-learn, what `--kmeans auto` ran below 20,000 images
    until issue 25 and `--kmeans sklearn` still runs; `auto` now takes faiss at every size
    (tests/test_kmeans_one_path.py), whose partitions of the demo's checkpoints differ."""
    ws = Workspace(demo_copy)
    cid = "digits-pca"
    k = next(p["k"] for p in ws.partitions("clusters") if p["checkpoint_id"] == cid)
    before = {
        name: ws.read(name, checkpoint_id=cid, k=k).to_pandas()
        for name in ("clusters", "cluster_metrics", "checkpoint_metrics")
    }
    runner.run(
        ws.root,
        ["clustering", "cluster_metrics"],
        {"k": [k], "kmeans": "sklearn"},
        checkpoint=cid,
        force=True,
        progress_bars=False,
        with_dependencies=False,
    )
    for name, old in before.items():
        new = ws.read(name, checkpoint_id=cid, k=k).to_pandas()
        # Format 2.3 adds the bootstrap intervals (purity_lo/hi, knn_acc_lo/hi, ...); the
        # demo's tables, analysed before, have every other column, with the same values.
        added = [c for c in new.columns if c not in old.columns]
        assert [c for c in new.columns if c in old.columns] == old.columns.tolist(), name
        assert all(c.endswith(("_lo", "_hi")) for c in added), (name, added)
        for c in old.columns:
            a, b = old[c], new[c]
            if a.dtype.kind == "f":
                np.testing.assert_allclose(
                    b.to_numpy(float), a.to_numpy(float), rtol=1e-9, atol=1e-12, err_msg=f"{name}.{c}"
                )
            else:
                assert a.fillna(-1).tolist() == b.fillna(-1).tolist(), f"{name}.{c}"


def test_concept_models_are_clustered_only_when_named(tmp_path):
    """`analyze all` must not k-means the learnt concepts of concept models (their features are
    k concepts side by side, measured by `concepts`), yet a named one is clustered."""
    from tests.concepts_factory import concept_workspace

    ws = concept_workspace(tmp_path / "w", n=120, levels=(0.0,))
    todo = runner.missing(ws.root, ["clustering", "projections"])
    vision = {"checkpoint_id=vision-toy-d0.00-s0"}
    assert {u.split("/")[0] for u in todo["clustering"]} == vision
    assert {u.split("/")[0] for u in todo["projections"]} == vision
    analyse(ws, ["clustering"], checkpoint="vae-toy-d0.00-s0", k=[4])
    assert ws.has("clusters", checkpoint_id="vae-toy-d0.00-s0", k=4)


def test_a_dataset_restricts_every_unit_to_its_own(demo_copy):
    """`dataset=` (a study's next round refits its own dataset's embedding only): dataset
    units of other datasets and checkpoint units of their checkpoints are left alone."""
    ws = Workspace(demo_copy)
    before = len(ws.read("analysis_runs", analysis="comparisons").to_pandas())
    runner.run(
        demo_copy,
        ["comparisons"],
        {},
        dataset="digits",
        force=True,
        progress_bars=False,
        with_dependencies=False,
    )
    runs = ws.read("analysis_runs", analysis="comparisons").to_pandas().iloc[before:]
    assert list(runs["unit"]) == ["dataset=digits"]
    ck = ws.read("checkpoints").to_pandas()
    digits = set(ck.loc[ck["dataset"] == "digits", "checkpoint_id"])
    units = Unit
    ctx = Context(ws, progress=False)
    assert runner.dataset_of(ctx, units({"checkpoint_id": sorted(digits)[0], "k": 42})) == "digits"
    assert runner.dataset_of(ctx, units({"dataset": "shapes"})) == "shapes"
    with pytest.raises(WorkspaceError, match="'nowhere' has no images"):
        runner.run(demo_copy, ["comparisons"], {}, dataset="nowhere", progress_bars=False)
