"""Display versions of the cluster tables: readable columns, intervals as text, formats."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

NUM2 = "%.2f"


def interval_text(lo: pd.Series, hi: pd.Series) -> pd.Series:
    """'[0.36, 0.81]' per row; empty where either end is missing."""
    lo, hi = lo.astype(float), hi.astype(float)
    text = [f"[{a:.2f}, {b:.2f}]" if a == a and b == b else "" for a, b in zip(lo, hi)]
    return pd.Series(text, index=lo.index, dtype=object)


def cluster_table(metrics: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The Clusters page table: one row per cluster, in the order of `metrics`."""
    m = metrics
    t = pd.DataFrame(
        {
            "cluster": m["cluster"].astype(int),
            "size": m["size"].astype(int),
            "purity": m["purity"].astype(float),
        }
    )
    for kind, name in (("coherence_random", "R"), ("coherence_hard", "H")):
        if kind in m.columns:
            t[f"coh. ({name})"] = m[kind].astype(float)
            t[f"CI ({name})"] = interval_text(m[f"{kind}_lo"], m[f"{kind}_hi"])
    t["caption"] = m["caption"] if "caption" in m.columns else ""
    t["top label"] = m["top_label_name"] if "top_label_name" in m.columns else m.get("top_label")
    t["top share"] = m["top_label_share"].astype(float) if "top_label_share" in m.columns else np.nan
    if "describability_binary" in m.columns and m["describability_binary"].notna().any():
        t["describability"] = m["describability_binary"].astype(float)
    if "hard_negative" in m.columns:
        t["hard negative"] = m["hard_negative"].astype("Int64")
    config = {
        "cluster": st.column_config.NumberColumn(width="small"),
        "size": st.column_config.NumberColumn(width="small"),
        "purity": st.column_config.NumberColumn(format=NUM2, width="small"),
        "coh. (R)": st.column_config.NumberColumn(
            format=NUM2, width="small", help="2AFC coherence with random negatives"
        ),
        "CI (R)": st.column_config.TextColumn(help="Clopper-Pearson 95% interval, random negatives"),
        "coh. (H)": st.column_config.NumberColumn(
            format=NUM2, width="small", help="2AFC coherence with hard negatives"
        ),
        "CI (H)": st.column_config.TextColumn(help="Clopper-Pearson 95% interval, hard negatives"),
        "caption": st.column_config.TextColumn(width="large"),
        "top share": st.column_config.NumberColumn(format="percent", width="small"),
        "hard negative": st.column_config.NumberColumn(width="small"),
        "describability": st.column_config.NumberColumn(
            format=NUM2,
            width="small",
            help="Share of (in, out) image pairs where the caption scores the in-cluster image "
            "higher (vision-language proxy)",
        ),
    }
    return t, config


def purity_bins_table(bins: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """laina2020 Tables 1-2 layout: purity range, clusters, mean and 95% CI per negative type."""
    t = pd.DataFrame({"purity range": bins["purity_range"], "clusters": bins["clusters"]})
    for kind, name in (
        ("coherence_random", "coherence (R)"),
        ("coherence_hard", "coherence (H)"),
        ("describability_binary", "describability"),
    ):
        if f"{kind}_mean" in bins.columns:
            t[f"{name} mean"] = bins[f"{kind}_mean"]
            t[f"{name} 95% CI"] = interval_text(bins[f"{kind}_lo"], bins[f"{kind}_hi"])
    config = {c: st.column_config.NumberColumn(format=NUM2) for c in t.columns if c.endswith(" mean")}
    return t, config
