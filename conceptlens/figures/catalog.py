"""The figure catalogue's model and its renderer: every figure of the dashboard's pages by
name, with its parameters, so a script (`conceptlens figures`, the static report) draws
what a page draws.

A page's figures are declared in one module of `conceptlens/figures/specs/` (one per
page, found by `pkgutil` on first use of `FIGURES`: no list to keep). An entry names its
page, its parameters (their names are the page's URL parameters, so
`/clusters?ds=shapes&k=5` and a spec's `ds = "shapes"`, `k = 5` mean the same view) and a
`build(db, params)`. The page draws that figure by calling the same `build` with the
parameters its URL chose (components/export_button.py `show_catalog_figure`), so what is
exported is what the page shows. A parameter's default is what the page shows first: the
first of its options, or a value. `db` is a `WorkspaceDB`, or the dashboard's workspace,
whose views are cached: a build reads through `view(db, fn, **args)`.
The TOML spec reader of `conceptlens figures --spec` is figures/spec_file.py.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import plotly.graph_objects as go

from .. import analyses
from ..errors import ConceptLensError
from ..workspace import atomic_write_bytes
from .export import (
    DEFAULT_ASPECT,
    figure_bytes,
    inspect_pdf,
    paper_height_in,
    provenance,
    renderer,
)

PAPER_FORMATS = ("pdf", "svg", "png")
# Widths up to this many inches are one column of a two-column venue.
NARROW_IN = 4.5


class Unavailable(ConceptLensError):
    """The workspace has nothing for this figure (a table, a projection is missing)."""


@dataclass(frozen=True)
class Param:
    """One parameter of a figure; `name` is the page's URL parameter."""

    name: str
    options: Callable[[Any, dict], list] | None = None  # (db, params before it) -> values
    default: Any = None  # a value, or (db, params before it) -> value; else the first option
    kind: type = str
    help: str = ""
    default_index: int = 0
    # Interactive state of the page (a selected image, a highlighted cluster): none unless given.
    optional: bool = False

    def parse(self, raw):
        try:
            if self.kind is bool:
                return raw if isinstance(raw, bool) else str(raw).lower() in ("1", "true", "yes")
            return self.kind(raw)
        except (TypeError, ValueError):
            raise ConceptLensError(f"parameter {self.name}: {raw!r} is not a {self.kind.__name__}") from None

    def resolve(self, db, before: dict, given: dict):
        opts = list(self.options(db, before)) if self.options else None
        if self.optional and given.get(self.name) is None:
            return None
        if self.name in given:
            value = self.parse(given[self.name])
            if opts is not None and value not in opts:
                shown = ", ".join(map(str, opts[:12])) + (" …" if len(opts) > 12 else "")
                raise ConceptLensError(f"parameter {self.name}: {value!r} is not one of {shown or 'nothing'}")
            return value
        if self.default is not None:
            return self.default(db, before) if callable(self.default) else self.default
        if opts:
            return opts[min(self.default_index, len(opts) - 1)]
        raise Unavailable(f"no {self.name} to choose from")


