"""The `analysis` stage of `conceptlens demo build`: the cluster analysis of every checkpoint."""
from __future__ import annotations

from ..analysis.clusters import Options, analyze_clusters
from ..workspace import Workspace


def build_analysis(ws: Workspace, seed: int, progress: bool = True) -> list[str]:
    return analyze_clusters(ws.root, opts=Options(seed=seed, progress=progress))
