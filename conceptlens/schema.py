"""The workspace format: every table, its columns, types, keys and references.

This module is the single source of truth for `docs/workspace.md` (a test keeps
the two in step), for `conceptlens validate` and for every writer. It holds the format's
core: the version, the column and table types, and the tables that no analysis writes
(images, checkpoints, features, labels, captions, imported judgments and primitives,
studies, selections, the run log). Each analysis declares the tables it writes in its own
module (`Analysis.tables`, in `conceptlens/analysis/`), next to the code that fills them,
so that adding a table is one change in one place. `TABLES` and `TABLES_BY_NAME` hold
both: they are built on first use, because the analysis modules import this one (code
that runs while an analysis module is imported reads `CORE_BY_NAME` instead).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .cache import cached

SCHEMA_VERSION = "2.6"  # 2.1: similarity_trials.round; 2.2: analysis_runs.status and reason
# 2.3: bootstrap intervals cluster_metrics.purity_lo/hi, checkpoint_metrics.knn_acc_lo/hi,
# cl_lo/hi, id_lo/hi; permutation p-values pearson_perm_p, kendall_perm_p and the `unstable` flag
# of predictor_correlations and transfer_correlations (all optional columns); the tables
# concept_events and learning_curves (analyses of the same names); the selections table
# (saved selections of images, issue 26).
# 2.4: bootstrap intervals checkpoint_metrics.knn1_acc_lo/hi and cl_heldout_lo/hi (optional);
# the label_hierarchy table (a tree over a dataset's labels, issue 23);
# the table aligned_projections (analysis of the same name, issue 27);
# checkpoints.depth (the order of `layer` within its network: depth sequences);
# concept_events.axis, layer_from/layer_to and learning_curves.axis, layer (sequences over
# depth as well as over epochs).
# 2.5: the tables dictionary_fit, dictionary_atoms, dictionary_codes (analysis `dictionary`) and
# scoreboard_concepts, scoreboard_members, scoreboard_scores, scoreboard_null (analysis
# `scoreboard`): every kind of concept scored alike (issue 41).
# 2.6: scoreboard_concepts.caption (optional): each concept's class-level caption.
# Readers accept any workspace whose major version matches ours.
SCHEMA_MAJOR = SCHEMA_VERSION.split(".")[0]

# Logical types, checked against Arrow types by `validate`.
STRING, INT, FLOAT, BOOL, FLOAT_LIST, TIMESTAMP = (
    "string",
    "int",
    "float",
    "bool",
    "list<float32>",
    "timestamp",
)
STRING_LIST = "list<string>"
# Columns a file may hold beyond its table's (a newer minor version's, a writer's own):
# more are rejected by `validate` from the file's footer, before any data is read (a
# 20,000-column file stalls every query of its table). Tables with free-form extra
# columns (`Table.extra_columns`) allow more.
MAX_EXTRA_COLUMNS, MAX_FREE_EXTRA_COLUMNS = 16, 256
# A thumbnail larger than this is refused (by `validate`, and drawn as unreadable by the
# dashboard) before it is decoded: importers write at most 1024 pixels a side.
MAX_THUMBNAIL_PIXELS = 2048 * 2048

# Value ranges used below (inclusive; None leaves a side open).
UNIT, SIGNED_UNIT, NON_NEGATIVE = (0.0, 1.0), (-1.0, 1.0), (0, None)
SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    doc: str
    nullable: bool = False
    required: bool = True
    # "table.column" this column must reference (foreign key).
    references: str | None = None
    # The value is a path relative to the workspace that must exist inside it.
    is_path: bool = False
    # With is_path: an absolute path is allowed too (a file outside the workspace).
    absolute_ok: bool = False
    # Value rules, checked by `validate` (nulls are exempt; a NaN is never in range).
    bounds: tuple[float | None, float | None] | None = None  # inclusive (low, high)
    positive: bool = False  # > 0
    finite: bool = False  # no NaN or infinity (in every element of a list)
    allowed: tuple[str, ...] | None = None  # one of these values
    # Relations to other columns of the same row.
    less_than: str | None = None  # value < that column (e.g. cluster < k)
    at_most: tuple[str, ...] = ()  # value <= each of these (e.g. lo <= value <= hi)
    differs_from: str | None = None  # value != that column
    present_with: str | None = None  # not null wherever that column is not null
    # (prefix, "table.column"): a value `prefix + X` is also valid where X is in that column
    # (e.g. `psych@shapes` in projections: the psychological embedding of dataset shapes).
    pseudo_references: tuple[str, str] | None = None

    def rules(self) -> list[str]:
        """The value rules in words, for docs/workspace.md."""
        out = []
        if self.bounds:
            lo, hi = self.bounds
            if lo is not None and hi is not None:
                out.append(f"in [{lo:g}, {hi:g}]")
            elif lo is not None:
                out.append(f">= {lo:g}")
            elif hi is not None:
                out.append(f"<= {hi:g}")
        if self.positive:
            out.append("> 0")
        if self.finite:
            out.append("finite")
        if self.allowed:
            out.append("one of " + ", ".join(f"`{a}`" for a in self.allowed))
        if self.less_than:
            out.append(f"< `{self.less_than}`")
        out += [f"<= `{c}`" for c in self.at_most]
        if self.differs_from:
            out.append(f"!= `{self.differs_from}`")
        if self.present_with:
            out.append(f"not null where `{self.present_with}` is not null")
        if self.pseudo_references:
            prefix, ref = self.pseudo_references
            out.append(f"or `{prefix}X` where X is in `{ref}`")
        return out


@dataclass(frozen=True)
class Table:
    name: str
    # A single file (`images.parquet`), or for a partitioned table the folder that holds
    # one hive-style sub-folder per partition value: `clusters/checkpoint_id=X/k=5/`.
    path: str
    doc: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    required: bool = False
    # Free-form extra columns are allowed (documented as such).
    extra_columns: str | None = None
    # Who writes it, for a table no analysis writes (`written_by` derives the others').
    added_by: str = ""
    # Partition columns, outermost first. They live in the folder names, not in the files,
    # so adding or recomputing one partition writes one file and reads nothing else.
    partition: tuple[str, ...] = ()
    # Rows are only ever added (a new part file per write), never rewritten.
    append_only: bool = False

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def written_by(self) -> str:
        """Who writes it: `added_by`, else the analyses of the registry that write it."""
        if self.added_by:
            return self.added_by
        from .analyses import writers  # local: the analysis modules import this one, on use

        return ", ".join(f"`conceptlens analyze {a}`" for a in writers(self.name))

    @property
    def partitioned(self) -> bool:
        return bool(self.partition)

    @property
    def max_extra_columns(self) -> int:
        """How many columns a file may hold beyond `columns` (see MAX_EXTRA_COLUMNS)."""
        return MAX_FREE_EXTRA_COLUMNS if self.extra_columns else MAX_EXTRA_COLUMNS

    @property
    def file_columns(self) -> tuple[Column, ...]:
        """The columns stored inside each file (all but the partition columns)."""
        return tuple(c for c in self.columns if c.name not in self.partition)

    @property
    def glob(self) -> str:
        """Glob of every file of the table, relative to the workspace."""
        if not self.partitioned:
            return self.path
        return self.path + "/" + "/".join("*" for _ in self.partition) + "/*.parquet"

    @property
    def pattern(self) -> str:
        """The documented path of one file."""
        if not self.partitioned:
            return self.path
        parts = "/".join(f"{p}={p.upper()}" for p in self.partition)
        return f"{self.path}/{parts}/part-*.parquet"


# The partition column of every table written per checkpoint (the analyses' tables share it).
CHECKPOINT_PARTITION = Column(
    "checkpoint_id", STRING, "Checkpoint (partition folder).", references="checkpoints.checkpoint_id"
)

# Below this many checkpoints a correlation's interval is unstable (issue 26): shown with a warning.
MIN_STABLE_CHECKPOINTS = 10


# The tables no analysis writes (importers, `extract`, `caption`, studies, selections, the runner's log).
CORE_TABLES: tuple[Table, ...] = (
    Table(
        "images",
        "images.parquet",
        "One row per image of every dataset in the workspace.",
        (
            Column("image_id", STRING, "Unique id of the image across the workspace."),
            Column("dataset", STRING, "Name of the dataset the image belongs to."),
            Column(
                "label",
                INT,
                "Class index (0-based) for datasets with labels.",
                nullable=True,
                bounds=NON_NEGATIVE,
            ),
            Column("label_name", STRING, "Human-readable class name.", nullable=True, present_with="label"),
            Column("split", STRING, "Split of the dataset the image belongs to.", allowed=SPLITS),
            Column(
                "thumbnail",
                STRING,
                f"Image file, relative to the workspace; at most {MAX_THUMBNAIL_PIXELS:,} pixels.",
                is_path=True,
            ),
            Column("width", INT, "Width of the thumbnail in pixels.", positive=True),
            Column("height", INT, "Height of the thumbnail in pixels.", positive=True),
            Column(
                "source_path",
                STRING,
                "The original full-resolution image (absolute, or "
                "relative to the workspace) that extraction reads; null = the thumbnail.",
                nullable=True,
                required=False,
            ),
        ),
        key=("image_id",),
        required=True,
        added_by="your own import (or `conceptlens demo build`)",
        extra_columns="Any further column is a factor or attribute of the image "
        "(e.g. `shape`, `color`, `slant`); the dashboard lists them as such.",
    ),
    Table(
        "label_hierarchy",
        "label_hierarchy",
        "A tree over a dataset's labels (issue 23): openclipart's folders, ImageNet's WordNet "
        "hypernyms, a manifest's `parent` column. Its nodes are the values of one column of "
        "`images` (`label_name`, or a factor column such as `category_path`) and their "
        "ancestors; level 0 holds the roots, and an image is read at level L as its node's "
        "ancestor at L (an image whose node is shallower keeps its own). `images` itself is "
        "unchanged (conceptlens/hierarchy.py reads it; `validate` checks that every image's "
        "value is a node, every parent a node and that there is no cycle).",
        (
            Column(
                "dataset", STRING, "Dataset of the images (partition folder).", references="images.dataset"
            ),
            Column(
                "images_column",
                STRING,
                "The column of `images` whose values are the nodes (`label_name`, `category_path`, "
                "...): the same on every row of a dataset.",
            ),
            Column("node", STRING, "A node: a value of that column, or an ancestor of one."),
            Column(
                "parent",
                STRING,
                "Its parent node; null = a root (level 0).",
                nullable=True,
                differs_from="node",
            ),
            Column(
                "name",
                STRING,
                "How the node is shown (e.g. a WordNet lemma for the id `n02084071`); null = the node.",
                nullable=True,
                required=False,
            ),
        ),
        key=("dataset", "node"),
        added_by="`conceptlens import images` (nested folders, a manifest's `parent` column, "
        "ImageNet with WordNet), `conceptlens import hierarchy`, `conceptlens demo build`",
        partition=("dataset",),
    ),
    Table(
        "checkpoints",
        "checkpoints.parquet",
        "One row per model checkpoint whose features the workspace holds.",
        (
            Column("checkpoint_id", STRING, "Unique id; also the name of its features file."),
            Column("dataset", STRING, "Dataset whose images were embedded.", references="images.dataset"),
            Column("model", STRING, "Architecture or model name."),
            Column("method", STRING, "Training regime (e.g. `simclr`, `supervised`, `random`)."),
            Column("epoch", INT, "Training epoch of this checkpoint.", nullable=True, bounds=NON_NEGATIVE),
            Column("feature_dim", INT, "Length of every embedding of this checkpoint.", positive=True),
            Column("source", STRING, "Model spec it was extracted with (`family:name`)."),
            Column(
                "run", STRING, "Training run shared by stages of one model.", nullable=True, required=False
            ),
            Column(
                "layer",
                STRING,
                "Module whose output was pooled; null = default embedding.",
                nullable=True,
                required=False,
            ),
            Column(
                "depth",
                INT,
                "Order of `layer` within the network, 0 = nearest the input (`extract --depth`, "
                "or the module's position in the model's module order). Checkpoints of one "
                "run at one epoch with a depth form a depth sequence (issue 27).",
                nullable=True,
                required=False,
                bounds=NON_NEGATIVE,
            ),
            Column(
                "weights",
                STRING,
                "Weights file the features were extracted with: relative to the workspace when "
                "inside it (`extract --copy-weights` puts a copy there), else absolute.",
                nullable=True,
                required=False,
                is_path=True,
                absolute_ok=True,
            ),
            Column(
                "weights_sha256",
                STRING,
                "SHA-256 of the weights file used; analyses that run the model again refuse "
                "a file with another hash.",
                nullable=True,
                required=False,
            ),
            Column(
                "preprocessing",
                STRING,
                "JSON description of the input transform.",
                nullable=True,
                required=False,
            ),
            Column("created", STRING, "ISO-8601 time of extraction.", nullable=True, required=False),
            Column(
                "concept_names",
                STRING_LIST,
                "Concept models: the names of the k learnt concepts, in feature order; a name "
                "equal to a `concept_labels.concept` aligns the learnt concept to it (e.g. CBM), "
                "others are free (`c0`, `c1`, ...). Null = not a concept model (the `concepts` "
                "analysis then derives probe concepts from the features).",
                nullable=True,
                required=False,
                present_with="concept_dim",
            ),
            Column(
                "concept_dim",
                INT,
                "Dimensions d per learnt concept: feature_dim = k x d, concept-major "
                "(dims [i*d, (i+1)*d) are concept i).",
                nullable=True,
                required=False,
                positive=True,
                present_with="concept_names",
            ),
        ),
        key=("checkpoint_id",),
        required=True,
        added_by="`conceptlens extract` (or your own writer)",
    ),
    Table(
        "features",
        "features",
        "One partition per checkpoint: the embedding of every image of its dataset.",
        (
            Column(
                "checkpoint_id",
                STRING,
                "Checkpoint (partition folder).",
                references="checkpoints.checkpoint_id",
            ),
            Column("image_id", STRING, "Image embedded.", references="images.image_id"),
            Column(
                "embedding",
                FLOAT_LIST,
                "Feature vector; length = `feature_dim` of the checkpoint.",
                finite=True,
            ),
        ),
        key=("checkpoint_id", "image_id"),
        required=False,
        added_by="`conceptlens extract` (or your own writer)",
        partition=("checkpoint_id",),
    ),
    Table(
        "captions",
        "captions.parquet",
        "Text describing single images: ground-truth sentences made from a dataset's "
        "factors (captioner `groundtruth`) and captions written by captioning models.",
        (
            Column("image_id", STRING, "Image described.", references="images.image_id"),
            Column("captioner", STRING, "`groundtruth` or the captioner spec that wrote it."),
            Column("text", STRING, "One sentence."),
        ),
        key=("image_id", "captioner"),
        added_by="`conceptlens demo build`, `conceptlens caption`",
    ),
    Table(
        "concept_datasets",
        "concept_datasets.parquet",
        "Concept datasets (concept-quality paper): one dataset per family and level of "
        "dependency between its concepts, e.g. `toy-d0.50` = TabularToy(delta = 0.5).",
        (
            Column("dataset", STRING, "Dataset.", references="images.dataset"),
            Column("family", STRING, "Generator, e.g. `tabular_toy` or `dsprites`."),
            Column(
                "dependency",
                STRING,
                "What `level` measures: `delta` (correlation of the latents) or "
                "`lambda` (number of conditional dependencies between factors).",
                allowed=("delta", "lambda"),
            ),
            Column("level", FLOAT, "Its value (0 = independent concepts).", bounds=NON_NEGATIVE, finite=True),
        ),
        key=("dataset",),
        added_by="`conceptlens demo build` (or your own writer)",
    ),
    Table(
        "concept_labels",
        "concept_labels.parquet",
        "Ground-truth concepts of images: one row per image and concept, binary (0/1) or "
        "multiclass (0..m-1). The task label stays `images.label`.",
        (
            Column("image_id", STRING, "Image.", references="images.image_id"),
            Column("concept", STRING, "Concept name, e.g. `shape_lt2`."),
            Column("value", INT, "Value of the concept for the image.", bounds=NON_NEGATIVE),
        ),
        key=("image_id", "concept"),
        added_by="`conceptlens demo build` (or your own writer)",
    ),
    Table(
        "vl_models",
        "vl_models.parquet",
        "Vision-language models shipped with the workspace (prompting, retrieval, captions).",
        (
            Column("vl_model_id", STRING, "Unique id."),
            Column(
                "dataset", STRING, "Dataset it was trained for or applies to.", references="images.dataset"
            ),
            Column("spec", STRING, "Model spec (`open_clip:ARCH` with a config in the workspace)."),
            Column(
                "config",
                STRING,
                "Architecture config file relative to the workspace.",
                nullable=True,
                is_path=True,
            ),
            Column("weights", STRING, "Weights file relative to the workspace.", nullable=True, is_path=True),
            Column("weights_sha256", STRING, "SHA-256 of the weights file.", nullable=True),
        ),
        key=("vl_model_id",),
        added_by="`conceptlens demo build` (or your own writer)",
    ),
    Table(
        "primitives",
        "primitives",
        "CompMap (yun2023): the primitive concept vocabulary of a dataset, one row per primitive "
        "with its attribute group and the text prompt a VL model scores it with.",
        (
            Column("dataset", STRING, "Dataset (partition folder)."),
            Column("primitive", STRING, "Unique id within the dataset, e.g. `color:red`."),
            Column("group", STRING, "Attribute group, e.g. `color` or `wing color`."),
            Column("value", STRING, "Value within the group, e.g. `red`."),
            Column("prompt", STRING, "Text scored against each image, e.g. `a red`."),
            Column(
                "position",
                INT,
                "Order of the primitive in the vocabulary (groups contiguous).",
                bounds=NON_NEGATIVE,
            ),
            Column(
                "normalize",
                STRING,
                "Activation of the group: `softmax` of 100 x cosine over "
                "the group's values (CUB style) or `raw` 100 x cosine (MIT-States style); "
                "the same for every primitive of a group.",
                allowed=("softmax", "raw"),
            ),
        ),
        key=("dataset", "primitive"),
        added_by="`conceptlens import cub|mit-states`, `conceptlens demo build`",
        partition=("dataset",),
    ),
    Table(
        "label_primitives",
        "label_primitives",
        "CompMap: the ground-truth composition of each composite concept (class) of a dataset. "
        "Absent rows are 0; the class-level truth is `value >= 0.5` (a majority vote over the "
        "class's images where it comes from image annotations, as Koh et al. 2020).",
        (
            Column("dataset", STRING, "Dataset (partition folder)."),
            Column("label", INT, "Class index, as in `images.label`.", bounds=NON_NEGATIVE),
            Column("label_name", STRING, "Class name."),
            Column("primitive", STRING, "Primitive.", references="primitives.primitive"),
            Column(
                "value",
                FLOAT,
                "Share of the class's images showing the primitive, or 1 "
                "where the class is defined by it (> 0).",
                bounds=UNIT,
                positive=True,
            ),
        ),
        key=("dataset", "label", "primitive"),
        added_by="`conceptlens import cub|mit-states`, `conceptlens demo build`",
        partition=("dataset",),
    ),
    Table(
        "image_primitives",
        "image_primitives",
        "CompMap: per-image ground truth of the primitives, where a dataset has it (CUB's "
        "image attribute labels; the demo's factors). Absent rows are 0.",
        (
            Column("dataset", STRING, "Dataset (partition folder)."),
            Column("image_id", STRING, "Image.", references="images.image_id"),
            Column("primitive", STRING, "Primitive present in the image.", references="primitives.primitive"),
            Column("value", FLOAT, "Presence (> 0; 1 = present).", bounds=UNIT, positive=True),
        ),
        key=("dataset", "image_id", "primitive"),
        added_by="`conceptlens import cub`, `conceptlens demo build`",
        partition=("dataset",),
    ),
    Table(
        "similarity_trials",
        "similarity_trials",
        "Human similarity judgments (roads2021): one row per trial, in which a person saw a query "
        "image and reference images and chose, in order, the references most similar to the "
        "query. People's answers: rows are only ever added.",
        (
            Column(
                "dataset",
                STRING,
                "Dataset of the images judged (partition folder).",
                references="images.dataset",
            ),
            Column("trial_id", STRING, "Unique id of the trial within the dataset."),
            Column(
                "agent_id",
                STRING,
                "Anonymous id of the person who judged it (`simulated-...` for the demo's simulated people).",
                nullable=True,
            ),
            Column("query", STRING, "The query image.", references="images.image_id"),
            Column(
                "references",
                STRING_LIST,
                "The reference images, in display order.",
                references="images.image_id",
            ),
            Column(
                "chosen",
                STRING_LIST,
                "The references chosen, in choice order (most similar first); a subset of `references`.",
                references="images.image_id",
            ),
            Column(
                "n_select", INT, "Number of references to choose (the length of `chosen`).", positive=True
            ),
            Column("kind", STRING, "`NrankK`: N references, K ranked choices (e.g. `8rank2`)."),
            Column(
                "weight",
                FLOAT,
                "Weight of the trial in the likelihood: the session's "
                "catch-trial grade / 100 (1 when ungraded).",
                bounds=NON_NEGATIVE,
                finite=True,
            ),
            Column("rt_ms", FLOAT, "Response time in milliseconds.", nullable=True, bounds=NON_NEGATIVE),
            Column("split", STRING, "`train`: fitted; `test`: only scored.", allowed=SPLITS),
            Column(
                "is_catch",
                BOOL,
                "Catch trial: the query itself (mirrored) is among the "
                "references. It grades the session and is never fitted or scored.",
            ),
            Column(
                "round",
                INT,
                "The round of the study it was collected in (0 = the first; `conceptlens study "
                "next-round`); null for trials not collected in rounds. Added in format 2.1.",
                nullable=True,
                required=False,
                bounds=NON_NEGATIVE,
            ),
        ),
        key=("dataset", "trial_id"),
        added_by="`conceptlens import hsj` (the demo's are simulated: `conceptlens demo build`)",
        partition=("dataset",),
        append_only=True,
    ),
    Table(
        "study_answers",
        "study_answers",
        "People's answers to a study of `conceptlens study` (laina2020 2AFC tasks, roads2021 "
        "8-rank-2 trials): one row per task a participant answered, with what they were shown. "
        "People's answers: rows are only ever added.",
        (
            Column("study_id", STRING, "Study (partition folder)."),
            Column("participant_id", STRING, "Anonymous per-browser id of the participant."),
            Column("task_id", STRING, "Task of the study's design."),
            Column(
                "position",
                INT,
                "Position of the task in the participant's session (0-based).",
                bounds=NON_NEGATIVE,
            ),
            Column("kind", STRING, "Kind of study.", allowed=("coherence", "describability", "similarity")),
            Column(
                "checkpoint_id",
                STRING,
                "Checkpoint whose clusters are tested (2AFC); null for similarity.",
                nullable=True,
                references="checkpoints.checkpoint_id",
            ),
            Column("k", INT, "Number of clusters of the clustering tested.", nullable=True, positive=True),
            Column(
                "cluster", INT, "Cluster the task tests.", nullable=True, bounds=NON_NEGATIVE, less_than="k"
            ),
            Column(
                "is_catch", BOOL, "Catch task: an obviously correct pair that screens inattentive people."
            ),
            Column(
                "description",
                STRING,
                "Description shown instead of references (describability).",
                nullable=True,
            ),
            Column(
                "references",
                STRING_LIST,
                "Reference images shown: the cluster's (coherence) or the 8 references in display "
                "order (similarity; a catch trial's include the query, shown mirrored); empty for "
                "describability.",
                references="images.image_id",
            ),
            Column("query", STRING, "Query image (similarity).", nullable=True, references="images.image_id"),
            Column(
                "positive",
                STRING,
                "The image from the cluster (2AFC).",
                nullable=True,
                references="images.image_id",
            ),
            Column(
                "negative",
                STRING,
                "The image from outside it (2AFC); null: a blank image (describability catch task).",
                nullable=True,
                references="images.image_id",
            ),
            Column(
                "positive_side",
                STRING,
                "Where the cluster's image was shown.",
                nullable=True,
                allowed=("left", "right"),
            ),
            Column("chosen_side", STRING, "The side picked.", nullable=True, allowed=("left", "right")),
            Column(
                "chosen",
                STRING_LIST,
                "Images picked: the one picked (2AFC; empty for the blank image) or the two most "
                "similar references in choice order (similarity).",
                references="images.image_id",
            ),
            Column(
                "correct", BOOL, "The cluster's image was picked (2AFC); null for similarity.", nullable=True
            ),
            Column(
                "grade",
                FLOAT,
                "Catch tasks: 1 or 0 (2AFC); 1 when the mirrored query was chosen first, 0.5 "
                "second, 0 otherwise (roads2021). Null for other tasks.",
                nullable=True,
                bounds=UNIT,
            ),
            Column(
                "rt_ms",
                FLOAT,
                "Time from showing the task to the answer, on the server.",
                nullable=True,
                bounds=NON_NEGATIVE,
            ),
            Column("answered", STRING, "ISO-8601 time the answer was stored."),
        ),
        key=("study_id", "participant_id", "task_id"),
        added_by="`conceptlens study export` (or the Studies page)",
        partition=("study_id",),
        append_only=True,
    ),
    Table(
        "study_participants",
        "study_participants",
        "One row per participant of a study: progress, completion code and catch-task failures.",
        (
            Column("study_id", STRING, "Study (partition folder)."),
            Column("participant_id", STRING, "Anonymous per-browser id of the participant."),
            Column("session", INT, "Session of the design they answered.", bounds=NON_NEGATIVE),
            Column("started", STRING, "ISO-8601 time they joined."),
            Column(
                "finished",
                STRING,
                "ISO-8601 time of their last answer; null while unfinished.",
                nullable=True,
            ),
            Column(
                "completion_code",
                STRING,
                "Code shown at the end (to match crowd-sourcing submissions).",
                nullable=True,
                present_with="finished",
            ),
            Column("answers", INT, "Tasks answered, catch tasks included.", bounds=NON_NEGATIVE),
            Column("catch_answers", INT, "Catch tasks answered.", bounds=NON_NEGATIVE, at_most=("answers",)),
            Column(
                "catch_failed",
                INT,
                "Catch tasks failed (grade 0).",
                bounds=NON_NEGATIVE,
                at_most=("catch_answers",),
            ),
            Column(
                "catch_failure_rate",
                FLOAT,
                "catch_failed / catch_answers; null without catch answers.",
                nullable=True,
                bounds=UNIT,
            ),
            Column(
                "mean_grade",
                FLOAT,
                "Mean catch grade (roads2021's session weight); null without catch answers.",
                nullable=True,
                bounds=UNIT,
            ),
            Column("excluded", BOOL, "Left out of the results: catch failure rate above the threshold."),
        ),
        key=("study_id", "participant_id"),
        added_by="`conceptlens study export` (or the Studies page)",
        partition=("study_id",),
    ),
    Table(
        "study_clusters",
        "study_clusters",
        "Per cluster of a 2AFC study: people's coherence or describability (laina2020 Eq. 1, 3) "
        "with its Clopper-Pearson interval, next to the proxy annotator's.",
        (
            Column("study_id", STRING, "Study (partition folder)."),
            Column("checkpoint_id", STRING, "Checkpoint.", references="checkpoints.checkpoint_id"),
            Column("k", INT, "Number of clusters.", positive=True),
            Column("cluster", INT, "Cluster.", bounds=NON_NEGATIVE, less_than="k"),
            Column(
                "measure",
                STRING,
                "What was measured.",
                allowed=("coherence_random", "coherence_hard", "describability"),
            ),
            Column("n", INT, "Answers counted (not catch tasks, not excluded people).", positive=True),
            Column("n_correct", INT, "Of which correct.", bounds=NON_NEGATIVE, at_most=("n",)),
            Column("accuracy", FLOAT, "n_correct / n.", bounds=UNIT, at_most=("hi",)),
            Column("lo", FLOAT, "Clopper-Pearson 95% lower bound.", bounds=UNIT, at_most=("accuracy",)),
            Column("hi", FLOAT, "Clopper-Pearson 95% upper bound.", bounds=UNIT),
            Column(
                "proxy",
                FLOAT,
                "The proxy annotator's value (cluster_metrics.coherence_*; "
                "cluster_captions.describability_2afc); null when not computed.",
                nullable=True,
                bounds=UNIT,
            ),
            Column("proxy_lo", FLOAT, "Its 95% lower bound, when stored.", nullable=True, bounds=UNIT),
            Column("proxy_hi", FLOAT, "Its 95% upper bound, when stored.", nullable=True, bounds=UNIT),
            Column("purity", FLOAT, "The cluster's purity (cluster_metrics).", nullable=True, bounds=UNIT),
            Column("description", STRING, "Description shown (describability).", nullable=True),
        ),
        key=("study_id", "cluster"),
        added_by="`conceptlens study export` (or the Studies page)",
        partition=("study_id",),
    ),
    Table(
        "study_summary",
        "study_summary",
        "One row per study: its design, who took part, and the pooled result with "
        "Krippendorff's alpha (nominal) as inter-rater reliability.",
        (
            Column("study_id", STRING, "Study (partition folder)."),
            Column("kind", STRING, "Kind of study.", allowed=("coherence", "describability", "similarity")),
            Column(
                "measure",
                STRING,
                "What was measured.",
                allowed=("coherence_random", "coherence_hard", "describability", "similarity"),
            ),
            Column("spec", STRING, "JSON of the study's design parameters (seed included)."),
            Column("created", STRING, "ISO-8601 time the study was created."),
            Column("participants", INT, "People who joined.", bounds=NON_NEGATIVE),
            Column(
                "finished",
                INT,
                "People who answered every task of their session.",
                bounds=NON_NEGATIVE,
                at_most=("participants",),
            ),
            Column(
                "excluded",
                INT,
                "People left out for failed catch tasks.",
                bounds=NON_NEGATIVE,
                at_most=("participants",),
            ),
            Column(
                "max_catch_failure",
                FLOAT,
                "Exclusion threshold on the catch failure rate; null: nobody excluded.",
                nullable=True,
                bounds=UNIT,
            ),
            Column(
                "answers", INT, "Answers counted (not catch tasks, not excluded people).", bounds=NON_NEGATIVE
            ),
            Column(
                "accuracy",
                FLOAT,
                "Pooled share correct (2AFC); null for similarity or without answers.",
                nullable=True,
                bounds=UNIT,
            ),
            Column("lo", FLOAT, "Clopper-Pearson 95% lower bound.", nullable=True, bounds=UNIT),
            Column("hi", FLOAT, "Clopper-Pearson 95% upper bound.", nullable=True, bounds=UNIT),
            Column(
                "alpha",
                FLOAT,
                "Krippendorff's alpha, nominal, over tasks answered by two or more people (values: "
                "the image picked, or the ordered pair chosen); null when undefined.",
                nullable=True,
                bounds=(-1.0, 1.0),
            ),
            Column("alpha_units", INT, "Tasks alpha pairs answers of.", bounds=NON_NEGATIVE),
        ),
        key=("study_id",),
        added_by="`conceptlens study export` (or the Studies page)",
        partition=("study_id",),
    ),
    Table(
        "analysis_runs",
        "analysis_runs",
        "Append-only log: one row per unit of work an analysis finished or skipped (provenance).",
        (
            Column("analysis", STRING, "Analysis name (partition folder)."),
            Column("unit", STRING, "What was computed, e.g. `checkpoint_id=X/k=5`."),
            Column("inputs", STRING, "Fingerprint of the input files it read.", nullable=True),
            Column("options", STRING, "JSON of the options it ran with."),
            Column("version", STRING, "ConceptLens version."),
            Column("started", STRING, "ISO-8601 start time."),
            Column("seconds", FLOAT, "Wall time.", bounds=NON_NEGATIVE),
            Column(
                "status",
                STRING,
                "`done`, or `skipped`: its inputs were missing, nothing was written and the next "
                "`conceptlens analyze` tries it again (null before 2.2: done).",
                nullable=True,
                required=False,
                allowed=("done", "skipped"),
            ),
            Column(
                "reason",
                STRING,
                "Why a unit was skipped (which input is missing).",
                nullable=True,
                required=False,
            ),
        ),
        key=("analysis", "unit", "started"),
        added_by="every `conceptlens analyze` run",
        partition=("analysis",),
        append_only=True,
    ),
    Table(
        "selections",
        "selections",
        "Selections of images saved by name (issue 26): a group a user found (a lasso on a UMAP, "
        "a label or factor value, a cluster, an uploaded list of ids) kept so it can be reopened, "
        "scored and compared. One row per save, its ids in a list column; saving a name again "
        "adds a row and the latest save of a name is the one it names (`conceptlens selection`, "
        "the Clusters page's *Score this selection* panel). Rows are only ever added.",
        (
            Column(
                "dataset", STRING, "Dataset of the images (partition folder).", references="images.dataset"
            ),
            Column(
                "name",
                STRING,
                "Name it was saved as: 1 to 80 printable characters, no leading or trailing space.",
            ),
            Column(
                "image_ids",
                STRING_LIST,
                "The images selected, each once, all of this dataset (checked by `validate`).",
                references="images.image_id",
            ),
            Column("n_images", INT, "Number of images (the length of `image_ids`).", positive=True),
            Column(
                "origin",
                STRING,
                "Where the selection came from, in words (e.g. `lasso on the Clusters UMAP of "
                "checkpoint X (k=5)`, `label=3`, `csv upload`); at most 500 characters.",
            ),
            Column(
                "checkpoint_id",
                STRING,
                "Checkpoint it was drawn or scored on, if any.",
                nullable=True,
                references="checkpoints.checkpoint_id",
            ),
            Column("created", TIMESTAMP, "When it was saved (UTC, microseconds)."),
        ),
        key=("dataset", "name", "created"),
        added_by="`conceptlens selection save` (or the Clusters page, by the owner)",
        partition=("dataset",),
        append_only=True,
    ),
)

CORE_BY_NAME = {t.name: t for t in CORE_TABLES}


@cached(reads=(), maxsize=1)
def tables() -> tuple[Table, ...]:
    """Every table of the format: the core ones, then those the analyses declare, in the
    order of `conceptlens.analysis.MODULES` (a table written by two analyses is declared by
    the first). docs/workspace.md lists them in this order: the inputs first, then what
    each analysis adds, in the order `conceptlens analyze all` runs them."""
    from .analysis import declared_tables  # local: the analyses load on use

    extra = declared_tables()
    names = [t.name for t in CORE_TABLES + extra]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise AssertionError(f"table(s) declared twice: {', '.join(twice)}")
    return CORE_TABLES + extra


@cached(reads=(), maxsize=1)
def tables_by_name() -> dict[str, Table]:
    # Of no argument, like `tables`: a constant of the process, built on first use.
    return {t.name: t for t in tables()}


def __getattr__(name: str):
    # TABLES and TABLES_BY_NAME, resolved on first use (see the module's docstring).
    if name == "TABLES":
        return tables()
    if name == "TABLES_BY_NAME":
        return tables_by_name()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def logical_type(arrow_type) -> str:
    """Map an Arrow type to the logical type names used above."""
    import pyarrow as pa

    t = arrow_type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return STRING
    if pa.types.is_integer(t):
        return INT
    if pa.types.is_floating(t):
        return FLOAT
    if pa.types.is_boolean(t):
        return BOOL
    if pa.types.is_timestamp(t):
        return TIMESTAMP
    if (
        pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
    ) and pa.types.is_float32(t.value_type):
        return FLOAT_LIST
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and (
        pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type)
    ):
        return STRING_LIST
    return str(t)


def arrow_type(logical: str):
    import pyarrow as pa

    return {
        STRING: pa.string(),
        INT: pa.int64(),
        FLOAT: pa.float64(),
        BOOL: pa.bool_(),
        FLOAT_LIST: pa.list_(pa.float32()),
        TIMESTAMP: pa.timestamp("us", tz="UTC"),
        STRING_LIST: pa.list_(pa.string()),
    }[logical]


def arrow_schema(name: str, optional: bool = True, partition: bool = True):
    """The Arrow schema of table `name` (with its optional columns; without its partition
    columns when `partition` is false: what one file of a partitioned table holds)."""
    import pyarrow as pa

    t = tables_by_name()[name]
    cols = t.columns if partition else t.file_columns
    return pa.schema(
        [pa.field(c.name, arrow_type(c.type), nullable=c.nullable) for c in cols if c.required or optional]
    )


def empty(name: str):
    return arrow_schema(name).empty_table()


DOC_BEGIN = "<!-- BEGIN GENERATED TABLES: python -m conceptlens.schema docs/workspace.md -->"
DOC_END = "<!-- END GENERATED TABLES -->"


def markdown() -> str:
    """The table reference of docs/workspace.md, generated from TABLES."""
    out = []
    for t in tables():
        out.append(f"### `{t.name}` — `{t.pattern}`\n")
        out.append(t.doc + "\n")
        key = ", ".join(f"`{k}`" for k in t.key)
        req = "required" if t.required else "optional"
        out.append(f"Key: {key} (unique). This table is {req}; it is written by: {t.written_by}.\n")
        if t.partitioned:
            parts = ", ".join(f"`{p}`" for p in t.partition)
            out.append(
                f"Partitioned by {parts}: one folder per value, hive-style; these columns "
                "live in the folder names, not inside the files."
                + (
                    " Append-only: every write adds a new part file; none is rewritten."
                    if t.append_only
                    else " Writing a partition replaces its one file atomically."
                )
                + "\n"
            )
        out.append("| column | type | null | meaning |")
        out.append("| --- | --- | --- | --- |")
        for c in t.columns:
            notes = []
            if not c.required:
                notes.append("optional column")
            if c.name in t.partition:
                notes.append("partition column")
            if c.references:
                notes.append(f"references `{c.references}`")
            if c.is_path:
                notes.append(
                    "path relative to the workspace, must stay inside it"
                    + (" (or an absolute path)" if c.absolute_ok else "")
                )
            notes += c.rules()
            extra = f" ({'; '.join(notes)})" if notes else ""
            out.append(f"| `{c.name}` | {c.type} | {'yes' if c.nullable else 'no'} | {c.doc}{extra} |")
        if t.extra_columns:
            out.append(f"\nOther columns: {t.extra_columns} At most {t.max_extra_columns} of them.")
        out.append("")
    return "\n".join(out)


def _write_docs(path: str) -> None:
    p = Path(path)
    text = p.read_text()
    a, b = text.index(DOC_BEGIN) + len(DOC_BEGIN), text.index(DOC_END)
    p.write_text(text[:a] + "\n\n" + markdown() + "\n" + text[b:])


if __name__ == "__main__":
    import sys

    _write_docs(sys.argv[1] if len(sys.argv) > 1 else "docs/workspace.md")
