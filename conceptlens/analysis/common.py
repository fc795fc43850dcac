"""What every analysis shares: its inputs (read one partition at a time), the annotator's
factor matrix, the choice of captioner, notes, progress and the per-run model caches.

An analysis of one checkpoint opens only that checkpoint's files (and the small
per-workspace tables), never a glob over every checkpoint: adding a checkpoint to a
workspace of many costs the same as analysing it alone.
"""

from __future__ import annotations

import hashlib
import logging
import math

import numpy as np
import pandas as pd
import pyarrow as pa

from .. import schema
from ..metrics import l2_normalize
from ..metrics.selection import Captions
from ..workspace import Workspace, WorkspaceError

log = logging.getLogger("conceptlens.analysis")

IMAGE_CORE = {c.name for c in schema.CORE_BY_NAME["images"].columns}  # at import: core only


def progress(iterable, desc: str, enabled: bool = True, total: int | None = None):
    """A tqdm bar on stderr when `enabled` (the CLI's `--quiet` turns it off)."""
    if not enabled:
        return iterable

    from tqdm import tqdm

    return tqdm(iterable, desc=desc, total=total)


def files_footprint(paths) -> str:
    """Parquet files known by each file's name, size and footer (its row groups' offsets,
    sizes and min/max statistics): cheap at any size (features are large), the same in a
    copied or cloned workspace (a modification time is not: a clone would make every unit
    due), and different when the file is written again with other values."""
    import pyarrow.parquet as pq

    h = hashlib.sha1()
    for p in sorted(paths):
        md = pq.ParquetFile(p).metadata
        h.update(f"{p.name}:{p.stat().st_size}:{md.num_rows}:{md.num_row_groups};".encode())
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            for c in range(rg.num_columns):
                col = rg.column(c)
                st = col.statistics
                stats = (st.min, st.max, st.null_count) if st is not None and st.has_min_max else None
                h.update(f"{g}:{c}:{col.file_offset}:{col.total_compressed_size}:{stats};".encode())
    return h.hexdigest()


def default_k(n_images: int) -> int:
    """laina2020 / lu2022 use k on the order of sqrt(N) when no k is given."""
    return max(2, int(round(math.sqrt(n_images))))


