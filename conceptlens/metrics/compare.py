"""Comparisons of clusters and clusterings: purity bins, clusterings against each other.

Pure functions of pandas DataFrames read from a workspace's cluster tables. `analyze
comparisons` stores what they compute for every pair of checkpoints, and the views of the
Clusters and Checkpoints pages call them on what they read; docs/dashboard.md describes
what the pages show.

* `purity_bins` — laina2020 Tables 1-2: mean coherence and its 95% interval by
  purity range.
* `pairwise_anmi` — adjusted NMI between the clusterings of several checkpoints
  (laina2020 compares SeLa with MoCo this way).
* `match_clusters` — the contingency table of two clusterings as links with
  counts, each classified as a split, a merge or a one-to-one match.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .scores import anmi, clopper_pearson

# laina2020 Tables 1-2 group clusters by purity in steps of 0.1.
PURITY_EDGES = tuple(round(x / 10, 1) for x in range(11))
COHERENCE_KINDS = ("coherence_random", "coherence_hard")


# ---- purity bins (laina2020 Tables 1-2) -------------------------------------------------
def _bin_label(lo: float, hi: float) -> str:
    return f"({lo:.1f}, {hi:.1f}]"


def _pooled_interval(values: pd.Series, trials: pd.Series | None) -> tuple[float, float, str]:
    """95% interval of the mean of per-cluster proportions.

    With the number of trials per cluster known, the trials of all clusters of
    the bin are pooled and the interval is Clopper-Pearson on the pooled
    successes (as laina2020 pools its HITs). Otherwise a normal interval of the
    mean over clusters (mean +- 1.96 s / sqrt(n), clipped to [0, 1]; a single
    cluster has no interval).
    """
    v = values.astype(float)
    ok = v.notna()
    if trials is not None:
        t = pd.to_numeric(trials, errors="coerce")
        ok_t = ok & t.notna() & (t > 0)
        if ok_t.any() and ok_t.sum() == ok.sum():
            n = int(t[ok_t].sum())
            k = int(np.round((v[ok_t] * t[ok_t]).sum()))
            lo, hi = clopper_pearson(min(max(k, 0), n), n)
            return lo, hi, "clopper-pearson"
    x = v[ok].to_numpy()
    if len(x) < 2:
        return math.nan, math.nan, "normal"
    half = 1.96 * x.std(ddof=1) / math.sqrt(len(x))
    return max(0.0, x.mean() - half), min(1.0, x.mean() + half), "normal"


def purity_bins(
    metrics: pd.DataFrame,
    edges=PURITY_EDGES,
    values: tuple[str, ...] | None = None,
    trials_col: str = "coherence_trials",
) -> pd.DataFrame:
    """Mean and 95% interval of coherence (and describability) per purity range.

    `metrics` has one row per cluster with `purity` and value columns in [0, 1]
    (default: `coherence_random`, `coherence_hard` and `describability_binary`
    when it has values). Ranges are left-open `(lo, hi]` as in laina2020, except that
    the first one also holds purity == lo. Clusters with a null purity are left
    out; empty ranges are not listed. One row per range with `purity_range`,
    `lo`, `hi`, `clusters` and for each value column `V_mean`, `V_lo`, `V_hi`,
    `V_n` (clusters with a value). The interval method is in `interval`.
    """
    edges = [float(e) for e in edges]
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"edges must be increasing with at least two entries, got {edges}")
    if values is None:
        values = tuple(c for c in COHERENCE_KINDS if c in metrics.columns)
        if "describability_binary" in metrics.columns and metrics["describability_binary"].notna().any():
            values += ("describability_binary",)
    missing = [c for c in ("purity", *values) if c not in metrics.columns]
    if missing:
        raise ValueError(f"metrics lacks column(s) {', '.join(missing)}")
    m = metrics[metrics["purity"].notna()]
    codes = pd.cut(m["purity"].astype(float), bins=edges, include_lowest=True, labels=False)
    trials = m[trials_col] if trials_col in m.columns else None
    rows = []
    for i in range(len(edges) - 1):
        sel = codes == i
        if not sel.any():
            continue
        g = m[sel]
        row = {
            "purity_range": _bin_label(edges[i], edges[i + 1]),
            "lo": edges[i],
            "hi": edges[i + 1],
            "clusters": int(len(g)),
        }
        methods = set()
        for v in values:
            col = g[v].astype(float)
            # Trials count coherence 2AFC answers; other values have no trial counts.
            t = trials[sel] if trials is not None and v in COHERENCE_KINDS else None
            lo, hi, how = _pooled_interval(col, t)
            row.update(
                {
                    f"{v}_mean": float(col.mean()) if col.notna().any() else math.nan,
                    f"{v}_lo": lo,
                    f"{v}_hi": hi,
                    f"{v}_n": int(col.notna().sum()),
                }
            )
            if col.notna().any():
                methods.add(how)
        row["interval"] = ", ".join(sorted(methods))
        rows.append(row)
    cols = ["purity_range", "lo", "hi", "clusters"]
    for v in values:
        cols += [f"{v}_mean", f"{v}_lo", f"{v}_hi", f"{v}_n"]
    return pd.DataFrame(rows, columns=cols + ["interval"])


# ---- filtering the cluster table -------------------------------------------------------
def filter_clusters(
    metrics: pd.DataFrame, min_size: int = 0, purity_range: tuple[float, float] = (0.0, 1.0), text: str = ""
) -> pd.DataFrame:
    """Clusters with at least `min_size` images, purity in the closed range and
    `text` (case-insensitive, plain substring) in the caption. A cluster with a
    null purity passes only the full range (0, 1)."""
    m = metrics
    keep = m["size"] >= int(min_size)
    lo, hi = float(purity_range[0]), float(purity_range[1])
    p = m["purity"].astype(float)
    in_range = p.between(lo, hi)
    if lo <= 0.0 and hi >= 1.0:
        in_range = in_range | p.isna()
    keep &= in_range
    text = (text or "").strip()
    if text:
        cap = m["caption"] if "caption" in m.columns else pd.Series("", index=m.index)
        keep &= cap.fillna("").str.contains(text, case=False, regex=False)
    return m[keep.fillna(False)].reset_index(drop=True)


# ---- clusterings against each other --------------------------------------------------------
def _assignment(df: pd.DataFrame, name: str) -> pd.Series:
    for c in ("image_id", "cluster"):
        if c not in df.columns:
            raise ValueError(f"{name} lacks column {c!r}")
    if df["image_id"].duplicated().any():
        raise ValueError(f"{name} assigns an image more than once")
    return df.set_index("image_id")["cluster"]


def pairwise_anmi(assignments: pd.DataFrame, order: list[str] | None = None) -> pd.DataFrame:
    """Square matrix of aNMI between every two checkpoints' clusterings.

    `assignments` has columns `checkpoint_id`, `image_id`, `cluster` (one k).
    Each pair is compared on the images both assign; fewer than 2 shared images
    give NaN. The diagonal is 1. Rows and columns follow `order` (default:
    sorted checkpoint ids).
    """
    for c in ("checkpoint_id", "image_id", "cluster"):
        if c not in assignments.columns:
            raise ValueError(f"assignments lacks column {c!r}")
    ids = order if order is not None else sorted(assignments["checkpoint_id"].unique())
    per = {cid: _assignment(g, cid) for cid, g in assignments.groupby("checkpoint_id", sort=False)}
    out = pd.DataFrame(np.nan, index=pd.Index(ids, name="checkpoint_id"), columns=list(ids))
    for i, a in enumerate(ids):
        if a not in per:
            continue
        out.loc[a, a] = 1.0
        for b in ids[i + 1 :]:
            if b not in per:
                continue
            j = per[a].to_frame("a").join(per[b].rename("b"), how="inner")
            if len(j) >= 2:
                out.loc[a, b] = out.loc[b, a] = anmi(j["a"], j["b"])
    return out


LINK_KINDS = ("one-to-one", "split", "merge", "split+merge", "partial", "minor")


def contingency(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Non-zero cells of the contingency table of clusterings A and B (shared images only).

    `a` and `b` have columns `image_id` and `cluster`. Returns `a`, `b`, `count`,
    `size_a`, `size_b` (sizes counted over the shared images): what the
    comparisons analysis stores in `cluster_links`.
    """
    sa, sb = _assignment(a, "a"), _assignment(b, "b")
    j = sa.to_frame("a").join(sb.rename("b"), how="inner")
    cols = ["a", "b", "count", "size_a", "size_b"]
    if j.empty:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    links = j.groupby(["a", "b"]).size().rename("count").reset_index()
    links["size_a"] = links["a"].map(j.groupby("a").size()).astype("int64")
    links["size_b"] = links["b"].map(j.groupby("b").size()).astype("int64")
    return links[cols].astype("int64")


