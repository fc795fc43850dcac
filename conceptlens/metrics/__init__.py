"""Metrics for clusters and checkpoints: pure numpy / scikit-learn functions.

See docs/analysis.md for definitions and the choices made.
"""

from .bootstrap import mean_interval, purity_interval, ratio_interval, rng_for
from .captions import class_captions, class_captions_rouge, describability, eq4_scores, pick_per_cluster
from .clid import clid, correlations, fisher_interval, kendall_bootstrap_interval, wclid, zscore
from .coherence import Trials, annotate, coherence, hard_negative_clusters, make_trials
from .intrinsic import drop_duplicates, twonn, twonn_fit, twonn_interval, twonn_ratios_shared, twonn_shared
from .kmeans import KMeansFit, kmeans
from .learnability import (
    cluster_learnability,
    cluster_learnability_counts,
    cluster_learnability_heldout,
    cluster_learnability_heldout_correct,
    cluster_learnability_heldout_shared,
    cluster_learnability_shared,
    heldout_clusters,
    knn_accuracy,
    knn_accuracy_shared,
    knn_correct_shared,
    one_nn_predict,
    weighted_knn_predict,
)
from .neighbors import SelfNeighbours, l2_normalize, nearest_cosine, nearest_euclidean_self, top_self
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
    "cluster_learnability_heldout_correct",
    "cluster_learnability_heldout_shared",
    "cluster_learnability_counts",
    "cluster_learnability_shared",
    "coherence",
    "correlations",
    "describability",
    "drop_duplicates",
    "eq4_scores",
    "fisher_interval",
    "hard_negative_clusters",
    "heldout_clusters",
    "kendall_bootstrap_interval",
    "kmeans",
    "knn_accuracy",
    "knn_accuracy_shared",
    "knn_correct_shared",
    "mean_interval",
    "purity_interval",
    "ratio_interval",
    "rng_for",
    "l2_normalize",
    "make_trials",
    "nearest_cosine",
    "nearest_euclidean_self",
    "one_nn_predict",
    "pick_per_cluster",
    "purity",
    "top_self",
    "twonn",
    "twonn_fit",
    "twonn_interval",
    "twonn_ratios_shared",
    "twonn_shared",
    "wclid",
    "weighted_knn_predict",
    "zscore",
    "KMeansFit",
    "SelfNeighbours",
    "Trials",
]
