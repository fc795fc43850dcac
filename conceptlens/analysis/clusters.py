"""`conceptlens analyze clusters`: k-means per checkpoint and every cluster metric.

For each checkpoint and k: clusters.parquet, cluster_metrics.parquet (purity,
2AFC coherence, class-level captions, describability), checkpoint_metrics.parquet
(aNMI, kNN accuracy, CL, ID), then across checkpoints CLID / W-CLID and
predictor_correlations.parquet, plus a 2-D UMAP in projections.parquet.
Definitions and choices: docs/analysis.md.

Resumable: a (checkpoint, k) whose checkpoint_metrics row exists is skipped
(that row is written last), unless `force`.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from .. import schema
from ..workspace import Workspace, WorkspaceError

log = logging.getLogger(__name__)

IMAGE_CORE = {c.name for c in schema.TABLES_BY_NAME["images"].columns}
PREDICTORS = ("cl", "cl_heldout", "id", "clid", "wclid")


@dataclass
class Options:
    ks: list[int] | None = None          # None: round(sqrt(N)) per checkpoint
    annotator: str | None = None         # "factors", "checkpoint:ID"; None = factors if any
    n_trials: int = 20
    n_refs: int = 10
    seed: int = 0
    n_init: int = 3                      # k-means restarts (fixed, for reproducibility)
    cl_chunks: int = 10
    cl_orders: int = 3
    umap: bool = True
    umap_fit_max: int = 10_000           # above this, UMAP is fitted on a sample
    captions: bool = True
    rouge_ablation: bool = True
    describability: bool = True
    sentence_model: str | None = None
    force: bool = False
    progress: bool = True
    notes: list = field(default_factory=list)


def _note(opts: Options, msg: str) -> None:
    log.info(msg)
    opts.notes.append(msg)


# ---- inputs -----------------------------------------------------------------------
def _read(ws: Workspace, name: str, need: tuple[str, ...]):
    if not ws.table_path(name).exists():
        raise WorkspaceError(f"{ws.table_path(name)}: table {name!r} is missing")
    df = ws.read(name).to_pandas()
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise WorkspaceError(f"table {name!r} lacks column(s) {', '.join(missing)}")
    return df


def factor_matrix(images_df) -> tuple[np.ndarray, list[str]]:
    """Annotator features from ground-truth columns: one-hot categories, standardised numbers.

    Uses the factor columns (any non-core column of images.parquet with values
    for these rows) plus `label`: a human looking at the image sees both.
    """
    import pandas as pd
    cols = [c for c in images_df.columns
            if (c not in IMAGE_CORE or c == "label") and images_df[c].notna().any()]
    blocks = []
    for c in cols:
        s = images_df[c]
        if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s) and c != "label" \
                and s.nunique() > 2:
            v = s.astype(float).to_numpy()
            sd = np.nanstd(v)
            v = (v - np.nanmean(v)) / (sd if sd > 0 else 1.0)
            blocks.append(np.nan_to_num(v)[:, None])
        else:
            blocks.append(pd.get_dummies(s.astype("string"), dtype=float).to_numpy())
    if not blocks:
        return np.zeros((len(images_df), 0)), []
    return np.hstack(blocks).astype(np.float32), cols


def _pick_captioner(caps_df) -> str | None:
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


class _Context:
    """Per-run caches (sentence embeddings, VL models) shared by the checkpoints."""

    def __init__(self, ws: Workspace, opts: Options):
        from ..db import WorkspaceDB
        self.ws, self.opts = ws, opts
        self.db = WorkspaceDB(ws.root)
        self.images = _read(ws, "images", ("image_id", "dataset", "label", "split", "thumbnail"))
        self.checkpoints = _read(ws, "checkpoints", ("checkpoint_id", "dataset"))
        self.captions = (_read(ws, "captions", ("image_id", "captioner", "text"))
                         if ws.table_path("captions").exists() else None)
        self._emb: dict = {}
        self._vl: dict = {}

    def features(self, cid: str, image_ids=None):
        p = self.db.features_path(cid)
        if not p.exists():
            raise WorkspaceError(f"{p}: features of checkpoint {cid!r} are missing")
        ids, X = self.db.features(cid, image_ids)
        if len(ids) == 0:
            raise WorkspaceError(f"{p}: no rows")
        return ids, X

    def sentence_embeddings(self, texts: np.ndarray) -> np.ndarray:
        from ..text import embed_sentences
        new = [t for t in dict.fromkeys(texts.tolist()) if t not in self._emb]
        if new:
            for t, e in zip(new, embed_sentences(new, self.opts.sentence_model)):
                self._emb[t] = e
        return np.stack([self._emb[t] for t in texts.tolist()])

    def vl_embeddings(self, dataset: str, meta, captions: list[str]):
        """(caption embeddings, image embeddings) from the dataset's VL model, or None."""
        if not self.ws.table_path("vl_models").exists():
            _note(self.opts, f"describability skipped for {dataset}: no vl_models.parquet")
            return None
        vl = self.ws.read("vl_models").to_pandas()
        if not (vl["dataset"] == dataset).any():
            _note(self.opts, f"describability skipped for {dataset}: no VL model for it in vl_models")
            return None
        if dataset in self._vl and self._vl[dataset] is None:
            return None   # failed before; the note is already logged
        try:
            if dataset not in self._vl:
                from ..vl import VLModel
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
            _note(self.opts, f"describability skipped for {dataset}: VL model failed ({e})")
            self._vl[dataset] = None
            return None


