"""The Similarity page: people's similarity judgments (roads2021), the psychological
embedding inferred from them, and how well each checkpoint agrees with people.

`references` is an SQL keyword: the column is always quoted.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..embedding.psych import psych_id
from ..metrics.similarity import BETA
from .home import factors


def datasets(db) -> pd.DataFrame:
    """Datasets with similarity trials: `dataset`, `embedded` (its embedding is computed),
    those first."""
    if not db.has("similarity_trials"):
        return pd.DataFrame({"dataset": pd.Series(dtype=str), "embedded": pd.Series(dtype=bool)})
    if not db.has("psych_embedding"):
        return db.query("SELECT DISTINCT dataset, false AS embedded FROM similarity_trials ORDER BY dataset")
    return db.query("""
        SELECT t.dataset, e.dataset IS NOT NULL AS embedded
        FROM (SELECT DISTINCT dataset FROM similarity_trials) t
        LEFT JOIN (SELECT DISTINCT dataset FROM psych_embedding) e USING (dataset)
        ORDER BY embedded DESC, t.dataset""")


def trial_summary(db, dataset: str) -> pd.DataFrame:
    """One row: trials, catch trials, train / test, people, images, mean weight, and
    `simulated` (every agent id starts with `simulated-`)."""
    return db.query(
        """
        SELECT count(*) AS trials, count(*) FILTER (WHERE is_catch) AS catch,
               count(*) FILTER (WHERE split = 'train' AND NOT is_catch) AS train,
               count(*) FILTER (WHERE split = 'test' AND NOT is_catch) AS test,
               count(DISTINCT agent_id) AS people,
               (SELECT count(DISTINCT i) FROM (SELECT unnest("references") AS i FROM similarity_trials
                                               WHERE dataset = $ds)) AS images,
               avg(weight) AS mean_weight, median(rt_ms) / 1000 AS median_seconds,
               string_agg(DISTINCT kind, ', ') AS kinds,
               bool_and(starts_with(coalesce(agent_id, ''), 'simulated-')) AS simulated
        FROM similarity_trials WHERE dataset = $ds""",
        {"ds": dataset},
    )


# ---- the embedding and its map -------------------------------------------------------------
def embedding_points(db, dataset: str, limit: int = 20_000) -> pd.DataFrame:
    """The 2-D UMAP of the psychological embedding (a fixed sample above `limit`): x, y and
    every column of `images`."""
    return db.query(
        """
        SELECT p.image_id, p.x, p.y, i.* EXCLUDE (image_id)
        FROM projections p JOIN images i USING (image_id)
        WHERE p.checkpoint_id = $pid AND p.method = 'umap'
        ORDER BY hash(p.image_id), p.image_id LIMIT $n""",
        {"pid": psych_id(dataset), "n": int(limit)},
    )


def colour_options(db, dataset: str) -> pd.DataFrame:
    """`column`: what the map can be coloured by."""
    return pd.DataFrame({"column": ["label_name", *factors(db, dataset)["column"], "split"]})


def embedded_images(db, dataset: str) -> pd.DataFrame:
    """The images of the embedding: image_id, label_name, thumbnail (in image id order)."""
    return db.query(
        """
        SELECT DISTINCT e.image_id, i.label_name, i.thumbnail
        FROM psych_embedding e JOIN images i USING (image_id)
        WHERE e.dataset = $ds ORDER BY e.image_id""",
        {"ds": dataset},
    )


def _embedding(db, dataset: str) -> tuple[np.ndarray, list[np.ndarray]]:
    t = db.query(
        "SELECT member, image_id, mu FROM psych_embedding WHERE dataset = $ds ORDER BY member, image_id",
        {"ds": dataset},
    )
    ids = None
    members = []
    for _, g in t.groupby("member", sort=True):
        ids = g["image_id"].to_numpy() if ids is None else ids
        members.append(np.stack(g["mu"].to_numpy()).astype(np.float64))
    return (np.array([], dtype=object) if ids is None else ids), members


def neighbours(db, dataset: str, image_id: str, checkpoint: str | None, k: int = 8) -> pd.DataFrame:
    """The `k` nearest images of `image_id` for people (the ensemble's mean similarity
    exp(-beta ||mu_i - mu_j||)) and for `checkpoint` (cosine similarity of its features),
    both among the embedded images: who, rank, image_id, similarity, label_name, thumbnail."""
    ids, members = _embedding(db, dataset)
    where = np.flatnonzero(ids == image_id)
    if len(where) == 0:
        return pd.DataFrame(columns=["who", "rank", "image_id", "similarity", "label_name", "thumbnail"])
    i = int(where[0])
    sim = np.mean([np.exp(-BETA * np.linalg.norm(m - m[i], axis=1)) for m in members], axis=0)
    order = [j for j in np.argsort(-sim, kind="stable") if ids[j] != image_id][:k]
    out = [
        {"who": "people", "rank": r + 1, "image_id": ids[j], "similarity": float(sim[j])}
        for r, j in enumerate(order)
    ]
    if checkpoint is not None:
        # In DuckDB: a checkpoint's features can be far larger than what a page should load.
        near = db.query(
            """
            WITH q AS (SELECT embedding FROM read_parquet($path) WHERE image_id = $img LIMIT 1)
            SELECT f.image_id, list_cosine_similarity(f.embedding, q.embedding) AS similarity
            FROM read_parquet($path) f, q
            WHERE f.image_id <> $img AND f.image_id IN (
                SELECT image_id FROM psych_embedding WHERE dataset = $ds AND member = 0)
            ORDER BY similarity DESC, f.image_id LIMIT $k""",
            {"path": str(db.features_path(checkpoint)), "img": image_id, "ds": dataset, "k": int(k)},
        )
        out += [
            {"who": checkpoint, "rank": r + 1, "image_id": i, "similarity": float(v)}
            for r, (i, v) in enumerate(zip(near["image_id"], near["similarity"]))
        ]
    df = pd.DataFrame(out)
    meta = db.query(
        "SELECT image_id, label_name, thumbnail FROM images WHERE list_contains($ids, image_id)",
        {"ids": list(df["image_id"])},
    )
    return df.merge(meta, on="image_id", how="left")


# ---- agreement with people -----------------------------------------------------------------
def alignment(db, dataset: str) -> pd.DataFrame:
    """Every checkpoint's overall scores: checkpoint_id, model, method, epoch, metric,
    distance, value, lo, hi, n, n_units."""
    return db.query(
        """
        SELECT h.checkpoint_id, c.model, c.method, c.epoch, h.metric, h.distance,
               h.value, h.lo, h.hi, h.n, h.n_units
        FROM human_alignment h JOIN checkpoints c USING (checkpoint_id)
        WHERE h.dataset = $ds AND h.label IS NULL
        ORDER BY h.metric, h.distance, h.checkpoint_id""",
        {"ds": dataset},
    )


def alignment_wide(db, dataset: str, distance: str) -> pd.DataFrame:
    """One row per checkpoint: triplet accuracy and RSA at `distance`, with intervals."""
    a = alignment(db, dataset)
    a = a[a["distance"] == distance]
    if a.empty:
        return pd.DataFrame(columns=["checkpoint_id", "method", "epoch"])
    wide = a.pivot(index="checkpoint_id", columns="metric", values=["value", "lo", "hi"])
    wide.columns = [f"{m}" if v == "value" else f"{m}_{v}" for v, m in wide.columns]
    info = a.drop_duplicates("checkpoint_id").set_index("checkpoint_id")[["method", "epoch"]]
    order = [
        f"{m}{s}"
        for m in ("triplet_accuracy", "rsa")
        for s in ("", "_lo", "_hi")
        if f"{m}{s}" in wide.columns
    ]
    out = info.join(wide[order]).reset_index()
    sort = "triplet_accuracy" if "triplet_accuracy" in out else out.columns[-1]
    return out.sort_values(sort, ascending=False).reset_index(drop=True)


def by_label(db, dataset: str, metric: str, distance: str) -> pd.DataFrame:
    """Per label and checkpoint: label, label_name, checkpoint_id, value, lo, hi, n."""
    return db.query(
        """
        SELECT label, label_name, checkpoint_id, value, lo, hi, n
        FROM human_alignment
        WHERE dataset = $ds AND metric = $m AND distance = $d AND label IS NOT NULL
        ORDER BY label, checkpoint_id""",
        {"ds": dataset, "m": metric, "d": distance},
    )


def people_reference(db, dataset: str) -> pd.DataFrame:
    """The psychological embedding's own triplet accuracy on held-out trials (roads2021
    Table 2's `Psych. Emb.`): mean, min, max over the kept members."""
    return db.query(
        """
        SELECT avg(heldout_triplet_accuracy) AS value, min(heldout_triplet_accuracy) AS lo,
               max(heldout_triplet_accuracy) AS hi, any_value(dim) AS dim, count(*) AS members
        FROM similarity_fit WHERE dataset = $ds AND selected""",
        {"ds": dataset},
    )


