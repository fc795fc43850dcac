"""Human studies: designs fixed by their seed and laina2020's rules, what a page may see of a
task, results (Clopper-Pearson, Krippendorff's alpha, catch failures) against values computed
another way, and the export into valid workspace tables."""

from __future__ import annotations

import collections
import json
import random
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from conceptlens.cli import main
from conceptlens.metrics.coherence import make_trials
from conceptlens.studies import results as R
from conceptlens.studies.design import StudyError, StudySpec, design
from conceptlens.studies.shown import grade, shown
from conceptlens.studies.store import SqliteStore
from conceptlens.validate import format_problems, validate
from conceptlens.workspace import Workspace
from tests.study_factory import SPECS, answer_all, create


@pytest.fixture
def ws(factory_copy) -> Workspace:
    return Workspace(factory_copy)


@pytest.fixture
def store(tmp_path):
    s = SqliteStore(tmp_path / "state" / "answers.sqlite")
    yield s
    s.close()


def as_tuples(d):
    return [(t.task_id, t.unit, t.is_catch, json.dumps(t.payload, sort_keys=True)) for t in d.tasks], [
        (s.session, s.position, s.task_id, json.dumps(s.layout)) for s in d.slots
    ]


# ---- the design ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(SPECS))
def test_design_is_fixed_by_its_seed(ws, name):
    a, b = design(ws, SPECS[name]), design(ws, SPECS[name])
    assert as_tuples(a) == as_tuples(b)
    c = design(ws, replace(SPECS[name], seed=SPECS[name].seed + 1))
    assert as_tuples(c)[1] != as_tuples(a)[1]


def test_coherence_tasks_are_the_proxy_annotators_trials(ws):
    """With the seed, trials and refs of `analyze cluster_metrics`, people answer the very
    trials the proxy answered: make_trials on the clustering in image id order (as the
    analysis reads it), whatever order the clusters file has."""
    p = ws.table_path("clusters", checkpoint_id="ck0", k=4)
    t = pq.read_table(p).to_pandas()
    pq.write_table(pq.read_table(p).take(np.random.default_rng(0).permutation(len(t))), p)
    d = design(ws, SPECS["coherence"])
    t = t.sort_values("image_id").reset_index(drop=True)
    ids = t["image_id"].to_numpy(object)
    tr = make_trials(t["cluster"].to_numpy(), 20, 5, "random", None, SPECS["coherence"].seed)
    expected = {
        (int(c), ids[q], ids[n], tuple(ids[r]))
        for c, r, q, n in zip(tr.cluster, tr.refs, tr.query, tr.negative)
        if c != 3  # cluster 3 has 1 image
    }
    got = {
        (t.unit, t.payload["positive"], t.payload["negative"], tuple(t.payload["references"]))
        for t in d.tasks
        if not t.is_catch
    }
    assert got == expected and len(got) == 60


