"""The Checkpoints page: a dataset's checkpoints side by side, and their clusterings compared.

Comparisons between checkpoints are read from the tables `conceptlens analyze comparisons`
stores (`clid_scores`, `clustering_similarity`, `cluster_links`), never recomputed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis import compare

# Which link kinds (see `compare.classify_links`) each choice of the page draws.
FLOWS = {
    "significant flows": ("one-to-one", "split", "merge", "split+merge", "partial"),
    "splits and merges only": ("split", "merge", "split+merge"),
    "all flows": compare.LINK_KINDS,
}


def ks(db, dataset: str) -> pd.DataFrame:
    """The k at which some checkpoint of `dataset` has checkpoint metrics."""
    return db.query(
        """
        SELECT DISTINCT m.k FROM checkpoint_metrics m JOIN checkpoints c USING (checkpoint_id)
        WHERE c.dataset = $ds ORDER BY m.k""",
        {"ds": dataset},
    )


_CLID_JOIN = """
        LEFT JOIN (SELECT checkpoint_id, clid, wclid FROM clid_scores
                   WHERE dataset = $ds AND k = $k) s ON s.checkpoint_id = c.checkpoint_id"""


def summary(db, dataset: str, k: int, clid: bool = True) -> pd.DataFrame:
    """One row per checkpoint of `dataset` with metrics at k: every `checkpoints` column,
    its `checkpoint_metrics`, its CLID and W-CLID (with `clid` and the table present) and
    its clusters' count, mean purity and mean coherence (random, hard)."""
    with_clid = clid and db.has("clid_scores")
    return db.query(
        f"""
        SELECT c.*, m.* EXCLUDE (checkpoint_id, k) {", s.clid, s.wclid" if with_clid else ""},
               a.clusters, a.mean_purity, a.mean_coherence, a.mean_coherence_hard
        FROM checkpoints c
        JOIN checkpoint_metrics m ON m.checkpoint_id = c.checkpoint_id AND m.k = $k
        {_CLID_JOIN if with_clid else ""}
        LEFT JOIN (SELECT checkpoint_id, count(*) AS clusters, avg(purity) AS mean_purity,
                          avg(coherence_random) AS mean_coherence,
                          avg(coherence_hard) AS mean_coherence_hard
                   FROM cluster_metrics WHERE k = $k GROUP BY checkpoint_id) a
               ON a.checkpoint_id = c.checkpoint_id
        WHERE c.dataset = $ds
        ORDER BY c.checkpoint_id""",
        {"ds": dataset, "k": int(k)},
    )


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


def predictor_correlations(db, dataset: str, k: int) -> pd.DataFrame:
    return db.query(
        """
        SELECT predictor, pearson, pearson_p, kendall, kendall_p, n_checkpoints
        FROM predictor_correlations WHERE dataset = $ds AND k = $k ORDER BY predictor""",
        {"ds": dataset, "k": int(k)},
    )


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


def _stored_links(db, dataset: str, k: int, a: str, b: str) -> pd.DataFrame:
    """The contingency of A and B as stored (once per unordered pair, checkpoint_a <
    checkpoint_b), its columns swapped when A is the stored second one."""
    lo, hi = sorted((a, b))
    links = db.query(
        """
        SELECT a, b, count, size_a, size_b FROM cluster_links
        WHERE dataset = $ds AND k = $k AND checkpoint_a = $lo AND checkpoint_b = $hi""",
        {"ds": dataset, "k": int(k), "lo": lo, "hi": hi},
    )
    if a == lo:
        return links
    return links.rename(columns={"a": "b", "b": "a", "size_a": "size_b", "size_b": "size_a"})


def cluster_links(
    db, dataset: str, k: int, a: str, b: str, min_share: float = 0.2, flows: str = "all flows"
) -> pd.DataFrame:
    """Links from A's clusters to B's, classified (`compare.classify_links`), restricted to
    the kinds of `flows` (a key of FLOWS)."""
    links = compare.classify_links(_stored_links(db, dataset, k, a, b), min_share)
    return links[links["kind"].isin(FLOWS[flows])].reset_index(drop=True)


def cluster_changes(db, dataset: str, k: int, a: str, b: str, min_share: float = 0.2) -> pd.DataFrame:
    """One row: A clusters that split, B clusters that are merges, one-to-one links and the
    stored aNMI of A and B (NaN when not computed)."""
    changes = compare.cluster_changes(cluster_links(db, dataset, k, a, b, min_share))
    lo, hi = sorted((a, b))
    anmi = db.query(
        """
        SELECT anmi FROM clustering_similarity
        WHERE dataset = $ds AND k = $k AND checkpoint_a = $lo AND checkpoint_b = $hi""",
        {"ds": dataset, "k": int(k), "lo": lo, "hi": hi},
    )["anmi"]
    value = anmi.iloc[0] if len(anmi) else np.nan
    return pd.DataFrame([{**changes, "anmi": float(value) if pd.notna(value) else np.nan}])
