"""The Studies page's figure (pages/studies.py): people's 2AFC accuracy per cluster beside the
proxy annotator's. The page draws it from the answers store as it is now (the owner's view);
this entry draws it from what `conceptlens study export` wrote into the workspace, with the
same function (`figures.studies.human_vs_proxy`), so an exported study's figure is
reproduced by `conceptlens figures` without the answers store."""

from __future__ import annotations

from ...views import studies as V
from ..catalog import Figure, Param, add, view
from .common import col


def _studies(db, p) -> list:
    return col(view(db, V.exported_2afc), "study_id")


def _human_vs_proxy(db, p):
    from ..studies import human_vs_proxy

    studies = view(db, V.exported_2afc).set_index("study_id")["measure"]
    clusters = view(db, V.exported_clusters, study=p["study"])
    return human_vs_proxy(clusters, studies[p["study"]])


add(
    Figure(
        "studies",
        "human_vs_proxy",
        "People's 2AFC accuracy and the proxy annotator's, per cluster (laina2020 Tables 1-2)",
        (Param("study", _studies, help="exported 2AFC study"),),
        _human_vs_proxy,
        aspect=0.55,
        reads=("study_summary", "study_clusters"),
    )
)