@pytest.mark.parametrize("name", list(SPECS))
def test_sessions_follow_the_rules(ws, name):
    spec = SPECS[name]
    d = design(ws, spec)
    tasks = {t.task_id: t for t in d.tasks}
    real = [t for t in d.tasks if not t.is_catch]
    sessions = collections.defaultdict(list)
    for s in d.slots:
        sessions[s.session].append(s)
    # Every task is answered `answers` times, by as many different sessions (people).
    uses = collections.Counter(s.task_id for s in d.slots if not tasks[s.task_id].is_catch)
    assert set(uses) == {t.task_id for t in real} and set(uses.values()) == {spec.answers}
    for slots in sessions.values():
        ids = [s.task_id for s in slots]
        assert len(ids) == len(set(ids)) <= spec.per_participant
        assert [s.position for s in slots] == list(range(len(slots)))
        catch = [i for i, s in enumerate(slots) if tasks[s.task_id].is_catch]
        assert len(catch) == spec.catch
        # One catch task in each equal block of the session (roads2021 spreads them).
        n = len(slots)
        assert [c * spec.catch // n for c in catch] == list(range(spec.catch))
        if spec.kind == "describability":  # laina2020: one task per class per person
            units = [tasks[i].unit for i in ids]
            assert len(units) == len(set(units))
    # Catch tasks are obviously correct pairs.
    members = ws.read("clusters", checkpoint_id="ck0", k=4).to_pandas().set_index("image_id")["cluster"]
    for t in (t for t in d.tasks if t.is_catch):
        p = t.payload
        if spec.kind == "coherence":
            assert p["positive"] in p["references"] and members[p["negative"]] != t.unit
        elif spec.kind == "describability":
            assert p["negative"] is None and members[p["positive"]] == t.unit
        else:
            assert p["query"] in p["references"] and len(p["references"]) == 8
    if spec.two_afc:
        sides = collections.Counter(s.layout["positive_side"] for s in d.slots)
        assert 0.35 < sides["left"] / len(d.slots) < 0.65
    else:
        assert all(sorted(s.layout["order"]) == list(range(8)) for s in d.slots)


def test_describability_refuses_more_tasks_than_clusters(ws):
    with pytest.raises(StudyError, match=r"per_participant: .* at most 3 tasks"):
        design(ws, replace(SPECS["describability"], per_participant=4))


def test_hard_negatives_come_from_the_nearest_cluster(ws):
    d = design(ws, SPECS["hard"])
    m = ws.read("cluster_metrics", checkpoint_id="ck0", k=4).to_pandas().set_index("cluster")["hard_negative"]
    members = ws.read("clusters", checkpoint_id="ck0", k=4).to_pandas().set_index("image_id")["cluster"]
    for t in (t for t in d.tasks if not t.is_catch):
        assert members[t.payload["negative"]] == m[t.unit]


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"kind": "survey"}, "kind: must be one of coherence, describability, similarity"),
        ({"k": 1}, "k: must be the number of clusters"),
        ({"tasks": 5}, "tasks: must be at least 20"),
        ({"catch": 10}, "catch: must be below per_participant"),
        ({"answers": 0}, "answers: must be an integer >= 1"),
        ({"seed": -1}, "seed: must be an integer >= 0"),
        ({"clusters": (9,)}, "cluster 9 is not a cluster of checkpoint 'ck0' at k=4"),
        ({"clusters": (3,)}, "cluster 3 of checkpoint 'ck0' at k=4 has 1 images; a task needs refs \\+ 1"),
        ({"k": 5}, "no clustering of checkpoint 'ck0' at k=5"),
        ({"checkpoint_id": "../x"}, "may only use letters"),
        ({"kind": "describability", "caption_source": "caption_rouge", "per_participant": 3, "catch": 1},
         "no column 'caption_rouge'"),
        ({"kind": "similarity", "dataset": "none"}, "dataset 'none' has no images"),
        ({"kind": "similarity", "dataset": "toy", "stimuli": 100}, "has 48 images, fewer than the 100"),
        ({"tasks": 20_000, "answers": 20},
         "tasks: tasks 20,000 is above the limit of 1,000 "
         "\\(the owner raises it with CONCEPTLENS_STUDY_MAX_TASKS\\)"),
        ({"answers": 21}, "answers: people per task 21 is above the limit of 20"),
        ({"per_participant": 201}, "per_participant: tasks per person 201 is above the limit of 200"),
        ({"clusters": (0, 1, 2), "tasks": 1000, "answers": 20, "per_participant": 3, "catch": 1},
         "participants: participants needed at least 30,000 is above the limit of 500 "
         "\\(the owner raises it with CONCEPTLENS_STUDY_MAX_PARTICIPANTS\\)"),
        ({"tasks": 40, "answers": 20, "per_participant": 3, "catch": 1},
         "participants: participants needed at least 1,200"),  # every cluster: counted once drawn
        ({"min_catch_pass": 1.5}, "min_catch_pass: must be a number in \\[0, 1\\]"),
        ({"max_side_bias": 0.3}, "max_side_bias: must be a number in \\[0.5, 1\\]"),
        ({"min_minutes": 9, "max_minutes": 2}, "min_minutes: is above max_minutes"),
        ({"min_failed_checks": 1}, "min_failed_checks: must be an integer >= 2"),
        ({"completion_url": "http://app.prolific.com/x"}, "completion_url: must be an https:// URL"),
        ({"completion_code": "C 1"}, "completion_code: must be 1-64 letters"),
    ],
)  # fmt: skip
def test_bad_spec_names_the_parameter(ws, changes, words):
    with pytest.raises(StudyError, match=words):
        design(ws, replace(SPECS["coherence"], **changes))