# ---- the fit -------------------------------------------------------------------------------
def fit(db, dataset: str) -> pd.DataFrame:
    """`similarity_fit` of the dataset, with `chance_accuracy` (1 over the outcomes of its
    trials' most common kind)."""
    f = db.query("SELECT * FROM similarity_fit WHERE dataset = $ds ORDER BY dim, member", {"ds": dataset})
    kind = db.query("SELECT mode(kind) AS kind FROM similarity_trials WHERE dataset = $ds", {"ds": dataset})
    f["chance_accuracy"] = _chance(kind["kind"].iloc[0] if len(kind) else None)
    return f


def _chance(kind: str | None) -> float:
    m = re.fullmatch(r"(\d+)rank(\d+)", kind or "")
    if not m:
        return float("nan")
    n, k = int(m.group(1)), int(m.group(2))
    return 1.0 / float(np.prod(np.arange(n - k + 1, n + 1)))


# ---- trials --------------------------------------------------------------------------------
def trial_count(db, dataset: str, catch: bool = False) -> pd.DataFrame:
    return db.query(
        "SELECT count(*) AS n FROM similarity_trials WHERE dataset = $ds AND is_catch = $c",
        {"ds": dataset, "c": bool(catch)},
    )


def trial(db, dataset: str, index: int, catch: bool = False) -> pd.DataFrame:
    """The `index`-th trial (by trial id; catch trials or the others): one row per image
    shown: role (`query`, `reference`), position, choice (1, 2, ... or null), image_id,
    label_name, thumbnail, and the trial's fields."""
    t = db.query(
        """
        SELECT trial_id, agent_id, query, "references" AS refs, chosen, weight, rt_ms, split, kind
        FROM similarity_trials WHERE dataset = $ds AND is_catch = $c
        ORDER BY trial_id LIMIT 1 OFFSET $i""",
        {"ds": dataset, "c": bool(catch), "i": int(index)},
    )
    if t.empty:
        return pd.DataFrame()
    r = t.iloc[0]
    chosen = list(r["chosen"])
    rows = [{"role": "query", "position": 0, "choice": None, "image_id": r["query"]}]
    rows += [
        {
            "role": "reference",
            "position": p + 1,
            "choice": chosen.index(x) + 1 if x in chosen else None,
            "image_id": x,
        }
        for p, x in enumerate(r["refs"])
    ]
    df = pd.DataFrame(rows)
    meta = db.query(
        "SELECT image_id, label_name, thumbnail FROM images WHERE list_contains($ids, image_id)",
        {"ids": list(df["image_id"])},
    )
    df = df.merge(meta, on="image_id", how="left")
    for col in ("trial_id", "agent_id", "weight", "rt_ms", "split", "kind"):
        df[col] = r[col]
    df["choice"] = df["choice"].astype("Int64")
    return df


