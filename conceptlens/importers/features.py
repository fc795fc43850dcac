"""`conceptlens import features`: embeddings computed elsewhere become a checkpoint.

One file holds the vectors (N x D) and, except for .npy and a bare torch tensor, the ids:

- `.npy`: the array; ids from `--ids FILE` (a .txt with one id per line, a .csv with an
  `image_id` column, or a .npy of strings);
- `.npz`, `.h5`/`.hdf5`, `.pt`/`.pth` (a dict of tensors/lists, or a tensor + `--ids`): the
  arrays named `--key` and `--ids-key`, else `embeddings`/`features` and `ids`/`image_ids`;
- `.parquet`: an `image_id` column and an `embedding` list column, or one numeric column
  per dimension.

An id is an image id of the dataset, or a path (or its end, extension optional) of one of
its images, e.g. `cat/001.jpg` or `ILSVRC2012_val_00000001`. Every image of the dataset
needs exactly one vector; all is checked before anything is written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..extract import features_table, upsert_checkpoint
from ..workspace import Workspace, WorkspaceError, check_id, now_iso
from .images import ImportInputError, open_workspace

VECTOR_KEYS = ("embeddings", "embedding", "features", "feats", "X")
ID_KEYS = ("ids", "image_ids", "image_id", "keys", "paths", "filenames")


def _strings(values) -> list[str]:
    """Ids as text (HDF5 and numpy keep strings as bytes)."""
    out = []
    for v in values:
        v = v.item() if isinstance(v, np.generic) else v
        out.append(v.decode("utf-8") if isinstance(v, bytes) else str(v))
    return out


def read_ids(path: Path) -> list[str]:
    """An id list: .txt (one per line), .csv (column image_id, else the first), .npy."""
    if not path.is_file():
        raise ImportInputError(f"--ids {path}: file not found")
    if path.suffix == ".npy":
        arr = np.load(path, allow_pickle=False)
        return _strings(arr.ravel().tolist())
    if path.suffix == ".csv":
        import pandas as pd

        df = pd.read_csv(path, dtype=str, keep_default_na=False)
        return df["image_id" if "image_id" in df.columns else df.columns[0]].tolist()
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _pick(arrays: dict, given: str | None, names, what: str, path: Path, flag: str):
    if given is not None:
        if given not in arrays:
            raise ImportInputError(f"{path}: no array {given!r} ({flag}); it holds {', '.join(arrays)}")
        return arrays[given]
    for n in names:
        if n in arrays:
            return arrays[n]
    return None if what == "ids" else _only_matrix(arrays, path, flag)


def _only_matrix(arrays: dict, path: Path, flag: str):
    mats = [k for k, v in arrays.items() if getattr(v, "ndim", 0) == 2]
    if len(mats) != 1:
        raise ImportInputError(
            f"{path}: cannot tell which array holds the vectors ({', '.join(arrays)}); pass {flag}"
        )
    return arrays[mats[0]]


def read_vectors(path, ids_file=None, key=None, ids_key=None) -> tuple[list[str] | None, np.ndarray]:
    """(ids or None, vectors) from any of the supported files."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ImportInputError(f"{path}: file not found")
    suffix = path.suffix.lower()
    ids = None
    try:
        if suffix == ".npy":
            X = np.load(path, allow_pickle=False)
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
            X = _pick(arrays, key, VECTOR_KEYS, "vectors", path, "--key")
            ids = _pick(arrays, ids_key, ID_KEYS, "ids", path, "--ids-key")
        elif suffix in (".h5", ".hdf5"):
            arrays = _read_h5(path)
            X = _pick(arrays, key, VECTOR_KEYS, "vectors", path, "--key")
            ids = _pick(arrays, ids_key, ID_KEYS, "ids", path, "--ids-key")
        elif suffix in (".pt", ".pth"):
            X, ids = _read_torch(path, key, ids_key)
        elif suffix == ".parquet":
            X, ids = _read_parquet(path, key, ids_key or "image_id")
        else:
            raise ImportInputError(f"{path}: unknown format; use .npy, .npz, .h5, .pt or .parquet")
    except (OSError, ValueError) as e:
        raise ImportInputError(f"{path}: cannot be read ({str(e).splitlines()[0]})") from None
    if ids is not None:
        ids = _strings(ids if isinstance(ids, list) else np.asarray(ids).ravel().tolist())
    if ids_file is not None:
        if ids is not None:
            raise ImportInputError(f"{path} holds its own ids: drop --ids")
        ids = read_ids(Path(ids_file).expanduser())
    X = np.asarray(X)
    if X.ndim != 2 or not np.issubdtype(X.dtype, np.number) or X.shape[1] == 0:
        raise ImportInputError(
            f"{path}: the vectors must be a numeric N x D array, got shape {X.shape} of {X.dtype}"
        )
    return ids, X.astype(np.float32, copy=False)


