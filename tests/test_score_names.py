"""Score names (conceptlens/metrics/score_names.py): the names the scorers write are the ones
the titles and ranges read, for any factor or concept name; every score a page or figure
lists has a readable title; no two scores share a title."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from conceptlens.figures import scoreboard as FSB
from conceptlens.figures import selection as FS
from conceptlens.metrics import score_names as N
from conceptlens.metrics.scoreboard import niche_scores
from conceptlens.views import scoreboard as VSB

names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)


@given(names)
def test_a_factor_or_concept_name_is_read_back_whole(name):
    p, n = N.purity(name), N.niche(name)
    assert p != n
    if name != N.LABEL and not (name.startswith(N.LEVEL) and name[len(N.LEVEL) :].isdigit()):
        assert N.title(p) == f"purity ({name})"
    assert N.title(n) == N.title(n, short=True) == f"niche ({name})"
    assert N.scale(n) == (-1.0, 1.0) and N.scale(p) == (0.0, 1.0)


@given(st.integers(0, 10_000))
def test_a_hierarchy_level_is_titled_by_its_number(level):
    assert N.title(N.purity(N.level_factor(level))) == f"purity (hierarchy level {level})"


@given(st.lists(names, min_size=1, max_size=6, unique=True))
def test_no_two_scores_share_a_title(concepts):
    scores = set(VSB.MAIN_SCORES) | set(FS.SCORES) | {N.purity(c) for c in concepts}
    scores |= {N.niche(c) for c in concepts} | {N.purity(N.level_factor(i)) for i in range(3)}
    for short in (False, True):
        titles = [N.title(s, short) for s in scores]
        assert len(set(titles)) == len(titles), sorted(titles)


def test_every_listed_score_has_a_readable_title_and_the_figures_use_it():
    for s in set(VSB.MAIN_SCORES) | set(FS.SCORES):
        assert s in N.TITLES or s.startswith((N.PURITY, N.NICHE)), s  # declared, not passed through
        assert FS.score_name(s) == N.title(s) and FSB.score_title(s) == N.title(s, short=True)
    assert N.scale("intrinsic_dim") is None


def test_the_niche_scorer_writes_names_the_titles_read():
    codes = np.array([0, 0, 1, 1, 2, 2, -1, 0])
    out = niche_scores(np.array([[0, 1, 2], [2, 3, 4]]), {"colour": (codes, 3), "level_0": (codes, 3)})
    assert set(out) == {N.niche("colour"), N.niche("level_0")}
    for score, (values, _lo, _hi) in out.items():
        lo_s, hi_s = N.scale(score)
        assert np.all((values >= lo_s) & (values <= hi_s)), (score, values)
