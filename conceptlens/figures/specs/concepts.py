"""The Concepts page's figures (pages/concepts.py)."""

from __future__ import annotations

from ..catalog import Figure, Param, add
from ._common import needs


def _cq():
    from ...views import concepts

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
    from ..concepts import purity_heatmaps

    return purity_heatmaps(needs(_cq().heatmaps(db, p["ckpt"], p["ds"]), "no purity matrix"))


def _cq_sweep(db, p):
    from ..concepts import impurity_sweep

    family, dependency = _cq_family(db, p)
    return impurity_sweep(needs(_cq().sweep(db, family), "no concept scores"), dependency)


def _cq_niches(db, p):
    from ..concepts import niche_heatmap

    return niche_heatmap(_cq().niche_matrix(db, p["ckpt"], p["ds"], p["beta"]), p["beta"])


def _cq_niche_curves(db, p):
    from ..concepts import niche_curves

    return niche_curves(needs(_cq().niche_curves(db, p["ds"]), "no niche scores"), p["beta"])


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
