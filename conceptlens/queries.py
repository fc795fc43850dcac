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
