"""What mutation testing found untested in `conceptlens analyze convergence` (tools/mutate.py):
two shares, from trials that carry a study round."""

from __future__ import annotations

import pyarrow as pa

from conceptlens import schema
from conceptlens.analysis import runner
from conceptlens.analysis.runner import run
from conceptlens.validate import validate
from conceptlens.workspace import Workspace


def test_trials_before_a_single_round_and_that_round_make_two_shares(factory_copy):
    """Imported trials (no round) then one study round: two shares, whatever `--rounds` says."""
    ws = Workspace(factory_copy)
    t = ws.read("similarity_trials", dataset="toy").to_pandas().drop(columns="dataset", errors="ignore")
    assert t["round"].isna().all()  # the factory's trials came in no round
    again = t[(t["split"] == "train") & ~t["is_catch"]].head(30)
    again = again.assign(trial_id="r0." + again["trial_id"], round=0)
    again["round"] = again["round"].astype("Int64")
    ws.append(
        "similarity_trials",
        pa.Table.from_pandas(again, schema=schema.arrow_schema("similarity_trials", partition=False)),
        dataset="toy",
    )
    t = ws.read("similarity_trials", dataset="toy").to_pandas()
    opts = {"rounds": 3, "convergence_members": 2, "max_epochs": 10}
    ctx = run(factory_copy, ["convergence"], options=opts, with_dependencies=False, progress_bars=False)
    fitted = t[(t["split"] == "train") & ~t["is_catch"]]
    before = int(fitted["round"].isna().sum())
    c = ws.read("similarity_convergence", dataset="toy").to_pandas().sort_values("round")
    assert 0 < before < len(fitted)
    assert list(c["round"]) == [0, 1] and list(c["n_trials"]) == [before, len(fitted)]
    assert any("one share per study round (2" in n for n in ctx.notes)
    # Written as the schema says, with the fingerprint that marks the unit done.
    assert validate(factory_copy) == []
    assert runner.missing(factory_copy, ["convergence"])["convergence"] == []