def test_limits_are_raised_by_the_owner_and_the_store_bound_stays(ws, monkeypatch):
    monkeypatch.setenv("CONCEPTLENS_STUDY_MAX_TASKS", "30000")
    monkeypatch.setenv("CONCEPTLENS_STUDY_MAX_PARTICIPANTS", "100000")
    with pytest.raises(StudyError, match="at most 200,000 per study"):
        design(ws, replace(SPECS["coherence"], tasks=20_000, answers=20))
    monkeypatch.setenv("CONCEPTLENS_STUDY_MAX_TASKS", "lots")
    with pytest.raises(StudyError, match="CONCEPTLENS_STUDY_MAX_TASKS must be a whole number, got 'lots'"):
        design(ws, SPECS["coherence"])


def test_spec_round_trips_through_json():
    for s in SPECS.values():
        assert StudySpec.from_json(s.to_json()) == s
    s = replace(SPECS["coherence"], clusters=(0, 2))
    assert StudySpec.from_json(s.to_json()) == s


# ---- what the page sees ------------------------------------------------------------------------
def test_the_correct_side_is_not_in_what_the_page_sees(ws):
    d = design(ws, SPECS["coherence"])
    t = next(t for t in d.tasks if not t.is_catch)
    a = shown("coherence", t.payload, {"positive_side": "left"}, d.images)
    b = shown("coherence", t.payload, {"positive_side": "right"}, d.images)
    # Only the order of the two candidates differs: nothing marks the cluster's image.
    assert a.candidates == b.candidates[::-1] and replace(a, candidates=()) == replace(b, candidates=())
    assert {f for f in a.__dataclass_fields__} == {"kind", "references", "description", "candidates", "query"}
    # Grading needs the layout, which only the server has.
    assert grade("coherence", False, t.payload, {"positive_side": "left"}, "left")["correct"] is True
    assert grade("coherence", False, t.payload, {"positive_side": "right"}, "left")["correct"] is False


def test_similarity_catch_shows_the_query_mirrored_and_grades_as_roads2021(ws):
    d = design(ws, SPECS["similarity"])
    t = next(t for t in d.tasks if t.is_catch)
    layout = {"order": list(range(8))}
    s = shown("similarity", t.payload, layout, d.images)
    where = t.payload["references"].index(t.payload["query"])
    assert [p.mirrored for p in s.references] == [i == where for i in range(8)]
    other = (where + 1) % 8
    assert grade("similarity", True, t.payload, layout, [where, other])["grade"] == 1.0
    assert grade("similarity", True, t.payload, layout, [other, where])["grade"] == 0.5
    assert grade("similarity", True, t.payload, layout, [other, (where + 2) % 8])["grade"] == 0.0


def test_pictures_are_reencoded_large_and_mirrored(ws):
    from PIL import Image

    from conceptlens.studies.shown import Picture, picture_bytes

    rel = "thumbnails/toy/0000.png"
    raw = Image.open(ws.root / rel).convert("RGB")
    img = Image.open(__import__("io").BytesIO(picture_bytes(str(ws.root), Picture(rel), 320)))
    assert img.size == (320, 320) and not img.info.get("dpi")
    # Nearest-neighbour enlargement of the 8x8 thumbnail: each pixel becomes a 40x40 block.
    assert np.array_equal(np.asarray(img)[::40, ::40], np.asarray(raw))
    flipped = Image.open(__import__("io").BytesIO(picture_bytes(str(ws.root), Picture(rel, True), 320)))
    assert np.array_equal(np.asarray(flipped), np.asarray(img)[:, ::-1])
    with pytest.raises(Exception, match="leaves the workspace"):
        picture_bytes(str(ws.root), Picture("../../etc/passwd"), 32)


