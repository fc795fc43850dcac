"""The Clusters page: one checkpoint's k-means clusters, their metrics, captions and images."""

from __future__ import annotations

import pandas as pd

from ..analysis import compare
from .home import factors


def datasets(db) -> pd.DataFrame:
    """Every dataset with `clustered` (some checkpoint of it has cluster metrics), those
    first, so the default view is never empty when one has clusters."""
    if not db.has("cluster_metrics"):
        return db.query("SELECT DISTINCT dataset, false AS clustered FROM images ORDER BY dataset")
    return db.query("""
        SELECT i.dataset, c.dataset IS NOT NULL AS clustered
        FROM (SELECT DISTINCT dataset FROM images) i
        LEFT JOIN (SELECT DISTINCT ck.dataset FROM cluster_metrics m
                   JOIN checkpoints ck USING (checkpoint_id)) c USING (dataset)
        ORDER BY clustered DESC, i.dataset""")


def checkpoints(db, dataset: str) -> pd.DataFrame:
    """The checkpoints of `dataset` that have cluster metrics."""
    return db.query(
        """
        SELECT DISTINCT m.checkpoint_id FROM cluster_metrics m
        JOIN checkpoints c USING (checkpoint_id)
        WHERE c.dataset = $ds ORDER BY m.checkpoint_id""",
        {"ds": dataset},
    )


def ks(db, checkpoint: str) -> pd.DataFrame:
    return db.query(
        "SELECT DISTINCT k FROM cluster_metrics WHERE checkpoint_id = $ckpt ORDER BY k", {"ckpt": checkpoint}
    )


_CAPTIONS_JOIN = """
        LEFT JOIN (SELECT * EXCLUDE (checkpoint_id, k) FROM cluster_captions
                   WHERE checkpoint_id = $ckpt AND k = $k) cap USING (cluster)"""


def cluster_table(db, dataset: str, checkpoint: str, k: int, captions: bool = True) -> pd.DataFrame:
    """One row per cluster: every column of `cluster_metrics`, the top label's name and,
    with `captions` (and the table present), every column of `cluster_captions`."""
    with_captions = captions and db.has("cluster_captions")
    return db.query(
        f"""
        SELECT m.* {", cap.* EXCLUDE (cluster)" if with_captions else ""},
               l.label_name AS top_label_name
        FROM cluster_metrics m
        LEFT JOIN (SELECT label, min(label_name) AS label_name FROM images
                   WHERE dataset = $ds AND label IS NOT NULL GROUP BY label) l
               ON l.label = m.top_label
        {_CAPTIONS_JOIN if with_captions else ""}
        WHERE m.checkpoint_id = $ckpt AND m.k = $k
        ORDER BY m.cluster""",
        {"ds": dataset, "ckpt": checkpoint, "k": int(k)},
    )


def filtered_clusters(
    db,
    dataset: str,
    checkpoint: str,
    k: int,
    min_size: int = 0,
    purity: tuple[float, float] = (0.0, 1.0),
    text: str = "",
    captions: bool = True,
) -> pd.DataFrame:
    """`cluster_table` restricted as `conceptlens.analysis.compare.filter_clusters` says."""
    table = cluster_table(db, dataset, checkpoint, k, captions)
    return compare.filter_clusters(table, min_size, tuple(purity), text)


def purity_bins(db, dataset: str, checkpoint: str, k: int, captions: bool = True) -> pd.DataFrame:
    """laina2020 Tables 1-2: mean coherence (and describability) per purity range."""
    return compare.purity_bins(cluster_table(db, dataset, checkpoint, k, captions))


def cluster_and_hard_negative(
    db, dataset: str, checkpoint: str, k: int, cluster: int, captions: bool = True
) -> pd.DataFrame:
    """The `cluster_table` rows of `cluster` and of its hard negative, with `role`
    (`cluster`, `hard negative`); no second row when it has none."""
    t = cluster_table(db, dataset, checkpoint, k, captions)
    me = t[t["cluster"] == int(cluster)].assign(role="cluster")
    if me.empty:
        return me
    hn = me["hard_negative"].iloc[0]
    other = t[t["cluster"] == int(hn)].assign(role="hard negative") if pd.notna(hn) else t.iloc[:0]
    return pd.concat([me, other], ignore_index=True)


def checkpoint_metrics(db, checkpoint: str, k: int) -> pd.DataFrame:
    """The checkpoint's row of `checkpoint_metrics` at k (none when not computed)."""
    if not db.has("checkpoint_metrics"):
        return pd.DataFrame()
    return db.query(
        "SELECT * FROM checkpoint_metrics WHERE checkpoint_id = $ckpt AND k = $k",
        {"ckpt": checkpoint, "k": int(k)},
    )


def cluster_images(db, checkpoint: str, k: int, cluster: int, limit: int = 24) -> pd.DataFrame:
    """The images of one cluster, nearest to the centroid first."""
    return db.query(
        """
        SELECT i.image_id, i.label_name, i.thumbnail, c.distance
        FROM clusters c JOIN images i USING (image_id)
        WHERE c.checkpoint_id = $ckpt AND c.k = $k AND c.cluster = $cluster
        ORDER BY c.distance, i.image_id LIMIT $n""",
        {"ckpt": checkpoint, "k": int(k), "cluster": int(cluster), "n": int(limit)},
    )


def projection_size(db, checkpoint: str, method: str = "umap") -> pd.DataFrame:
    """`n`: how many points the checkpoint's projection has."""
    return db.query(
        "SELECT count(*) AS n FROM projections WHERE checkpoint_id = $ckpt AND method = $m",
        {"ckpt": checkpoint, "m": method},
    )


def projection(db, checkpoint: str, k: int, method: str = "umap", limit: int = 20_000) -> pd.DataFrame:
    """A bounded, fixed sample of a projection (the same points on every rerun): `x`, `y`,
    the cluster of each point at k and every column of `images` (labels and factors)."""
    return db.query(
        """
        SELECT p.image_id, p.x, p.y, c.cluster, i.* EXCLUDE (image_id)
        FROM projections p
        JOIN images i USING (image_id)
        LEFT JOIN (SELECT image_id, cluster FROM clusters
                   WHERE checkpoint_id = $ckpt AND k = $k) c USING (image_id)
        WHERE p.checkpoint_id = $ckpt AND p.method = $m
        ORDER BY hash(p.image_id || $m), p.image_id LIMIT $n""",
        {"ckpt": checkpoint, "k": int(k), "m": method, "n": int(limit)},
    )


def colour_options(db, dataset: str) -> pd.DataFrame:
    """`column`: what a projection can be coloured by (cluster, label, factors, split)."""
    cols = ["cluster", "label_name"] + list(factors(db, dataset)["column"]) + ["split"]
    return pd.DataFrame({"column": cols})


def images(db, ids: list[str], limit: int = 60) -> pd.DataFrame:
    """Images by id (e.g. a selection on the projection), at most `limit`."""
    return db.query(
        """
        SELECT image_id, label_name, thumbnail FROM images
        WHERE list_contains($ids, image_id) ORDER BY image_id LIMIT $n""",
        {"ids": [str(i) for i in ids], "n": int(limit)},
    )