def as_text(value) -> str:
    """A parameter as the page's URL writes it (a range or a viewport: comma-separated)."""
    if isinstance(value, (tuple, list)):
        return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class Figure:
    page: str
    name: str  # unique across pages; the page's provenance calls it so ("figure": name)
    title: str
    params: tuple[Param, ...]
    build: Callable[[Any, dict], go.Figure]
    aspect: float = DEFAULT_ASPECT  # height / width on paper
    # ... at one column (at most NARROW_IN wide), for a figure whose panels sit side by side
    narrow_aspect: float | None = None
    # What it draws, declared as its page's spec is (components/nav.py): the steps it shows
    # (conceptlens/analyses.py) and the tables it reads that no step writes. Its tables are
    # derived from them; without them the figure is unavailable, and the reason names the
    # command that computes them.
    steps: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()  # steps whose tables it reads when present (captions, CLID)
    # Tables no step writes that it reads when present (a dataset's label_hierarchy).
    optional_reads: tuple[str, ...] = ()
    default: bool = True  # among the page's default figures

    @property
    def tables(self) -> tuple[str, ...]:
        steps = analyses.by_name()
        out = [t for s in self.steps for t in steps[s].tables] + list(self.reads)
        return tuple(dict.fromkeys(out))

    @property
    def may_read(self) -> tuple[str, ...]:
        """Its tables and those it reads when present (optional steps', steps' optional parts)."""
        steps = analyses.by_name()
        out = list(self.tables) + [t for s in self.steps + self.optional for t in steps[s].reads]
        return tuple(dict.fromkeys(out + list(self.optional_reads)))

    def missing(self, db) -> str | None:
        """Why the workspace cannot draw it (a table and the command that writes it), or None."""
        steps = analyses.by_name()
        why = []
        for s in self.steps:
            gone = [t for t in steps[s].tables if not db.has(t)]
            if gone:
                cmd = analyses.command_for(steps[s], getattr(db, "root", "W"))
                why.append(f"table {', '.join(gone)} missing" + (f" ({cmd})" if cmd else ""))
        gone = [t for t in self.reads if not db.has(t)]
        if gone:
            why.append(f"table {', '.join(gone)} missing")
        return "; ".join(why) or None

    def aspect_at(self, width_in: float) -> float:
        return self.narrow_aspect if self.narrow_aspect and width_in <= NARROW_IN else self.aspect

    def resolve(self, db, given: dict | None = None) -> dict:
        given = dict(given or {})
        unknown = set(given) - {p.name for p in self.params}
        if unknown:
            raise ConceptLensError(
                f"figure {self.name}: unknown parameter(s) {', '.join(sorted(unknown))}; "
                f"it takes {', '.join(p.name for p in self.params) or 'none'}"
            )
        why = self.missing(db)
        if why:
            raise Unavailable(why)
        out: dict = {}
        for p in self.params:
            value = p.resolve(db, out, given)
            if value is not None:  # an optional parameter not given is left out
                out[p.name] = value
        return out

    def url(self, params: dict) -> str:
        return f"/{self.page}?" + urlencode({k: as_text(v) for k, v in params.items() if v is not None})


class _Registry(Mapping):
    """Figures by name; the spec modules (figures/specs/*.py) are imported on first use."""

    def __init__(self):
        self._figures: dict[str, Figure] = {}
        self._loaded = False
        self._lock = threading.Lock()

    def add(self, fig: Figure) -> Figure:
        if fig.name in self._figures and self._figures[fig.name] != fig:
            raise ValueError(f"a figure named {fig.name!r} is already in the catalog")
        self._figures[fig.name] = fig
        return fig

    def _all(self) -> dict[str, Figure]:
        # Once, under a lock: the dashboard's sessions run in threads, and none may see a
        # half-filled catalogue. A spec module's `add` does not come back here.
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    from . import specs

                    for mod in pkgutil.iter_modules(specs.__path__):
                        importlib.import_module(f"{specs.__name__}.{mod.name}")
                    self._loaded = True
        return self._figures

    def __getitem__(self, name: str) -> Figure:
        return self._all()[name]

    def __iter__(self):
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


FIGURES = _Registry()
add = FIGURES.add


def aspect_of(name: str | None, width_in: float) -> float | None:
    """The paper aspect of a catalog figure at that width (the dashboard's export uses it too)."""
    f = FIGURES.get(name or "")
    return f.aspect_at(width_in) if f else None


def by_page() -> dict[str, list[Figure]]:
    out: dict[str, list[Figure]] = {}
    for f in FIGURES.values():
        out.setdefault(f.page, []).append(f)
    return out


