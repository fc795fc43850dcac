"""The workspace format: every table, its columns, types, keys and references.

This module is the single source of truth for `docs/workspace.md` (a test keeps
the two in step), for `conceptlens validate` and for every writer. The tables below are
the core ones; an analysis may declare more in its own module (`Analysis.tables`).
`TABLES` and `TABLES_BY_NAME` hold both: they are built on first use, because the
analysis modules import this one (code that runs while an analysis module is imported
reads `CORE_BY_NAME` instead).
"""

from __future__ import annotations

from dataclasses import dataclass

from .cache import cached

SCHEMA_VERSION = "2.4"  # 2.1: similarity_trials.round; 2.2: analysis_runs.status and reason
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
PREDICTORS = (
    "cl",
    "cl_heldout",
    "id",
    "clid",
    "wclid",
    "wclid_loo",
    # lu2022's baselines (section 3.2; `conceptlens analyze baselines`)
    "alignment",
    "uniformity",
    "mcr2",
    "rotation",
    "source_entropy",
)
# Transfer accuracy is also compared with in-domain kNN accuracy and the target label entropy.
TRANSFER_PREDICTORS = PREDICTORS + ("knn_acc", "target_entropy")


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
        from .analyses import writers  # on use: the analysis modules import this one

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


BOOTSTRAP_DOC = "percentile bootstrap over images, `--bootstrap` seeded resamples"
# Below this many checkpoints a correlation's interval is unstable (issue 26): shown with a warning.
MIN_STABLE_CHECKPOINTS = 10


def _interval_columns(
    of: str, bounds=None, positive: bool = False, what: str = BOOTSTRAP_DOC
) -> tuple[Column, ...]:
    """`of`_lo and `of`_hi: the 95% interval of column `of` (optional columns, null when not computed)."""
    return (
        Column(
            f"{of}_lo",
            FLOAT,
            f"95% interval of `{of}`, low end ({what}).",
            nullable=True,
            required=False,
            bounds=bounds,
            positive=positive,
            at_most=(of,),
        ),
        Column(
            f"{of}_hi",
            FLOAT,
            f"95% interval of `{of}`, high end.",
            nullable=True,
            required=False,
            bounds=bounds,
            positive=positive,
        ),
    )


