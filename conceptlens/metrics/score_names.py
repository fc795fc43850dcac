"""How a score of a set of images is named, and what its name says: the one home of the
names the scorers write (metrics/selection.py, metrics/scoreboard.py), the titles figures,
tables and pages show, and each score's range.

A score is a fixed name (`learnability`, `coherence_random`, ...), `purity_FACTOR` (purity
against the labels, `purity_label`, a factor column, or level L of the label hierarchy,
`purity_level_L`) or `niche_CONCEPT` (niche membership of a ground-truth concept)."""

from __future__ import annotations

import re

PURITY, NICHE, LEVEL = "purity_", "niche_", "level_"
LABEL = "label"  # the factor of the images' labels

# title, short title (axes at one column) of each fixed score
TITLES = {
    "learnability": ("learnability", "learnability"),
    "coherence_random": ("coherence (random negatives)", "coherence (random neg.)"),
    "coherence_hard": ("coherence (hard negatives)", "coherence (hard neg.)"),
    "describability_top1": ("describability (Top-1)", "describability (Top-1)"),
    "intrinsic_dim": ("intrinsic dimension (TwoNN)", "intrinsic dimension"),
}
_LEVEL = re.compile(re.escape(LEVEL) + r"(\d+)")


def purity(factor: str) -> str:
    """The score of purity against `factor` (`label`, a factor column, `level_factor(L)`)."""
    return PURITY + factor


def level_factor(level: int) -> str:
    """The factor of level `level` of the label hierarchy."""
    return f"{LEVEL}{int(level)}"


def niche(concept: str) -> str:
    """The score of niche membership of the ground-truth concept `concept`."""
    return NICHE + concept


def title(score: str, short: bool = False) -> str:
    """A score's name as figures, tables and pages show it (`short`: on axes)."""
    if score in TITLES:
        return TITLES[score][bool(short)]
    if score.startswith(PURITY):
        factor = score[len(PURITY) :]
        m = _LEVEL.fullmatch(factor)
        if factor == LABEL:
            return "purity (labels)"
        return f"purity (hierarchy level {m.group(1)})" if m else f"purity ({factor})"
    if score.startswith(NICHE):
        return f"niche ({score[len(NICHE) :]})"
    return score


def scale(score: str) -> tuple[float, float] | None:
    """The range a score's values lie in (None: unbounded above, intrinsic dimension); niche
    membership is phi / phi_max, in [-1, 1]; every other score is a share in [0, 1]."""
    if score == "intrinsic_dim":
        return None
    return (-1.0, 1.0) if score.startswith(NICHE) else (0.0, 1.0)
