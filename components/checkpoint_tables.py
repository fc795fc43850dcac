"""Display versions of the Checkpoints page's tables, in the number formats and with the
em dash for missing values of `components.cluster_tables`; readable names of their columns
for the page's controls."""

from __future__ import annotations

import pandas as pd

from components.cluster_tables import interval_text
from components.formats import CHECKPOINT_FORMATS

COLUMN_NAMES = {
    "checkpoint_id": "checkpoint",
    "knn_acc": "kNN acc.",
    "cl": "CL",
    "cl_heldout": "CL held-out",
    "id": "ID",
    "clid": "CLID",
    "wclid": "W-CLID",
    "wclid_loo": "W-CLID LOO",
    "anmi": "aNMI",
    "mean_purity": "mean purity",
    "mean_coherence": "mean coh. (R)",
    "mean_coherence_hard": "mean coh. (H)",
}


def column_name(col: str) -> str:
    return COLUMN_NAMES.get(col, col)


def checkpoint_formats(table: pd.DataFrame) -> dict[str, str]:
    """The number format of each column of `views.checkpoints.checkpoint_table` (its
    headers stay the stored column names, as the docs and a CSV of it name them)."""
    return {c: fmt for c, fmt in CHECKPOINT_FORMATS.items() if c in table.columns}


def correlation_table(corr: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """`views.checkpoints.predictor_correlations` as a table: each coefficient with its 95%
    interval as text (Fisher z for r, a bootstrap over checkpoints for τ), its two-sided
    p-value and n; every missing value an em dash. Returns it and its number formats."""
    t = pd.DataFrame(
        {
            "predictor": corr["name"],
            "Pearson r": corr["pearson"].astype(float),
            "r 95% CI": interval_text(corr["pearson_lo"], corr["pearson_hi"]),
            "r p": corr["pearson_p"].astype(float),
            "Kendall τ": corr["kendall"].astype(float),
            "τ 95% CI": interval_text(corr["kendall_lo"], corr["kendall_hi"]),
            "τ p": corr["kendall_p"].astype(float),
            "n": corr["n_checkpoints"],
        }
    )
    return t, {"Pearson r": "%.2f", "r p": "%.3g", "Kendall τ": "%.2f", "τ p": "%.3g", "n": "%d"}
