"""The Home page: the workspace's datasets, checkpoints, images and analyses."""

from __future__ import annotations

import pandas as pd

from .. import schema
from ..analyses import ANALYSES, command_for

CORE_IMAGE_COLUMNS = tuple(c.name for c in schema.TABLES_BY_NAME["images"].columns)


def datasets(db) -> pd.DataFrame:
    """One row per dataset: images, distinct labels, train and test images, checkpoints."""
    return db.query("""
        SELECT i.dataset, i.images, i.labels, i.train, i.test,
               coalesce(c.n, 0) AS checkpoints
        FROM (SELECT dataset, count(*) AS images, count(DISTINCT label) AS labels,
                     count(*) FILTER (WHERE split = 'train') AS train,
                     count(*) FILTER (WHERE split = 'test') AS test
              FROM images GROUP BY dataset) i
        LEFT JOIN (SELECT dataset, count(*) AS n FROM checkpoints GROUP BY dataset) c
               USING (dataset)
        ORDER BY i.dataset""")


def checkpoints(db) -> pd.DataFrame:
    return db.query("""
        SELECT checkpoint_id, dataset, model, method, epoch, feature_dim, source
        FROM checkpoints ORDER BY dataset, checkpoint_id""")


def factors(db, dataset: str) -> pd.DataFrame:
    """Columns of `images` beyond the documented ones (a dataset's factors and attributes)
    that hold a value for `dataset`: `column`, `images` (how many have one)."""
    if not [c for c in db.columns("images") if c not in CORE_IMAGE_COLUMNS]:
        return pd.DataFrame({"column": pd.Series(dtype=str), "images": pd.Series(dtype="int64")})
    # COLUMNS() picks the columns inside DuckDB: no column name is ever spliced into SQL.
    counts = db.query(
        """
        UNPIVOT (SELECT count(COLUMNS(lambda c: NOT list_contains($core, c)))
                 FROM images WHERE dataset = $ds)
        ON COLUMNS(*) INTO NAME "column" VALUE images""",
        {"core": list(CORE_IMAGE_COLUMNS), "ds": dataset},
    )
    return counts[counts["images"] > 0].reset_index(drop=True)


def sample_images(db, dataset: str, n: int = 40, seed: str = "home") -> pd.DataFrame:
    """A fixed pseudo-random sample: the same images on every rerun and for every user."""
    return db.query(
        """
        SELECT image_id, label_name, thumbnail FROM images
        WHERE dataset = $ds ORDER BY hash(image_id || $seed), image_id LIMIT $n""",
        {"ds": dataset, "seed": seed, "n": int(n)},
    )


def analyses(db, workspace: str, dataset: str = "DATASET", broken: tuple[str, ...] = ()) -> pd.DataFrame:
    """Every analysis of `conceptlens.analyses` with its `status`: `present`, `missing` or
    `broken` (one of its tables is in `broken`: the caller validated them), the `command`
    that computes it and the dashboard `page` that shows it."""
    rows = []
    for a in ANALYSES:
        if set(a.tables) & set(broken):
            status = "broken"
        elif not all(db.has(t) for t in a.tables):
            status = "missing"
        elif a.present_sql and not bool(db.query(a.present_sql)["present"].iloc[0]):
            status = "missing"
        else:
            status = "present"
        rows.append(
            {
                "name": a.name,
                "title": a.title,
                "page": a.page,
                "status": status,
                "tables": list(a.tables),
                "command": command_for(a, workspace, dataset),
            }
        )
    return pd.DataFrame(rows, columns=["name", "title", "page", "status", "tables", "command"])
