"""SIMULATED people's similarity judgments for the demo (roads2021's 8-rank-2 task).

No one can be asked here, so the demo's `similarity_trials` are simulated, and say so:
every agent id starts with `simulated-`, every trial id with `sim-`, and workspace.json's
provenance describes the simulation. It is honest in that the simulated people answer
from a *generating* psychological embedding of the shapes images built from their factors
(colour on a hue circle, shape, size, pattern, background, an idiosyncratic jitter per
image), through the very likelihood the analysis fits (roads2021 Eq. 2-3, beta = 10),
with the paper's quality control: sessions of 50 trials with 4 catch trials (the query
itself among the references), agents of varying attention (some answer at random),
grades from the catch trials, sessions graded below 0.5 dropped, weight = grade.
The analysis never sees the generating embedding; `recovery` compares the two.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from .. import schema
from ..embedding.psych import ensemble_similarity, read_embedding
from ..metrics.similarity import BETA, rsa, sample_choices
from ..workspace import Workspace, atomic_write_table

DATASET = "shapes"
N_STIMULI = 1000
N_SESSIONS = 460  # 50 trials each; those kept hold roughly 20,000 trials
SESSION_TRIALS, N_REFERENCES, N_SELECT = 50, 8, 2
TEST_SESSIONS = 0.1  # share of sessions in split `test`
NEAR_REFERENCES = 3  # references per trial drawn among the query's likely neighbours

# Factor coordinates of the generating embedding and how much each factor weighs.
HUE = {"red": 0, "yellow": 55, "green": 120, "cyan": 180, "blue": 235, "magenta": 300}
SHAPE = {
    "circle": (1.0, 0.0, 0.0),
    "square": (0.0, 1.0, 0.0),
    "triangle": (0.0, 0.75, 0.55),
    "star": (0.0, 0.3, 1.0),
    "cross": (0.2, 0.65, 0.75),
}
SIZE = {"small": 0.0, "medium": 0.5, "large": 1.0}
PATTERN = {"plain": (0.0, 0.0), "striped": (1.0, 0.0), "dotted": (0.5, 0.85), "checkered": (1.0, 0.85)}
BACKGROUND = {"white": (1.0, 0.0), "sand": (0.8, 0.5), "gray": (0.5, 0.0), "black": (0.0, 0.0)}
WEIGHT = {"color": 0.22, "shape": 0.2, "size": 0.1, "pattern": 0.08, "background": 0.05}
JITTER = 0.02
# Agents: attention multiplies beta; a few answer at random (attention 0).
ATTENTION = ((0.80, (0.7, 1.3)), (0.12, (0.2, 0.5)), (0.08, (0.0, 0.0)))


def generating_embedding(images: pd.DataFrame, seed: int) -> np.ndarray:
    """The simulated people's embedding of `images` (rows in that order), 10-d."""
    rng = np.random.default_rng([seed, 41])
    hue = np.deg2rad(images["color"].map(HUE).to_numpy(float))
    blocks = [
        WEIGHT["color"] * np.column_stack([np.cos(hue), np.sin(hue)]),
        WEIGHT["shape"] * np.stack(images["shape"].map(SHAPE).to_numpy()),
        WEIGHT["size"] * images["size"].map(SIZE).to_numpy(float)[:, None],
        WEIGHT["pattern"] * np.stack(images["pattern"].map(PATTERN).to_numpy()),
        WEIGHT["background"] * np.stack(images["background"].map(BACKGROUND).to_numpy()),
    ]
    Z = np.hstack(blocks)
    return Z + JITTER * rng.standard_normal(Z.shape)


def stimuli(images: pd.DataFrame, seed: int, n: int = N_STIMULI) -> pd.DataFrame:
    """A seeded sample of n images of the dataset, in image id order."""
    pool = images[images["dataset"] == DATASET].sort_values("image_id")
    pick = np.random.default_rng([seed, 40]).choice(len(pool), min(n, len(pool)), replace=False)
    return pool.iloc[np.sort(pick)].reset_index(drop=True)


def _references(query: int, factors: np.ndarray, rng) -> np.ndarray:
    """8 references: a few among images sharing at least two factors with the query (a
    trial designer's guess at informative trials, made from the factors, not from the
    generating embedding), the rest at random."""
    n = len(factors)
    shared = (factors == factors[query]).sum(axis=1)
    near = np.flatnonzero((shared >= 2) & (np.arange(n) != query))
    k = min(NEAR_REFERENCES, len(near))
    picked = list(rng.choice(near, k, replace=False)) if k else []
    others = np.setdiff1d(np.arange(n), picked + [query])
    picked += list(rng.choice(others, N_REFERENCES - k, replace=False))
    return rng.permutation(np.asarray(picked, np.int64))


