"""A study's exclusion rules (counts per rule on hand-built answers) and its plan (people per
task for a Clopper-Pearson interval of a chosen width, against a direct computation)."""

from __future__ import annotations

import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from conceptlens.studies import plan as P
from conceptlens.studies.design import StudyError, StudySpec
from conceptlens.studies.results import checks, excluded_by

T0 = "2026-01-01T10:00:00.000000+00:00"


def _at(minutes: float) -> str:
    return (pd.Timestamp(T0) + pd.Timedelta(minutes=minutes)).isoformat()


def _people_and_rows():
    """Six people, 2 catch tasks and 4 others each. A fails both catch tasks; B fails one and
    finishes in 1 minute; C only finishes in 1 minute; D answers left every time and takes 40
    minutes; E fails one catch task; F passes everything."""
    people = {
        # id: (catch grades, minutes, sides of the 6 answers)
        "A": ([0.0, 0.0], 10, ["left", "right"] * 3),
        "B": ([0.0, 1.0], 1, ["left", "right"] * 3),
        "C": ([1.0, 1.0], 1, ["left", "right"] * 3),
        "D": ([1.0, 1.0], 40, ["left"] * 6),
        "E": ([1.0, 0.0], 10, ["left", "right"] * 3),
        "F": ([1.0, 1.0], 10, ["right", "left"] * 3),
    }
    parts, rows = [], []
    for pid, (grades, minutes, sides) in people.items():
        parts.append(
            {"participant_id": pid, "started": T0, "last_active": _at(minutes), "finished": _at(minutes)}
        )
        for i, side in enumerate(sides):
            catch = i < 2
            rows.append(
                {
                    "participant_id": pid,
                    "is_catch": catch,
                    "grade": grades[i] if catch else None,
                    "chosen_side": side,
                }
            )
    return pd.DataFrame(parts), pd.DataFrame(rows)


def test_exclusions_count_each_rule_and_need_two_failed_checks():
    spec = StudySpec(
        "coherence", "ck0", 4, min_catch_pass=1.0, min_minutes=2, max_minutes=30, max_side_bias=0.8
    ).check()
    parts, rows = _people_and_rows()
    t = checks(spec, parts, rows).set_index("participant_id")
    assert t["failed_checks"].to_dict() == {"A": 2, "B": 2, "C": 1, "D": 2, "E": 1, "F": 0}
    assert set(t.index[t["excluded"]]) == {"A", "B", "D"}  # one failed check never excludes
    assert excluded_by(spec, t.reset_index()) == {
        "min_catch_pass": 2,
        "min_minutes": 1,
        "max_minutes": 1,
        "max_side_bias": 1,
    }
    assert t.loc["D", "left_share"] == 1.0 and t.loc["F", "left_share"] == 0.5
    assert t.loc["E", "catch_pass"] == 0.5 and t.loc["B", "minutes"] == pytest.approx(1.0)
    # Without rules nobody is excluded, whatever they did.
    none = checks(StudySpec("coherence", "ck0", 4), parts, rows)
    assert not none["excluded"].any()
    # Three failed checks needed: only A (2 catch) and ... nobody else reaches 3.
    strict = StudySpec("coherence", "ck0", 4, min_catch_pass=1.0, min_minutes=2, min_failed_checks=3)
    assert not checks(strict, parts, rows)["excluded"].any()


def _direct_width(k: int, n: int, confidence: float) -> float:
    lo, hi = proportion_confint(k, n, alpha=1 - confidence, method="beta")
    return hi - lo


@pytest.mark.parametrize("p, width, confidence", [(0.8, 0.2, 0.95), (0.95, 0.1, 0.95), (0.6, 0.3, 0.9)])
def test_planned_answers_match_a_direct_clopper_pearson_computation(p, width, confidence):
    n = P.answers_needed(p, width, confidence)
    assert _direct_width(round(n * p), n, confidence) <= width
    assert all(_direct_width(round(m * p), m, confidence) > width for m in range(1, n))


def test_a_plan_gives_people_per_task_and_participants():
    clusters = pd.DataFrame({"cluster": [0, 1, 2], "p": [0.9, 0.7, None]})
    out = P.plan(clusters, tasks=20, width=0.2, per_participant=12, catch=2)
    direct = {0: P.answers_needed(0.9, 0.2), 1: P.answers_needed(0.7, 0.2)}
    assert out.set_index("cluster")["answers"].dropna().astype(int).to_dict() == direct
    a = -(-max(direct.values()) // 20)
    assert out.attrs["people_per_task"] == a
    assert out.attrs["participants"] == -(-2 * 20 * a // 10)
    with pytest.raises(StudyError, match="interval width must be in"):
        P.answers_needed(0.5, 1.5)


def test_psychometric_observers():
    p = P.psychometric([0.0, 0.5, 1.0], threshold=0.5, spread=0.1, lapse=0.02)
    assert (
        p[0] == pytest.approx(0.5, abs=0.01)
        and p[1] == pytest.approx(0.74)
        and p[2] == pytest.approx(0.98, abs=0.01)
    )
    opts = pd.DataFrame({"cluster": [0, 1], "purity": [0.2, 0.9], "coherence_random": [0.6, 0.95]})
    assert list(P.observers(opts, "proxy", "coherence_random")["p"]) == [0.6, 0.95]
    assert list(P.observers(opts, "psychometric", "x")["p"]) == pytest.approx(
        list(P.psychometric([0.2, 0.9]))
    )