# ---- one checkpoint ------------------------------------------------------------------
def _kmeans(Xn: np.ndarray, k: int, opts: Options):
    from sklearn.cluster import KMeans
    if not 2 <= k <= len(Xn):
        raise ValueError(f"k={k} must be in [2, {len(Xn)}] (number of images)")
    km = KMeans(n_clusters=k, n_init=opts.n_init, random_state=opts.seed).fit(Xn)
    labels = km.labels_.astype(np.int64)
    dist = np.linalg.norm(Xn - km.cluster_centers_[labels], axis=1)
    return labels, dist


def _annotator(ctx: _Context, cid: str, ids, meta, opts: Options):
    """(annotator features aligned with ids, name) or (None, reason)."""
    spec = opts.annotator or "factors"
    if spec == "factors":
        A, cols = factor_matrix(meta.reset_index(drop=True))
        if A.shape[1] == 0:
            return None, ("images.parquet has no factor columns or labels for this dataset; "
                          "use --annotator checkpoint:ID")
        return A, "factors"
    if spec.startswith("checkpoint:"):
        other = spec.split(":", 1)[1]
        if other == cid:
            return None, f"annotator checkpoint {other} is the checkpoint analysed"
        if other not in set(ctx.checkpoints["checkpoint_id"]):
            raise WorkspaceError(f"annotator checkpoint {other!r} is not in checkpoints.parquet")
        oids, A = ctx.features(other)
        pos = {i: j for j, i in enumerate(oids)}
        missing = [i for i in ids if i not in pos]
        if missing:
            raise WorkspaceError(f"features/{other}.parquet lacks {len(missing)} image(s) of "
                                 f"{cid}, e.g. {missing[0]!r}")
        return A[[pos[i] for i in ids]], spec
    raise ValueError(f"--annotator must be 'factors' or 'checkpoint:ID', got {spec!r}")


def _caption_columns(ctx: _Context, ids, meta, labels, k: int, opts: Options) -> dict:
    from .. import metrics as M
    out = {c: [None] * k for c in ("caption", "caption_score", "caption_source", "caption_noneg",
                                    "caption_noneg_score", "caption_rouge", "caption_rouge_score")}
    if not opts.captions:
        return out
    caps = ctx.captions
    if caps is not None:
        caps = caps[caps["image_id"].isin(set(ids))]
    source = _pick_captioner(caps)
    if source is None:
        _note(opts, "captions skipped: captions.parquet has no caption for these images")
        return out
    text_of = dict(caps[caps["captioner"] == source][["image_id", "text"]].itertuples(index=False))
    rows = np.array([i for i, iid in enumerate(ids) if iid in text_of])
    texts = np.array([text_of[ids[i]] for i in rows], dtype=object)
    lab = labels[rows]
    E = ctx.sentence_embeddings(texts)
    chosen = {"": M.class_captions(E, lab, True), "_noneg": M.class_captions(E, lab, False)}
    if opts.rouge_ablation:
        chosen["_rouge"] = M.class_captions_rouge(texts, lab, True, random_state=opts.seed)
    for suffix, picks in chosen.items():
        for c, (j, score) in picks.items():
            out["caption" + suffix][c] = str(texts[j])
            out["caption" + suffix + "_score"][c] = score
    for c in chosen[""]:
        out["caption_source"][c] = source
    return out


