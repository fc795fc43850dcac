"""`conceptlens init` and `conceptlens import images|hierarchy|features|captions|concepts|cub|mit-states|hsj`
(docs/import.md, docs/compmap.md, docs/similarity.md): the importers' whole command line.

The workspace is `--workspace W`, as in `conceptlens import images --workspace W --dataset D
SOURCE` (the old `conceptlens import images W ...` still works for one release, with a
deprecation line: `cliargs.add_workspace`). Heavy imports happen in the handlers:
`conceptlens --help` and `validate` must run with requirements.txt alone.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..cliargs import add_seed, add_workspace, quiet_parent
from . import DROPPABLE, HIERARCHY_AS

FORMATS = ("auto", "imagefolder", "manifest", "imagenet", "hf")


def _init(args) -> int:
    from ..schema import empty  # local: the command's own, so --help stays light
    from ..workspace import Workspace, WorkspaceError  # local: the command's own, so --help stays light

    root = Path(args.workspace)
    if (root / Workspace.META).exists():
        raise WorkspaceError(f"{root / Workspace.META}: already a workspace")
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise WorkspaceError(f"{root}: exists and is not an empty folder")
    ws = Workspace.create(root, name=args.name or root.resolve().name, description=args.description)
    ws.write("images", empty("images"))
    ws.write("checkpoints", empty("checkpoints"))
    print(
        f"workspace {ws.root} created; next: conceptlens import images --workspace {ws.root} "
        "--dataset NAME SOURCE"
    )
    return 0


def detect_format(source: Path, args) -> str:
    """What SOURCE is, from its name and layout (docs/import.md, `--format`)."""
    if source.is_file():
        if source.suffix.lower() in (".csv", ".tsv", ".parquet"):
            return "manifest"
        raise ValueError(f"{source}: a file SOURCE must be a .csv, .tsv or .parquet manifest")
    if not source.is_dir():
        raise FileNotFoundError(f"{source}: no such file or folder")
    if (source / "dataset_dict.json").is_file() or (source / "state.json").is_file():
        return "hf"
    if args.devkit or args.ground_truth or args.synsets:
        return "imagenet"
    from .imagenet import IMAGE_DIRS, VAL_NAME

    for rel in IMAGE_DIRS:
        d = source / rel
        if d.is_dir() and any(VAL_NAME.match(p.name) for p in d.iterdir()):
            return "imagenet"
    return "imagefolder"


def listing(source: Path, fmt: str, args):
    if fmt == "imagefolder":
        from .imagefolder import scan

        return scan(source, labels=args.labels)
    if fmt == "manifest":
        from .manifest import scan

        return scan(source, root=args.root, unlabeled=args.unlabeled, hierarchy=args.hierarchy)
    if fmt == "imagenet":
        from .imagenet import scan

        return scan(
            source,
            devkit=args.devkit,
            ground_truth=args.ground_truth,
            synsets=args.synsets,
            wordnet=args.wordnet,
        )
    from .hf import scan

    return scan(
        source,
        image_column=args.image_column,
        label_column=args.label_column,
        unlabeled=args.unlabeled,
        split=args.split,
    )


def _images(args) -> int:
    from .images import import_images

    source = Path(args.source).expanduser()
    fmt = detect_format(source, args) if args.format == "auto" else args.format
    found = listing(source, fmt, args)
    r = import_images(
        args.workspace,
        args.dataset,
        found,
        split=args.split,
        test_fraction=args.test_fraction,
        seed=args.seed,
        drop=tuple(args.drop or ()),
        **_image_options(args),
    )
    rate = f"{(r.made / r.seconds * 60):,.0f} images/min" if r.made and r.seconds > 0 else "nothing to decode"
    print(
        f"dataset {r.dataset} ({fmt}): {r.n_images} images in {args.workspace}; {r.made} thumbnails "
        f"made ({rate}), {r.reused} reused"
    )
    if r.skipped:
        print(f"skipped {len(r.skipped)} image(s) that do not decode:")
        for where, why in r.skipped:
            print(f"  {where}: {why}")
    for n in r.notes:
        print(f"note: {n}")
    for w in r.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"next: conceptlens extract --workspace {args.workspace} --dataset {r.dataset} --model SPEC")
    return 0


def _hierarchy(args) -> int:
    from .. import hierarchy as H  # local: the command's own, so --help stays light
    from .images import ImportInputError, open_workspace

    ws = open_workspace(args.workspace)
    if (args.paths is None) == (args.file is None):
        raise ValueError("give a hierarchy FILE or --paths COLUMN (one of them)")
    if args.paths is not None:
        h = H.write_from_paths(ws, args.dataset, args.paths, args.separator)
    else:
        from .manifest import read_hierarchy

        pairs, names = read_hierarchy(Path(args.file).expanduser())
        try:
            h = H.Hierarchy(args.dataset, args.column, H.from_pairs(pairs, args.file), names)
        except H.HierarchyError as e:
            raise ImportInputError(str(e)) from None
        H.write(ws, h, H.image_values(ws, args.dataset, args.column))
    print(
        f"label hierarchy of {args.dataset} over images.{h.column}: {len(h.parent)} nodes on "
        f"{h.levels} levels ({', '.join(f'{len(h.nodes_at(i))}' for i in range(h.levels))} nodes per level)"
    )
    return 0


def _features(args) -> int:
    from .features import import_features

    cid, n, dim = import_features(
        args.workspace,
        args.dataset,
        args.checkpoint,
        args.file,
        ids=args.ids,
        key=args.key,
        ids_key=args.ids_key,
        model=args.model,
        method=args.method,
        epoch=args.epoch,
        run=args.run,
        replace=args.replace,
    )
    print(f"checkpoint {cid}: {n} embeddings of dimension {dim} for dataset {args.dataset}")
    return 0


def _captions(args) -> int:
    from .captions import import_captions

    n = import_captions(
        args.workspace,
        args.captioner,
        args.file,
        dataset=args.dataset,
        id_column=args.id_column,
        text_column=args.text_column,
    )
    print(f"captioner {args.captioner}: {n} captions in {Path(args.workspace) / 'captions.parquet'}")
    return 0


def _concepts(args) -> int:
    from .concepts import import_concepts

    r = import_concepts(
        args.workspace,
        args.dataset,
        args.file,
        id_column=args.id_column,
        columns=_names(args.columns),
        from_hierarchy=args.from_hierarchy,
        from_images=_names(args.from_images) or (),
        replace=args.replace,
    )
    if r.replaced:
        print(f"replaced the earlier concepts of {r.dataset}: {', '.join(r.replaced)}")
    print(
        f"dataset {r.dataset}: {len(r.concepts)} concept(s) of {r.images} images "
        f"({r.train_images} train, {r.test_images} test) in {Path(args.workspace) / 'concept_labels.parquet'}"
    )
    for c in r.concepts:
        coding = ", ".join(f"{i}={v}" for i, v in enumerate(c.categories[:8]))
        more = ", ..." if len(c.categories) > 8 else ""
        plain = c.categories == ["0", "1"]
        print(f"  {c.name}: {c.kind} from {c.source}" + ("" if plain else f" ({coding}{more})"))
    for why in r.left_out:
        print(f"left out {why}")
    for n in r.notes:
        print(f"note: {n}")
    for w in r.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"next: conceptlens analyze concepts --workspace {args.workspace}")
    return 0


def _names(value: str | None) -> list[str] | None:
    """A comma-separated list of column names (None: not given)."""
    if value is None:
        return None
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise ValueError(f"expected column names separated by commas, got {value!r}")
    return names


def _image_options(args) -> dict:
    """What `import images|cub|mit-states` pass on about thumbnails and decoding."""
    from .images import Thumbs

    return {
        "thumbs": Thumbs(args.thumbnail_size, args.thumbnail_format, args.quality, args.background),
        "workers": args.workers,
        "strict": args.strict,
        "replace": args.replace,
        "progress": not args.quiet,
    }


def _compmap_report(r, dataset: str, workspace: str) -> None:
    if r is not None:
        print(
            f"dataset {dataset}: {r.n_images} images in {workspace}; {r.made} thumbnails made, "
            f"{r.reused} reused"
        )
        for where, why in r.skipped:
            print(f"  skipped {where}: {why}")
        for n in r.notes:
            print(f"note: {n}")
    print(
        f"primitives and label_primitives of {dataset} written; next: conceptlens analyze compmap "
        f"--workspace {workspace} (needs a VL model of {dataset} in vl_models.parquet)"
    )


def _cub(args) -> int:
    from .cub import import_cub

    r = import_cub(args.workspace, args.source, args.dataset, **_image_options(args))
    _compmap_report(r, args.dataset, args.workspace)
    return 0


def _mit_states(args) -> int:
    from .mit_states import import_mit_states

    r = import_mit_states(args.workspace, args.source, args.dataset, **_image_options(args))
    if r is None:
        print(f"{args.source}: no images/ folder; only the split's vocabulary was imported")
    _compmap_report(r, args.dataset, args.workspace)
    return 0


def _hsj(args) -> int:
    from .hsj import import_hsj

    r = import_hsj(args.workspace, args.source, dataset=args.dataset, skip_missing=args.skip_missing)
    print(
        f"dataset {r['dataset']} ({r['format']}): {r['trials']} similarity trials over {r['stimuli']} "
        f"images appended to {args.workspace} ({r['catch']} catch trials"
        + (f"; {r['dropped']} trials with unmatched images dropped" if r["dropped"] else "")
        + ")"
    )
    print(f"next: conceptlens analyze similarity --workspace {args.workspace}")
    return 0


def _add_image_options(p) -> None:
    """Thumbnails and decoding: the options every importer of images shares."""
    p.add_argument("--thumbnail-size", type=int, default=128, help="longest side in pixels (default 128)")
    p.add_argument(
        "--thumbnail-format",
        choices=("jpeg", "webp"),
        default="jpeg",
        help="thumbnail format (default jpeg: the fastest to write)",
    )
    p.add_argument("--quality", type=int, default=85, help="thumbnail quality 1-100 (default 85)")
    p.add_argument(
        "--background",
        default="white",
        help="colour transparent pixels are composited onto, for thumbnails and (recorded "
        "in workspace.json) for `extract`'s model input: a name or #rrggbb (default white)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="processes decoding images (default: 2, or 1 on one core)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="fail (writing no rows) when an image does not decode, instead of skipping it",
    )
    p.add_argument("--replace", action="store_true", help="import a dataset the workspace already has again")


def register(sub, parents) -> None:
    quiet = quiet_parent()

    p = sub.add_parser(
        "init",
        help="create an empty workspace",
        description="Create an empty, valid workspace in a new (or empty) folder.",
    )
    add_workspace(p, positional_alias=True, help="workspace folder to create")
    p.add_argument("--name", help="workspace name (default: the folder's name)")
    p.add_argument("--description", default="", help="one line about the workspace")
    p.set_defaults(func=_init)

    imp = sub.add_parser(
        "import",
        help="bring your own images, features or captions",
        description="Bring your own data into a workspace (docs/import.md).",
    )
    isub = imp.add_subparsers(dest="what", required=True, metavar="WHAT")

    p = isub.add_parser(
        "images",
        parents=[quiet],
        help="images from a folder, manifest, ImageNet validation set or saved Hugging Face dataset",
        description="Add a dataset of images: thumbnails and images.parquet rows. "
        "Rerun the same command to resume after an interruption.",
    )
    add_workspace(p, positional_alias=True, help="workspace folder (see `conceptlens init`)")
    p.add_argument("source", metavar="SOURCE", help="folder, manifest (.csv/.tsv/.parquet) or saved dataset")
    p.add_argument("--dataset", required=True, help="name of the dataset in images.parquet")
    p.add_argument("--format", choices=FORMATS, default="auto", help="what SOURCE is (default: detected)")
    p.add_argument(
        "--split", help="split of every image when SOURCE gives none: train, val or test (default train)"
    )
    p.add_argument(
        "--test-fraction",
        type=float,
        help="when SOURCE gives no splits: mark this share of each class `test` (seeded)",
    )
    add_seed(p, "--test-fraction")
    p.add_argument(
        "--drop",
        nargs="+",
        choices=DROPPABLE,
        metavar="KIND",
        help="leave out `flat` images (one colour) and/or pixel-identical `duplicates` (the first "
        "of a group stays when they share a label; a group spanning labels goes whole)",
    )
    _add_image_options(p)
    g = p.add_argument_group("manifest")
    g.add_argument("--root", help="folder relative paths of the manifest start from (default: its folder)")
    g.add_argument("--unlabeled", action="store_true", help="import images without labels (manifest, hf)")
    g.add_argument(
        "--hierarchy",
        metavar="FILE",
        help="label hierarchy file (node, parent[, name]) over label_name (also: a `parent` column)",
    )
    g = p.add_argument_group("folder of class folders")
    g.add_argument(
        "--labels",
        choices=("top", "leaf"),
        default="top",
        help="nested folders: the label is the top folder (default; the path is kept as "
        "category_path) or the image's own folder path",
    )
    g = p.add_argument_group("ImageNet validation set")
    g.add_argument("--devkit", help="ILSVRC2012_devkit_t12 folder (ground truth + meta.mat)")
    g.add_argument("--ground-truth", help="ILSVRC2012_validation_ground_truth.txt or LOC_val_solution.csv")
    g.add_argument("--synsets", help="meta.mat, LOC_synset_mapping.txt or synset_words.txt")
    g.add_argument(
        "--wordnet",
        metavar="FILE",
        help="WordNet's data.noun for the label hierarchy (default /usr/share/wordnet/data.noun, "
        "Debian package wordnet-base)",
    )
    g = p.add_argument_group("Hugging Face dataset")
    g.add_argument("--image-column", help="column of images (default: the one Image feature)")
    g.add_argument("--label-column", help="column of labels (default: the one ClassLabel feature)")
    p.set_defaults(func=_images)

    p = isub.add_parser(
        "hierarchy",
        help="a label hierarchy over a dataset's labels",
        description="Write the label hierarchy (table label_hierarchy) of a dataset already "
        "imported: from a file (node, parent[, name]) over the values of --column, or from a "
        "column of paths (--paths category_path: a/b is a child of a). Nothing else is written.",
    )
    add_workspace(p)
    p.add_argument("file", metavar="FILE", nargs="?", help=".csv, .tsv or .parquet with node, parent[, name]")
    p.add_argument("--dataset", required=True, help="dataset of images.parquet")
    p.add_argument(
        "--column", default="label_name", help="images column whose values are the nodes (default label_name)"
    )
    p.add_argument("--paths", metavar="COLUMN", help="build the tree from this images column of paths")
    p.add_argument("--separator", default="/", help="separator of --paths (default /)")
    p.set_defaults(func=_hierarchy)

    p = isub.add_parser(
        "features",
        help="embeddings computed elsewhere, as a checkpoint",
        description="Add embeddings computed elsewhere as a checkpoint of a dataset "
        "(.npy/.npz, .h5, .pt, .parquet).",
    )
    add_workspace(p, positional_alias=True)
    p.add_argument("file", metavar="FILE", help="the vectors (and usually their ids)")
    p.add_argument("--checkpoint", required=True, metavar="ID", help="id of the new checkpoint")
    p.add_argument("--dataset", required=True, help="dataset of images.parquet the vectors embed")
    p.add_argument("--ids", help="ids of the rows, in order, for .npy or a bare tensor (.txt, .csv, .npy)")
    p.add_argument("--key", help="array or column of the vectors (default: embeddings/features)")
    p.add_argument(
        "--ids-key", help="array or column of the ids (default: ids/image_ids; image_id in Parquet)"
    )
    p.add_argument("--model", help="stored in checkpoints.model (default: the file's name)")
    p.add_argument("--method", help="training regime stored in checkpoints.method (default imported)")
    p.add_argument("--epoch", type=int, help="training epoch stored in checkpoints.epoch")
    p.add_argument("--run", help="training run stored in checkpoints.run")
    p.add_argument("--replace", action="store_true", help="replace a checkpoint of the same id")
    p.set_defaults(func=_features)

    p = isub.add_parser(
        "captions",
        help="captions written by your own captioner",
        description="Add one caption per image (CSV/TSV/Parquet: image_id, text) as captioner NAME.",
    )
    add_workspace(p, positional_alias=True)
    p.add_argument("file", metavar="FILE", help=".csv, .tsv or .parquet with image ids and texts")
    p.add_argument("--captioner", required=True, metavar="NAME", help="name stored in captions.captioner")
    p.add_argument("--dataset", help="match paths among this dataset's images only")
    p.add_argument("--id-column", default="image_id", help="column of image ids or paths (default image_id)")
    p.add_argument("--text-column", default="text", help="column of captions (default text)")
    p.set_defaults(func=_captions)

    p = isub.add_parser(
        "concepts",
        help="ground-truth concepts of a dataset's images (Concepts page)",
        description="Write the ground-truth concepts of a dataset's images (table concept_labels), "
        "binary or categorical, from a FILE (an id column and one column per concept), from the "
        "levels of the dataset's label hierarchy, or from columns of images.parquet; the Concepts "
        "page's purity matrices and niches read them (`conceptlens analyze concepts`).",
    )
    add_workspace(p)
    p.add_argument(
        "file", metavar="FILE", nargs="?", help=".csv, .tsv or .parquet: an id column and concepts"
    )
    p.add_argument("--dataset", required=True, help="dataset of images.parquet")
    p.add_argument(
        "--id-column", default="image_id", help="FILE's column of image ids or paths (default image_id)"
    )
    p.add_argument("--columns", metavar="A,B", help="FILE's concept columns (default: every other column)")
    p.add_argument(
        "--from-hierarchy",
        nargs="?",
        const="nodes",
        choices=HIERARCHY_AS,
        help="concepts from the dataset's label hierarchy: `nodes` (the default), one binary concept "
        "per node (the image is in its subtree), or `levels`, one categorical concept per level; "
        "those that are the task label or one of its classes, repeat another, hold a value on fewer "
        "than 5 images or one value on a split are left out, with the reason",
    )
    p.add_argument(
        "--from-images", metavar="A,B", help="columns of images.parquet as concepts (e.g. category_path)"
    )
    p.add_argument("--replace", action="store_true", help="replace the dataset's earlier concepts")
    p.set_defaults(func=_concepts)

    for name, func, title, what in (
        (
            "cub",
            _cub,
            "CUB-200-2011 with its 312 attributes (CompMap)",
            "Import CUB_200_2011 (images, classes, split, attribute labels) with its attributes as "
            "CompMap primitives.",
        ),
        (
            "mit-states",
            _mit_states,
            "MIT-States' compositional split: attribute-object pairs (CompMap)",
            "Import MIT-States' {train,val,test}_pairs.txt (and its images/ folder, if present) with "
            "attributes and objects as primitives.",
        ),
    ):
        p = isub.add_parser(name, parents=[quiet], help=title, description=what)
        add_workspace(p, positional_alias=True, help="workspace folder (see `conceptlens init`)")
        p.add_argument("source", metavar="DIR", help="the dataset's folder")
        p.add_argument("--dataset", default=name, help=f"name of the dataset (default {name})")
        _add_image_options(p)
        p.set_defaults(func=func)

    p = isub.add_parser(
        "hsj",
        help="human similarity judgments (ImageNet-HSJ release or psiz HDF5)",
        description="Append human similarity judgments (roads2021) to a dataset's "
        "similarity_trials (docs/similarity.md).",
    )
    add_workspace(p, positional_alias=True)
    p.add_argument(
        "source",
        metavar="SOURCE",
        help="release folder (stimuli.txt, train_seqs/, "
        "test_seqs/) or psiz observations .hdf5 (with catalog.hdf5 or stimuli.txt beside it)",
    )
    p.add_argument("--dataset", help="dataset of images.parquet the stimuli are (default: the only one)")
    p.add_argument(
        "--skip-missing",
        action="store_true",
        help="drop trials showing a stimulus that matches no image (default: an error)",
    )
    p.set_defaults(func=_hsj)