def _read_h5(path: Path) -> dict:
    try:
        import h5py
    except ImportError:
        raise ImportInputError(
            "reading HDF5 needs the `h5py` package: pip install h5py (or the `pipeline` extra)"
        ) from None
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(
            lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None
        )
    return out


def _read_torch(path: Path, key, ids_key):
    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)  # never runs pickled code
    except Exception as e:  # torch raises several types for a foreign or unsafe file
        raise ImportInputError(
            f"{path}: not a tensor or dict of tensors torch.load can read safely "
            f"({str(e).splitlines()[0][:200]})"
        ) from None
    if isinstance(obj, torch.Tensor):
        return obj.float().numpy(), None
    if not isinstance(obj, dict):
        raise ImportInputError(f"{path}: holds a {type(obj).__name__}; expected a tensor or a dict")
    arrays = {k: v.float().numpy() if isinstance(v, torch.Tensor) else v for k, v in obj.items()}
    X = _pick(arrays, key, VECTOR_KEYS, "vectors", path, "--key")
    ids = _pick(arrays, ids_key, ID_KEYS, "ids", path, "--ids-key")
    return X, (list(ids) if ids is not None else None)


def _read_parquet(path: Path, key, id_col):
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    if id_col not in t.column_names:
        raise ImportInputError(
            f"{path}: no column {id_col!r} (--ids-key); columns: {', '.join(t.column_names[:10])}"
        )
    ids = t[id_col].cast(pa.string()).to_pylist()
    lists = [
        n
        for n in t.column_names
        if pa.types.is_list(t.schema.field(n).type)
        or pa.types.is_large_list(t.schema.field(n).type)
        or pa.types.is_fixed_size_list(t.schema.field(n).type)
    ]
    col = key or ("embedding" if "embedding" in lists else (lists[0] if len(lists) == 1 else None))
    if col is not None:
        if col not in t.column_names:
            raise ImportInputError(f"{path}: no column {col!r} (--key)")
        c = t[col].combine_chunks()
        lens = pc.list_value_length(c).to_numpy(zero_copy_only=False)
        if len(lens) and (lens != lens[0]).any():
            row = int(np.flatnonzero(lens != lens[0])[0])
            raise ImportInputError(
                f"{path} row {row + 1}: column {col} has {lens[row]} values, row 1 has {lens[0]}"
            )
        flat = pc.list_flatten(c).to_numpy(zero_copy_only=False)
        return flat.reshape(len(ids), -1 if len(ids) else 0), ids
    nums = [
        n
        for n in t.column_names
        if n != id_col
        and (pa.types.is_floating(t.schema.field(n).type) or pa.types.is_integer(t.schema.field(n).type))
    ]
    if not nums:
        raise ImportInputError(f"{path}: no list column and no numeric columns hold vectors")
    return np.column_stack([t[n].to_numpy(zero_copy_only=False) for n in nums]), ids


# ---- matching ids to the workspace's images -----------------------------------------
_SHARED = object()  # a path ending that several images share


def _path_keys(p: str):
    parts = Path(p).parts
    for n in range(1, len(parts) + 1):
        tail = parts[-n:]
        yield tail
        yield tail[:-1] + (Path(tail[-1]).stem,)


def match_ids(images, keys: list[str], where) -> tuple[list[str | None], list[str]]:
    """Each key's image id (None when unknown or ambiguous), and the reasons for the Nones.

    `images`: rows of images.parquet (image_id, thumbnail, source_path if present). A key is
    an image id, or the end of an image's source path (or thumbnail), extension optional.
    """
    known = {r["image_id"] for r in images}
    index: dict = {}
    for r in images:
        for k in set(_path_keys(r.get("source_path") or r["thumbnail"])):
            index[k] = _SHARED if k in index else r["image_id"]
    out, why = [], []
    for i, k in enumerate(keys):
        hit = k if k in known else index.get(Path(k).parts) if k else None
        if hit is _SHARED:
            why.append(f"{where(i)}: {k!r} is the end of several images' paths; use image ids")
        elif hit is None:
            why.append(f"{where(i)}: {k!r} is not an image of the dataset (neither an id nor a path)")
        out.append(hit if isinstance(hit, str) else None)
    return out, why


