"""The `analysis` stage of `conceptlens demo build`: every analysis (`conceptlens.analysis.registered()`)."""

from __future__ import annotations

from ..analysis import runner
from ..workspace import Workspace

# The committed demo's k-means (clustering and held-out CL's) are scikit-learn's, which
# `--kmeans auto` ran below 20,000 images until issue 25 made it faiss at every size: named
# here, the build keeps making the demo that is committed (docs/demo.md).
# The concept sources (`dictionary`, `scoreboard`, issue 41) run on the real part's
# EfficientNet-Lite0 only: its last layer, one middle layer (blocks.4) and its random-init
# copy, on both real datasets; with 10 atoms per method, a seeded sample of 64 units, 64
# random directions and each atom's 30 largest codes, so that the demo stays under 150 MB
# (the MobileNetV2 rows of docs/demo.md were measured on a copy: `--only '*mobilenet*'`).
SOURCES_OPTIONS = {
    "only": ["*-effnet-lite0", "*-effnet-lite0-d2", "*-effnet-lite0-random"],
    "atoms": 10,
    "units_max": 64,
    "directions": 64,
    "keep_codes": 30,
}
DEMO_OPTIONS = {"kmeans": "sklearn", **SOURCES_OPTIONS}


def build_analysis(ws: Workspace, seed: int, progress: bool = True) -> list[str]:
    return runner.run(ws.root, "all", {"seed": seed, **DEMO_OPTIONS}, progress_bars=progress).notes
