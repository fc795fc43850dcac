"""A projection too large to draw point by point (a million images): inside a viewport,
either its points, when at most `max_points` fall there, or a 2-D histogram of the
viewport binned in DuckDB, so what a page sends stays bounded at any size.

A region drawn on either (a box or a lasso) selects its images from the whole table,
not from what was drawn: `views.clusters.region_images`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..errors import ConceptLensError
from .clusters import parse_region

MAX_POINTS = 20_000  # points drawn one by one; more in the viewport are binned
BINS = 160  # bins along each axis of the overview
ZOOM = 4  # a click on the overview narrows the viewport this many times along each axis


def parse_viewport(text: str) -> tuple[float, float, float, float]:
    """`x0,x1,y0,y1` (as the URL keeps it) -> the four numbers, with x0 < x1 and y0 < y1."""
    try:
        vals = tuple(float(v) for v in str(text).split(","))
    except ValueError:
        raise ConceptLensError(f"viewport {text!r}: coordinates must be numbers") from None
    if len(vals) != 4:
        raise ConceptLensError(f"viewport {text!r} is not x0,x1,y0,y1")
    return check_viewport(vals)


def check_viewport(viewport) -> tuple[float, float, float, float]:
    x0, x1, y0, y1 = (float(v) for v in viewport)
    if not all(math.isfinite(v) for v in (x0, x1, y0, y1)):
        raise ConceptLensError(f"viewport {viewport!r}: coordinates must be finite")
    if not (x0 < x1 and y0 < y1):
        raise ConceptLensError(f"viewport {viewport!r}: needs x0 < x1 and y0 < y1")
    return x0, x1, y0, y1


def viewport_text(viewport) -> str:
    return ",".join(f"{v:.6g}" for v in viewport)


def zoom_at(viewport, x: float, y: float, factor: float = ZOOM) -> tuple[float, float, float, float]:
    """The viewport `factor` times narrower along each axis, centred on (x, y)."""
    x0, x1, y0, y1 = check_viewport(viewport)
    hw, hh = (x1 - x0) / factor / 2, (y1 - y0) / factor / 2
    return float(x - hw), float(x + hw), float(y - hh), float(y + hh)


def extent(db, checkpoint: str, method: str = "umap") -> pd.DataFrame:
    """`n`, `x0`, `x1`, `y0`, `y1`: the size and bounding box of a projection."""
    return db.query(
        """
        SELECT count(*) AS n, min(x) AS x0, max(x) AS x1, min(y) AS y0, max(y) AS y1
        FROM projections WHERE checkpoint_id = $ckpt AND method = $m""",
        {"ckpt": checkpoint, "m": method},
    )


def whole_viewport(db, checkpoint: str, method: str) -> tuple[tuple[float, float, float, float] | None, int]:
    """The bounding box of the whole projection (None when empty) and its size."""
    e = extent(db, checkpoint, method).iloc[0]
    n = int(e["n"])
    if n == 0:
        return None, 0
    x0, x1, y0, y1 = (float(e[c]) for c in ("x0", "x1", "y0", "y1"))
    # One point (or one line of them) has no width: give it one, so bins can be cut.
    if x1 <= x0:
        x0, x1 = x0 - 0.5, x1 + 0.5
    if y1 <= y0:
        y0, y1 = y0 - 0.5, y1 + 0.5
    return (x0, x1, y0, y1), n


def _bounds(viewport) -> dict:
    x0, x1, y0, y1 = viewport
    return {"x0": x0, "x1": x1, "y0": y0, "y1": y1}


def count_in(db, checkpoint: str, viewport, method: str = "umap") -> int:
    """How many points of the projection lie in `viewport` (edges included)."""
    return int(
        db.query(
            """
            SELECT count(*) AS n FROM projections
            WHERE checkpoint_id = $ckpt AND method = $m
              AND x BETWEEN $x0 AND $x1 AND y BETWEEN $y0 AND $y1""",
            {"ckpt": checkpoint, "m": method, **_bounds(check_viewport(viewport))},
        )["n"].iloc[0]
    )


def _clusters_of(db) -> str:
    if db.has("clusters"):
        return "(SELECT image_id, cluster FROM clusters WHERE checkpoint_id = $ckpt AND k = $k)"
    return "(SELECT NULL::VARCHAR AS image_id, NULL::BIGINT AS cluster WHERE false)"


def points_in(
    db, checkpoint: str, k: int, viewport, method: str = "umap", limit: int = MAX_POINTS
) -> pd.DataFrame:
    """The points in `viewport` (at most `limit`, a fixed choice when more): the columns
    of `views.clusters.projection`."""
    return db.query(
        f"""
        SELECT p.image_id, p.x, p.y, c.cluster, i.* EXCLUDE (image_id)
        FROM projections p
        JOIN images i USING (image_id)
        LEFT JOIN {_clusters_of(db)} c USING (image_id)
        WHERE p.checkpoint_id = $ckpt AND p.method = $m
          AND p.x BETWEEN $x0 AND $x1 AND p.y BETWEEN $y0 AND $y1
        ORDER BY hash(p.image_id || $m), p.image_id LIMIT $n""",
        {
            "ckpt": checkpoint,
            "k": int(k),
            "m": method,
            "n": int(limit),
            **_bounds(check_viewport(viewport)),
        },
    )


def counts(db, checkpoint: str, viewport, method: str = "umap", bins: int = BINS) -> pd.DataFrame:
    """A `bins` x `bins` histogram of the points in `viewport`, computed in DuckDB: one row
    per non-empty bin, its column `ix`, row `iy` (0 = lowest x / y) and `count`; bins cut
    as `binned` cuts them."""
    if not 1 <= int(bins) <= 2_000:
        raise ConceptLensError(f"bins must be in [1, 2000], got {bins}")
    x0, x1, y0, y1 = check_viewport(viewport)
    return db.query(
        """
        SELECT least(CAST(floor((x - $x0) * $sx) AS INTEGER), $nb - 1) AS ix,
               least(CAST(floor((y - $y0) * $sy) AS INTEGER), $nb - 1) AS iy,
               count(*)::BIGINT AS count
        FROM projections
        WHERE checkpoint_id = $ckpt AND method = $m AND x BETWEEN $x0 AND $x1 AND y BETWEEN $y0 AND $y1
        GROUP BY ALL ORDER BY iy, ix""",
        {
            "ckpt": checkpoint,
            "m": method,
            "nb": int(bins),
            "sx": int(bins) / (x1 - x0),
            "sy": int(bins) / (y1 - y0),
            **_bounds((x0, x1, y0, y1)),
        },
    )


def binned(db, checkpoint: str, k: int, viewport, method: str = "umap", bins: int = BINS) -> pd.DataFrame:
    """A `bins` x `bins` histogram of the points in `viewport`, computed in DuckDB: one row
    per non-empty bin with its column `ix` and row `iy` (0 = lowest x / y), its centre
    `x`, `y`, `count`, the `cluster` most of its points belong to (ties: the smallest id)
    and that cluster's `share` of them, and `purity`, the mean over its points of their
    cluster's purity (missing where none has one).

    Bins are [edge_i, edge_i+1) with edge_i = x0 + i (x1 - x0) / bins, the last one closed
    on both sides, as numpy.histogram2d cuts them.
    """
    if not 1 <= int(bins) <= 2_000:
        raise ConceptLensError(f"bins must be in [1, 2000], got {bins}")
    x0, x1, y0, y1 = check_viewport(viewport)
    purity = (
        "(SELECT cluster, purity FROM cluster_metrics WHERE checkpoint_id = $ckpt AND k = $k)"
        if db.has("cluster_metrics")
        else "(SELECT NULL::BIGINT AS cluster, NULL::DOUBLE AS purity WHERE false)"
    )
    rows = db.query(
        f"""
        WITH b AS (
            SELECT least(CAST(floor((p.x - $x0) * $sx) AS INTEGER), $nb - 1) AS ix,
                   least(CAST(floor((p.y - $y0) * $sy) AS INTEGER), $nb - 1) AS iy,
                   c.cluster, count(*) AS n
            FROM projections p LEFT JOIN {_clusters_of(db)} c USING (image_id)
            WHERE p.checkpoint_id = $ckpt AND p.method = $m
              AND p.x BETWEEN $x0 AND $x1 AND p.y BETWEEN $y0 AND $y1
            GROUP BY ALL),
        r AS (SELECT *, row_number() OVER (PARTITION BY ix, iy ORDER BY n DESC, cluster NULLS LAST) AS rank
              FROM b)
        SELECT r.ix, r.iy, sum(r.n)::BIGINT AS count,
               max(CASE WHEN r.rank = 1 THEN r.cluster END) AS cluster,
               max(CASE WHEN r.rank = 1 THEN r.n END) / sum(r.n) AS share,
               sum(r.n * m.purity) / sum(CASE WHEN m.purity IS NOT NULL THEN r.n END) AS purity
        FROM r LEFT JOIN {purity} m USING (cluster)
        GROUP BY r.ix, r.iy ORDER BY r.iy, r.ix""",
        {
            "ckpt": checkpoint,
            "k": int(k),
            "m": method,
            "nb": int(bins),
            "sx": int(bins) / (x1 - x0),
            "sy": int(bins) / (y1 - y0),
            **_bounds((x0, x1, y0, y1)),
        },
    )
    rows["x"] = x0 + (rows["ix"] + 0.5) * (x1 - x0) / bins
    rows["y"] = y0 + (rows["iy"] + 0.5) * (y1 - y0) / bins
    rows["cluster"] = rows["cluster"].astype("Int64")
    return rows


def window(
    db,
    checkpoint: str,
    k: int,
    method: str = "umap",
    viewport=None,
    max_points: int = MAX_POINTS,
    bins: int = BINS,
) -> pd.DataFrame:
    """What a page draws of a projection in `viewport` (x0, x1, y0, y1; None: all of it):
    its points (`points_in`) when at most `max_points` lie there, else the `binned`
    histogram. `attrs` says which: `kind` (`points` or `bins`), `viewport` (the one used),
    `n` (points in it), `total` (points in the projection), `bins`."""
    if int(max_points) < 1:
        raise ConceptLensError(f"max_points must be at least 1, got {max_points}")
    whole, total = whole_viewport(db, checkpoint, method)
    if viewport is None:
        vp, n = whole, total
    else:
        vp = check_viewport(viewport)
        n = count_in(db, checkpoint, vp, method)
    kind = "bins" if n > int(max_points) else "points"
    if kind == "bins":
        out = binned(db, checkpoint, k, vp, method, bins)
    else:
        # An empty projection has no box: any one returns its (no) points, with the columns.
        out = points_in(db, checkpoint, k, vp or (0.0, 1.0, 0.0, 1.0), method, limit=max_points)
    out.attrs.update(kind=kind, viewport=vp, n=n, total=total, bins=int(bins))
    return out


window.large = True  # up to `max_points` rows or bins x bins: the app caches few of them


def bin_edges(viewport, bins: int = BINS) -> tuple[np.ndarray, np.ndarray]:
    """The x and y bin edges `binned` uses (numpy.histogram2d's for the same range)."""
    x0, x1, y0, y1 = check_viewport(viewport)
    return np.linspace(x0, x1, bins + 1), np.linspace(y0, y1, bins + 1)


# ---- a region drawn on a projection of any size, selected in DuckDB ---------------------------
def _region_where(region: str) -> tuple[str, dict]:
    """The SQL condition (on `p.x`, `p.y`) and parameters of `views.clusters.parse_region`'s
    region: its bounding box, and for a lasso the even-odd rule of
    `views.clusters.points_in_polygon`, edge by edge in the same arithmetic."""
    kind, pts = parse_region(region)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    params = {"rx0": float(lo[0]), "rx1": float(hi[0]), "ry0": float(lo[1]), "ry1": float(hi[1])}
    where = "p.x BETWEEN $rx0 AND $rx1 AND p.y BETWEEN $ry0 AND $ry1"
    if kind == "lasso":
        edges = []
        for i in range(len(pts)):
            j = i - 1 if i else len(pts) - 1
            params.update({f"px{i}": float(pts[i, 0]), f"py{i}": float(pts[i, 1])})
            edges.append(
                f"CAST(((p.y < $py{i}) <> (p.y < $py{j})) AND "
                f"(p.x < ($px{j} - $px{i}) * (p.y - $py{i}) / ($py{j} - $py{i}) + $px{i}) AS INTEGER)"
            )
        where += f" AND ({' + '.join(edges)}) % 2 = 1"
    return where, params


def _region_from(checkpoint: str, k: int, region: str, method: str) -> tuple[str, dict]:
    where, params = _region_where(region)
    sql = f"""
        FROM projections p JOIN images i USING (image_id)
        LEFT JOIN (SELECT image_id, cluster, distance FROM clusters
                   WHERE checkpoint_id = $ckpt AND k = $k) c USING (image_id)
        WHERE p.checkpoint_id = $ckpt AND p.method = $m AND {where}"""
    return sql, {"ckpt": checkpoint, "k": int(k), "m": method, **params}


def region_images(
    db, checkpoint: str, k: int, region: str, method: str = "umap", offset: int = 0, limit: int | None = None
) -> pd.DataFrame:
    """`views.clusters.region_images` computed in DuckDB alone, so a region of a million
    points is never read into Python: the images inside `region` (all of them, or
    `limit` from `offset`: one page), with the same columns, in the same order."""
    sql, params = _region_from(checkpoint, k, region, method)
    if limit is not None:
        params.update(n=int(limit), offset=int(offset))
    return db.query(
        f"""
        SELECT i.image_id, i.label_name, i.thumbnail, i.split, c.cluster, c.distance {sql}
        ORDER BY c.cluster, c.distance, i.image_id
        {"LIMIT $n OFFSET $offset" if limit is not None else ""}""",
        params,
    )


region_images.large = True  # without `limit`, every image of the region (the CSV)


def region_labels(db, checkpoint: str, k: int, region: str, method: str = "umap") -> pd.DataFrame:
    """`label_name`, `images`: every label of the images inside `region` with its count
    (as `views.clusters.selection_labels`), counted in DuckDB."""
    sql, params = _region_from(checkpoint, k, region, method)
    return db.query(
        f"""
        SELECT coalesce(i.label_name, 'no label') AS label_name, count(*) AS images {sql}
        GROUP BY 1 ORDER BY images DESC, label_name""",
        params,
    )