def classify_links(links: pd.DataFrame, min_share: float = 0.2) -> pd.DataFrame:
    """Classify the links of a contingency table (columns a, b, count, size_a, size_b).

    Adds `share_a` (= count / size_a), `share_b` (= count / size_b) and `kind`:

    * a link is *significant for a* when share_a >= min_share (for b likewise);
    * cluster a is **split** when it has significant links to two or more b;
      cluster b is a **merge** when two or more a have links significant for b;
    * a link is `split` (significant for a, a split), `merge` (significant for
      b, b a merge), `split+merge` (both), `one-to-one` (significant for both
      sides otherwise), `partial` (significant for one side only) or `minor`
      (for neither).

    Rows are sorted by a, then count (descending).
    """
    if not 0 < min_share <= 1:
        raise ValueError(f"min_share must be in (0, 1], got {min_share!r}")
    cols = ["a", "b", "count", "share_a", "share_b", "size_a", "size_b", "kind"]
    if links.empty:
        return pd.DataFrame(columns=cols)
    links = links.copy()
    links["share_a"] = links["count"] / links["size_a"]
    links["share_b"] = links["count"] / links["size_b"]
    sig_a = links["share_a"] >= min_share - 1e-12
    sig_b = links["share_b"] >= min_share - 1e-12
    splits = set(links[sig_a].groupby("a").size().loc[lambda s: s >= 2].index)
    merges = set(links[sig_b].groupby("b").size().loc[lambda s: s >= 2].index)
    is_split = sig_a & links["a"].isin(splits)
    is_merge = sig_b & links["b"].isin(merges)
    links["kind"] = np.select(
        [is_split & is_merge, is_split, is_merge, sig_a & sig_b, sig_a | sig_b],
        ["split+merge", "split", "merge", "one-to-one", "partial"],
        default="minor",
    )
    links = links.sort_values(["a", "count", "b"], ascending=[True, False, True], kind="stable")
    return links[cols].reset_index(drop=True)