def dataset_rows(ws: Workspace, dataset: str | None) -> list[dict]:
    import pyarrow.parquet as pq

    path = ws.table_path("images")
    if not path.exists():
        raise WorkspaceError(f"{path}: no images yet; run `conceptlens import images` first")
    names = pq.read_schema(path).names
    cols = ["image_id", "dataset", "thumbnail"] + (["source_path"] if "source_path" in names else [])
    rows = pq.read_table(path, columns=cols).to_pylist()
    if dataset is None:
        return rows
    rows = [r for r in rows if r["dataset"] == dataset]
    if not rows:
        known = sorted({r["dataset"] for r in pq.read_table(path, columns=["dataset"]).to_pylist()})
        raise WorkspaceError(
            f"{path}: no images of dataset {dataset!r}; datasets: {', '.join(known) or 'none'}"
        )
    return rows


def raise_reasons(reasons: list[str]) -> None:
    """ImportInputError naming the first three of `reasons` (and how many more), if any."""
    if reasons:
        more = f" (and {len(reasons) - 3} more)" if len(reasons) > 3 else ""
        raise ImportInputError("; ".join(reasons[:3]) + more)


def import_features(
    workspace,
    dataset: str,
    checkpoint_id: str,
    file,
    *,
    ids=None,
    key=None,
    ids_key=None,
    model=None,
    method=None,
    epoch=None,
    run=None,
    replace=False,
) -> tuple[str, int, int]:
    """Check `file`'s vectors against the dataset's images, then write the checkpoint.

    Returns (checkpoint_id, number of images, feature_dim). Nothing is written on error.
    """
    ws = open_workspace(workspace)
    cid = check_id(checkpoint_id, "--checkpoint")
    if epoch is not None and epoch < 0:
        raise ValueError(f"--epoch must be >= 0, got {epoch}")
    images = dataset_rows(ws, dataset)
    _checkpoint_free(ws, cid, dataset, replace)
    path = Path(file).expanduser()
    keys, X = read_vectors(path, ids, key, ids_key)
    if keys is None:
        raise ImportInputError(f"{path} holds no ids: pass --ids FILE (one id per vector, in order)")
    src = Path(ids).expanduser() if ids is not None else path
    if len(keys) != len(X):
        raise ImportInputError(f"{src}: {len(keys)} ids but {path} has {len(X)} vectors")
    where = lambda i: f"{src} row {i + 1}"
    matched, why = match_ids(images, keys, where)
    raise_reasons(why)
    first: dict[str, int] = {}
    for i, iid in enumerate(matched):
        if iid in first:
            why.append(f"{where(i)}: image {iid!r} again (also row {first[iid] + 1})")
        first.setdefault(iid, i)
    raise_reasons(why)
    bad = np.flatnonzero(~np.isfinite(X).all(axis=1))
    if len(bad):
        raise ImportInputError(
            f"{path} row {bad[0] + 1} ({keys[bad[0]]!r}): NaN or infinite values ({len(bad)} row(s) in all)"
        )
    order = [r["image_id"] for r in images]
    lacking = [iid for iid in order if iid not in first]
    if lacking:
        raise ImportInputError(
            f"{path}: no vector for {len(lacking)} of the {len(order)} images of "
            f"dataset {dataset!r}, e.g. {lacking[:3]}"
        )
    X = X[[first[iid] for iid in order]]
    ws.write("features", features_table(order, X), checkpoint_id=cid)
    row = {
        "checkpoint_id": cid,
        "dataset": dataset,
        "model": model or path.stem,
        "method": method or "imported",
        "epoch": epoch,
        "feature_dim": int(X.shape[1]),
        "source": f"import:{path.name}",
        "run": run,
        "layer": None,
        "weights": None,
        "weights_sha256": None,
        "preprocessing": None,
        "created": now_iso(),
    }
    upsert_checkpoint(ws, row)
    return cid, len(order), int(X.shape[1])


def _checkpoint_free(ws: Workspace, cid: str, dataset: str, replace: bool) -> None:
    import pyarrow.parquet as pq

    path = ws.table_path("checkpoints")
    if not path.exists():
        return
    for r in pq.read_table(path, columns=["checkpoint_id", "dataset"]).to_pylist():
        if r["checkpoint_id"] != cid:
            continue
        if r["dataset"] != dataset:
            raise ImportInputError(
                f"{path}: checkpoint {cid!r} exists for dataset {r['dataset']!r}; choose another --checkpoint"
            )
        if not replace:
            raise ImportInputError(
                f"{path}: checkpoint {cid!r} exists; pass --replace to replace its features"
            )
