"""The `analysis` stage of `conceptlens demo build`: every analysis (`conceptlens.analysis.registered()`)."""

from __future__ import annotations

from ..analysis import runner
from ..workspace import Workspace


def build_analysis(ws: Workspace, seed: int, progress: bool = True) -> list[str]:
    return runner.run(ws.root, "all", {"seed": seed}, progress_bars=progress).notes
