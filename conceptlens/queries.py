"""SQL the dashboard runs, in one place. Values are always bound as parameters."""
from __future__ import annotations

from . import schema

CORE_IMAGE_COLUMNS = tuple(c.name for c in schema.TABLES_BY_NAME["images"].columns)

DATASETS = """
SELECT dataset,
       count(*) AS images,
       count(DISTINCT label) AS labels,
       count(*) FILTER (WHERE split = 'train') AS train,
       count(*) FILTER (WHERE split = 'test') AS test
FROM images GROUP BY dataset ORDER BY dataset
"""

CHECKPOINTS = """
SELECT checkpoint_id, dataset, model, method, epoch, feature_dim, source
FROM checkpoints ORDER BY dataset, checkpoint_id
"""

CHECKPOINTS_OF = """
SELECT * FROM checkpoints WHERE dataset = ? ORDER BY checkpoint_id
"""

# A fixed pseudo-random sample: the same images on every rerun and for every user.
SAMPLE_IMAGES = """
SELECT image_id, label_name, thumbnail FROM images
WHERE dataset = ? ORDER BY hash(image_id || ?) LIMIT ?
"""

FACTOR_NONNULL = """
SELECT count(*) AS n FROM images WHERE dataset = ? AND "{col}" IS NOT NULL
"""


def factor_columns(all_columns: list[str]) -> list[str]:
    """Columns of `images` beyond the core ones: a dataset's factors and attributes."""
    return [c for c in all_columns if c not in CORE_IMAGE_COLUMNS]


# ---- Clusters and Checkpoints pages (cluster analysis tables) ------------------------------
CLUSTER_KS = """
SELECT DISTINCT k FROM cluster_metrics WHERE checkpoint_id = ? ORDER BY k
"""

CLUSTERED_CHECKPOINTS = """
SELECT DISTINCT m.checkpoint_id FROM cluster_metrics m
JOIN checkpoints c USING (checkpoint_id) WHERE c.dataset = ? ORDER BY m.checkpoint_id
"""

# Every column of cluster_metrics (optional ones included) plus the top label's name.
CLUSTER_METRICS_OF = """
SELECT m.*, l.label_name AS top_label_name
FROM cluster_metrics m
LEFT JOIN (SELECT label, min(label_name) AS label_name FROM images
           WHERE dataset = ? AND label IS NOT NULL GROUP BY label) l ON l.label = m.top_label
WHERE m.checkpoint_id = ? AND m.k = ?
ORDER BY m.cluster
"""

CHECKPOINT_METRICS_ROW = """
SELECT * FROM checkpoint_metrics WHERE checkpoint_id = ? AND k = ?
"""

# The images of one cluster, nearest to the centroid first.
CLUSTER_IMAGES = """
SELECT i.image_id, i.label_name, i.thumbnail, c.distance
FROM clusters c JOIN images i USING (image_id)
WHERE c.checkpoint_id = ? AND c.k = ? AND c.cluster = ?
ORDER BY c.distance, i.image_id LIMIT ?
"""

PROJECTION_COUNT = """
SELECT count(*) AS n FROM projections WHERE checkpoint_id = ? AND method = ?
"""

# A bounded, deterministic sample of a projection (same points on every rerun), with
# the cluster of each point at k and every column of images (labels and factors).
PROJECTION_POINTS = """
SELECT p.image_id, p.x, p.y, c.cluster, i.* EXCLUDE (image_id)
FROM projections p
JOIN images i USING (image_id)
LEFT JOIN clusters c ON c.checkpoint_id = p.checkpoint_id AND c.image_id = p.image_id AND c.k = ?
WHERE p.checkpoint_id = ? AND p.method = ?
ORDER BY hash(p.image_id || ?) LIMIT ?
"""

IMAGES_BY_ID = """
SELECT image_id, label_name, thumbnail FROM images
WHERE list_contains(?, image_id) ORDER BY image_id LIMIT ?
"""

CHECKPOINT_KS = """
SELECT DISTINCT m.k FROM checkpoint_metrics m JOIN checkpoints c USING (checkpoint_id)
WHERE c.dataset = ? ORDER BY m.k
"""

# One row per checkpoint of a dataset at k (every checkpoints column): all its metrics
# (optional ones such as cl_heldout, wclid included) and its clusters' mean purity/coherence.
CHECKPOINT_SUMMARY = """
SELECT c.*,
       m.* EXCLUDE (checkpoint_id, k),
       a.clusters, a.mean_purity, a.mean_coherence, a.mean_coherence_hard
FROM checkpoints c
JOIN checkpoint_metrics m ON m.checkpoint_id = c.checkpoint_id AND m.k = ?
LEFT JOIN (SELECT checkpoint_id, count(*) AS clusters, avg(purity) AS mean_purity,
                  avg(coherence_random) AS mean_coherence,
                  avg(coherence_hard) AS mean_coherence_hard
           FROM cluster_metrics WHERE k = ? GROUP BY checkpoint_id) a
       ON a.checkpoint_id = c.checkpoint_id
WHERE c.dataset = ?
ORDER BY c.checkpoint_id
"""

PREDICTOR_CORRELATIONS_OF = """
SELECT predictor, pearson, pearson_p, kendall, kendall_p, n_checkpoints
FROM predictor_correlations WHERE dataset = ? AND k = ? ORDER BY predictor
"""

# Every clustering of a dataset's checkpoints at k (for aNMI between checkpoints).
CLUSTER_ASSIGNMENTS = """
SELECT c.checkpoint_id, c.image_id, c.cluster
FROM clusters c JOIN checkpoints ck USING (checkpoint_id)
WHERE ck.dataset = ? AND c.k = ?
"""

CLUSTER_ASSIGNMENT_OF = """
SELECT image_id, cluster FROM clusters WHERE checkpoint_id = ? AND k = ?
"""

CLUSTERED_DATASETS = """
SELECT DISTINCT c.dataset FROM cluster_metrics m JOIN checkpoints c USING (checkpoint_id)
ORDER BY c.dataset
"""
