"""Named ways to break a valid workspace, each with the problem `validate` must report.

Every corruption takes a `Workspace` made by `harness.factory.make_workspace(root,
derived=True)` (or a copy of one) and breaks it one way. The matching `Malformation`
says which table, column and file the problem must name, and a few words of its
message. Used by tests/test_validate.py and by the dashboard's page tests.

Corruptions replace files instead of writing into them, so a copy made with hard
links never changes the original. A few write next to the workspace (a folder or
file outside it, for symlinks that lead out), never inside anything else.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from conceptlens import schema
from conceptlens.workspace import Workspace


@dataclass(frozen=True)
class Malformation:
    name: str
    table: str  # table the problem names ("workspace.json" for the metadata)
    column: str | None  # None only for problems about a whole file or folder
    # File or folder the problem names, relative to the workspace; or a function giving it,
    # for a case derived from a declaration (the table's first file in the factory workspace).
    at: str | Callable[[], str]
    words: str  # part of the problem's message
    apply: Callable[[Workspace], None]
    deep_only: bool = False  # found only by `validate(deep=True)` (embeddings, image decoding)

    @property
    def file(self) -> str:
        return self.at() if callable(self.at) else self.at


# Files of the factory workspace.
CKPTS, IMAGES, CAPTIONS = "checkpoints.parquet", "images.parquet", "captions.parquet"
F0 = "features/checkpoint_id=ck0/part-0.parquet"
CL0 = "clusters/checkpoint_id=ck0/k=4/part-0.parquet"
CM0 = "cluster_metrics/checkpoint_id=ck0/k=4/part-0.parquet"
CC0 = "cluster_captions/checkpoint_id=ck0/k=4/part-0.parquet"
KM0 = "checkpoint_metrics/checkpoint_id=ck0/k=4/part-0.parquet"
PJ0 = "projections/checkpoint_id=ck0/method=umap/part-0.parquet"
PCORR = "predictor_correlations/dataset=toy/part-0.parquet"
SIM = "clustering_similarity/dataset=toy/part-0.parquet"
LINKS = "cluster_links/dataset=toy/part-0.parquet"
RUNS = "analysis_runs/analysis=comparisons/part-0.parquet"
EVENTS = "concept_events/dataset=toy/run=toy-run/part-0.parquet"
CURVES = "learning_curves/dataset=toy/run=toy-run/part-0.parquet"
ALIGNED = "aligned_projections/dataset=toy/run=toy-run/part-0.parquet"


# ---- low-level edits (replace, never write through a possibly shared inode) -----------
def _write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    path.write_bytes(data)


SELECTION = "selections/dataset=toy/part-broken.parquet"


def _selection(**row):
    """A saved selection (conceptlens/selections.py) of two of the toy images, changed by `row`."""

    def apply(ws: Workspace) -> None:
        import datetime as dt

        ids = sorted(ws.read("images")["image_id"].to_pylist())[:2]
        base = {
            "name": "left group",
            "image_ids": ids,
            "n_images": 2,
            "origin": "a test",
            "checkpoint_id": None,
        }
        base["created"] = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
        schema_ = schema.arrow_schema("selections", partition=False)
        path = ws.root / SELECTION
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_table(path, pa.Table.from_pylist([{**base, **row}], schema=schema_))

    return apply


HIERARCHY = "label_hierarchy/dataset=toy/part-0.parquet"


def _hierarchy(*pairs):
    """toy's label hierarchy (format 2.4) over label_name, of these (node, parent) pairs."""

    def apply(ws: Workspace) -> None:
        rows = [{"images_column": "label_name", "node": n, "parent": p, "name": None} for n, p in pairs]
        path = ws.root / HIERARCHY
        path.parent.mkdir(parents=True, exist_ok=True)
        t = pa.Table.from_pylist(rows, schema=schema.arrow_schema("label_hierarchy", partition=False))
        _write_table(path, t)

    return apply


def _write_table(path: Path, table: pa.Table) -> None:
    tmp = path.with_name(path.name + ".malformed")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def _edit(rel: str, fn: Callable[[pa.Table], pa.Table]) -> Callable[[Workspace], None]:
    def apply(ws: Workspace) -> None:
        p = ws.root / rel
        _write_table(p, fn(pq.read_table(p)))

    return apply


def _put(t: pa.Table, column: str, values, typ=None) -> pa.Table:
    typ = typ or (t.schema.field(column).type if column in t.column_names else None)
    arr = pa.array(values, typ)
    if column in t.column_names:
        return t.set_column(t.column_names.index(column), pa.field(column, arr.type), arr)
    return t.append_column(column, arr)


def _set(rel: str, column: str, row: int, value, typ=None) -> Callable[[Workspace], None]:
    """Put `value` into one cell."""

    def fn(t):
        vals = t[column].to_pylist()
        vals[row] = value
        return _put(t, column, vals, typ)

    return _edit(rel, fn)


def _meta(fn: Callable[[dict], object]) -> Callable[[Workspace], None]:
    def apply(ws: Workspace) -> None:
        meta = json.loads(ws.meta_path.read_text())
        fn(meta)
        _write_bytes(ws.meta_path, json.dumps(meta).encode())

    return apply


def _drop(field: str):
    return _meta(lambda m: m.pop(field))


def _with(field: str, value):
    return _meta(lambda m: m.__setitem__(field, value))


def _raw_meta(text: str):
    return lambda ws: _write_bytes(ws.meta_path, text.encode())


def _unlink(rel: str):
    return lambda ws: (ws.root / rel).unlink()


def _move(src: str, dst: str):
    def apply(ws: Workspace) -> None:
        (ws.root / dst).parent.mkdir(parents=True, exist_ok=True)
        os.replace(ws.root / src, ws.root / dst)

    return apply


def _copy(src: str, dst: str):
    def apply(ws: Workspace) -> None:
        (ws.root / dst).parent.mkdir(parents=True, exist_ok=True)
        if (ws.root / src).is_dir():
            shutil.copytree(ws.root / src, ws.root / dst)
        else:
            shutil.copyfile(ws.root / src, ws.root / dst)

    return apply


def _fixed_runs_name(ws: Workspace) -> Path:
    """Give analysis_runs' one (time-stamped) part file a fixed name, so problems can name it."""
    (src,) = (ws.root / "analysis_runs/analysis=comparisons").glob("*.parquet")
    os.replace(src, ws.root / RUNS)
    return ws.root / RUNS


