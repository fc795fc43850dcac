"""Similarity judgments for tests: simulated people on the factory's tiny workspace, and
the two import formats (the ImageNet-HSJ release, psiz's HDF5 observations) written from
them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from conceptlens import schema
from conceptlens.metrics.similarity import sample_choices
from conceptlens.workspace import Workspace
from harness.factory import make_workspace

# People judge the toy images by colour (the label) first, then by shape.
COLOUR_WEIGHT, SHAPE_WEIGHT, JITTER = 0.3, 0.12, 0.02


def people_embedding(ws: Workspace, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """(image ids, the simulated people's 3-d embedding of them)."""
    img = ws.read("images").to_pandas().sort_values("image_id")
    hue = img["label"].to_numpy() * 2 * np.pi / 3
    shape = (img["shape"] == "square").to_numpy(float)
    rng = np.random.default_rng([seed, 1])
    Z = np.column_stack([COLOUR_WEIGHT * np.cos(hue), COLOUR_WEIGHT * np.sin(hue), SHAPE_WEIGHT * shape])
    return list(img["image_id"]), Z + JITTER * rng.standard_normal(Z.shape)


def simulate(
    ids,
    Z,
    n_trials: int,
    seed: int = 0,
    n_refs: int = 8,
    n_select: int = 2,
    catch_every: int = 25,
    agent: str = "simulated-",
) -> list[dict]:
    """similarity_trials rows (without dataset): answers drawn from the rank likelihood."""
    rng = np.random.default_rng([seed, 2])
    q = rng.integers(0, len(ids), n_trials)
    refs = np.stack([rng.choice(np.setdiff1d(np.arange(len(ids)), [x]), n_refs, replace=False) for x in q])
    catch = np.arange(n_trials) % catch_every == 0
    refs[catch, 0] = q[catch]
    ans = sample_choices(Z, q, refs, n_select, 10.0, rng)
    return [
        {
            "trial_id": f"t{t:05d}",
            "agent_id": f"{agent}{t % 7}",
            "query": ids[q[t]],
            "references": [ids[r] for r in refs[t]],
            "chosen": [ids[c] for c in ans[t, 1 : 1 + n_select]],
            "n_select": n_select,
            "kind": f"{n_refs}rank{n_select}",
            "weight": 1.0,
            "rt_ms": 5000.0,
            "split": "test" if t % 10 == 9 else "train",
            "is_catch": bool(catch[t]),
        }
        for t in range(n_trials)
    ]


def add_trials(ws: Workspace, n_trials: int = 1500, seed: int = 0, agent: str = "simulated-") -> list[dict]:
    ids, Z = people_embedding(ws, seed)
    rows = simulate(ids, Z, n_trials, seed, agent=agent)
    ws.append(
        "similarity_trials",
        pa.Table.from_pylist(rows, schema=schema.arrow_schema("similarity_trials", partition=False)),
        dataset="toy",
    )
    return rows


FAST = {"dims": [2, 3], "members": 2, "max_epochs": 60, "n_boot": 50, "batch_trials": 512}


def similarity_workspace(root: Path, n_trials: int = 1500, **opts) -> Workspace:
    """The factory's tiny workspace (every other table written by hand) with simulated
    trials and the real similarity analysis run on them (fast options)."""
    import shutil

    from conceptlens.analysis import runner

    ws = make_workspace(root, derived=True)
    # The factory's hand-written similarity tables give way to simulated people's trials.
    for name in (
        "similarity_trials",
        "psych_embedding",
        "similarity_fit",
        "human_alignment",
        "similarity_convergence",
    ):
        shutil.rmtree(ws.root / name, ignore_errors=True)
    shutil.rmtree(ws.root / "projections" / "checkpoint_id=psych@toy", ignore_errors=True)
    add_trials(ws, n_trials)
    runner.run(ws.root, "similarity", {**FAST, **opts}, progress_bars=False)
    return ws


# ---- the release format --------------------------------------------------------------------
def local_id(k: int) -> str:
    return np.base_repr(k, 36).zfill(7)


def asset(k: int) -> str:
    return "PZ004" + local_id(k)


def write_stimuli(folder: Path, ids: list[str]) -> dict[str, int]:
    """stimuli.txt naming the images by file name (local ids from 1); returns id -> local id."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["local_id|filepath|wordnet_id"]
    lines += [f"{local_id(k)}|/toy/{i}.png|n{k:08d}" for k, i in enumerate(ids, start=1)]
    (folder / "stimuli.txt").write_text("\n".join(lines) + "\n")
    return {i: k for k, i in enumerate(ids, start=1)}


def timestep(pos: int, q: int, refs: list[int], chosen: list[int], rt: int = 4000) -> dict:
    inter = [{"kind": "content:query", "detail": asset(q)}]
    inter += [{"kind": f"content:reference_{k}", "detail": asset(r)} for k, r in enumerate(refs)]
    inter += [{"kind": f"behavior:rank_{k}", "detail": asset(c)} for k, c in enumerate(chosen)]
    inter.append({"kind": "behavior:submit_response", "detail": "NA"})
    return {
        "position": pos,
        "kind": f"rank:{len(refs)}rank{len(chosen)}",
        "response_time_ms": rt,
        "grade_subjective": 100,
        "grade_objective": -1,
        "interactions": inter,
    }


def write_release(
    folder: Path, rows: list[dict], ids: list[str], per_seq: int = 40, grades=(100, 75)
) -> Path:
    """The rows as stimuli.txt + train_seqs/ + test_seqs/ (one sequence per file)."""
    key = write_stimuli(folder, ids)
    for split in ("train", "test"):
        mine = [r for r in rows if r["split"] == split]
        (folder / f"{split}_seqs").mkdir(parents=True, exist_ok=True)
        for s in range(0, len(mine), per_seq):
            seq = mine[s : s + per_seq]
            doc = {
                "version": "1.0",
                "data": [
                    {
                        "sequence_id": 1000 + s if split == "train" else 5000 + s,
                        "anonymous_id": f"agent-{s // per_seq % 3}",
                        "grade": grades[(s // per_seq) % len(grades)],
                        "n_timestep": len(seq),
                        "sequence": [
                            timestep(
                                p,
                                key[r["query"]],
                                [key[x] for x in r["references"]],
                                [key[x] for x in r["chosen"]],
                            )
                            for p, r in enumerate(seq)
                        ],
                    }
                ],
            }
            (folder / f"{split}_seqs" / f"seq_{split}{s:04d}.json").write_text(json.dumps(doc, indent=1))
    return folder


def write_hdf5(folder: Path, rows: list[dict], ids: list[str], catalog: bool = True) -> Path:
    """psiz observations (obs.hdf5) + catalog.hdf5 (or stimuli.txt) naming the stimuli."""
    import h5py

    folder.mkdir(parents=True, exist_ok=True)
    index = {i: k for k, i in enumerate(ids)}
    width = 1 + max(len(r["references"]) for r in rows)
    stim = np.full((len(rows), width), -1, np.int32)
    for t, r in enumerate(rows):
        order = [*r["chosen"], *[x for x in r["references"] if x not in r["chosen"]]]
        stim[t, : 1 + len(order)] = [index[r["query"]], *[index[x] for x in order]]
    with h5py.File(folder / "obs.hdf5", "w") as f:
        f.create_dataset("class_name", data="RankObservations")
        f.create_dataset("stimulus_set", data=stim)
        f.create_dataset("n_select", data=np.array([r["n_select"] for r in rows], np.int32))
        f.create_dataset("is_ranked", data=np.ones(len(rows), bool))
        f.create_dataset("groups", data=np.zeros((len(rows), 1), np.int32))
        f.create_dataset("agent_id", data=np.arange(len(rows), dtype=np.int32) % 4)
        f.create_dataset("session_id", data=np.zeros(len(rows), np.int32))
        f.create_dataset("weight", data=np.full(len(rows), 0.9))
        f.create_dataset("rt_ms", data=np.full(len(rows), 3000.0))
    if catalog:
        with h5py.File(folder / "catalog.hdf5", "w") as f:
            f.create_dataset("stimulus_filepath", data=np.array([f"toy/{i}.png" for i in ids], "S"))
            f.create_dataset("common_path", data="/data")
            f.create_dataset("stimulus_id", data=np.arange(len(ids)))
    else:
        write_stimuli(folder, ids)
    return folder / "obs.hdf5"
