"""The Scoreboard page: every kind of concept of a checkpoint scored alike (the `scoreboard`
analysis, conceptlens/analysis/scoreboard.py), read from its tables.

Sources are those the analysis declares (`SOURCES`): their order is the order of every
table and legend here. Intervals computed at read time (a source's mean over its
concepts) resample the concepts with the seed and resample count the checkpoint's unit
was computed with (`resampling`), each source on its own stream
(`rng.stream(seed, "scoreboard.view.source_mean", source)`).
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd

from .. import rng as rngs
from ..analysis.scoreboard import ANALYSIS, BY_NAME, SOURCE_NAMES, SOURCES
from ..metrics.bootstrap import mean_stats, percentile_interval
from ..metrics.dictionary import match_atoms
from . import projection_window as PW

# A concept's projection draws every image up to this many; beyond, the other images are
# binned (`projection_density`) and its members alone are points.
PROJECTION_POINTS, PROJECTION_BINS = 5_000, 100
# The scores of the per-source summary, in this order (those a checkpoint has).
MAIN_SCORES = (
    "purity_label",
    "coherence_random",
    "coherence_hard",
    "describability_top1",
    "learnability",
    "intrinsic_dim",
)
# The first of these a checkpoint has is the score it is ranked by at first.
DEFAULT_SCORES = ("purity_label", "learnability")
# The scatter's axes.
SCATTER_X, SCATTER_Y = "coherence_random", "purity_label"
PURPOSE = "scoreboard.view.source_mean"
SEP = "/"  # a concept's key: SOURCE/CONCEPT (a source has no "/")


def _empty(**cols) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in cols.items()})


def source_rank(source: str) -> int:
    """A source's place in `SOURCES` (an unknown one after them all)."""
    return SOURCE_NAMES.index(source) if source in SOURCE_NAMES else len(SOURCE_NAMES)


def concept_key(source: str, concept: str) -> str:
    return f"{source}{SEP}{concept}"


def split_key(key: str) -> tuple[str, str]:
    """(source, concept) of a `concept_key`; ValueError when it is none."""
    source, sep, concept = str(key).partition(SEP)
    if not sep or not source:
        raise ValueError(f"concept {key!r} is not SOURCE{SEP}CONCEPT")
    return source, concept


def _natural(text) -> tuple:
    """Sort key: runs of digits compare as numbers (atom 2 before atom 10)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", str(text)) if p)


def datasets(db) -> pd.DataFrame:
    """Datasets some checkpoint of which has a scoreboard."""
    if not db.has("scoreboard_scores"):
        return _empty(dataset=str)
    return db.query("""
        SELECT DISTINCT c.dataset FROM (SELECT DISTINCT checkpoint_id FROM scoreboard_scores) s
        JOIN checkpoints c USING (checkpoint_id) ORDER BY c.dataset""")


def checkpoints(db, dataset: str) -> pd.DataFrame:
    """Checkpoints of `dataset` with a scoreboard: checkpoint_id, epoch, depth, layer,
    feature_dim (missing where the workspace does not say), ordered by epoch, then depth,
    then id (the axis of "across checkpoints and layers")."""
    if not db.has("scoreboard_scores"):
        return _empty(checkpoint_id=str, epoch=float, depth=float, layer=str, feature_dim=float)
    cols = set(db.columns("checkpoints"))
    sel = ", ".join(
        f"c.{c}" if c in cols else f"NULL::{t} AS {c}"
        for c, t in (
            ("epoch", "DOUBLE"),
            ("depth", "DOUBLE"),
            ("layer", "VARCHAR"),
            ("feature_dim", "DOUBLE"),
        )
    )
    return db.query(
        f"""
        SELECT c.checkpoint_id, {sel}
        FROM (SELECT DISTINCT checkpoint_id FROM scoreboard_scores) s
        JOIN checkpoints c USING (checkpoint_id)
        WHERE c.dataset = $ds
        ORDER BY epoch NULLS LAST, depth NULLS LAST, c.checkpoint_id""",
        {"ds": dataset},
    )


def scores(db, checkpoint: str) -> list[str]:
    """The scores of the checkpoint's scoreboard: MAIN_SCORES first, the others by name."""
    have = set(
        db.query(
            "SELECT DISTINCT score FROM scoreboard_scores WHERE checkpoint_id = $ckpt", {"ckpt": checkpoint}
        )["score"]
    )
    return [s for s in MAIN_SCORES if s in have] + sorted(have - set(MAIN_SCORES))