def simulate(
    images: pd.DataFrame, seed: int, n_sessions: int | None = None, n_stimuli: int = N_STIMULI
) -> tuple[pa.Table, dict]:
    """(similarity_trials rows without the partition column, a summary for provenance).

    By default the sessions scale with the stimuli (a small demo build gets fewer)."""
    rng = np.random.default_rng([seed, 42])
    stim = stimuli(images, seed, n_stimuli)
    if n_sessions is None:
        n_sessions = max(4, round(N_SESSIONS * len(stim) / N_STIMULI))
    ids = stim["image_id"].to_numpy()
    Z = generating_embedding(stim, seed)
    factors = stim[["color", "shape", "size", "pattern", "background"]].to_numpy()
    n_agents = max(1, n_sessions // 2)
    shares, ranges = zip(*ATTENTION)
    kind = rng.choice(len(shares), n_agents, p=shares)
    attention = np.array([rng.uniform(*ranges[k]) for k in kind])
    rows, dropped, grades = [], 0, []
    for s in range(n_sessions):
        agent = int(rng.integers(n_agents))
        catch = set(rng.choice(20, 2, replace=False)) | set(
            SESSION_TRIALS - 20 + rng.choice(20, 2, replace=False)
        )
        queries = rng.integers(0, len(stim), SESSION_TRIALS)
        refs = np.stack([_references(q, factors, rng) for q in queries])
        for t in catch:  # the query itself (mirrored, for people) among the references
            refs[t, rng.integers(N_REFERENCES)] = queries[t]
        answers = sample_choices(Z, queries, refs, N_SELECT, BETA * attention[agent], rng)
        chosen = answers[:, 1 : 1 + N_SELECT]
        catch_grade = [
            1.0 if chosen[t, 0] == queries[t] else 0.5 if chosen[t, 1] == queries[t] else 0.0
            for t in sorted(catch)
        ]
        grade = float(np.mean(catch_grade))
        if grade < 0.5:  # unsatisfactory sessions are dropped, as in roads2021 4.1
            dropped += 1
            continue
        grades.append(grade)
        split = "test" if rng.random() < TEST_SESSIONS else "train"
        slow = attention[agent] > 0
        rt = rng.lognormal(np.log(8000 if slow else 2500), 0.45, SESSION_TRIALS)
        for t in range(SESSION_TRIALS):
            rows.append(
                {
                    "trial_id": f"sim-{s:04d}-{t:02d}",
                    "agent_id": f"simulated-{agent:03d}",
                    "query": ids[queries[t]],
                    "references": list(ids[refs[t]]),
                    "chosen": list(ids[chosen[t]]),
                    "n_select": N_SELECT,
                    "kind": f"{N_REFERENCES}rank{N_SELECT}",
                    "weight": grade,
                    "rt_ms": float(round(rt[t])),
                    "split": split,
                    "is_catch": t in catch,
                }
            )
    table = pa.Table.from_pylist(rows, schema=schema.arrow_schema("similarity_trials", partition=False))
    info = {
        "simulated": True,
        "dataset": DATASET,
        "stimuli": len(stim),
        "sessions": n_sessions,
        "sessions_dropped": dropped,
        "trials": len(rows),
        "mean_grade": float(np.mean(grades)) if grades else None,
        "beta": BETA,
        "note": "Simulated people: answers drawn from a generating embedding of the images' "
        "factors (conceptlens/demo/similarity.py), not collected from anyone.",
    }
    return table, info


def build_similarity(ws: Workspace, seed: int, progress: bool = True) -> dict:
    """Write the demo's simulated similarity trials (replacing earlier simulated ones)."""
    images = ws.read("images").to_pandas()
    table, info = simulate(images, seed)
    # People's answers are append-only (Workspace.append names each part by time); the
    # simulation is not people's: a rebuild replaces its one file, under a fixed name so
    # that the same seed gives the same bytes.
    ws.remove_partition("similarity_trials", dataset=DATASET)
    atomic_write_table(
        ws.partition_dir("similarity_trials", dataset=DATASET) / "part-simulated.parquet", table
    )
    meta = ws.meta()
    meta.setdefault("provenance", {})["similarity_trials"] = info
    ws.write_meta(meta)
    if progress:
        print(
            f"similarity: {info['trials']} simulated trials ({info['sessions_dropped']} of "
            f"{info['sessions']} sessions dropped by their catch trials)"
        )
    return info


def recovery(ws: Workspace, seed: int = 0) -> float:
    """Spearman correlation between the generating similarities and those of the inferred
    psychological embedding (ensemble expected similarity), over the embedded images."""
    ids, members = read_embedding(ws, DATASET)
    images = ws.read("images").to_pandas().set_index("image_id").loc[ids].reset_index()
    Z = generating_embedding(stimuli(ws.read("images").to_pandas(), seed), seed)
    order = stimuli(ws.read("images").to_pandas(), seed)["image_id"].tolist()
    pos = {s: k for k, s in enumerate(order)}
    Zg = Z[[pos[i] for i in images["image_id"]]]
    d = np.linalg.norm(Zg[:, None] - Zg[None], axis=-1)
    return rsa(np.exp(-BETA * d), ensemble_similarity(members, BETA, seed=seed))