def model_choices(db, trial_rows: pd.DataFrame, checkpoint: str) -> pd.DataFrame:
    """What `checkpoint` would choose in this trial: its references by cosine similarity
    to the query, most similar first (image_id, rank, similarity)."""
    if trial_rows.empty:
        return pd.DataFrame(columns=["image_id", "rank", "similarity"])
    ids, X = db.features(checkpoint, image_ids=list(trial_rows["image_id"].unique()))
    pos = {s: k for k, s in enumerate(ids)}
    q = trial_rows.loc[trial_rows["role"] == "query", "image_id"].iloc[0]
    refs = [x for x in trial_rows.loc[trial_rows["role"] == "reference", "image_id"] if x in pos]
    if q not in pos or not refs:
        return pd.DataFrame(columns=["image_id", "rank", "similarity"])
    Xn = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
    s = np.array([Xn[pos[x]] @ Xn[pos[q]] for x in refs])
    order = np.argsort(-s, kind="stable")
    return pd.DataFrame(
        {"image_id": [refs[j] for j in order], "rank": np.arange(1, len(refs) + 1), "similarity": s[order]}
    )


def checkpoints(db, dataset: str) -> pd.DataFrame:
    """Checkpoints of the dataset scored against people."""
    if not db.has("human_alignment"):
        return pd.DataFrame({"checkpoint_id": pd.Series(dtype=str)})
    return db.query(
        "SELECT DISTINCT checkpoint_id FROM human_alignment WHERE dataset = $ds ORDER BY checkpoint_id",
        {"ds": dataset},
    )


# ---- convergence ---------------------------------------------------------------------------
def convergence(db, dataset: str) -> pd.DataFrame:
    """`similarity_convergence` of the dataset, by round (empty before the analysis ran)."""
    if not db.has("similarity_convergence"):
        return pd.DataFrame(
            columns=[
                "round",
                "n_trials",
                "dim",
                "members",
                "coarse_loss",
                "within_agreement",
                "across_agreement",
            ]
        )
    return db.query(
        "SELECT * EXCLUDE (dataset) FROM similarity_convergence WHERE dataset = $ds ORDER BY round",
        {"ds": dataset},
    )
