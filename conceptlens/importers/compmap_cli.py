"""`conceptlens import cub|mit-states`: datasets with primitive concepts for CompMap
(docs/compmap.md). Light at import time: the handlers import what they need."""

from __future__ import annotations

import os


def _image_options(args) -> dict:
    from .images import Thumbs

    return {
        "thumbs": Thumbs(args.thumbnail_size, args.thumbnail_format, args.quality),
        "workers": args.workers,
        "strict": args.strict,
        "replace": args.replace,
        "progress": not args.quiet,
    }


def _report(r, dataset: str, workspace: str) -> None:
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

    _report(
        import_cub(args.workspace, args.source, args.dataset, **_image_options(args)),
        args.dataset,
        args.workspace,
    )
    return 0


def _mit_states(args) -> int:
    from .mit_states import import_mit_states

    r = import_mit_states(args.workspace, args.source, args.dataset, **_image_options(args))
    if r is None:
        print(f"{args.source}: no images/ folder; only the split's vocabulary was imported")
    _report(r, args.dataset, args.workspace)
    return 0


def _common(p, quiet, default: str) -> None:
    p.add_argument("workspace", metavar="W", help="workspace folder (see `conceptlens init`)")
    p.add_argument("source", metavar="DIR", help="the dataset's folder")
    p.add_argument("--dataset", default=default, help=f"name of the dataset (default {default})")
    p.add_argument("--thumbnail-size", type=int, default=128, help="longest side in pixels (default 128)")
    p.add_argument(
        "--thumbnail-format", choices=("jpeg", "webp"), default="jpeg", help="thumbnail format (default jpeg)"
    )
    p.add_argument("--quality", type=int, default=85, help="thumbnail quality 1-100 (default 85)")
    p.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="processes decoding images (default: 2, or 1 on one core)",
    )
    p.add_argument("--strict", action="store_true", help="fail when an image does not decode")
    p.add_argument("--replace", action="store_true", help="import a dataset the workspace already has again")


def register(isub, quiet) -> None:
    """Add `cub` and `mit-states` to the `import` subcommands."""
    p = isub.add_parser(
        "cub",
        parents=[quiet],
        help="CUB-200-2011 with its 312 attributes (CompMap)",
        description="Import CUB_200_2011 (images, classes, split, attribute labels) "
        "with its attributes as CompMap primitives.",
    )
    _common(p, quiet, "cub")
    p.set_defaults(func=_cub)
    p = isub.add_parser(
        "mit-states",
        parents=[quiet],
        help="MIT-States' compositional split: attribute-object pairs (CompMap)",
        description="Import MIT-States' {train,val,test}_pairs.txt (and its images/ "
        "folder, if present) with attributes and objects as primitives.",
    )
    _common(p, quiet, "mit-states")
    p.set_defaults(func=_mit_states)
