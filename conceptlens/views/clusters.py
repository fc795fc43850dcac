"""The Clusters page: one checkpoint's k-means clusters, their metrics, captions and images."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..metrics import compare
from .home import factors

# What a page can sort the cluster table by (the `cluster_table` column behind each).
SORTABLE = ("cluster", "size", "purity", "coherence_random", "coherence_hard", "describability_binary")


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
    """The checkpoints of `dataset` that have cluster metrics: each model's own embedding
    first, then the checkpoints of layers (`embeddings_first`), by id."""
    return db.query(
        f"""
        SELECT m.checkpoint_id FROM (SELECT DISTINCT checkpoint_id FROM cluster_metrics) m
        JOIN checkpoints c USING (checkpoint_id)
        WHERE c.dataset = $ds ORDER BY {embeddings_first(db)}m.checkpoint_id""",
        {"ds": dataset},
    )


def embeddings_first(db, alias: str = "c") -> str:
    """The ORDER BY term that puts each model's own embedding (`layer` null) before the
    checkpoints of its layers, so a page opens on (and compares) models, not an early
    block that happens to sort first; empty when `checkpoints` has no `layer` column."""
    return f"{alias}.layer IS NOT NULL, " if "layer" in db.columns("checkpoints") else ""


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


def caption_matches(captions: pd.Series, text: str) -> pd.Series:
    """True where a caption holds every word of `text` as a whole word, in any order,
    ignoring case ("red" finds "a red circle", not "checkered"); plain text, no
    patterns. Empty `text` matches every row, a missing caption none."""
    words = (text or "").split()
    keep = pd.Series(True, index=captions.index)
    for w in words:
        # (?<!\w) / (?!\w) rather than \b: a word may start or end with punctuation.
        pattern = rf"(?<!\w){re.escape(w)}(?!\w)"
        keep &= captions.fillna("").astype(str).str.contains(pattern, case=False, regex=True)
    return keep


def filtered_clusters(
    db,
    dataset: str,
    checkpoint: str,
    k: int,
    min_size: int = 0,
    purity: tuple[float, float] = (0.0, 1.0),
    text: str = "",
    captions: bool = True,
    sort: str = "cluster",
    descending: bool = False,
) -> pd.DataFrame:
    """`cluster_table` restricted by size and purity (`compare.filter_clusters`) and to
    captions holding every word of `text` (`caption_matches`), sorted by `sort` (one of
    SORTABLE; missing values last, ties by cluster)."""
    if sort not in SORTABLE:
        raise ValueError(f"sort must be one of {', '.join(SORTABLE)}, got {sort!r}")
    table = cluster_table(db, dataset, checkpoint, k, captions)
    table = compare.filter_clusters(table, min_size, tuple(purity))
    if (text or "").strip():
        no_caption = pd.Series(None, index=table.index, dtype=object)
        table = table[caption_matches(table.get("caption", no_caption), text)]
    if sort not in table.columns:
        sort = "cluster"
    table = table.sort_values(["cluster"]).sort_values(
        sort, ascending=not descending, na_position="last", kind="stable"
    )
    return table.reset_index(drop=True)


def purity_bins(db, dataset: str, checkpoint: str, k: int, captions: bool = True) -> pd.DataFrame:
    """laina2020 Tables 1-2: mean coherence (and describability) per purity range."""
    return compare.purity_bins(cluster_table(db, dataset, checkpoint, k, captions))


def cluster_and_hard_negative(
    db, dataset: str, checkpoint: str, k: int, cluster: int, captions: bool = True
) -> pd.DataFrame:
    """The `cluster_table` rows of `cluster` and of its hard negative, with `role`
    (`cluster`, `hard negative`); no second row when it has none."""
    return pair_rows(cluster_table(db, dataset, checkpoint, k, captions), cluster)


def pair_rows(t: pd.DataFrame, cluster: int) -> pd.DataFrame:
    """cluster_and_hard_negative from a `cluster_table` already at hand (a page has it:
    choosing another cluster then costs no query)."""
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
    return clusters_images(db, checkpoint, k, (cluster,), limit).drop(columns="cluster")


def clusters_images(db, checkpoint: str, k: int, clusters: tuple[int, ...], limit: int = 24) -> pd.DataFrame:
    """The images of several clusters in one query (a cluster and its hard negative), with
    `cluster`: the first `limit` of each, nearest to its centroid first, by cluster."""
    return db.query(
        """
        SELECT c.cluster, i.image_id, i.label_name, i.thumbnail, c.distance
        FROM clusters c JOIN images i USING (image_id)
        WHERE c.checkpoint_id = $ckpt AND c.k = $k AND list_contains($clusters, c.cluster)
        QUALIFY row_number() OVER (PARTITION BY c.cluster ORDER BY c.distance, i.image_id) <= $n
        ORDER BY c.cluster, c.distance, i.image_id""",
        {"ckpt": checkpoint, "k": int(k), "clusters": [int(c) for c in clusters], "n": int(limit)},
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
    return db.query_large(
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


projection.large = True  # up to `limit` rows: the app caches few of them


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


# ---- selections: a cluster, the clusters a filter keeps, a region of the projection ---------
def selection_images(
    db, checkpoint: str, k: int, clusters: tuple[int, ...], offset: int = 0, limit: int | None = None
) -> pd.DataFrame:
    """The images of the given clusters (all of them, or `limit` from `offset`: one page
    of a selection that may be every image): `image_id`, `label_name`, `thumbnail`,
    `split`, `cluster`, `distance`; by cluster, then nearest to its centroid first."""
    return db.query(
        f"""
        SELECT i.image_id, i.label_name, i.thumbnail, i.split, c.cluster, c.distance
        FROM clusters c JOIN images i USING (image_id)
        WHERE c.checkpoint_id = $ckpt AND c.k = $k AND list_contains($clusters, c.cluster)
        ORDER BY c.cluster, c.distance, i.image_id
        {"LIMIT $n OFFSET $offset" if limit is not None else ""}""",
        {
            "ckpt": checkpoint,
            "k": int(k),
            "clusters": [int(c) for c in clusters],
            **({"n": int(limit), "offset": int(offset)} if limit is not None else {}),
        },
    )


def selection_labels(db, checkpoint: str, k: int, clusters: tuple[int, ...]) -> pd.DataFrame:
    """`label_name`, `images`: every label of the given clusters' images with its count,
    counted in DuckDB (a selection may be every image; `top_labels` cuts it as
    `label_counts` does), most first, ties by name, missing labels as "no label"."""
    return db.query(
        """
        SELECT coalesce(i.label_name, 'no label') AS label_name, count(*) AS images
        FROM clusters c JOIN images i USING (image_id)
        WHERE c.checkpoint_id = $ckpt AND c.k = $k AND list_contains($clusters, c.cluster)
        GROUP BY 1 ORDER BY images DESC, label_name""",
        {"ckpt": checkpoint, "k": int(k), "clusters": [int(c) for c in clusters]},
    )


def region_box(pts: np.ndarray) -> dict:
    """The bounding box of a region's vertices as query parameters x0, x1, y0, y1 (the
    SQL's `x BETWEEN $x0 AND $x1 AND y BETWEEN $y0 AND $y1` that every region view uses)."""
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    return {"x0": float(lo[0]), "x1": float(hi[0]), "y0": float(lo[1]), "y1": float(hi[1])}


