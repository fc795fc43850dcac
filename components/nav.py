"""The dashboard's pages, declared once: app.py builds its navigation from these and the
tests open every page from them.

A page names the steps it shows (`steps`: analyses of the registry and inputs of the
pipeline, conceptlens/analyses.py); the workspace tables it reads are theirs, plus the
tables every page lists and the few it reads that no step writes (`reads`). They are
validated before it renders, so a page shows the problems of its own tables and is not
stopped by those of others. tests/test_page_tables.py fails if a page reads a table that
is not among them.
"""

from __future__ import annotations

from dataclasses import dataclass

from conceptlens import analyses

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
    steps: tuple[str, ...] = ()  # what it shows: names of conceptlens.analyses.steps()
    reads: tuple[str, ...] = ()  # tables it reads that no step has ("workspace.json": its metadata)
    # Tables people save from the page (the Clusters page's saved selections): read and
    # validated when present, absent in a workspace nobody saved anything into.
    saved: tuple[str, ...] = ()
    # Tables a workspace may lack that the page uses when present (a dataset's label
    # hierarchy): read and validated when there, never reported missing.
    optional: tuple[str, ...] = ()
    default: bool = False

    @property
    def url(self) -> str:
        """Its path below the app's URL: Streamlit serves the default page at the root."""
        return "" if self.default else self.name

    @property
    def tables(self) -> tuple[str, ...]:
        """Every table it reads: the base tables, its steps' and its own `reads`."""
        steps = analyses.by_name()
        out = list(BASE_TABLES)
        for name in self.steps:
            out += [t for t in steps[name].reads if t not in UNREAD]
        out += self.reads + self.saved + self.optional
        return tuple(dict.fromkeys(out))

    @property
    def may_lack(self) -> tuple[str, ...]:
        """Tables of `tables` a workspace may lack without anything being missing."""
        return self.saved + self.optional


PAGES = (
    # Home shows workspace.json and reports every step as present, missing or broken.
    PageSpec(
        "home",
        "pages/home.py",
        "Home",
        ":material/home:",
        tuple(s.name for s in analyses.steps()),
        reads=(META,),
        default=True,
    ),
    PageSpec(
        "clusters",
        "pages/clusters.py",
        "Clusters",
        ":material/bubble_chart:",
        # Features: an image's nearest neighbours; image captions: an image's captions.
        ("features", "image_captions", "clustering", "cluster_metrics", "cluster_captions", "projections"),
        # Saved selections (Score this selection; conceptlens/selections.py).
        saved=("selections",),
        # A dataset's label hierarchy, when it has one (labels read at a level).
        optional=("label_hierarchy",),
    ),
    PageSpec(
        "checkpoints",
        "pages/checkpoints.py",
        "Checkpoints",
        ":material/compare_arrows:",
        (
            "clustering",
            "cluster_metrics",
            "cluster_captions",
            "projections",
            "comparisons",
            "baselines",
            "concept_events",
            "learning_curves",
            "aligned_projections",
        ),
    ),
    PageSpec(
        "compmap",
        "pages/compmap.py",
        "CompMap",
        ":material/join_inner:",
        ("primitives", "compmap"),
    ),
    PageSpec(
        "similarity",
        "pages/similarity.py",
        "Similarity",
        ":material/groups:",
        # Features: what a checkpoint would choose in a trial, its nearest neighbours.
        ("similarity_trials", "features", "similarity", "convergence"),
        # The clusterings a scored selection's caption is retrieved among, when computed.
        optional=("cluster_metrics",),
    ),
    # Studies: the owner's side of human studies (design, progress, results, export).
    PageSpec(
        "studies",
        "pages/studies.py",
        "Studies",
        ":material/how_to_reg:",
        ("clustering", "cluster_metrics", "cluster_captions"),
        # Written by `conceptlens study export` (or this page), not by a step.
        reads=("study_answers", "study_participants", "study_clusters", "study_summary"),
    ),
    PageSpec(
        "concepts",
        "pages/concepts.py",
        "Concepts",
        ":material/category:",
        ("concept_labels", "concepts"),
    ),
    PageSpec(
        "scoreboard",
        "pages/scoreboard.py",
        "Scoreboard",
        ":material/leaderboard:",
        ("dictionary", "scoreboard"),
        # A checkpoint's UMAP (a concept's members on it), when computed.
        optional=("projections",),
    ),
)
BY_NAME = {p.name: p for p in PAGES}

# A link with `?study=ID` opens only this page (app.py): participants never see the others.
STUDY_PARAM = "study"
PARTICIPANT = PageSpec("participate", "participant/study.py", "Study", ":material/how_to_reg:", default=True)


def page_of(step: str) -> PageSpec | None:
    """The page that shows the step `step` (the first that names it; Home lists them all)."""
    return next((p for p in PAGES if not p.default and step in p.steps), None)
