"""`conceptlens migrate`: a 1.0 workspace becomes 2.0 with the same numbers; a stopped
migration is finished by running it again."""

import json
import os
import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptlens import schema
from conceptlens.analysis import runner
from conceptlens.cli import main
from conceptlens.db import WorkspaceDB
from conceptlens.migrate import migrate
from conceptlens.validate import validate
from conceptlens.workspace import Workspace, legacy_signatures
from harness.factory import make_workspace, write_features


def _all(root, name):
    db = WorkspaceDB(root)
    try:
        key = list(schema.TABLES_BY_NAME[name].key)
        return db.query(f'SELECT * FROM "{name}"').sort_values(key).reset_index(drop=True)
    finally:
        db.close()


def to_v1(root):
    """Rewrite a 2.0 workspace in the 1.0 layout (what ConceptLens 0.1 wrote)."""
    ws = Workspace(root)
    for name in ("clusters", "projections"):
        pq.write_table(
            pa.Table.from_pandas(_all(root, name), preserve_index=False), ws.root / f"{name}.parquet"
        )
    cm = _all(root, "cluster_metrics").merge(
        _all(root, "cluster_captions"), on=["checkpoint_id", "k", "cluster"]
    )
    pq.write_table(pa.Table.from_pandas(cm, preserve_index=False), ws.root / "cluster_metrics.parquet")
    km = _all(root, "checkpoint_metrics").merge(
        _all(root, "clid_scores").drop(columns="dataset"), on=["checkpoint_id", "k"]
    )
    pq.write_table(pa.Table.from_pandas(km, preserve_index=False), ws.root / "checkpoint_metrics.parquet")
    pq.write_table(
        pa.Table.from_pandas(_all(root, "predictor_correlations"), preserve_index=False),
        ws.root / "predictor_correlations.parquet",
    )
    for p in ws.partitions("features"):
        os.replace(ws.table_path("features", **p), ws.root / "features" / f"{p['checkpoint_id']}.parquet")
        os.rmdir(ws.partition_dir("features", **p))
    import shutil

    for name in (
        "clusters",
        "cluster_metrics",
        "cluster_captions",
        "checkpoint_metrics",
        "projections",
        "clid_scores",
        "predictor_correlations",
        "clustering_similarity",
        "cluster_links",
        "analysis_runs",
    ):
        shutil.rmtree(ws.root / name, ignore_errors=True)
    meta = ws.meta()
    ws.write_meta({**meta, "schema_version": "1.0"})


@pytest.fixture()
def v1(tmp_path):
    ws = make_workspace(tmp_path / "v2", derived=True)
    before = {
        n: _all(ws.root, n)
        for n in (
            "clusters",
            "cluster_metrics",
            "cluster_captions",
            "checkpoint_metrics",
            "projections",
            "features",
        )
    }
    to_v1(ws.root)
    return ws, before


def test_migrate_keeps_every_number(v1, capsys):
    ws, before = v1
    assert [p.message for p in validate(ws.root)][0].startswith("format 1.0: run `conceptlens migrate")
    assert main(["migrate", "--workspace", str(ws.root), "--quiet"]) == 0
    assert f"1.0 -> {schema.SCHEMA_VERSION}" in capsys.readouterr().out
    assert json.loads(ws.meta_path.read_text())["schema_version"] == schema.SCHEMA_VERSION
    assert validate(ws.root) == []
    for name, old in before.items():
        new = _all(ws.root, name)[old.columns]
        if name == "features":
            new["embedding"] = new["embedding"].map(list)
            old = old.assign(embedding=old["embedding"].map(list))
        pd.testing.assert_frame_equal(new, old, check_dtype=False, obj=name)
    # Comparisons 1.0 did not have are computed; CLID survives.
    assert len(_all(ws.root, "clustering_similarity")) == 3
    assert _all(ws.root, "clid_scores")["clid"].notna().all()
    assert not any((ws.root / f).exists() for f in ("clusters.parquet", "checkpoint_metrics.parquet"))
    # Migrating again is a no-op.
    assert migrate(ws.root) == []


