"""How the numbers of the views' tables are shown: printf number formats (what
`st.column_config.NumberColumn` and the LaTeX export take) and readable column headers,
keyed by the column names the views return. Views return data; the format of each column
is declared here, once."""

from __future__ import annotations

# `views.checkpoints.checkpoint_table`: the format of each number (its text columns,
# checkpoint_id, model, method and run, have none).
CHECKPOINT_FORMATS = {
    "epoch": "%d",
    "knn_acc": "%.3f",
    "knn_acc_lo": "%.3f",
    "knn_acc_hi": "%.3f",
    "knn1_acc": "%.3f",
    "knn1_acc_lo": "%.3f",
    "knn1_acc_hi": "%.3f",
    "cl": "%.3f",
    "cl_lo": "%.3f",
    "cl_hi": "%.3f",
    "cl_heldout": "%.3f",
    "cl_heldout_lo": "%.3f",
    "cl_heldout_hi": "%.3f",
    "id": "%.2f",
    "id_lo": "%.2f",
    "id_hi": "%.2f",
    "clid": "%.3f",
    "wclid": "%.3f",
    "wclid_loo": "%.3f",
    "anmi": "%.3f",
    "clusters": "%d",
    "mean_purity": "%.3f",
    "mean_purity_lo": "%.3f",
    "mean_purity_hi": "%.3f",
    "mean_coherence": "%.3f",
    "mean_coherence_lo": "%.3f",
    "mean_coherence_hi": "%.3f",
    "mean_coherence_hard": "%.3f",
    "mean_coherence_hard_lo": "%.3f",
    "mean_coherence_hard_hi": "%.3f",
}

# `views.compmap.weight_accuracy`: yun2023 Table 4's headers for its values and intervals.
WEIGHT_ACCURACY_COLUMNS = {
    f"{m}{x}": f"{name}{y}"
    for m, name in (("acc_instance", "Acc-Instance"), ("acc_class", "Acc-Class"))
    for x, y in (("", ""), ("_lo", " lo"), ("_hi", " hi"))
}
WEIGHT_ACCURACY_FORMATS = {c: "%.3f" for c in WEIGHT_ACCURACY_COLUMNS.values()}