def analyze_checkpoint_k(ctx: _Context, cid: str, ids, Xn, meta, k: int, shared: dict,
                         opts: Options) -> None:
    """Cluster one checkpoint with k and write its three tables (metrics row last)."""
    from .. import metrics as M
    labels, dist = _kmeans(Xn, k, opts)
    n = len(ids)
    ctx.ws.upsert("clusters", pa.table({
        "checkpoint_id": [cid] * n, "k": np.full(n, k, np.int64), "image_id": list(ids),
        "cluster": labels, "distance": dist.astype(np.float64)}, schema=schema.arrow_schema("clusters")),
        {"checkpoint_id": cid, "k": k})

    y = meta["label"].to_numpy()
    has_y = ~meta["label"].isna().to_numpy()
    n_classes = int(meta.loc[has_y, "label"].nunique())
    cols: dict = {c: [None] * k for c in [f.name for f in schema.arrow_schema("cluster_metrics")]}
    cols["checkpoint_id"] = [cid] * k
    cols["k"] = [k] * k
    cols["cluster"] = list(range(k))
    cols["size"] = np.bincount(labels, minlength=k).tolist()
    for c in range(k):
        m = (labels == c) & has_y
        if n_classes and m.any():
            p, top, share = M.purity(y[m].astype(np.int64), max(n_classes, len(np.unique(y[m]))))
            cols["purity"][c] = None if math.isnan(p) else p
            cols["top_label"][c], cols["top_label_share"][c] = int(top), share

    # 2AFC coherence with a proxy annotator outside the checkpoint's own space.
    A, who = shared["annotator"]
    hard = M.hard_negative_clusters(Xn, labels)
    for c, h in hard.items():
        cols["hard_negative"][c] = int(h)
    if A is None:
        _note(opts, f"{cid}: coherence skipped ({who})")
    else:
        for kind in ("random", "hard"):
            trials = M.make_trials(labels, opts.n_trials, opts.n_refs, kind, hard, opts.seed)
            coh = M.coherence(trials, M.annotate(trials, A, opts.seed))
            for c, (acc, lo, hi, nt) in coh.items():
                cols[f"coherence_{kind}"][c] = acc
                cols[f"coherence_{kind}_lo"][c], cols[f"coherence_{kind}_hi"][c] = lo, hi
                cols["coherence_trials"][c] = nt
                cols["annotator"][c] = who
            if trials.skipped:
                _note(opts, f"{cid} k={k}: {len(trials.skipped)} cluster(s) smaller than "
                            f"{opts.n_refs + 1} images get no {kind} coherence")

    cols.update(_caption_columns(ctx, ids, meta, labels, k, opts))
    if opts.describability and opts.captions and any(cols["caption"]):
        have = [c for c in range(k) if cols["caption"][c] is not None]
        emb = ctx.vl_embeddings(shared["dataset"], meta, [cols["caption"][c] for c in have])
        if emb is not None:
            d = M.describability(emb[0], have, emb[1], labels, random_state=opts.seed)
            for c, r in d.items():
                cols["describability_hits"][c] = r["hits"]
                cols["describability_top1"][c] = r["top1"]
                cols["describability_top5"][c] = r["top5"]
                cols["describability_binary"][c] = None if math.isnan(r["binary"]) else r["binary"]
    ctx.ws.upsert("cluster_metrics", pa.table(cols, schema=schema.arrow_schema("cluster_metrics")),
                  {"checkpoint_id": cid, "k": k})

    # Checkpoint-level numbers.
    anmi = M.anmi(y[has_y].astype(np.int64), labels[has_y]) if has_y.sum() > 1 else None
    cl = M.cluster_learnability(Xn, labels, min(opts.cl_chunks, n), opts.cl_orders, opts.seed)
    tr, te = shared["train"], shared["test"]
    cl_held = (M.cluster_learnability_heldout(Xn[tr], labels[tr], Xn[te], labels[te])
               if tr.any() and te.any() else None)
    row = {"checkpoint_id": [cid], "k": [k], "anmi": [anmi], "knn_acc": [shared["knn_acc"]],
           "cl": [cl], "id": [shared["id"]], "clid": [None], "cl_heldout": [cl_held],
           "wclid": [None], "n_images": [n], "n_duplicates": [shared["n_duplicates"]]}
    ctx.ws.upsert("checkpoint_metrics", pa.table(row, schema=schema.arrow_schema("checkpoint_metrics")),
                  {"checkpoint_id": cid, "k": k})


def _done(ws: Workspace, cid: str) -> set[int]:
    if not ws.table_path("checkpoint_metrics").exists():
        return set()
    t = ws.read("checkpoint_metrics", columns=["checkpoint_id", "k"]).to_pandas()
    return set(t.loc[t["checkpoint_id"] == cid, "k"].astype(int))


