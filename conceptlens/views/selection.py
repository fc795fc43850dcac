"""Concept scores of any selection of images on one checkpoint (issue 26), read through the
workspace's DuckDB views: the checkpoint's features, its dataset's labels and factor
columns. Only reads; the scores are computed by conceptlens.metrics.selection.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd

from ..cache import cached
from ..errors import SelectionError
from ..metrics import selection as S
from ..selections import factor_columns, load
from .clusters import in_region, parse_region, region_box


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


def _codes(s: pd.Series) -> tuple[np.ndarray, dict]:
    codes, cats = pd.factorize(s.astype("string"), sort=True)
    return codes.astype(np.int64), {i: str(v) for i, v in enumerate(cats)}


# Populations kept for the process (their neighbour searches with them): the two most
# recent, each keyed by the tables it read (the checkpoint's features, images, checkpoints).
KEEP_POPULATIONS = 2


@cached(maxsize=KEEP_POPULATIONS)
def population(
    db, checkpoint: str, annotator: str = "factors"
) -> tuple[np.ndarray, pd.DataFrame, S.Population]:
    """(image ids, image rows, Population) of one checkpoint. annotator "factors": the proxy
    annotator sees the one-hot factors and label (as cluster_metrics' default); "none": no
    coherence. Kept for the process while the tables it read are unchanged, so the next
    selection on it reuses the neighbour search of the evaluation sample (see also
    `prepare`). Shared by every caller: never changed (`score` copies it)."""
    if annotator not in ("factors", "none"):
        raise SelectionError(f"annotator must be 'factors' or 'none', got {annotator!r}")
    return _population(db, checkpoint, annotator)


def prepare(db, checkpoint: str, annotator: str = "factors", seed: int = 0):
    """Load and keep the checkpoint's population (`population`) and start the neighbour
    search of its evaluation order in a background thread (Population.prepare), before any
    selection: what the dashboard's selection panel calls when it is turned on, so that the
    first selection, drawn seconds later, is scored as fast as the next ones. Returns the
    thread, or None for a remote workspace (its every read goes over the network: not done
    before it is asked for). The command line does not call it (one selection, then the
    process ends)."""
    if getattr(db, "remote", False):
        return None
    _, _, pop = population(db, checkpoint, annotator)
    return pop.prepare(seed=seed)


def _population(db, checkpoint: str, annotator: str):
    from ..analysis.common import factor_matrix  # local: the analyses load on use

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


# Sentence embeddings of caption texts by the bundled sentence model, per set of texts: a
# checkpoint's cluster captions are the same for every selection scored on it. Each caller
# gets its own copy of the rows.
@cached(reads=(), maxsize=16, copy=True)
def _embedded(texts: tuple[str, ...]) -> np.ndarray:
    from ..text import embed_sentences  # local: read at call time, where tests patch it

    return embed_sentences(list(texts))


def captions(db, checkpoint: str, ids: np.ndarray, k: int | None = None, embed=None) -> S.Captions:
    """The images' captions and the current clusters' captions of a checkpoint (its
    cluster_captions at `k`; default: the smallest k it has), embedded by `embed(texts)`
    (default: the bundled sentence model, as cluster_captions). Without them: a Captions
    whose `unavailable` says why."""
    from ..analysis.common import build_captions  # local: the analyses load on use

    if not db.has("cluster_captions"):
        return S.Captions(
            unavailable="the workspace has no cluster_captions (conceptlens analyze cluster_captions)"
        )
    ks = db.query(
        "SELECT DISTINCT k FROM cluster_captions WHERE checkpoint_id = $c AND caption IS NOT NULL ORDER BY k",
        {"c": checkpoint},
    )["k"].tolist()
    if not ks:
        return S.Captions(unavailable=f"cluster_captions has no caption of checkpoint {checkpoint!r}")
    if k is None:
        k = int(ks[0])
    elif k not in ks:
        return S.Captions(
            unavailable=f"cluster_captions of checkpoint {checkpoint!r} has no k={k} (it has {ks})"
        )
    clus = db.query(
        "SELECT cluster, caption, caption_source FROM cluster_captions "
        "WHERE checkpoint_id = $c AND k = $k AND caption IS NOT NULL ORDER BY cluster",
        {"c": checkpoint, "k": int(k)},
    )
    if not db.has("captions"):
        return S.Captions(unavailable="the workspace has no captions.parquet (conceptlens caption)")
    caps = db.query(
        "SELECT image_id, captioner, text FROM captions WHERE list_contains($ids, image_id)",
        {"ids": ids.tolist()},
    )
    return build_captions(clus, caps, ids, embed or (lambda t: _embedded(tuple(t))))


def score(
    db,
    checkpoint: str,
    annotator: str = "factors",
    describe: bool = False,
    k: int | None = None,
    embed=None,
    **selection_and_options,
) -> dict:
    """The scores of one selection (see select) with their nulls (metrics.selection.Scorer's
    options: n_null, seed, ...). The result of Scorer.run plus `checkpoint` and a `table`.
    describe: also its class-level caption and describability against the clusters'
    captions at `k` (see captions; the sentence model loads on first use)."""
    keys = ("image_ids", "label", "factor")
    sel = {key: selection_and_options.pop(key) for key in keys if key in selection_and_options}
    ids, meta, pop = population(db, checkpoint, annotator)
    pop = copy.copy(pop)  # the kept population is shared: its captions are this call's
    pop.captions = captions(db, checkpoint, ids, k, embed) if describe else None
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
    d = out.get("describability") or {}
    if d.get("available"):
        lines.append(
            f"  caption: {d['caption']!r} (Eq. 4 score {d['eq4_score']:.3f}, from {d['captioned_images']} "
            f"{d['captioner']} captions; Top-1 against {d['competing_captions']} cluster captions)"
        )
    elif d:
        lines.append(f"  describability unavailable: {d['reason']}")
    top = ", ".join(f"{v}: {c}" for v, c in out["label_histogram"][:5])
    lines.append(f"  labels: {top}")
    for f, h in out["factor_histograms"].items():
        lines.append(f"  {f}: " + ", ".join(f"{v}: {c}" for v, c in h[:5]))
    return "\n".join(lines)


ACROSS_COLUMNS = (
    "checkpoint_id",
    "run",
    "epoch",
    "size",
    "score",
    "value",
    "lo",
    "hi",
    "pct_random",
    "pct_same_labels",
    "null_random_median",
    "null_same_labels_median",
)


def dataset_checkpoints(db, dataset: str) -> pd.DataFrame:
    """checkpoint_id, run, epoch of every checkpoint of a dataset (run and epoch empty where
    checkpoints.parquet has no such column), by run then epoch."""
    cols = set(db.columns("checkpoints"))
    run = "run" if "run" in cols else "NULL"
    epoch = "epoch" if "epoch" in cols else "NULL"
    ck = db.query(
        f"SELECT checkpoint_id, {run} AS run, {epoch} AS epoch FROM checkpoints WHERE dataset = $d "
        "ORDER BY run NULLS LAST, epoch NULLS LAST, checkpoint_id",
        {"d": dataset},
    )
    if ck.empty:
        raise SelectionError(f"checkpoints.parquet has no checkpoint of dataset {dataset!r}")
    return ck


def across(
    db,
    dataset: str,
    checkpoints: list[str] | None = None,
    annotator: str = "factors",
    **selection_and_options,
) -> pd.DataFrame:
    """The scores of one selection (image_ids=, label= or factor=, as score) on every
    checkpoint of `dataset` (or the given ones): one row per checkpoint and score with its
    interval and percentiles (ACROSS_COLUMNS), checkpoints by run then epoch. A checkpoint
    where the selection cannot be scored (no features, or not all its images) is left out,
    with the reason in `.attrs["skipped"]` ({checkpoint: reason})."""
    ck = dataset_checkpoints(db, dataset)
    if checkpoints is not None:
        unknown = sorted(set(checkpoints) - set(ck["checkpoint_id"]))
        if unknown:
            raise SelectionError(f"dataset {dataset!r} has no checkpoint {unknown[0]!r}")
        ck = ck[ck["checkpoint_id"].isin(checkpoints)]
    rows, skipped = [], {}
    for c in ck.itertuples(index=False):
        try:
            out = score(db, c.checkpoint_id, annotator=annotator, **dict(selection_and_options))
        except SelectionError as e:
            skipped[c.checkpoint_id] = str(e)
            continue
        for r in out["scores"]:
            rows.append(
                {"checkpoint_id": c.checkpoint_id, "run": c.run, "epoch": c.epoch, "size": out["size"], **r}
            )
    table = pd.DataFrame(rows)
    if table.empty:
        table = pd.DataFrame(columns=list(ACROSS_COLUMNS))
    rest = [c for c in table.columns if c not in ACROSS_COLUMNS]
    table = table[list(ACROSS_COLUMNS) + rest]
    table.attrs["skipped"] = skipped
    return table


def format_across(table: pd.DataFrame) -> str:
    """Plain text of across(): per score, one line per checkpoint with its interval and
    percentiles, then the checkpoints left out and why."""
    lines = []
    for name, t in table.groupby("score", sort=False):
        lines.append(name)
        for r in t.itertuples(index=False):
            ci = "" if not np.isfinite(r.lo) else f" [{r.lo:.3f}, {r.hi:.3f}]"
            ep = "" if pd.isna(r.epoch) else f" epoch {int(r.epoch)}"
            pct = "; ".join(
                f"pct {w.replace('_', '-')} {v:.0f}"
                for w, v in (("random", r.pct_random), ("same_labels", r.pct_same_labels))
                if np.isfinite(v)
            )
            lines.append(f"  {r.checkpoint_id:<32}{ep:>9} {r.value:.3f}{ci}  {pct}")
    for c, why in table.attrs.get("skipped", {}).items():
        lines.append(f"skipped {c}: {why}")
    return "\n".join(lines)


def across_saved(db, dataset: str, name: str, n_null: int, seed: int = 0) -> pd.DataFrame:
    """`across` of the latest save of selection `name` of `dataset` (conceptlens.selections):
    what the Clusters page shows for a saved selection and the catalogue's `selection_across`
    draws, so an exported figure names the selection it scores."""
    sel = load(db, dataset, name)
    if sel is None:
        raise SelectionError(f"no selection named {name!r} is saved for dataset {dataset!r}")
    return across(db, dataset, image_ids=sel["image_ids"], n_null=int(n_null), seed=int(seed))


# ---- a selection by caption ----------------------------------------------------------------------
def caption_sources(db, dataset: str) -> pd.DataFrame:
    """The captioners of the dataset's images in captions.parquet: `captioner`, `images`
    (how many images it captioned), most images first (empty without captions.parquet)."""
    if not db.has("captions"):
        return pd.DataFrame({"captioner": pd.Series(dtype=str), "images": pd.Series(dtype="int64")})
    return db.query(
        """
        SELECT c.captioner, count(DISTINCT c.image_id) AS images
        FROM captions c JOIN images i USING (image_id)
        WHERE i.dataset = $d AND c.text IS NOT NULL
        GROUP BY c.captioner ORDER BY images DESC, c.captioner""",
        {"d": dataset},
    )


def captioned_ids(db, dataset: str, text: str, captioner: str | None = None) -> list[str]:
    """The ids of the dataset's images with a caption (of `captioner`, else of any captioner)
    that contains `text`, ignoring case (a literal text, not a pattern), in image id order."""
    text = str(text or "").strip()
    if not text:
        raise SelectionError("caption filter: the text to look for is empty")
    if not db.has("captions"):
        raise SelectionError("caption filter: the workspace has no captions.parquet (conceptlens caption)")
    rows = db.query(
        """
        SELECT DISTINCT c.image_id
        FROM captions c JOIN images i USING (image_id)
        WHERE i.dataset = $d AND ($by IS NULL OR c.captioner = $by)
          AND contains(lower(c.text), lower($t))
        ORDER BY c.image_id""",
        {"d": dataset, "by": captioner, "t": text},
    )
    return rows["image_id"].astype(str).tolist()


# ---- a selection by a region drawn on a projection -------------------------------------------------
def region_ids(db, checkpoint: str, region: str, method: str = "umap") -> list[str]:
    """The ids of every image of `checkpoint`'s stored projection inside `region` (a box or a
    lasso as the URL keeps it: views.clusters.parse_region), in image id order. Reads only
    the projection (e.g. the psychological embedding's map, which has no clusters)."""
    kind, pts = parse_region(region)
    rows = db.query(
        """
        SELECT image_id, x, y FROM projections
        WHERE checkpoint_id = $c AND method = $m
          AND x BETWEEN $x0 AND $x1 AND y BETWEEN $y0 AND $y1
        ORDER BY image_id""",
        {"c": checkpoint, "m": method, **region_box(pts)},
    )
    return in_region(rows, kind, pts)["image_id"].astype(str).tolist()