def _then(*steps):
    def apply(ws: Workspace) -> None:
        for step in steps:
            step(ws)

    return apply


def _outside(ws: Workspace, name: str) -> Path:
    """A path next to the workspace (for symlinks that lead out of it)."""
    return ws.root.parent / f"{ws.root.name}-outside-{name}"


# ---- corruptions that need more than one edit ---------------------------------------
def _random_bytes(rel: str):
    return lambda ws: _write_bytes(ws.root / rel, os.urandom(256))


def _truncate(rel: str):
    def apply(ws: Workspace) -> None:
        data = (ws.root / rel).read_bytes()
        _write_bytes(ws.root / rel, data[: len(data) // 2])

    return apply


def _folder_as_file(rel: str):
    def apply(ws: Workspace) -> None:
        shutil.rmtree(ws.root / rel)
        _write_bytes(ws.root / rel, b"not a folder")

    return apply


def _file_as_folder(rel: str):
    def apply(ws: Workspace) -> None:
        (ws.root / rel).unlink()
        (ws.root / rel).mkdir()

    return apply


def _embeddings(rel: str, fn):
    """Rewrite the embeddings of one features file through fn(list of lists)."""

    def edit(t):
        emb = t["embedding"].to_pylist()
        fn(emb)
        return _put(t, "embedding", emb, pa.list_(pa.float32()))

    return _edit(rel, edit)


def _wide(rel: str, n: int, prefix: str = "extra"):
    """Give one file `n` float columns more (`{prefix}_0`, ...)."""

    def fn(t):
        col = pa.array([0.0] * t.num_rows)
        return pa.table({**{c: t[c] for c in t.column_names}, **{f"{prefix}_{i}": col for i in range(n)}})

    return _edit(rel, fn)


def png_header(width: int, height: int) -> bytes:
    """A PNG file that claims `width` x `height` grey pixels and holds one row: PIL opens it
    (reading the size) without the memory such an image would take."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\x00" * (width + 1)))
        + chunk(b"IEND", b"")
    )


def _symlink_thumbnail_outside(ws: Workspace) -> None:
    target = _outside(ws, "0005.png")
    shutil.copyfile(ws.root / "thumbnails/toy/0005.png", target)
    (ws.root / "thumbnails/toy/0005.png").unlink()
    (ws.root / "thumbnails/toy/0005.png").symlink_to(target)


def _symlink_folder_outside(ws: Workspace) -> None:
    target = _outside(ws, "toy")
    shutil.copytree(ws.root / "thumbnails/toy", target)
    shutil.rmtree(ws.root / "thumbnails/toy")
    (ws.root / "thumbnails/toy").symlink_to(target, target_is_directory=True)


def _vl_models(config: str):
    def apply(ws: Workspace) -> None:
        _write_table(
            ws.root / "vl_models.parquet",
            pa.table(
                {
                    "vl_model_id": ["vl0"],
                    "dataset": ["toy"],
                    "spec": ["open_clip:toy"],
                    "config": [config],
                    "weights": pa.array([None], pa.string()),
                    "weights_sha256": pa.array([None], pa.string()),
                }
            ),
        )

    return apply


def _compmap(table: str, row: dict, **partition):
    """Replace one partition of a (CompMap or other partitioned) table by a single, broken row."""

    def apply(ws: Workspace) -> None:
        from conceptlens import schema

        ws.write(
            table,
            pa.Table.from_pylist([row], schema=schema.arrow_schema(table, partition=False)),
            **partition,
        )

    return apply


def _similarity(table: str, row: dict, name: str = "part-0.parquet"):
    """Add (append-only tables) or replace (others) a partition file of dataset toy holding one
    broken row."""

    def apply(ws: Workspace) -> None:
        from conceptlens import schema
        from conceptlens.workspace import atomic_write_table

        t = pa.Table.from_pylist([row], schema=schema.arrow_schema(table, partition=False))
        atomic_write_table(ws.partition_dir(table, dataset="toy") / name, t)

    return apply


_TRIAL = {
    "trial_id": "t999",
    "agent_id": "a0",
    "query": "toy-0000",
    "references": [f"toy-{i:04d}" for i in range(1, 9)],
    "chosen": ["toy-0001", "toy-0002"],
    "n_select": 2,
    "kind": "8rank2",
    "weight": 1.0,
    "rt_ms": 900.0,
    "split": "train",
    "is_catch": False,
}
_FIT = {
    "dim": 2,
    "member": 0,
    "selected": True,
    "n_train": 32,
    "n_heldout": 8,
    "heldout_loglik": -1.0,
    "heldout_accuracy": 0.6,
    "heldout_triplet_accuracy": 0.7,
    "test_loglik": -1.0,
    "test_accuracy": 0.5,
    "agreement": 0.8,
    "prior_scale": 0.5,
    "epochs": 5,
    "seconds": 0.1,
}
_ALIGN = {
    "checkpoint_id": "ck0",
    "metric": "rsa",
    "distance": "cosine",
    "label": None,
    "label_name": None,
    "value": 0.5,
    "lo": 0.4,
    "hi": 0.6,
    "n": 10,
    "n_units": 10,
}
_PRIM = {
    "primitive": "color:red",
    "group": "color",
    "value": "red",
    "prompt": "a red",
    "position": 0,
    "normalize": "softmax",
}
_SCORE = {
    "model": "prim",
    "ways": 5,
    "shots": 1,
    "metric": "accuracy",
    "value": 0.5,
    "lo": 0.4,
    "hi": 0.6,
    "episodes": 10,
    "n": 75,
}


def _swap_pair(rel: str):
    def fn(t):
        a, b = t["checkpoint_a"].to_pylist(), t["checkpoint_b"].to_pylist()
        a[0], b[0] = b[0], a[0]
        return _put(_put(t, "checkpoint_a", a), "checkpoint_b", b)

    return _edit(rel, fn)


def _double(rel: str):
    """Repeat every row of a file (a duplicated key within one partition)."""

    def fn(t):
        return pa.concat_tables([t, t.slice(0, 1)])

    return _edit(rel, fn)


def _lo_above(rel: str):
    """A lower confidence bound above its value (both still in [0, 1])."""

    def fn(t):
        lo = t["coherence_random_lo"].to_pylist()
        lo[1] = (t["coherence_random"][1].as_py() + 1.0) / 2  # the factory's values are < 1
        return _put(t, "coherence_random_lo", lo)

    return _edit(rel, fn)


def _count_above_size(rel: str):
    def fn(t):
        return _put(t, "count", [c + 100 if i == 2 else c for i, c in enumerate(t["count"].to_pylist())])

    return _edit(rel, fn)


def _sizes_off(rel: str):
    def fn(t):
        return _put(t, "size", [s + 1 if i == 0 else s for i, s in enumerate(t["size"].to_pylist())])

    return _edit(rel, fn)


# ---- the registry --------------------------------------------------------------------
_M = Malformation
NAN, INF = float("nan"), float("inf")


def _study(table: str, row: dict):
    """Add a study's partition (study s1) holding one broken row."""

    def apply(ws: Workspace) -> None:
        from conceptlens import schema
        from conceptlens.workspace import atomic_write_table

        t = pa.Table.from_pylist([row], schema=schema.arrow_schema(table, partition=False))
        atomic_write_table(ws.partition_dir(table, study_id="s1") / "part-broken.parquet", t)

    return apply


_STUDY_ANSWER = {
    "participant_id": "p0000000",
    "task_id": "c0-00",
    "position": 0,
    "kind": "coherence",
    "checkpoint_id": "ck0",
    "k": 4,
    "cluster": 0,
    "is_catch": False,
    "description": None,
    "references": ["toy-0000", "toy-0003"],
    "query": None,
    "positive": "toy-0006",
    "negative": "toy-0001",
    "positive_side": "left",
    "chosen_side": "left",
    "chosen": ["toy-0006"],
    "correct": True,
    "grade": None,
    "rt_ms": 900.0,
    "answered": "2026-01-01T00:00:00+00:00",
}
_STUDY_PARTICIPANT = {
    "participant_id": "p0000000",
    "session": 0,
    "started": "2026-01-01T00:00:00+00:00",
    "finished": None,
    "completion_code": None,
    "answers": 4,
    "catch_answers": 2,
    "catch_failed": 1,
    "catch_failure_rate": 0.5,
    "mean_grade": 0.5,
    "excluded": False,
}
_STUDY_CLUSTER = {
    "checkpoint_id": "ck0",
    "k": 4,
    "cluster": 0,
    "measure": "coherence_random",
    "n": 20,
    "n_correct": 15,
    "accuracy": 0.75,
    "lo": 0.51,
    "hi": 0.91,
    "proxy": 0.8,
    "proxy_lo": 0.56,
    "proxy_hi": 0.94,
    "purity": 0.7,
    "description": None,
}
_STUDY_SUMMARY = {
    "kind": "coherence",
    "measure": "coherence_random",
    "spec": "{}",
    "created": "2026-01-01T00:00:00+00:00",
    "participants": 3,
    "finished": 3,
    "excluded": 0,
    "max_catch_failure": None,
    "answers": 60,
    "accuracy": 0.75,
    "lo": 0.62,
    "hi": 0.85,
    "alpha": 0.4,
    "alpha_units": 20,
}


MALFORMATIONS: dict[str, Malformation] = {
    m.name: m
    for m in [
        # workspace.json
        _M("meta_missing", "workspace.json", None, "workspace.json", "not found", _unlink("workspace.json")),
        _M(
            "meta_invalid_json",
            "workspace.json",
            None,
            "workspace.json",
            "invalid JSON",
            _raw_meta("{not json"),
        ),
        _M(
            "meta_not_an_object", "workspace.json", None, "workspace.json", "JSON object", _raw_meta("[1, 2]")
        ),
        _M(
            "meta_without_name",
            "workspace.json",
            "name",
            "workspace.json",
            "required field is missing",
            _drop("name"),
        ),
        _M(
            "meta_without_description",
            "workspace.json",
            "description",
            "workspace.json",
            "required field is missing",
            _drop("description"),
        ),
        _M(
            "meta_without_created",
            "workspace.json",
            "created",
            "workspace.json",
            "required field is missing",
            _drop("created"),
        ),
        _M(
            "meta_without_provenance",
            "workspace.json",
            "provenance",
            "workspace.json",
            "required field is missing",
            _drop("provenance"),
        ),
        _M(
            "meta_without_version",
            "workspace.json",
            "schema_version",
            "workspace.json",
            "required field is missing",
            _drop("schema_version"),
        ),
        _M(
            "meta_provenance_not_object",
            "workspace.json",
            "provenance",
            "workspace.json",
            "JSON object",
            _with("provenance", "by hand"),
        ),
        _M(
            "meta_created_not_a_time",
            "workspace.json",
            "created",
            "workspace.json",
            "ISO-8601",
            _with("created", "yesterday"),
        ),
        _M(
            "meta_format_1",
            "workspace.json",
            "schema_version",
            "workspace.json",
            "conceptlens migrate",
            _with("schema_version", "1.0"),
        ),
        _M(
            "meta_format_9",
            "workspace.json",
            "schema_version",
            "workspace.json",
            "not readable",
            _with("schema_version", "9.0"),
        ),
        _M(
            "meta_version_garbage",
            "workspace.json",
            "schema_version",
            "workspace.json",
            "unreadable version",
            _with("schema_version", 2),
        ),
        # whole files and folders
        _M("images_missing", "images", None, IMAGES, "required table is missing", _unlink(IMAGES)),
        _M(
            "checkpoints_random_bytes",
            "checkpoints",
            None,
            CKPTS,
            "cannot be read as Parquet",
            _random_bytes(CKPTS),
        ),
        _M(
            "captions_truncated", "captions", None, CAPTIONS, "cannot be read as Parquet", _truncate(CAPTIONS)
        ),
        _M(
            "clusters_partition_random_bytes",
            "clusters",
            None,
            CL0,
            "cannot be read as Parquet",
            _random_bytes(CL0),
        ),
        _M("images_is_a_folder", "images", None, IMAGES, "is a folder", _file_as_folder(IMAGES)),
        _M("clusters_is_a_file", "clusters", None, "clusters", "is a file", _folder_as_file("clusters")),
        # columns and types
        _M(
            "images_without_image_id",
            "images",
            "image_id",
            IMAGES,
            "required column is missing",
            _edit(IMAGES, lambda t: t.drop_columns(["image_id"])),
        ),
        _M(
            "checkpoints_without_feature_dim",
            "checkpoints",
            "feature_dim",
            CKPTS,
            "required column is missing",
            _edit(CKPTS, lambda t: t.drop_columns(["feature_dim"])),
        ),
        _M(
            "images_width_as_text",
            "images",
            "width",
            IMAGES,
            "expected int",
            _edit(IMAGES, lambda t: _put(t, "width", [str(w) for w in t["width"].to_pylist()], pa.string())),
        ),
        _M(
            "cluster_metrics_too_many_columns",
            "cluster_metrics",
            None,
            CM0,
            "holds 2,000 columns that are not the table's (at most 16 allowed",
            _wide(CM0, 2000),
        ),
        _M(
            "cluster_metrics_purity_as_text",
            "cluster_metrics",
            "purity",
            CM0,
            "expected float",
            _edit(CM0, lambda t: _put(t, "purity", [str(v) for v in t["purity"].to_pylist()], pa.string())),
        ),
        _M(
            "features_embedding_float64",
            "features",
            "embedding",
            F0,
            "expected list<float32>",
            _edit(F0, lambda t: _put(t, "embedding", t["embedding"].to_pylist(), pa.list_(pa.float64()))),
        ),
        _M(
            "images_null_dataset",
            "images",
            "dataset",
            IMAGES,
            "null value(s) in a non-nullable column",
            _set(IMAGES, "dataset", 3, None),
        ),
        _M(
            "clusters_null_image_id",
            "clusters",
            "image_id",
            CL0,
            "null value(s) in a non-nullable column",
            _set(CL0, "image_id", 2, None),
        ),
        # keys
        _M(
            "images_duplicate_id",
            "images",
            "image_id",
            IMAGES,
            "not unique",
            _set(IMAGES, "image_id", 5, "toy-0004"),
        ),
        _M("features_duplicate_image_id", "features", "image_id", F0, "not unique", _double(F0)),
        _M(
            "cluster_metrics_second_part_file",
            "cluster_metrics",
            "cluster",
            CM0,
            "not unique",
            _copy(CM0, CM0.replace("part-0", "part-1")),
        ),
        _M(
            "analysis_runs_duplicate_run",
            "analysis_runs",
            "unit,started",
            RUNS,
            "not unique",
            _then(_fixed_runs_name, _copy(RUNS, RUNS.replace("part-0", "part-1"))),
        ),
        # references
        _M(
            "features_unknown_image",
            "features",
            "image_id",
            F0,
            "not found in images.image_id",
            _set(F0, "image_id", 0, "no-such-image"),
        ),
        _M(
            "checkpoints_unknown_dataset",
            "checkpoints",
            "dataset",
            CKPTS,
            "not found in images.dataset",
            _set(CKPTS, "dataset", 1, "nope"),
        ),
        _M(
            "similarity_unknown_checkpoint",
            "clustering_similarity",
            "checkpoint_b",
            SIM,
            "not found in checkpoints.checkpoint_id",
            _set(SIM, "checkpoint_b", 0, "ck9"),
        ),
        _M(
            "features_without_checkpoint",
            "features",
            "checkpoint_id",
            "features/checkpoint_id=ghost",
            "no row in checkpoints",
            _copy("features/checkpoint_id=ck0", "features/checkpoint_id=ghost"),
        ),
        _M(
            "checkpoint_without_features",
            "features",
            "checkpoint_id",
            "features/checkpoint_id=ck2",
            "no features partition",
            _unlink("features/checkpoint_id=ck2/part-0.parquet"),
        ),
        _M(
            "cluster_metrics_unknown_checkpoint",
            "cluster_metrics",
            "checkpoint_id",
            "cluster_metrics/checkpoint_id=gone",
            "no row in checkpoints",
            _move("cluster_metrics/checkpoint_id=ck2", "cluster_metrics/checkpoint_id=gone"),
        ),
        _M(
            "checkpoint_metrics_unknown_checkpoint",
            "checkpoint_metrics",
            "checkpoint_id",
            "checkpoint_metrics/checkpoint_id=gone",
            "no row in checkpoints",
            _move("checkpoint_metrics/checkpoint_id=ck1", "checkpoint_metrics/checkpoint_id=gone"),
        ),
        _M(
            "clid_scores_unknown_dataset",
            "clid_scores",
            "dataset",
            "clid_scores/dataset=other",
            "no row in images",
            _move("clid_scores/dataset=toy", "clid_scores/dataset=other"),
        ),
        # partition folders
        _M(
            "clusters_k_not_a_number",
            "clusters",
            "k",
            "clusters/checkpoint_id=ck0/k=abc",
            "does not parse",
            _move("clusters/checkpoint_id=ck0/k=4", "clusters/checkpoint_id=ck0/k=abc"),
        ),
        _M(
            "clusters_k_not_canonical",
            "clusters",
            "k",
            "clusters/checkpoint_id=ck0/k=04",
            "k=4",
            _move("clusters/checkpoint_id=ck0/k=4", "clusters/checkpoint_id=ck0/k=04"),
        ),
        _M(
            "clusters_foreign_folder",
            "clusters",
            "k",
            "clusters/checkpoint_id=ck0/foo=1",
            "does not parse",
            _move("clusters/checkpoint_id=ck0/k=4", "clusters/checkpoint_id=ck0/foo=1"),
        ),
        _M(
            "features_unsafe_id",
            "features",
            "checkpoint_id",
            "features/checkpoint_id=ck 0",
            "does not parse",
            _copy("features/checkpoint_id=ck0", "features/checkpoint_id=ck 0"),
        ),
        _M(
            "features_1_0_layout_file",
            "features",
            "checkpoint_id",
            "features/ck0.parquet",
            "partition folder",
            _copy(F0, "features/ck0.parquet"),
        ),
        _M(
            "projections_missing_level",
            "projections",
            "method",
            "projections/checkpoint_id=ck0/part-0.parquet",
            "partition folder",
            _move(PJ0, "projections/checkpoint_id=ck0/part-0.parquet"),
        ),
        _M(
            "features_extra_level",
            "features",
            None,
            "features/checkpoint_id=ck0/extra",
            "unexpected folder",
            _move(F0, "features/checkpoint_id=ck0/extra/part-0.parquet"),
        ),
        _M(
            "clusters_leftover_temporary",
            "clusters",
            None,
            "clusters/checkpoint_id=ck0/k=4/.part-0.parquet.x1y2.tmp",
            "stray file",
            _copy(CL0, "clusters/checkpoint_id=ck0/k=4/.part-0.parquet.x1y2.tmp"),
        ),
        _M(
            "clusters_partition_column_in_file",
            "clusters",
            "checkpoint_id",
            CL0,
            "also stored inside",
            _edit(CL0, lambda t: _put(t, "checkpoint_id", ["ck1"] * t.num_rows, pa.string())),
        ),
        # values
        _M(
            "purity_above_one",
            "cluster_metrics",
            "purity",
            CM0,
            "outside [0, 1]",
            _set(CM0, "purity", 1, 1.5),
        ),
        _M(
            "top_label_share_negative",
            "cluster_metrics",
            "top_label_share",
            CM0,
            "outside [0, 1]",
            _set(CM0, "top_label_share", 0, -0.2),
        ),
        _M(
            "coherence_hard_nan",
            "cluster_metrics",
            "coherence_hard",
            CM0,
            "outside [0, 1]",
            _set(CM0, "coherence_hard", 2, NAN),
        ),
        _M(
            "coherence_lo_above_value",
            "cluster_metrics",
            "coherence_random_lo",
            CM0,
            "greater than coherence_random",
            _lo_above(CM0),
        ),
        _M(
            "hard_negative_is_cluster",
            "cluster_metrics",
            "hard_negative",
            CM0,
            "equal to cluster",
            _set(CM0, "hard_negative", 2, 2),
        ),
        _M(
            "hard_negative_beyond_k",
            "cluster_metrics",
            "hard_negative",
            CM0,
            "not < k",
            _set(CM0, "hard_negative", 0, 4),
        ),
        _M("cluster_size_zero", "cluster_metrics", "size", CM0, "not > 0", _set(CM0, "size", 3, 0)),
        _M("cluster_sizes_do_not_add_up", "cluster_metrics", "size", CM0, "sum to", _sizes_off(CM0)),
        _M("clusters_cluster_equals_k", "clusters", "cluster", CL0, "not < k", _set(CL0, "cluster", 7, 4)),
        _M("clusters_negative_cluster", "clusters", "cluster", CL0, "not >= 0", _set(CL0, "cluster", 6, -1)),
        _M(
            "clusters_negative_distance",
            "clusters",
            "distance",
            CL0,
            "not >= 0",
            _set(CL0, "distance", 5, -0.5),
        ),
        _M(
            "clusters_infinite_distance",
            "clusters",
            "distance",
            CL0,
            "NaN or infinite",
            _set(CL0, "distance", 5, INF),
        ),
        _M(
            "captions_cluster_beyond_k",
            "cluster_captions",
            "cluster",
            CC0,
            "not < k",
            _set(CC0, "cluster", 3, 9),
        ),
        _M(
            "describability_above_one",
            "cluster_captions",
            "describability_binary",
            CC0,
            "outside [0, 1]",
            _set(CC0, "describability_binary", 0, 2.0),
        ),
        _M(
            "anmi_below_minus_one",
            "checkpoint_metrics",
            "anmi",
            KM0,
            "outside [-1, 1]",
            _set(KM0, "anmi", 0, -1.5),
        ),
        _M(
            "knn_acc_above_one",
            "checkpoint_metrics",
            "knn_acc",
            KM0,
            "outside [0, 1]",
            _set(KM0, "knn_acc", 0, 1.2),
        ),
        _M(
            "cl_heldout_negative",
            "checkpoint_metrics",
            "cl_heldout",
            KM0,
            "outside [0, 1]",
            _set(KM0, "cl_heldout", 0, -0.1),
        ),
        _M(
            "intrinsic_dimension_infinite",
            "checkpoint_metrics",
            "id",
            KM0,
            "NaN or infinite",
            _set(KM0, "id", 0, INF),
        ),
        _M("intrinsic_dimension_zero", "checkpoint_metrics", "id", KM0, "not > 0", _set(KM0, "id", 0, 0.0)),
        _M("n_images_zero", "checkpoint_metrics", "n_images", KM0, "not > 0", _set(KM0, "n_images", 0, 0)),
        _M(
            "n_duplicates_negative",
            "checkpoint_metrics",
            "n_duplicates",
            KM0,
            "not >= 0",
            _set(KM0, "n_duplicates", 0, -1),
        ),
        _M(
            "images_unknown_split",
            "images",
            "split",
            IMAGES,
            "not one of",
            _set(IMAGES, "split", 4, "holdout"),
        ),
        _M("images_negative_label", "images", "label", IMAGES, "not >= 0", _set(IMAGES, "label", 8, -1)),
        _M(
            "images_label_without_name",
            "images",
            "label_name",
            IMAGES,
            "null where label is not null",
            _set(IMAGES, "label_name", 9, None),
        ),
        _M("images_zero_width", "images", "width", IMAGES, "not > 0", _set(IMAGES, "width", 10, 0)),
        _M(
            "checkpoints_zero_feature_dim",
            "checkpoints",
            "feature_dim",
            CKPTS,
            "not > 0",
            _set(CKPTS, "feature_dim", 0, 0),
        ),
        _M(
            "checkpoints_negative_epoch",
            "checkpoints",
            "epoch",
            CKPTS,
            "not >= 0",
            _set(CKPTS, "epoch", 1, -3),
        ),
        _M("projection_nan", "projections", "x", PJ0, "NaN or infinite", _set(PJ0, "x", 11, NAN)),
        _M(
            "pearson_above_one",
            "predictor_correlations",
            "pearson",
            PCORR,
            "outside [-1, 1]",
            _set(PCORR, "pearson", 0, 1.5),
        ),
        _M(
            "kendall_p_negative",
            "predictor_correlations",
            "kendall_p",
            PCORR,
            "outside [0, 1]",
            _set(PCORR, "kendall_p", 1, -0.1),
        ),
        _M(
            "unknown_predictor",
            "predictor_correlations",
            "predictor",
            PCORR,
            "not one of",
            _set(PCORR, "predictor", 2, "vibes"),
        ),
        _M(
            "similarity_pair_unordered",
            "clustering_similarity",
            "checkpoint_a",
            SIM,
            "not < checkpoint_b",
            _swap_pair(SIM),
        ),
        _M("links_zero_count", "cluster_links", "count", LINKS, "not > 0", _set(LINKS, "count", 0, 0)),
        _M(
            "links_count_above_size",
            "cluster_links",
            "count",
            LINKS,
            "greater than size_a",
            _count_above_size(LINKS),
        ),
        _M(
            "analysis_runs_negative_seconds",
            "analysis_runs",
            "seconds",
            RUNS,
            "not >= 0",
            _then(_fixed_runs_name, _set(RUNS, "seconds", 0, -1.0)),
        ),
        # embeddings (deep)
        _M(
            "embedding_wrong_length",
            "features",
            "embedding",
            F0,
            "feature_dim=8",
            _embeddings(F0, lambda e: e.__setitem__(2, e[2][:7])),
            deep_only=True,
        ),
        _M(
            "embedding_nan",
            "features",
            "embedding",
            F0,
            "NaN or infinity",
            _embeddings(F0, lambda e: e[6].__setitem__(1, NAN)),
            deep_only=True,
        ),
        _M(
            "embedding_null",
            "features",
            "embedding",
            F0,
            "null embedding",
            _embeddings(F0, lambda e: e.__setitem__(4, None)),
            deep_only=True,
        ),
        # files named by tables
        _M(
            "thumbnail_missing",
            "images",
            "thumbnail",
            IMAGES,
            "do not exist",
            _unlink("thumbnails/toy/0007.png"),
        ),
        _M(
            "thumbnail_absolute",
            "images",
            "thumbnail",
            IMAGES,
            "not relative",
            _set(IMAGES, "thumbnail", 1, "/etc/passwd"),
        ),
        _M(
            "thumbnail_leaves_workspace",
            "images",
            "thumbnail",
            IMAGES,
            "leave the workspace",
            _set(IMAGES, "thumbnail", 1, "thumbnails/../../outside.png"),
        ),
        _M(
            "thumbnail_is_a_folder",
            "images",
            "thumbnail",
            IMAGES,
            "not files",
            _set(IMAGES, "thumbnail", 2, "thumbnails/toy"),
        ),
        _M(
            "thumbnail_symlink_outside",
            "images",
            "thumbnail",
            IMAGES,
            "symlinks leading outside",
            _symlink_thumbnail_outside,
        ),
        _M(
            "thumbnail_folder_symlink_outside",
            "images",
            "thumbnail",
            IMAGES,
            "leave the workspace",
            _symlink_folder_outside,
        ),
        _M(
            "thumbnail_oversized",
            "images",
            "thumbnail",
            IMAGES,
            "thumbnails/toy/0004.png has 12000 x 12000 = 144,000,000 pixels",
            lambda ws: _write_bytes(ws.root / "thumbnails/toy/0004.png", png_header(12000, 12000)),
            deep_only=True,
        ),
        _M(
            "thumbnail_not_an_image",
            "images",
            "thumbnail",
            IMAGES,
            "does not decode",
            lambda ws: _write_bytes(ws.root / "thumbnails/toy/0003.png", b"not a png"),
            deep_only=True,
        ),
        _M(
            "vl_model_config_missing",
            "vl_models",
            "config",
            "vl_models.parquet",
            "do not exist",
            _vl_models("models/toy.json"),
        ),
        _M(
            "checkpoint_weights_outside",
            "checkpoints",
            "weights",
            CKPTS,
            "leave the workspace",
            _edit(CKPTS, lambda t: _put(t, "weights", ["../w.pt", None, None], pa.string())),
        ),
        # CompMap tables, added broken
        _M(
            "primitives_unknown_normalize",
            "primitives",
            "normalize",
            "primitives/dataset=toy/part-0.parquet",
            "not one of softmax, raw",
            _compmap("primitives", {**_PRIM, "normalize": "sigmoid"}, dataset="toy"),
        ),
        _M(
            "label_primitives_value_above_1",
            "label_primitives",
            "value",
            "label_primitives/dataset=toy/part-0.parquet",
            "outside [0, 1]",
            _compmap(
                "label_primitives",
                {"label": 0, "label_name": "red", "primitive": "color:red", "value": 1.5},
                dataset="toy",
            ),
        ),
        _M(
            "image_primitives_unknown_image",
            "image_primitives",
            "image_id",
            "image_primitives/dataset=toy/part-0.parquet",
            "not found in images.image_id",
            _compmap(
                "image_primitives",
                {"image_id": "toy-9999", "primitive": "color:red", "value": 1.0},
                dataset="toy",
            ),
        ),
        _M(
            "compmap_activations_nan",
            "compmap_activations",
            "activation",
            "compmap_activations/vl_model=vl-toy/part-0.parquet",
            "NaN or infinite",
            _compmap(
                "compmap_activations",
                {"image_id": "toy-0000", "primitive": "color:red", "logit": 20.0, "activation": NAN},
                vl_model="vl-toy",
            ),
        ),
        _M(
            "compmap_weights_unknown_model",
            "compmap_weights",
            "model",
            "compmap_weights/vl_model=vl-toy/part-0.parquet",
            "not one of prim, oracle",
            _compmap(
                "compmap_weights",
                {"model": "clip", "label": 0, "primitive": "color:red", "weight": 0.3},
                vl_model="vl-toy",
            ),
        ),
        _M(
            "compmap_scores_lo_above_value",
            "compmap_scores",
            "lo",
            "compmap_scores/vl_model=vl-toy/part-0.parquet",
            "greater than value",
            _compmap("compmap_scores", {**_SCORE, "lo": 0.55}, vl_model="vl-toy"),
        ),
        # Similarity tables, added broken
        _M(
            "similarity_trial_unknown_query",
            "similarity_trials",
            "query",
            "similarity_trials/dataset=toy/part-broken.parquet",
            "not found in images.image_id",
            _similarity("similarity_trials", {**_TRIAL, "query": "toy-9999"}, "part-broken.parquet"),
        ),
        _M(
            "psych_embedding_mu_nan",
            "psych_embedding",
            "mu",
            "psych_embedding/dataset=toy/part-0.parquet",
            "1 value(s) hold NaN or infinity",
            _similarity(
                "psych_embedding",
                {"member": 0, "image_id": "toy-0000", "mu": [0.0, NAN], "sigma": [0.1, 0.1]},
            ),
        ),
        _M(
            "psych_embedding_sigma_infinite",
            "psych_embedding",
            "sigma",
            "psych_embedding/dataset=toy/part-0.parquet",
            "hold NaN or infinity",
            _similarity(
                "psych_embedding",
                {"member": 0, "image_id": "toy-0000", "mu": [0.0, 1.0], "sigma": [INF, 0.1]},
            ),
        ),
        _M(
            "psych_embedding_negative_member",
            "psych_embedding",
            "member",
            "psych_embedding/dataset=toy/part-0.parquet",
            "not >= 0",
            _similarity(
                "psych_embedding",
                {"member": -1, "image_id": "toy-0000", "mu": [0.0, 1.0], "sigma": [0.1, 0.1]},
            ),
        ),
        _M(
            "similarity_fit_accuracy_above_1",
            "similarity_fit",
            "heldout_accuracy",
            "similarity_fit/dataset=toy/part-0.parquet",
            "outside [0, 1]",
            _similarity("similarity_fit", {**_FIT, "heldout_accuracy": 1.5}),
        ),
        _M(
            "similarity_convergence_agreement_above_1",
            "similarity_convergence",
            "within_agreement",
            "similarity_convergence/dataset=toy/part-0.parquet",
            "outside [0, 1]",
            _set("similarity_convergence/dataset=toy/part-0.parquet", "within_agreement", 1, 1.2),
        ),
        _M(
            "baseline_scores_rotation_above_1",
            "baseline_scores",
            "rotation",
            "baseline_scores/checkpoint_id=ck0/part-0.parquet",
            "outside [0, 1]",
            _set("baseline_scores/checkpoint_id=ck0/part-0.parquet", "rotation", 0, 1.5),
        ),
        _M(
            "baseline_scores_positive_entropy",
            "baseline_scores",
            "source_neg_entropy",
            "baseline_scores/checkpoint_id=ck1/part-0.parquet",
            "not <= 0",
            _set("baseline_scores/checkpoint_id=ck1/part-0.parquet", "source_neg_entropy", 0, 0.3),
        ),
        _M(
            "transfer_scores_accuracy_above_1",
            "transfer_scores",
            "accuracy",
            "transfer_scores/checkpoint_id=ck0/part-0.parquet",
            "outside [0, 1]",
            _compmap(
                "transfer_scores",
                {
                    "target_dataset": "toy",
                    "accuracy": 1.5,
                    "target_neg_entropy": -0.5,
                    "n_train": 3,
                    "n_test": 3,
                },
                checkpoint_id="ck0",
            ),
        ),
        _M(
            "transfer_correlations_unknown_predictor",
            "transfer_correlations",
            "predictor",
            "transfer_correlations/dataset=toy/part-0.parquet",
            "not one of",
            _compmap(
                "transfer_correlations",
                {"target_dataset": "toy", "k": 4, "predictor": "astrology", "n_checkpoints": 3},
                dataset="toy",
            ),
        ),
        _M(
            "human_alignment_unknown_metric",
            "human_alignment",
            "metric",
            "human_alignment/dataset=toy/part-0.parquet",
            "not one of triplet_accuracy, rsa",
            _similarity("human_alignment", {**_ALIGN, "metric": "auc"}),
        ),
        # Concept-quality tables (tests/concepts_factory.py), broken
        _M(
            "concept_labels_unknown_image",
            "concept_labels",
            "image_id",
            "concept_labels.parquet",
            "not found in images.image_id",
            _set("concept_labels.parquet", "image_id", 0, "toy-9999"),
        ),
        _M(
            "concept_labels_negative_value",
            "concept_labels",
            "value",
            "concept_labels.parquet",
            "not >= 0",
            _set("concept_labels.parquet", "value", 2, -1),
        ),
        _M(
            "concept_datasets_unknown_dependency",
            "concept_datasets",
            "dependency",
            "concept_datasets.parquet",
            "not one of delta, lambda",
            _set("concept_datasets.parquet", "dependency", 0, "sigma"),
        ),
        _M(
            "checkpoint_concept_dim_mismatch",
            "checkpoints",
            "concept_dim",
            CKPTS,
            "differ from feature_dim",
            _set(CKPTS, "concept_dim", 0, 3),
        ),
        _M(
            "checkpoint_concept_dim_without_names",
            "checkpoints",
            "concept_names",
            CKPTS,
            "null where concept_dim is not null",
            _set(CKPTS, "concept_dim", 1, 2),
        ),
        _M(
            "oracle_purity_auc_negative",
            "oracle_purity",
            "auc",
            "oracle_purity/dataset=toy/part-0.parquet",
            "outside [0, 1]",
            _set("oracle_purity/dataset=toy/part-0.parquet", "auc", 1, -0.1),
        ),
        _M(
            "purity_auc_above_one",
            "purity_matrices",
            "auc",
            "purity_matrices/checkpoint_id=ck0/part-0.parquet",
            "outside [0, 1]",
            _set("purity_matrices/checkpoint_id=ck0/part-0.parquet", "auc", 0, 1.5),
        ),
        _M(
            "concept_scores_ois_nan",
            "concept_scores",
            "ois",
            "concept_scores/checkpoint_id=ck1/part-0.parquet",
            "NaN or infinite",
            _set("concept_scores/checkpoint_id=ck1/part-0.parquet", "ois", 0, NAN),
        ),
        _M(
            "concept_niches_corr_above_one",
            "concept_niches",
            "corr",
            "concept_niches/checkpoint_id=ck2/part-0.parquet",
            "outside [0, 1]",
            _set("concept_niches/checkpoint_id=ck2/part-0.parquet", "corr", 3, 1.2),
        ),
        _M(
            "niche_scores_negative_size",
            "niche_scores",
            "niche_size",
            "niche_scores/checkpoint_id=ck0/part-0.parquet",
            "not >= 0",
            _set("niche_scores/checkpoint_id=ck0/part-0.parquet", "niche_size", 0, -1),
        ),
        # Human studies (conceptlens study export), added broken
        _M(
            "study_answer_unknown_image",
            "study_answers",
            "positive",
            "study_answers/study_id=s1/part-broken.parquet",
            "not found in images.image_id",
            _study("study_answers", {**_STUDY_ANSWER, "positive": "toy-9999"}),
        ),
        _M(
            "study_answer_unknown_side",
            "study_answers",
            "chosen_side",
            "study_answers/study_id=s1/part-broken.parquet",
            "not one of left, right",
            _study("study_answers", {**_STUDY_ANSWER, "chosen_side": "middle"}),
        ),
        _M(
            "study_participant_failed_more_catch_than_answered",
            "study_participants",
            "catch_failed",
            "study_participants/study_id=s1/part-broken.parquet",
            "greater than catch_answers",
            _study("study_participants", {**_STUDY_PARTICIPANT, "catch_failed": 3}),
        ),
        _M(
            "study_cluster_lo_above_accuracy",
            "study_clusters",
            "lo",
            "study_clusters/study_id=s1/part-broken.parquet",
            "greater than accuracy",
            _study("study_clusters", {**_STUDY_CLUSTER, "lo": 0.8}),
        ),
        _M(
            "study_summary_alpha_above_one",
            "study_summary",
            "alpha",
            "study_summary/study_id=s1/part-broken.parquet",
            "outside [-1, 1]",
            _study("study_summary", {**_STUDY_SUMMARY, "alpha": 1.5}),
        ),
        # the training analyses' tables (tests/training_factory.py)
        _M(
            "concept_event_kind_unknown",
            "concept_events",
            "kind",
            EVENTS,
            "not one of",
            _set(EVENTS, "kind", 0, "explosion"),
        ),
        _M(
            "learning_curve_auc_above_one",
            "learning_curves",
            "auc",
            CURVES,
            "outside [0, 1]",
            _set(CURVES, "auc", 1, 1.5),
        ),
        _M(
            "aligned_drift_negative",
            "aligned_projections",
            "drift",
            ALIGNED,
            "not >= 0",
            _set(ALIGNED, "drift", 60, -0.5),
        ),
        # a saved selection (format 2.3) whose count says 3 images of its 2 ids
        _M(
            "selection_count_not_its_ids",
            "selections",
            "n_images",
            SELECTION,
            "differ from the number of image_ids",
            _selection(n_images=3),
        ),
        # a label hierarchy (format 2.4) without the label blue; one that is a cycle
        _M(
            "hierarchy_label_not_a_node",
            "label_hierarchy",
            "node",
            HIERARCHY,
            "images.label_name that is not a node of the hierarchy: 'blue'",
            _hierarchy(("red", None), ("green", None)),
        ),
        _M(
            "hierarchy_cycle",
            "label_hierarchy",
            "parent",
            HIERARCHY,
            "cycle(s) 'red' -> 'blue' -> 'green' -> 'red'",
            _hierarchy(("red", "blue"), ("blue", "green"), ("green", "red")),
        ),
    ]
}


# ---- cases derived from the declarations ---------------------------------------------------
# A new analysis' table is broken here without an entry above: for each rule its columns
# declare (a bound, `positive`, allowed values, not null, a reference, finite), the first
# column that declares it gets a value that breaks it in row 0 of the table's first file in
# the factory workspace (which holds every table an analysis writes: harness/factory.py makes
# a new table's rows from its declaration), with the words `validate` must say. The cases
# above stay: they hold what no declaration says (files, folders, types, rules between
# tables).
def _analysis_tables() -> list[schema.Table]:
    """Every table an analysis of the registry writes, in the registry's order."""
    from conceptlens.analysis import registered

    names = dict.fromkeys(t for a in registered() for t in a.writes)
    return [schema.TABLES_BY_NAME[n] for n in names]


@functools.cache
def _factory_files() -> dict[str, list[str]]:
    """The files of each table of the default factory workspace, relative to it (built once
    per process, in a folder removed when it ends)."""
    from harness.factory import make_workspace

    folder = tempfile.mkdtemp(prefix="malformed-")
    atexit.register(shutil.rmtree, folder, True)
    ws = make_workspace(Path(folder) / "ws", derived=True)
    return {t.name: sorted(str(f.relative_to(ws.root)) for f in ws.files(t.name)) for t in schema.TABLES}


def first_file(table: str) -> str:
    files = _factory_files()[table]
    assert files, (
        f"the factory workspace has no file of {table}: harness/factory.py writes every analysis table"
    )
    return files[0]


def _fill_if_empty(ws: Workspace, table: schema.Table, rel: str) -> None:
    """A file with no row to break (the factory's transfer_scores: one dataset, nothing to
    transfer to) gets valid rows made from the declaration first."""
    if pq.read_metadata(ws.root / rel).num_rows:
        return
    from harness.factory import declared_rows

    folders = Path(rel).parts[1:-1]  # table/col=value/.../part-0.parquet
    part = dict(f.split("=", 1) for f in folders)
    part = {c: int(v) if table.column(c).type == schema.INT else v for c, v in part.items()}
    _write_table(ws.root / rel, declared_rows(ws, table, part))


def _bounds_words(lo, hi) -> str:
    if lo is not None and hi is not None:
        return f"outside [{lo:g}, {hi:g}]"
    return f"not >= {lo:g}" if lo is not None else f"not <= {hi:g}"


def _breaking(table: schema.Table, col: schema.Column) -> list[tuple[str, object, str]]:
    """(rule, a value that breaks it, the words validate reports) for each rule of `col`."""
    out = []
    scalar = col.type in (schema.INT, schema.FLOAT, schema.STRING)
    as_type = int if col.type == schema.INT else float
    if col.bounds and col.type in (schema.INT, schema.FLOAT):
        lo, hi = col.bounds
        out.append(("bounds", as_type(hi + 1 if hi is not None else lo - 1), _bounds_words(lo, hi)))
    if col.positive and col.type in (schema.INT, schema.FLOAT):
        out.append(("positive", as_type(-1), "not > 0"))
    if col.allowed and col.type == schema.STRING:
        out.append(("allowed", "not-an-allowed-value", f"not one of {', '.join(col.allowed)}"))
    if not col.nullable and scalar:
        out.append(("null", None, "null value(s) in a non-nullable column"))
    if col.references and col.type == schema.STRING and not col.pseudo_references:
        out.append(("references", "no-such-value", f"not found in {col.references}"))
    if col.finite and col.type == schema.FLOAT:
        out.append(("finite", float("nan"), "are NaN or infinite"))
    return out


def derived_malformations() -> list[Malformation]:
    """One case per table an analysis writes and rule kind its columns declare."""
    out = []
    for table in _analysis_tables():
        done = set()
        for col in table.file_columns:
            if not col.required:
                continue  # an optional column may be absent from the factory's file
            for rule, value, words in _breaking(table, col):
                if rule in done:
                    continue
                done.add(rule)

                def at(table=table.name) -> str:
                    return first_file(table)

                def apply(ws, at=at, col=col.name, value=value, table=table) -> None:
                    _fill_if_empty(ws, table, at())
                    _set(at(), col, 0, value)(ws)

                out.append(_M(f"{table.name}-{col.name}-{rule}", table.name, col.name, at, words, apply))
    return out


MALFORMATIONS.update((m.name, m) for m in derived_malformations())


if __name__ == "__main__":  # list the registry
    for m in MALFORMATIONS.values():
        print(f"{m.name:40} {m.table}.{m.column or '*'}  {m.file}", file=sys.stdout)
