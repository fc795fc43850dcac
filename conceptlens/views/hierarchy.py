"""Reading a dataset's labels at a level of its hierarchy (table `label_hierarchy`,
conceptlens/hierarchy.py): the levels there are, each image's group at a level, each
cluster's purity at a level and the label histograms of a selection at a level, from the
stored cluster assignments. The Clusters page and its figures use them; nothing is stored.

A level is an int (0 = the roots); `within` (a node) restricts the groups to that node's
subtree (drill-down): its images fall in its children at the chosen level or deeper, every
other image in one group, `outside NODE`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import hierarchy as H
from ..metrics.scores import purity
from . import clusters as C

NO_LABEL = "no label"


def group_column(level: int) -> str:
    """The column a projection's points carry their group at `level` in (what the UMAP is
    coloured by, and the legend's title)."""
    return f"label level {int(level)}"


def outside(h: H.Hierarchy, within: str) -> str:
    return f"outside {h.name(within)}"


def _hierarchy(db, dataset: str) -> H.Hierarchy:
    h = H.read(db, dataset)
    if h is None:
        raise H.HierarchyError(f"dataset {dataset!r} has no label hierarchy (table {H.TABLE})")
    return h


def _check_level(h: H.Hierarchy, level: int, within: str | None) -> None:
    if not 0 <= int(level) < h.levels:
        raise H.HierarchyError(
            f"parameter level: {level!r} is not a level of dataset {h.dataset!r}'s hierarchy "
            f"(0 to {h.levels - 1})"
        )
    if within is not None and within not in h.parent:
        raise H.HierarchyError(
            f"parameter within: {within!r} is not a node of dataset {h.dataset!r}'s hierarchy"
        )


def levels(db, dataset: str) -> pd.DataFrame:
    """One row per level of the dataset's hierarchy: `level`, `name` (`level 0 (top)`...),
    `groups` (how many groups its images fall in at that level) and `examples` (the first
    few, by size). Empty without a hierarchy."""
    h = H.read(db, dataset)
    cols = ["level", "name", "groups", "examples"]
    if h is None:
        return pd.DataFrame(columns=cols)
    # Per distinct value, weighted by its images (1,000 ImageNet classes, not 50,000 images).
    per_value = pd.Series(_values(db, dataset, h), dtype=object).dropna().value_counts()
    out = []
    for level, name in enumerate(h.level_names()):
        groups = [h.name(h.ancestor(v, level)) for v in per_value.index]
        counts = per_value.groupby(groups).sum()
        counts = counts.sort_index().sort_values(ascending=False, kind="stable")
        out.append((level, name, len(counts), ", ".join(map(str, counts.index[:3]))))
    return pd.DataFrame(out, columns=cols)


def nodes(db, dataset: str) -> pd.DataFrame:
    """Every node with children (what a drill-down can open): `node`, `name`, `depth`,
    `children`, `images` (images in its subtree); by depth, then most images first."""
    h = H.read(db, dataset)
    cols = ["node", "name", "depth", "children", "images"]
    if h is None:
        return pd.DataFrame(columns=cols)
    under: dict[str, int] = {}
    per_value = pd.Series(_values(db, dataset, h), dtype=object).dropna().value_counts()
    for v, count in per_value.items():
        for n in h.path(v):
            under[n] = under.get(n, 0) + int(count)
    rows = [
        (n, h.name(n), h.depth[n], len(h.children(n)), under.get(n, 0))
        for n in h.parent
        if h.children(n) and under.get(n, 0)
    ]
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values(["depth", "images", "node"], ascending=[True, False, True]).reset_index(drop=True)


def _values(db, dataset: str, h: H.Hierarchy) -> list:
    """The images' values of the hierarchy's column, in image_id order."""
    return list(_image_values(db, dataset, h)["value"])


def _image_values(db, dataset: str, h: H.Hierarchy) -> pd.DataFrame:
    C_ = h.column.replace('"', '""')
    df = db.query(
        f'SELECT image_id, CAST("{C_}" AS VARCHAR) AS value FROM images '
        "WHERE dataset = $ds ORDER BY image_id",
        {"ds": dataset},
    )
    df["value"] = df["value"].astype(object).where(df["value"].notna(), None)
    return df


