"""`conceptlens analyze scoreboard`: every kind of concept of a checkpoint scored alike.

A concept is a set of images; its *source* is how the set was carved from the model's
features (`SOURCES`, declared once: the stored `source` values, the page's legend and the
docs derive from it). All concepts of a checkpoint are compared at one member count N
(`--size`; 0 = n / 40 clipped to [12, 50], n the images): each source takes its N
members by its own score, so no source is favoured by larger or smaller sets:

- `dictionary:<method>`: an atom's N largest positive codes (`analyze dictionary`);
- `unit`: a channel of the features: its N largest activations (every channel, or a
  seeded sample of `--units-max` of them);
- `cluster`: a k-means cluster's N members nearest its centroid (`analyze clustering`);
- `random_direction`: a random Gaussian direction of feature space, scored like a unit
  (its N largest projections): the null every source is read against;
- `label` and `hierarchy`: a class, or a node of the label hierarchy, with a seeded
  sample of N of its images: the ceiling;
- `selection`: a saved selection, a seeded sample of N of its images.

A concept with fewer than N members is listed, unscored, with the reason. Every concept
goes through `metrics.scoreboard.score_concepts` (learnability, 2AFC coherence with random
and hard negatives, purity against the labels, every factor and every level of the label
hierarchy, TwoNN intrinsic dimension, describability as on the Clusters page (`--describe`:
laina2020's class-level caption, its Top-1 retrieval against the checkpoint's cluster
captions), niche membership where the images have ground-truth concepts
(`concept_labels`)), each with its 95% interval, its percentile among
`--n-null` random sets of N images and its percentile among the random directions.
The 2AFC observer is cluster_metrics' (`--annotator`): `factors` (a proxy that sees the
ground-truth factors and label) or `checkpoint:ID`, another checkpoint's features of the
same images (a second network as observer).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import hierarchy, schema, text
from .. import rng as rngs
from ..metrics import dictionary as D
from ..metrics import score_names
from ..metrics import scoreboard as SB
from ..metrics.selection import Captions, Population
from ..schema import BOOL, FLOAT, INT, NON_NEGATIVE, STRING, Column, Table
from ..selections import factor_columns
from ..workspace import files_signature
from .base import (
    ANNOTATOR,
    BOOTSTRAP,
    ONLY,
    REFS,
    TRIALS,
    Analysis,
    Option,
    Scope,
    Skipped,
    Unit,
    checkpoints_with_features,
    only_selected,
)
from .common import Context, annotator_features, build_captions, write_rows


@dataclass(frozen=True)
class Source:
    name: str  # stored in the `source` columns
    title: str  # shown
    role: str  # "concept", "null" (read against) or "ceiling" (ground truth)
    members: str  # how its N members are chosen, in words


SOURCES = (
    *(
        Source(f"dictionary:{m}", f"dictionary atom ({m})", "concept", "the atom's N largest positive codes")
        for m in D.METHODS
    ),
    Source("unit", "single unit (channel)", "concept", "the channel's N largest activations"),
    Source("cluster", "k-means cluster", "concept", "the cluster's N members nearest its centroid"),
    Source("selection", "saved selection", "concept", "a seeded sample of N of its images"),
    Source("random_direction", "random direction", "null", "its N largest projections"),
    Source("label", "ground-truth label", "ceiling", "a seeded sample of N of the label's images"),
    Source("hierarchy", "label hierarchy node", "ceiling", "a seeded sample of N of the node's images"),
)
SOURCE_NAMES = tuple(s.name for s in SOURCES)
BY_NAME = {s.name: s for s in SOURCES}
NULLS = ("random_sets", "random_directions")

_CKPT = schema.CHECKPOINT_PARTITION
_SOURCE = Column("source", STRING, "How the concept was carved (`SOURCES`).", allowed=SOURCE_NAMES)
_CONCEPT = Column("concept", STRING, "The concept within its source (an atom, a channel, a label...).")

CONCEPTS = Table(
    "scoreboard_concepts",
    "scoreboard_concepts",
    "One row per concept of a checkpoint, of every source; scored or why not.",
    (
        _CKPT,
        _SOURCE,
        _CONCEPT,
        Column("name", STRING, "How it is shown."),
        Column("size", INT, "Members it has (at most N, the matched size).", bounds=NON_NEGATIVE),
        Column("scored", BOOL, "Whether it was scored (it has N members)."),
        Column("reason", STRING, "Why it was not scored.", nullable=True),
        Column(
            "caption",
            STRING,
            "Its class-level caption (laina2020's Eq. 4: the caption of one of its members "
            "nearest its members' captions and farthest from the others'), from which its "
            "describability is scored; null when describability was not scored (added in 2.6).",
            nullable=True,
            required=False,
        ),
    ),
    key=("checkpoint_id", "source", "concept"),
    partition=("checkpoint_id",),
)

MEMBERS = Table(
    "scoreboard_members",
    "scoreboard_members",
    "The members of every concept, rank 0 first (by its source's score; samples in image order).",
    (
        _CKPT,
        _SOURCE,
        _CONCEPT,
        Column("rank", INT, "Rank within the concept.", bounds=NON_NEGATIVE),
        Column("image_id", STRING, "Image.", references="images.image_id"),
        Column("weight", FLOAT, "The source's score of the image (a code, an activation...).", nullable=True),
    ),
    key=("checkpoint_id", "source", "concept", "image_id"),
    partition=("checkpoint_id",),
)

SCORES = Table(
    "scoreboard_scores",
    "scoreboard_scores",
    "One row per scored concept and score: value, 95% interval, percentiles against random "
    "sets of the same size and among the random directions.",
    (
        _CKPT,
        _SOURCE,
        _CONCEPT,
        Column(
            "score",
            STRING,
            "`learnability`, `coherence_random`, `coherence_hard`, `intrinsic_dim`, "
            "`describability_top1`, `purity_label`, `purity_level_L` (level L of the label "
            "hierarchy), `purity_FACTOR` or `niche_CONCEPT` (niche membership: the largest "
            "correlation phi between the members and a value of the ground-truth concept, as a "
            "share of the largest a set of N images can reach).",
        ),
        Column("value", FLOAT, "The score.", nullable=True),
        Column("lo", FLOAT, "95% interval, low end.", nullable=True, at_most=("hi",)),
        Column("hi", FLOAT, "95% interval, high end.", nullable=True),
        Column(
            "pct_random", FLOAT, "Percentile among random sets of N images.", nullable=True, bounds=(0, 100)
        ),
        Column(
            "pct_directions", FLOAT, "Percentile among the random directions.", nullable=True, bounds=(0, 100)
        ),
    ),
    key=("checkpoint_id", "source", "concept", "score"),
    partition=("checkpoint_id",),
)

NULL = Table(
    "scoreboard_null",
    "scoreboard_null",
    "The nulls of a checkpoint's scores: random sets of N images, and the random directions.",
    (
        _CKPT,
        Column("null", STRING, "Which null.", allowed=NULLS),
        Column("score", STRING, "Score (as `scoreboard_scores.score`)."),
        Column("n", INT, "Values in the null.", bounds=NON_NEGATIVE),
        Column("median", FLOAT, "Their median.", nullable=True),
        Column("lo", FLOAT, "Their 2.5% quantile.", nullable=True, at_most=("median",)),
        Column("hi", FLOAT, "Their 97.5% quantile.", nullable=True),
    ),
    key=("checkpoint_id", "null", "score"),
    partition=("checkpoint_id",),
)


def matched_size(n: int, size: int) -> int:
    """N: `size`, or n / 40 clipped to [12, 50] (and below n - 2)."""
    if size:
        return int(size)
    return int(min(max(12, n // 40), 50, max(1, n - 3)))


@dataclass
class Concept:
    source: str
    concept: str
    name: str
    rows: np.ndarray  # member rows, rank order
    weights: np.ndarray | None
    reason: str | None = None


def _top(values: np.ndarray, N: int, positive: bool = False) -> np.ndarray:
    """Rows of the N largest values, largest first, ties by lower row."""
    order = np.lexsort((np.arange(len(values)), -values))
    if positive:
        order = order[values[order] > 0]
    return order[:N]


def _sample(rows: np.ndarray, N: int, seed: int, unit) -> np.ndarray:
    rows = np.sort(rows)
    if len(rows) <= N:
        return rows
    return np.sort(rngs.stream(seed, "scoreboard.members", unit).choice(rows, N, replace=False))


def _short(n: int, N: int, what: str) -> str:
    return f"only {n} image(s) {what} (< N = {N})"


# ---- the sources' members ----------------------------------------------------------------
def unit_concepts(X, N, seed, cid, units_max) -> list[Concept]:
    d = X.shape[1]
    chans = np.arange(d)
    if units_max and units_max < d:
        chans = np.sort(rngs.stream(seed, "scoreboard.units", cid).choice(d, units_max, replace=False))
    out = []
    for j in chans:
        rows = _top(X[:, j], N)
        out.append(Concept("unit", f"{j}", f"channel {j}", rows, X[rows, j]))
    return out


def direction_concepts(X, N, seed, cid, count) -> list[Concept]:
    U = rngs.stream(seed, "scoreboard.random_directions", cid).standard_normal((count, X.shape[1]))
    P = X.astype(np.float64) @ U.T
    out = []
    for j in range(count):
        rows = _top(P[:, j], N)
        out.append(Concept("random_direction", f"{j}", f"random direction {j}", rows, P[rows, j]))
    return out


def dictionary_concepts(ctx: Context, cid: str, index: dict, N: int) -> list[Concept]:
    if not ctx.ws.has("dictionary_codes", checkpoint_id=cid):
        return []
    codes = ctx.ws.read("dictionary_codes", checkpoint_id=cid).to_pandas()
    fit = (
        ctx.ws.read("dictionary_fit", checkpoint_id=cid).to_pandas()
        if ctx.ws.has("dictionary_fit", checkpoint_id=cid)
        else None
    )
    out = []
    methods = list(fit["method"]) if fit is not None else sorted(codes["method"].unique())
    for m in methods:
        k = (
            int(fit.loc[fit["method"] == m, "atoms"].iloc[0])
            if fit is not None
            else int(codes.loc[codes["method"] == m, "atom"].max()) + 1
        )
        mine = codes[codes["method"] == m]
        for a in range(k):
            g = mine[mine["atom"] == a].sort_values("rank")
            g = g[g["image_id"].isin(index)]
            rows = np.array([index[i] for i in g["image_id"]], np.int64)[:N]
            w = g["code"].to_numpy(np.float64)[:N]
            reason = None if len(rows) >= N else _short(len(rows), N, "have a non-zero code")
            out.append(Concept(f"dictionary:{m}", f"{a}", f"{m} atom {a}", rows, w, reason))
    return out


def cluster_concepts(ctx: Context, cid: str, k: int | None, N: int) -> list[Concept]:
    if k is None:
        return []
    labels, dist = ctx.clusters(cid, k)
    out = []
    for c in range(k):
        rows = np.flatnonzero(labels == c)
        order = rows[np.lexsort((rows, dist[rows]))][:N]
        reason = None if len(order) >= N else _short(len(rows), N, "in the cluster")
        out.append(Concept("cluster", f"{c}", f"cluster {c} (k={k})", order, dist[order], reason))
    return out


def group_concepts(source, groups: dict, N, seed, cid, what) -> list[Concept]:
    out = []
    for key, (name, rows) in groups.items():
        rows = np.asarray(rows, np.int64)
        reason = None if len(rows) >= N else _short(len(rows), N, what)
        out.append(Concept(source, key, name, _sample(rows, N, seed, [cid, source, key]), None, reason))
    return out


# ---- the population --------------------------------------------------------------------------
def _codes(values) -> np.ndarray:
    codes, _ = pd.factorize(pd.Series(values, dtype="object").astype("string"), sort=True)
    return codes.astype(np.int64)


def population(ctx: Context, cid: str, X, meta: pd.DataFrame, observer: str | None):
    labels = _codes(meta["label"]) if "label" in meta else np.full(len(meta), -1)
    factors = {}
    for c in factor_columns(meta):
        factors[c] = _codes(meta[c])
    h = hierarchy.load(ctx.ws, str(ctx.checkpoint_row(cid)["dataset"]))
    if h is not None and h.column in meta:
        vals = [None if pd.isna(v) else str(v) for v in meta[h.column]]
        for level in range(h.levels):
            factors[score_names.level_factor(level)] = _codes(
                [h.ancestor(v, level) if v in h.parent else None for v in vals]
            )
    A, why = annotator_features(ctx, cid, meta["image_id"].tolist(), meta, observer)
    if A is None and observer and observer != "factors":
        raise Skipped(why)
    return Population(X, labels, factors, None if A is None else np.asarray(A, np.float64)), h


def concept_codes(ctx: Context, ids) -> dict:
    """name -> (codes over `ids`, K) of every ground-truth concept (`concept_labels`) some of
    the images have: its values in increasing order coded 0..K-1, -1 where an image has no
    value (so a value of 10**9 costs what a value of 1 does)."""
    t = ctx.table("concept_labels", required=False)
    if t is None or t.empty:
        return {}
    t = t[t["image_id"].isin(set(map(str, ids)))]
    out = {}
    for name, g in t.groupby("concept", sort=True):
        values, code = np.unique(g["value"].to_numpy(np.int64), return_inverse=True)
        value = dict(zip(g["image_id"], code))
        codes = np.array([value.get(str(i), -1) for i in ids], np.int64)
        out[str(name)] = (codes, len(values))
    return out


def captions_of(ctx: Context, cid: str, ids, k: int | None) -> Captions:
    """Describability's inputs (the images' captions and the captions of the checkpoint's
    clusters at k, the competitors, as on the Clusters page), or why there are none."""
    why = text.unavailable()
    if why:
        return Captions(unavailable=f"describability {why}")
    if k is None or not ctx.ws.has("cluster_captions", checkpoint_id=cid, k=k):
        return Captions(unavailable=f"no cluster_captions of {cid!r} at k={k} (analyze cluster_captions)")
    clus = ctx.ws.read("cluster_captions", checkpoint_id=cid, k=k).to_pandas()
    clus = clus[clus["caption"].notna()].sort_values("cluster")
    caps = ctx.table("captions", required=False)
    if clus.empty or caps is None:
        return Captions(unavailable="no captions.parquet or no caption of the clusters (conceptlens caption)")
    caps = caps[caps["image_id"].isin(set(map(str, ids)))]
    embed = lambda texts: ctx.sentence_embeddings(np.asarray(texts, dtype=object), None)  # noqa: E731
    return build_captions(clus, caps, ids, embed)


# ---- the analysis ----------------------------------------------------------------------------
def _k(ctx: Context, cid: str, opts: dict) -> int | None:
    ks = sorted(int(p["k"]) for p in ctx.ws.partitions("clusters") if p["checkpoint_id"] == cid)
    if opts["cluster_k"]:
        return int(opts["cluster_k"]) if int(opts["cluster_k"]) in ks else None
    return ks[0] if ks else None


def _units(ctx: Context, opts: dict, scope: Scope) -> list[Unit]:
    cids = only_selected(checkpoints_with_features(ctx, opts, scope), opts.get("only"))
    return [Unit({"checkpoint_id": c}, c) for c in cids]


def _inputs(ctx: Context, unit: Unit, opts: dict) -> str:
    cid = unit.partition["checkpoint_id"]
    ds = str(ctx.checkpoint_row(cid)["dataset"])
    files = list(ctx.ws.partition_files("features", checkpoint_id=cid))
    k = _k(ctx, cid, opts)
    if k is not None:
        files += ctx.ws.partition_files("clusters", checkpoint_id=cid, k=k)
    for name in ("dictionary_codes", "dictionary_fit"):
        files += ctx.ws.partition_files(name, checkpoint_id=cid)
    for name in ("selections", "label_hierarchy"):
        files += ctx.ws.partition_files(name, dataset=ds)
    files += ctx.ws.files("images") + ctx.ws.files("concept_labels")
    if (opts["annotator"] or "").startswith("checkpoint:"):
        files += ctx.ws.partition_files("features", checkpoint_id=opts["annotator"].split(":", 1)[1])
    sentences = ""
    if opts["describe"]:
        files += ctx.ws.files("captions")
        if k is not None:
            files += ctx.ws.partition_files("cluster_captions", checkpoint_id=cid, k=k)
        # without the sentence model, the unit is done without describability, and done
        # again once the model is installed
        sentences = ":sentences" if text.unavailable() is None else ":no-sentence-model"
    return files_signature(files) + sentences


def _selections(ctx: Context, ds: str) -> dict:
    if not ctx.ws.has("selections", dataset=ds):
        return {}
    t = ctx.ws.read("selections", dataset=ds).to_pandas()
    t = t.sort_values("created").drop_duplicates("name", keep="last")
    return {str(r["name"]): list(r["image_ids"]) for _, r in t.iterrows()}


def concepts_of(ctx: Context, cid: str, ids, X, meta, h, opts: dict, N: int) -> list[Concept]:
    seed = int(opts["seed"])
    index = {str(i): j for j, i in enumerate(ids)}
    ds = str(ctx.checkpoint_row(cid)["dataset"])
    out = dictionary_concepts(ctx, cid, index, N)
    out += unit_concepts(X, N, seed, cid, int(opts["units_max"]))
    out += cluster_concepts(ctx, cid, _k(ctx, cid, opts), N)
    sel = {k: (k, [index[i] for i in v if i in index]) for k, v in _selections(ctx, ds).items()}
    out += group_concepts("selection", sel, N, seed, cid, "of the selection have features")
    out += direction_concepts(X, N, seed, cid, int(opts["directions"]))
    if "label" in meta:
        lab = meta["label"].astype("string")
        names = meta["label_name"].astype("string") if "label_name" in meta else lab
        groups = {}
        for v in sorted(lab.dropna().unique()):
            rows = np.flatnonzero((lab == v).to_numpy(bool, na_value=False))
            groups[str(v)] = (
                f"label {v} {names.iloc[rows[0]]}" if names.iloc[rows[0]] != v else f"label {v}",
                rows,
            )
        out += group_concepts("label", groups, N, seed, cid, "have the label")
    if h is not None and h.column in meta:
        # Each distinct value's path once, its images added to every node on it (a test per
        # node and image walked the path nodes x images times: 10^8 at ImageNet's size).
        under: dict = {}
        for i, v in enumerate(meta[h.column]):
            if not pd.isna(v) and str(v) in h.parent:
                under.setdefault(str(v), []).append(i)
        rows_of: dict = {}
        for v, rows in under.items():
            for node in h.path(v):
                rows_of.setdefault(node, []).extend(rows)
        groups = {
            node: (f"{h.name(node)} (level {h.depth[node]})", np.sort(np.asarray(rows_of[node], np.int64)))
            for node in sorted(rows_of)
        }
        out += group_concepts("hierarchy", groups, N, seed, cid, "fall under the node")
    return out


def _run(ctx: Context, unit: Unit, opts: dict, scope: Scope) -> str:
    cid = unit.partition["checkpoint_id"]
    inputs = _inputs(ctx, unit, opts)
    ids, X = ctx.features(cid)
    if not np.isfinite(X).all():
        raise ValueError(f"features of checkpoint {cid!r} hold NaN or infinite values: cannot score concepts")
    meta = ctx.image_meta(ids)
    N = matched_size(len(ids), int(opts["size"]))
    if N > len(ids) - 3:
        raise ValueError(
            f"--size {N} leaves fewer than 3 of the {len(ids)} images of {cid!r} outside a concept"
        )
    pop, h = population(ctx, cid, X, meta, opts["annotator"])
    if opts["describe"]:
        pop.captions = captions_of(ctx, cid, ids, _k(ctx, cid, opts))
        if pop.captions.unavailable:
            ctx.note(f"{cid}: describability not scored: {pop.captions.unavailable}")
    concepts = concepts_of(ctx, cid, ids, X, meta, h, opts, N)
    scored = [c for c in concepts if c.reason is None]
    if not scored:
        raise Skipped(f"no concept of {cid!r} has N = {N} members")
    sets = np.stack([np.sort(c.rows) for c in scored])
    res = SB.score_concepts(
        pop,
        sets,
        int(opts["seed"]),
        unit=cid,
        n_null=int(opts["n_null"]),
        bootstrap=int(opts["bootstrap"]),
        trials=int(opts["trials"]),
        refs=int(opts["refs"]),
        concepts=concept_codes(ctx, ids),
    )
    is_dir = np.array([c.source == "random_direction" for c in scored])
    dir_index = np.cumsum(is_dir) - 1
    rows, nulls = [], []
    for k in res.scores:
        v = res.values[k]
        ref = v[is_dir]
        pct_dir = (
            SB.percentiles_among(v, ref, np.where(is_dir, dir_index, -1))
            if is_dir.any()
            else np.full(len(v), np.nan)
        )
        for i, c in enumerate(scored):
            rows.append(
                {
                    "source": c.source,
                    "concept": c.concept,
                    "score": k,
                    "value": _f(v[i]),
                    "lo": _f(res.lo[k][i]),
                    "hi": _f(res.hi[k][i]),
                    "pct_random": _f(res.pct_random[k][i]),
                    "pct_directions": _f(pct_dir[i]),
                }
            )
        for which, vals in (("random_sets", res.null[k]), ("random_directions", ref)):
            fin = np.asarray(vals, np.float64)
            fin = fin[np.isfinite(fin)]
            q = np.quantile(fin, [0.025, 0.5, 0.975]) if len(fin) else [np.nan] * 3
            nulls.append(
                {"null": which, "score": k, "n": len(fin), "median": _f(q[1]), "lo": _f(q[0]), "hi": _f(q[2])}
            )
    members = [
        {
            "source": c.source,
            "concept": c.concept,
            "rank": r,
            "image_id": str(ids[i]),
            "weight": None if c.weights is None else _f(c.weights[r]),
        }
        for c in concepts
        for r, i in enumerate(c.rows)
    ]
    caption = {}
    if res.caption_row is not None:
        caption = {
            (c.source, c.concept): str(pop.captions.text[r])
            for c, r in zip(scored, res.caption_row)
            if r >= 0
        }
    listing = [
        {
            "source": c.source,
            "concept": c.concept,
            "name": c.name,
            "size": len(c.rows),
            "scored": c.reason is None,
            "reason": c.reason,
            "caption": caption.get((c.source, c.concept)),
        }
        for c in concepts
    ]
    write_rows(ctx, "scoreboard_members", members, checkpoint_id=cid)
    write_rows(ctx, "scoreboard_null", nulls, checkpoint_id=cid)
    write_rows(ctx, "scoreboard_concepts", listing, checkpoint_id=cid)
    write_rows(
        ctx, "scoreboard_scores", rows, metadata=ANALYSIS.done_metadata(opts, inputs), checkpoint_id=cid
    )
    return inputs


def _f(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


ANALYSIS = Analysis(
    name="scoreboard",
    title="Every kind of concept scored alike: atoms, units, clusters, labels, random directions",
    writes=("scoreboard_members", "scoreboard_null", "scoreboard_concepts", "scoreboard_scores"),
    tables=(CONCEPTS, MEMBERS, SCORES, NULL),
    units=_units,
    run=_run,
    inputs=_inputs,
    depends=("clustering", "cluster_captions", "dictionary"),
    options=(
        Option("size", int, 0, "members N of every concept (0: n / 40 within [12, 50])", minimum=0),
        Option(
            "cluster_k",
            int,
            0,
            "k of the clusters scored (0: the smallest k the checkpoint is clustered at)",
            minimum=0,
        ),
        Option(
            "units_max", int, 0, "score a seeded sample of this many channels (0: every channel)", minimum=0
        ),
        Option("directions", int, 100, "random directions (the null read beside every source)", minimum=2),
        Option("n_null", int, 200, "random sets of N images, the null of every percentile", minimum=10),
        Option(
            "describe",
            bool,
            True,
            "skip describability (each concept's class-level caption retrieved against its "
            "checkpoint's cluster captions; needs captions, cluster_captions and the sentence model)",
        ),
        BOOTSTRAP,
        ANNOTATOR,
        TRIALS,
        REFS,
        ONLY,
    ),
    doc=__doc__.splitlines()[0],
)
