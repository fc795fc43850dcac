"""`conceptlens import captions`: one caption per image written by your own captioner.

A CSV, TSV or Parquet file with columns `image_id` and `text` (`--id-column`,
`--text-column` for other names). An id is an image id, or a path (or its end) of an
image, as for features. The rows become captions of captioner `--captioner NAME`, which
the class-level captions (laina2020 Eq. 4) then choose from; rows of the same captioner
for the same images are replaced, every other row is kept.
"""

from __future__ import annotations

from pathlib import Path

from .features import dataset_rows, match_ids, raise_reasons
from .images import ImportInputError, open_workspace
from .manifest import read_table


def import_captions(
    workspace, captioner: str, file, *, dataset=None, id_column="image_id", text_column="text"
) -> int:
    """Check every row, then upsert them into captions.parquet; returns how many."""
    import pyarrow as pa

    ws = open_workspace(workspace)
    if not captioner or not captioner.strip():
        raise ValueError("--captioner must name the captioner (e.g. my-blip-finetune)")
    path = Path(file).expanduser()
    if not path.is_file():
        raise ImportInputError(f"{path}: file not found")
    df, where = read_table(path)
    for col, flag in ((id_column, "--id-column"), (text_column, "--text-column")):
        if col not in df.columns:
            raise ImportInputError(
                f"{path}: no column {col!r} ({flag}); columns: {', '.join(map(str, df.columns))}"
            )
    if df.empty:
        raise ImportInputError(f"{path}: no rows")
    keys = ["" if v is None or v != v else str(v).strip() for v in df[id_column].tolist()]
    texts = df[text_column].tolist()
    images = dataset_rows(ws, dataset)
    ids, why = match_ids(images, keys, where)
    first: dict[str, int] = {}
    for i, (iid, text) in enumerate(zip(ids, texts)):
        if not isinstance(text, str) or not text.strip():
            why.append(f"{where(i)}: column {text_column} is empty")
        if iid is not None and iid in first:
            why.append(
                f"{where(i)}: a second caption for image {iid!r} (also {where(first[iid])}); "
                "a captioner has one caption per image"
            )
        first.setdefault(iid, i)
    raise_reasons(why)
    table = pa.table(
        {
            "image_id": pa.array(ids, pa.string()),
            "captioner": pa.array([captioner] * len(ids), pa.string()),
            "text": pa.array([str(t).strip() for t in texts], pa.string()),
        }
    )
    ws.upsert("captions", table, {"captioner": captioner, "image_id": ids})
    return len(ids)
