"""What mutation testing found untested in study designs (tools/mutate.py,
conceptlens/studies/design.py): label descriptions, and clusters without a description."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pytest

from conceptlens import schema
from conceptlens.studies.design import StudyError, design
from conceptlens.workspace import Workspace
from tests.study_factory import SPECS


def test_label_descriptions_name_each_clusters_most_frequent_label(factory_copy):
    ws = Workspace(factory_copy)
    d = design(ws, replace(SPECS["describability"], caption_source="label"))
    m = ws.read("cluster_metrics", checkpoint_id="ck0", k=4).to_pandas().set_index("cluster")
    img = ws.read("images").to_pandas()
    names = dict(
        zip(img.loc[img["dataset"] == "toy", "label"], img.loc[img["dataset"] == "toy", "label_name"])
    )
    tasks = [t for t in d.tasks if not t.is_catch]
    assert tasks
    for t in tasks:
        assert t.payload["description"] == names[m.loc[t.unit, "top_label"]], t.unit


def test_a_cluster_without_a_caption_is_left_out_with_a_note(factory_copy):
    ws = Workspace(factory_copy)
    cap = ws.read("cluster_captions", checkpoint_id="ck0", k=4).to_pandas()
    tested = [t.unit for t in design(ws, SPECS["describability"]).tasks if not t.is_catch]
    blank = sorted(set(tested))[0]
    cap.loc[cap["cluster"] == blank, "caption"] = "  "
    want = pa.schema([f for f in schema.arrow_schema("cluster_captions", partition=False) if f.name in cap])
    ws.write("cluster_captions", pa.Table.from_pandas(cap[want.names], schema=want), checkpoint_id="ck0", k=4)
    d = design(ws, replace(SPECS["describability"], per_participant=2))
    assert blank not in {t.unit for t in d.tasks}
    assert any(
        f"cluster {blank} of checkpoint 'ck0' at k=4 has no 'caption' description" in n for n in d.notes
    )


def test_sessions_that_are_never_reclaimed_are_a_valid_choice():
    # 0 minutes: a session is never handed to someone else; below 0 is an error.
    assert replace(SPECS["coherence"], reclaim_minutes=0).check().reclaim_minutes == 0
    with pytest.raises(StudyError, match="study parameter reclaim_minutes"):
        replace(SPECS["coherence"], reclaim_minutes=-1).check()


def test_an_unknown_caption_source_is_named():
    with pytest.raises(StudyError, match="study parameter caption_source: must be one of caption, "):
        replace(SPECS["describability"], caption_source="title").check()