def default_score(names) -> str | None:
    names = list(names)
    return next((s for s in DEFAULT_SCORES if s in names), names[0] if names else None)


def sources(db, checkpoint: str) -> list[str]:
    """The sources of the checkpoint's concepts, in `SOURCES` order."""
    have = db.query(
        "SELECT DISTINCT source FROM scoreboard_concepts WHERE checkpoint_id = $ckpt", {"ckpt": checkpoint}
    )["source"]
    return sorted(set(have), key=lambda s: (source_rank(s), s))


def _only(df: pd.DataFrame, chosen) -> pd.DataFrame:
    return df if chosen is None else df[df["source"].isin(list(chosen))]


def matched_size(db, checkpoint: str) -> int | None:
    """N, the member count every scored concept has."""
    n = db.query(
        "SELECT max(size) AS n FROM scoreboard_concepts WHERE checkpoint_id = $ckpt AND scored",
        {"ckpt": checkpoint},
    )["n"]
    return None if n.empty or pd.isna(n.iloc[0]) else int(n.iloc[0])


def order(df: pd.DataFrame, by: str = "value") -> pd.DataFrame:
    """Rows by `by` descending, missing values last; ties by source (SOURCES order), then
    concept (digits as numbers)."""
    if df.empty:
        return df.reset_index(drop=True)
    keys = pd.DataFrame(
        {
            "missing": df[by].isna().to_numpy(),
            "neg": -df[by].astype(float).fillna(0.0).to_numpy(),
            "src": [source_rank(s) for s in df["source"]],
            "srcname": df["source"].astype(str).to_numpy(),
            "concept": [_natural(c) for c in df["concept"]],
        },
        index=df.index,
    )
    idx = sorted(df.index, key=lambda i: tuple(keys.loc[i]))
    return df.loc[idx].reset_index(drop=True)


def ranked(db, checkpoint: str, score: str, chosen=None) -> pd.DataFrame:
    """Every scored concept of the checkpoint with its `score`: source, concept, key, name,
    size, value, lo, hi, pct_random, pct_directions, rank (1 first; missing values last)."""
    df = db.query(
        """
        SELECT c.source, c.concept, c.name, c.size, s.value, s.lo, s.hi, s.pct_random, s.pct_directions
        FROM scoreboard_concepts c
        LEFT JOIN (SELECT * FROM scoreboard_scores WHERE checkpoint_id = $ckpt AND score = $score) s
               USING (source, concept)
        WHERE c.checkpoint_id = $ckpt AND c.scored""",
        {"ckpt": checkpoint, "score": score},
    )
    df = order(_only(df, chosen))
    df.insert(2, "key", [concept_key(s, c) for s, c in zip(df["source"], df["concept"])])
    df.insert(0, "rank", np.arange(1, len(df) + 1))
    return df


def unscored(db, checkpoint: str, chosen=None) -> pd.DataFrame:
    """Concepts listed but not scored (fewer than N members): source, concept, name, size, reason."""
    df = db.query(
        """
        SELECT source, concept, name, size, reason FROM scoreboard_concepts
        WHERE checkpoint_id = $ckpt AND NOT scored""",
        {"ckpt": checkpoint},
    )
    return order(_only(df, chosen).assign(neg=0.0), "neg").drop(columns="neg")


def null_bands(db, checkpoint: str) -> pd.DataFrame:
    """The checkpoint's nulls: null, score, n, median, lo (2.5%), hi (97.5%)."""
    return db.query(
        'SELECT "null", score, n, median, lo, hi FROM scoreboard_null WHERE checkpoint_id = $ckpt '
        'ORDER BY "null", score',
        {"ckpt": checkpoint},
    )


def scatter_points(db, checkpoint: str, chosen=None) -> pd.DataFrame:
    """Every scored concept with both SCATTER_X and SCATTER_Y: source, concept, name, x, y."""
    df = db.query(
        """
        SELECT c.source, c.concept, c.name, x.value AS x, y.value AS y
        FROM scoreboard_concepts c
        JOIN scoreboard_scores x ON x.checkpoint_id = c.checkpoint_id AND x.source = c.source
             AND x.concept = c.concept AND x.score = $x
        JOIN scoreboard_scores y ON y.checkpoint_id = c.checkpoint_id AND y.source = c.source
             AND y.concept = c.concept AND y.score = $y
        WHERE c.checkpoint_id = $ckpt AND c.scored AND x.value IS NOT NULL AND y.value IS NOT NULL""",
        {"ckpt": checkpoint, "x": SCATTER_X, "y": SCATTER_Y},
    )
    return order(_only(df, chosen).assign(v=0.0), "v").drop(columns="v")


