"""Data flow of `conceptlens migrate` from 2.0 (issue 29, item 2): it re-keys the stored
fingerprints of the units that were up to date, and only those. A unit whose inputs
changed after it was analysed must stay due after the migration, in place and in a moved
copy; one that was done must stay done. tests/factory.py's workspace (48 images)."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa

from conceptlens.analysis import runner
from conceptlens.migrate import migrate
from conceptlens.workspace import legacy_signatures
from tests.factory import make_workspace, write_features

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
