"""The Concepts page's figures (pages/concepts.py): its URL keys `family`, `level` (the
dataset of that family at that dependency level), `method`, `seed` (the checkpoint) and
`beta` (the niche threshold, one of the values the analysis computed)."""

from __future__ import annotations

from ...views import concepts as V
from ..catalog import Figure, Param, add, view
from .common import needs


def _analysed(db):
    sets = view(db, V.datasets)
    return sets[sets["analysed"]] if len(sets) else sets


def _of_family(db, p):
    sets = _analysed(db)
    return sets[sets["family"] == p["family"]]


def _ds(db, p) -> str:
    rows = _of_family(db, p)
    return str(rows.loc[rows["level"].astype(float) == p["level"], "dataset"].iloc[0])


def _dependency(db, p) -> str:
    rows = _of_family(db, p)
    return str(rows["dependency"].iloc[0] or "level") if len(rows) else "level"


def _checkpoints(db, p):
    ck = view(db, V.checkpoints, dataset=_ds(db, p))
    return ck[ck["analysed"]] if len(ck) else ck


def _ckpt(db, p) -> str:
    ck = _checkpoints(db, p)
    if "method" in p:
        ck = ck[(ck["method"] == p["method"]) & (ck["seed"] == p["seed"])]
    return str(ck["checkpoint_id"].iloc[0])


def _betas(db, p) -> list[float]:
    return [float(b) for b in view(db, V.betas, checkpoint=_ckpt(db, p))["beta"]]


def _default_beta(db, p) -> float:
    """The computed beta nearest the analysis' own (the page's first view)."""
    betas = _betas(db, p)
    scores = view(db, V.checkpoint_scores, checkpoint=_ckpt(db, p)).set_index("score")
    return min(betas, key=lambda b: abs(b - scores.loc["ois", "beta"])) if betas else 0.2


def _purity(db, p):
    from ..concepts import purity_heatmaps

    heat = view(db, V.heatmaps, checkpoint=_ckpt(db, p), dataset=_ds(db, p))
    return purity_heatmaps(needs(heat, "no purity matrix"))


def _sweep(db, p):
    from ..concepts import impurity_sweep

    return impurity_sweep(
        needs(view(db, V.sweep, family=p["family"]), "no concept scores"), _dependency(db, p)
    )


def _niches(db, p):
    from ..concepts import niche_heatmap

    return niche_heatmap(
        view(db, V.niche_matrix, checkpoint=_ckpt(db, p), dataset=_ds(db, p), beta=p["beta"]), p["beta"]
    )


def _niche_curves(db, p):
    from ..concepts import niche_curves

    return niche_curves(needs(view(db, V.niche_curves, dataset=_ds(db, p)), "no niche scores"), p["beta"])


FAMILY = Param("family", lambda db, p: list(dict.fromkeys(_analysed(db)["family"])), help="dataset family")
LEVEL = Param(
    "level", lambda db, p: [float(v) for v in _of_family(db, p)["level"]], kind=float, help="dependency level"
)
METHOD = Param("method", lambda db, p: list(dict.fromkeys(_checkpoints(db, p)["method"])), help="method")
SEED = Param(
    "seed",
    lambda db, p: [str(s) for s in _checkpoints(db, p).query("method == @p['method']")["seed"]],
    help="the method's run (or checkpoint id)",
)
BETA = Param("beta", default=_default_beta, kind=float, help="niche threshold beta")
add(
    Figure(
        "concepts",
        "purity_heatmaps",
        "Purity matrices: learnt, oracle, difference",
        (FAMILY, LEVEL, METHOD, SEED),
        _purity,
        aspect=0.45,
        narrow_aspect=0.8,
        steps=("concept_labels", "concepts"),
    )
)
add(
    Figure(
        "concepts",
        "impurity_sweep",
        "Oracle and non-oracle impurity against dependency",
        (FAMILY,),
        _sweep,
        aspect=0.5,
        steps=("concept_labels", "concepts"),
    )
)
add(
    Figure(
        "concepts",
        "niche_heatmap",
        "Concept niches",
        (FAMILY, LEVEL, METHOD, SEED, BETA),
        _niches,
        aspect=0.8,
        narrow_aspect=1.2,
        steps=("concept_labels", "concepts"),
    )
)
add(
    Figure(
        "concepts",
        "niche_curves",
        "Niche purity, impurity and size against beta",
        (FAMILY, LEVEL, BETA),
        _niche_curves,
        aspect=0.5,
        steps=("concept_labels", "concepts"),
    )
)