def resampling(db, checkpoint: str) -> tuple[int, int]:
    """(bootstrap resamples, seed) the checkpoint's scoreboard was computed with: the
    options stored in the footer of its `scoreboard_scores` file, completed by the
    analysis' defaults (a file without them)."""
    # Counted through the table, so a cache keyed by the tables read follows a new run.
    rows = db.query(
        "SELECT count(*) AS n FROM scoreboard_scores WHERE checkpoint_id = $ckpt", {"ckpt": checkpoint}
    )["n"].iloc[0]
    files = []
    if rows:
        try:
            files = [str(f) for f in db.ws.partition_files("scoreboard_scores", checkpoint_id=checkpoint)]
        except (AttributeError, OSError, ValueError):  # a remote workspace: no file listing
            files = []
    raw = None
    if files:
        md = db.query(
            "SELECT decode(value) AS value FROM parquet_kv_metadata($files) "
            "WHERE decode(key) = 'conceptlens'",
            {"files": files},
        )
        raw = md["value"].iloc[-1] if len(md) else None
    try:
        stored = json.loads(raw).get("analysis_options") if raw else None
    except (ValueError, AttributeError):
        stored = None
    opts = ANALYSIS.stored_options(stored)
    return int(opts["bootstrap"]), int(opts["seed"])


