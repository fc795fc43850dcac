"""The workspace format: every table, its columns, types, keys and references.

This module is the single source of truth for `docs/workspace.md` (a test keeps
the two in step), for `conceptlens validate` and for every writer.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = "2.0"
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

# Value ranges used below (inclusive; None leaves a side open).
UNIT, SIGNED_UNIT, NON_NEGATIVE = (0.0, 1.0), (-1.0, 1.0), (0, None)
SPLITS = ("train", "val", "test")
PREDICTORS = ("cl", "cl_heldout", "id", "clid", "wclid", "wclid_loo")


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
    def partitioned(self) -> bool:
        return bool(self.partition)

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


TABLES: tuple[Table, ...] = (
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
            Column("thumbnail", STRING, "Image file, relative to the workspace.", is_path=True),
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
                "weights",
                STRING,
                "Weights file relative to the workspace, if it ships one.",
                nullable=True,
                required=False,
                is_path=True,
            ),
            Column(
                "weights_sha256", STRING, "SHA-256 of the weights file used.", nullable=True, required=False
            ),
            Column(
                "preprocessing",
                STRING,
                "JSON description of the input transform.",
                nullable=True,
                required=False,
            ),
            Column("created", STRING, "ISO-8601 time of extraction.", nullable=True, required=False),
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
        "clusters",
        "clusters",
        "k-means assignment of every image, per checkpoint and k.",
        (
            Column(
                "checkpoint_id",
                STRING,
                "Checkpoint clustered (partition folder).",
                references="checkpoints.checkpoint_id",
            ),
            Column("k", INT, "Number of clusters (partition folder).", positive=True),
            Column("image_id", STRING, "Image assigned.", references="images.image_id"),
            Column("cluster", INT, "Cluster index in [0, k).", bounds=NON_NEGATIVE, less_than="k"),
            Column(
                "distance",
                FLOAT,
                "Euclidean distance of the L2-normalised feature to its centroid.",
                bounds=NON_NEGATIVE,
                finite=True,
            ),
        ),
        key=("checkpoint_id", "k", "image_id"),
        added_by="`conceptlens analyze clustering`",
        partition=("checkpoint_id", "k"),
    ),
    Table(
        "cluster_metrics",
        "cluster_metrics",
        "One row per cluster: size, purity and 2AFC coherence with random and hard negatives.",
        (
            Column(
                "checkpoint_id",
                STRING,
                "Checkpoint (partition folder).",
                references="checkpoints.checkpoint_id",
            ),
            Column("k", INT, "Number of clusters (partition folder).", positive=True),
            Column("cluster", INT, "Cluster index in [0, k).", bounds=NON_NEGATIVE, less_than="k"),
            Column("size", INT, "Number of images in the cluster (> 0).", positive=True),
            Column(
                "purity",
                FLOAT,
                "1 - H(labels in cluster) / log K; null when K < 2.",
                nullable=True,
                bounds=UNIT,
            ),
            Column("top_label", INT, "Most frequent label.", nullable=True, bounds=NON_NEGATIVE),
            Column(
                "top_label_share", FLOAT, "Share of the cluster with `top_label`.", nullable=True, bounds=UNIT
            ),
            Column(
                "coherence_random",
                FLOAT,
                "2AFC accuracy with random negatives.",
                nullable=True,
                bounds=UNIT,
                at_most=("coherence_random_hi",),
            ),
            Column(
                "coherence_random_lo",
                FLOAT,
                "Clopper-Pearson 95% lower bound.",
                nullable=True,
                bounds=UNIT,
                at_most=("coherence_random",),
            ),
            Column(
                "coherence_random_hi", FLOAT, "Clopper-Pearson 95% upper bound.", nullable=True, bounds=UNIT
            ),
            Column(
                "coherence_hard",
                FLOAT,
                "2AFC accuracy with hard negatives.",
                nullable=True,
                bounds=UNIT,
                at_most=("coherence_hard_hi",),
            ),
            Column(
                "coherence_hard_lo",
                FLOAT,
                "Clopper-Pearson 95% lower bound.",
                nullable=True,
                bounds=UNIT,
                at_most=("coherence_hard",),
            ),
            Column(
                "coherence_hard_hi", FLOAT, "Clopper-Pearson 95% upper bound.", nullable=True, bounds=UNIT
            ),
            Column(
                "hard_negative",
                INT,
                "Cluster whose centroid is nearest.",
                nullable=True,
                bounds=NON_NEGATIVE,
                less_than="k",
                differs_from="cluster",
            ),
            Column(
                "annotator",
                STRING,
                "Feature space of the 2AFC proxy annotator (`factors` or `checkpoint:ID`).",
                nullable=True,
            ),
            Column(
                "coherence_trials", INT, "2AFC trials per negative type.", nullable=True, bounds=NON_NEGATIVE
            ),
        ),
        key=("checkpoint_id", "k", "cluster"),
        added_by="`conceptlens analyze cluster_metrics`",
        partition=("checkpoint_id", "k"),
    ),
    Table(
        "cluster_captions",
        "cluster_captions",
        "One row per cluster: class-level caption (laina2020 Eq. 4), its ablations and "
        "describability by vision-language retrieval.",
        (
            Column(
                "checkpoint_id",
                STRING,
                "Checkpoint (partition folder).",
                references="checkpoints.checkpoint_id",
            ),
            Column("k", INT, "Number of clusters (partition folder).", positive=True),
            Column("cluster", INT, "Cluster index in [0, k).", bounds=NON_NEGATIVE, less_than="k"),
            Column("caption", STRING, "Class-level caption (laina2020 Eq. 4).", nullable=True),
            Column("caption_score", FLOAT, "Eq. 4 score of the caption (lower is better).", nullable=True),
            Column(
                "caption_source", STRING, "Captioner whose image captions Eq. 4 chose from.", nullable=True
            ),
            Column(
                "caption_noneg", STRING, "Eq. 4 caption without the negative term (ablation).", nullable=True
            ),
            Column("caption_noneg_score", FLOAT, "Its score.", nullable=True),
            Column(
                "caption_rouge",
                STRING,
                "Eq. 4 caption with d = 1 - ROUGE-L F (ablation).",
                nullable=True,
                required=False,
            ),
            Column("caption_rouge_score", FLOAT, "Its score.", nullable=True, required=False),
            Column(
                "describability_hits",
                INT,
                "Images of the cluster among the 10 the VL model retrieves for the caption.",
                nullable=True,
                bounds=(0, 10),
            ),
            Column(
                "describability_top1",
                FLOAT,
                "laina2020 Table 3 Top-1: share of the 10 retrieved "
                "images that the clustering puts in the cluster.",
                nullable=True,
                bounds=UNIT,
            ),
            Column(
                "describability_top5",
                FLOAT,
                "laina2020 Table 3 Top-5: share of the retrieved "
                "images with the cluster among their 5 nearest clusters (own cluster first, "
                "then by nearest mean feature).",
                nullable=True,
                bounds=UNIT,
            ),
            Column(
                "describability_binary",
                FLOAT,
                "laina2020 Table 3 Binary: share of (retrieved "
                "image, image retrieved for another cluster's caption) pairs where the first "
                "is nearer the cluster's mean feature.",
                nullable=True,
                bounds=UNIT,
            ),
            Column(
                "describability_2afc",
                FLOAT,
                "Eq. 3 with the VL model as annotator: share of "
                "20 random (in, out) image pairs where the caption is more similar to the "
                "image in the cluster.",
                nullable=True,
                required=False,
                bounds=UNIT,
            ),
            Column(
                "describability_self",
                BOOL,
                "The VL model used is the checkpoint's own model "
                "(same weights): retrieval then shares the checkpoint's feature space.",
                nullable=True,
                required=False,
            ),
        ),
        key=("checkpoint_id", "k", "cluster"),
        added_by="`conceptlens analyze captions`",
        partition=("checkpoint_id", "k"),
    ),
    Table(
        "checkpoint_metrics",
        "checkpoint_metrics",
        "One row per (checkpoint, k): clustering quality, kNN accuracy, CL, ID.",
        (
            Column(
                "checkpoint_id",
                STRING,
                "Checkpoint (partition folder).",
                references="checkpoints.checkpoint_id",
            ),
            Column("k", INT, "Number of clusters (partition folder).", positive=True),
            Column(
                "anmi",
                FLOAT,
                "Adjusted NMI of clusters vs labels (slightly negative below chance).",
                nullable=True,
                bounds=SIGNED_UNIT,
            ),
            Column(
                "knn_acc",
                FLOAT,
                "Weighted 20-NN accuracy on labels (Caron et al. 2021: cosine, "
                "weights exp(s / 0.07)), train -> test split.",
                nullable=True,
                bounds=UNIT,
            ),
            Column(
                "knn1_acc",
                FLOAT,
                "1-NN (cosine) accuracy on labels, train -> test split.",
                nullable=True,
                required=False,
                bounds=UNIT,
            ),
            Column("cl", FLOAT, "Cluster learnability (prequential 1-NN on k-means labels).", bounds=UNIT),
            Column("id", FLOAT, "TwoNN intrinsic dimension.", positive=True, finite=True),
            Column(
                "cl_heldout",
                FLOAT,
                "k-means on the train split only, test images labelled by "
                "nearest centroid; 1-NN accuracy train -> test on those labels.",
                nullable=True,
                bounds=UNIT,
            ),
            Column("n_images", INT, "Images clustered.", positive=True),
            Column(
                "n_duplicates",
                INT,
                "Duplicate feature rows dropped before TwoNN.",
                bounds=NON_NEGATIVE,
                at_most=("n_images",),
            ),
        ),
        key=("checkpoint_id", "k"),
        added_by="`conceptlens analyze cluster_metrics`",
        partition=("checkpoint_id", "k"),
    ),
    Table(
        "projections",
        "projections",
        "2-D projections of a checkpoint's features (e.g. UMAP), or of a dataset's psychological "
        "embedding, for plotting.",
        (
            Column(
                "checkpoint_id",
                STRING,
                "Checkpoint (partition folder); `psych@DATASET` is the "
                "psychological embedding of DATASET (`conceptlens analyze similarity`).",
                references="checkpoints.checkpoint_id",
                pseudo_references=("psych@", "psych_embedding.dataset"),
            ),
            Column("method", STRING, "Projection method, e.g. `umap` (partition folder)."),
            Column("image_id", STRING, "Image.", references="images.image_id"),
            Column("x", FLOAT, "First coordinate.", finite=True),
            Column("y", FLOAT, "Second coordinate.", finite=True),
        ),
        key=("checkpoint_id", "method", "image_id"),
        added_by="`conceptlens analyze projections`",
        partition=("checkpoint_id", "method"),
    ),
    Table(
        "clid_scores",
        "clid_scores",
        "CLID and W-CLID of each checkpoint, relative to the other checkpoints of its dataset "
        "at the same k (lu2022).",
        (
            Column(
                "dataset",
                STRING,
                "Dataset of the compared checkpoints (partition folder).",
                references="images.dataset",
            ),
            Column("k", INT, "Number of clusters.", positive=True),
            Column("checkpoint_id", STRING, "Checkpoint.", references="checkpoints.checkpoint_id"),
            Column("clid", FLOAT, "z(CL) + z(ID) across the compared checkpoints.", nullable=True),
            Column(
                "wclid",
                FLOAT,
                "Least-squares fit of knn_acc on [CL, ID, 1] across checkpoints.",
                nullable=True,
            ),
            Column(
                "wclid_loo",
                FLOAT,
                "The same fit leaving this checkpoint out (leave-one-out).",
                nullable=True,
                required=False,
            ),
        ),
        key=("checkpoint_id", "k"),
        added_by="`conceptlens analyze comparisons`",
        partition=("dataset",),
    ),
    Table(
        "predictor_correlations",
        "predictor_correlations",
        "Correlation of each unsupervised predictor with knn_acc across a dataset's "
        "checkpoints (lu2022 Table 1).",
        (
            Column(
                "dataset",
                STRING,
                "Dataset of the compared checkpoints (partition folder).",
                references="images.dataset",
            ),
            Column("k", INT, "Number of clusters.", positive=True),
            Column("predictor", STRING, "Unsupervised predictor compared.", allowed=PREDICTORS),
            Column("pearson", FLOAT, "Pearson r with knn_acc.", nullable=True, bounds=SIGNED_UNIT),
            Column("pearson_p", FLOAT, "Its two-sided p-value.", nullable=True, bounds=UNIT),
            Column(
                "pearson_lo",
                FLOAT,
                "95% interval of r, low end (Fisher z).",
                nullable=True,
                required=False,
                bounds=SIGNED_UNIT,
                at_most=("pearson",),
            ),
            Column(
                "pearson_hi",
                FLOAT,
                "95% interval of r, high end (Fisher z).",
                nullable=True,
                required=False,
                bounds=SIGNED_UNIT,
            ),
            Column("kendall", FLOAT, "Kendall tau-b with knn_acc.", nullable=True, bounds=SIGNED_UNIT),
            Column("kendall_p", FLOAT, "Its two-sided p-value.", nullable=True, bounds=UNIT),
            Column(
                "kendall_lo",
                FLOAT,
                "95% interval of tau, low end (percentile bootstrap over "
                "checkpoints, 2,000 seeded resamples).",
                nullable=True,
                required=False,
                bounds=SIGNED_UNIT,
            ),
            Column(
                "kendall_hi",
                FLOAT,
                "95% interval of tau, high end.",
                nullable=True,
                required=False,
                bounds=SIGNED_UNIT,
            ),
            Column("n_checkpoints", INT, "Checkpoints with both values.", bounds=NON_NEGATIVE),
        ),
        key=("dataset", "k", "predictor"),
        added_by="`conceptlens analyze comparisons`",
        partition=("dataset",),
    ),
    Table(
        "clustering_similarity",
        "clustering_similarity",
        "Adjusted NMI between the clusterings of two checkpoints of a dataset at the same k, "
        "on the images both assign (one row per unordered pair, checkpoint_a < checkpoint_b).",
        (
            Column("dataset", STRING, "Dataset (partition folder).", references="images.dataset"),
            Column("k", INT, "Number of clusters.", positive=True),
            Column(
                "checkpoint_a",
                STRING,
                "First checkpoint.",
                references="checkpoints.checkpoint_id",
                less_than="checkpoint_b",
            ),
            Column("checkpoint_b", STRING, "Second checkpoint.", references="checkpoints.checkpoint_id"),
            Column(
                "anmi",
                FLOAT,
                "Adjusted NMI (arithmetic normalisation); null below 2 shared images.",
                nullable=True,
                bounds=SIGNED_UNIT,
            ),
            Column("n_shared", INT, "Images both clusterings assign.", bounds=NON_NEGATIVE),
        ),
        key=("dataset", "k", "checkpoint_a", "checkpoint_b"),
        added_by="`conceptlens analyze comparisons`",
        partition=("dataset",),
    ),
    Table(
        "cluster_links",
        "cluster_links",
        "The contingency table of two clusterings of a dataset at the same k: how many shared "
        "images cluster a of checkpoint_a and cluster b of checkpoint_b have in common "
        "(non-zero cells only; checkpoint_a < checkpoint_b).",
        (
            Column("dataset", STRING, "Dataset (partition folder).", references="images.dataset"),
            Column("k", INT, "Number of clusters.", positive=True),
            Column(
                "checkpoint_a",
                STRING,
                "First checkpoint.",
                references="checkpoints.checkpoint_id",
                less_than="checkpoint_b",
            ),
            Column("checkpoint_b", STRING, "Second checkpoint.", references="checkpoints.checkpoint_id"),
            Column("a", INT, "Cluster of checkpoint_a.", bounds=NON_NEGATIVE, less_than="k"),
            Column("b", INT, "Cluster of checkpoint_b.", bounds=NON_NEGATIVE, less_than="k"),
            Column("count", INT, "Shared images in both (> 0).", positive=True, at_most=("size_a", "size_b")),
            Column("size_a", INT, "Shared images in cluster a.", positive=True),
            Column("size_b", INT, "Shared images in cluster b.", positive=True),
        ),
        key=("dataset", "k", "checkpoint_a", "checkpoint_b", "a", "b"),
        added_by="`conceptlens analyze comparisons`",
        partition=("dataset",),
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
        "compmap_activations",
        "compmap_activations",
        "CompMap: every image's primitive concept activations from one VL model.",
        (
            Column("vl_model", STRING, "VL model (partition folder).", references="vl_models.vl_model_id"),
            Column("image_id", STRING, "Image of the VL model's dataset.", references="images.image_id"),
            Column("primitive", STRING, "Primitive.", references="primitives.primitive"),
            Column(
                "logit",
                FLOAT,
                "100 x cosine(image embedding, prompt embedding).",
                bounds=(-100, 100),
                finite=True,
            ),
            Column(
                "activation",
                FLOAT,
                "What the composition models read: the logit, or its "
                "softmax over the group's values (`primitives.normalize`).",
                finite=True,
            ),
        ),
        key=("vl_model", "image_id", "primitive"),
        added_by="`conceptlens analyze compmap`",
        partition=("vl_model",),
    ),
    Table(
        "compmap_weights",
        "compmap_weights",
        "CompMap: the weights of the full-shot composition models (multinomial logistic "
        "regression), per class and primitive.",
        (
            Column("vl_model", STRING, "VL model (partition folder).", references="vl_models.vl_model_id"),
            Column(
                "model",
                STRING,
                "`prim`: learned from the VL model's activations; `oracle`: "
                "from the ground-truth primitives.",
                allowed=("prim", "oracle"),
            ),
            Column("label", INT, "Class index.", bounds=NON_NEGATIVE),
            Column("primitive", STRING, "Primitive.", references="primitives.primitive"),
            Column("weight", FLOAT, "Coefficient of the primitive for the class.", finite=True),
        ),
        key=("vl_model", "model", "label", "primitive"),
        added_by="`conceptlens analyze compmap`",
        partition=("vl_model",),
    ),
    Table(
        "compmap_scores",
        "compmap_scores",
        "CompMap: accuracy of the composition models, interventions, Delta and weight accuracy, "
        "per n-way k-shot setting (mean over episodes) and the full-shot setting (`shots` = 0).",
        (
            Column("vl_model", STRING, "VL model (partition folder).", references="vl_models.vl_model_id"),
            Column(
                "model",
                STRING,
                "`prim` (learned, on activations), `interv_full` (learned, on "
                "ground-truth primitives), `interv_partial` (learned, ground-truth positives set "
                "to 1, the rest activations), `oracle` (trained and tested on ground truth).",
                allowed=("prim", "interv_full", "interv_partial", "oracle"),
            ),
            Column("ways", INT, "Classes per episode (full shot: every class).", positive=True),
            Column(
                "shots",
                INT,
                "Training images per class; 0 = full shot (the train split).",
                bounds=NON_NEGATIVE,
            ),
            Column(
                "metric",
                STRING,
                "`accuracy`; `delta` = accuracy(oracle) - accuracy("
                "interv_full) (on `prim`); `acc_instance` / `acc_class`: top-k weights vs the "
                "class's k ground-truth primitives (yun2023 Table 4).",
                allowed=("accuracy", "delta", "acc_instance", "acc_class"),
            ),
            Column("value", FLOAT, "Mean.", bounds=SIGNED_UNIT, at_most=("hi",)),
            Column("lo", FLOAT, "95% interval, lower end.", bounds=SIGNED_UNIT, at_most=("value",)),
            Column("hi", FLOAT, "95% interval, upper end.", bounds=SIGNED_UNIT),
            Column("episodes", INT, "Episodes averaged (1 for full shot).", positive=True),
            Column(
                "n",
                INT,
                "Test images (accuracy, delta) or classes (weight accuracy) per episode.",
                positive=True,
            ),
        ),
        key=("vl_model", "model", "ways", "shots", "metric"),
        added_by="`conceptlens analyze compmap`",
        partition=("vl_model",),
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
        ),
        key=("dataset", "trial_id"),
        added_by="`conceptlens import hsj` (the demo's are simulated: `conceptlens demo build`)",
        partition=("dataset",),
        append_only=True,
    ),
    Table(
        "psych_embedding",
        "psych_embedding",
        "The psychological embedding inferred from a dataset's similarity trials (roads2021 "
        "section 4.2): per ensemble member, the variational posterior N(mu, diag(sigma^2)) of "
        "every image judged, at the dimensionality chosen on held-out trials.",
        (
            Column("dataset", STRING, "Dataset (partition folder).", references="images.dataset"),
            Column(
                "member",
                INT,
                "Ensemble member (0-based): members differ in their seed and "
                "in the trials held out from their fit.",
                bounds=NON_NEGATIVE,
            ),
            Column("image_id", STRING, "Image (stimulus).", references="images.image_id"),
            Column("mu", FLOAT_LIST, "Posterior mean; its length is the chosen dimensionality."),
            Column("sigma", FLOAT_LIST, "Posterior standard deviation of each dimension (> 0)."),
        ),
        key=("dataset", "member", "image_id"),
        added_by="`conceptlens analyze similarity`",
        partition=("dataset",),
    ),
    Table(
        "similarity_fit",
        "similarity_fit",
        "How well the psychological embedding predicts trials it was not fitted on, per "
        "dimensionality and ensemble member; the dimensionality with the best mean held-out "
        "log-likelihood is `selected` (roads2021 section 4.2).",
        (
            Column("dataset", STRING, "Dataset (partition folder).", references="images.dataset"),
            Column("dim", INT, "Dimensionality of the embedding.", positive=True),
            Column("member", INT, "Ensemble member.", bounds=NON_NEGATIVE),
            Column("selected", BOOL, "This dimensionality was kept (`psych_embedding`)."),
            Column("n_train", INT, "Trials fitted.", positive=True),
            Column("n_heldout", INT, "Train-split trials held out from this member's fit.", positive=True),
            Column(
                "heldout_loglik",
                FLOAT,
                "Mean weighted log-likelihood of a held-out trial (posterior mean embedding).",
                bounds=(None, 0),
            ),
            Column(
                "heldout_accuracy",
                FLOAT,
                "Share of held-out trials whose chosen references, "
                "in order, are the embedding's most probable outcome.",
                bounds=UNIT,
            ),
            Column(
                "heldout_triplet_accuracy",
                FLOAT,
                "Triplet accuracy (L2) on the held-out trials, as roads2021 Table 2's `Psych. Emb.` row.",
                bounds=UNIT,
            ),
            Column(
                "test_loglik",
                FLOAT,
                "Mean weighted log-likelihood of a `test` trial; null without test trials.",
                nullable=True,
                bounds=(None, 0),
            ),
            Column("test_accuracy", FLOAT, "Accuracy on the `test` trials.", nullable=True, bounds=UNIT),
            Column(
                "agreement",
                FLOAT,
                "Mean Spearman correlation of this member's expected "
                "similarities with the other members' at the same dimensionality (the "
                "ensemble's spread; roads2021 section 5.2); null for a single member.",
                nullable=True,
                bounds=SIGNED_UNIT,
            ),
            Column(
                "prior_scale", FLOAT, "Learned standard deviation of the prior N(0, s^2 I).", positive=True
            ),
            Column("epochs", INT, "Epochs run (early stopping on the training loss).", positive=True),
            Column("seconds", FLOAT, "Wall time of the fit.", bounds=NON_NEGATIVE),
        ),
        key=("dataset", "dim", "member"),
        added_by="`conceptlens analyze similarity`",
        partition=("dataset",),
    ),
    Table(
        "human_alignment",
        "human_alignment",
        "How well each checkpoint agrees with people (roads2021 section 6): triplet accuracy "
        "on the similarity trials and the Spearman correlation of its similarities with the "
        "psychological embedding's (RSA), overall and per label, with 95% bootstrap intervals.",
        (
            Column("dataset", STRING, "Dataset (partition folder).", references="images.dataset"),
            Column("checkpoint_id", STRING, "Checkpoint.", references="checkpoints.checkpoint_id"),
            Column(
                "metric",
                STRING,
                "`triplet_accuracy` (roads2021 Eq. 10; ties count 1/2) or "
                "`rsa` (Spearman of the upper triangles).",
                allowed=("triplet_accuracy", "rsa"),
            ),
            Column(
                "distance",
                STRING,
                "Distance (or, for rsa, negated distance) between the checkpoint's features.",
                allowed=("l1", "l2", "cosine"),
            ),
            Column(
                "label",
                INT,
                "Label scored: of the trial's query (triplet accuracy) or of "
                "one image of each pair (rsa); null = every image.",
                nullable=True,
                bounds=NON_NEGATIVE,
            ),
            Column("label_name", STRING, "Its name.", nullable=True, present_with="label"),
            Column("value", FLOAT, "The score.", bounds=SIGNED_UNIT),
            Column(
                "lo",
                FLOAT,
                "95% percentile bootstrap interval, lower end (resampling "
                "trials for triplet accuracy, images for rsa).",
                nullable=True,
                bounds=SIGNED_UNIT,
                at_most=("hi",),
            ),
            Column("hi", FLOAT, "Upper end.", nullable=True, bounds=SIGNED_UNIT),
            Column("n", INT, "Triplets (triplet accuracy) or image pairs (rsa) scored.", positive=True),
            Column("n_units", INT, "Trials (triplet accuracy) or images (rsa) resampled.", positive=True),
        ),
        key=("dataset", "checkpoint_id", "metric", "distance", "label"),
        added_by="`conceptlens analyze similarity`",
        partition=("dataset",),
    ),
    Table(
        "analysis_runs",
        "analysis_runs",
        "Append-only log: one row per unit of work an analysis finished (provenance).",
        (
            Column("analysis", STRING, "Analysis name (partition folder)."),
            Column("unit", STRING, "What was computed, e.g. `checkpoint_id=X/k=5`."),
            Column("inputs", STRING, "Fingerprint of the input files it read.", nullable=True),
            Column("options", STRING, "JSON of the options it ran with."),
            Column("version", STRING, "ConceptLens version."),
            Column("started", STRING, "ISO-8601 start time."),
            Column("seconds", FLOAT, "Wall time.", bounds=NON_NEGATIVE),
        ),
        key=("analysis", "unit", "started"),
        added_by="every `conceptlens analyze` run",
        partition=("analysis",),
        append_only=True,
    ),
)

TABLES_BY_NAME = {t.name: t for t in TABLES}


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

    t = TABLES_BY_NAME[name]
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
    for t in TABLES:
        out.append(f"### `{t.name}` — `{t.pattern}`\n")
        out.append(t.doc + "\n")
        key = ", ".join(f"`{k}`" for k in t.key)
        req = "required" if t.required else "optional"
        out.append(f"Key: {key} (unique). This table is {req}; it is written by: {t.added_by}.\n")
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
                notes.append("path relative to the workspace, must stay inside it")
            notes += c.rules()
            extra = f" ({'; '.join(notes)})" if notes else ""
            out.append(f"| `{c.name}` | {c.type} | {'yes' if c.nullable else 'no'} | {c.doc}{extra} |")
        if t.extra_columns:
            out.append(f"\nOther columns: {t.extra_columns}")
        out.append("")
    return "\n".join(out)


def _write_docs(path: str) -> None:
    from pathlib import Path

    p = Path(path)
    text = p.read_text()
    a, b = text.index(DOC_BEGIN) + len(DOC_BEGIN), text.index(DOC_END)
    p.write_text(text[:a] + "\n\n" + markdown() + "\n" + text[b:])


if __name__ == "__main__":
    import sys

    _write_docs(sys.argv[1] if len(sys.argv) > 1 else "docs/workspace.md")