def _correlation_columns(against: str) -> tuple[Column, ...]:
    """Pearson and Kendall correlations with `against`, their p-values and 95% intervals."""
    return (
        Column("pearson", FLOAT, f"Pearson r with {against}.", nullable=True, bounds=SIGNED_UNIT),
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
        Column("kendall", FLOAT, f"Kendall tau-b with {against}.", nullable=True, bounds=SIGNED_UNIT),
        Column("kendall_p", FLOAT, "Its two-sided p-value.", nullable=True, bounds=UNIT),
        Column(
            "kendall_lo",
            FLOAT,
            "95% interval of tau, low end (percentile bootstrap over checkpoints, 2,000 seeded resamples).",
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
        Column(
            "pearson_perm_p",
            FLOAT,
            f"Two-sided permutation p-value of r: the share of permutations of {against} across "
            "the checkpoints with |r| at least the observed one (all n! of them up to 7 "
            "checkpoints, else 10,000 seeded ones, counted with the observed order).",
            nullable=True,
            required=False,
            bounds=UNIT,
        ),
        Column(
            "kendall_perm_p",
            FLOAT,
            "The same permutation p-value for tau.",
            nullable=True,
            required=False,
            bounds=UNIT,
        ),
        Column(
            "unstable",
            BOOL,
            f"Fewer than {MIN_STABLE_CHECKPOINTS} checkpoints: the interval is unstable, the value "
            "is not a finding.",
            nullable=True,
            required=False,
        ),
    )


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
                at_most=("purity_hi",),
            ),
            *_interval_columns(
                "purity", bounds=UNIT, what="the cluster's images resampled, `--bootstrap` seeded resamples"
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
                at_most=("knn_acc_hi",),
            ),
            *_interval_columns(
                "knn_acc",
                bounds=UNIT,
                what="the test images' correct flags resampled, `--bootstrap` seeded resamples",
            ),
            Column(
                "knn1_acc",
                FLOAT,
                "1-NN (cosine) accuracy on labels, train -> test split.",
                nullable=True,
                required=False,
                bounds=UNIT,
                at_most=("knn1_acc_hi",),
            ),
            *_interval_columns(
                "knn1_acc",
                bounds=UNIT,
                what="the test images' correct flags resampled, `--bootstrap` seeded resamples",
            ),
            Column(
                "cl",
                FLOAT,
                "Cluster learnability (prequential 1-NN on k-means labels).",
                bounds=UNIT,
                at_most=("cl_hi",),
            ),
            *_interval_columns(
                "cl",
                bounds=UNIT,
                what="images resampled with their prequential correct and predicted counts, "
                "`--bootstrap` seeded resamples",
            ),
            Column("id", FLOAT, "TwoNN intrinsic dimension.", positive=True, finite=True, at_most=("id_hi",)),
            *_interval_columns(
                "id",
                positive=True,
                what="images resampled, each with its ratio r2 / r1 among all images, the line "
                "refitted; `--bootstrap` seeded resamples",
            ),
            Column(
                "cl_heldout",
                FLOAT,
                "k-means on the train split only, test images labelled by "
                "nearest centroid; 1-NN accuracy train -> test on those labels.",
                nullable=True,
                bounds=UNIT,
                at_most=("cl_heldout_hi",),
            ),
            *_interval_columns(
                "cl_heldout",
                bounds=UNIT,
                what="the test images' correct flags resampled, the train split's clusters held "
                "fixed, `--bootstrap` seeded resamples",
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
            *_correlation_columns("knn_acc"),
            Column("n_checkpoints", INT, "Checkpoints with both values.", bounds=NON_NEGATIVE),
        ),
        key=("dataset", "k", "predictor"),
        partition=("dataset",),
    ),
    Table(
        "baseline_scores",
        "baseline_scores",
        "lu2022's baseline predictors per (checkpoint, k): alignment and uniformity (Wang and "
        "Isola 2020), MCR2's rate reduction with the k-means partition, rotation prediction, "
        "and the source label entropy (section 3.2).",
        (
            Column(
                "checkpoint_id",
                STRING,
                "Checkpoint (partition folder).",
                references="checkpoints.checkpoint_id",
            ),
            Column("k", INT, "Clusters of the k-means partition used by `mcr2`.", positive=True),
            Column(
                "alignment",
                FLOAT,
                "Mean squared distance between two augmented views of an image (normalised "
                "features; lower = better aligned); null without the model.",
                nullable=True,
                bounds=(0.0, 4.0),
            ),
            Column(
                "uniformity",
                FLOAT,
                "log mean exp(-2 ||zi - zj||^2) over pairs of normalised features (lower = more uniform).",
                bounds=(-8.0, 0.0),
            ),
            Column("mcr2", FLOAT, "Rate reduction Delta R, epsilon^2 = 0.5.", finite=True),
            Column(
                "rotation",
                FLOAT,
                "Accuracy of a 20-NN classifier predicting the rotation (0/90/180/270) of held-out "
                "images from the features; null without the model.",
                nullable=True,
                bounds=UNIT,
            ),
            Column(
                "source_neg_entropy",
                FLOAT,
                "-H(Y|X) of a linear probe on the checkpoint's own labelled dataset (nats).",
                nullable=True,
                bounds=(None, 0.0),
            ),
        ),
        key=("checkpoint_id", "k"),
        partition=("checkpoint_id",),
    ),
    Table(
        "transfer_scores",
        "transfer_scores",
        "Out-of-domain transfer (lu2022 section 3.5): a linear probe on another labelled "
        "dataset of the workspace, embedded by the checkpoint's model.",
        (
            Column(
                "checkpoint_id",
                STRING,
                "Checkpoint (partition folder).",
                references="checkpoints.checkpoint_id",
            ),
            Column("target_dataset", STRING, "Dataset transferred to.", references="images.dataset"),
            Column(
                "accuracy", FLOAT, "Test accuracy of the linear probe (train split -> rest).", bounds=UNIT
            ),
            Column(
                "target_neg_entropy",
                FLOAT,
                "-H(Y|X) of the probe's predictions on the target's test images (nats).",
                bounds=(None, 0.0),
            ),
            Column("n_train", INT, "Target images the probe was fitted on.", positive=True),
            Column("n_test", INT, "Target images it was scored on.", positive=True),
        ),
        key=("checkpoint_id", "target_dataset"),
        partition=("checkpoint_id",),
    ),
    Table(
        "transfer_correlations",
        "transfer_correlations",
        "Correlation of each predictor with transfer accuracy across a dataset's checkpoints "
        "(lu2022 Tables 2 and 5).",
        (
            Column(
                "dataset",
                STRING,
                "Source dataset of the compared checkpoints (partition folder).",
                references="images.dataset",
            ),
            Column("target_dataset", STRING, "Dataset transferred to.", references="images.dataset"),
            Column("k", INT, "Number of clusters of the cluster-based predictors.", positive=True),
            Column("predictor", STRING, "Predictor compared.", allowed=TRANSFER_PREDICTORS),
            *_correlation_columns("transfer accuracy"),
            Column("n_checkpoints", INT, "Checkpoints with both values.", bounds=NON_NEGATIVE),
        ),
        key=("dataset", "target_dataset", "k", "predictor"),
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
            Column("mu", FLOAT_LIST, "Posterior mean; its length is the chosen dimensionality.", finite=True),
            Column("sigma", FLOAT_LIST, "Posterior standard deviation of each dimension (> 0).", finite=True),
        ),
        key=("dataset", "member", "image_id"),
        partition=("dataset",),
    ),
    Table(
        "similarity_convergence",
        "similarity_convergence",
        "Whether enough similarity judgments were collected (roads2021 section 5): the "
        "embedding inferred again from growing shares of the trials, in collection order.",
        (
            Column("dataset", STRING, "Dataset (partition folder).", references="images.dataset"),
            Column(
                "round",
                INT,
                "Share of the trials (0 = the first): one per study round where the trials carry "
                "`similarity_trials.round` (trials from before the rounds first), else equal shares.",
                bounds=NON_NEGATIVE,
            ),
            Column("n_trials", INT, "Trials fitted so far.", positive=True),
            Column("dim", INT, "Dimensionality of the embeddings (the chosen one).", positive=True),
            Column("members", INT, "Ensemble members per share.", positive=True),
            Column(
                "coarse_loss",
                FLOAT,
                "Categorical cross-entropy of randomly drawn trials under the ensemble (nats).",
                finite=True,
                bounds=NON_NEGATIVE,
            ),
            Column(
                "within_agreement",
                FLOAT,
                "Mean squared Pearson correlation of the members' similarity matrices.",
                bounds=UNIT,
            ),
            Column(
                "across_agreement",
                FLOAT,
                "Squared Pearson correlation with the previous share's ensemble (null for the first).",
                nullable=True,
                bounds=UNIT,
            ),
        ),
        key=("dataset", "round"),
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
        partition=("dataset",),
    ),
    Table(
        "oracle_purity",
        "oracle_purity",
        "The oracle purity matrix of a concept dataset (concept-quality paper, Definition 1 "
        "on the ground-truth concepts themselves): test AUC of a one-hidden-layer (32 ReLU) "
        "classifier predicting concept j from concept i, on the seed's 80/20 split of the "
        "test images; the diagonal is 1.",
        (
            Column("dataset", STRING, "Dataset (partition folder).", references="images.dataset"),
            Column("seed", INT, "Seed of the split and the classifiers.", bounds=NON_NEGATIVE),
            Column("concept_i", STRING, "Concept read (`concept_labels.concept`)."),
            Column("concept_j", STRING, "Concept predicted."),
            Column(
                "auc",
                FLOAT,
                "Test AUC (for a multiclass concept j: macro one-vs-one, or one-vs-rest with "
                "`--purity-multiclass ovr`).",
                bounds=UNIT,
                finite=True,
            ),
        ),
        key=("dataset", "seed", "concept_i", "concept_j"),
        partition=("dataset",),
    ),
    Table(
        "purity_matrices",
        "purity_matrices",
        "The purity matrix of a checkpoint's concepts (concept-quality paper, Definition 1): "
        "test AUC of a one-hidden-layer (32 ReLU) classifier predicting true concept j from "
        "learnt concept i (all its d dimensions), on the same split as `oracle_purity`. "
        "Checkpoints without `concept_names` get probe concepts (one probe per true concept, "
        "fitted on the train split).",
        (
            Column(
                "checkpoint_id",
                STRING,
                "Checkpoint (partition folder).",
                references="checkpoints.checkpoint_id",
            ),
            Column("seed", INT, "Seed of the split and the classifiers.", bounds=NON_NEGATIVE),
            Column("learnt_concept", STRING, "Learnt (or probe) concept read."),
            Column("true_concept", STRING, "Ground-truth concept predicted (`concept_labels.concept`)."),
            Column(
                "auc",
                FLOAT,
                "Test AUC (for a multiclass concept: macro one-vs-one, or one-vs-rest with "
                "`--purity-multiclass ovr`).",
                bounds=UNIT,
                finite=True,
            ),
            Column(
                "aligned",
                BOOL,
                "The learnt concept is the one aligned to this true concept: by name, or "
                "else greedily by AUC (the paper's appendix 6.4). OIS compares the aligned rows.",
            ),
        ),
        key=("checkpoint_id", "seed", "learnt_concept", "true_concept"),
        partition=("checkpoint_id",),
    ),
    Table(
        "concept_niches",
        "concept_niches",
        "The concept-correlation nicher (concept-quality paper, Definition 3): |Pearson "
        "correlation| between each learnt concept (max over its d dimensions) and each task "
        "label (one-hot) on the train split; the concept is in the label's niche where it "
        "exceeds beta.",
        (
            Column(
                "checkpoint_id",
                STRING,
                "Checkpoint (partition folder).",
                references="checkpoints.checkpoint_id",
            ),
            Column("seed", INT, "Seed of the analysis.", bounds=NON_NEGATIVE),
            Column("beta", FLOAT, "Threshold.", bounds=UNIT, finite=True),
            Column("label", INT, "Task label (`images.label`).", bounds=NON_NEGATIVE),
            Column("learnt_concept", STRING, "Learnt (or probe) concept."),
            Column("corr", FLOAT, "|Pearson correlation|.", bounds=UNIT, finite=True),
            Column("in_niche", BOOL, "corr > beta."),
        ),
        key=("checkpoint_id", "seed", "beta", "label", "learnt_concept"),
        partition=("checkpoint_id",),
    ),
    Table(
        "niche_scores",
        "niche_scores",
        "Niche purity and impurity per label and beta (concept-quality paper, Definitions "
        "5-6; its Figure 6): test AUC for the label of one label predictor (ReLU MLP 20-20, "
        "trained once on all concepts) with every concept outside the niche zeroed (`nps`) "
        "or every concept inside it zeroed (`nis`, the public code's curve).",
        (
            Column(
                "checkpoint_id",
                STRING,
                "Checkpoint (partition folder).",
                references="checkpoints.checkpoint_id",
            ),
            Column("seed", INT, "Seed of the label predictor.", bounds=NON_NEGATIVE),
            Column("beta", FLOAT, "Threshold of the nicher.", bounds=UNIT, finite=True),
            Column("label", INT, "Task label.", bounds=NON_NEGATIVE),
            Column("niche_size", INT, "Learnt concepts in the label's niche.", bounds=NON_NEGATIVE),
            Column("nps", FLOAT, "Niche purity: AUC from the niche alone.", bounds=UNIT, finite=True),
            Column("nis", FLOAT, "Niche impurity: AUC from its complement.", bounds=UNIT, finite=True),
        ),
        key=("checkpoint_id", "seed", "beta", "label"),
        partition=("checkpoint_id",),
    ),
    Table(
        "concept_scores",
        "concept_scores",
        "Concept quality of a checkpoint per seed (concept-quality paper): oracle impurity, "
        "the non-oracle impurity, the niche scores at a fixed beta and the area under the "
        "niche impurity curve.",
        (
            Column(
                "checkpoint_id",
                STRING,
                "Checkpoint (partition folder).",
                references="checkpoints.checkpoint_id",
            ),
            Column("seed", INT, "Seed of the analysis.", bounds=NON_NEGATIVE),
            Column(
                "ois",
                FLOAT,
                "Oracle impurity score 2/k ||pi - pi_oracle||_F over the aligned k x k matrix "
                "(at most 1 where every AUC is >= 0.5).",
                bounds=(0, 2),
                finite=True,
            ),
            Column(
                "non_oracle_impurity",
                FLOAT,
                "The same against an oracle of 1 on the diagonal and 0.5 elsewhere.",
                bounds=(0, 2),
                finite=True,
            ),
            Column(
                "nis_area",
                FLOAT,
                "Area under the mean niche impurity (`niche_scores.nis`: each label's raw "
                "probability column, the paper's Definitions 5-6) over beta, divided by the width "
                "of the beta range (a mean). Null (with the other niche scores) when the dataset "
                "has no task labels.",
                nullable=True,
                bounds=UNIT,
                finite=True,
            ),
            Column(
                "nis_area_code",
                FLOAT,
                "`nis_area` as the public code computes it (`niching.niche_impurity`): for three "
                "or more labels, a softmax across labels of the niche-zeroed probability columns "
                "before each label's one-vs-rest AUC; equal to `nis_area` for a binary task. "
                "Absent from files written before it existed.",
                nullable=True,
                required=False,
                bounds=UNIT,
                finite=True,
            ),
            Column("nps_beta", FLOAT, "Mean niche purity over labels at `beta`.", nullable=True, bounds=UNIT),
            Column(
                "nis_beta", FLOAT, "Mean niche impurity over labels at `beta`.", nullable=True, bounds=UNIT
            ),
            Column(
                "mean_niche_size",
                FLOAT,
                "Mean niche size over labels at `beta`.",
                nullable=True,
                bounds=NON_NEGATIVE,
            ),
            Column("beta", FLOAT, "The fixed beta (the paper's 0.2).", bounds=UNIT, finite=True),
            Column(
                "task_auc",
                FLOAT,
                "Test AUC of the label predictor on all concepts (mean one-vs-rest over labels).",
                nullable=True,
                bounds=UNIT,
                finite=True,
            ),
        ),
        key=("checkpoint_id", "seed"),
        partition=("checkpoint_id",),
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
    """Every table of the format: the core ones, then those the analyses declare."""
    from .analysis import declared_tables

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
    from pathlib import Path

    p = Path(path)
    text = p.read_text()
    a, b = text.index(DOC_BEGIN) + len(DOC_BEGIN), text.index(DOC_END)
    p.write_text(text[:a] + "\n\n" + markdown() + "\n" + text[b:])


if __name__ == "__main__":
    import sys

    _write_docs(sys.argv[1] if len(sys.argv) > 1 else "docs/workspace.md")