# ---- results -------------------------------------------------------------------------------
def test_clopper_pearson_per_cluster_matches_statsmodels(ws, store):
    from statsmodels.stats.proportion import proportion_confint

    sid, _, d = create(store, ws.root)
    for i in range(d.n_sessions):
        answer_all(store, sid, store.join(sid).participant_id, seed=i)
    res = R.results(store, sid, ws)
    assert len(res.clusters) == 3 and res.clusters["n"].sum() == 180
    for r in res.clusters.itertuples():
        lo, hi = proportion_confint(r.n_correct, r.n, alpha=0.05, method="beta")
        assert r.lo == pytest.approx(lo, abs=1e-9) and r.hi == pytest.approx(hi, abs=1e-9)
        assert r.accuracy == r.n_correct / r.n
    # Counted again from the rows of study_answers: correct = the cluster's image was picked.
    a = res.answers[~res.answers["is_catch"]]
    picked = a.apply(lambda r: r["chosen"][0] == r["positive"], axis=1)
    assert (picked == a["correct"].astype(bool)).all()
    assert picked.groupby(a["cluster"]).sum().to_dict() == dict(
        zip(res.clusters["cluster"], res.clusters["n_correct"])
    )
    # The proxy annotator's values sit next to people's, from cluster_metrics.
    cm = ws.read("cluster_metrics", checkpoint_id="ck0", k=4).to_pandas().set_index("cluster")
    for r in res.clusters.itertuples():
        assert (r.proxy, r.proxy_lo, r.proxy_hi, r.purity) == pytest.approx(
            tuple(
                cm.loc[
                    r.cluster, ["coherence_random", "coherence_random_lo", "coherence_random_hi", "purity"]
                ]
            )
        )


KRIPPENDORFF_EXAMPLE = [  # krippendorff.alpha's documented example: coders x units, nan = missing
    [np.nan, np.nan, np.nan, np.nan, np.nan, 3, 4, 1, 2, 1, 1, 3, 3, np.nan, 3],
    [1, np.nan, 2, 1, 3, 3, 4, 3, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan],
    [np.nan, np.nan, 2, 1, 3, 4, 4, np.nan, 2, 1, 1, 3, 3, np.nan, 4],
]


def _long(matrix):
    return [(u, v) for row in matrix for u, v in enumerate(row) if not np.isnan(v)]


def _alpha_by_hand(pairs) -> float:
    """Krippendorff (2011) nominal alpha from the coincidence matrix, written out."""
    by_unit = collections.defaultdict(list)
    for u, v in pairs:
        by_unit[u].append(v)
    values = sorted({v for _, v in pairs})
    o = collections.Counter()
    for vs in by_unit.values():
        m = len(vs)
        if m < 2:
            continue
        for i, a in enumerate(vs):
            for j, b in enumerate(vs):
                if i != j:
                    o[a, b] += 1 / (m - 1)
    n_c = {c: sum(o[c, k] for k in values) for c in values}
    n = sum(n_c.values())
    observed = sum(o[a, b] for a in values for b in values if a != b)
    expected = sum(n_c[a] * n_c[b] for a in values for b in values if a != b) / (n - 1)
    return 1 - observed / expected


def test_alpha_is_krippendorffs_documented_example():
    units, values = zip(*_long(KRIPPENDORFF_EXAMPLE))
    alpha, pairable = R.alpha_nominal(units, values)
    assert round(alpha, 6) == 0.691358  # the value krippendorff.alpha documents
    assert alpha == pytest.approx(_alpha_by_hand(_long(KRIPPENDORFF_EXAMPLE)), abs=1e-12)
    assert pairable == 12  # units 2-12 and 14 have two or more values


def test_alpha_against_the_coincidence_matrix_and_its_limits():
    rng = np.random.default_rng(0)
    pairs = [(u, int(v)) for u in range(40) for v in rng.integers(0, 3, rng.integers(1, 5))]
    units, values = zip(*pairs)
    assert R.alpha_nominal(units, values)[0] == pytest.approx(_alpha_by_hand(pairs), abs=1e-12)
    # Perfect agreement with variation across units: alpha = 1; no variation: undefined.
    assert R.alpha_nominal([0, 0, 1, 1], ["a", "a", "b", "b"])[0] == pytest.approx(1.0)
    assert R.alpha_nominal([0, 0, 1, 1], ["a", "a", "a", "a"]) == (None, 2)
    assert R.alpha_nominal([0, 1, 2], ["a", "b", "a"]) == (None, 0)