def in_region(rows: pd.DataFrame, kind: str, pts: np.ndarray) -> pd.DataFrame:
    """The rows (columns x, y) of a box query that the region holds: all of a box's, a
    lasso's by the even-odd rule (`points_in_polygon`)."""
    if kind != "lasso":
        return rows
    return rows[points_in_polygon(rows["x"].to_numpy(), rows["y"].to_numpy(), pts)]


def parse_region(text: str) -> tuple[str, np.ndarray]:
    """`box:x0,x1,y0,y1` or `lasso:x1,y1,x2,y2,...` (a region drawn on a projection, as
    the URL keeps it) -> (kind, vertices as an (n, 2) array; a box as its two corners)."""
    kind, _, rest = str(text).partition(":")
    try:
        nums = np.array([float(v) for v in rest.split(",")], dtype=float)
    except ValueError:
        raise ValueError(f"region {text!r}: coordinates must be numbers") from None
    if not np.isfinite(nums).all():
        raise ValueError(f"region {text!r}: coordinates must be finite")
    if kind == "box" and len(nums) == 4:
        return kind, np.array([[nums[0], nums[2]], [nums[1], nums[3]]])
    if kind == "lasso" and len(nums) >= 6 and len(nums) % 2 == 0:
        return kind, nums.reshape(-1, 2)
    raise ValueError(f"region {text!r} is neither box:x0,x1,y0,y1 nor lasso:x1,y1,x2,y2,x3,y3,...")


