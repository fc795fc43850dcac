"""Every figure of the dashboard's pages by name, with its parameters, so a script (the
`conceptlens figures` command, the static report) draws what a page draws.

An entry names its page, its parameters (their names are the page's URL parameters, so
`/clusters?ds=shapes&k=5` and a spec's `ds = "shapes"`, `k = 5` mean the same view) and
a `build(db, p)` that calls the same views and figure functions as the page. A
parameter's default is what the page shows first: the first of its options, or a value.
A new page adds its figures with `add(Figure(...))` (docs/architecture.md).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import plotly.graph_objects as go

from .. import views
from ..errors import ConceptLensError
from ..workspace import atomic_write_bytes
from .checkpoints import SANKEY_ASPECT
from .export import (
    DEFAULT_ASPECT,
    FORMATS,
    figure_bytes,
    inspect_pdf,
    paper_height_in,
    parse_width,
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

    def parse(self, raw):
        try:
            if self.kind is bool:
                return raw if isinstance(raw, bool) else str(raw).lower() in ("1", "true", "yes")
            return self.kind(raw)
        except (TypeError, ValueError):
            raise ConceptLensError(f"parameter {self.name}: {raw!r} is not a {self.kind.__name__}") from None

    def resolve(self, db, before: dict, given: dict):
        opts = list(self.options(db, before)) if self.options else None
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
    tables: tuple[str, ...] = ()  # without them the figure is unavailable
    default: bool = True  # among the page's default figures

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
        missing = [t for t in self.tables if not db.has(t)]
        if missing:
            raise Unavailable(f"table {', '.join(missing)} missing")
        out: dict = {}
        for p in self.params:
            out[p.name] = p.resolve(db, out, given)
        return out

    def url(self, params: dict) -> str:
        return f"/{self.page}?" + urlencode({k: v for k, v in params.items() if v is not None})


FIGURES: dict[str, Figure] = {}


def add(fig: Figure) -> Figure:
    if fig.name in FIGURES and FIGURES[fig.name] != fig:
        raise ValueError(f"a figure named {fig.name!r} is already in the catalog")
    FIGURES[fig.name] = fig
    return fig


def aspect_of(name: str | None, width_in: float) -> float | None:
    """The paper aspect of a catalog figure at that width (the dashboard's export uses it too)."""
    f = FIGURES.get(name or "")
    return f.aspect_at(width_in) if f else None


def by_page() -> dict[str, list[Figure]]:
    out: dict[str, list[Figure]] = {}
    for f in FIGURES.values():
        out.setdefault(f.page, []).append(f)
    return out


# ---- parameters the pages share -----------------------------------------------------------------
def _col(df, col: str) -> list:
    return [] if df is None or df.empty else list(df[col])


C = views.clusters
K = views.checkpoints
DS_CLUSTERED = Param("ds", lambda db, p: _col(C.datasets(db), "dataset"), help="dataset")
CKPT = Param("ckpt", lambda db, p: _col(C.checkpoints(db, p["ds"]), "checkpoint_id"), help="checkpoint")
K_OF_CKPT = Param("k", lambda db, p: [int(k) for k in _col(C.ks(db, p["ckpt"]), "k")], kind=int, help="k")
K_OF_DS = Param("k", lambda db, p: [int(k) for k in _col(K.ks(db, p["ds"]), "k")], kind=int, help="k")


def _order(db, p) -> list:
    return _col(K.summary(db, p["ds"], p["k"], clid=False), "checkpoint_id")


def _needs(df, what: str):
    if df is None or len(df) == 0:
        raise Unavailable(what)
    return df


# ---- Clusters --------------------------------------------------------------------------------------
def _cluster_table(db, p):
    return C.cluster_table(db, p["ds"], p["ckpt"], p["k"], captions=db.has("cluster_captions"))


def _umap(db, p):
    from .clusters import projection_scatter

    pts = _needs(C.projection(db, p["ckpt"], p["k"], "umap", limit=20_000), f"no UMAP of {p['ckpt']}")
    return projection_scatter(pts, color=p["color"])


def _umap_density(db, p):
    from ..views import projection_window as W
    from .projection import projection_density

    whole, _ = W.whole_viewport(db, p["ckpt"], "umap")
    if whole is None:
        raise Unavailable(f"no UMAP of {p['ckpt']}")
    bins = W.binned(db, p["ckpt"], p["k"], whole, "umap", W.BINS)
    return projection_density(bins, whole, W.BINS, value=p["density"])


def _cluster_labels(db, p):
    from .clusters import label_histogram

    images = C.selection_images(db, p["ckpt"], p["k"], (p["cluster"],))
    return label_histogram(C.label_counts(images))


def _purity_coherence(db, p):
    from .clusters import purity_coherence

    return purity_coherence(_cluster_table(db, p))


CLUSTERS = (DS_CLUSTERED, CKPT, K_OF_CKPT)
add(
    Figure(
        "clusters",
        "purity_coherence",
        "Purity vs coherence (laina2020 Fig. 2)",
        CLUSTERS,
        _purity_coherence,
        aspect=0.75,
        tables=("cluster_metrics",),
    )
)
add(
    Figure(
        "clusters",
        "umap",
        "UMAP of the features",
        CLUSTERS
        + (Param("color", lambda db, p: _col(C.colour_options(db, p["ds"]), "column"), help="colour by"),),
        _umap,
        aspect=0.85,
        tables=("cluster_metrics", "projections"),
    )
)
# The page's overview of a UMAP too large to draw point by point (not among the defaults:
# below the page's limit the page draws the points, figure `umap`).
add(
    Figure(
        "clusters",
        "umap_density",
        "UMAP of the features, binned",
        CLUSTERS + (Param("density", lambda db, p: ["images", "purity"], help="bins coloured by"),),
        _umap_density,
        aspect=0.85,
        tables=("cluster_metrics", "projections"),
        default=False,
    )
)
add(
    Figure(
        "clusters",
        "selection_labels",
        "Labels of one cluster's images",
        CLUSTERS
        + (
            Param(
                "cluster",
                lambda db, p: [int(c) for c in _col(_cluster_table(db, p), "cluster")],
                kind=int,
                help="cluster",
            ),
        ),
        _cluster_labels,
        aspect=0.75,
        tables=("cluster_metrics", "clusters"),
    )
)


# ---- Checkpoints ----------------------------------------------------------------------------------
def _compared(db) -> bool:
    return all(db.has(t) for t in getattr(K, "COMPARISON_TABLES", ("clid_scores",)))


def _cl_id(db, p):
    from .checkpoints import cl_id_scatter, default_labels, short_names

    summary = _needs(K.summary(db, p["ds"], p["k"], clid=_compared(db)), "no checkpoint metrics")
    short = dict(zip(summary["checkpoint_id"], short_names(summary["checkpoint_id"])))
    return cl_id_scatter(summary, labels={c: short[c] for c in default_labels(summary)})


def _correlations(db, p):
    from .checkpoints import correlation_forest

    return correlation_forest(_needs(K.predictor_correlations(db, p["ds"], p["k"]), "no correlations"))


def _transfer(db, p):
    from .checkpoints import correlation_forest

    corr = _needs(K.transfer_correlations(db, p["ds"], p["k"], p["target"]), "no transfer correlations")
    return correlation_forest(corr, target=f"transfer acc. ({p['target']})")


def _metric_options(db, p) -> list:
    curves = K.training(db, p["ds"], p["k"], clid=_compared(db))
    return [str(m) for m in dict.fromkeys(curves["metric"].astype(str))] if len(curves) else []


def _epochs(db, p):
    from .checkpoints import metrics_vs_epoch

    return metrics_vs_epoch(K.training(db, p["ds"], p["k"], clid=_compared(db)), p["metric"])


def _anmi(db, p):
    from .checkpoints import anmi_heatmap

    if len(_order(db, p)) < 2:
        raise Unavailable("fewer than two clustered checkpoints")
    return anmi_heatmap(K.anmi_matrix(db, p["ds"], p["k"]))


def _sankey(db, p):
    from .checkpoints import cluster_sankey

    if p["a"] == p["b"]:
        raise ConceptLensError("parameters a and b: choose two different checkpoints")
    if p["top"] < 0:
        raise ConceptLensError(f"parameter top: {p['top']} is negative (0 draws all of A's clusters)")
    pair = dict(dataset=p["ds"], k=p["k"], a=p["a"], b=p["b"], min_share=p["min_share"])
    links = K.cluster_links(db, **pair, flows=p["flows"], largest=p["top"] or None)
    captions = db.has("cluster_captions")
    meta_a = C.cluster_table(db, p["ds"], p["a"], p["k"], captions=captions)
    meta_b = C.cluster_table(db, p["ds"], p["b"], p["k"], captions=captions)
    headers = (f"A: {p['a']}", f"B: {p['b']}")
    return cluster_sankey(links, meta_a, meta_b, name_a="A", name_b="B", headers=headers)


CHECKPOINTS = (DS_CLUSTERED, K_OF_DS)
PAIR = (Param("a", _order, help="checkpoint A"), Param("b", _order, default_index=1, help="checkpoint B"))
add(
    Figure(
        "checkpoints",
        "cl_id",
        "CL vs ID (lu2022 Fig. 1)",
        CHECKPOINTS,
        _cl_id,
        aspect=0.75,
        tables=("checkpoint_metrics",),
    )
)
add(
    Figure(
        "checkpoints",
        "predictor_correlations",
        "Correlation with kNN accuracy (lu2022 Table 1)",
        CHECKPOINTS,
        _correlations,
        aspect=0.6,
        tables=("predictor_correlations",),
    )
)
add(
    Figure(
        "checkpoints",
        "transfer_correlations",
        "Correlation with transfer accuracy (lu2022 section 3.5)",
        CHECKPOINTS
        + (Param("target", lambda db, p: K.transfer_targets(db, p["ds"]), help="target dataset"),),
        _transfer,
        aspect=0.6,
        tables=("transfer_correlations",),
    )
)
add(
    Figure(
        "checkpoints",
        "metrics_vs_epoch",
        "A metric over training",
        CHECKPOINTS + (Param("metric", _metric_options, help="metric"),),
        _epochs,
        aspect=0.62,
        tables=("checkpoint_metrics",),
    )
)
add(
    Figure(
        "checkpoints",
        "anmi_matrix",
        "aNMI between clusterings",
        CHECKPOINTS,
        _anmi,
        aspect=0.9,
        tables=("clustering_similarity",),
    )
)
add(
    Figure(
        "checkpoints",
        "cluster_sankey",
        "Cluster matching A -> B",
        CHECKPOINTS
        + PAIR
        + (
            Param("min_share", default=0.2, kind=float, help="significant share"),
            Param("flows", lambda db, p: list(K.FLOWS), help="which flows"),
            Param("top", default=10, kind=int, help="A's largest clusters drawn (0: all)"),
        ),
        _sankey,
        aspect=SANKEY_ASPECT,
        tables=("clusters",),
    )
)


# ---- CompMap ---------------------------------------------------------------------------------------
def _cm():
    from ..views import compmap

    return compmap


CM_DS = Param("ds", lambda db, p: _col(_cm().datasets(db), "dataset"), help="dataset")
CM_VL = Param("vl", lambda db, p: _col(_cm().vl_models(db, p["ds"]), "vl_model"), help="VL model")
CM_SETTING = Param("setting", lambda db, p: _col(_cm().settings(db, p["vl"]), "setting"), help="setting")
CM_MODEL = Param("model", lambda db, p: list(_cm().LEARNED), help="prim or oracle")
CM_SORT = Param("sort", lambda db, p: list(_cm().SORTS), help="class order")
CM_CLASS = Param(
    "cls", lambda db, p: [int(c) for c in _col(_cm().classes(db, p["ds"], p["vl"]), "label")], kind=int
)


def _cm_accuracy(db, p):
    from .compmap import accuracy_by_setting

    return accuracy_by_setting(_cm().scores(db, p["vl"], metric="accuracy"))


def _cm_delta(db, p):
    from .compmap import delta_by_model

    labels = _cm().settings(db, p["vl"]).set_index("setting")["setting_label"]
    return delta_by_model(_cm().delta(db, p["ds"], p["setting"]), labels.get(p["setting"], p["setting"]))


def _cm_weights(db, p):
    from .compmap import weights_heatmap

    w = _cm().weights(db, p["ds"], p["vl"], model=p["model"], sort=p["sort"])
    return weights_heatmap(w, f"{_cm().LEARNED[p['model']]} weights (full shot)")


def _cm_class(db, p):
    from .compmap import top_weights_bar

    cw = _cm().class_weights(db, p["ds"], p["vl"], p["model"], p["cls"])
    names = _cm().classes(db, p["ds"], p["vl"]).set_index("label")["label_name"]
    return top_weights_bar(cw, n=max(15, 2 * int(cw["gt"].sum())), title=f"{names[p['cls']]}: top weights")


CM = ("compmap_scores", "vl_models")
add(
    Figure(
        "compmap",
        "accuracy_by_setting",
        "Accuracy and interventions",
        (CM_DS, CM_VL),
        _cm_accuracy,
        aspect=0.62,
        tables=CM,
    )
)
add(
    Figure(
        "compmap",
        "delta",
        "Delta per VL model",
        (CM_DS, CM_VL, CM_SETTING),
        _cm_delta,
        aspect=0.62,
        tables=CM,
    )
)
add(
    Figure(
        "compmap",
        "weights_heatmap",
        "Composition weights",
        (CM_DS, CM_VL, CM_MODEL, CM_SORT),
        _cm_weights,
        aspect=0.9,
        tables=CM + ("compmap_weights",),
    )
)
add(
    Figure(
        "compmap",
        "top_weights",
        "One class's top weights",
        (CM_DS, CM_VL, CM_MODEL, CM_CLASS),
        _cm_class,
        aspect=0.75,
        tables=CM + ("compmap_weights",),
    )
)


# ---- Similarity ------------------------------------------------------------------------------------
def _sim():
    from ..views import similarity

    return similarity


def _embedded(db, p) -> list:
    d = _sim().datasets(db)
    return list(d.loc[d["embedded"].astype(bool), "dataset"]) if len(d) else []


THUMBS = {"none": 0, "some": 8, "many": 14}  # as the page: grid cells per side with a thumbnail
SIM_DS = Param("ds", _embedded, help="dataset with a psychological embedding")


def image_source(db, rel: str) -> str:
    """A thumbnail's path (or URL, for a remote workspace) from the workspace's `db`."""
    return db.ws.loc(rel) if getattr(db, "remote", False) else str(db.ws.resolve(rel))


def _sim_map(db, p):
    from .similarity import embedding_map, thumbnail_sample, thumbnail_uris

    points = _needs(_sim().embedding_points(db, p["ds"], limit=20_000), "no embedding map")
    shown = set(thumbnail_sample(points, THUMBS[p["thumbs"]]))
    uris = thumbnail_uris(
        {i: image_source(db, t) for i, t in zip(points["image_id"], points["thumbnail"]) if i in shown}
    )
    return embedding_map(points, p["color"], uris)


def _sim_agreement(db, p):
    from .similarity import agreement_bars

    alignment = _needs(_sim().alignment(db, p["ds"]), "no checkpoint scored")
    ref = _sim().people_reference(db, p["ds"])
    reference = float(ref["value"].iloc[0]) if len(ref) and ref["value"].notna().all() else None
    return agreement_bars(alignment, p["dist"], reference)


def _sim_labels(db, p):
    from .similarity import label_heatmap

    return label_heatmap(_sim().by_label(db, p["ds"], p["metric"], p["dist"]), p["metric"], p["dist"])


def _sim_fit(db, p):
    from .similarity import fit_diagnostics

    return fit_diagnostics(_needs(_sim().fit(db, p["ds"]), "no fit"))


def _sim_convergence(db, p):
    from .similarity import convergence_curves

    return convergence_curves(_needs(_sim().convergence(db, p["ds"]), "no convergence rounds"))


def _dist_names():
    from .similarity import DISTANCE_NAMES

    return list(DISTANCE_NAMES)


def _metric_names():
    from .similarity import METRICS

    return list(METRICS)


SIM_DIST = Param("dist", lambda db, p: _dist_names(), default="cosine", help="l1, l2 or cosine")
SIM = ("psych_embedding",)
add(
    Figure(
        "similarity",
        "psych_umap",
        "People's similarity map",
        (
            SIM_DS,
            Param(
                "color", lambda db, p: _col(_sim().colour_options(db, p["ds"]), "column"), help="colour by"
            ),
            Param("thumbs", lambda db, p: list(THUMBS), default_index=1, help="thumbnails"),
        ),
        _sim_map,
        aspect=0.85,
        tables=SIM + ("projections",),
    )
)
add(
    Figure(
        "similarity",
        "agreement",
        "Agreement with people",
        (SIM_DS, SIM_DIST),
        _sim_agreement,
        aspect=0.62,
        tables=SIM + ("human_alignment",),
    )
)
add(
    Figure(
        "similarity",
        "by_label",
        "Agreement per label",
        (SIM_DS, Param("metric", lambda db, p: _metric_names(), help="triplet_accuracy or rsa"), SIM_DIST),
        _sim_labels,
        aspect=0.9,
        tables=SIM + ("human_alignment",),
    )
)
add(
    Figure(
        "similarity",
        "fit",
        "Fit diagnostics",
        (SIM_DS,),
        _sim_fit,
        aspect=0.62,
        tables=SIM + ("similarity_fit",),
    )
)
add(
    Figure(
        "similarity",
        "convergence",
        "Convergence of the embedding",
        (SIM_DS,),
        _sim_convergence,
        aspect=0.62,
        tables=("similarity_convergence",),
    )
)


# ---- Concepts ------------------------------------------------------------------------------------------
def _cq():
    from ..views import concepts

    return concepts


def _cq_datasets(db, p) -> list:
    sets = _cq().datasets(db)
    return list(sets.loc[sets["analysed"], "dataset"]) if len(sets) else []


def _cq_checkpoints(db, p) -> list:
    ck = _cq().checkpoints(db, p["ds"])
    return list(ck.loc[ck["analysed"], "checkpoint_id"]) if len(ck) else []


def _cq_family(db, p) -> tuple[str, str]:
    sets = _cq().datasets(db)
    row = sets[sets["dataset"] == p["ds"]]
    return (
        (str(row["family"].iloc[0]), str(row["dependency"].iloc[0] or "level"))
        if len(row)
        else (p["ds"], "level")
    )


def _cq_purity(db, p):
    from .concepts import purity_heatmaps

    return purity_heatmaps(_needs(_cq().heatmaps(db, p["ckpt"], p["ds"]), "no purity matrix"))


def _cq_sweep(db, p):
    from .concepts import impurity_sweep

    family, dependency = _cq_family(db, p)
    return impurity_sweep(_needs(_cq().sweep(db, family), "no concept scores"), dependency)


def _cq_niches(db, p):
    from .concepts import niche_heatmap

    return niche_heatmap(_cq().niche_matrix(db, p["ckpt"], p["ds"], p["beta"]), p["beta"])


def _cq_niche_curves(db, p):
    from .concepts import niche_curves

    return niche_curves(_needs(_cq().niche_curves(db, p["ds"]), "no niche scores"), p["beta"])


CQ_DS = Param("ds", _cq_datasets, help="dataset with concepts")
CQ_CKPT = Param("ckpt", _cq_checkpoints, help="checkpoint")
CQ_BETA = Param("beta", default=0.2, kind=float, help="niche threshold beta")
add(
    Figure(
        "concepts",
        "purity_heatmaps",
        "Purity matrices: learnt, oracle, difference",
        (CQ_DS, CQ_CKPT),
        _cq_purity,
        aspect=0.45,
        narrow_aspect=0.8,
        tables=("purity_matrices", "oracle_purity"),
    )
)
add(
    Figure(
        "concepts",
        "impurity_sweep",
        "Oracle and non-oracle impurity against dependency",
        (CQ_DS,),
        _cq_sweep,
        aspect=0.5,
        tables=("concept_scores",),
    )
)
add(
    Figure(
        "concepts",
        "niche_heatmap",
        "Concept niches",
        (CQ_DS, CQ_CKPT, CQ_BETA),
        _cq_niches,
        aspect=0.8,
        narrow_aspect=1.2,
        tables=("concept_niches",),
    )
)
add(
    Figure(
        "concepts",
        "niche_curves",
        "Niche purity, impurity and size against beta",
        (CQ_DS, CQ_BETA),
        _cq_niche_curves,
        aspect=0.5,
        tables=("niche_scores",),
    )
)


# ---- rendering many -----------------------------------------------------------------------------------
@dataclass
class Job:
    figure: Figure
    given: dict = field(default_factory=dict)
    stem: str | None = None
    width: float | None = None
    formats: tuple[str, ...] | None = None
    required: bool = False  # asked for by a spec: failing to draw it is an error


def _stem(fig: Figure, params: dict) -> str:
    text = "-".join([fig.page, fig.name] + [str(v) for v in params.values()])
    return "".join(c if c.isalnum() or c in "-_.@+=" else "-" for c in text).strip("-.") or "figure"


def _safe(stem: str) -> str:
    if not stem or "/" in stem or "\\" in stem or stem.startswith("."):
        raise ConceptLensError(f"file {stem!r}: a plain file name is expected (no folders)")
    return stem


def load_spec(path: str | os.PathLike) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
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
            stem = _stem(fig_spec, params) if job.stem is None else _safe(job.stem)
            if stem in used:
                raise ConceptLensError(f"two figures would both be written as {stem}.*: give one a `file`")
            used.add(stem)
            w = job.width or width
            prov = provenance(workspace, fingerprint, fig_spec.url(params), figure=fig_spec.name, **params)
            for fmt in job.formats or formats:
                t0 = time.perf_counter()
                data = figure_bytes(fig, fmt, w, prov, aspect=fig_spec.aspect_at(w), title=fig_spec.title)
                path = out / f"{stem}.{fmt}"
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
