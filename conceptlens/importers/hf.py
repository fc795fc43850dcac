"""A Hugging Face dataset saved to disk (`Dataset.save_to_disk` / `DatasetDict.save_to_disk`),
read with `datasets.load_from_disk` (the `pipeline` extra installs `datasets`).

The image column is the one `Image` feature (or `--image-column`); the label column the one
`ClassLabel` feature (or `--label-column`; an integer column's names are its numbers, a
text column is numbered in sorted order). A `ClassLabel` keeps the dataset's own indices
and names, so labels match models trained on it; -1 (no label) becomes null. Splits of a
DatasetDict: train, validation (-> val), test. Every other column of plain values becomes
a factor column. An image stored as bytes in the dataset has no file to extract from:
its bytes are saved unchanged under `sources/DATASET/` in the workspace.
"""

from __future__ import annotations

from pathlib import Path

from .images import CORE, SPLIT_NAMES, ImportInputError, Item, Listing


def _datasets():
    try:
        import datasets
    except ImportError:
        raise ImportInputError(
            "importing a Hugging Face dataset needs the `datasets` package: "
            "pip install datasets (or the `pipeline` extra)"
        ) from None
    return datasets


def _pick(features, kind, given: str | None, what: str, where: str) -> str | None:
    if given is not None:
        if given not in features:
            raise ImportInputError(f"{where}: no column {given!r} ({what}); columns: {', '.join(features)}")
        return given
    found = [n for n, f in features.items() if isinstance(f, kind)]
    if len(found) > 1:
        raise ImportInputError(
            f"{where}: several {kind.__name__} columns ({', '.join(found)}); pass --{what}"
        )
    return found[0] if found else None


def scan(source, image_column=None, label_column=None, unlabeled=False, split=None) -> Listing:
    ds_mod = _datasets()
    folder = Path(source).expanduser()
    try:
        loaded = ds_mod.load_from_disk(str(folder))
    except (FileNotFoundError, ValueError, OSError) as e:
        raise ImportInputError(f"{folder}: not a dataset saved by save_to_disk ({e})") from None
    if isinstance(loaded, ds_mod.DatasetDict):
        bad = [s for s in loaded if s.lower() not in SPLIT_NAMES]
        if bad:
            raise ImportInputError(f"{folder}: split(s) {', '.join(bad)} are not train, validation or test")
        if split is not None:
            raise ImportInputError(f"{folder}: the dataset has its own splits; drop --split")
        parts = [(s, loaded[s], SPLIT_NAMES[s.lower()]) for s in loaded]
    else:
        parts = [(None, loaded, None)]
    items, notes = [], []
    for name, ds, split_name in parts:
        where = f"{folder}" + (f" split {name}" if name else "")
        feats = ds.features
        img = _pick(feats, ds_mod.Image, image_column, "image-column", where)
        if img is None:
            raise ImportInputError(f"{where}: no Image column; pass --image-column")
        lab = None if unlabeled else _pick(feats, ds_mod.ClassLabel, label_column, "label-column", where)
        if lab is None and not unlabeled:
            raise ImportInputError(f"{where}: no ClassLabel column; pass --label-column, or --unlabeled")
        plain = [n for n, f in feats.items() if n not in (img, lab) and isinstance(f, ds_mod.Value)]
        kept = [n for n in plain if n not in CORE]
        if len(kept) < len(plain):
            notes.append(
                f"{where}: column(s) {', '.join(sorted(set(plain) - set(kept)))} not kept "
                "(their names are set by the import)"
            )
        cols = [c for c in (lab, *kept) if c]
        df = ds.select_columns(cols).to_pandas() if cols else None
        n = len(ds)
        labels, label_names = _labels(df, n, lab, feats.get(lab), ds_mod, where)
        factors = df[kept].to_dict("records") if kept else [{}] * n
        width = max(6, len(str(n)))
        for i in range(n):
            key = f"{name}/{i:0{width}d}" if name else f"{i:0{width}d}"
            items.append(
                Item(
                    key=key,
                    where=f"{where} row {i}",
                    hf=(str(folder), name, i, img),
                    label=labels[i],
                    label_name=label_names[i],
                    split=split_name,
                    factors={k: _plain(v) for k, v in factors[i].items()},
                )
            )
    return Listing(items, str(folder), "hf", notes)


def _plain(v):
    import pandas as pd

    if v is None or pd.isna(v):
        return None
    return v.item() if hasattr(v, "item") else v


def _labels(df, n, col, feature, ds_mod, where):
    if col is None:
        return [None] * n, [None] * n
    values = [_plain(v) for v in df[col]]
    if isinstance(feature, ds_mod.ClassLabel):
        names = feature.names
        labels = [None if v is None or v < 0 else int(v) for v in values]
        return labels, [None if v is None else names[v] for v in labels]
    if all(v is None or isinstance(v, int) for v in values):
        bad = next((i for i, v in enumerate(values) if v is not None and v < 0), None)
        if bad is not None:
            raise ImportInputError(f"{where} row {bad}: column {col}: {values[bad]} is not a label >= 0")
        return values, [None if v is None else str(v) for v in values]
    order = {s: i for i, s in enumerate(sorted({str(v) for v in values if v is not None}))}
    return (
        [None if v is None else order[str(v)] for v in values],
        [None if v is None else str(v) for v in values],
    )