def image_groups(db, dataset: str, level: int, within: str | None = None) -> pd.DataFrame:
    """`image_id`, `node`, `group`: each image of the dataset and its group at `level`
    (`group` as shown: the node's name; `no label` for an image without a value; with
    `within`, `outside NODE` for the images outside its subtree)."""
    h = _hierarchy(db, dataset)
    _check_level(h, level, within)
    df = _image_values(db, dataset, h)
    node_of, name_of = {}, {}  # per distinct value
    for v in df["value"].dropna().unique():
        g = h.group(v, int(level), within)
        node_of[v], name_of[v] = g, (outside(h, within) if g is None else h.name(g))
    nodes_ = [None if v is None else node_of[v] for v in df["value"]]
    names = [NO_LABEL if v is None else name_of[v] for v in df["value"]]
    return pd.DataFrame({"image_id": df["image_id"], "node": nodes_, "group": names})


def cluster_purity(db, dataset: str, checkpoint: str, k: int, level: int) -> pd.DataFrame:
    """Each cluster's laina2020 purity at `level` (1 - H / log K over its images' groups,
    K = the groups of the whole dataset at that level, as `cluster_metrics` computes it
    over labels): `cluster`, `size`, `level_purity`, `level_top` (the most frequent group,
    ties by name), `level_top_share`. Images without a value are left out, as unlabelled
    images are from the stored purity."""
    g = image_groups(db, dataset, level)
    assigned = db.query(
        "SELECT image_id, cluster FROM clusters WHERE checkpoint_id = $ckpt AND k = $k",
        {"ckpt": checkpoint, "k": int(k)},
    )
    df = assigned.merge(g, on="image_id", how="left")
    labelled = g["node"].notna()
    codes = {name: i for i, name in enumerate(sorted(g.loc[labelled, "group"].unique()))}
    n_classes = len(codes)
    rows = []
    for c, part in df.groupby("cluster", sort=True):
        have = part[part["node"].notna()]
        p, top, share = math.nan, None, math.nan
        if n_classes and len(have):
            y = have["group"].map(codes).to_numpy(np.int64)
            p, top_code, share = purity(y, n_classes)
            top = next(name for name, i in codes.items() if i == top_code)
        rows.append(
            (int(c), len(part), None if math.isnan(p) else p, top, None if math.isnan(share) else share)
        )
    return pd.DataFrame(rows, columns=["cluster", "size", "level_purity", "level_top", "level_top_share"])


def _counts(groups: pd.Series) -> pd.DataFrame:
    counts = groups.value_counts().rename_axis("label_name").reset_index(name="images")
    counts["label_name"] = counts["label_name"].astype(object)
    return counts.sort_values(["images", "label_name"], ascending=[False, True], kind="stable").reset_index(
        drop=True
    )


def selection_groups(
    db,
    dataset: str,
    checkpoint: str,
    k: int,
    clusters: tuple[int, ...],
    level: int,
    within: str | None = None,
) -> pd.DataFrame:
    """`label_name`, `images`: `views.clusters.selection_labels` at `level` (the groups
    of the given clusters' images, most first, ties by name)."""
    g = image_groups(db, dataset, level, within)
    ids = db.query(
        """SELECT image_id FROM clusters
           WHERE checkpoint_id = $ckpt AND k = $k AND list_contains($clusters, cluster)""",
        {"ckpt": checkpoint, "k": int(k), "clusters": [int(c) for c in clusters]},
    )
    return _counts(g[g["image_id"].isin(set(ids["image_id"]))]["group"])


def region_groups(
    db, dataset: str, checkpoint: str, k: int, region: str, level: int, within: str | None = None
) -> pd.DataFrame:
    """`label_name`, `images`: the groups at `level` of the images inside a region drawn on
    the projection (`views.clusters.region_images`)."""
    g = image_groups(db, dataset, level, within)
    ids = C.region_images(db, checkpoint, k, region)["image_id"]
    return _counts(g[g["image_id"].isin(set(ids))]["group"])


def projection(
    db,
    checkpoint: str,
    k: int,
    dataset: str,
    level: int,
    within: str | None = None,
    method: str = "umap",
    limit: int = 20_000,
) -> pd.DataFrame:
    """`views.clusters.projection` with one more column, `group_column(level)`: each
    point's group at `level` (what the UMAP is coloured by when a level is chosen)."""
    pts = C.projection(db, checkpoint, k, method, limit)
    g = image_groups(db, dataset, level, within)
    pts[group_column(level)] = pts["image_id"].map(dict(zip(g["image_id"], g["group"])))
    return pts


projection.large = True  # up to `limit` rows: the app caches few of them