def view(db, fn, **args):
    """`fn(db, **args)`, a function of `conceptlens.views`; through the dashboard's cache when
    `db` is the dashboard's workspace (it has `view`), as the page's own reads are."""
    return db.view(fn, **args) if hasattr(db, "view") else fn(db, **args)


def usable(db, table: str) -> bool:
    """The workspace has `table`, and (on the dashboard, which checks them) no problem in it."""
    return db.has(table) and not (hasattr(db, "problems") and db.problems((table,)))


def image_source(db, rel: str) -> str:
    """A thumbnail's path (or URL, for a remote workspace) from `db`."""
    if hasattr(db, "path"):  # the dashboard's workspace
        return str(db.path(rel))
    return db.ws.loc(rel) if getattr(db, "remote", False) else str(db.ws.resolve(rel))


@dataclass
class Job:
    figure: Figure
    given: dict = field(default_factory=dict)
    stem: str | None = None
    width: float | None = None
    formats: tuple[str, ...] | None = None
    required: bool = False  # asked for by a spec: failing to draw it is an error


def stem(fig: Figure, params: dict) -> str:
    """The file name (without suffix) of a figure drawn with `params`."""
    text = "-".join([fig.page, fig.name] + [as_text(v) for v in params.values() if v is not None])
    return "".join(c if c.isalnum() or c in "-_.@+=" else "-" for c in text).strip("-.") or "figure"


def _safe(stem: str) -> str:
    if not stem or "/" in stem or "\\" in stem or stem.startswith("."):
        raise ConceptLensError(f"file {stem!r}: a plain file name is expected (no folders)")
    return stem


def render_jobs(
    db,
    jobs: list[Job],
    out: Path,
    workspace: str,
    fingerprint: str,
    width: float,
    formats: tuple[str, ...],
    progress: bool = True,
) -> dict:
    """Draw and write every job's files; returns the manifest (also written as manifest.json)."""
    from tqdm.auto import tqdm

    out.mkdir(parents=True, exist_ok=True)
    manifest = {
        "workspace": str(workspace),
        "fingerprint": fingerprint,
        "files": [],
        "skipped": [],
    }
    used: set[str] = set()
    with renderer():
        for job in tqdm(jobs, desc="figures", unit="figure", disable=not progress):
            fig_spec = job.figure
            try:
                params = fig_spec.resolve(db, job.given)
                fig = fig_spec.build(db, params)
            except Unavailable as e:
                if job.required:
                    raise ConceptLensError(f"figure {fig_spec.name}: {e}") from None
                manifest["skipped"].append({"page": fig_spec.page, "figure": fig_spec.name, "reason": str(e)})
                continue
            name = stem(fig_spec, params) if job.stem is None else _safe(job.stem)
            if name in used:
                raise ConceptLensError(f"two figures would both be written as {name}.*: give one a `file`")
            used.add(name)
            w = job.width or width
            prov = provenance(workspace, fingerprint, fig_spec.url(params), figure=fig_spec.name, **params)
            for fmt in job.formats or formats:
                t0 = time.perf_counter()
                data = figure_bytes(fig, fmt, w, prov, aspect=fig_spec.aspect_at(w), title=fig_spec.title)
                path = out / f"{name}.{fmt}"
                atomic_write_bytes(path, data)
                checked = {"pdf": inspect_pdf(data)} if fmt == "pdf" else {}
                manifest["files"].append(
                    {
                        "path": path.name,
                        "format": fmt,
                        "page": fig_spec.page,
                        "figure": fig_spec.name,
                        "params": params,
                        "width_in": w,
                        "height_in": round(paper_height_in(fig, w, fig_spec.aspect_at(w)), 3),
                        "bytes": len(data),
                        "seconds": round(time.perf_counter() - t0, 3),
                        "provenance": prov,
                        **checked,
                    }
                )
    atomic_write_bytes(out / "manifest.json", (json.dumps(manifest, indent=2, default=str) + "\n").encode())
    return manifest