def region_text(kind: str, xs, ys, max_vertices: int = 80) -> str:
    """The inverse of `parse_region` for a box (two x, two y) or a lasso path; a long lasso
    keeps every n-th vertex, so a link stays short."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    if kind == "box":
        return "box:" + ",".join(f"{v:.6g}" for v in (min(xs), max(xs), min(ys), max(ys)))
    step = max(1, int(np.ceil(len(xs) / max_vertices)))
    return "lasso:" + ",".join(f"{x:.5g},{y:.5g}" for x, y in zip(xs[::step], ys[::step]))


def points_in_polygon(x: np.ndarray, y: np.ndarray, polygon: np.ndarray) -> np.ndarray:
    """Even-odd rule: True for each point (x[i], y[i]) inside the closed `polygon` (n, 2)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    inside = np.zeros(len(x), bool)
    px, py = polygon[:, 0], polygon[:, 1]
    j = len(polygon) - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(len(polygon)):
            crosses = (py[i] > y) != (py[j] > y)
            at = (px[j] - px[i]) * (y - py[i]) / (py[j] - py[i]) + px[i]
            inside ^= crosses & (x < at)
            j = i
    return inside


def region_images(db, checkpoint: str, k: int, region: str, method: str = "umap") -> pd.DataFrame:
    """Every image of the checkpoint's projection inside `region` (`parse_region`), with
    the columns of `selection_images`, in the same order."""
    kind, pts = parse_region(region)
    rows = db.query(
        """
        SELECT p.x, p.y, i.image_id, i.label_name, i.thumbnail, i.split, c.cluster, c.distance
        FROM projections p JOIN images i USING (image_id)
        LEFT JOIN (SELECT image_id, cluster, distance FROM clusters
                   WHERE checkpoint_id = $ckpt AND k = $k) c USING (image_id)
        WHERE p.checkpoint_id = $ckpt AND p.method = $m
          AND p.x BETWEEN $x0 AND $x1 AND p.y BETWEEN $y0 AND $y1
        ORDER BY c.cluster, c.distance, i.image_id""",
        {"ckpt": checkpoint, "k": int(k), "m": method, **region_box(pts)},
    )
    return in_region(rows, kind, pts).drop(columns=["x", "y"]).reset_index(drop=True)


region_images.large = True  # a region may hold every image


def label_counts(images: pd.DataFrame, top: int = 30) -> pd.DataFrame:
    """`label_name`, `images`: how many images of a selection carry each label, most
    first (ties by name); labels past the `top` most frequent are summed as "other
    labels (n)", missing ones shown as "no label"."""
    names = images["label_name"].astype("string").fillna("no label")
    counts = names.value_counts().rename_axis("label_name").reset_index(name="images")
    return top_labels(counts, top)


