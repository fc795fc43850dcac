"""What a workspace can hold beyond its images, and how each part gets there: one list of
steps, the pipeline's inputs (declared here: features, captions, imported judgments,
primitives and concepts) followed by every analysis of the registry
(`conceptlens.analysis`, derived from it: name, title, tables written, dependencies).

The Home page lists the steps with the command of each missing one; a page's spec
(components/nav.py) names the steps it shows, and the tables it reads are theirs;
`schema` says which analysis writes a table from the same list.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from .cache import cached


@dataclass(frozen=True)
class Step:
    name: str
    title: str
    tables: tuple[str, ...]  # present when all of these are
    # How it gets into a workspace: {ws} is the workspace path, {dataset} a dataset name.
    # None: no command writes it (your own writer, see `doc`).
    command: str | None
    analysis: bool = False  # an analysis of the registry (else an input of the pipeline)
    depends: tuple[str, ...] = ()  # analyses it runs after (analyses only)
    # Inputs only: the analyses that have nothing to compute without it.
    needed_by: tuple[str, ...] = ()
    # Tables read with it that may be absent (an input's optional parts).
    optional: tuple[str, ...] = ()
    doc: str = ""  # the docs page that says how to add it
    # Optional SQL returning one row with a true/false column `present` (no parameters).
    present_sql: str | None = None

    @property
    def reads(self) -> tuple[str, ...]:
        """Every table of the step a page showing it reads."""
        return self.tables + self.optional


INPUTS: tuple[Step, ...] = (
    Step(
        "features",
        "Checkpoint features",
        ("checkpoints", "features"),
        "conceptlens extract --workspace {ws} --dataset {dataset} --model SPEC",
        needed_by=("clustering", "projections", "concepts"),
        doc="docs/models.md",
    ),
    Step(
        "image_captions",
        "Image captions from a captioning model",
        ("captions",),
        "conceptlens caption --workspace {ws} --dataset {dataset} --captioner SPEC",
        present_sql="SELECT count(*) > 0 AS present FROM captions WHERE captioner <> 'groundtruth'",
        doc="docs/models.md",
    ),
    Step(
        "similarity_trials",
        "Similarity judgments of people",
        ("similarity_trials",),
        "conceptlens import hsj --workspace {ws} SOURCE --dataset {dataset}",
        needed_by=("similarity",),
        doc="docs/similarity.md",
    ),
    Step(
        "primitives",
        "Primitive concepts of the classes and a vision-language model",
        ("vl_models", "primitives", "label_primitives"),
        "conceptlens import cub --workspace {ws} path/to/CUB_200_2011",
        needed_by=("compmap",),
        optional=("image_primitives",),
        doc="docs/compmap.md",
    ),
    Step(
        "concept_labels",
        "Ground-truth concepts of the images",
        ("concept_labels",),
        # FILE: an id column and one column per concept; or --from-hierarchy (docs/import.md).
        "conceptlens import concepts --workspace {ws} --dataset {dataset} FILE",
        needed_by=("concepts",),
        optional=("concept_datasets",),
        doc="docs/concepts.md",
    ),
)


@cached(reads=(), maxsize=1)
def steps() -> tuple[Step, ...]:
    """The inputs, then every registered analysis (built on first use: the analysis modules
    import much, and the registry imports `schema`, which asks this module who writes what).
    A function of no argument: one value for the process, built once."""
    from .analysis import registered  # local: the analyses load on use

    return INPUTS + tuple(
        Step(
            a.name,
            a.title,
            tuple(a.writes),
            f"conceptlens analyze {a.name} --workspace {{ws}}",
            analysis=True,
            depends=tuple(a.depends),
        )
        for a in registered()
    )


def by_name() -> dict[str, Step]:
    return {s.name: s for s in steps()}


def writers(table: str) -> tuple[str, ...]:
    """The analyses that write `table` (none for an input's table)."""
    return tuple(s.name for s in steps() if s.analysis and table in s.tables)


def needs(name: str) -> tuple[Step, ...]:
    """The inputs without which the analysis `name` (or one it runs after) has nothing to compute."""
    seen, todo, out = set(), [name], []
    steps_ = by_name()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        out += [i for i in INPUTS if n in i.needed_by and i not in out]
        todo += steps_[n].depends
    return tuple(out)


def command_for(step: Step, workspace: str, dataset: str = "DATASET") -> str | None:
    if step.command is None:
        return None
    return step.command.format(ws=shlex.quote(str(workspace)), dataset=shlex.quote(dataset))
