"""The `analysis` stage of `conceptlens demo build`: every analysis (`conceptlens.analysis.registered()`)."""

from __future__ import annotations

from ..analysis import runner
from ..workspace import Workspace

# The committed demo's k-means (clustering and held-out CL's) are scikit-learn's, which
# `--kmeans auto` ran below 20,000 images until issue 25 made it faiss at every size: named
# here, the build keeps making the demo that is committed (docs/demo.md).
DEMO_OPTIONS = {"kmeans": "sklearn"}


def build_analysis(ws: Workspace, seed: int, progress: bool = True) -> list[str]:
    return runner.run(ws.root, "all", {"seed": seed, **DEMO_OPTIONS}, progress_bars=progress).notes