def test_a_stopped_migration_finishes_on_rerun(v1, monkeypatch):
    ws, before = v1
    real = Workspace.write_meta

    def crash(self, meta):
        raise OSError("disk full")

    monkeypatch.setattr(Workspace, "write_meta", crash)
    with pytest.raises(OSError):
        migrate(ws.root, progress=False)
    # Nothing of 1.0 is gone before the version changes: the workspace still says 1.0.
    assert json.loads(ws.meta_path.read_text())["schema_version"] == "1.0"
    assert (ws.root / "clusters.parquet").exists()
    monkeypatch.setattr(Workspace, "write_meta", real)
    migrate(ws.root, progress=False)
    assert validate(ws.root) == []
    pd.testing.assert_frame_equal(
        _all(ws.root, "clusters")[before["clusters"].columns], before["clusters"], check_dtype=False
    )


def test_unknown_version_is_refused(tmp_path, capsys):
    ws = make_workspace(tmp_path / "w", n_images=12, n_checkpoints=1)
    ws.write_meta({**ws.meta(), "schema_version": "9.0"})
    assert main(["migrate", "--workspace", str(ws.root)]) == 1
    assert "cannot migrate format '9.0'" in capsys.readouterr().err


def test_migrating_2_0_rekeys_fingerprints_so_a_moved_workspace_stays_analysed(tmp_path):
    """2.0 fingerprints also hashed the folders above a table: a moved workspace looked stale.
    Migrating re-keys what was up to date, in place, so the move no longer matters."""
    import shutil

    from conceptlens.analysis import runner
    from conceptlens.workspace import legacy_signatures
    from harness.factory import factor_workspace

    names = ["clustering", "cluster_metrics", "baselines", "comparisons"]
    ws = factor_workspace(tmp_path / "here" / "ws")
    with legacy_signatures():  # what a 2.0 ConceptLens stored
        runner.run(ws.root, names, {"k": [6]}, progress_bars=False)
    ws.write_meta({**ws.meta(), "schema_version": "2.0"})
    assert not any(runner.missing(ws.root, names).values()), "2.0 fingerprints hold in place"
    moved = shutil.copytree(ws.root, tmp_path / "there" / "renamed")
    assert runner.missing(moved, names)["baselines"], "the 2.0 bug: features are 3 folders deep"

    done = migrate(ws.root)
    assert any("fingerprints of" in d for d in done)
    assert Workspace(ws.root).meta()["schema_version"] == schema.SCHEMA_VERSION
    moved = shutil.copytree(ws.root, tmp_path / "elsewhere" / "renamed-again")
    assert not any(runner.missing(moved, names).values())
    assert migrate(ws.root) == []


# ---- migrating from 2.0 and 2.1: fingerprints re-keyed, new columns added --------------------
NAMES = ["clustering", "cluster_metrics", "baselines", "comparisons"]


def test_migration_rekeys_what_was_up_to_date_and_leaves_stale_units_due(tmp_path):
    """Catches a migration that re-keys every unit with a stored fingerprint (or reads the
    fingerprints after rewriting the files): ck1's cluster metrics and the comparisons,
    computed before ck1 was re-clustered, would then look done and stay stale."""
    ws = make_workspace(tmp_path / "here" / "ws")
    with legacy_signatures():  # what a 2.0 ConceptLens stored
        runner.run(ws.root, NAMES, {"k": [4]}, progress_bars=False)
    ws.write_meta({**ws.meta(), "schema_version": "2.0"})
    assert not any(runner.missing(ws.root, NAMES).values())
    # ck1 re-clustered by hand after the analysis: its dependants are stale.
    t = ws.read("clusters", checkpoint_id="ck1", k=4).drop_columns(["checkpoint_id", "k"])
    md = ws.read_metadata("clusters", checkpoint_id="ck1", k=4)
    c = t["cluster"].to_numpy()
    field = t.schema.field("cluster")
    t = t.set_column(t.schema.get_field_index("cluster"), field, pa.array(np.roll(c, 1), field.type))
    ws.write("clusters", t, metadata=md, checkpoint_id="ck1", k=4)
    # and ck2's features extracted again: its baselines are stale.
    ids = ws.read("features", columns=["image_id"], checkpoint_id="ck2")["image_id"].to_pylist()
    write_features(ws, "ck2", ids, np.random.default_rng(3).normal(size=(len(ids), 8)))
    stale = {
        "clustering": ["checkpoint_id=ck2/k=4"],  # its features changed: clustering fingerprints them
        "cluster_metrics": ["checkpoint_id=ck1/k=4"],
        "baselines": ["checkpoint_id=ck1", "checkpoint_id=ck2"],  # they read clusters and features
        "comparisons": ["dataset=toy"],
    }
    with legacy_signatures():
        assert runner.missing(ws.root, NAMES) == stale

    done = migrate(ws.root)
    assert any("fingerprints of" in d for d in done)
    assert runner.missing(ws.root, NAMES) == stale
    moved = shutil.copytree(ws.root, tmp_path / "elsewhere" / "renamed")
    assert runner.missing(moved, NAMES) == stale


