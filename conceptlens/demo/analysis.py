"""The `analysis` stage of `conceptlens demo build`: every analysis of the registry."""

from __future__ import annotations

from ..analysis import registry
from ..workspace import Workspace


def build_analysis(ws: Workspace, seed: int, progress: bool = True) -> list[str]:
    return registry.run(ws.root, "all", {"seed": seed}, progress_bars=progress).notes
