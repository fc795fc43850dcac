"""Display versions of the cluster tables: readable columns, one number format, missing
values shown as an em dash everywhere (cells, intervals, facts)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

DASH = "\u2014"  # what every missing value looks like
NUM2 = "%.2f"  # shares, purity, coherence, describability: two decimals everywhere


def missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def number(value, fmt: str = "{:.2f}") -> str:
    """`value` formatted, or an em dash when it is missing."""
    return DASH if missing(value) else fmt.format(value)


def value_text(value) -> str:
    """Any value as text: an em dash when missing, floats with three decimals."""
    if missing(value):
        return DASH
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def interval(lo, hi) -> str:
    """'[0.36, 0.81]', or an em dash when either end is missing."""
    return DASH if missing(lo) or missing(hi) else f"[{float(lo):.2f}, {float(hi):.2f}]"


def interval_text(lo: pd.Series, hi: pd.Series) -> pd.Series:
    """`interval` per row; None (drawn as the table's em dash) where an end is missing."""
    text = [None if missing(a) or missing(b) else interval(a, b) for a, b in zip(lo, hi)]
    return pd.Series(text, index=lo.index, dtype=object)


# Display name -> (source column, column config). The order is the table's.
_HELP = {
    "purity CI": "95% percentile bootstrap interval of purity: the cluster's images resampled "
    "(cluster_metrics --bootstrap, seeded). A small cluster's interval often starts at its purity: "
    "purity is the largest label share, and a resample's largest share is rarely below the "
    "cluster's own (a maximum is biased upwards), so the interval is widened to hold the estimate",
    "coh. (R)": "2AFC coherence with random negatives (laina2020 Eq. 3)",
    "CI (R)": "Clopper-Pearson 95% interval, random negatives",
    "coh. (H)": "2AFC coherence with hard negatives (the nearest cluster's images)",
    "CI (H)": "Clopper-Pearson 95% interval, hard negatives",
    "desc. top-1": "laina2020 Table 3 Top-1: share of the 10 images the VL model retrieves for the "
    "caption that the clustering puts in this cluster",
    "desc. top-5": "laina2020 Table 3 Top-5: share of the retrieved images with this cluster among "
    "their 5 nearest clusters",
    "desc. binary": "laina2020 Table 3 Binary: share of (retrieved image, image retrieved for another "
    "cluster's caption) pairs where the first is nearer this cluster's mean feature",
    "level purity": "Purity (1 - H / log K) of the cluster's labels read at the chosen level of the "
    "dataset's label hierarchy (K: the groups of the dataset at that level)",
    "level top": "The most frequent group at the chosen level",
    "level share": "Share of the cluster's images in that group",
    "self-ref.": "The VL model that retrieved the images is this checkpoint's own model: describability "
    "then measures the checkpoint against itself",
}
DEFAULT_COLUMNS = (
    "cluster",
    "size",
    "purity",
    "purity CI",
    "level purity",
    "level top",
    "coh. (R)",
    "CI (R)",
    "coh. (H)",
    "caption",
    "top label",
    "top share",
    "desc. binary",
    "self-ref.",
)


def cluster_table(metrics: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The Clusters page table: one row per cluster, in the order of `metrics`; every
    column it can show (the page picks the visible ones) and their column config."""
    m = metrics
    t = pd.DataFrame(
        {
            "cluster": m["cluster"].astype(int),
            "size": m["size"].astype(int),
            "purity": m["purity"].astype(float),
        }
    )
    if "purity_lo" in m.columns and m["purity_lo"].notna().any():
        t["purity CI"] = interval_text(m["purity_lo"], m["purity_hi"])
    if "level_purity" in m.columns:  # a level of the label hierarchy is chosen
        t["level purity"] = m["level_purity"].astype(float)
        t["level top"] = m["level_top"]
        t["level share"] = m["level_top_share"].astype(float)
    for kind, name in (("coherence_random", "R"), ("coherence_hard", "H")):
        if kind in m.columns:
            t[f"coh. ({name})"] = m[kind].astype(float)
            t[f"CI ({name})"] = interval_text(m[f"{kind}_lo"], m[f"{kind}_hi"])
    t["caption"] = m["caption"] if "caption" in m.columns else None
    t["top label"] = m["top_label_name"] if "top_label_name" in m.columns else m.get("top_label")
    t["top share"] = m["top_label_share"].astype(float) if "top_label_share" in m.columns else float("nan")
    for col, name in (
        ("describability_top1", "desc. top-1"),
        ("describability_top5", "desc. top-5"),
        ("describability_binary", "desc. binary"),
    ):
        if col in m.columns and m[col].notna().any():
            t[name] = m[col].astype(float)
    if "describability_self" in m.columns and m["describability_self"].notna().any():
        flag = m["describability_self"]
        t["self-ref."] = flag.map(lambda v: None if missing(v) else ("yes" if v else "no"))
    if "hard_negative" in m.columns:
        t["hard negative"] = m["hard_negative"].astype("Int64")
    config = {
        "cluster": st.column_config.NumberColumn(width="small", format="%d"),
        "size": st.column_config.NumberColumn(width="small", format="%d"),
        "hard negative": st.column_config.NumberColumn(width="small", format="%d"),
        "caption": st.column_config.TextColumn(width="large"),
        "top label": st.column_config.TextColumn(width="medium"),
        "level top": st.column_config.TextColumn(width="medium", help=_HELP["level top"]),
    }
    for name in t.columns:
        if name in config:
            continue
        if pd.api.types.is_float_dtype(t[name]):
            config[name] = st.column_config.NumberColumn(format=NUM2, width="small", help=_HELP.get(name))
        else:
            config[name] = st.column_config.TextColumn(help=_HELP.get(name))
    return t, config


def purity_bins_table(bins: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """laina2020 Tables 1-2 layout: purity range, clusters, mean and 95% CI per negative type."""
    t = pd.DataFrame({"purity range": bins["purity_range"], "clusters": bins["clusters"]})
    for kind, name in (
        ("coherence_random", "coherence (R)"),
        ("coherence_hard", "coherence (H)"),
        ("describability_binary", "desc. binary"),
    ):
        if f"{kind}_mean" in bins.columns:
            t[f"{name} mean"] = bins[f"{kind}_mean"].astype(float)
            t[f"{name} 95% CI"] = interval_text(bins[f"{kind}_lo"], bins[f"{kind}_hi"])
    config = {c: st.column_config.NumberColumn(format=NUM2) for c in t.columns if c.endswith(" mean")}
    config["clusters"] = st.column_config.NumberColumn(format="%d")
    return t, config


def selection_csv(images: pd.DataFrame) -> bytes:
    """A selection's images as CSV: image_id, label_name, cluster (one row per image)."""
    cols = [c for c in ("image_id", "label_name", "cluster") if c in images.columns]
    return images[cols].to_csv(index=False).encode()