def _has_projection(ws: Workspace, cid: str) -> bool:
    if not ws.table_path("projections").exists():
        return False
    t = ws.read("projections", columns=["checkpoint_id", "method"]).to_pandas()
    return bool(((t["checkpoint_id"] == cid) & (t["method"] == "umap")).any())


def umap_2d(Xn: np.ndarray, seed: int, fit_max: int = 10_000) -> np.ndarray:
    """2-D UMAP (cosine); above `fit_max` points it is fitted on a seeded sample.

    Up to `fit_max` points the exact neighbour graph is ours (blocked, exact) and
    handed to UMAP, which then skips its approximate search (and its slow JIT).
    """
    import warnings

    import umap
    from ..metrics import nearest_cosine
    n_neighbors = max(2, min(15, len(Xn) - 1))
    # A fixed random_state makes UMAP single-threaded; say so to silence its warning.
    # 200 epochs (UMAP's own choice above 10,000 points) at every size: layouts are
    # good enough for browsing and small datasets no longer pay 500.
    kw = dict(n_components=2, n_neighbors=n_neighbors, metric="cosine", random_state=seed,
              n_jobs=1, n_epochs=200)
    if len(Xn) <= fit_max:
        sims, idx = nearest_cosine(Xn, Xn, k=n_neighbors, normalized=True)
        knn = (idx, np.maximum(0.0, 1.0 - sims).astype(np.float32))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*knn_search_index.*")
            return umap.UMAP(precomputed_knn=knn, **kw).fit_transform(Xn)
    sample = np.random.default_rng(seed).choice(len(Xn), fit_max, replace=False)
    reducer = umap.UMAP(**kw).fit(Xn[sample])
    return reducer.transform(Xn)


def analyze_checkpoint(ctx: _Context, cid: str, opts: Options) -> None:
    from .. import metrics as M
    row = ctx.checkpoints.loc[ctx.checkpoints["checkpoint_id"] == cid].iloc[0]
    ids, X = ctx.features(cid)
    img = ctx.images.set_index("image_id")
    missing = [i for i in ids if i not in img.index]
    if missing:
        raise WorkspaceError(f"features/{cid}.parquet has {len(missing)} image_id(s) not in "
                             f"images.parquet, e.g. {missing[0]!r}")
    meta = img.loc[list(ids)].reset_index()
    Xn = M.l2_normalize(X)
    ks = opts.ks or [max(2, int(round(math.sqrt(len(ids)))))]
    todo = [k for k in ks if opts.force or k not in _done(ctx.ws, cid)]
    if todo:
        split = meta["split"].astype(str).to_numpy()
        train, test = split == "train", split == "test"
        has_y = ~meta["label"].isna().to_numpy()
        y = meta["label"].to_numpy()
        knn = None
        if (train & has_y).any() and (test & has_y).any():
            a, b = train & has_y, test & has_y
            knn = M.knn_accuracy(Xn[a], y[a].astype(np.int64), Xn[b], y[b].astype(np.int64))
        else:
            _note(opts, f"{cid}: knn_acc skipped (needs labelled `train` and `test` images)")
        # ID on the L2-normalised features, like every other metric here.
        id_, n_dup = M.twonn(Xn)
        if n_dup:
            _note(opts, f"{cid}: {n_dup} duplicate feature row(s) dropped before TwoNN")
        shared = {"dataset": str(row["dataset"]), "train": train, "test": test, "knn_acc": knn,
                  "id": id_, "n_duplicates": n_dup,
                  "annotator": _annotator(ctx, cid, ids, meta, opts)}
        for k in todo:
            analyze_checkpoint_k(ctx, cid, ids, Xn, meta, k, shared, opts)
    if opts.umap and (opts.force or not _has_projection(ctx.ws, cid)):
        xy = umap_2d(Xn, opts.seed, opts.umap_fit_max)
        n = len(ids)
        ctx.ws.upsert("projections", pa.table({
            "checkpoint_id": [cid] * n, "method": ["umap"] * n, "image_id": list(ids),
            "x": xy[:, 0].astype(np.float64), "y": xy[:, 1].astype(np.float64)},
            schema=schema.arrow_schema("projections")), {"checkpoint_id": cid, "method": "umap"})