def test_migrating_from_2_1_adds_every_new_column_to_every_file(tmp_path):
    """`migrate` from 2.1 writes each column added since (analysis_runs' status and reason)
    into every file of its table, as nulls, and leaves the rows as they were. Catches the
    first added column (or the first file of a partitioned table) written in place of all
    of them: the second log file would still lack `status` and read as another format."""
    import pyarrow.parquet as pq

    from conceptlens.validate import validate

    ws = make_workspace(tmp_path / "ws")
    runner.run(ws.root, ["clustering", "cluster_metrics"], {"k": [4]}, progress_bars=False)
    files = ws.files("analysis_runs")
    assert len(files) >= 2
    before = {}
    for f in files:  # what a 2.1 ConceptLens wrote
        t = pq.read_table(f)
        t = t.drop_columns([c for c in ("status", "reason") if c in t.column_names])
        pq.write_table(t, f)
        before[f] = t.to_pylist()
    ws.write_meta({**ws.meta(), "schema_version": "2.1"})
    done = migrate(ws.root, progress=False)
    assert f"analysis_runs: column status added (null) to {len(files)} file(s)" in done
    assert f"analysis_runs: column reason added (null) to {len(files)} file(s)" in done
    for f in files:
        t = pq.read_table(f)
        assert {"status", "reason"} <= set(t.column_names), f
        assert t.column("status").null_count == t.num_rows == len(before[f])
        assert t.drop_columns(["status", "reason"]).to_pylist() == before[f]
    assert validate(ws.root) == []


def test_migrating_from_2_4_raises_the_version_and_then_the_sources_run(tmp_path):
    """2.5 only adds tables (the dictionary concepts and the scoreboard, issue 41): a 2.4
    workspace is migrated by raising its version, with no file rewritten; it validates, and
    the new analyses then write tables that validate too. Catches a migration that forgets
    the version (a 2.4 workspace would stay 2.4 forever) or one that touches files it has
    no reason to."""
    ws = make_workspace(tmp_path / "ws")
    runner.run(ws.root, ["clustering"], {"k": [4]}, progress_bars=False)
    ws.write_meta({**ws.meta(), "schema_version": "2.4"})
    before = {f: f.stat().st_mtime_ns for f in ws.root.rglob("*.parquet")}
    done = migrate(ws.root, progress=False)
    assert done == ["workspace.json: format 2.4 -> 2.6"]
    assert Workspace(ws.root).meta()["schema_version"] == schema.SCHEMA_VERSION == "2.6"
    assert {f: f.stat().st_mtime_ns for f in ws.root.rglob("*.parquet")} == before
    assert validate(ws.root) == []
    assert migrate(ws.root, progress=False) == []  # nothing left to do
    opts = {
        "methods": ["semi_nmf"],
        "atoms": 3,
        "stability": False,
        "units_max": 4,
        "directions": 6,
        "n_null": 20,
    }
    runner.run(ws.root, ["dictionary", "scoreboard"], {**opts, "bootstrap": 20}, progress_bars=False)
    assert ws.files("scoreboard_scores") and ws.files("dictionary_fit")
    assert validate(ws.root) == []

    # 2.6 adds the optional scoreboard_concepts.caption: files a 2.5 ConceptLens wrote lack
    # it; they validate, are not rewritten, and the page's view reads "no caption".
    from conceptlens.views import scoreboard as V

    for f in ws.files("scoreboard_concepts"):
        t = pq.read_table(f)
        assert "caption" in t.column_names
        pq.write_table(t.drop_columns(["caption"]), f)
    ws.write_meta({**ws.meta(), "schema_version": "2.5"})
    assert validate(ws.root) == []
    before = {f: f.stat().st_mtime_ns for f in ws.root.rglob("*.parquet")}
    assert migrate(ws.root, progress=False) == ["workspace.json: format 2.5 -> 2.6"]
    assert {f: f.stat().st_mtime_ns for f in ws.root.rglob("*.parquet")} == before
    assert validate(ws.root) == []
    db = WorkspaceDB(ws.root)
    one = db.query("SELECT checkpoint_id, source, concept FROM scoreboard_concepts LIMIT 1").iloc[0]
    assert V.caption(db, one["checkpoint_id"], one["source"], one["concept"]) is None
