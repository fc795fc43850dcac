"""`conceptlens import hsj --workspace W SOURCE`: human similarity judgments (roads2021) as
`similarity_trials` rows of a dataset of the workspace.

Two formats (docs/similarity.md):

- the release (psiz-datasets `ilsvrc2012_val_hsj`): `stimuli.txt` (`local_id|filepath|
  wordnet_id`, local_id in base 36 from 1) and `train_seqs/seq_*.json`, `test_seqs/
  seq_*.json`, each `{"data": [{sequence_id, anonymous_id, grade, sequence: [...]}]}`;
  a sequence entry has `kind` (`rank:8rank2`), `response_time_ms` and `interactions`
  (`content:query`, `content:reference_k`, `behavior:rank_k` with asset ids
  `PZ` + 3 characters + local_id). Weight = grade / 100; split = the folder's.
- psiz's legacy HDF5 observations (`stimulus_set` with -1 padding, column 0 the query,
  chosen references first in choice order; `n_select`, `is_ranked`, `agent_id`,
  `weight`, `rt_ms`), with `catalog.hdf5` (psiz Catalog: `stimulus_id`,
  `stimulus_filepath`) or `stimuli.txt` (index i = local_id i + 1) beside it to name the
  stimuli. Split `train`.

A stimulus is an image of the dataset whose file name without extension (of its
source path or thumbnail), or image id, is the stimulus file's name without extension.
A trial whose query is among its references is a catch trial. Nothing is written
until every trial has been read and checked; an error names the file and the sequence
(or row). The rows are appended (people's answers are never rewritten).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

from .. import schema
from ..workspace import Workspace, now_iso
from .images import ImportInputError

KIND = re.compile(r"(?:rank:)?(\d+)rank(\d+)")
ASSET_PREFIX = 5  # `PZ` domain + 3-character subdomain, then the local id


@dataclass
class Stimulus:
    key: int  # local_id (release) or index (HDF5)
    path: str
    where: str  # file and line, for messages


@dataclass
class Raw:
    trial_id: str
    agent_id: str | None
    query: int
    references: list[int]
    chosen: list[int]
    kind: str
    weight: float
    rt_ms: float | None
    split: str
    where: str


# ---- stimuli -------------------------------------------------------------------------------
def read_stimuli(path: Path, zero_based: bool = False) -> dict[int, Stimulus]:
    """`local_id|filepath|wordnet_id` -> {local_id (or local_id - 1): Stimulus}."""
    out: dict[int, Stimulus] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ImportInputError(f"{path}: cannot be read ({e})") from None
    if not lines:
        raise ImportInputError(f"{path}: empty; expected a header `local_id|filepath|wordnet_id`")
    header = [h.strip() for h in lines[0].split("|")]
    if "local_id" not in header or "filepath" not in header:
        raise ImportInputError(
            f"{path} line 1: header must name columns local_id and filepath "
            f"(pipe separated), got {lines[0]!r}"
        )
    li, fi = header.index("local_id"), header.index("filepath")
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split("|")
        if len(cells) != len(header):
            raise ImportInputError(f"{path} line {n}: {len(cells)} field(s), the header has {len(header)}")
        try:
            key = int(cells[li].strip(), 36)
        except ValueError:
            raise ImportInputError(f"{path} line {n}: local_id {cells[li]!r} is not base 36") from None
        key = key - 1 if zero_based else key
        if key in out:
            raise ImportInputError(f"{path} line {n}: local_id {cells[li]!r} repeats {out[key].where}")
        out[key] = Stimulus(key, cells[fi].strip(), f"{path} line {n}")
    return out


def read_catalog(path: Path) -> dict[int, Stimulus]:
    import h5py

    try:
        with h5py.File(path, "r") as f:
            ids = np.asarray(f["stimulus_id"][()]).astype(np.int64)
            paths = [p.decode() if isinstance(p, bytes) else str(p) for p in f["stimulus_filepath"][()]]
    except KeyError as e:
        raise ImportInputError(f"{path}: psiz catalog lacks dataset {e}") from None
    except OSError as e:
        raise ImportInputError(f"{path}: not an HDF5 file ({e})") from None
    if len(ids) != len(paths):
        raise ImportInputError(f"{path}: {len(ids)} stimulus_id but {len(paths)} stimulus_filepath")
    return {int(k): Stimulus(int(k), p, f"{path} entry {i}") for i, (k, p) in enumerate(zip(ids, paths))}


def _stem(path: str) -> str:
    return PurePosixPath(str(path).replace("\\", "/")).stem


def match_images(
    images, dataset: str, stimuli: dict[int, Stimulus], used: dict[int, str]
) -> tuple[dict[int, str], list[tuple[Stimulus, str]]]:
    """{stimulus key: image_id} for the stimuli used, and the unmatched (stimulus, first
    trial using it). A name shared by two images matches neither."""
    rows = images[images["dataset"] == dataset]
    names: dict[str, set[str]] = {}
    for r in rows.itertuples(index=False):
        keys = {r.image_id, _stem(r.thumbnail)}
        if isinstance(getattr(r, "source_path", None), str):
            keys.add(_stem(r.source_path))
        for k in keys:
            names.setdefault(k, set()).add(r.image_id)
    out, missing = {}, []
    for key, first_use in used.items():
        s = stimuli[key]
        found = names.get(_stem(s.path), set())
        if len(found) == 1:
            out[key] = next(iter(found))
        else:
            missing.append(
                (s, first_use if not found else f"{first_use} (ambiguous: {', '.join(sorted(found)[:3])})")
            )
    return out, missing


# ---- the release format --------------------------------------------------------------------
def _local(asset, where: str) -> int:
    if not isinstance(asset, str) or len(asset) <= ASSET_PREFIX:
        raise ImportInputError(f"{where}: asset id {asset!r} is not `PZ` + subdomain + local id")
    try:
        return int(asset[ASSET_PREFIX:], 36)
    except ValueError:
        raise ImportInputError(f"{where}: asset id {asset!r} does not end in a base-36 local id") from None


def _timestep(step: dict, where: str) -> tuple[int, list[int], list[int], str]:
    kind = step.get("kind")
    m = KIND.fullmatch(kind) if isinstance(kind, str) else None
    if not m:
        raise ImportInputError(f"{where}: kind {kind!r} is not a rank trial such as `rank:8rank2`")
    n_ref, n_sel = int(m.group(1)), int(m.group(2))
    query, refs, ranks = None, {}, {}
    inter = step.get("interactions")
    if not isinstance(inter, list):
        raise ImportInputError(f"{where}: `interactions` must be a list")
    for it in inter:
        k = it.get("kind", "") if isinstance(it, dict) else ""
        if k == "content:query":
            if query is not None:
                raise ImportInputError(f"{where}: two content:query interactions")
            query = _local(it.get("detail"), where)
        elif k.startswith("content:reference_"):
            refs[int(k.rsplit("_", 1)[1])] = _local(it.get("detail"), where)
        elif k.startswith("behavior:rank_"):
            ranks[int(k.rsplit("_", 1)[1])] = _local(it.get("detail"), where)
    if query is None:
        raise ImportInputError(f"{where}: no content:query interaction")
    if sorted(refs) != list(range(n_ref)):
        raise ImportInputError(
            f"{where}: kind {kind} needs references 0..{n_ref - 1}, got {len(refs)} ({sorted(refs)})"
        )
    if sorted(ranks) != list(range(n_sel)):
        raise ImportInputError(
            f"{where}: kind {kind} needs {n_sel} choices (behavior:rank_0..{n_sel - 1}), got {len(ranks)}"
        )
    references = [refs[i] for i in range(n_ref)]
    chosen = [ranks[i] for i in range(n_sel)]
    if len(set(chosen)) != n_sel or not set(chosen) <= set(references):
        raise ImportInputError(f"{where}: the choices {chosen} must be distinct references")
    return query, references, chosen, f"{n_ref}rank{n_sel}"


def read_release(source: Path) -> list[Raw]:
    out: list[Raw] = []
    folders = [(source / f"{s}_seqs", s) for s in ("train", "test")]
    if not any(d.is_dir() for d, _ in folders):
        raise ImportInputError(f"{source}: no train_seqs/ or test_seqs/ folder")
    for folder, split in folders:
        for path in sorted(folder.glob("seq_*.json")) if folder.is_dir() else []:
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ImportInputError(f"{path}: malformed JSON ({e})") from None
            data = doc.get("data") if isinstance(doc, dict) else None
            if not isinstance(data, list):
                raise ImportInputError(f'{path}: expected {{"data": [sequences]}}')
            for seq in data:
                sid = seq.get("sequence_id") if isinstance(seq, dict) else None
                where = f"{path}: sequence {sid}"
                if sid is None or not isinstance(seq.get("sequence"), list):
                    raise ImportInputError(f"{where}: needs `sequence_id` and a `sequence` list")
                grade = seq.get("grade")
                if not isinstance(grade, (int, float)) or not 0 <= grade <= 100:
                    raise ImportInputError(f"{where}: grade must be a number in [0, 100], got {grade!r}")
                for i, step in enumerate(seq["sequence"]):
                    pos = step.get("position", i) if isinstance(step, dict) else i
                    at = f"{where}, position {pos}"
                    if not isinstance(step, dict):
                        raise ImportInputError(f"{at}: must be an object")
                    q, refs, chosen, kind = _timestep(step, at)
                    rt = step.get("response_time_ms")
                    out.append(
                        Raw(
                            f"{sid}-{pos}",
                            seq.get("anonymous_id"),
                            q,
                            refs,
                            chosen,
                            kind,
                            grade / 100.0,
                            float(rt) if isinstance(rt, (int, float)) and rt >= 0 else None,
                            split,
                            at,
                        )
                    )
    return out


# ---- psiz's HDF5 observations --------------------------------------------------------------
def read_hdf5(path: Path) -> list[Raw]:
    import h5py

    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise ImportInputError(f"{path}: not an HDF5 file ({e})") from None
    with f:
        for name in ("stimulus_set", "n_select"):
            if name not in f:
                raise ImportInputError(f"{path}: psiz observations lack dataset {name!r}")
        stim = np.asarray(f["stimulus_set"][()]).astype(np.int64)
        n = len(stim)

        def column(name, default):
            return np.asarray(f[name][()]) if name in f else np.full(n, default)

        sel = column("n_select", 1).astype(np.int64)
        ranked = column("is_ranked", True).astype(bool)
        agent = column("agent_id", 0)
        weight = column("weight", 1.0).astype(np.float64)
        rt = column("rt_ms", -1.0).astype(np.float64)
    if stim.ndim != 2 or stim.shape[1] < 3:
        raise ImportInputError(f"{path}: stimulus_set must be (trials, 1 + references), got {stim.shape}")
    for name, v in (
        ("n_select", sel),
        ("is_ranked", ranked),
        ("agent_id", agent),
        ("weight", weight),
        ("rt_ms", rt),
    ):
        if len(v) != n:
            raise ImportInputError(f"{path}: {name} has {len(v)} values for {n} trials")
    out = []
    for t in range(n):
        where = f"{path}: row {t}"
        row = stim[t]
        refs = [int(v) for v in row[1:] if v >= 0]
        if row[0] < 0 or (row[1 : 1 + len(refs)] < 0).any():
            raise ImportInputError(f"{where}: -1 padding may only end a stimulus_set row: {row.tolist()}")
        if not ranked[t]:
            raise ImportInputError(f"{where}: an unranked trial; only ranked choices are supported")
        if not 1 <= sel[t] < len(refs):
            raise ImportInputError(
                f"{where}: n_select {sel[t]} with {len(refs)} references "
                f"(a sequence with a wrong number of choices)"
            )
        if not np.isfinite(weight[t]) or weight[t] < 0:
            raise ImportInputError(f"{where}: weight {weight[t]} must be a finite number >= 0")
        out.append(
            Raw(
                f"{path.stem}-{t}",
                str(agent[t].decode() if isinstance(agent[t], bytes) else agent[t]),
                int(row[0]),
                refs,
                refs[: sel[t]],
                f"{len(refs)}rank{sel[t]}",
                float(weight[t]),
                float(rt[t]) if rt[t] >= 0 else None,
                "train",
                where,
            )
        )
    return out


# ---- the import ----------------------------------------------------------------------------
def detect(source: Path) -> tuple[str, Path]:
    """("release", folder) or ("hdf5", file)."""
    if source.is_file():
        if source.suffix.lower() in (".hdf5", ".h5"):
            return "hdf5", source
        raise ImportInputError(f"{source}: a file SOURCE must be psiz observations (.hdf5, .h5)")
    if not source.is_dir():
        raise ImportInputError(f"{source}: no such file or folder")
    if (source / "train_seqs").is_dir() or (source / "test_seqs").is_dir():
        return "release", source
    h5 = [
        p
        for p in sorted(source.iterdir())
        if p.suffix.lower() in (".hdf5", ".h5") and p.name != "catalog.hdf5"
    ]
    if len(h5) == 1:
        return "hdf5", h5[0]
    raise ImportInputError(
        f"{source}: expected train_seqs/ and test_seqs/ (the release) or one "
        f"psiz observations .hdf5 file, found {len(h5)} .hdf5 files"
    )


def _stimuli_for(fmt: str, path: Path) -> tuple[dict[int, Stimulus], str]:
    folder = path if fmt == "release" else path.parent
    if fmt == "hdf5" and (folder / "catalog.hdf5").is_file():
        return read_catalog(folder / "catalog.hdf5"), str(folder / "catalog.hdf5")
    if not (folder / "stimuli.txt").is_file():
        raise ImportInputError(
            f"{folder}: no stimuli.txt"
            + (" or catalog.hdf5" if fmt == "hdf5" else "")
            + " naming the stimuli"
        )
    return read_stimuli(folder / "stimuli.txt", zero_based=fmt == "hdf5"), str(folder / "stimuli.txt")


def import_hsj(workspace, source, dataset: str | None = None, skip_missing: bool = False) -> dict:
    """Read, check and append the trials of SOURCE; returns a summary."""
    import pandas as pd
    import pyarrow as pa

    ws = Workspace(workspace)
    ws.meta()
    source = Path(source).expanduser()
    fmt, path = detect(source)
    stimuli, stimuli_file = _stimuli_for(fmt, path)
    raws = read_release(path) if fmt == "release" else read_hdf5(path)
    if not raws:
        raise ImportInputError(f"{source}: no trials found")
    used: dict[int, str] = {}
    for r in raws:
        for key in (r.query, *r.references):
            if key not in stimuli:
                raise ImportInputError(f"{r.where}: stimulus {key} is not in {stimuli_file}")
            used.setdefault(key, r.where)
    images = ws.read("images").to_pandas()
    datasets = sorted(images["dataset"].unique())
    if dataset is None:
        if len(datasets) != 1:
            raise ImportInputError(f"{ws.root}: holds {len(datasets)} datasets; name one with --dataset")
        dataset = datasets[0]
    elif dataset not in datasets:
        raise ImportInputError(f"dataset {dataset!r} is not in {ws.table_path('images')}")
    ids, missing = match_images(images, dataset, stimuli, used)
    if missing and not skip_missing:
        s, first = missing[0]
        raise ImportInputError(
            f"{s.where}: stimulus {s.path!r} matches no image of dataset {dataset!r} "
            f"(first used by {first}); {len(missing)} stimuli are unmatched "
            "(--skip-missing drops their trials)"
        )
    rows, dropped, seen = [], 0, {}
    for r in raws:
        keys = (r.query, *r.references)
        if any(k not in ids for k in keys):
            dropped += 1
            continue
        if r.trial_id in seen:
            raise ImportInputError(f"{r.where}: trial id {r.trial_id!r} repeats {seen[r.trial_id]}")
        seen[r.trial_id] = r.where
        rows.append(
            {
                "trial_id": r.trial_id,
                "agent_id": r.agent_id,
                "query": ids[r.query],
                "references": [ids[k] for k in r.references],
                "chosen": [ids[k] for k in r.chosen],
                "n_select": len(r.chosen),
                "kind": r.kind,
                "weight": r.weight,
                "rt_ms": r.rt_ms,
                "split": r.split,
                "is_catch": r.query in r.references,
            }
        )
    if not rows:
        raise ImportInputError(f"{source}: none of the {len(raws)} trials shows only images of {dataset!r}")
    if ws.has("similarity_trials", dataset=dataset):
        old = set(ws.read("similarity_trials", columns=["trial_id"], dataset=dataset)["trial_id"].to_pylist())
        again = sorted(old & set(seen))
        if again:
            raise ImportInputError(
                f"{seen[again[0]]}: trial {again[0]!r} is already in "
                f"{ws.partition_dir('similarity_trials', dataset=dataset)} "
                f"({len(again)} trials already imported)"
            )
    table = pa.Table.from_pylist(rows, schema=schema.arrow_schema("similarity_trials", partition=False))
    ws.append("similarity_trials", table, dataset=dataset)
    summary = {
        "format": fmt,
        "source": os.path.abspath(source),
        "dataset": dataset,
        "trials": len(rows),
        "catch": int(pd.Series([r["is_catch"] for r in rows]).sum()),
        "dropped": dropped,
        "stimuli": len(used) - len(missing),
        "imported": now_iso(),
    }
    meta = ws.meta()
    meta.setdefault("provenance", {}).setdefault("hsj_imports", []).append(summary)
    ws.write_meta(meta)
    return summary