def factor_matrix(images_df: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Annotator features from ground-truth columns: one-hot categories, standardised numbers.

    Uses the factor columns (any non-core column of images.parquet with values
    for these rows) plus `label`: a human looking at the image sees both.
    """
    cols = [
        c for c in images_df.columns if (c not in IMAGE_CORE or c == "label") and images_df[c].notna().any()
    ]
    blocks = []
    for c in cols:
        s = images_df[c]
        if (
            pd.api.types.is_numeric_dtype(s)
            and not pd.api.types.is_bool_dtype(s)
            and c != "label"
            and s.nunique() > 2
        ):
            v = s.astype(float).to_numpy()
            sd = np.nanstd(v)
            v = (v - np.nanmean(v)) / (sd if sd > 0 else 1.0)
            blocks.append(np.nan_to_num(v)[:, None])
        else:
            blocks.append(one_hot(s))
    if not blocks:
        return np.zeros((len(images_df), 0)), []
    return np.hstack([b.astype(np.float32, copy=False) for b in blocks]), cols


def one_hot(s: pd.Series) -> np.ndarray:
    """pd.get_dummies(s.astype("string")) as float32 (columns in sorted order, missing values
    all zero), written into one array: get_dummies builds a column per category first."""
    codes, cats = pd.factorize(s.astype("string"), sort=True)
    out = np.zeros((len(s), len(cats)), np.float32)
    hit = np.flatnonzero(codes >= 0)
    out[hit, codes[hit]] = 1
    return out


def pick_captioner(caps_df: pd.DataFrame | None) -> str | None:
    """Prefer a model captioner (vl:* first, then any non-groundtruth), else groundtruth."""
    if caps_df is None or caps_df.empty:
        return None
    counts = caps_df.groupby("captioner").size()
    model = counts[counts.index != "groundtruth"]
    vl = model[[str(i).startswith("vl:") for i in model.index]]
    for pool in (vl, model):
        if len(pool):
            return str(pool.sort_values(ascending=False, kind="stable").index[0])
    return "groundtruth" if "groundtruth" in counts.index else None


def build_captions(clus: pd.DataFrame, caps: pd.DataFrame, ids, embed) -> Captions:
    """The describability inputs of the images `ids` (in that order): their captions from
    `caps` (image_id, captioner, text; the captioner of the clusters' captions when it
    captioned these images, else pick_captioner's) and the competing class-level captions
    `clus` (cluster, caption, caption_source), embedded by `embed(texts)` (L2-normalised
    rows). A Captions whose `unavailable` says why when the images have no caption. One
    builder for the Clusters page's selection scores and the scoreboard analysis."""
    ids = np.asarray(ids, dtype=object)
    sources = set(clus["caption_source"].dropna())
    source = next((c for c in sources if (caps["captioner"] == c).any()), None) or pick_captioner(caps)
    if source is None:
        return Captions(unavailable="captions.parquet has no caption of these images")
    text_of = dict(
        caps[caps["captioner"] == source][["image_id", "text"]]
        .drop_duplicates("image_id")
        .itertuples(index=False)
    )
    text = np.array([text_of.get(i) for i in ids.tolist()], dtype=object)
    has = np.array([t is not None for t in text], bool)
    if not has.any():
        return Captions(unavailable=f"captioner {source!r} captioned none of these images")
    uniq = sorted(set(text[has].tolist()))
    U = np.asarray(embed(uniq))
    at = {t: j for j, t in enumerate(uniq)}
    E = np.zeros((len(ids), U.shape[1]), np.float32)
    E[has] = U[[at[t] for t in text[has]]]
    E[~has] = 1.0  # masked out by `has`; any finite row
    cands = clus["caption"].astype(str).tolist()
    return Captions(E, has, text, np.asarray(embed(cands)), cands, source)


class Context:
    """One run of one or more analyses on a workspace: small tables read once, per-checkpoint
    inputs read from their own partition only, caches of models shared by the units."""

    def __init__(self, ws: Workspace, progress: bool = True):
        self.ws = ws
        self.progress = progress
        self.notes: list[str] = []
        self.written = 0  # units computed and written by this run
        self._small: dict[str, pd.DataFrame | None] = {}
        # Values of the checkpoint under analysis only: features can be large.
        self._cid: str | None = None
        self._per_checkpoint: dict[str, object] = {}
        self._emb: dict[str, np.ndarray] = {}
        self._vl: dict = {}

    def note(self, msg: str) -> None:
        log.info(msg)
        self.notes.append(msg)

    # ---- small per-workspace tables ----------------------------------------------------
    def table(self, name: str, required: bool = True) -> pd.DataFrame | None:
        if name not in self._small:
            if not self.ws.has(name):
                if required:
                    raise WorkspaceError(f"{self.ws.table_path(name)}: table {name!r} is missing")
                self._small[name] = None
            else:
                self._small[name] = self.ws.read(name).to_pandas()
        return self._small[name]

    @property
    def images(self) -> pd.DataFrame:
        return self.table("images")

    @property
    def checkpoints(self) -> pd.DataFrame:
        return self.table("checkpoints")

    def checkpoint_row(self, cid: str) -> pd.Series:
        ck = self.checkpoints
        rows = ck.loc[ck["checkpoint_id"] == cid]
        if rows.empty:
            raise WorkspaceError(f"checkpoint {cid!r} is not in checkpoints.parquet")
        return rows.iloc[0]

    # ---- one checkpoint ------------------------------------------------------------------
    def cached(self, cid: str, name: str, fn):
        """A value of checkpoint `cid` computed once per run (features, kNN accuracy, ID...);
        moving on to another checkpoint drops the previous one's values."""
        if cid != self._cid:
            self._cid, self._per_checkpoint = cid, {}
        if name not in self._per_checkpoint:
            self._per_checkpoint[name] = fn()
        return self._per_checkpoint[name]

    def features(self, cid: str) -> tuple[np.ndarray, np.ndarray]:
        """(image ids sorted, float32 embeddings) of one checkpoint, from its own partition."""
        return self.cached(cid, "features", lambda: self.read_features(cid))

    def read_features(self, cid: str) -> tuple[np.ndarray, np.ndarray]:
        if not self.ws.has("features", checkpoint_id=cid):
            raise WorkspaceError(
                f"{self.ws.partition_dir('features', checkpoint_id=cid)}: "
                f"features of checkpoint {cid!r} are missing"
            )
        t = self.ws.read("features", columns=["image_id", "embedding"], checkpoint_id=cid)
        ids = np.asarray(t["image_id"].to_pylist(), dtype=object)
        if len(ids) == 0:
            raise WorkspaceError(f"{self.ws.table_path('features', checkpoint_id=cid)}: no rows")
        X = t["embedding"].combine_chunks().flatten().to_numpy(zero_copy_only=False)
        X = X.astype(np.float32, copy=False).reshape(len(ids), -1)
        # Sorted by image id, so results do not depend on the order rows were written in.
        order = np.argsort(ids.astype(str), kind="stable")
        if not (order == np.arange(len(order))).all():  # extract and demo scale write them sorted
            ids, X = ids[order], X[order]
        # Read-only, whether a view of Arrow's buffer or a copy: the run caches it for every
        # analysis of the checkpoint, so none may change it in place.
        X.flags.writeable = False
        return ids, X

    def normalized(self, cid: str) -> tuple[np.ndarray, np.ndarray]:
        def norm():
            ids, X = self.features(cid)
            return ids, l2_normalize(X)

        return self.cached(cid, "normalized", norm)

    def image_meta(self, ids) -> pd.DataFrame:
        """images rows for `ids`, in that order; an unknown id is an error naming the file."""
        img = self.images.set_index("image_id")
        missing = [i for i in ids if i not in img.index]
        if missing:
            raise WorkspaceError(
                f"features have {len(missing)} image_id(s) not in images.parquet, e.g. {missing[0]!r}"
            )
        return img.loc[list(ids)].reset_index()

    def clusters(self, cid: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(labels aligned with `features(cid)` ids, distances) of one clustering."""
        ids, _ = self.features(cid)
        t = (
            self.ws.read("clusters", columns=["image_id", "cluster", "distance"], checkpoint_id=cid, k=k)
            .to_pandas()
            .set_index("image_id")
        )
        missing = [i for i in ids if i not in t.index]
        if missing:
            raise WorkspaceError(
                f"{self.ws.table_path('clusters', checkpoint_id=cid, k=k)}: "
                f"lacks {len(missing)} image(s) of the features, e.g. {missing[0]!r}"
            )
        t = t.loc[list(ids)]
        return t["cluster"].to_numpy(np.int64), t["distance"].to_numpy(np.float64)

    # ---- models shared by the units --------------------------------------------------------
    def sentence_embeddings(self, texts: np.ndarray, model: str | None) -> np.ndarray:
        from ..text import embed_sentences  # local: read at call time, where tests patch it

        new = [t for t in dict.fromkeys(texts.tolist()) if t not in self._emb]
        if new:
            for t, e in zip(new, embed_sentences(new, model)):
                self._emb[t] = e
        return np.stack([self._emb[t] for t in texts.tolist()])

    def vl_embeddings(self, dataset: str, meta: pd.DataFrame, captions: list[str]):
        """(caption embeddings, image embeddings) from the dataset's VL model, or None."""
        vl = self.table("vl_models", required=False)
        if vl is None:
            self.note(f"describability skipped for {dataset}: no vl_models.parquet")
            return None
        if not (vl["dataset"] == dataset).any():
            self.note(f"describability skipped for {dataset}: no VL model for it in vl_models")
            return None
        if dataset in self._vl and self._vl[dataset] is None:
            return None  # failed before; the note is already logged
        try:
            if dataset not in self._vl:
                from ..vl import VLModel  # local: off the dashboard's cold start (it loads Pillow)

                self._vl[dataset] = (VLModel.from_workspace(self.ws.root, dataset), {})
            model, cache = self._vl[dataset]
            # Image embeddings are cached per image: checkpoints may cover different subsets.
            todo = [(i, t) for i, t in zip(meta["image_id"], meta["thumbnail"]) if i not in cache]
            if todo:
                emb = np.asarray(model.encode_images([self.ws.resolve(t) for _, t in todo]))
                cache.update({i: e for (i, _), e in zip(todo, emb)})
            img = np.stack([cache[i] for i in meta["image_id"]])
            return np.asarray(model.encode_text(captions)), img
        except Exception as e:  # an optional extra: never lose the rest of the analysis
            self.note(f"describability skipped for {dataset}: VL model failed ({e})")
            self._vl[dataset] = None
            return None


# ---- similarity trials (the similarity analysis and its convergence) ------------------------
def read_trials(ctx: Context, dataset: str) -> pd.DataFrame:
    t = ctx.ws.read("similarity_trials", dataset=dataset).to_pandas()
    where = ctx.ws.partition_dir("similarity_trials", dataset=dataset)
    for r in t.itertuples(index=False):
        refs, chosen = list(r.references), list(r.chosen)
        if len(chosen) != r.n_select or not set(chosen) <= set(refs) or len(set(chosen)) != len(chosen):
            raise WorkspaceError(
                f"{where}: trial {r.trial_id!r}: `chosen` must be n_select="
                f"{r.n_select} distinct references, got {chosen}"
            )
    images = ctx.images
    known = set(images.loc[images["dataset"] == dataset, "image_id"])
    used = set(t["query"]) | {i for refs in t["references"] for i in refs}
    unknown = sorted(used - known)
    if unknown:
        raise WorkspaceError(
            f"{where}: {len(unknown)} image(s) are not images of dataset {dataset!r}, e.g. {unknown[0]!r}"
        )
    return t


def encode(trials: pd.DataFrame, index: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """(stimulus_set, n_select) with indices from `index`: query, chosen references in
    choice order, the others in display order; -1 pads shorter trials; a trial with an
    image missing from `index` gets -2 in column 0 (callers drop it)."""
    n_ref = trials["references"].map(len).to_numpy()
    width = 1 + int(n_ref.max(initial=2))
    out = np.full((len(trials), width), -1, np.int64)
    missing = np.zeros(len(trials), bool)
    for t, (q, refs, chosen) in enumerate(zip(trials["query"], trials["references"], trials["chosen"])):
        chosen = list(chosen)
        row = [q, *chosen, *[r for r in refs if r not in chosen]]
        ids = [index.get(i, -1) for i in row]
        if min(ids) < 0:
            missing[t] = True
        out[t, : len(ids)] = ids
    out[missing, 0] = -2
    return out, trials["n_select"].to_numpy(np.int64)


def partition_label(partition: dict) -> str:
    return "/".join(f"{k}={v}" for k, v in partition.items())


def annotator_features(ctx: Context, cid: str, ids, meta, spec: str | None):
    """(annotator features aligned with ids, name) or (None, reason)."""
    spec = spec or "factors"
    if spec == "factors":
        A, _ = factor_matrix(meta.reset_index(drop=True))
        if A.shape[1] == 0:
            return None, (
                "images.parquet has no factor columns or labels for this dataset; "
                "use --annotator checkpoint:ID"
            )
        return A, "factors"
    if spec.startswith("checkpoint:"):
        other = spec.split(":", 1)[1]
        if other == cid:
            return None, f"annotator checkpoint {other} is the checkpoint analysed"
        theirs, ours = str(ctx.checkpoint_row(other)["dataset"]), str(ctx.checkpoint_row(cid)["dataset"])
        if theirs != ours:
            raise ValueError(
                f"--annotator checkpoint:{other} is of dataset {theirs!r}, not {ours!r} of checkpoint {cid!r}"
            )
        oids, A = ctx.read_features(other)
        pos = {i: j for j, i in enumerate(oids)}
        missing = [i for i in ids if i not in pos]
        if missing:
            raise WorkspaceError(
                f"--annotator checkpoint:{other}: features of {other} lack {len(missing)} image(s) of {cid}, "
                f"e.g. {missing[0]!r}"
            )
        return A[[pos[i] for i in ids]], spec
    raise ValueError(f"--annotator must be 'factors' or 'checkpoint:ID', got {spec!r}")


def write_rows(ctx: Context, name: str, rows: list[dict], metadata: dict | None = None, **partition) -> None:
    """Write `rows` (dicts of the table's file columns) as one partition of table `name`;
    no rows write the table's empty file (the partition then exists and is done)."""
    sch = schema.arrow_schema(name, partition=False)
    table = pa.Table.from_pylist(rows, schema=sch) if rows else sch.empty_table()
    ctx.ws.write(name, table, metadata=metadata, **partition)
