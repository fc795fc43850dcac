"""Display versions of the Checkpoints page's tables, in the number formats and with the
em dash for missing values of `components.cluster_tables`; readable names of their columns
for the page's controls."""

from __future__ import annotations

import shlex

import pandas as pd

from components.cluster_tables import interval_text
from components.formats import CHECKPOINT_FORMATS
from components.text import literal
from conceptlens.schema import MIN_STABLE_CHECKPOINTS

COLUMN_NAMES = {
    "checkpoint_id": "checkpoint",
    "knn_acc": "kNN acc.",
    "knn_acc_lo": "kNN acc. (95% low)",
    "knn_acc_hi": "kNN acc. (95% high)",
    "knn1_acc": "1-NN acc.",
    "knn1_acc_lo": "1-NN acc. (95% low)",
    "knn1_acc_hi": "1-NN acc. (95% high)",
    "cl": "CL",
    "cl_lo": "CL (95% low)",
    "cl_hi": "CL (95% high)",
    "cl_heldout": "CL held-out",
    "cl_heldout_lo": "CL held-out (95% low)",
    "cl_heldout_hi": "CL held-out (95% high)",
    "id": "ID",
    "id_lo": "ID (95% low)",
    "id_hi": "ID (95% high)",
    "clid": "CLID",
    "wclid": "W-CLID",
    "wclid_loo": "W-CLID LOO",
    "anmi": "aNMI",
    "mean_purity": "mean purity",
    "mean_purity_lo": "mean purity (95% low)",
    "mean_purity_hi": "mean purity (95% high)",
    "mean_coherence": "mean coh. (R)",
    "mean_coherence_lo": "mean coh. (R) (95% low)",
    "mean_coherence_hi": "mean coh. (R) (95% high)",
    "mean_coherence_hard": "mean coh. (H)",
    "mean_coherence_hard_lo": "mean coh. (H) (95% low)",
    "mean_coherence_hard_hi": "mean coh. (H) (95% high)",
}


def column_name(col: str) -> str:
    return COLUMN_NAMES.get(col, col)


def checkpoint_formats(table: pd.DataFrame) -> dict[str, str]:
    """The number format of each column of `views.checkpoints.checkpoint_table` (its
    headers stay the stored column names, as the docs and a CSV of it name them)."""
    return {c: fmt for c, fmt in CHECKPOINT_FORMATS.items() if c in table.columns}


def _unstable(corr: pd.DataFrame) -> pd.Series:
    """True where a correlation rests on fewer than MIN_STABLE_CHECKPOINTS checkpoints (the
    stored flag, or n for a workspace older than 2.3)."""
    if "unstable" in corr.columns:
        return corr["unstable"].fillna(False).astype(bool)
    return corr["n_checkpoints"].fillna(0) < MIN_STABLE_CHECKPOINTS


def correlation_table(corr: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """`views.checkpoints.predictor_correlations` as a table: each coefficient with its 95%
    interval as text (Fisher z for r, a bootstrap over checkpoints for τ), its two-sided
    p-value and permutation p-value, n, and `stable`: "no" under 10 checkpoints (its interval
    is unstable: not a finding); every missing value an em dash. Returns it and its number
    formats."""
    nan = pd.Series(float("nan"), index=corr.index)
    t = pd.DataFrame(
        {
            "predictor": corr["name"],
            "Pearson r": corr["pearson"].astype(float),
            "r 95% CI": interval_text(corr["pearson_lo"], corr["pearson_hi"]),
            "r p": corr["pearson_p"].astype(float),
            "r perm. p": corr.get("pearson_perm_p", nan).astype(float),
            "Kendall τ": corr["kendall"].astype(float),
            "τ 95% CI": interval_text(corr["kendall_lo"], corr["kendall_hi"]),
            "τ p": corr["kendall_p"].astype(float),
            "τ perm. p": corr.get("kendall_perm_p", nan).astype(float),
            "n": corr["n_checkpoints"],
            "stable": _unstable(corr).map({True: f"no (n < {MIN_STABLE_CHECKPOINTS})", False: "yes"}),
        }
    )
    formats = {"Pearson r": "%.2f", "r p": "%.3g", "r perm. p": "%.3g", "Kendall τ": "%.2f"}
    return t, formats | {"τ p": "%.3g", "τ perm. p": "%.3g", "n": "%d"}


def unstable_warning(corr: pd.DataFrame) -> str | None:
    """The warning the page shows above correlations over fewer than 10 checkpoints, or None."""
    bad = corr[_unstable(corr) & corr["pearson"].notna()]
    if bad.empty:
        return None
    n = sorted({int(v) for v in bad["n_checkpoints"].dropna()})
    over = " or ".join(str(v) for v in n)
    return (
        f"**{len(bad)} of these correlations rest on {over} checkpoints, fewer than "
        f"{MIN_STABLE_CHECKPOINTS}:** their intervals are unstable and the values are not a "
        "finding. Read them as a description of these checkpoints; add checkpoints (or epochs of "
        "a run) to test a predictor. The permutation p-value is exact up to 7 checkpoints."
    )


def population_text(population: dict, shown: int = 6) -> str:
    """What the page says of the population the stored correlations are over
    (`views.checkpoints.comparison_population`): its name and count, what it means, and the
    checkpoints it leaves out (the first `shown` of them named)."""
    out = f"**Over the {population['label']}** (`--population {population['population']}`): "
    out += population["meaning"] + "."
    left = population["left_out"]
    if left:
        more = f" and {len(left) - shown} more" if len(left) > shown else ""
        out += " Left out: " + ", ".join(literal(c) for c in left[:shown]) + more + "."
    return out


def population_commands(command: str, dataset: str, population: dict) -> str:
    """The commands that compute the comparisons of `dataset` over each other population."""
    return "\n".join(
        f"{command} --dataset {shlex.quote(dataset)} --population {p}" for p in population["others"]
    )