def update_clid(ws: Workspace) -> None:
    """Recompute CLID / W-CLID per (dataset, k) and write predictor_correlations."""
    from .. import metrics as M
    if not ws.table_path("checkpoint_metrics").exists():
        return
    cm = ws.read("checkpoint_metrics").to_pandas()
    ck = ws.read("checkpoints", columns=["checkpoint_id", "dataset"]).to_pandas()
    ds = dict(zip(ck["checkpoint_id"], ck["dataset"]))
    cm["_dataset"] = cm["checkpoint_id"].map(ds)
    rows = []
    for (dataset, k), g in cm.groupby(["_dataset", "k"], sort=True):
        f = lambda c: g[c].astype(float).to_numpy()  # noqa: E731
        cm.loc[g.index, "clid"] = M.clid(f("cl"), f("id"))
        cm.loc[g.index, "wclid"] = M.wclid(f("cl"), f("id"), f("knn_acc"))[0]
        g = cm.loc[g.index]
        for p in PREDICTORS:
            r = M.correlations(g[p].astype(float).to_numpy(), g["knn_acc"].astype(float).to_numpy())
            rows.append({"dataset": dataset, "k": int(k), "predictor": p, **r})
    cm = cm.drop(columns="_dataset")
    want = schema.arrow_schema("checkpoint_metrics")
    # Schema columns get their declared types; unknown extra columns keep theirs.
    fields = [want.field(c) if c in want.names else pa.Schema.from_pandas(cm[[c]]).field(c)
              for c in cm.columns]
    ws.write("checkpoint_metrics", pa.Table.from_pandas(cm, schema=pa.schema(fields),
                                                        preserve_index=False))
    tbl = pa.Table.from_pylist(rows, schema=schema.arrow_schema("predictor_correlations"))
    ws.write("predictor_correlations", tbl)


def analyze_clusters(root, checkpoint: str | None = None, opts: Options | None = None) -> list[str]:
    """Run the cluster analysis for one checkpoint or all; returns the notes logged."""
    from tqdm import tqdm
    opts = opts or Options()
    if opts.n_trials < 20:
        raise ValueError(f"--trials must be at least 20, got {opts.n_trials}")
    ws = Workspace(root)
    ws.meta()
    ctx = _Context(ws, opts)
    cids = list(ctx.checkpoints["checkpoint_id"])
    if checkpoint is not None:
        if checkpoint not in cids:
            raise WorkspaceError(f"checkpoint {checkpoint!r} is not in checkpoints.parquet")
        cids = [checkpoint]
    if not cids:
        _note(opts, "checkpoints.parquet is empty: nothing to analyse")
    for cid in tqdm(cids, desc="clusters", disable=not opts.progress):
        analyze_checkpoint(ctx, cid, opts)
    update_clid(ws)
    return opts.notes


# ---- command line ----------------------------------------------------------------------
def _analyze_subparsers(sub):
    """The `analyze` group's subparsers, created once and shared with other analyses."""
    import argparse
    p = sub.choices.get("analyze")
    if p is None:
        p = sub.add_parser("analyze", help="compute analyses into a workspace")
        return p.add_subparsers(dest="analysis", required=True)
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return a
    return p.add_subparsers(dest="analysis", required=True)


def _run(args) -> int:
    logging.basicConfig(level=logging.INFO, format="conceptlens: %(message)s")
    opts = Options(ks=args.k, annotator=args.annotator, n_trials=args.trials, seed=args.seed,
                   n_init=args.n_init,
                   force=args.force, umap=not args.no_umap, captions=not args.no_captions,
                   describability=not args.no_describability, progress=not args.quiet)
    analyze_clusters(args.workspace, args.checkpoint, opts)
    print(f"cluster analysis written to {args.workspace}")
    return 0


def register(sub) -> None:
    p = _analyze_subparsers(sub).add_parser(
        "clusters", help="k-means, purity, 2AFC coherence, captions, CL/ID/CLID, UMAP")
    p.add_argument("--workspace", required=True, help="workspace folder")
    p.add_argument("--checkpoint", help="only this checkpoint (default: all)")
    p.add_argument("--k", type=int, nargs="+", help="numbers of clusters (default round(sqrt(N)))")
    p.add_argument("--annotator", help="2AFC proxy annotator: `factors` (default) or `checkpoint:ID`")
    p.add_argument("--trials", type=int, default=20, help="2AFC trials per cluster (>= 20)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-init", type=int, default=3,
                   help="k-means restarts (default 3; each costs about 5 N x N x d products at "
                        "k = sqrt(N))")
    p.add_argument("--force", action="store_true", help="recompute (checkpoint, k) already done")
    p.add_argument("--no-umap", action="store_true", help="skip the 2-D projection")
    p.add_argument("--no-captions", action="store_true", help="skip class-level captions")
    p.add_argument("--no-describability", action="store_true", help="skip the VL retrieval proxy")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_run)