def match_clusters(a: pd.DataFrame, b: pd.DataFrame, min_share: float = 0.2) -> pd.DataFrame:
    """Match the clusters of clustering A to those of B by overlap: `classify_links`
    of their `contingency`."""
    if not 0 < min_share <= 1:
        raise ValueError(f"min_share must be in (0, 1], got {min_share!r}")
    return classify_links(contingency(a, b), min_share)


def cluster_changes(links: pd.DataFrame) -> dict[str, int]:
    """How many A clusters split, B clusters are merges, and one-to-one links."""
    if links.empty:
        return {"splits": 0, "merges": 0, "one_to_one": 0}
    split = links["kind"].isin(["split", "split+merge"])
    merge = links["kind"].isin(["merge", "split+merge"])
    return {
        "splits": int(links.loc[split, "a"].nunique()),
        "merges": int(links.loc[merge, "b"].nunique()),
        "one_to_one": int((links["kind"] == "one-to-one").sum()),
    }


# ---- checkpoints over training --------------------------------------------------------------
EPOCH_METRICS = ("knn_acc", "cl", "id", "clid", "anmi", "mean_purity", "mean_coherence")


def runs_with_stages(checkpoints: pd.DataFrame) -> pd.DataFrame:
    """Checkpoints of runs with two or more epochs, sorted by run and epoch.

    The run is `checkpoints.run` when the column exists, else the model and
    method (stages of one model trained one way). Checkpoints without an epoch
    are left out.
    """
    c = checkpoints.copy()
    if "run" in c.columns:
        run = c["run"].astype("string")
    else:
        run = pd.Series(pd.NA, index=c.index, dtype="string")
    fallback = c["model"].astype(str) + " / " + c["method"].astype(str)
    c["run"] = run.fillna(fallback)
    c = c[c["epoch"].notna()]
    n = c.groupby("run")["epoch"].transform("nunique")
    c = c[n >= 2].copy()
    c["epoch"] = c["epoch"].astype(int)
    return c.sort_values(["run", "epoch", "checkpoint_id"]).reset_index(drop=True)


def epoch_long(metrics: pd.DataFrame, metrics_cols=EPOCH_METRICS) -> pd.DataFrame:
    """Long table (run, epoch, checkpoint_id, metric, value; and method when `metrics` has
    it) for metric-vs-epoch plots."""
    cols = [c for c in metrics_cols if c in metrics.columns]
    ids = ["run", "epoch", "checkpoint_id"] + (["method"] if "method" in metrics.columns else [])
    long = metrics.melt(id_vars=ids, value_vars=cols, var_name="metric", value_name="value")
    long["metric"] = pd.Categorical(long["metric"], categories=cols, ordered=True)
    return long.sort_values(["metric", "run", "epoch"]).reset_index(drop=True)