def test_catch_failures_exclude_people_from_every_result(ws, store):
    sid, _, d = create(store, ws.root)
    tasks = {t.task_id: t for t in d.tasks}

    def right(cur):  # always the cluster's image
        slot = next(s for s in d.slots if s.task_id == cur.task_id)
        return slot.layout["positive_side"]

    def careless(cur):  # always the other one
        return "left" if right(cur) == "right" else "right"

    good = [store.join(sid).participant_id for _ in range(3)]
    bad = store.join(sid).participant_id
    for p in good:
        answer_all(store, sid, p, respond=right)
    answer_all(store, sid, bad, respond=careless)
    res = R.results(store, sid, ws)
    parts = res.participants.set_index("participant_id")
    assert parts.loc[bad, "catch_failure_rate"] == 1.0 and parts.loc[good, "catch_failure_rate"].eq(0).all()
    assert not parts["excluded"].any() and res.summary["accuracy"] == pytest.approx(27 / 36)
    kept = R.results(store, sid, ws, max_catch_failure=0.5)
    assert kept.participants.set_index("participant_id")["excluded"].to_dict() == {
        **dict.fromkeys(good, False),
        bad: True,
    }
    assert kept.summary["accuracy"] == 1.0 and kept.summary["answers"] == 24 and kept.summary["excluded"] == 1
    assert all(not tasks[t].is_catch for t in res.answers.loc[~res.answers["is_catch"], "task_id"])
    with pytest.raises(StudyError, match="max_catch_failure must be in"):
        R.results(store, sid, ws, max_catch_failure=2)


# ---- export -------------------------------------------------------------------------------
def test_export_writes_valid_tables_and_appends_only_new_answers(ws, store):
    sid, _, d = create(store, ws.root, "describability")
    first = [store.join(sid).participant_id for _ in range(4)]
    for i, p in enumerate(first):
        answer_all(store, sid, p, seed=i)
    out = R.export(store, sid, ws)
    assert out["answers"] == 12 and out["clusters"] == 3
    assert validate(ws.root) == [], format_problems(validate(ws.root))
    assert R.export(store, sid, ws)["answers"] == 0  # nothing new: nothing appended
    late = store.join(sid).participant_id
    answer_all(store, sid, late, seed=9)
    assert R.export(store, sid, ws)["answers"] == 3
    rows = ws.read("study_answers", study_id=sid).to_pandas()
    assert len(rows) == 15 == len(set(zip(rows["participant_id"], rows["task_id"])))
    assert len(ws.partition_files("study_answers", study_id=sid)) == 2  # people's answers: never rewritten
    summary = ws.read("study_summary", study_id=sid).to_pandas().iloc[0]
    assert summary["participants"] == 5 and summary["measure"] == "describability"
    assert json.loads(summary["spec"])["seed"] == SPECS["describability"].seed
    clusters = ws.read("study_clusters", study_id=sid).to_pandas()
    assert (
        clusters["description"].notna().all() and clusters["proxy"].isna().all()
    )  # the factory has no 2AFC proxy
    assert validate(ws.root) == []
    # The catalogue draws the exported study with the page's function: the same figure as the
    # page draws from the store (components/export_button provenance `figure: human_vs_proxy`).
    from conceptlens.db import WorkspaceDB
    from conceptlens.figures.catalog import FIGURES
    from conceptlens.figures.studies import human_vs_proxy

    db = WorkspaceDB(ws.root)
    spec = FIGURES["human_vs_proxy"]
    assert spec.resolve(db) == {"study": sid}
    live = R.results(store, sid, ws).clusters
    assert spec.build(db, {"study": sid}).to_json() == human_vs_proxy(live, "describability").to_json()
    # ... and exported at one column, its text neither overlaps nor is cut off.
    from conceptlens.figures.catalog import Job, render_jobs
    from tests.test_figure_text import text_problems

    out = ws.root / "figs"
    m = render_jobs(db, [Job(spec, {"study": sid})], out, "ws", "fp", 3.5, ("svg",), progress=False)
    assert text_problems((out / m["files"][0]["path"]).read_text()) == []


def test_similarity_answers_become_similarity_trials(ws, store):
    from conceptlens.analysis.common import Context
    from conceptlens.analysis.similarity import read_trials

    before = len(ws.read("similarity_trials", dataset="toy"))
    sid, _, d = create(store, ws.root, "similarity")
    people = [store.join(sid).participant_id for _ in range(3)]
    for i, p in enumerate(people[:2]):
        answer_all(store, sid, p, seed=i)
    store.answer(sid, people[2], store.current(sid, people[2]).task_id, [0, 1])  # unfinished
    out = R.export(store, sid, ws)
    assert out["similarity_trials"] == 12  # the finished people's 2 x 6 trials
    assert validate(ws.root) == [], format_problems(validate(ws.root))
    trials = read_trials(Context(ws), "toy")  # what `analyze similarity` reads, and checks
    mine = trials[trials["trial_id"].str.startswith(sid + ".")]
    assert len(trials) == before + 12 and len(mine) == 12
    parts = R.results(store, sid, ws).participants.set_index("participant_id")
    for r in mine.itertuples():
        assert r.weight == pytest.approx(parts.loc[r.agent_id, "mean_grade"])
        assert r.is_catch == (r.query in r.references)
    assert R.export(store, sid, ws)["similarity_trials"] == 0