def source_mean(values, n_boot: int, seed: int, source: str) -> tuple[float, float, float]:
    """Mean of a source's per-concept values and its 95% percentile-bootstrap interval
    (concepts resampled; `rng.stream(seed, PURPOSE, source)`); missing values dropped.
    `n_boot` 0 (the scoreboard's `--bootstrap 0`): no interval."""
    v = np.asarray(values, np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return math.nan, math.nan, math.nan
    m = float(v.mean())
    if v.size == 1 or n_boot < 1:  # one concept, or a scoreboard computed without intervals
        return m, math.nan, math.nan
    lo, hi = percentile_interval(mean_stats(v, n_boot, rngs.stream(seed, PURPOSE, source)), m)
    return m, lo, hi


def source_summary(db, checkpoint: str, score_names=None, chosen=None) -> pd.DataFrame:
    """One row per source and score (MAIN_SCORES the checkpoint has, or `score_names`):
    source, score, n (scored concepts with a value), mean, lo, hi (95%, `source_mean`),
    above (share of them above the random directions' 97.5% quantile; missing without it)."""
    names = (
        [s for s in MAIN_SCORES if s in scores(db, checkpoint)] if score_names is None else list(score_names)
    )
    cols = dict(source=str, score=str, n=int, mean=float, lo=float, hi=float, above=float)
    if not names:
        return _empty(**cols)
    vals = db.query(
        """
        SELECT s.source, s.concept, s.score, s.value FROM scoreboard_scores s
        JOIN scoreboard_concepts c USING (checkpoint_id, source, concept)
        WHERE s.checkpoint_id = $ckpt AND c.scored AND list_contains($names, s.score)""",
        {"ckpt": checkpoint, "names": names},
    )
    vals = _only(vals, chosen)
    band = null_bands(db, checkpoint)
    line = dict(
        zip(
            band.loc[band["null"] == "random_directions", "score"],
            band.loc[band["null"] == "random_directions", "hi"],
        )
    )
    n_boot, seed = resampling(db, checkpoint)
    rows = []
    for src in sorted(set(vals["source"]), key=lambda s: (source_rank(s), s)):
        for score in names:
            v = vals.loc[(vals["source"] == src) & (vals["score"] == score), "value"].astype(float)
            v = v[np.isfinite(v)]
            if v.empty:
                continue
            m, lo, hi = source_mean(v, n_boot, seed, src)
            t = line.get(score)
            above = float((v > t).mean()) if t is not None and pd.notna(t) else math.nan
            rows.append(dict(source=src, score=score, n=len(v), mean=m, lo=lo, hi=hi, above=above))
    return pd.DataFrame(rows) if rows else _empty(**cols)


def source_values(db, checkpoint: str, score: str, chosen=None) -> pd.DataFrame:
    """The `score` of every scored concept with a value: source, concept, name, value."""
    df = ranked(db, checkpoint, score, chosen)
    return df.loc[df["value"].notna(), ["source", "concept", "name", "value"]].reset_index(drop=True)


def concept(db, checkpoint: str, source: str, concept: str) -> pd.DataFrame:
    """The concept's listing row: source, concept, name, size, scored, reason (none if absent)."""
    return db.query(
        """
        SELECT source, concept, name, size, scored, reason FROM scoreboard_concepts
        WHERE checkpoint_id = $ckpt AND source = $src AND concept = $c""",
        {"ckpt": checkpoint, "src": source, "c": concept},
    )


def concept_scores(db, checkpoint: str, source: str, concept: str) -> pd.DataFrame:
    """Every score of one concept: score, value, lo, hi, pct_random, pct_directions."""
    df = db.query(
        """
        SELECT score, value, lo, hi, pct_random, pct_directions FROM scoreboard_scores
        WHERE checkpoint_id = $ckpt AND source = $src AND concept = $c""",
        {"ckpt": checkpoint, "src": source, "c": concept},
    )
    rank = {s: i for i, s in enumerate(MAIN_SCORES)}
    return df.sort_values("score", key=lambda s: s.map(lambda x: (rank.get(x, len(rank)), x))).reset_index(
        drop=True
    )


def members(db, checkpoint: str, source: str, concept: str) -> pd.DataFrame:
    """The concept's members, rank order: rank, image_id, weight, label_name, thumbnail."""
    return db.query(
        """
        SELECT m.rank, m.image_id, m.weight, i.label_name, i.thumbnail
        FROM scoreboard_members m LEFT JOIN images i USING (image_id)
        WHERE m.checkpoint_id = $ckpt AND m.source = $src AND m.concept = $c
        ORDER BY m.rank, m.image_id""",
        {"ckpt": checkpoint, "src": source, "c": concept},
    )


def caption(db, checkpoint: str, source: str, concept: str) -> str | None:
    """The concept's class-level caption (its describability's, laina2020's Eq. 4), or None:
    not scored for describability, or a workspace written before format 2.6."""
    if "caption" not in db.columns("scoreboard_concepts"):
        return None
    got = db.query(
        """
        SELECT caption FROM scoreboard_concepts
        WHERE checkpoint_id = $ckpt AND source = $src AND concept = $c AND caption IS NOT NULL""",
        {"ckpt": checkpoint, "src": source, "c": concept},
    )
    return str(got["caption"].iloc[0]) if len(got) else None


def _projection_method(db, checkpoint: str) -> str | None:
    """The checkpoint's projection the page shows: UMAP when it has one, else its first."""
    got = db.query(
        """SELECT DISTINCT method FROM projections WHERE checkpoint_id = $ckpt
           ORDER BY method <> 'umap', method LIMIT 1""",
        {"ckpt": checkpoint},
    )
    return str(got["method"].iloc[0]) if len(got) else None


def projection(
    db, checkpoint: str, source: str, concept: str, limit: int = PROJECTION_POINTS
) -> pd.DataFrame:
    """The checkpoint's 2-D projection (`_projection_method`): image_id, x, y, member (the
    concept's members), rank (theirs; missing otherwise). A projection of more than `limit`
    points gives its members alone: the other images are `projection_density`'s."""
    empty = _empty(image_id=str, x=float, y=float, member=bool, rank=float)
    method = _projection_method(db, checkpoint) if db.has("projections") else None
    if method is None:
        return empty
    _, n = PW.whole_viewport(db, checkpoint, method)
    return db.query(
        f"""
        WITH m AS (SELECT image_id, rank FROM scoreboard_members
                   WHERE checkpoint_id = $ckpt AND source = $src AND concept = $c)
        SELECT p.image_id, p.x, p.y, m.rank IS NOT NULL AS member, m.rank
        FROM projections p {"LEFT" if n <= limit else ""} JOIN m USING (image_id)
        WHERE p.checkpoint_id = $ckpt AND p.method = $m
        ORDER BY member, p.image_id""",
        {"ckpt": checkpoint, "src": source, "c": concept, "m": method},
    )


def projection_density(
    db, checkpoint: str, limit: int = PROJECTION_POINTS, bins: int = PROJECTION_BINS
) -> pd.DataFrame:
    """Where the checkpoint's images lie when its projection (`_projection_method`) has
    more than `limit` points, too many to send and draw one by one: a `bins` x `bins`
    histogram of all of them, one row per non-empty bin (`ix`, `iy`, `count`, and the grid's
    `bins` a side, `x0`, `dx`, `y0`, `dy`: bin (ix, iy) starts at x0 + ix dx, y0 + iy dy).
    No rows for a projection of at most `limit` points (`projection` gives every point)."""
    empty = _empty(ix=int, iy=int, count=int, bins=int, x0=float, dx=float, y0=float, dy=float)
    method = _projection_method(db, checkpoint) if db.has("projections") else None
    if method is None:
        return empty
    viewport, n = PW.whole_viewport(db, checkpoint, method)
    if n <= limit:
        return empty
    x0, x1, y0, y1 = viewport
    out = PW.counts(db, checkpoint, viewport, method, bins)
    return out.assign(bins=int(bins), x0=x0, dx=(x1 - x0) / bins, y0=y0, dy=(y1 - y0) / bins)


def jaccard(a, b) -> float:
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else math.nan


def best_match(members, candidates: dict, prefer=None) -> tuple:
    """(concept, Jaccard) of the candidate (concept -> its members) whose members overlap
    `members` most; ties go to `prefer` when it is among them, else to the lowest concept
    (digits as numbers). (None, nan) without candidates."""
    if not candidates:
        return None, math.nan
    scores = {c: jaccard(members, m) for c, m in candidates.items()}
    top = max(scores.values())
    tied = [c for c, j in scores.items() if j == top]
    return (prefer if prefer in tied else min(tied, key=_natural)), top


def _vectors(db, checkpoints: list[str], method: str) -> dict:
    """(checkpoint, atom) -> the atom's vector, for `method`'s atoms of `checkpoints`."""
    if not db.has("dictionary_atoms") or not checkpoints:
        return {}
    df = db.query(
        """
        SELECT checkpoint_id, atom, vector FROM dictionary_atoms
        WHERE list_contains($cks, checkpoint_id) AND method = $m""",
        {"cks": list(checkpoints), "m": method},
    )
    return {
        (c, str(a)): np.asarray(v, np.float64)
        for c, a, v in zip(df["checkpoint_id"], df["atom"], df["vector"])
    }


def _atom_partner(vectors: dict, checkpoint: str, atom: str, other: str) -> str | None:
    """The atom of checkpoint `other` matched to `atom` of `checkpoint` by the Hungarian
    method on |cosine| between the two dictionaries (`vectors`: (checkpoint, atom) ->
    vector, one method), as across seeds; None without both dictionaries or a partner."""
    if (checkpoint, atom) not in vectors:
        return None
    if other == checkpoint:
        return atom
    mine = sorted((a for k, a in vectors if k == checkpoint), key=_natural)
    theirs = sorted((a for k, a in vectors if k == other), key=_natural)
    if not theirs:
        return None
    index, _ = match_atoms(
        np.stack([vectors[(checkpoint, a)] for a in mine]), np.stack([vectors[(other, a)] for a in theirs])
    )
    i = index[mine.index(atom)]
    return theirs[i] if i >= 0 else None


def abs_cosine(u, v) -> float:
    u, v = np.asarray(u, np.float64), np.asarray(v, np.float64)
    if u.shape != v.shape or u.size == 0:
        return math.nan
    nu, nv = float(np.linalg.norm(u)), float(np.linalg.norm(v))
    return abs(float(u @ v)) / (nu * nv) if nu > 0 and nv > 0 else math.nan


def across(db, dataset: str, checkpoint: str, source: str, concept: str, score: str) -> pd.DataFrame:
    """The concept across the dataset's checkpoints with a scoreboard (epoch, then depth
    order): in each, its match and the match's `score`. A dictionary atom is matched to an
    atom of the same method where the checkpoints' features are of equal width, as the
    dictionary's stability matches atoms across seeds (`metrics.dictionary.match_atoms`:
    the Hungarian method on |cosine| between the two dictionaries); any other concept (and
    an atom across widths) to the scored concept of the same source with the largest
    Jaccard overlap of members (ties: the lower concept, digits as numbers; in the
    checkpoint chosen, the concept itself). Columns: checkpoint_id, epoch, depth, layer,
    concept, name, matched ("atoms": Hungarian on |cosine|; "members": Jaccard), jaccard
    (of the two member sets), cosine (|cosine| of the two atoms, else missing), value, lo,
    hi, this (the checkpoint chosen). A checkpoint without a match has a row of missing
    values."""
    cks = checkpoints(db, dataset)
    cols = dict(
        checkpoint_id=str, epoch=float, depth=float, layer=str, concept=str, name=str,
        matched=str, jaccard=float, cosine=float, value=float, lo=float, hi=float, this=bool,
    )  # fmt: skip
    if cks.empty or checkpoint not in set(cks["checkpoint_id"]):
        return _empty(**cols)
    mem = db.query(
        """
        SELECT m.checkpoint_id, m.concept, m.image_id FROM scoreboard_members m
        JOIN scoreboard_concepts c USING (checkpoint_id, source, concept)
        WHERE m.source = $src AND c.scored AND list_contains($cks, m.checkpoint_id)""",
        {"src": source, "cks": list(cks["checkpoint_id"])},
    )
    sc = db.query(
        """
        SELECT checkpoint_id, concept, value, lo, hi FROM scoreboard_scores
        WHERE source = $src AND score = $score AND list_contains($cks, checkpoint_id)""",
        {"src": source, "score": score, "cks": list(cks["checkpoint_id"])},
    )
    scored = {(c, k): (v, lo, hi) for c, k, v, lo, hi in sc.itertuples(index=False)}
    mine = set(mem.loc[(mem["checkpoint_id"] == checkpoint) & (mem["concept"] == concept), "image_id"])
    if not mine:
        return _empty(**cols)
    dims = dict(zip(cks["checkpoint_id"], cks["feature_dim"]))
    vectors = {}
    if source.startswith("dictionary:"):
        vectors = _vectors(db, list(cks["checkpoint_id"]), source.split(":", 1)[1])
    names = db.query(
        """
        SELECT checkpoint_id, concept, name FROM scoreboard_concepts
        WHERE source = $src AND list_contains($cks, checkpoint_id)""",
        {"src": source, "cks": list(cks["checkpoint_id"])},
    )
    name_of = {(k, c): n for k, c, n in names.itertuples(index=False)}
    rows = []
    for ck in cks.itertuples(index=False):
        of = mem[mem["checkpoint_id"] == ck.checkpoint_id]
        groups = {c: set(g["image_id"]) for c, g in of.groupby("concept", sort=False)}
        same_dim = pd.notna(dims.get(checkpoint)) and dims.get(checkpoint) == dims.get(ck.checkpoint_id)
        partner = _atom_partner(vectors, checkpoint, concept, ck.checkpoint_id) if same_dim else None
        if partner is not None:
            c, matched = partner, "atoms"
            j = jaccard(mine, groups[c]) if c in groups else math.nan
        else:
            c, j = best_match(mine, groups, concept if ck.checkpoint_id == checkpoint else None)
            matched = "members" if c is not None else None
        u, v = vectors.get((checkpoint, concept)), vectors.get((ck.checkpoint_id, c))
        cos = abs_cosine(u, v) if u is not None and v is not None and same_dim else math.nan
        val, lo, hi = scored.get((ck.checkpoint_id, c), (math.nan, math.nan, math.nan))
        rows.append(
            dict(
                checkpoint_id=ck.checkpoint_id,
                epoch=ck.epoch,
                depth=ck.depth,
                layer=ck.layer,
                concept=c,
                name=name_of.get((ck.checkpoint_id, c)),
                matched=matched,
                jaccard=j,
                cosine=cos,
                value=val,
                lo=lo,
                hi=hi,
                this=ck.checkpoint_id == checkpoint,
            )  # fmt: skip
        )
    out = pd.DataFrame(rows) if rows else _empty(**cols)
    return out.astype({"value": float, "lo": float, "hi": float, "cosine": float, "jaccard": float})


def dictionary_fit(db, checkpoint: str) -> pd.DataFrame:
    """The checkpoint's dictionaries: method, atoms, r2, l0, dead, stability."""
    if not db.has("dictionary_fit"):
        return _empty(method=str, atoms=int, r2=float, l0=float, dead=int, stability=float)
    return db.query(
        "SELECT method, atoms, r2, l0, dead, stability FROM dictionary_fit WHERE checkpoint_id = $ckpt "
        "ORDER BY method",
        {"ckpt": checkpoint},
    )


def source_table() -> pd.DataFrame:
    """The sources as the analysis declares them: source, title, role, members."""
    return pd.DataFrame([(s.name, s.title, s.role, s.members) for s in SOURCES],
                        columns=["source", "title", "role", "members"])  # fmt: skip


def title(source: str) -> str:
    """A source's title (`SOURCES`); an unknown source's stored name."""
    return BY_NAME[source].title if source in BY_NAME else str(source)


projection.large = True  # every image of the checkpoint: the app caches few of them
