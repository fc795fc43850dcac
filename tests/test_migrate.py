"""`conceptlens migrate`: a 1.0 workspace becomes 2.0 with the same numbers; a stopped
migration is finished by running it again."""

import json
import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptlens import schema
from conceptlens.cli import main
from conceptlens.db import WorkspaceDB
from conceptlens.migrate import migrate
from conceptlens.validate import validate
from conceptlens.workspace import Workspace
from tests.factory import make_workspace


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
    from tests.factory import factor_workspace

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
