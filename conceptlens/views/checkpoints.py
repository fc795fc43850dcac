"""The Checkpoints page: a dataset's checkpoints side by side, and their clusterings compared.

Comparisons between checkpoints are read from the tables `conceptlens analyze comparisons`
stores (`clid_scores`, `clustering_similarity`), never recomputed; the cluster links of the
two checkpoints shown are counted from their clusters (a group-by over their shared images,
the numbers `cluster_links` stores for every pair).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from .. import schema
from ..cache import cached
from ..metrics import bootstrap as B
from ..metrics import compare, events
from ..metrics.scores import purity
from ..schema import MIN_STABLE_CHECKPOINTS
from ..workspace import parse_partition
from . import clusters

# The tables of `conceptlens analyze comparisons` the page reads.
COMPARISON_TABLES = ("clid_scores", "predictor_correlations", "clustering_similarity")
# Which links (by their concept event, `events.label_links`) each choice of the page draws;
# the first is the default.
FLOWS = {
    "splits and merges only": ("split", "merge", "split+merge"),
    "significant flows": ("split", "merge", "split+merge", "continuation"),
    "all flows": events.LINK_EVENTS,
}


def ks(db, dataset: str) -> pd.DataFrame:
    """The k at which some checkpoint of `dataset` has checkpoint metrics."""
    return db.query(
        """
        SELECT DISTINCT m.k FROM checkpoint_metrics m JOIN checkpoints c USING (checkpoint_id)
        WHERE c.dataset = $ds ORDER BY m.k""",
        {"ds": dataset},
    )


def summary(db, dataset: str, k: int, clid: bool = True) -> pd.DataFrame:
    """One row per checkpoint of `dataset` with metrics at k: every `checkpoints` column,
    its `checkpoint_metrics`, its CLID, W-CLID and leave-one-out W-CLID (with `clid` and
    the table present) and its clusters' count, mean purity and mean coherence (random,
    hard)."""
    with_clid = clid and db.has("clid_scores")
    scores = (
        [c for c in ("clid", "wclid", "wclid_loo") if c in db.columns("clid_scores")] if with_clid else []
    )
    clid_join = f"""
        LEFT JOIN (SELECT checkpoint_id, {", ".join(scores)} FROM clid_scores
                   WHERE dataset = $ds AND k = $k) s ON s.checkpoint_id = c.checkpoint_id"""
    return db.query(
        f"""
        SELECT c.*, m.* EXCLUDE (checkpoint_id, k) {"".join(f", s.{c}" for c in scores)},
               a.clusters, a.mean_purity, a.mean_coherence, a.mean_coherence_hard
        FROM checkpoints c
        JOIN checkpoint_metrics m ON m.checkpoint_id = c.checkpoint_id AND m.k = $k
        {clid_join if scores else ""}
        LEFT JOIN (SELECT checkpoint_id, count(*) AS clusters, avg(purity) AS mean_purity,
                          avg(coherence_random) AS mean_coherence,
                          avg(coherence_hard) AS mean_coherence_hard
                   FROM cluster_metrics WHERE k = $k GROUP BY checkpoint_id) a
               ON a.checkpoint_id = c.checkpoint_id
        WHERE c.dataset = $ds
        ORDER BY {clusters.embeddings_first(db)}c.checkpoint_id""",
        {"ds": dataset, "k": int(k)},
    )


# The page's table of checkpoints: its columns, in order (components/formats.py shows them).
TABLE_COLUMNS = (
    "checkpoint_id",
    "model",
    "method",
    "run",
    "epoch",
    "knn_acc",
    "knn_acc_lo",  # 95% bootstrap intervals (schema 2.3; absent in older workspaces)
    "knn_acc_hi",
    "knn1_acc",  # 1-NN accuracy and its interval (schema 2.4 for the interval)
    "knn1_acc_lo",
    "knn1_acc_hi",
    "cl",
    "cl_lo",
    "cl_hi",
    "cl_heldout",
    "cl_heldout_lo",  # schema 2.4
    "cl_heldout_hi",
    "id",
    "id_lo",
    "id_hi",
    "clid",
    "wclid",
    "wclid_loo",
    "anmi",
    "clusters",
    "mean_purity",
    "mean_purity_lo",  # 95% bootstrap intervals of the means over clusters (cluster_mean_intervals)
    "mean_purity_hi",
    "mean_coherence",
    "mean_coherence_lo",
    "mean_coherence_hi",
    "mean_coherence_hard",
    "mean_coherence_hard_lo",
    "mean_coherence_hard_hi",
)

# The means over clusters of the checkpoint table and the cluster_metrics column of each.
CLUSTER_MEANS = {
    "mean_purity": "purity",
    "mean_coherence": "coherence_random",
    "mean_coherence_hard": "coherence_hard",
}
# The analysis whose stored per-cluster values the means are over: its seed and resample
# count are read from each unit it computed (`unit_resampling`), never assumed.
CLUSTER_ANALYSIS = "cluster_metrics"


def partition_files(db, table, keep) -> list[tuple[str, dict]]:
    """(file, its partition) of `table`'s files, read from their folder names, whose
    partition `keep` accepts: the footers of those only are then read (a unit's options)."""
    base = str(table.path).rstrip("/") + "/"
    out = []
    for f in map(str, db.ws.files(table.name)):
        inside = f[f.rindex(base) + len(base) :] if base in f else ""
        try:
            part = parse_partition(table, inside.split("/")[:-1])
        except ValueError:
            continue
        if keep(part):
            out.append((f, part))
    return out


def unit_resampling(db, dataset: str, k: int) -> dict[str, tuple[int, int]]:
    """checkpoint_id -> (bootstrap resamples, seed) that cluster_metrics computed its unit
    (checkpoint, k) of `dataset` with: the options stored in the footer of the unit's last
    table (`checkpoint_metrics`, what makes it done), completed by the analysis's own
    `stored_options` (written before 2.2, without options: its defaults). A checkpoint whose
    unit has no such file is absent (its intervals are missing, not guessed)."""
    from ..analysis import by_name  # local: the analyses load on use

    a = by_name()[CLUSTER_ANALYSIS]
    last = schema.tables_by_name()[a.writes[-1]]
    cks = set(
        db.query("SELECT checkpoint_id FROM checkpoints WHERE dataset = $ds", {"ds": dataset})[
            "checkpoint_id"
        ]
    )
    # The units' files (of this dataset's checkpoints at k) from their folder names, then
    # the footers of those only.
    units = {
        f: part["checkpoint_id"]
        for f, part in partition_files(
            db, last, lambda p: p.get("k") == int(k) and p.get("checkpoint_id") in cks
        )
    }
    if not units:
        return {}
    md = db.query(
        "SELECT file_name, decode(value) AS value FROM parquet_kv_metadata($files) "
        "WHERE decode(key) = 'conceptlens'",
        {"files": list(units)},
    )
    stored = dict(zip(md["file_name"].astype(str), md["value"]))
    out = {}
    for f, ck in units.items():
        raw = stored.get(f)
        opts = a.stored_options(json.loads(raw).get("analysis_options") if raw else None)
        out[ck] = (int(opts["bootstrap"]), int(opts["seed"]))
    return out


@cached(copy=True)
def cluster_mean_intervals(db, dataset: str, k: int) -> pd.DataFrame:
    """95% percentile bootstrap intervals (metrics/bootstrap.py) of each checkpoint's mean
    purity and mean coherence (random, hard) over its clusters at k, derived at read time
    from what the workspace stores (no stored column): one row per checkpoint of `dataset`
    with cluster_metrics at k, columns `checkpoint_id` and `<mean>_lo`/`_hi` of each of
    CLUSTER_MEANS. Each checkpoint's resamples use the resample count and seed its
    cluster_metrics unit was computed with (`unit_resampling`).

    Each cluster's items are resampled within it, the clusters held fixed (as each
    cluster's own interval), and resample b of the mean is the mean over the clusters of
    their resample b (bootstrap.group_mean_interval):
    - purity: each cluster's labelled images (`clusters` joined to images.parquet, in
      image_id order), bootstrap.purity_stats, one stream `rng_for(seed, "purity")` over
      the clusters in order: the very resamples of the stored per-cluster intervals. K is
      the dataset's labels, as the analysis's. Where the clusters no longer give the stored
      purities (re-clustered, not measured again) the interval is missing;
    - coherence: each cluster's 2AFC trials, `coherence_trials` of which
      round(coherence x trials) were answered right, resampled (bootstrap.mean_stats), one
      stream `rng_for(seed, "mean_coherence_random")` (or `_hard`) over the clusters.

    Cached by `conceptlens.cache` (1,000 resamples of every image of every checkpoint take
    0.1 s of CPU per checkpoint of 5,000 images; sorting the table again does not redo
    them), keyed on the tables it read."""
    return _cluster_mean_intervals(db, dataset, k, unit_resampling(db, dataset, k))


def _cluster_mean_intervals(db, dataset: str, k: int, resampling: dict) -> pd.DataFrame:
    cols = ["checkpoint_id"] + [f"{m}_{e}" for m in CLUSTER_MEANS for e in ("lo", "hi")]
    if not db.has("cluster_metrics"):
        return pd.DataFrame(columns=cols)
    params = {"ds": dataset, "k": int(k)}
    cm = db.query(
        """
        SELECT m.checkpoint_id, m.cluster, m.purity, m.coherence_random, m.coherence_hard,
               m.coherence_trials
        FROM cluster_metrics m JOIN checkpoints c ON c.checkpoint_id = m.checkpoint_id
        WHERE c.dataset = $ds AND m.k = $k ORDER BY m.checkpoint_id, m.cluster""",
        params,
    )
    labelled = pd.DataFrame(columns=["checkpoint_id", "cluster", "label"])
    n_classes = 0
    if db.has("clusters") and cm["purity"].notna().any():
        labelled = db.query(
            """
            SELECT l.checkpoint_id, l.cluster, i.label
            FROM clusters l
            JOIN checkpoints c ON c.checkpoint_id = l.checkpoint_id
            JOIN images i ON i.image_id = l.image_id AND i.dataset = c.dataset
            WHERE c.dataset = $ds AND l.k = $k AND i.label IS NOT NULL
            ORDER BY l.checkpoint_id, l.cluster, l.image_id""",
            params,
        )
        n_classes = int(
            db.query(
                "SELECT count(DISTINCT label) AS n FROM images WHERE dataset = $ds AND label IS NOT NULL",
                {"ds": dataset},
            )["n"].iloc[0]
        )
    by_ck = dict(tuple(labelled.groupby("checkpoint_id", sort=False)))
    rows = []
    for ck, m in cm.groupby("checkpoint_id", sort=True):
        row = {"checkpoint_id": ck}
        if resampling.get(ck, (0, 0))[0] < 1:
            # no unit to take the resampling from, or a unit computed without intervals
            # (`--bootstrap 0`, or stored before 2.3): its means have none either
            rows.append(row)
            continue
        n_boot, seed = resampling[ck]
        # purity
        lo = hi = float("nan")
        stored = m["purity"].dropna()
        lab = by_ck.get(ck)
        if len(stored) and lab is not None and n_classes >= 2:
            rng = B.rng_for(seed, "purity")
            stats, values = [], []
            for _, g in lab.groupby("cluster", sort=True):
                y = g["label"].to_numpy()
                values.append(purity(y, n_classes)[0])
                stats.append(B.purity_stats(y, n_classes, n_boot, rng))
            estimate = float(stored.mean())
            if len(values) == len(stored) and np.isclose(np.mean(values), estimate, rtol=0, atol=1e-9):
                lo, hi = B.group_mean_interval(stats, estimate)
        row["mean_purity_lo"], row["mean_purity_hi"] = lo, hi
        # coherence
        for mean, col in (("mean_coherence", "coherence_random"), ("mean_coherence_hard", "coherence_hard")):
            have = m[m[col].notna() & (m["coherence_trials"].fillna(0) > 0)]
            lo = hi = float("nan")
            if len(have):
                rng = B.rng_for(seed, f"mean_{col}")
                stats = []
                for acc, t in zip(have[col].to_numpy(float), have["coherence_trials"].to_numpy(np.int64)):
                    right = int(round(acc * t))
                    stats.append(B.mean_stats(np.arange(t) < right, n_boot, rng))
                lo, hi = B.group_mean_interval(stats, float(have[col].mean()))
            row[f"{mean}_lo"], row[f"{mean}_hi"] = lo, hi
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def checkpoint_table(
    db, dataset: str, k: int, clid: bool = True, sort: str = "checkpoint_id", descending: bool = False
) -> pd.DataFrame:
    """`summary`'s columns of TABLE_COLUMNS with the intervals of its means over clusters
    (cluster_mean_intervals), sorted by `sort` (missing values last)."""
    s = summary(db, dataset, k, clid)
    if "mean_purity" in s.columns:
        s = s.merge(cluster_mean_intervals(db, dataset, k), on="checkpoint_id", how="left")
    if sort not in s.columns:
        raise ValueError(f"sort must be a column of the checkpoint table, got {sort!r}")
    s = s.sort_values([sort, "checkpoint_id"], ascending=[not descending, True], na_position="last")
    return s[[c for c in TABLE_COLUMNS if c in s.columns]].reset_index(drop=True)


def names(db, dataset: str, k: int) -> pd.DataFrame:
    """`checkpoint_id`, `name`: the id, with run and epoch for stages of a training run."""
    s = summary(db, dataset, k, clid=False)
    stages = compare.runs_with_stages(s)
    run_of = dict(zip(stages["checkpoint_id"], stages["run"] + " · epoch " + stages["epoch"].astype(str)))
    ids = s["checkpoint_id"].astype(str)
    return pd.DataFrame(
        {"checkpoint_id": ids, "name": [f"{c} ({run_of[c]})" if c in run_of else c for c in ids]}
    )


def training(db, dataset: str, k: int, clid: bool = True) -> pd.DataFrame:
    """Metrics against epoch for runs with two or more stages, long format (run, epoch,
    checkpoint_id, metric, value); empty when no run has stages."""
    stages = compare.runs_with_stages(summary(db, dataset, k, clid))
    if stages.empty:
        return pd.DataFrame(columns=["run", "epoch", "checkpoint_id", "metric", "value"])
    return compare.epoch_long(stages)


PREDICTOR_NAMES = {
    "cl": "CL",
    "cl_heldout": "CL (held-out)",
    "id": "ID",
    "clid": "CLID",
    "wclid": "W-CLID (in-sample fit)",
    "wclid_loo": "W-CLID (leave-one-out)",
    # lu2022's baselines (`conceptlens analyze baselines`)
    "alignment": "alignment (Wang & Isola)",
    "uniformity": "uniformity (Wang & Isola)",
    "mcr2": "MCR² rate reduction ΔR",
    "rotation": "rotation prediction",
    "source_entropy": "−H(Y|X), source probe (uses labels)",
    # transfer only
    "knn_acc": "kNN accuracy in domain (uses labels)",
    "target_entropy": "−H(Y|X), target probe (uses target labels)",
}
BASELINES = ("alignment", "uniformity", "mcr2", "rotation", "source_entropy")
_CORR_COLUMNS = (
    "pearson",
    "pearson_lo",
    "pearson_hi",
    "pearson_p",
    "kendall",
    "kendall_lo",
    "kendall_hi",
    "kendall_p",
    "pearson_perm_p",  # schema 2.3: NULL in older workspaces
    "kendall_perm_p",
    "unstable",
    "n_checkpoints",
)


def predictor_correlations(db, dataset: str, k: int) -> pd.DataFrame:
    """The stored correlations of each predictor with kNN accuracy at k, in the order of
    `PREDICTOR_NAMES`, with `name`; interval columns an older workspace lacks are NaN."""
    out = db.query(
        f"""
        SELECT predictor, {_corr_columns(db, "predictor_correlations")}
        FROM predictor_correlations WHERE dataset = $ds AND k = $k""",
        {"ds": dataset, "k": int(k)},
    )
    return _named(out)


def _corr_columns(db, table: str) -> str:
    """The SELECT list of _CORR_COLUMNS; a column an older workspace lacks is NULL (the
    flag `unstable` is then derived from n_checkpoints, as the analysis sets it)."""
    have = set(db.columns(table))

    def one(c):
        if c in have:
            return c
        if c == "unstable":
            return f"(n_checkpoints < {MIN_STABLE_CHECKPOINTS}) AS unstable"
        return f"NULL::DOUBLE AS {c}"

    return ", ".join(one(c) for c in _CORR_COLUMNS)


def _named(out: pd.DataFrame) -> pd.DataFrame:
    """Rows in the order of `PREDICTOR_NAMES` with their `name`; a baseline never computed
    (no checkpoint has it) is left out rather than shown as a row of dashes."""
    out = out[~(out["predictor"].isin(BASELINES) & out["n_checkpoints"].fillna(0).eq(0))]
    order = {p: i for i, p in enumerate(PREDICTOR_NAMES)}
    out = out.sort_values("predictor", key=lambda s: s.map(order).fillna(len(order))).reset_index(drop=True)
    out.insert(1, "name", out["predictor"].map(PREDICTOR_NAMES).fillna(out["predictor"]))
    return out


# ---- transfer (lu2022 section 3.5) --------------------------------------------------------------
def transfer_targets(db, dataset: str) -> list[str]:
    """Datasets the checkpoints of `dataset` were transferred to (`analyze baselines`)."""
    if not db.has("transfer_correlations"):
        return []
    t = db.query(
        "SELECT DISTINCT target_dataset FROM transfer_correlations WHERE dataset = $ds ORDER BY 1",
        {"ds": dataset},
    )
    return list(t["target_dataset"])


def transfer_correlations(db, dataset: str, k: int, target: str) -> pd.DataFrame:
    """Each predictor's correlation with the transfer accuracy to `target`, like
    `predictor_correlations`."""
    out = db.query(
        f"""
        SELECT predictor, {_corr_columns(db, "transfer_correlations")} FROM transfer_correlations
        WHERE dataset = $ds AND k = $k AND target_dataset = $t""",
        {"ds": dataset, "k": int(k), "t": target},
    )
    return _named(out)


def transfer_scores(db, dataset: str, k: int, target: str) -> pd.DataFrame:
    """Every checkpoint's transfer accuracy to `target` next to its in-domain kNN accuracy
    and its baselines at k, best transfer first."""
    return db.query(
        """
        SELECT t.checkpoint_id, t.accuracy AS transfer_acc, m.knn_acc, t.target_neg_entropy,
               b.alignment, b.uniformity, b.mcr2, b.rotation, t.n_train, t.n_test
        FROM transfer_scores t
        JOIN checkpoints c USING (checkpoint_id)
        LEFT JOIN checkpoint_metrics m ON m.checkpoint_id = t.checkpoint_id AND m.k = $k
        LEFT JOIN baseline_scores b ON b.checkpoint_id = t.checkpoint_id AND b.k = $k
        WHERE c.dataset = $ds AND t.target_dataset = $t
        ORDER BY transfer_acc DESC, t.checkpoint_id""",
        {"ds": dataset, "k": int(k), "t": target},
    )


def stored_population(db, dataset: str) -> str | None:
    """The `--population` of the stored comparisons of `dataset` (None: not computed, or its
    file cannot be listed), from the options in the footer of its `predictor_correlations`
    file; reads that table only, through the database (a workspace served over HTTP has no
    metadata reader: `comparisons.stored_population` is the pipeline's, on local files)."""
    from ..analysis.comparisons import ANALYSIS as analysis  # local: the analyses load on use

    if not db.has("predictor_correlations"):
        return None
    # Counted through the table, so a cache keyed by the tables read follows a new run.
    n = db.query("SELECT count(*) AS n FROM predictor_correlations WHERE dataset = $ds", {"ds": dataset})
    if not int(n["n"].iloc[0]):
        return None
    table = schema.tables_by_name()["predictor_correlations"]
    files = [f for f, _ in partition_files(db, table, lambda p: p.get("dataset") == dataset)]
    if not files:
        return None
    md = db.query(
        "SELECT decode(value) AS value FROM parquet_kv_metadata($files) WHERE decode(key) = 'conceptlens'",
        {"files": files},
    )
    try:
        stored = json.loads(md["value"].iloc[-1]).get("analysis_options") if len(md) else None
    except (ValueError, AttributeError):
        stored = None
    # Written before the option existed: its `legacy` value (every checkpoint).
    return analysis.stored_options(stored)["population"]


def comparison_population(db, dataset: str) -> dict:
    """Which checkpoints the stored CLID and correlations of `dataset` are over: `population`
    (the `--population` their unit was computed with, read from the options stored in the
    footer of its `predictor_correlations` file; None when not computed), `members` and
    `left_out` (the dataset's measured checkpoints, with checkpoint metrics, in it and not,
    by `comparisons.in_population`),
    `label` ("29 training checkpoints (of 33)"), `meaning` (what the population is) and
    `others` (the other populations)."""
    from ..analysis.comparisons import (  # local: the analyses load on use
        POPULATION_MEANING,
        POPULATIONS,
        in_population,
        population_label,
    )

    population = stored_population(db, dataset)
    measured = None
    if db.has("checkpoint_metrics"):
        measured = "SELECT DISTINCT checkpoint_id FROM checkpoint_metrics"
    ck = db.query(
        "SELECT * FROM checkpoints WHERE dataset = $ds"
        + (f" AND checkpoint_id IN ({measured})" if measured else "")
        + " ORDER BY checkpoint_id",
        {"ds": dataset},
    )
    inside = in_population(ck, population) if population else np.ones(len(ck), bool)
    members = list(ck.loc[inside, "checkpoint_id"])
    return {
        "population": population,
        "members": members,
        "left_out": list(ck.loc[~inside, "checkpoint_id"]),
        "label": population_label(population, len(members), len(ck)) if population else None,
        "meaning": POPULATION_MEANING[population] if population else None,
        "others": [p for p in POPULATIONS if p != population],
    }


def clid_membership(db, dataset: str, k: int) -> pd.DataFrame:
    """Which checkpoints of `dataset` with CL, ID and kNN accuracy at k, of the population
    the comparisons are over (`comparison_population`), the stored CLID compared:
    `checkpoint_id`, `n_images` (images its metrics were measured on),
    `compared`. `conceptlens analyze comparisons` compares only the checkpoints embedded on
    the most common image set and stores a null CLID for the others; without a stored
    CLID for any checkpoint, `compared` is null throughout (nothing to tell)."""
    have = set(db.columns("clid_scores")) if db.has("clid_scores") else set()
    rows = db.query(
        f"""
        SELECT c.checkpoint_id, m.n_images, {"s.clid" if "clid" in have else "NULL::DOUBLE AS clid"}
        FROM checkpoints c
        JOIN checkpoint_metrics m ON m.checkpoint_id = c.checkpoint_id AND m.k = $k
        {
            "LEFT JOIN (SELECT checkpoint_id, clid FROM clid_scores WHERE dataset = $ds AND k = $k) s "
            "ON s.checkpoint_id = c.checkpoint_id"
            if "clid" in have
            else ""
        }
        WHERE c.dataset = $ds AND m.cl IS NOT NULL AND m.id IS NOT NULL AND m.knn_acc IS NOT NULL
        ORDER BY c.checkpoint_id""",
        {"ds": dataset, "k": int(k)},
    )
    # Checkpoints outside the population the comparisons were computed over (`--population`)
    # were never candidates: neither compared nor left out for their images.
    population = comparison_population(db, dataset)
    if population["population"] is not None:
        rows = rows[rows["checkpoint_id"].isin(population["members"])].reset_index(drop=True)
    known = rows["clid"].notna()
    compared = known.astype(object) if known.any() else pd.Series(None, index=rows.index, dtype=object)
    return rows.drop(columns="clid").assign(compared=compared)


def anmi_matrix(db, dataset: str, k: int) -> pd.DataFrame:
    """Square matrix of the stored aNMI between the clusterings of every two checkpoints
    of `dataset` at k (rows and columns: the checkpoints of `summary`, diagonal 1; NaN
    where a pair was not compared)."""
    ids = list(summary(db, dataset, k, clid=False)["checkpoint_id"])
    pairs = db.query(
        """
        SELECT checkpoint_a, checkpoint_b, anmi FROM clustering_similarity
        WHERE dataset = $ds AND k = $k""",
        {"ds": dataset, "k": int(k)},
    )
    m = pd.DataFrame(np.nan, index=pd.Index(ids, name="checkpoint_id"), columns=ids)
    for a, b, v in pairs.itertuples(index=False):
        if a in m.index and b in m.index:
            m.loc[a, b] = m.loc[b, a] = v
    for a in ids:
        m.loc[a, a] = 1.0
    return m


def _pair_links(db, k: int, a: str, b: str) -> pd.DataFrame:
    """The contingency of A's and B's clusterings at k over their shared images (`a`, `b`,
    `count`, `size_a`, `size_b`: `compare.contingency`, what `cluster_links` stores), counted
    for this pair only: the stored table holds every pair's cells (7.1 million rows at 28
    checkpoints of 50,000 images), which the page's first open had to read and check."""
    return db.query(
        """
        WITH j AS (SELECT ca.cluster AS a, cb.cluster AS b
                   FROM clusters ca JOIN clusters cb USING (image_id)
                   WHERE ca.checkpoint_id = $a AND ca.k = $k AND cb.checkpoint_id = $b AND cb.k = $k)
        SELECT a, b, count(*) AS count,
               CAST(sum(count(*)) OVER (PARTITION BY a) AS BIGINT) AS size_a,
               CAST(sum(count(*)) OVER (PARTITION BY b) AS BIGINT) AS size_b
        FROM j GROUP BY a, b ORDER BY a, b""",
        {"a": a, "b": b, "k": int(k)},
    )


def cluster_links(
    db,
    dataset: str,
    k: int,
    a: str,
    b: str,
    min_share: float = 0.2,
    flows: str = "all flows",
    largest: int | None = None,
) -> pd.DataFrame:
    """Links from A's clusters to B's, classified (`compare.classify_links`: `kind`) and
    labelled with their concept event (`events.label_links` at `min_share` and the
    module's other defaults: `significant`, `p_value`, `event`), restricted to the events
    of `flows` (a key of FLOWS) and, with `largest`, to the links of A's `largest` clusters
    (by shared images, whatever `flows`; ties: the lower cluster id)."""
    if flows not in FLOWS:
        raise ValueError(f"flows must be one of {', '.join(FLOWS)}, got {flows!r}")
    links = compare.classify_links(_pair_links(db, k, a, b), min_share)
    links = events.label_links(links, min_share)
    if largest is not None:
        sizes = links.drop_duplicates("a").sort_values(["size_a", "a"], ascending=[False, True])
        links = links[links["a"].isin(sizes["a"].head(int(largest)))]
    return links[links["event"].isin(FLOWS[flows])].reset_index(drop=True)


def cluster_changes(db, dataset: str, k: int, a: str, b: str, min_share: float = 0.2) -> pd.DataFrame:
    """One row: the concept events from A to B (`events.events_from_links` at `min_share`,
    the Sankey's rule): A clusters that split (`splits`), B clusters that are merges
    (`merges`), continuations (`one_to_one`), `births`, `deaths`; and the stored aNMI of A
    and B (NaN when not computed)."""
    counts = events.events_from_links(_pair_links(db, k, a, b), min_share)["kind"].value_counts()
    changes = {
        name: int(counts.get(kind, 0))
        for name, kind in (
            ("splits", "split"),
            ("merges", "merge"),
            ("one_to_one", "continuation"),
            ("births", "birth"),
            ("deaths", "death"),
        )
    }
    lo, hi = sorted((a, b))
    anmi = db.query(
        """
        SELECT anmi FROM clustering_similarity
        WHERE dataset = $ds AND k = $k AND checkpoint_a = $lo AND checkpoint_b = $hi""",
        {"ds": dataset, "k": int(k), "lo": lo, "hi": hi},
    )["anmi"]
    value = anmi.iloc[0] if len(anmi) else np.nan
    return pd.DataFrame([{**changes, "anmi": float(value) if pd.notna(value) else np.nan}])


# ---- two checkpoints' projections, linked -------------------------------------------------------
def linked_projection(
    db,
    dataset: str,
    k: int,
    a: str,
    b: str,
    side: str,
    colour: str = "cluster in A",
    method: str = "umap",
    limit: int = 10_000,
) -> pd.DataFrame:
    """The projection of checkpoint A (`side="a"`) or B (`side="b"`) restricted to the
    images both projections hold (of `views.clusters.projection`'s fixed sample of
    `limit`): `image_id`, `x`, `y`, `cluster` of that side and the `colour` column (one of
    `linked_colours`: `cluster in A`, `cluster in B` or a column of `images`), so both
    plots can be coloured by the same thing."""
    if side not in ("a", "b"):
        raise ValueError(f"side must be 'a' or 'b', got {side!r}")
    named = colour in ("cluster in A", "cluster in B")
    if not named and colour not in db.columns("images"):
        raise ValueError(f"colour must be one of linked_colours, got {colour!r}")
    # One query for both samples (they are the same images: the order hashes the image id
    # and the method only), and only this side's coordinates: no second projection read.
    sample = """(SELECT p.image_id, p.x, p.y FROM projections p
                 WHERE p.checkpoint_id = ${c} AND p.method = $m
                   AND p.image_id IN (SELECT image_id FROM images)
                 ORDER BY hash(p.image_id || $m), p.image_id LIMIT $n)"""
    both = db.query(
        f"""
        SELECT sa.image_id, s{side}.x, s{side}.y, ca.cluster AS cluster_a, cb.cluster AS cluster_b
               {"" if named else ", i.* EXCLUDE (image_id)"}
        FROM {sample.format(c="a")} sa
        JOIN {sample.format(c="b")} sb USING (image_id)
        {"" if named else "JOIN images i USING (image_id)"}
        LEFT JOIN (SELECT image_id, cluster FROM clusters WHERE checkpoint_id = $a AND k = $k) ca
               USING (image_id)
        LEFT JOIN (SELECT image_id, cluster FROM clusters WHERE checkpoint_id = $b AND k = $k) cb
               USING (image_id)
        ORDER BY hash(sa.image_id || $m), sa.image_id""",
        {"a": a, "b": b, "k": int(k), "m": method, "n": int(limit)},
    )
    out = pd.DataFrame(
        {
            "image_id": both["image_id"],
            "x": both["x"],
            "y": both["y"],
            "cluster": both[f"cluster_{side}"],
        }
    )
    out[colour] = both[f"cluster_{colour[-1].lower()}"].astype("Int64") if named else both[colour]
    return out


linked_projection.large = True  # up to `limit` rows: the app caches few of them


def linked_colours(db, dataset: str) -> pd.DataFrame:
    """`column`: what both projections can be coloured by: A's clusters, B's clusters,
    then what `views.clusters.colour_options` offers besides the cluster."""
    rest = [c for c in clusters.colour_options(db, dataset)["column"] if c != "cluster"]
    return pd.DataFrame({"column": ["cluster in A", "cluster in B", *rest]})


def selection_in_b(db, dataset: str, k: int, a: str, b: str, ids: list[str]) -> pd.DataFrame:
    """Where images selected in A lie in B: one row per B cluster holding some of them
    (`cluster in B`), with `images` (selected images in it), `share of selection`, `share
    of cluster` (of the B cluster's size), `from A's clusters` and B's `caption` when
    stored; most images first."""
    with_captions = db.has("cluster_captions")
    rows = db.query(
        """
        SELECT cb.cluster AS cluster, count(*) AS images,
               list_sort(list_distinct(list(ca.cluster))) AS from_a
        FROM clusters cb
        LEFT JOIN (SELECT image_id, cluster FROM clusters
                   WHERE checkpoint_id = $a AND k = $k) ca USING (image_id)
        WHERE cb.checkpoint_id = $b AND cb.k = $k AND list_contains($ids, cb.image_id)
        GROUP BY cb.cluster""",
        {"a": a, "b": b, "k": int(k), "ids": [str(i) for i in ids]},
    )
    meta = clusters.cluster_table(db, dataset, b, k, captions=with_captions)
    keep = ["cluster", "size"] + (["caption"] if "caption" in meta.columns else [])
    out = rows.merge(meta[keep], on="cluster", how="left")
    out["from_a"] = [", ".join(str(int(c)) for c in cs) for cs in out["from_a"]]
    out["share of selection"] = out["images"] / max(len(set(ids)), 1)
    out["share of cluster"] = out["images"] / out["size"]
    out = out.rename(columns={"cluster": "cluster in B", "from_a": "from A's clusters"})
    cols = ["cluster in B", "images", "share of selection", "share of cluster", "from A's clusters"]
    out = out.sort_values(["images", "cluster in B"], ascending=[False, True])
    return out[cols + keep[2:]].reset_index(drop=True)
