"""A similarity study in rounds (roads2021 section 4.3): an active round picks trials that tell
more about the embedding than random ones, is fixed by its workspace and spec, needs an
embedding; `study next-round` exports, infers again and creates the next round; the trials
carry their round into `similarity_trials` and the convergence curves; 2.0 workspaces migrate."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptlens import schema
from conceptlens.cli import main
from conceptlens.embedding import active as A
from conceptlens.embedding.psych import read_embedding
from conceptlens.migrate import migrate
from conceptlens.studies.design import StudyError, StudySpec, design
from conceptlens.studies.store import SqliteStore, open_store
from conceptlens.validate import format_problems, validate
from conceptlens.workspace import Workspace
from tests.study_factory import answer_all

SPEC = StudySpec("similarity", dataset="toy", tasks=24, answers=1, per_participant=8, catch=2, seed=5)
FAST = ["--dims", "2", "--members", "2", "--max-epochs", "40", "--n-boot", "0", "--quiet"]


@pytest.fixture
def ws(factory_copy) -> Workspace:
    return Workspace(factory_copy)


def truth(ws: Workspace) -> tuple[list[str], np.ndarray]:
    """The toy images in 4 tight groups on a plane: what the simulated people judge by."""
    ids = sorted(ws.read("images", columns=["image_id"]).to_pandas()["image_id"])
    rng = np.random.default_rng(0)
    centers = np.array([[0, 0], [1, 0], [0, 1], [1, 1]], float)
    return ids, centers[np.arange(len(ids)) % 4] + 0.08 * rng.standard_normal((len(ids), 2))


def write_embedding(ws: Workspace, members: int = 3, sigma: float = 0.15) -> None:
    """An ensemble close to the truth over every toy image, as `analyze similarity` stores one."""
    ids, Z = truth(ws)
    rng = np.random.default_rng(1)
    rows = [
        {"member": m, "image_id": i, "mu": (z + 0.05 * rng.standard_normal(2)).tolist(), "sigma": [sigma] * 2}
        for m in range(members)
        for i, z in zip(ids, Z)
    ]
    t = pa.Table.from_pylist(rows, schema=schema.arrow_schema("psych_embedding", partition=False))
    ws.write("psych_embedding", t, dataset="toy")


def indices(d, ids: list[str]) -> np.ndarray:
    index = {s: k for k, s in enumerate(ids)}
    return np.array(
        [
            [index[t.payload["query"]], *map(index.get, t.payload["references"])]
            for t in d.tasks
            if not t.is_catch
        ]
    )


# ---- the design of an active round -------------------------------------------------------------
def test_active_trials_gain_more_information_than_random_ones(ws):
    write_embedding(ws)
    ids, members = read_embedding(ws, "toy")
    active = design(ws, replace(SPEC, selection="active"))
    rand = design(ws, SPEC)  # the same seed, drawn at random over the same 48 images
    a, r = indices(active, ids), indices(rand, ids)
    assert len(a) == len(r) == SPEC.tasks
    gain_a = A.information_gain(members, a, 2, n_samples=64, seed=11)
    gain_r = A.information_gain(members, r, 2, n_samples=64, seed=11)
    # Active ones put near neighbours together (Eq. 9) and keep the most uncertain of them;
    # confirmation trials (the last quarter) mix in far references and gain less.
    chosen = gain_a[: SPEC.tasks - 6]
    print("mean information gain: active", gain_a.mean(), "by gain", chosen.mean(), "random", gain_r.mean())
    assert gain_a.mean() > gain_r.mean() and chosen.mean() > gain_r.mean() + 0.2
    assert chosen.mean() > gain_a[SPEC.tasks - 6 :].mean()
    # References come from the query's neighbourhood: mostly the query's own group.
    group = np.arange(len(ids)) % 4
    by_gain = a[: SPEC.tasks - 6]  # the confirmation trials (a quarter) come last
    same_a = (group[by_gain[:, 1:]] == group[by_gain[:, :1]]).mean()
    same_r = (group[r[:, 1:]] == group[r[:, :1]]).mean()
    print("references in the query's group: active", same_a, "random", same_r)
    assert same_a > 0.6 > 0.4 > same_r
    assert any("active selection (round 0): 18 trials by information gain" in n for n in active.notes)


def test_an_active_round_is_fixed_by_its_workspace_and_spec(ws):
    write_embedding(ws)
    spec = replace(SPEC, selection="active")

    def tasks(d):
        return [(t.task_id, json.dumps(t.payload, sort_keys=True)) for t in d.tasks], [
            (s.session, s.position, s.task_id, json.dumps(s.layout)) for s in d.slots
        ]

    first = design(ws, spec)
    assert tasks(design(ws, spec)) == tasks(first)
    assert tasks(design(ws, replace(spec, seed=6)))[0] != tasks(first)[0]
    # The next round of the same spec draws other trials: its seed stream includes the round.
    assert tasks(design(ws, replace(spec, round=1, after="sim-000001")))[0] != tasks(first)[0]
    # The embedding is read at creation: a changed embedding changes the design.
    write_embedding(ws, sigma=0.3)
    assert tasks(design(ws, spec))[0] != tasks(first)[0]


def test_active_without_an_embedding_names_the_partition(ws):
    ws.remove_partition("psych_embedding", dataset="toy")
    with pytest.raises(StudyError) as e:
        design(ws, replace(SPEC, selection="active"))
    msg = str(e.value)
    assert "psych_embedding" in msg and "dataset=toy" in msg and "conceptlens analyze similarity" in msg
    design(ws, SPEC)  # a random round needs none


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"selection": "clever"}, "selection: must be one of random, active"),
        ({"round": 1}, "after: names the previous round's study exactly when round > 0"),
        ({"after": "sim-1"}, "after: names the previous round's study exactly when round > 0"),
        ({"round": -1, "after": "x"}, "round: must be an integer >= 0"),
    ],
)
def test_bad_round_parameters_are_named(changes, words):
    with pytest.raises(StudyError, match=words):
        replace(SPEC, **changes).check()
    with pytest.raises(StudyError, match="rounds and active selection are for similarity studies"):
        StudySpec("coherence", "ck0", 4, selection="active").check()


def test_specs_stored_before_rounds_load_as_random_round_zero():
    old = json.loads(SPEC.to_json())
    for k in ("selection", "round", "after"):
        old.pop(k)
    spec = StudySpec.from_json(json.dumps(old))
    assert (spec.selection, spec.round, spec.after) == ("random", 0, None) and spec == SPEC


# ---- next-round, end to end ----------------------------------------------------------------------
def respond_by(ws: Workspace):
    """A simulated person: the two references nearest the query in the truth (the mirrored
    query first in a catch trial), found from the thumbnails the page shows."""
    ids, Z = truth(ws)
    img = ws.read("images", columns=["image_id", "thumbnail"]).to_pandas()
    where = dict(zip(img["thumbnail"], (ids.index(i) for i in img["image_id"])))

    def respond(cur):
        q = Z[where[cur.shown.query.path]]
        d = [0.0 if p.mirrored else np.linalg.norm(Z[where[p.path]] - q) + 1e-9 for p in cur.shown.references]
        return [int(i) for i in np.argsort(d, kind="stable")[:2]]

    return respond


def answer_study(store, sid: str, respond, people: int) -> None:
    for _ in range(people):
        answer_all(store, sid, store.join(sid).participant_id, respond=respond)


def stored_payloads(path, sid: str) -> list[dict]:
    import sqlite3

    con = sqlite3.connect(path)
    try:
        rows = con.execute(
            "SELECT payload FROM tasks WHERE study_id = ? AND is_catch = 0 ORDER BY task_id", (sid,)
        ).fetchall()
    finally:
        con.close()
    return [json.loads(r[0]) for r in rows]


def test_next_round_exports_infers_again_and_creates_the_active_round(ws, tmp_path, capsys):
    path = tmp_path / "rounds.sqlite"
    url = f"sqlite:///{path}"
    store = open_store(url)
    respond = respond_by(ws)
    d = design(ws, SPEC)
    store.create_study(d, "r0")
    answer_study(store, "r0", respond, d.n_sessions)
    assert len(read_embedding(ws, "toy")[1]) == 1  # the factory's hand-written embedding
    args = ["study", "next-round", "r0", "--store", url, "--workspace", str(ws.root)]
    assert main(args + ["--tasks", "12", "--id", "r1", *FAST]) == 0
    out = capsys.readouterr().out
    assert f"study r0: {len(d.slots)} trial(s) appended to similarity_trials; the embedding inferred" in out
    assert "study r1 created" in out and "12 tasks (+" in out
    assert "participant link: http://localhost:8501/?study=r1" in out
    spec = store.study("r1").spec
    assert (spec.round, spec.after, spec.selection, spec.tasks, spec.seed) == (1, "r0", "active", 12, 5)
    # The embedding was inferred again, with the options given (2 members, 2 dimensions)...
    stimuli, members = read_embedding(ws, "toy")
    assert len(members) == 2 and members[0][0].shape[1] == 2
    # ... and round 1's trials are the active design on it, as stored.
    assert [t.payload for t in design(ws, spec).tasks if not t.is_catch] == stored_payloads(path, "r1")
    trials = ws.read("similarity_trials", dataset="toy").to_pandas()
    mine = trials["trial_id"].str.startswith("r0.")
    assert mine.sum() == len(d.slots) and (trials.loc[mine, "round"] == 0).all()
    assert trials.loc[~mine, "round"].isna().all()  # the factory's trials came in no round

    sessions = int(store.studies().set_index("study_id").loc["r1", "sessions"])
    answer_study(store, "r1", respond, sessions)
    assert main(args[:2] + ["r1", *args[3:], "--id", "r2", *FAST]) == 0
    assert "study r1: " in capsys.readouterr().out
    trials = ws.read("similarity_trials", dataset="toy").to_pandas()
    r1 = trials["trial_id"].str.startswith("r1.")
    assert r1.sum() > 12 and (trials.loc[r1, "round"] == 1).all()
    assert (store.study("r2").spec.round, store.study("r2").spec.after) == (2, "r1")
    assert validate(ws.root) == [], format_problems(validate(ws.root))

    # The convergence curves follow the rounds: the trials from before them, round 0, round 1.
    from conceptlens.analysis import runner

    runner.run(
        ws.root,
        "convergence",
        {"convergence_members": 2, "max_epochs": 30, "rounds": 5},
        progress_bars=False,
        with_dependencies=False,
    )
    conv = ws.read("similarity_convergence", dataset="toy").to_pandas().sort_values("round")
    fitted = trials[~trials["is_catch"] & (trials["split"] == "train")]
    ends = fitted.groupby(fitted["round"].fillna(-1)).size().cumsum()
    assert list(conv["round"]) == [0, 1, 2] and list(conv["n_trials"]) == list(ends)
    assert conv["across_agreement"].iloc[1:].notna().all()


def test_next_round_refuses_a_coherence_study(ws, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'c.sqlite'}"
    store = open_store(url)
    sid, _ = store.create_study(
        design(ws, StudySpec("coherence", "ck0", 4, refs=5, per_participant=10)), "c0"
    )
    assert main(["study", "next-round", "c0", "--store", url, "--workspace", str(ws.root)]) == 1
    assert "only similarity studies run in rounds" in capsys.readouterr().err


# ---- the format: similarity_trials.round -----------------------------------------------------------
def to_v20(ws: Workspace) -> None:
    """What a 2.0 workspace holds: similarity_trials files without `round`."""
    for f in ws.files("similarity_trials"):
        t = pq.read_table(f)
        pq.write_table(t.drop_columns([c for c in t.column_names if c == "round"]), f)
    ws.write_meta({**ws.meta(), "schema_version": "2.0"})


def test_a_20_workspace_is_valid_and_migrates_to_21(ws, capsys):
    before = ws.read("similarity_trials", dataset="toy").to_pandas()
    to_v20(ws)
    assert "round" not in pq.read_schema(ws.files("similarity_trials")[0]).names
    assert validate(ws.root) == []  # a minor version only adds optional columns
    assert main(["migrate", "--workspace", str(ws.root), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "similarity_trials: column round added (null) to 1 file(s)" in out
    assert f"2.0 -> {schema.SCHEMA_VERSION}" in out
    assert ws.meta()["schema_version"] == schema.SCHEMA_VERSION  # 2.1 added the column
    for f in ws.files("similarity_trials"):
        field = pq.read_schema(f).field("round")
        assert field.type == pa.int64() and field.nullable
    after = ws.read("similarity_trials", dataset="toy").to_pandas()
    assert after["round"].isna().all()
    pd.testing.assert_frame_equal(after.drop(columns="round"), before.drop(columns="round"))
    assert validate(ws.root) == []
    assert migrate(ws.root, progress=False) == []  # nothing left to do


def test_a_stopped_column_migration_finishes_on_rerun(ws, tmp_path):
    store = SqliteStore(tmp_path / "s.sqlite")
    sid, _ = store.create_study(design(ws, SPEC), "s0")
    answer_study(store, sid, respond_by(ws), 1)
    from conceptlens.studies.results import export

    export(store, sid, ws)  # a second file, with `round`
    to_v20(ws)
    files = ws.files("similarity_trials")
    assert len(files) == 2
    # One file done, then a crash before workspace.json: the rerun does the other, once.
    t = pq.read_table(files[0])
    pq.write_table(t.append_column(pa.field("round", pa.int64()), pa.nulls(len(t), pa.int64())), files[0])
    done = migrate(ws.root, progress=False)
    assert "similarity_trials: column round added (null) to 1 file(s)" in done
    assert all("round" in pq.read_schema(f).names for f in files)
    assert ws.meta()["schema_version"] == schema.SCHEMA_VERSION
