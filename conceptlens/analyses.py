"""What a workspace can hold beyond its images, and the command that computes each part.

The home page lists these; a missing one is shown with its exact command. Features and
image captions come from models (`extract`, `caption`); everything after them is an
analysis of `conceptlens.analysis.registered()`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass


@dataclass(frozen=True)
class Analysis:
    name: str
    title: str
    tables: tuple[str, ...]  # present when all of these are
    command: str  # {ws} is the workspace path, {dataset} a dataset name
    page: str | None = None  # dashboard page that shows it
    # Optional SQL returning one row with a true/false column `present` (no parameters).
    present_sql: str | None = None


def _catalogue() -> tuple[Analysis, ...]:
    from .analysis import registered

    return (
        Analysis(
            "features",
            "Checkpoint features",
            ("checkpoints", "features"),
            "conceptlens extract --workspace {ws} --dataset {dataset} --model SPEC",
        ),
        Analysis(
            "image_captions",
            "Image captions from a captioning model",
            ("captions",),
            "conceptlens caption --workspace {ws} --dataset {dataset} --captioner SPEC",
            present_sql="SELECT count(*) > 0 AS present FROM captions WHERE captioner <> 'groundtruth'",
        ),
        *(
            Analysis(a.name, a.title, a.writes, f"conceptlens analyze {a.name} --workspace {{ws}}")
            for a in registered()
        ),
    )


ANALYSES: tuple[Analysis, ...] = _catalogue()


def command_for(analysis: Analysis, workspace: str, dataset: str = "DATASET") -> str:
    return analysis.command.format(ws=shlex.quote(str(workspace)), dataset=shlex.quote(dataset))
