"""conceptlens/studies/design.py: what a design shows (its own dataset's images, captions, catch
tasks), its spec's checks, and active rounds."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pyarrow as pa
import pytest

from conceptlens import schema
from conceptlens.studies.design import StudyError, StudySpec, design
from conceptlens.workspace import Workspace
from tests.study_factory import SPECS


# ---- the design --------------------------------------------------------------------------------
def _shown_ids(d) -> set:
    out = set()
    for t in d.tasks:
        p = t.payload
        out.update(i for i in (p.get("positive"), p.get("negative"), p.get("query")) if i is not None)
        out.update(p.get("references", ()))
    return out


def test_every_image_of_a_coherence_catch_task_is_where_it_must_be(factory_template):
    """A catch task is an obviously correct pair: its references and positive from its cluster,
    its negative from outside it."""
    ws = Workspace(factory_template)
    d = design(ws, replace(SPECS["coherence"], catch=3, per_participant=9))
    cluster = ws.read("clusters", checkpoint_id="ck0", k=4).to_pandas().set_index("image_id")["cluster"]
    catches = [t for t in d.tasks if t.is_catch]
    assert len({t.unit for t in catches}) >= 2  # several clusters drawn
    for t in catches:
        p = t.payload
        assert {int(cluster[r]) for r in p["references"]} == {t.unit}
        assert p["positive"] in p["references"] and int(cluster[p["negative"]]) != t.unit


def _with_another_dataset(root) -> Workspace:
    """The factory plus dataset `other`: the same labels under other names (sorting first), and a
    checkpoint on it listed before ck0."""
    import pyarrow as pa

    ws = Workspace(root)
    img = ws.read("images")
    other = img.to_pandas()
    other["image_id"] = "other-" + other["image_id"]
    other["dataset"] = "other"
    other["label_name"] = "aaa " + other["label_name"].astype(str)
    ws.write(
        "images",
        pa.concat_tables([img, pa.Table.from_pandas(other, schema=img.schema, preserve_index=False)]),
    )
    ck = ws.read("checkpoints")
    first = ck.slice(0, 1).to_pandas()
    first["checkpoint_id"], first["dataset"] = "aaa", "other"
    ws.write(
        "checkpoints",
        pa.concat_tables([pa.Table.from_pandas(first, schema=ck.schema, preserve_index=False), ck]),
    )
    return ws


@pytest.mark.parametrize("name", list(SPECS))
def test_a_design_holds_the_thumbnails_of_the_images_it_shows_and_no_other(factory_copy, name):
    """Design.images is what the participant page may fetch: every image a task shows (catch
    tasks included), with its own thumbnail, and nothing else of the workspace (here: none of
    another dataset's images)."""
    ws = _with_another_dataset(factory_copy)
    d = design(ws, SPECS[name])
    img = ws.read("images", columns=["image_id", "thumbnail"]).to_pandas().set_index("image_id")["thumbnail"]
    used = _shown_ids(d)
    assert set(d.images) == used and len(used) < len(img)
    assert d.images == {i: img[i] for i in used}


def test_a_study_draws_from_its_own_dataset_only(factory_copy):
    ws = _with_another_dataset(factory_copy)
    toy = set(ws.read("images").to_pandas().query("dataset == 'toy'")["image_id"])
    sim = design(ws, SPECS["similarity"])
    assert _shown_ids(sim) <= toy
    names = ws.read("images").to_pandas().query("dataset == 'toy'").groupby("label")["label_name"].first()
    top = ws.read("cluster_metrics", checkpoint_id="ck0", k=4).to_pandas().set_index("cluster")["top_label"]
    d = design(ws, replace(SPECS["describability"], caption_source="label"))
    described = {t.unit: t.payload["description"] for t in d.tasks}
    assert described and all(v == names[top[c]] for c, v in described.items()), described


def test_an_empty_caption_is_no_description(factory_copy):
    import pyarrow as pa

    ws = Workspace(factory_copy)
    cap = ws.read("cluster_captions", checkpoint_id="ck0", k=4).to_pandas()
    cap.loc[cap["cluster"] == 1, "caption"] = "   "
    sch = ws.read("cluster_captions", checkpoint_id="ck0", k=4).schema
    ws.write(
        "cluster_captions",
        pa.Table.from_pandas(cap, schema=sch, preserve_index=False),
        checkpoint_id="ck0",
        k=4,
    )
    d = design(ws, replace(SPECS["describability"], per_participant=2))
    assert {t.unit for t in d.tasks} == {0, 2}
    assert all(t.payload["description"].strip() for t in d.tasks)
    assert any("cluster 1 of checkpoint 'ck0' at k=4 has no 'caption' description" in n for n in d.notes), (
        d.notes
    )


def test_notes_and_errors_name_the_cluster_they_are_about(factory_template):
    ws = Workspace(factory_template)
    d = design(ws, SPECS["coherence"])
    assert d.notes == [
        "1 cluster(s) left out: cluster 3 of checkpoint 'ck0' at k=4 has 1 images; a task needs refs + 1 = 6"
    ]
    with pytest.raises(
        StudyError,
        match=r"^cluster 7 is not a cluster of checkpoint 'ck0' at k=4 \(clusters: 0\.\.3\) \(and 1 more\)$",
    ):
        design(ws, replace(SPECS["coherence"], clusters=(9, 7)))


@pytest.mark.parametrize(
    "changes, words",
    [
        (
            {"kind": "similarity", "dataset": "../x", "checkpoint_id": None, "k": None},
            "dataset: .*may only use letters",
        ),
        ({"min_minutes": -1}, "min_minutes: must be a number in \\[0, 1440\\]"),
        ({"max_minutes": 1441}, "max_minutes: must be a number in \\[0, 1440\\]"),
        ({"max_side_bias": True}, "max_side_bias: must be a number"),
        ({"excluded_code": "a b"}, "excluded_code: must be 1-64 letters"),
        ({"kind": "similarity", "dataset": "toy", "stimuli": 8}, "stimuli: must be at least 9 images"),
        ({"clusters": (0, True)}, "clusters: must be a non-empty list"),
        ({"per_participant": True}, "per_participant: must be an integer"),
        ({"round": 1, "after": 7, "kind": "similarity", "dataset": "toy"}, "after: must be a study id"),
    ],
)  # fmt: skip
def test_every_spec_parameter_is_checked(factory_template, changes, words):
    with pytest.raises(StudyError, match=words):
        design(Workspace(factory_template), replace(SPECS["coherence"], **changes))


def test_a_spec_with_every_option_set_designs(factory_template):
    """Well-formed values of the optional parameters pass the checks (a check that tested the
    wrong way round would refuse them)."""
    spec = replace(
        SPECS["coherence"], clusters=(0, 2), completion_code="C0DE1", excluded_code="OUT1",
        completion_url="https://example.org/done", min_catch_pass=0.5, min_minutes=1, max_minutes=60,
        max_side_bias=0.9,
    )  # fmt: skip
    d = design(Workspace(factory_template), spec)
    assert {t.unit for t in d.tasks} == {0, 2} and d.spec == spec
    assert StudySpec.from_json(spec.to_json()) == spec
    sim = replace(SPECS["similarity"], stimuli=20, round=1, after="sim-1", selection="random")
    ids = _shown_ids(design(Workspace(factory_template), sim))
    assert len(ids) <= 20


def test_a_spec_stored_by_a_newer_version_loads_without_its_unknown_fields():
    """The store keeps each study's spec as JSON: a field this version does not know (written by
    a newer one sharing the store) is left out, the rest loads as it was."""
    import json

    spec = replace(SPECS["coherence"], clusters=(0, 2), min_minutes=3)
    newer = json.dumps({**json.loads(spec.to_json()), "a_future_field": [1, 2], "another": None})
    assert StudySpec.from_json(newer) == spec


@pytest.mark.parametrize("tasks", [10, 14])
def test_an_active_round_has_as_many_trials_as_asked(factory_copy, tasks):
    """Trials are selected three per query: when the trials asked are not a multiple of three,
    the least informative selected ones are dropped, not shown as extra tasks."""
    from tests.test_study_rounds import SPEC as ROUND

    spec = replace(ROUND, selection="active", round=1, after="sim-0", tasks=tasks)
    d = design(Workspace(factory_copy), spec)
    real = [t for t in d.tasks if not t.is_catch]
    assert len(real) == tasks and len({t.task_id for t in real}) == tasks
    assert not any("distinct trials" in n for n in d.notes)


def test_an_active_round_does_not_count_catch_trials_as_asked_queries(factory_copy):
    """The queries already asked (fewer asked: more likely chosen) are those of real trials:
    catch trials added to similarity_trials leave the active design as it was, the same trials
    added as real ones change it."""
    import pyarrow as pa

    from conceptlens import schema
    from tests.test_study_rounds import SPEC as ROUND
    from tests.test_study_rounds import write_embedding

    ws = Workspace(factory_copy)
    write_embedding(ws)
    spec = replace(ROUND, selection="active", round=1, after="sim-0", tasks=12)
    before = [t.payload for t in design(ws, spec).tasks if not t.is_catch]
    ids = sorted(ws.read("images", columns=["image_id"]).to_pandas()["image_id"])

    def add(is_catch: bool):
        rows = [
            {"trial_id": f"x{is_catch}{n}", "agent_id": "a", "query": q,
             "references": ids[:8], "chosen": ids[:2], "n_select": 2, "kind": "8rank2",
             "weight": 1.0, "rt_ms": 1.0, "split": "train",
             "is_catch": is_catch, "round": 0}
            for n, q in enumerate(q for q in ids[: len(ids) // 2] for _ in range(6))
        ]  # fmt: skip
        new = pd.DataFrame(rows)
        sch = schema.arrow_schema("similarity_trials", partition=False)
        ws.append(
            "similarity_trials",
            pa.Table.from_pandas(new[[f.name for f in sch]], schema=sch, preserve_index=False),
            dataset="toy",
        )
        return [t.payload for t in design(ws, spec).tasks if not t.is_catch]

    assert add(is_catch=True) == before
    assert add(is_catch=False) != before


# ---- label descriptions, captions and session choices ------------------------------------------
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