def top_labels(counts: pd.DataFrame, top: int = 30) -> pd.DataFrame:
    """`label_counts`' ordering and cut of counts already made (`selection_labels`)."""
    counts = counts.sort_values(["images", "label_name"], ascending=[False, True], kind="stable")
    if len(counts) > top:
        rest = counts.iloc[top - 1 :]
        other = {"label_name": [f"other labels ({len(rest)})"], "images": [rest["images"].sum()]}
        counts = pd.concat([counts.iloc[: top - 1], pd.DataFrame(other)])
    return counts.reset_index(drop=True)


# ---- one image ---------------------------------------------------------------------------------
def image_details(db, image_id: str, checkpoint: str, k: int, method: str = "umap") -> pd.DataFrame:
    """One row: every column of `images` for `image_id`, its `cluster` and `distance` at
    (checkpoint, k) and its projection `x`, `y` (missing when not computed). No row for
    an unknown id."""
    has_proj = db.has("projections")
    return db.query(
        f"""
        SELECT i.*, c.cluster, c.distance {", p.x, p.y" if has_proj else ""}
        FROM images i
        LEFT JOIN (SELECT image_id, cluster, distance FROM clusters
                   WHERE checkpoint_id = $ckpt AND k = $k) c USING (image_id)
        {
            "LEFT JOIN (SELECT image_id, x, y FROM projections "
            "WHERE checkpoint_id = $ckpt AND method = $m) p USING (image_id)"
            if has_proj
            else ""
        }
        WHERE i.image_id = $img""",
        {"img": str(image_id), "ckpt": checkpoint, "k": int(k), **({"m": method} if has_proj else {})},
    )


def image_captions(db, image_id: str) -> pd.DataFrame:
    """`captioner`, `text`: every stored caption of the image."""
    if not db.has("captions"):
        return pd.DataFrame({"captioner": pd.Series(dtype=str), "text": pd.Series(dtype=str)})
    return db.query(
        "SELECT captioner, text FROM captions WHERE image_id = $img ORDER BY captioner",
        {"img": str(image_id)},
    )


def neighbours(db, checkpoint: str, k: int, image_id: str, n: int = 8) -> pd.DataFrame:
    """The `n` images nearest to `image_id` in the checkpoint's features by cosine
    similarity (computed in DuckDB over the checkpoint's feature file): `image_id`,
    `similarity`, `label_name`, `thumbnail`, `cluster` (at k); most similar first, ties
    by id. Empty when the checkpoint has no features or no feature for the image."""
    if not db.has("features"):
        return pd.DataFrame(columns=["image_id", "similarity", "label_name", "thumbnail", "cluster"]).astype(
            {"similarity": float}
        )
    return db.query(
        """
        WITH q AS (SELECT embedding AS e FROM features
                   WHERE checkpoint_id = $ckpt AND image_id = $img LIMIT 1),
             near AS (SELECT f.image_id, list_cosine_similarity(f.embedding, q.e) AS similarity
                      FROM features f, q
                      WHERE f.checkpoint_id = $ckpt AND f.image_id <> $img
                      ORDER BY similarity DESC, f.image_id LIMIT $n)
        SELECT near.image_id, near.similarity, i.label_name, i.thumbnail, c.cluster
        FROM near JOIN images i USING (image_id)
        LEFT JOIN (SELECT image_id, cluster FROM clusters
                   WHERE checkpoint_id = $ckpt AND k = $k) c USING (image_id)
        ORDER BY near.similarity DESC, near.image_id""",
        {"ckpt": checkpoint, "k": int(k), "img": str(image_id), "n": int(n)},
    )


def checkpoint_info(db, checkpoint: str) -> pd.DataFrame:
    """The checkpoint's row of `checkpoints` (method, epoch, feature size, ...)."""
    return db.query("SELECT * FROM checkpoints WHERE checkpoint_id = $ckpt", {"ckpt": checkpoint})
