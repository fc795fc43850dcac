"""The TOML spec of `conceptlens figures --spec`: `[[figure]]` entries naming catalogue
figures (conceptlens/figures/catalog.py), their parameters, files, widths and formats."""

from __future__ import annotations

import os

from ..errors import ConceptLensError
from .catalog import FIGURES, Job
from .export import FORMATS, parse_width

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib


def load_spec(path: str | os.PathLike) -> dict:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConceptLensError(f"{path}: spec file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ConceptLensError(f"{path}: not valid TOML ({e})") from None


def jobs_from_spec(spec: dict, path: str = "spec") -> list[Job]:
    """`[[figure]]` tables: `figure` (a catalog name), optional `page`, `file`, `width`,
    `formats`; every other key is a parameter of the figure."""
    entries = spec.get("figure", [])
    if not isinstance(entries, list) or not entries:
        raise ConceptLensError(f"{path}: no [[figure]] entries")
    out = []
    for i, e in enumerate(entries, 1):
        e = dict(e)
        name = e.pop("figure", None)
        page = e.pop("page", None)
        if name not in FIGURES:
            raise ConceptLensError(
                f"{path}: figure #{i}: {name!r} is not in the catalog ({', '.join(sorted(FIGURES))})"
            )
        fig = FIGURES[name]
        if page is not None and page != fig.page:
            raise ConceptLensError(f"{path}: figure #{i}: {name!r} is on page {fig.page!r}, not {page!r}")
        width = e.pop("width", None)
        formats = e.pop("formats", None)
        out.append(
            Job(
                fig,
                e,
                stem=e.pop("file", None),
                width=None if width is None else parse_width(width),
                formats=None if formats is None else parse_formats(formats),
                required=True,
            )
        )
    return out


def parse_formats(value) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    fmts = tuple(dict.fromkeys(str(f).strip().lower() for f in items if str(f).strip()))
    bad = [f for f in fmts if f not in FORMATS]
    if bad or not fmts:
        raise ConceptLensError(f"format {', '.join(bad) or value!r}: expected some of {', '.join(FORMATS)}")
    return fmts
