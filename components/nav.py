"""The dashboard's pages, declared once: app.py builds its navigation from these and the
tests open every page from them.

`tables` are the workspace tables a page reads ("workspace.json" for its metadata). They
are validated before it renders, so a page shows the problems of its own tables and is
not stopped by those of others.
"""

from __future__ import annotations

from dataclasses import dataclass

from conceptlens.analyses import ANALYSES

# Every page lists images and checkpoints; a problem in them stops the page.
BASE_TABLES = ("images", "checkpoints")
META = "workspace.json"
# Read by no page (the Checkpoints page counts the links of the pair it shows from
# `clusters`): every pair's cells, 7 million rows at 28 checkpoints of 50,000 images, too
# many to check on each first open. `conceptlens validate` checks it.
UNREAD = ("cluster_links",)


@dataclass(frozen=True)
class PageSpec:
    name: str  # URL path: /clusters
    path: str  # script, relative to app.py
    title: str
    icon: str
    tables: tuple[str, ...]
    default: bool = False

    @property
    def url(self) -> str:
        """Its path below the app's URL: Streamlit serves the default page at the root."""
        return "" if self.default else self.name


PAGES = (
    # Home shows workspace.json and reports every analysis as present, missing or broken.
    PageSpec(
        "home",
        "pages/home.py",
        "Home",
        ":material/home:",
        BASE_TABLES
        + (META,)
        + tuple(sorted({t for a in ANALYSES for t in a.tables} - set(BASE_TABLES) - set(UNREAD))),
        default=True,
    ),
    PageSpec(
        "clusters",
        "pages/clusters.py",
        "Clusters",
        ":material/bubble_chart:",
        BASE_TABLES
        + ("clusters", "cluster_metrics", "checkpoint_metrics", "cluster_captions", "projections"),
    ),
    PageSpec(
        "checkpoints",
        "pages/checkpoints.py",
        "Checkpoints",
        ":material/compare_arrows:",
        BASE_TABLES
        + (
            "checkpoint_metrics",
            "clusters",
            "cluster_metrics",
            "cluster_captions",
            "projections",
            "clid_scores",
            "predictor_correlations",
            "clustering_similarity",
            "baseline_scores",
            "transfer_scores",
            "transfer_correlations",
        ),
    ),
    PageSpec(
        "compmap",
        "pages/compmap.py",
        "CompMap",
        ":material/join_inner:",
        BASE_TABLES
        + (
            "vl_models",
            "primitives",
            "label_primitives",
            "image_primitives",
            "compmap_activations",
            "compmap_weights",
            "compmap_scores",
        ),
    ),
    PageSpec(
        "similarity",
        "pages/similarity.py",
        "Similarity",
        ":material/groups:",
        BASE_TABLES
        + (
            "similarity_trials",
            "psych_embedding",
            "similarity_fit",
            "human_alignment",
            "projections",
            "similarity_convergence",
        ),
    ),
)
PAGES += (
    # Studies: the owner's side of human studies (design, progress, results, export).
    PageSpec(
        "studies",
        "pages/studies.py",
        "Studies",
        ":material/how_to_reg:",
        BASE_TABLES
        + (
            "clusters",
            "cluster_metrics",
            "cluster_captions",
            "study_answers",
            "study_participants",
            "study_clusters",
            "study_summary",
        ),
    ),
)
PAGES += (
    PageSpec(
        "concepts",
        "pages/concepts.py",
        "Concepts",
        ":material/category:",
        BASE_TABLES
        + (
            "concept_datasets",
            "concept_labels",
            "oracle_purity",
            "purity_matrices",
            "concept_niches",
            "niche_scores",
            "concept_scores",
        ),
    ),
)
BY_NAME = {p.name: p for p in PAGES}

# A link with `?study=ID` opens only this page (app.py): participants never see the others.
STUDY_PARAM = "study"
PARTICIPANT = PageSpec(
    "participate", "participant/study.py", "Study", ":material/how_to_reg:", (), default=True
)
