"""Metrics for clusters and checkpoints: pure numpy / scikit-learn functions.

See docs/analysis.md for definitions and the choices made.
"""

from .captions import class_captions, class_captions_rouge, describability, eq4_scores, pick_per_cluster
from .clid import clid, correlations, fisher_interval, kendall_bootstrap_interval, wclid, zscore
from .coherence import Trials, annotate, coherence, hard_negative_clusters, make_trials
from .intrinsic import drop_duplicates, twonn
from .learnability import (
    cluster_learnability,
    cluster_learnability_heldout,
    heldout_clusters,
    knn_accuracy,
    one_nn_predict,
    weighted_knn_predict,
)
from .neighbors import l2_normalize, nearest_cosine, nearest_euclidean_self
from .scores import anmi, clopper_pearson, purity

__all__ = [
    "anmi",
    "annotate",
    "class_captions",
    "class_captions_rouge",
    "clid",
    "clopper_pearson",
    "cluster_learnability",
    "cluster_learnability_heldout",
    "coherence",
    "correlations",
    "describability",
    "drop_duplicates",
    "eq4_scores",
    "fisher_interval",
    "hard_negative_clusters",
    "heldout_clusters",
    "kendall_bootstrap_interval",
    "knn_accuracy",
    "l2_normalize",
    "make_trials",
    "nearest_cosine",
    "nearest_euclidean_self",
    "one_nn_predict",
    "pick_per_cluster",
    "purity",
    "twonn",
    "wclid",
    "weighted_knn_predict",
    "zscore",
    "Trials",
]