def test_export_refuses_another_workspace(ws, store, tmp_path):
    from harness.factory import make_workspace

    sid, _, _ = create(store, ws.root)
    other = make_workspace(tmp_path / "other")
    meta = other.meta()
    other.write_meta({**meta, "name": "another"})
    with pytest.raises(StudyError, match="designed on workspace 'tiny'"):
        R.export(store, sid, other)


# ---- the command line -------------------------------------------------------------------------
def test_cli_create_list_export_close(ws, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    args = ["study", "create", "--store", url, "--workspace", str(ws.root), "--kind", "coherence"]
    args += [
        "--checkpoint",
        "ck0",
        "--k",
        "4",
        "--refs",
        "5",
        "--per-participant",
        "10",
        "--id",
        "s1",
        "--token",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "study s1 created" in out and "60 tasks (+46 catch)" in out and "226 answers planned" in out
    assert "note: 1 cluster(s) left out: cluster 3" in out
    link = next(line for line in out.splitlines() if line.startswith("participant link: "))
    assert "?study=s1&token=" in link
    assert main(["study", "list", "--store", url, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(r["study_id"], r["planned"], r["answers"]) for r in listed] == [("s1", 226, 0)]
    from conceptlens.studies.store import open_store

    store = open_store(url)
    token = link.rsplit("token=", 1)[1]
    p = store.join("s1", token=token).participant_id
    answer_all(store, "s1", p)
    assert (
        main(
            [
                "study",
                "export",
                "s1",
                "--store",
                url,
                "--workspace",
                str(ws.root),
                "--max-catch-failure",
                "0.5",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "1 participants (1 finished, 0 excluded), 8 answers counted" in out and "10 new answer(s)" in out
    assert "Krippendorff's alpha (nominal): undefined over 0 task(s)" in out
    assert main(["study", "close", "s1", "--store", url]) == 0
    assert store.status("s1") == "closed"
    # Errors are one line naming what is wrong.
    assert main(["study", "export", "nope", "--store", url, "--workspace", str(ws.root)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("conceptlens: error: no study nope in the answers store") and "Traceback" not in err
    assert main(["study", "create", "--store", url, "--workspace", str(ws.root), "--kind", "similarity"]) == 1
    assert "study parameter dataset" in capsys.readouterr().err


def test_default_store_lives_outside_the_workspace(monkeypatch, tmp_path):
    from conceptlens.studies import store as S

    monkeypatch.delenv("CONCEPTLENS_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert S.store_url() == f"sqlite:///{tmp_path / 'xdg' / 'conceptlens' / 'answers.sqlite'}"
    monkeypatch.setenv("CONCEPTLENS_STATE_DIR", str(tmp_path / "state"))
    assert S.store_url() == f"sqlite:///{tmp_path / 'state' / 'answers.sqlite'}"
    monkeypatch.setenv("CONCEPTLENS_ANSWERS_URL", "mysql://x")
    with pytest.raises(StudyError, match="must start with postgresql:// or sqlite:///"):
        S.open_store()
    # Reading an empty store creates nothing: opening the Studies page leaves no file behind.
    s = S.SqliteStore(tmp_path / "none" / "answers.sqlite")
    assert s.studies().empty and not (tmp_path / "none").exists()
    with pytest.raises(StudyError, match="no study x"):
        s.study("x")


def test_random_answers_sit_at_chance(ws, store):
    """A property check of the whole chain: people who pick at random are right half the time."""
    sid, _, d = create(store, ws.root, answers=10, per_participant=20)
    rng = random.Random(1)
    for _ in range(d.n_sessions):
        answer_all(store, sid, store.join(sid).participant_id, seed=rng.randrange(10**6))
    s = R.results(store, sid, ws).summary
    assert s["answers"] == 600 and s["lo"] < 0.5 < s["hi"]
    assert abs(s["alpha"]) < 0.1  # random pickers do not agree beyond chance
    assert len(pd.unique(R.results(store, sid, ws).answers["participant_id"])) == d.n_sessions
