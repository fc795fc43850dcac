"""The workspace format: every table, its columns, types, keys and references.

This module is the single source of truth for `docs/workspace.md` (a test keeps
the two in step), for `conceptlens validate` and for every writer.
"""
from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = "1.0"
# Readers accept any workspace whose major version matches ours.
SCHEMA_MAJOR = SCHEMA_VERSION.split(".")[0]

# Logical types, checked against Arrow types by `validate`.
STRING, INT, FLOAT, BOOL, FLOAT_LIST, TIMESTAMP = (
    "string", "int", "float", "bool", "list<float32>", "timestamp")


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


@dataclass(frozen=True)
class Table:
    name: str
    # Path relative to the workspace; "{checkpoint_id}" marks one file per checkpoint.
    path: str
    doc: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    required: bool = False
    # Free-form extra columns are allowed (documented as such).
    extra_columns: str | None = None
    added_by: str = ""

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def per_checkpoint(self) -> bool:
        return "{checkpoint_id}" in self.path


TABLES: tuple[Table, ...] = (
    Table(
        "images", "images.parquet",
        "One row per image of every dataset in the workspace.",
        (
            Column("image_id", STRING, "Unique id of the image across the workspace."),
            Column("dataset", STRING, "Name of the dataset the image belongs to."),
            Column("label", INT, "Class index (0-based) for datasets with labels.", nullable=True),
            Column("label_name", STRING, "Human-readable class name.", nullable=True),
            Column("split", STRING, "`train`, `test` or another split name."),
            Column("thumbnail", STRING, "Image file, relative to the workspace.", is_path=True),
            Column("width", INT, "Width of the thumbnail in pixels."),
            Column("height", INT, "Height of the thumbnail in pixels."),
        ),
        key=("image_id",), required=True, added_by="your own import (or `conceptlens demo build`)",
        extra_columns="Any further column is a factor or attribute of the image "
                      "(e.g. `shape`, `color`, `slant`); the dashboard lists them as such.",
    ),
    Table(
        "checkpoints", "checkpoints.parquet",
        "One row per model checkpoint whose features the workspace holds.",
        (
            Column("checkpoint_id", STRING, "Unique id; also the name of its features file."),
            Column("dataset", STRING, "Dataset whose images were embedded.",
                   references="images.dataset"),
            Column("model", STRING, "Architecture or model name."),
            Column("method", STRING, "Training regime (e.g. `simclr`, `supervised`, `random`)."),
            Column("epoch", INT, "Training epoch of this checkpoint.", nullable=True),
            Column("feature_dim", INT, "Length of every embedding of this checkpoint."),
            Column("source", STRING, "Model spec it was extracted with (`family:name`)."),
            Column("run", STRING, "Training run shared by stages of one model.",
                   nullable=True, required=False),
            Column("layer", STRING, "Module whose output was pooled; null = default embedding.",
                   nullable=True, required=False),
            Column("weights", STRING, "Weights file relative to the workspace, if it ships one.",
                   nullable=True, required=False, is_path=True),
            Column("weights_sha256", STRING, "SHA-256 of the weights file used.",
                   nullable=True, required=False),
            Column("preprocessing", STRING, "JSON description of the input transform.",
                   nullable=True, required=False),
            Column("created", STRING, "ISO-8601 time of extraction.",
                   nullable=True, required=False),
        ),
        key=("checkpoint_id",), required=True, added_by="`conceptlens extract` (or your own writer)",
    ),
    Table(
        "features", "features/{checkpoint_id}.parquet",
        "One file per checkpoint: the embedding of every image of its dataset.",
        (
            Column("image_id", STRING, "Image embedded.", references="images.image_id"),
            Column("embedding", FLOAT_LIST, "Feature vector; length = `feature_dim` of the checkpoint."),
        ),
        key=("image_id",), required=False, added_by="`conceptlens extract` (or your own writer)",
    ),
    Table(
        "captions", "captions.parquet",
        "Text describing single images: ground-truth sentences made from a dataset's "
        "factors (captioner `groundtruth`) and captions written by captioning models.",
        (
            Column("image_id", STRING, "Image described.", references="images.image_id"),
            Column("captioner", STRING, "`groundtruth` or the captioner spec that wrote it."),
            Column("text", STRING, "One sentence."),
        ),
        key=("image_id", "captioner"), added_by="`conceptlens demo build`, `conceptlens caption`",
    ),
    Table(
        "vl_models", "vl_models.parquet",
        "Vision-language models shipped with the workspace (prompting, retrieval, captions).",
        (
            Column("vl_model_id", STRING, "Unique id."),
            Column("dataset", STRING, "Dataset it was trained for or applies to.",
                   references="images.dataset"),
            Column("spec", STRING, "Model spec (`open_clip:ARCH` with a config in the workspace)."),
            Column("config", STRING, "Architecture config file relative to the workspace.",
                   nullable=True, is_path=True),
            Column("weights", STRING, "Weights file relative to the workspace.",
                   nullable=True, is_path=True),
            Column("weights_sha256", STRING, "SHA-256 of the weights file.", nullable=True),
        ),
        key=("vl_model_id",), added_by="`conceptlens demo build` (or your own writer)",
    ),
    Table(
        "clusters", "clusters.parquet",
        "k-means assignment of every image, per checkpoint and k.",
        (
            Column("checkpoint_id", STRING, "Checkpoint clustered.",
                   references="checkpoints.checkpoint_id"),
            Column("k", INT, "Number of clusters."),
            Column("image_id", STRING, "Image assigned.", references="images.image_id"),
            Column("cluster", INT, "Cluster index in [0, k)."),
            Column("distance", FLOAT, "Euclidean distance of the L2-normalised feature to its centroid."),
        ),
        key=("checkpoint_id", "k", "image_id"), added_by="`conceptlens analyze clusters`",
    ),
    Table(
        "cluster_metrics", "cluster_metrics.parquet",
        "One row per cluster: purity, coherence (2AFC), caption, describability.",
        (
            Column("checkpoint_id", STRING, "Checkpoint.", references="checkpoints.checkpoint_id"),
            Column("k", INT, "Number of clusters."),
            Column("cluster", INT, "Cluster index."),
            Column("size", INT, "Number of images in the cluster."),
            Column("purity", FLOAT, "1 - H(labels in cluster) / log K; null when K < 2.", nullable=True),
            Column("top_label", INT, "Most frequent label.", nullable=True),
            Column("top_label_share", FLOAT, "Share of the cluster with `top_label`.", nullable=True),
            Column("coherence_random", FLOAT, "2AFC accuracy with random negatives.", nullable=True),
            Column("coherence_random_lo", FLOAT, "Clopper-Pearson 95% lower bound.", nullable=True),
            Column("coherence_random_hi", FLOAT, "Clopper-Pearson 95% upper bound.", nullable=True),
            Column("coherence_hard", FLOAT, "2AFC accuracy with hard negatives.", nullable=True),
            Column("coherence_hard_lo", FLOAT, "Clopper-Pearson 95% lower bound.", nullable=True),
            Column("coherence_hard_hi", FLOAT, "Clopper-Pearson 95% upper bound.", nullable=True),
            Column("hard_negative", INT, "Cluster whose centroid is nearest.", nullable=True),
            Column("caption", STRING, "Class-level caption (laina2020 Eq. 4).", nullable=True),
            Column("caption_score", FLOAT, "Eq. 4 score of the caption (lower is better).", nullable=True),
            Column("caption_source", STRING, "Captioner whose image captions Eq. 4 chose from.",
                   nullable=True, required=False),
            Column("caption_noneg", STRING, "Eq. 4 caption without the negative term (ablation).",
                   nullable=True, required=False),
            Column("caption_noneg_score", FLOAT, "Its score.", nullable=True, required=False),
            Column("caption_rouge", STRING, "Eq. 4 caption with d = 1 - ROUGE-L F (ablation).",
                   nullable=True, required=False),
            Column("caption_rouge_score", FLOAT, "Its score.", nullable=True, required=False),
            Column("annotator", STRING, "Feature space of the 2AFC proxy annotator "
                   "(`factors` or `checkpoint:ID`).", nullable=True, required=False),
            Column("coherence_trials", INT, "2AFC trials per negative type.", nullable=True,
                   required=False),
            Column("describability_hits", INT, "Images of the cluster among the VL model's top 10 "
                   "for the caption.", nullable=True, required=False),
            Column("describability_top1", BOOL, "Top-1 retrieved image is in the cluster.",
                   nullable=True, required=False),
            Column("describability_top5", BOOL, "One of the top 5 is in the cluster.",
                   nullable=True, required=False),
            Column("describability_binary", FLOAT, "Share of (in, out) image pairs where the "
                   "caption scores the in-cluster image higher.", nullable=True, required=False),
        ),
        key=("checkpoint_id", "k", "cluster"), added_by="`conceptlens analyze clusters`",
        extra_columns="Further per-cluster metrics (ablation captions, describability).",
    ),
    Table(
        "checkpoint_metrics", "checkpoint_metrics.parquet",
        "One row per (checkpoint, k): clustering quality, CL, ID, CLID.",
        (
            Column("checkpoint_id", STRING, "Checkpoint.", references="checkpoints.checkpoint_id"),
            Column("k", INT, "Number of clusters."),
            Column("anmi", FLOAT, "Adjusted NMI of clusters vs labels.", nullable=True),
            Column("knn_acc", FLOAT, "1-NN top-1 accuracy on labels, train -> test split.", nullable=True),
            Column("cl", FLOAT, "Cluster learnability (prequential 1-NN on k-means labels)."),
            Column("id", FLOAT, "TwoNN intrinsic dimension."),
            Column("clid", FLOAT, "Normalised CL + normalised ID across the compared checkpoints.",
                   nullable=True),
            Column("cl_heldout", FLOAT, "1-NN on the train split's clusters, scored on the test split.",
                   nullable=True, required=False),
            Column("wclid", FLOAT, "Least-squares fit of knn_acc on [CL, ID, 1] across checkpoints.",
                   nullable=True, required=False),
            Column("n_images", INT, "Images clustered.", nullable=True, required=False),
            Column("n_duplicates", INT, "Duplicate feature rows dropped before TwoNN.",
                   nullable=True, required=False),
        ),
        key=("checkpoint_id", "k"), added_by="`conceptlens analyze clusters`",
        extra_columns="Further per-checkpoint metrics (held-out CL, W-CLID).",
    ),
    Table(
        "projections", "projections.parquet",
        "2-D projections of a checkpoint's features (e.g. UMAP) for plotting.",
        (
            Column("checkpoint_id", STRING, "Checkpoint.", references="checkpoints.checkpoint_id"),
            Column("method", STRING, "Projection method, e.g. `umap`."),
            Column("image_id", STRING, "Image.", references="images.image_id"),
            Column("x", FLOAT, "First coordinate."),
            Column("y", FLOAT, "Second coordinate."),
        ),
        key=("checkpoint_id", "method", "image_id"), added_by="`conceptlens analyze clusters`",
    ),
    Table(
        "predictor_correlations", "predictor_correlations.parquet",
        "Correlation of each unsupervised predictor with knn_acc across a dataset's "
        "checkpoints (lu2022 Table 1).",
        (
            Column("dataset", STRING, "Dataset of the compared checkpoints.",
                   references="images.dataset"),
            Column("k", INT, "Number of clusters."),
            Column("predictor", STRING, "`cl`, `cl_heldout`, `id`, `clid` or `wclid`."),
            Column("pearson", FLOAT, "Pearson r with knn_acc.", nullable=True),
            Column("pearson_p", FLOAT, "Its two-sided p-value.", nullable=True),
            Column("kendall", FLOAT, "Kendall tau-b with knn_acc.", nullable=True),
            Column("kendall_p", FLOAT, "Its two-sided p-value.", nullable=True),
            Column("n_checkpoints", INT, "Checkpoints with both values."),
        ),
        key=("dataset", "k", "predictor"), added_by="`conceptlens analyze clusters`",
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
    if (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)) \
            and pa.types.is_float32(t.value_type):
        return FLOAT_LIST
    return str(t)


def arrow_type(logical: str):
    import pyarrow as pa
    return {STRING: pa.string(), INT: pa.int64(), FLOAT: pa.float64(), BOOL: pa.bool_(),
            FLOAT_LIST: pa.list_(pa.float32()), TIMESTAMP: pa.timestamp("us", tz="UTC")}[logical]


def arrow_schema(name: str, optional: bool = True):
    """The Arrow schema a writer should use for table `name` (with its optional columns)."""
    import pyarrow as pa
    t = TABLES_BY_NAME[name]
    return pa.schema([pa.field(c.name, arrow_type(c.type), nullable=c.nullable)
                      for c in t.columns if c.required or optional])


def empty(name: str):
    return arrow_schema(name).empty_table()


DOC_BEGIN = "<!-- BEGIN GENERATED TABLES: python -m conceptlens.schema docs/workspace.md -->"
DOC_END = "<!-- END GENERATED TABLES -->"


def markdown() -> str:
    """The table reference of docs/workspace.md, generated from TABLES."""
    out = []
    for t in TABLES:
        out.append(f"### `{t.name}` — `{t.path}`\n")
        out.append(t.doc + "\n")
        key = ", ".join(f"`{k}`" for k in t.key)
        req = "required" if t.required else "optional"
        out.append(f"Key: {key} (unique). This table is {req}; it is written by: {t.added_by}.\n")
        out.append("| column | type | null | meaning |")
        out.append("| --- | --- | --- | --- |")
        for c in t.columns:
            notes = []
            if not c.required:
                notes.append("optional column")
            if c.references:
                notes.append(f"references `{c.references}`")
            if c.is_path:
                notes.append("path relative to the workspace, must stay inside it")
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
