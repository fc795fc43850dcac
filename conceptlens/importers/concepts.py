"""`conceptlens import concepts`: the ground-truth concepts of a dataset's images
(`concept_labels`), which the Concepts page's purity matrices and niches read
(`conceptlens analyze concepts`, the concept-quality paper; docs/import.md).

Three sources, which can be combined:

- a FILE (CSV, TSV or Parquet): one row per image, an id column (`--id-column`: an image
  id, or a path or its end, as for captions and features) and one column per concept
  (every other column, or `--columns A,B`);
- `--from-hierarchy`: one concept per level of the dataset's label hierarchy (the images'
  ancestor at that level; `label_hierarchy`, e.g. openclipart's nested folders);
- `--from-images A,B`: columns of `images.parquet` (factors or metadata such as
  `category_path`).

Each concept is binary (0/1) or categorical (codes 0..m-1). Values are coded by `encode`:
booleans, 0/1 and true/false or yes/no are binary; any other set of integers or texts
is categorical, coded in sorted order (the coding is printed and returned); non-integer
numbers are refused (bin them first), as are concepts with one value or more than
`MAX_VALUES`. A FILE row with an empty concept cell is refused; images the FILE does not
list, or that a derived concept has no value for (unlabelled images), are left unlabelled:
the concepts of a dataset cover one set of images (the analysis needs every concept of
every labelled image). Derived concepts that cannot be concepts (one value, too many, the
task label itself) are left out with the reason.

A dataset's concepts are imported once: with `--replace` every earlier concept of the
dataset is replaced; other datasets' rows are kept. Everything is checked before
`concept_labels.parquet` is written, in one atomic write.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import hierarchy as H
from .. import schema
from . import HIERARCHY_AS
from .features import dataset_rows, match_ids, raise_reasons
from .images import ImportInputError, open_workspace
from .manifest import read_table

# More values than this is an id or a measurement, not a concept of the purity matrices.
MAX_VALUES = 64
# What `analyze concepts` needs (conceptlens/analysis/concepts.py: Truth).
MIN_TEST_IMAGES = 10
# A derived concept needs each of its values on this many images (else it is left out)...
MIN_IMAGES = 5
# ... and on this many train and test images (`analyze concepts` scores it on an 80/20 split of
# the test images: metrics.concepts.split_rows).
MIN_PER_SPLIT = 2
_BINARY_WORDS = ({"false", "true"}, {"no", "yes"})
TABLE = "concept_labels"


class ConceptValueError(ValueError):
    """A column that cannot be a concept (the message says why; no location)."""


@dataclass
class Concept:
    """One concept over some images: its codes and what each code stands for."""

    name: str
    source: str  # where it came from, for messages: `FILE column c`, `hierarchy level 1`, ...
    codes: dict[str, int]  # image id -> code
    categories: list[str]  # categories[code] = the value it codes

    @property
    def kind(self) -> str:
        return "binary" if len(self.categories) == 2 else f"categorical ({len(self.categories)} values)"


@dataclass
class ConceptsImport:
    dataset: str
    concepts: list[Concept]
    images: int  # labelled images
    test_images: int
    train_images: int
    left_out: list[str] = field(default_factory=list)  # derived concepts not imported, why
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)


def _missing(v) -> bool:
    if v is None:
        return True
    try:
        return bool(v != v)  # NaN, NaT, pd.NA (raises in a bool context)
    except TypeError:
        return True


def encode(values: Sequence) -> tuple[list[int], list[str]]:
    """Codes of `values` (no missing value among them) and the value each code stands for.

    Binary: booleans, {0, 1}, {false, true}, {no, yes} (any case): 0 = false/no/0.
    Categorical: integers in numeric order, texts in sorted order, coded 0..m-1.
    Raises ConceptValueError for non-integer numbers, one value or more than MAX_VALUES.
    """

    vals = list(values)
    if not vals:
        raise ConceptValueError("no values")
    if all(isinstance(v, (bool,)) or type(v).__name__ == "bool_" for v in vals):
        vals = [int(bool(v)) for v in vals]
    if all(isinstance(v, numbers.Number) and not isinstance(v, bool) for v in vals):
        bad = next((v for v in vals if not math.isfinite(float(v)) or float(v) != int(float(v))), None)
        if bad is not None:
            raise ConceptValueError(
                f"holds a value that is not an integer ({bad!r}): a concept is binary or categorical; "
                "bin a measurement into categories first"
            )
        keys: list = sorted({int(float(v)) for v in vals})
        key_of = {v: int(float(v)) for v in set(vals)}
        shown = [str(k) for k in keys]
    else:
        text = [str(v).strip() for v in vals]
        lower = {t.lower() for t in text}
        word_set = next((w for w in _BINARY_WORDS if lower == w), None)
        if word_set is not None:
            keys = sorted(word_set)  # false < true, no < yes
            key_of = {t: t.lower() for t in set(text)}
            shown = keys
            vals = text
        else:
            keys = sorted(set(text))
            key_of = {t: t for t in keys}
            shown = keys
            vals = text
    if len(keys) < 2:
        raise ConceptValueError(f"takes a single value ({shown[0]!r}) on every image")
    if len(keys) > MAX_VALUES:
        raise ConceptValueError(
            f"takes {len(keys)} values (at most {MAX_VALUES}): an id or a measurement, not a concept"
        )
    code = {k: i for i, k in enumerate(keys)}
    return [code[key_of[v]] for v in vals], shown


def _from_file(ws, dataset: str, file, id_column: str, columns: Sequence[str] | None) -> list[Concept]:
    path = Path(file).expanduser()
    if not path.is_file():
        raise ImportInputError(f"{path}: file not found")
    df, where = read_table(path)
    names = [str(c) for c in df.columns]
    if id_column not in names:
        raise ImportInputError(f"{path}: no column {id_column!r} (--id-column); columns: {', '.join(names)}")
    if columns:
        unknown = [c for c in columns if c not in names]
        if unknown:
            raise ImportInputError(
                f"{path}: no column(s) {', '.join(map(repr, unknown))} (--columns); "
                f"columns: {', '.join(names)}"
            )
        wanted = list(dict.fromkeys(columns))
    else:
        wanted = [c for c in names if c != id_column]
    if id_column in wanted:
        raise ImportInputError(f"{path}: column {id_column!r} is the id column (--id-column), not a concept")
    if not wanted:
        raise ImportInputError(f"{path}: no concept column besides the id column {id_column!r}")
    if df.empty:
        raise ImportInputError(f"{path}: no rows")
    keys = ["" if _missing(v) else str(v).strip() for v in df[id_column].tolist()]
    ids, why = match_ids(dataset_rows(ws, dataset), keys, where)
    first: dict[str, int] = {}
    for i, iid in enumerate(ids):
        if iid is not None and iid in first:
            why.append(f"{where(i)}: image {iid!r} again (also {where(first[iid])}); one row per image")
        elif iid is not None:
            first[iid] = i
    for c in wanted:
        for i, v in enumerate(df[c].tolist()):
            if _missing(v) or (isinstance(v, str) and not v.strip()):
                why.append(f"{where(i)}: column {c} is empty (every listed image needs every concept)")
    raise_reasons(why)
    out = []
    for c in wanted:
        try:
            codes, cats = encode(df[c].tolist())
        except ConceptValueError as e:
            raise ImportInputError(f"{path}: column {c} {e}") from None
        out.append(Concept(c, f"{path.name} column {c}", dict(zip(ids, codes)), cats))
    return out


def _derived(name: str, source: str, values: dict[str, object]) -> tuple[Concept | None, str | None]:
    """A concept from image id -> value (None: no value, the image stays unlabelled)."""
    known = {i: v for i, v in values.items() if not _missing(v)}
    if not known:
        return None, "has no value on any image"
    try:
        codes, cats = encode(list(known.values()))
    except ConceptValueError as e:
        return None, str(e)
    return Concept(name, source, dict(zip(known, codes)), cats), None


def _images(ws, dataset: str, columns: Sequence[str]):

    path = ws.table_path("images")
    names = pq.read_schema(path).names
    unknown = [c for c in columns if c not in names]
    if unknown:
        raise ImportInputError(
            f"{path}: images has no column(s) {', '.join(map(repr, unknown))} (--from-images); "
            f"columns: {', '.join(names)}"
        )
    t = pq.read_table(path, columns=list(dict.fromkeys(["image_id", "dataset", "label", *columns])))
    return t.filter(pc.equal(t["dataset"], dataset)).to_pandas()


def _from_hierarchy(ws, dataset: str, how: str, left_out: list[str]) -> list[Concept]:
    """Candidates from the label hierarchy: `nodes`, one binary concept per node (the image
    is in its subtree), or `levels`, one categorical concept per level (the image's ancestor
    there). Nodes are taken root first, then by name."""

    if how not in HIERARCHY_AS:
        raise ValueError(f"--from-hierarchy must be one of {', '.join(HIERARCHY_AS)}, got {how!r}")
    h = H.load(ws, dataset)
    if h is None:
        raise ImportInputError(
            f"{ws.root}: dataset {dataset!r} has no label hierarchy (table label_hierarchy; "
            "--from-hierarchy): conceptlens import hierarchy writes one"
        )
    df = _images(ws, dataset, [h.column])
    node_of = {i: (None if _missing(v) else str(v)) for i, v in zip(df["image_id"], df[h.column])}
    where = f"images.{h.column}"
    out = []
    if how == "levels":
        for level in range(h.levels):
            values = {i: (None if n is None else h.name(h.ancestor(n, level))) for i, n in node_of.items()}
            source = f"hierarchy level {level} (of {where})"
            c, why = _derived(f"level{level}", source, values)
            if c is None:
                left_out.append(f"{source}: {why}")
            else:
                out.append(c)
        return out
    paths = {n: set(h.path(n)) for n in set(node_of.values()) if n is not None}
    for node in sorted(h.parent, key=lambda n: (h.depth[n], n)):
        values = {i: (None if n is None else int(node in paths[n])) for i, n in node_of.items()}
        source = f"hierarchy node {h.name(node)} (of {where})"
        c, why = _derived(h.name(node), source, values)
        if c is None:
            left_out.append(f"{source}: {why}")
        else:
            out.append(c)
    return out


def _unusable(c: Concept, label: dict, split: dict, kept: list[Concept]) -> str | None:
    """Why a derived concept is not imported (None: it is): the task label or one of its
    classes, the same images as a concept kept before it, too few images on one side, or a
    single value on the train or the test split (`analyze concepts` could not fit or score it)."""
    pairs = {(code, label.get(i)) for i, code in c.codes.items()}
    if not any(_missing(lab) for _, lab in pairs):
        of_label: dict = {}
        for code, lab in pairs:
            of_label.setdefault(lab, set()).add(code)
        if all(len(v) == 1 for v in of_label.values()):
            if len({p[0] for p in pairs}) == len(of_label):
                return "the task label itself (images.label), not a concept"
            if len(c.categories) == 2 and sum(v == {1} for v in of_label.values()) == 1:
                return "one class of the task label (images.label), not a concept"
    for other in kept:
        if set(other.codes) == set(c.codes) and _same_partition(other.codes, c.codes):
            return f"the same grouping of the images as {other.name}"
    counts: dict[int, int] = {}
    for code in c.codes.values():
        counts[code] = counts.get(code, 0) + 1
    if min(counts.values()) < MIN_IMAGES:
        return f"a value held by {min(counts.values())} image(s) (at least {MIN_IMAGES})"
    return _too_rare(c, split)


def _too_rare(c: Concept, split: dict) -> str | None:
    """Why `analyze concepts` cannot score the concept on these splits (None: it can): it fits
    on the train images and scores on an 80/20 split of the test images, so each value needs
    MIN_PER_SPLIT images of each."""
    for part in ("train", "test"):
        counts = dict.fromkeys(range(len(c.categories)), 0)
        for i, code in c.codes.items():
            if split.get(i) == part:
                counts[code] += 1
        value, n = min(counts.items(), key=lambda kv: kv[1])
        if n < MIN_PER_SPLIT:
            return (
                f"value {c.categories[value]} on {n} {part} image(s) (`analyze concepts` needs "
                f"{MIN_PER_SPLIT} of each value on each split)"
            )
    return None


def _same_partition(a: dict, b: dict) -> bool:
    pairs = {(a[i], b[i]) for i in a}
    return len(pairs) == len({p[0] for p in pairs}) == len({p[1] for p in pairs})


def _from_images(ws, dataset: str, columns: Sequence[str]) -> list[Concept]:
    reserved = {"image_id", "dataset", "split", "thumbnail", "source_path", "width", "height"}
    bad = [c for c in columns if c in reserved]
    if bad:
        raise ImportInputError(f"--from-images: {', '.join(bad)} describe the file, not the image's content")
    df = _images(ws, dataset, columns)
    out = []
    for col in columns:
        c, why = _derived(col, f"images.{col}", dict(zip(df["image_id"], df[col])))
        if c is None:
            raise ImportInputError(f"{ws.table_path('images')}: column {col} (--from-images) {why}")
        out.append(c)
    return out


def _gather(ws, dataset, file, id_column, columns, from_hierarchy, from_images, meta) -> tuple[list, list]:
    """Every concept the sources give (a FILE's, then derived ones that can be scored) and
    the reasons derived ones were left out; a name given twice is an error."""
    left_out: list[str] = []
    concepts: list[Concept] = []
    if file is not None:
        concepts += _from_file(ws, dataset, file, id_column, columns)
    split = dict(zip(meta["image_id"], meta["split"]))
    if from_hierarchy is not None:
        label = dict(zip(meta["image_id"], meta["label"]))
        derived: list[Concept] = []
        for c in _from_hierarchy(ws, dataset, from_hierarchy, left_out):
            why = _unusable(c, label, split, derived)
            if why is None:
                derived.append(c)
            else:
                left_out.append(f"{c.source}: {why}")
        concepts += derived
    if from_images:
        concepts += _from_images(ws, dataset, list(dict.fromkeys(from_images)))
    seen: dict[str, str] = {}
    for c in concepts:
        if c.name in seen:
            raise ImportInputError(f"concept {c.name!r} comes from both {seen[c.name]} and {c.source}")
        seen[c.name] = c.source
    if not concepts:
        raise ImportInputError(
            f"dataset {dataset!r}: no concept to import" + (f" ({'; '.join(left_out)})" if left_out else "")
        )
    return concepts, left_out


def _labelled(dataset: str, concepts: list[Concept]) -> set:
    """The images every concept has a value for; an error when none, or when a concept takes
    one value on them."""
    labelled = set.intersection(*(set(c.codes) for c in concepts))
    if not labelled:
        raise ImportInputError(f"dataset {dataset!r}: no image has a value of every concept")
    for c in concepts:  # a concept constant on the labelled images is no concept there
        if len({c.codes[i] for i in labelled}) < 2:
            raise ImportInputError(
                f"{c.source}: takes a single value on the {len(labelled)} image(s) every concept labels"
            )
    return labelled


def _split_warnings(concepts: list[Concept], labelled: set, split: dict) -> tuple[list, list, list[str]]:
    """The labelled test and train images, and what `analyze concepts` will not manage on them."""
    test = [i for i in labelled if split.get(i) == "test"]
    train = [i for i in labelled if split.get(i) == "train"]
    warnings: list[str] = []
    if len(test) < MIN_TEST_IMAGES:
        warnings.append(
            f"{len(test)} labelled test image(s): `analyze concepts` needs at least {MIN_TEST_IMAGES} "
            "(import the images again with --test-fraction to mark some `test`)"
        )
    if not train:
        warnings.append("no labelled train image: `analyze concepts` fits its probes on the train split")
    for c in concepts:
        why = _too_rare(c, {i: split.get(i) for i in labelled})
        if why is not None:
            warnings.append(f"concept {c.name}: {why}")
    return test, train, warnings


def _write(
    ws, dataset: str, ids_of_dataset: list, concepts: list[Concept], order: list, replace: bool
) -> list:
    """Replace the dataset's rows of concept_labels by the concepts' (an error without
    `replace` when it has some); returns the concepts it had."""
    path = ws.table_path(TABLE)
    earlier: list[str] = []
    if path.exists():
        old = pq.read_table(path, columns=["image_id", "concept"])
        old = old.filter(pc.is_in(old["image_id"], value_set=pa.array(ids_of_dataset, pa.string())))
        earlier = sorted(set(old["concept"].to_pylist()))
    if earlier and not replace:
        raise ImportInputError(
            f"{path}: dataset {dataset!r} already has concepts ({', '.join(earlier[:5])}"
            f"{', ...' if len(earlier) > 5 else ''}); --replace replaces all of them"
        )
    table = pa.table(
        {
            "image_id": pa.array([i for _ in concepts for i in order], pa.string()),
            "concept": pa.array([c.name for c in concepts for _ in order], pa.string()),
            "value": pa.array([c.codes[i] for c in concepts for i in order], pa.int64()),
        }
    ).cast(schema.arrow_schema(TABLE))
    ws.upsert(TABLE, table, {"image_id": ids_of_dataset})
    return earlier


def import_concepts(
    workspace,
    dataset: str,
    file=None,
    *,
    id_column: str = "image_id",
    columns: Sequence[str] | None = None,
    from_hierarchy: str | None = None,
    from_images: Sequence[str] = (),
    replace: bool = False,
) -> ConceptsImport:
    """Check everything, then write the dataset's concepts into concept_labels.parquet."""
    ws = open_workspace(workspace)
    if file is None and from_hierarchy is None and not from_images:
        raise ValueError("give a FILE, --from-hierarchy or --from-images COLUMNS (or several)")
    if columns and file is None:
        raise ValueError("--columns chooses columns of FILE: give a FILE")
    rows = dataset_rows(ws, dataset)  # a clear error for an unknown dataset
    meta = _images(ws, dataset, ["split"])
    concepts, left_out = _gather(ws, dataset, file, id_column, columns, from_hierarchy, from_images, meta)
    labelled = _labelled(dataset, concepts)
    notes: list[str] = []
    if len(labelled) < len(rows):
        notes.append(
            f"{len(labelled)} of the dataset's {len(rows)} images are labelled with concepts (the others "
            "are not listed or lack a value of some concept)"
        )
    test, train, warnings = _split_warnings(concepts, labelled, dict(zip(meta["image_id"], meta["split"])))
    order = sorted(labelled)
    earlier = _write(ws, dataset, [r["image_id"] for r in rows], concepts, order, replace)
    for c in concepts:
        c.codes = {i: c.codes[i] for i in order}
    return ConceptsImport(
        dataset, concepts, len(order), len(test), len(train), left_out, notes, warnings, earlier
    )
