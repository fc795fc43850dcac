"""Concept scores of any selection of images on one checkpoint (issue 26), read through the
workspace's DuckDB views: the checkpoint's features, its dataset's labels and factor
columns. Only reads; the scores are computed by conceptlens.metrics.selection.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ..errors import ConceptLensError
from ..metrics import selection as S

IMAGE_CORE = {c.name for c in schema.CORE_BY_NAME["images"].columns}


class SelectionError(ConceptLensError, ValueError):
    """A selection that names nothing, or images the checkpoint does not have."""


def checkpoint_images(db, checkpoint: str) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """(image ids, features, their images.parquet rows aligned with them) of one checkpoint."""
    ds = db.query("SELECT dataset FROM checkpoints WHERE checkpoint_id = $c", {"c": checkpoint})
    if ds.empty:
        raise SelectionError(f"checkpoints.parquet has no checkpoint {checkpoint!r}")
    ids, X = db.features(checkpoint)
    if len(ids) == 0:
        raise SelectionError(f"checkpoint {checkpoint!r} has no features")
    meta = db.query("SELECT * FROM images WHERE dataset = $d", {"d": str(ds["dataset"].iloc[0])})
    meta = meta.drop_duplicates("image_id").set_index("image_id")
    missing = [i for i in ids if i not in meta.index]
    if missing:
        raise SelectionError(
            f"images.parquet lacks {len(missing)} image(s) of checkpoint {checkpoint!r}, e.g. {missing[0]!r}"
        )
    return np.asarray(ids), X, meta.loc[list(ids)].reset_index()


# A numeric factor with more distinct values than this is continuous: no purity, no histogram.
MAX_FACTOR_VALUES = 50


def factor_columns(meta: pd.DataFrame) -> list[str]:
    """The categorical factor columns of these images: every non-core column with a value,
    except numeric ones with more than MAX_FACTOR_VALUES distinct values."""
    out = []
    for c in meta.columns:
        s = meta[c]
        if c in IMAGE_CORE or not s.notna().any():
            continue
        numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
        if numeric and s.nunique() > MAX_FACTOR_VALUES:
            continue
        out.append(c)
    return out


def _codes(s: pd.Series) -> tuple[np.ndarray, dict]:
    codes, cats = pd.factorize(s.astype("string"), sort=True)
    return codes.astype(np.int64), {i: str(v) for i, v in enumerate(cats)}


def population(
    db, checkpoint: str, annotator: str = "factors"
) -> tuple[np.ndarray, pd.DataFrame, S.Population]:
    """(image ids, image rows, Population) of one checkpoint. annotator "factors": the proxy
    annotator sees the one-hot factors and label (as cluster_metrics' default); "none": no
    coherence."""
    from ..analysis.common import factor_matrix

    ids, X, meta = checkpoint_images(db, checkpoint)
    labels, names = _codes(meta["label"]) if "label" in meta else (np.full(len(ids), -1), {})
    if "label_name" in meta and meta["label_name"].notna().any():
        by_code = meta.assign(code=labels).dropna(subset=["label_name"]).drop_duplicates("code")
        names = {
            int(c): f"{names[int(c)]} {n}" for c, n in zip(by_code["code"], by_code["label_name"]) if c >= 0
        }
    factors, fnames = {}, {}
    for c in factor_columns(meta):
        factors[c], fnames[c] = _codes(meta[c])
    if annotator not in ("factors", "none"):
        raise SelectionError(f"annotator must be 'factors' or 'none', got {annotator!r}")
    A = None
    if annotator == "factors":
        A, _ = factor_matrix(meta)
        A = A if A.shape[1] else None
    return ids, meta, S.Population(X, labels, factors, A, names, fnames)


def select(
    ids: np.ndarray,
    meta: pd.DataFrame,
    image_ids: list[str] | None = None,
    label: str | None = None,
    factor: tuple[str, str] | None = None,
) -> np.ndarray:
    """Rows of the images a selection names: a list of image ids (every one must be an image
    of the checkpoint), the images of one label (its value as written in images.parquet), or
    of one factor value (column, value as text)."""
    given = [x is not None for x in (image_ids, label, factor)]
    if sum(given) != 1:
        raise SelectionError("give exactly one of: image ids, a label, a factor=value")
    if image_ids is not None:
        pos = {i: j for j, i in enumerate(ids.tolist())}
        unknown = [i for i in image_ids if i not in pos]
        if unknown:
            raise SelectionError(
                f"{len(unknown)} selected image id(s) have no features on this checkpoint, "
                f"e.g. {unknown[0]!r}"
            )
        rows = np.unique([pos[i] for i in image_ids])
    elif label is not None:
        if "label" not in meta:
            raise SelectionError("images.parquet has no `label` column")
        rows = np.flatnonzero(meta["label"].astype("string").to_numpy() == str(label))
    else:
        col, value = factor
        if col not in factor_columns(meta):
            raise SelectionError(
                f"images.parquet has no factor column {col!r} "
                f"(factors: {', '.join(factor_columns(meta)) or 'none'})"
            )
        rows = np.flatnonzero(meta[col].astype("string").to_numpy() == str(value))
    if len(rows) == 0:
        raise SelectionError("the selection holds no image of this checkpoint")
    return rows


def score(db, checkpoint: str, annotator: str = "factors", **selection_and_options) -> dict:
    """The scores of one selection (see select) with their nulls (metrics.selection.Scorer's
    options: n_null, seed, ...). The result of Scorer.run plus `checkpoint` and a `table`."""
    keys = ("image_ids", "label", "factor")
    sel = {k: selection_and_options.pop(k) for k in keys if k in selection_and_options}
    ids, meta, pop = population(db, checkpoint, annotator)
    rows = select(ids, meta, **sel)
    out = S.score_selection(pop, rows, **selection_and_options)
    out["checkpoint"] = checkpoint
    out["table"] = pd.DataFrame(out["scores"])
    return out


def format_scores(out: dict) -> str:
    """Plain text: one line per score with its interval and percentiles."""
    lines = [
        f"checkpoint {out['checkpoint']}: {out['size']} images "
        f"(learnability on the {out['evaluated_members']} of them and the {out['probe']} other images "
        f"of an evaluation sample of {out['evaluation_sample']})"
    ]
    for r in out["scores"]:
        ci = "" if not np.isfinite(r["lo"]) else f" [{r['lo']:.3f}, {r['hi']:.3f}]"
        pct = "; ".join(
            f"percentile {p:.0f} among {w.replace('_', '-')} sets (n={r[f'null_{w}_n']})"
            for w in S.NULLS
            if np.isfinite(p := r[f"pct_{w}"])
        )
        lines.append(f"  {r['score']:<22} {r['value']:.3f}{ci}" + (f"  {pct}" if pct else ""))
    top = ", ".join(f"{v}: {c}" for v, c in out["label_histogram"][:5])
    lines.append(f"  labels: {top}")
    for f, h in out["factor_histograms"].items():
        lines.append(f"  {f}: " + ", ".join(f"{v}: {c}" for v, c in h[:5]))
    return "\n".join(lines)
