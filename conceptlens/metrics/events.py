"""Concept events between consecutive clusterings: continuations, splits, merges, births
and deaths of clusters (issue 27).

Two clusterings of the same images (an earlier checkpoint's and a later one's) are
compared through their contingency table (`compare.contingency`): each non-zero cell is a
*link* from an earlier cluster `a` to a later cluster `b` carrying `count` images.

**The significance rule** (docs/analysis.md, "Concept events"). A link is *significant*
when all three hold:

1. it carries at least `min_images` images;
2. it carries at least `min_share` of the images of `a` or of those of `b`
   (`share_a = count / size_a`, `share_b = count / size_b`);
3. it carries more images than chance would: under independence of the two clusterings
   (images drawn into `b` at random, whatever their cluster in `a`) the count is
   hypergeometric, and its upper-tail p-value `P(X >= count)` must be below `alpha`
   divided by the number of links (Bonferroni). Without this a very large later cluster
   would be "significant" for every earlier cluster, since each sends it about its own
   share of the images by chance. `alpha=None` drops the test.

Nothing is random: the test is exact, so the events need no seed.

**The events**, from the significant links only:

* `continuation` — a and b are each other's only significant link;
* `split` — an earlier cluster with significant links to two or more later clusters;
* `merge` — a later cluster with significant links from two or more earlier clusters;
* `birth` — a later cluster with no significant link (no significant predecessor);
* `death` — an earlier cluster with no significant link (no significant successor).

A cluster can be in a split and a merge at once (images regrouped across clusters): both
events are listed. Small noise (a few images moved at random) and relabelled cluster ids
give continuations only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .compare import contingency

EVENT_KINDS = ("continuation", "split", "merge", "birth", "death")
MIN_SHARE = 0.2
MIN_IMAGES = 5
ALPHA = 0.01
EVENT_COLUMNS = [
    "kind",
    "before",
    "after",
    "size_before",
    "size_after",
    "images",
    "shares_before",
    "shares_after",
]


def _check(min_share: float, min_images: int, alpha: float | None) -> None:
    if not 0 < min_share <= 1:
        raise ValueError(f"min_share must be in (0, 1], got {min_share!r}")
    if int(min_images) != min_images or min_images < 1:
        raise ValueError(f"min_images must be a positive integer, got {min_images!r}")
    if alpha is not None and not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1] or None, got {alpha!r}")


def significant_links(
    links: pd.DataFrame,
    min_share: float = MIN_SHARE,
    min_images: int = MIN_IMAGES,
    alpha: float | None = ALPHA,
    total: int | None = None,
) -> pd.DataFrame:
    """The links of a contingency table (columns a, b, count, size_a, size_b) with
    `share_a`, `share_b`, `p_value` (hypergeometric upper tail; NaN with `alpha=None`) and
    `significant` (the rule of this module). `total` is the number of shared images
    (default: the sum of the counts, right when `links` is the whole table)."""
    _check(min_share, min_images, alpha)
    missing = [c for c in ("a", "b", "count", "size_a", "size_b") if c not in links.columns]
    if missing:
        raise ValueError(f"links lacks column(s) {', '.join(missing)}")
    out = links.copy()
    count = out["count"].to_numpy(dtype=np.int64)
    size_a = out["size_a"].to_numpy(dtype=np.int64)
    size_b = out["size_b"].to_numpy(dtype=np.int64)
    n = int(count.sum()) if total is None else int(total)
    out["share_a"] = count / np.maximum(size_a, 1)
    out["share_b"] = count / np.maximum(size_b, 1)
    sig = (count >= int(min_images)) & (
        np.maximum(out["share_a"], out["share_b"]).to_numpy() >= min_share - 1e-12
    )
    if alpha is not None and len(out):
        # P(X >= count), X ~ Hypergeom(population n, size_a successes, size_b draws).
        from scipy.stats import hypergeom  # here: a slow import the dashboard defers

        p = hypergeom.sf(count - 1, n, size_a, size_b)
        out["p_value"] = p
        sig &= p < alpha / len(out)
    else:
        out["p_value"] = np.nan
    out["significant"] = sig
    return out


def _sorted(values) -> list:
    return sorted(values, key=lambda v: (str(type(v)), v))


def events_from_links(
    links: pd.DataFrame,
    min_share: float = MIN_SHARE,
    min_images: int = MIN_IMAGES,
    alpha: float | None = ALPHA,
    total: int | None = None,
) -> pd.DataFrame:
    """The events of a contingency table (`compare.contingency` of two clusterings).

    One row per event: `kind` (EVENT_KINDS), `before` and `after` (tuples of cluster ids,
    sorted; empty for a birth's before and a death's after), `size_before` and
    `size_after` (tuples of those clusters' sizes), `images` (images on the event's
    significant links), `shares_before` (for each cluster before, the share of its images
    on those links) and `shares_after` (likewise after). Rows: by kind, then cluster ids.
    An earlier cluster absent from `links` (no shared image) is not seen: pass the whole
    table.
    """
    s = significant_links(links, min_share, min_images, alpha, total)
    sig = s[s["significant"]]
    size_a = s.groupby("a")["size_a"].first().to_dict()
    size_b = s.groupby("b")["size_b"].first().to_dict()
    succ = sig.groupby("a")["b"].apply(lambda v: tuple(_sorted(v))).to_dict()
    pred = sig.groupby("b")["a"].apply(lambda v: tuple(_sorted(v))).to_dict()
    rows = []

    def add(kind: str, before: tuple, after: tuple) -> None:
        cells = sig[sig["a"].isin(before) & sig["b"].isin(after)]
        rows.append(
            {
                "kind": kind,
                "before": before,
                "after": after,
                "size_before": tuple(int(size_a[c]) for c in before),
                "size_after": tuple(int(size_b[c]) for c in after),
                "images": int(cells["count"].sum()),
                "shares_before": tuple(
                    round(float(cells.loc[cells["a"] == c, "count"].sum() / size_a[c]), 4) for c in before
                ),
                "shares_after": tuple(
                    round(float(cells.loc[cells["b"] == c, "count"].sum() / size_b[c]), 4) for c in after
                ),
            }
        )

    for a in _sorted(size_a):
        after = succ.get(a, ())
        if not after:
            add("death", (a,), ())
        elif len(after) >= 2:
            add("split", (a,), after)
        elif pred.get(after[0], ()) == (a,):
            add("continuation", (a,), after)
    for b in _sorted(size_b):
        before = pred.get(b, ())
        if not before:
            add("birth", (), (b,))
        elif len(before) >= 2:
            add("merge", before, (b,))
    out = pd.DataFrame(rows, columns=EVENT_COLUMNS)
    order = {k: i for i, k in enumerate(EVENT_KINDS)}
    out = out.assign(_o=out["kind"].map(order)).sort_values("_o", kind="stable").drop(columns="_o")
    return out.reset_index(drop=True)


def _frame(ids, name: str) -> pd.DataFrame:
    v = np.asarray(ids)
    if v.ndim != 1:
        raise ValueError(f"{name} must be a one-dimensional array of cluster ids")
    if pd.isna(pd.Series(v)).any():
        raise ValueError(f"{name} has missing cluster ids")
    return pd.DataFrame({"image_id": np.arange(len(v)), "cluster": v})


def concept_events(
    before,
    after,
    min_share: float = MIN_SHARE,
    min_images: int = MIN_IMAGES,
    alpha: float | None = ALPHA,
) -> pd.DataFrame:
    """The events (`events_from_links`) from clustering `before` to clustering `after`:
    two arrays of cluster ids of the same images in the same order."""
    if len(before) != len(after):
        raise ValueError(f"before and after must assign the same images: {len(before)} != {len(after)} ids")
    fa, fb = _frame(before, "before"), _frame(after, "after")
    # contingency counts integer ids: code the labels, then name them again.
    codes_a, labels_a = pd.factorize(fa["cluster"], sort=True)
    codes_b, labels_b = pd.factorize(fb["cluster"], sort=True)
    links = contingency(fa.assign(cluster=codes_a), fb.assign(cluster=codes_b))
    links = links.assign(a=[labels_a[i] for i in links["a"]], b=[labels_b[i] for i in links["b"]])
    return events_from_links(links, min_share, min_images, alpha)


LINK_EVENTS = ("split", "merge", "split+merge", "continuation", "not significant")


def label_links(
    links: pd.DataFrame,
    min_share: float = MIN_SHARE,
    min_images: int = MIN_IMAGES,
    alpha: float | None = ALPHA,
    total: int | None = None,
) -> pd.DataFrame:
    """The links of a contingency table (`significant_links`) with `event`: the event a
    significant link belongs to (`split`: from a split cluster to one of its parts;
    `merge`: into a merged cluster; `split+merge`: both; `continuation`), or
    `not significant`. Every significant link is in one of these events, so choosing
    links by `event` draws exactly the events of `events_from_links`."""
    s = significant_links(links, min_share, min_images, alpha, total)
    ev = events_from_links(s, min_share, min_images, alpha, total)
    tags: dict[tuple, list[str]] = {}
    for e in ev[ev["kind"].isin(("split", "merge", "continuation"))].itertuples(index=False):
        for a in e.before:
            for b in e.after:
                tags.setdefault((a, b), []).append(e.kind)
    event = []
    for a, b, sig in zip(s["a"], s["b"], s["significant"]):
        kinds = tags.get((a, b), []) if sig else []
        event.append(
            "+".join(k for k in ("split", "merge", "continuation") if k in kinds) or "not significant"
        )
    return s.assign(event=event)


def sequence_events(
    clusterings,
    min_share: float = MIN_SHARE,
    min_images: int = MIN_IMAGES,
    alpha: float | None = ALPHA,
) -> pd.DataFrame:
    """Every event along an ordered sequence of clusterings of the same images.

    `clusterings` is a list of arrays of cluster ids (one per checkpoint, images in the
    same order) or a list of DataFrames with `image_id` and `cluster` (compared on the
    images both hold). Returns the events of each consecutive pair with `step` (the index
    of the later clustering: 1 for the first pair) first.
    """
    clusterings = list(clusterings)
    if len(clusterings) < 2:
        raise ValueError(f"clusterings needs two or more clusterings, got {len(clusterings)}")
    frames = []
    for i in range(1, len(clusterings)):
        x, y = clusterings[i - 1], clusterings[i]
        if isinstance(x, pd.DataFrame) and isinstance(y, pd.DataFrame):
            ev = events_from_links(contingency(x, y), min_share, min_images, alpha)
        else:
            ev = concept_events(x, y, min_share, min_images, alpha)
        frames.append(ev.assign(step=i))
    out = pd.concat(frames, ignore_index=True)
    return out[["step", *EVENT_COLUMNS]]
