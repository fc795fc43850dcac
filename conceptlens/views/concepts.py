"""The Concepts page: purity matrices, oracle impurity and concept niches of every checkpoint
of a concept dataset (the concept-quality paper), read from the `concepts` analysis' tables.

Intervals (95%, Student t, clipped to where a score can lie): a checkpoint's are over its
analysis seeds; a method's at one dependency level are over its checkpoints (training
seeds) when it has several, each the mean over its analysis seeds, otherwise over the
analysis seeds of its one checkpoint.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..metrics.concepts import mean_interval

SCORES = {
    "ois": "oracle impurity (OIS)",
    "non_oracle_impurity": "non-oracle impurity",
    "nps_beta": "niche purity",
    "nis_beta": "niche impurity",
    "nis_area": "niche impurity (area over beta)",
    "mean_niche_size": "mean niche size",
    "task_auc": "task AUC",
}
NICHE_SCORES = {"nps": "niche purity", "nis": "niche impurity", "niche_size": "niche size"}
# Where each score can lie: a t-interval over a few seeds is clipped to it.
RANGE = {"ois": (0.0, 2.0), "non_oracle_impurity": (0.0, 2.0), "mean_niche_size": (0.0, np.inf)}
RANGE |= {"niche_size": (0.0, np.inf)}


def interval(values, score: str) -> tuple[float, float, float]:
    """Mean and 95% t-interval of `values` (over seeds), clipped to the score's range
    (AUCs: [0, 1])."""
    m, lo, hi = mean_interval(values)
    a, b = RANGE.get(score, (0.0, 1.0))
    return m, (lo if np.isnan(lo) else max(lo, a)), (hi if np.isnan(hi) else min(hi, b))


def _empty(**cols) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in cols.items()})


def datasets(db) -> pd.DataFrame:
    """Datasets with ground-truth concepts: dataset, family, dependency, level, images,
    concepts, analysed (some checkpoint of it has concept scores); by family and level."""
    if not (db.has("concept_labels") and db.has("images")):
        return _empty(
            dataset=str, family=str, dependency=str, level=float, images=int, concepts=int, analysed=bool
        )
    cd = (
        "SELECT dataset, family, dependency, level FROM concept_datasets"
        if db.has("concept_datasets")
        else "SELECT NULL::VARCHAR AS dataset, NULL::VARCHAR AS family, NULL::VARCHAR AS dependency, "
        "NULL::DOUBLE AS level WHERE false"
    )
    scored = (
        "SELECT DISTINCT c.dataset FROM concept_scores s JOIN checkpoints c USING (checkpoint_id)"
        if db.has("concept_scores")
        else "SELECT NULL::VARCHAR AS dataset WHERE false"
    )
    return db.query(f"""
        WITH labelled AS (
            SELECT i.dataset, count(DISTINCT l.image_id) AS images, count(DISTINCT l.concept) AS concepts
            FROM concept_labels l JOIN images i USING (image_id) GROUP BY i.dataset),
        cd AS ({cd}), scored AS ({scored})
        SELECT l.dataset, coalesce(cd.family, l.dataset) AS family,
               coalesce(cd.dependency, '') AS dependency, coalesce(cd.level, 0.0) AS level,
               l.images, l.concepts, s.dataset IS NOT NULL AS analysed
        FROM labelled l LEFT JOIN cd USING (dataset) LEFT JOIN scored s USING (dataset)
        ORDER BY family, level, l.dataset""")


def checkpoints(db, dataset: str) -> pd.DataFrame:
    """Checkpoints of `dataset`: checkpoint_id, method, seed (its run where that names one
    checkpoint of the method, else its id), concepts (`learnt` or `probe`), k, analysed."""
    cols = db.columns("checkpoints")
    names = "c.concept_names" if "concept_names" in cols else "NULL::VARCHAR[]"
    run = "c.run" if "run" in cols else "NULL::VARCHAR"
    scored = (
        "SELECT DISTINCT checkpoint_id FROM concept_scores"
        if db.has("concept_scores")
        else "SELECT NULL::VARCHAR AS checkpoint_id WHERE false"
    )
    true_k = (
        "SELECT count(DISTINCT l.concept) AS k FROM concept_labels l JOIN images i USING (image_id) "
        "WHERE i.dataset = $ds"
        if db.has("concept_labels")
        else "SELECT NULL::BIGINT AS k"
    )
    return db.query(
        f"""
        WITH c AS (SELECT checkpoint_id, method, {run} AS run, {names} AS names
                   FROM checkpoints c WHERE dataset = $ds)
        SELECT c.checkpoint_id, c.method,
               CASE WHEN c.run IS NOT NULL
                         AND count(*) OVER (PARTITION BY c.method, c.run) = 1 THEN c.run
                    ELSE c.checkpoint_id END AS seed,
               CASE WHEN c.names IS NULL THEN 'probe' ELSE 'learnt' END AS concepts,
               coalesce(len(c.names), t.k) AS k, s.checkpoint_id IS NOT NULL AS analysed
        FROM c LEFT JOIN ({scored}) s USING (checkpoint_id)
        -- probe concepts: one per true concept of the dataset
        CROSS JOIN ({true_k}) t
        ORDER BY c.method, seed""",
        {"ds": dataset},
    )


def heatmaps(db, checkpoint: str, dataset: str) -> pd.DataFrame:
    """The three purity heatmaps, long, means over seeds: panel (`learnt`, `oracle`,
    `difference`), row, col, value, and row_order / col_order for drawing.

    Rows of every panel follow the true concepts: the learnt panel's row i is the learnt
    concept aligned to true concept i (named `learnt → true` where the names differ; OIS
    compares exactly these rows), followed by learnt concepts never aligned; the difference
    is learnt minus oracle on the aligned rows."""
    aligned = db.query(
        """
        WITH al AS (SELECT seed, learnt_concept, true_concept AS target
                    FROM purity_matrices WHERE checkpoint_id = $ck AND aligned)
        SELECT al.target AS row_true, p.true_concept AS col,
               string_agg(DISTINCT al.learnt_concept, ' / ' ORDER BY al.learnt_concept) AS learnt,
               avg(p.auc) AS learnt_auc, avg(o.auc) AS oracle_auc, avg(p.auc - o.auc) AS difference
        FROM al
        JOIN purity_matrices p ON p.checkpoint_id = $ck AND p.seed = al.seed
                              AND p.learnt_concept = al.learnt_concept
        JOIN oracle_purity o ON o.dataset = $ds AND o.seed = al.seed
                            AND o.concept_i = al.target AND o.concept_j = p.true_concept
        GROUP BY al.target, p.true_concept""",
        {"ck": checkpoint, "ds": dataset},
    )
    rest = db.query(
        """
        SELECT learnt_concept AS row, true_concept AS col, avg(auc) AS value
        FROM purity_matrices
        WHERE checkpoint_id = $ck AND learnt_concept NOT IN (
            SELECT learnt_concept FROM purity_matrices WHERE checkpoint_id = $ck AND aligned)
        GROUP BY learnt_concept, true_concept""",
        {"ck": checkpoint},
    )
    if aligned.empty:
        return _empty(panel=str, row=str, col=str, value=float, row_order=int, col_order=int)
    concepts = sorted(aligned["col"].unique())
    order = {c: i for i, c in enumerate(concepts)}
    label = {
        t: (t if a == t else f"{a} → {t}") for t, a in aligned.groupby("row_true")["learnt"].first().items()
    }
    frames = []
    for panel, col in (("learnt", "learnt_auc"), ("oracle", "oracle_auc"), ("difference", "difference")):
        frames.append(
            pd.DataFrame(
                {
                    "panel": panel,
                    "row": aligned["row_true"].map(label if panel != "oracle" else lambda t: t),
                    "col": aligned["col"],
                    "value": aligned[col],
                    "row_order": aligned["row_true"].map(order),
                    "col_order": aligned["col"].map(order),
                }
            )
        )
    if len(rest):
        extra = {r: len(concepts) + i for i, r in enumerate(sorted(rest["row"].unique()))}
        frames.append(
            pd.DataFrame(
                {
                    "panel": "learnt",
                    "row": rest["row"],
                    "col": rest["col"],
                    "value": rest["value"],
                    "row_order": rest["row"].map(extra),
                    "col_order": rest["col"].map(order),
                }
            )
        )
    return pd.concat(frames, ignore_index=True).sort_values(["panel", "row_order", "col_order"])


def checkpoint_scores(db, checkpoint: str) -> pd.DataFrame:
    """Each score of one checkpoint: score, label, mean, lo, hi (95% over its seeds), n, and
    the fixed beta of its niche scores."""
    per_seed = db.query(
        "SELECT * EXCLUDE (checkpoint_id) FROM concept_scores WHERE checkpoint_id = $ck ORDER BY seed",
        {"ck": checkpoint},
    )
    beta = float(per_seed["beta"].iloc[0]) if len(per_seed) else np.nan
    rows = []
    for s, label in SCORES.items():
        m, lo, hi = interval(per_seed[s].astype(float), s) if len(per_seed) else (np.nan,) * 3
        rows.append(
            {"score": s, "label": label, "mean": m, "lo": lo, "hi": hi, "n": len(per_seed), "beta": beta}
        )
    return pd.DataFrame(rows)


def _group_interval(per_seed: pd.DataFrame, score: str) -> dict:
    """mean, lo, hi of `score` for one group (see the module's docstring), n and over what."""
    per_ck = per_seed.groupby("checkpoint_id")[score].mean()
    if len(per_ck) >= 2:
        m, lo, hi = interval(per_ck.to_numpy(), score)
        return {"mean": m, "lo": lo, "hi": hi, "n": len(per_ck), "over": "training seeds"}
    m, lo, hi = interval(per_seed[score].to_numpy(float), score)
    return {"mean": m, "lo": lo, "hi": hi, "n": int(per_seed[score].notna().sum()), "over": "analysis seeds"}


def _family_scores(db, family: str) -> pd.DataFrame:
    """concept_scores of every checkpoint of the family's datasets, with dataset, level, method."""
    fam = datasets(db)
    fam = fam[fam["family"] == family]
    if fam.empty or not db.has("concept_scores"):
        return pd.DataFrame()
    s = db.query(
        """
        SELECT c.dataset, c.method, s.*
        FROM concept_scores s JOIN checkpoints c USING (checkpoint_id)
        WHERE list_contains($ds, c.dataset)
        ORDER BY c.dataset, s.checkpoint_id, s.seed""",
        {"ds": list(fam["dataset"])},
    )
    return s.merge(fam[["dataset", "level"]], on="dataset")


def sweep(db, family: str) -> pd.DataFrame:
    """OIS and the non-oracle impurity against the dependency level, per method: method,
    level, score, mean, lo, hi, n, over."""
    s = _family_scores(db, family)
    rows = []
    if len(s):
        for (method, level), g in s.groupby(["method", "level"], sort=True):
            for score in ("ois", "non_oracle_impurity"):
                rows.append({"method": method, "level": level, "score": score, **_group_interval(g, score)})
    return pd.DataFrame(rows, columns=["method", "level", "score", "mean", "lo", "hi", "n", "over"])


def betas(db, checkpoint: str) -> pd.DataFrame:
    """`beta`: the thresholds the nicher was run with for `checkpoint`, ascending."""
    if not db.has("concept_niches"):
        return _empty(beta=float)
    return db.query(
        "SELECT DISTINCT round(beta, 4) AS beta FROM concept_niches WHERE checkpoint_id = $ck ORDER BY beta",
        {"ck": checkpoint},
    )


def niche_matrix(db, checkpoint: str, dataset: str, beta: float) -> pd.DataFrame:
    """learnt_concept x label at `beta`: corr (mean over seeds), in_niche (in most seeds),
    label_name, and the learnt concepts' and labels' order."""
    t = db.query(
        """
        WITH n AS (SELECT learnt_concept, label, avg(corr) AS corr, avg(in_niche::INT) > 0.5 AS in_niche
                   FROM concept_niches WHERE checkpoint_id = $ck AND abs(beta - $beta) < 1e-9
                   GROUP BY learnt_concept, label),
             names AS (SELECT label, any_value(label_name) AS label_name FROM images
                       WHERE dataset = $ds AND label IS NOT NULL GROUP BY label)
        SELECT n.*, coalesce(names.label_name, n.label::VARCHAR) AS label_name
        FROM n LEFT JOIN names USING (label) ORDER BY n.label, n.learnt_concept""",
        {"ck": checkpoint, "beta": float(beta), "ds": dataset},
    )
    return t


def niche_curves(db, dataset: str) -> pd.DataFrame:
    """Niche purity, impurity and size against beta for every method of `dataset` (means over
    labels; intervals as for the sweep): method, beta, score, mean, lo, hi, n, over."""
    if not db.has("niche_scores"):
        return pd.DataFrame(columns=["method", "beta", "score", "mean", "lo", "hi", "n", "over"])
    t = db.query(
        """
        SELECT c.method, n.checkpoint_id, n.seed, n.beta,
               avg(n.nps) AS nps, avg(n.nis) AS nis, avg(n.niche_size) AS niche_size
        FROM niche_scores n JOIN checkpoints c USING (checkpoint_id)
        WHERE c.dataset = $ds
        GROUP BY c.method, n.checkpoint_id, n.seed, n.beta
        ORDER BY c.method, n.beta, n.checkpoint_id, n.seed""",
        {"ds": dataset},
    )
    rows = []
    # Each group's rows in a fixed order: DuckDB returns groups in any order, and a mean over
    # them summed in another order moved the intervals in their last digit between two reads
    # (the page's figure and the catalogue's build of it differed).
    for (method, beta), g in t.groupby(["method", "beta"], sort=True):
        for score in NICHE_SCORES:
            rows.append({"method": method, "beta": beta, "score": score, **_group_interval(g, score)})
    return pd.DataFrame(rows, columns=["method", "beta", "score", "mean", "lo", "hi", "n", "over"])


def scores_table(db, family: str) -> pd.DataFrame:
    """Every analysed checkpoint of the family: dataset, level, method, seed, concepts, k,
    seeds, and each score's mean with its 95% interval over the seeds (`score`, `score_lo`,
    `score_hi`)."""
    s = _family_scores(db, family)
    if s.empty:
        return pd.DataFrame()
    info = pd.concat([checkpoints(db, d) for d in s["dataset"].unique()], ignore_index=True)
    rows = []
    for cid, g in s.groupby("checkpoint_id", sort=False):
        meta = info[info["checkpoint_id"] == cid].iloc[0]
        row = {
            "checkpoint_id": cid,
            "dataset": g["dataset"].iloc[0],
            "level": g["level"].iloc[0],
            "method": g["method"].iloc[0],
            "seed": meta["seed"],
            "concepts": meta["concepts"],
            "k": meta["k"],
            "seeds": len(g),
        }
        for score in SCORES:
            m, lo, hi = interval(g[score].to_numpy(float), score)
            row.update({score: m, f"{score}_lo": lo, f"{score}_hi": hi})
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["level", "method", "seed"], ignore_index=True)
