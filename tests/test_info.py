"""`conceptlens info` (conceptlens/info.py): what a workspace holds, counted another way
here (pandas over the tables, the registry's own units), a unit counted as done only when
the log says so and the unit still exists, and nothing written (issue 47, minor)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa

from conceptlens import info
from conceptlens.analysis import runner
from conceptlens.cli import main
from harness.factory import make_workspace, snapshot, write_features


def test_datasets_are_counted_as_the_tables_say(tmp_path):
    ws = make_workspace(tmp_path / "ws", n_images=30, n_checkpoints=3)
    ck = ws.read("checkpoints").to_pandas()
    ck.loc[0, "layer"] = "blocks.2"  # one checkpoint is a layer
    ws.write("checkpoints", pa.Table.from_pandas(ck, preserve_index=False))
    img = ws.read("images").to_pandas()
    (d,) = info.summary(ws.root, analyses=False)["datasets"]
    assert d["dataset"] == "toy" and d["images"] == len(img)
    assert (d["train"], d["test"]) == ((img["split"] == "train").sum(), (img["split"] == "test").sum())
    assert d["labels"] == img["label"].nunique()
    assert (d["checkpoints"], d["layers"]) == (3, 1)
    assert d["concepts"] == 0 and d["hierarchy_levels"] == 0


def test_units_done_follow_the_log_and_the_registry(tmp_path):
    ws = make_workspace(tmp_path / "ws", n_images=30, n_checkpoints=2)
    before = {a["analysis"]: a for a in info.summary(ws.root)["analyses"]}
    assert before["clustering"]["units"] == 2 and before["clustering"]["done"] == 0
    runner.run(ws.root, "clustering", {}, progress_bars=False, with_dependencies=False)
    after = {a["analysis"]: a for a in info.summary(ws.root)["analyses"]}
    units = runner.missing(ws.root, ["clustering"])["clustering"]
    assert units == [] and after["clustering"]["done"] == after["clustering"]["units"] == 2
    # A new checkpoint is a unit not done yet: counted in the units, not in the done.
    ids = ws.read("images").to_pandas()["image_id"]
    write_features(ws, "new", ids, np.random.default_rng(0).normal(size=(len(ids), 8)))
    ck = ws.read("checkpoints").to_pandas()
    row = ck.iloc[[0]].assign(checkpoint_id="new", source="imported:new")
    ws.write("checkpoints", pa.Table.from_pandas(pd.concat([ck, row]), preserve_index=False))
    later = {a["analysis"]: a for a in info.summary(ws.root)["analyses"]}
    assert (later["clustering"]["done"], later["clustering"]["units"]) == (2, 3)


def test_the_command_prints_text_or_json_and_writes_nothing(tmp_path, capsys):
    ws = make_workspace(tmp_path / "ws", n_images=30, n_checkpoints=2)
    before = snapshot(ws.root)
    assert main(["info", "--workspace", str(ws.root)]) == 0
    text = capsys.readouterr().out
    assert "toy: 30 images" in text and "2 checkpoints" in text
    assert "clustering" in text and "0 of 2 units done" in text
    lines = {ln.split()[0]: " ".join(ln.split()[1:]) for ln in text.splitlines() if ln.startswith("  ")}
    assert lines["cluster_metrics"] == "no unit yet: it runs after clustering"  # not "nothing to compute"
    assert lines["compmap"] == "nothing to compute here"  # no primitives: none will come
    assert main(["info", "--workspace", str(ws.root), "--json", "--no-analyses"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["analyses"] is None and got["datasets"][0]["images"] == 30
    assert got["bytes"] == sum(len(v[1]) for v in before.values() if v[0] == "file")
    assert snapshot(ws.root) == before
