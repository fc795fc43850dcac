"""A study's design: its tasks and the sessions people answer them in, fixed at creation.

laina2020 section 5.1: T tasks per cluster (20), A people per task (3). A coherence task shows
M (10) reference images of the cluster and two queries, one from the cluster and one from
outside it (random negatives: any other cluster; hard: the cluster whose centroid is nearest,
Eq. 2). A describability task keeps the queries and shows the cluster's description instead of
the references; a person answers at most one describability task per cluster. roads2021
section 4.1: 8-rank-2 similarity trials (a query and 8 references, the two most similar chosen
in order) and catch trials whose references include the query itself, mirrored. A similarity
study can run in rounds (section 4.3): an `active` round picks its trials by expected
information gain under the dataset's current psychological embedding
(`conceptlens.embedding.active.select_trials`), read when the study is created, so its task
list is as fixed as a random one's.

Coherence and describability tasks are `metrics.coherence.make_trials` with the study's seed:
with the trials, refs and seed of `conceptlens analyze cluster_metrics`, people answer the very
trials the proxy annotator answered. A participant gets one session of `per_participant`
tasks, `catch` of them catch tasks (an obviously correct pair), one in each equal block of the
session. Sessions are filled first-fit, so no session holds a task twice (nor, for
describability, two tasks of one cluster, catch tasks included). The side of the correct image
(2AFC) and the display order of the references (8-rank-2) are drawn per slot. Every draw comes
from `seed`: the same spec on the same workspace gives the same design.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pandas as pd

from .. import rng as rngs
from ..embedding import active as A
from ..embedding.psych import read_embedding
from ..errors import ConceptLensError
from ..metrics.coherence import MIN_TRIALS, make_trials
from ..workspace import Workspace, WorkspaceError, check_id

KINDS = ("coherence", "describability", "similarity")
NEGATIVES = ("random", "hard")
SELECTIONS = ("random", "active")
CAPTION_SOURCES = {
    "caption": "the class-level caption (laina2020 Eq. 4)",
    "caption_noneg": "Eq. 4 without its negative term",
    "caption_rouge": "Eq. 4 with ROUGE-L distances",
    "label": "the name of the cluster's most frequent label",
}
SIDES = ("left", "right")
CODE = re.compile(r"[A-Za-z0-9_-]{1,64}")
N_REFERENCES, N_SELECT = 8, 2  # roads2021's 8-rank-2 trials
MAX_SLOTS = 200_000  # answers one study may plan: a typo must not fill the store
# A study's size, bounded before anything is drawn (the owner raises a bound in the environment
# of the dashboard or the command line): (spec field or what is counted, variable, default).
LIMITS = {
    "tasks": ("CONCEPTLENS_STUDY_MAX_TASKS", 1000),  # per cluster (2AFC) or trials in all
    "answers": ("CONCEPTLENS_STUDY_MAX_ANSWERS", 20),  # people per task
    "per_participant": ("CONCEPTLENS_STUDY_MAX_PER_PARTICIPANT", 200),  # tasks in one session
    "participants": ("CONCEPTLENS_STUDY_MAX_PARTICIPANTS", 500),  # sessions of the study
}
MIN_FAILED_CHECKS = 2  # Prolific: a participant is excluded only after two failed checks
MAX_CODE = 64  # completion codes and their URLs are short texts a participant sees
# Independent random streams, so that changing one part of a spec leaves the others' draws.
_PACK, _CATCH, _LAYOUT, _STIMULI, _ACTIVE = "pack", "catch", "layout", "stimuli", "active"
# An active round's share of confirmation trials (roads2021 section 4.3), and the trials kept
# per query (as `active.simulate_rounds` does).
CONFIRMATION_SHARE, KEEP_PER_QUERY = 0.25, 3


class StudyError(ConceptLensError):
    """A study cannot be designed, joined or answered; the message says which and why."""


def limit(name: str) -> int:
    """The bound on `name` (a key of LIMITS): its environment variable, else the default."""
    var, default = LIMITS[name]
    raw = os.environ.get(var, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise StudyError(f"{var} must be a whole number, got {raw[:40]!r}") from None
    if value < 1:
        raise StudyError(f"{var} must be at least 1, got {value}")
    return value


def _over(name: str, value: int, what: str) -> None:
    bound = limit(name)
    if value > bound:
        raise StudyError(
            f"study parameter {name}: {what} {value:,} is above the limit of {bound:,} "
            f"(the owner raises it with {LIMITS[name][0]})"
        )


@dataclass(frozen=True)
class StudySpec:
    kind: str
    checkpoint_id: str | None = None
    k: int | None = None
    clusters: tuple[int, ...] | None = None  # None: every cluster large enough
    negatives: str = "random"
    caption_source: str = "caption"
    dataset: str | None = None  # similarity
    stimuli: int | None = None  # similarity: images sampled as stimuli (None: all of the dataset)
    tasks: int = 20  # per cluster (2AFC), or trials in all (similarity)
    answers: int = 3  # people per task
    per_participant: int = 20  # tasks in a participant's session, catch tasks included
    catch: int = 2  # catch tasks per session
    refs: int = 10  # reference images of a coherence task
    seed: int = 0
    reclaim_minutes: int = 60  # a session idle this long with no finisher goes to someone new; 0: never
    selection: str = "random"  # similarity: "active" picks trials by information gain (roads2021 §4.3)
    round: int = 0  # similarity: the study's round (0 for the first)
    after: str | None = None  # similarity: the study id of the previous round
    # Running the study on a crowd-sourcing platform (none changes the design):
    completion_url: str | None = None  # where a finisher is sent (Prolific's completion URL)
    completion_code: str | None = None  # the code every finisher gets (None: one per person)
    excluded_code: str | None = None  # the code of a finisher excluded by the checks below
    once_per_workspace: bool = False  # a platform participant takes one study of the workspace
    # Exclusion rules (None: not checked); a person is excluded after min_failed_checks failures.
    min_catch_pass: float | None = None  # share of catch tasks passed at least this
    min_minutes: float | None = None  # total time at least this
    max_minutes: float | None = None  # total time at most this
    max_side_bias: float | None = None  # 2AFC: share of left (or right) answers at most this
    min_failed_checks: int = MIN_FAILED_CHECKS

    @property
    def measure(self) -> str:
        """What a study measures: coherence_random, coherence_hard, describability, similarity."""
        return f"coherence_{self.negatives}" if self.kind == "coherence" else self.kind

    @property
    def two_afc(self) -> bool:
        return self.kind in ("coherence", "describability")

    def check(self) -> StudySpec:
        def bad(name: str, why: str):
            raise StudyError(f"study parameter {name}: {why}")

        if self.kind not in KINDS:
            bad("kind", f"must be one of {', '.join(KINDS)}, got {self.kind!r}")
        for name, low in (
            ("tasks", 1),
            ("answers", 1),
            ("per_participant", 1),
            ("catch", 0),
            ("refs", 1),
            ("seed", 0),
            ("reclaim_minutes", 0),
            ("round", 0),
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                bad(name, f"must be an integer >= {low}, got {v!r}")
        for name in ("checkpoint_id", "dataset"):  # they name folders of the workspace
            if getattr(self, name) is not None:
                try:
                    check_id(str(getattr(self, name)), name)
                except WorkspaceError as e:
                    bad(name, str(e))
        if self.selection not in SELECTIONS:
            bad("selection", f"must be one of {', '.join(SELECTIONS)}, got {self.selection!r}")
        if self.two_afc and (self.selection != "random" or self.round or self.after is not None):
            bad("selection", "rounds and active selection are for similarity studies")
        if (self.round > 0) != (self.after is not None):
            bad("after", f"names the previous round's study exactly when round > 0 (round {self.round})")
        if self.after is not None and not isinstance(self.after, str):
            bad("after", f"must be a study id, got {self.after!r}")
        for name, lo, hi in (
            ("min_catch_pass", 0, 1),
            ("min_minutes", 0, 24 * 60),
            ("max_minutes", 0, 24 * 60),
            ("max_side_bias", 0.5, 1),
        ):
            v = getattr(self, name)
            if v is not None and (
                isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or not lo <= v <= hi
            ):
                bad(name, f"must be a number in [{lo}, {hi}] or unset, got {v!r}")
        if (
            self.min_minutes is not None
            and self.max_minutes is not None
            and self.min_minutes > self.max_minutes
        ):
            bad("min_minutes", f"is above max_minutes ({self.min_minutes} > {self.max_minutes})")
        v = self.min_failed_checks
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < MIN_FAILED_CHECKS:
            bad(
                "min_failed_checks", f"must be an integer >= {MIN_FAILED_CHECKS} (Prolific's rule), got {v!r}"
            )
        for name in ("completion_code", "excluded_code"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, str) or not CODE.fullmatch(v)):
                bad(name, f"must be 1-{MAX_CODE} letters, digits, - or _, got {v!r:.80}")
        if self.completion_url is not None:
            u = self.completion_url
            ok = isinstance(u, str) and len(u) <= 500 and urlsplit(u).scheme == "https" and urlsplit(u).netloc
            if not ok:
                bad("completion_url", f"must be an https:// URL of at most 500 characters, got {u!r:.80}")
        if self.catch >= self.per_participant:
            bad("catch", f"must be below per_participant ({self.per_participant}), got {self.catch}")
        if self.two_afc:
            if not self.checkpoint_id:
                bad("checkpoint_id", f"a {self.kind} study needs the checkpoint whose clusters it tests")
            if isinstance(self.k, bool) or not isinstance(self.k, (int, np.integer)) or self.k < 2:
                bad("k", f"must be the number of clusters of a clustering (>= 2), got {self.k!r}")
            if self.negatives not in NEGATIVES:
                bad("negatives", f"must be one of {', '.join(NEGATIVES)}, got {self.negatives!r}")
            if self.tasks < MIN_TRIALS:
                bad(
                    "tasks",
                    f"must be at least {MIN_TRIALS} per cluster (laina2020 uses 20), got {self.tasks}",
                )
            if self.kind == "describability" and self.caption_source not in CAPTION_SOURCES:
                bad(
                    "caption_source",
                    f"must be one of {', '.join(CAPTION_SOURCES)}, got {self.caption_source!r}",
                )
            if self.clusters is not None and (
                not self.clusters
                or any(isinstance(c, bool) or not isinstance(c, (int, np.integer)) for c in self.clusters)
            ):
                bad("clusters", f"must be a non-empty list of cluster indices, got {self.clusters!r}")
        else:
            if not self.dataset:
                bad("dataset", "a similarity study needs the dataset whose images are judged")
            if self.stimuli is not None and (
                isinstance(self.stimuli, bool)
                or not isinstance(self.stimuli, (int, np.integer))
                or self.stimuli < N_REFERENCES + 1
            ):
                bad("stimuli", f"must be at least {N_REFERENCES + 1} images, got {self.stimuli!r}")
        return self

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @property
    def rules(self) -> dict:
        """The exclusion rules that are set: {name: threshold}."""
        names = ("min_catch_pass", "min_minutes", "max_minutes", "max_side_bias")
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}

    @classmethod
    def from_json(cls, text: str) -> StudySpec:
        d = json.loads(text)
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        if d.get("clusters") is not None:
            d["clusters"] = tuple(d["clusters"])
        return cls(**d)


@dataclass(frozen=True)
class Task:
    task_id: str
    unit: int | None  # the cluster (2AFC); None for similarity trials
    is_catch: bool
    # Server side only (conceptlens.studies.shown decides what a page sees):
    # 2AFC: positive, negative (None: a blank image), references (coherence) or description;
    # similarity: query, references (the query among them for a catch trial).
    payload: dict


@dataclass(frozen=True)
class Slot:
    session: int
    position: int
    task_id: str
    layout: dict  # 2AFC: {"positive_side": "left"|"right"}; similarity: {"order": [8 indices]}


@dataclass
class Design:
    spec: StudySpec
    workspace: str  # `name` of the workspace.json it was drawn from
    images: dict[str, str]  # image_id -> thumbnail, relative to the workspace
    tasks: list[Task]
    slots: list[Slot]
    notes: list[str]
    root: str = ""  # where the workspace was when the study was designed (absolute)

    @property
    def n_sessions(self) -> int:
        return 1 + max((s.session for s in self.slots), default=-1)


def _rng(spec: StudySpec, purpose: str) -> np.random.Generator:
    """The design's stream for `purpose` (pack, catch, layout...) under the spec's seed."""
    return rngs.stream(int(spec.seed), f"study.{purpose}")


# ---- tasks ------------------------------------------------------------------------------------
def _clustering(ws: Workspace, spec: StudySpec) -> pd.DataFrame:
    cid, k = spec.checkpoint_id, int(spec.k)
    if not ws.has("clusters", checkpoint_id=cid, k=k):
        raise StudyError(
            f"{ws.partition_dir('clusters', checkpoint_id=cid, k=k)}: no clustering of checkpoint "
            f"{cid!r} at k={k}; run `conceptlens analyze clustering`"
        )
    t = ws.read("clusters", columns=["image_id", "cluster"], checkpoint_id=cid, k=k).to_pandas()
    # Image id order: the order `analyze cluster_metrics` draws its proxy trials in.
    return t.sort_values("image_id", kind="stable").reset_index(drop=True)


def _cluster_metrics(ws: Workspace, spec: StudySpec, columns: list[str], why: str) -> pd.DataFrame:
    cid, k = spec.checkpoint_id, int(spec.k)
    if not ws.has("cluster_metrics", checkpoint_id=cid, k=k):
        raise StudyError(
            f"{ws.partition_dir('cluster_metrics', checkpoint_id=cid, k=k)}: {why} come from "
            f"cluster_metrics; run `conceptlens analyze cluster_metrics`"
        )
    return ws.read("cluster_metrics", columns=["cluster", *columns], checkpoint_id=cid, k=k).to_pandas()


def _descriptions(ws: Workspace, spec: StudySpec) -> dict[int, str]:
    cid, k, src = spec.checkpoint_id, int(spec.k), spec.caption_source
    if src == "label":
        m = _cluster_metrics(ws, spec, ["top_label"], "label descriptions")
        img = ws.read("images", columns=["dataset", "label", "label_name"]).to_pandas()
        ck = ws.read("checkpoints", columns=["checkpoint_id", "dataset"]).to_pandas()
        ds = ck.loc[ck["checkpoint_id"] == cid, "dataset"]
        img = img[(img["dataset"] == (ds.iloc[0] if len(ds) else None)) & img["label"].notna()]
        names = img.dropna(subset=["label_name"]).groupby("label")["label_name"].min()
        pairs = ((c, names.get(t)) for c, t in zip(m["cluster"], m["top_label"]) if pd.notna(t))
    else:
        if not ws.has("cluster_captions", checkpoint_id=cid, k=k):
            raise StudyError(
                f"{ws.partition_dir('cluster_captions', checkpoint_id=cid, k=k)}: no class-level "
                "captions of this clustering; run `conceptlens analyze cluster_captions`"
            )
        cap = ws.read("cluster_captions", checkpoint_id=cid, k=k).to_pandas()
        if src not in cap.columns:
            raise StudyError(
                f"{ws.table_path('cluster_captions', checkpoint_id=cid, k=k)}: no column {src!r} "
                "(the ROUGE-L ablation is optional; choose another caption source)"
            )
        pairs = zip(cap["cluster"], cap[src])
    return {int(c): str(t).strip() for c, t in pairs if isinstance(t, str) and t.strip()}


def _two_afc_tasks(ws: Workspace, spec: StudySpec, notes: list[str]):
    t = _clustering(ws, spec)
    labels = t["cluster"].to_numpy(np.int64)
    ids = t["image_id"].to_numpy(object)
    hard = None
    if spec.negatives == "hard":
        m = _cluster_metrics(ws, spec, ["hard_negative"], "hard negatives").dropna()
        hard = {int(c): int(h) for c, h in zip(m["cluster"], m["hard_negative"])}
    trials = make_trials(labels, spec.tasks, spec.refs, spec.negatives, hard, spec.seed)
    present = sorted(set(labels.tolist()))
    sizes = dict(zip(*np.unique(labels, return_counts=True)))
    descriptions = _descriptions(ws, spec) if spec.kind == "describability" else {}
    where = f"checkpoint {spec.checkpoint_id!r} at k={spec.k}"

    def usable(c: int) -> str | None:
        if c not in present:
            return f"cluster {c} is not a cluster of {where} (clusters: {present[0]}..{present[-1]})"
        if c in trials.skipped:
            return (
                f"cluster {c} of {where} has {sizes[c]} images; a task needs refs + 1 = {spec.refs + 1}"
                + (" and a hard negative cluster" if spec.negatives == "hard" else "")
            )
        if spec.kind == "describability" and c not in descriptions:
            return f"cluster {c} of {where} has no {spec.caption_source!r} description"
        return None

    if spec.clusters is not None:
        chosen = sorted({int(c) for c in spec.clusters})
        problems = [p for p in map(usable, chosen) if p]
        if problems:
            raise StudyError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    else:
        chosen = [c for c in present if usable(c) is None]
        if len(chosen) < len(present):
            first = usable(next(c for c in present if c not in chosen))
            notes.append(f"{len(present) - len(chosen)} cluster(s) left out: {first}")
    if not chosen:
        raise StudyError(f"no cluster of {where} can be tested")
    tasks, members = [], {}
    count = dict.fromkeys(chosen, 0)
    for c, refs, q, n in zip(trials.cluster, trials.refs, trials.query, trials.negative):
        c = int(c)
        if c not in count:
            continue
        payload = {"positive": ids[q], "negative": ids[n]}
        if spec.kind == "coherence":
            payload["references"] = [ids[r] for r in refs]
        else:
            payload["description"] = descriptions[c]
        tasks.append(Task(f"c{c}-{count[c]:02d}", c, False, payload))
        count[c] += 1
    for c in chosen:
        members[c] = ids[labels == c]
    outside = {c: ids[labels != c] for c in chosen}

    def catch(rng: np.random.Generator, used: set, n: int) -> Task:
        if spec.kind == "coherence":
            c = int(rng.choice(chosen))
            refs = rng.choice(members[c], spec.refs, replace=False).tolist()
            # The in-cluster query is one of the references: the obviously correct pair.
            payload = {"references": refs, "positive": refs[int(rng.integers(spec.refs))]}
            payload["negative"] = str(rng.choice(outside[c]))
        else:
            free = [c for c in chosen if c not in used]
            c = int(rng.choice(free))
            # An image of the cluster against a blank one: correct whatever the description.
            payload = {
                "description": descriptions[c],
                "positive": str(rng.choice(members[c])),
                "negative": None,
            }
        return Task(f"catch-{n}", c, True, payload)

    key = (lambda t: t.unit) if spec.kind == "describability" else (lambda t: t.task_id)
    return tasks, catch, key, chosen


def _random_trials(ws: Workspace, spec: StudySpec, rng: np.random.Generator):
    img = ws.read("images", columns=["image_id", "dataset"]).to_pandas()
    ids = np.array(sorted(img.loc[img["dataset"] == spec.dataset, "image_id"]), dtype=object)
    if len(ids) == 0:
        raise StudyError(f"{ws.root / 'images.parquet'}: dataset {spec.dataset!r} has no images")
    if spec.stimuli is not None:
        if spec.stimuli > len(ids):
            raise StudyError(
                f"study parameter stimuli: dataset {spec.dataset!r} has {len(ids)} images, "
                f"fewer than the {spec.stimuli} asked for"
            )
        ids = np.sort(rng.choice(ids, spec.stimuli, replace=False))
    if len(ids) < N_REFERENCES + 1:
        raise StudyError(f"dataset {spec.dataset!r} has {len(ids)} images; a trial shows {N_REFERENCES + 1}")
    return ids, [rng.choice(len(ids), N_REFERENCES + 1, replace=False) for _ in range(spec.tasks)]


def _active_trials(ws: Workspace, spec: StudySpec, notes: list[str]):
    """The embedding's stimuli and `spec.tasks` trials chosen by expected information gain
    under its ensemble (roads2021 section 4.3), a quarter of them confirmation trials."""
    ds = spec.dataset
    if not ws.has("psych_embedding", dataset=ds):
        raise StudyError(
            f"{ws.partition_dir('psych_embedding', dataset=ds)}: no psychological embedding of dataset "
            f"{ds!r} (table psych_embedding, partition dataset={ds}) to choose active trials from; "
            "collect a random round first and run `conceptlens analyze similarity`"
        )
    stimuli, members = read_embedding(ws, ds)
    ids = np.array(stimuli, dtype=object)
    if len(ids) < N_REFERENCES + 1:
        raise StudyError(
            f"{ws.partition_dir('psych_embedding', dataset=ds)}: the embedding has {len(ids)} images; "
            f"a trial shows {N_REFERENCES + 1}"
        )
    if spec.stimuli is not None:
        notes.append(f"stimuli={spec.stimuli} not used: an active round's are the embedding's {len(ids)}")
    index = {s: k for k, s in enumerate(stimuli)}
    counts = np.zeros(len(ids))
    if ws.has("similarity_trials", dataset=ds):
        t = ws.read("similarity_trials", columns=["query", "is_catch"], dataset=ds).to_pandas()
        q = t.loc[~t["is_catch"], "query"].map(index).dropna().astype(int)
        np.add.at(counts, q.to_numpy(), 1)
    n_confirm = int(round(spec.tasks * CONFIRMATION_SHARE)) if spec.tasks >= 4 else 0
    want = spec.tasks - n_confirm
    seed = rngs.int_seed(int(spec.seed), f"study.{_ACTIVE}", int(spec.round))
    sel = A.select_trials(
        members,
        -(-want // KEEP_PER_QUERY),
        N_REFERENCES,
        N_SELECT,
        query_counts=counts,
        keep_per_query=KEEP_PER_QUERY,
        n_confirmation=n_confirm,
        random_state=seed,
    )
    gain = np.flatnonzero(~sel.confirmation)
    gain = gain[np.argsort(-sel.information_gain[gain], kind="stable")][:want]
    keep = np.concatenate([gain, np.flatnonzero(sel.confirmation)])
    if len(keep) < spec.tasks:
        notes.append(
            f"active selection found {len(keep)} distinct trials of the {spec.tasks} asked "
            f"({len(ids)} images, at most {KEEP_PER_QUERY} per query)"
        )
    notes.append(
        f"active selection (round {spec.round}): {len(gain)} trials by information gain (mean "
        f"{sel.information_gain[gain].mean():.3f} nats) and {n_confirm} confirmation trials, under the "
        f"{len(members)}-member embedding of {len(ids)} images"
    )
    return ids, list(sel.stimulus_set[keep])


def _similarity_tasks(ws: Workspace, spec: StudySpec, notes: list[str]):
    rng = _rng(spec, _STIMULI)
    if spec.selection == "active":
        ids, picks = _active_trials(ws, spec, notes)
    else:
        ids, picks = _random_trials(ws, spec, rng)
    tasks = [
        Task(f"t{j:05d}", None, False, {"query": ids[pick[0]], "references": ids[pick[1:]].tolist()})
        for j, pick in enumerate(picks)
    ]

    def catch(rng: np.random.Generator, used: set, n: int) -> Task:
        pick = rng.choice(len(ids), N_REFERENCES, replace=False)
        query = ids[pick[0]]
        refs = ids[pick[1:]].tolist()
        refs.insert(int(rng.integers(N_REFERENCES)), query)  # shown mirrored
        return Task(f"catch-{n}", None, True, {"query": query, "references": refs})

    return tasks, catch, (lambda t: t.task_id), None


# ---- sessions ---------------------------------------------------------------------------------
def _pack(tasks: list[Task], spec: StudySpec, key) -> list[list[Task]]:
    """Each task `answers` times, first-fit into sessions of per_participant - catch tasks,
    never two with the same key in one session."""
    rng = _rng(spec, _PACK)
    real = spec.per_participant - spec.catch
    sessions: list[list[Task]] = []
    keys: list[set] = []
    room: list[int] = []  # sessions with room, ascending
    for _ in range(spec.answers):
        for i in rng.permutation(len(tasks)):
            t, kk = tasks[i], key(tasks[i])
            s = next((s for s in room if kk not in keys[s]), None)
            if s is None:
                s = len(sessions)
                sessions.append([])
                keys.append(set())
                room.append(s)
            sessions[s].append(t)
            keys[s].add(kk)
            if len(sessions[s]) == real:
                room.remove(s)
    return sessions


def _least_sessions(n_tasks: int, spec: StudySpec) -> int:
    """Sessions `n_tasks` tasks answered `answers` times need at the least."""
    return math.ceil(n_tasks * spec.answers / max(1, spec.per_participant - spec.catch))


def design(ws: Workspace, spec: StudySpec) -> Design:
    """The study `spec` on workspace `ws`: every task and every session, from the seed."""
    spec = spec.check()
    notes: list[str] = []
    for name in ("tasks", "answers", "per_participant"):  # before drawing anything
        _over(
            name,
            getattr(spec, name),
            {"tasks": "tasks", "answers": "people per task"}.get(name, "tasks per person"),
        )
    units = len(spec.clusters) if spec.two_afc and spec.clusters else 1
    _over("participants", _least_sessions(units * spec.tasks, spec), "participants needed at least")
    if spec.tasks * spec.answers > MAX_SLOTS:
        raise StudyError(
            f"the study plans at least {spec.tasks * spec.answers:,} answers; at most {MAX_SLOTS:,} per study"
        )
    if spec.two_afc:
        tasks, catch, key, chosen = _two_afc_tasks(ws, spec, notes)
        if spec.kind == "describability" and spec.per_participant > len(chosen):
            raise StudyError(
                f"study parameter per_participant: a person answers at most one describability "
                f"task per cluster (laina2020), so a session holds at most {len(chosen)} tasks "
                f"(the clusters tested), catch tasks included; got {spec.per_participant}"
            )
    else:
        tasks, catch, key, chosen = _similarity_tasks(ws, spec, notes)
    _over("participants", _least_sessions(len(tasks), spec), "participants needed at least")
    planned = len(tasks) * spec.answers
    if planned > MAX_SLOTS:
        raise StudyError(f"the study plans {planned:,} answers; at most {MAX_SLOTS:,} per study")
    sessions = _pack(tasks, spec, key)
    _over("participants", len(sessions), "participants needed")
    rng_catch, rng_layout = _rng(spec, _CATCH), _rng(spec, _LAYOUT)
    slots, catches = [], []
    for s, real in enumerate(sessions):
        n = len(real) + spec.catch
        at = {
            int(rng_catch.integers(j * n // spec.catch, (j + 1) * n // spec.catch)) for j in range(spec.catch)
        }
        used = {key(t) for t in real}
        queue = iter(real)
        for pos in range(n):
            if pos in at:
                t = catch(rng_catch, used, len(catches))
                used.add(key(t))
                catches.append(t)
            else:
                t = next(queue)
            if spec.two_afc:
                layout = {"positive_side": SIDES[int(rng_layout.integers(2))]}
            else:
                layout = {"order": rng_layout.permutation(N_REFERENCES).tolist()}
            slots.append(Slot(s, pos, t.task_id, layout))
    every = tasks + catches
    used_ids = set()
    for t in every:
        p = t.payload
        used_ids.update(i for i in (p.get("positive"), p.get("negative"), p.get("query")) if i)
        used_ids.update(p.get("references", ()))
    img = ws.read("images", columns=["image_id", "thumbnail"]).to_pandas()
    img = img[img["image_id"].isin(used_ids)]
    return Design(
        spec=spec,
        workspace=str(ws.meta().get("name", "")),
        images=dict(zip(img["image_id"], img["thumbnail"])),
        tasks=every,
        slots=slots,
        notes=notes,
        root=str(Path(ws.root).resolve()),
    )
