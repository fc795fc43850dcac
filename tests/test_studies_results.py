"""conceptlens/studies/results.py: failed checks, people without answers, and each cluster's own proxy
values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conceptlens.studies import results as R
from conceptlens.studies.design import StudySpec
from conceptlens.workspace import Workspace
from tests import helpers_studies
from tests.study_factory import SPECS, answer_all, create

# Fixtures shared with other test modules, named here so that pytest finds them for this one.
default_store = helpers_studies.default_store
env = helpers_studies.env


# ---- results ---------------------------------------------------------------------------------
def _people(rows):
    return pd.DataFrame(rows, columns=["participant_id", "started", "finished", "last_active"])


def test_every_rule_that_is_set_counts_one_failed_check():
    """With only max_minutes and max_side_bias set, failing both is two failed checks (excluded);
    each alone is one. Worked out by hand from the answers below."""
    spec = StudySpec("coherence", "ck0", 4, max_minutes=10, max_side_bias=0.7)
    assert spec.rules == {"max_minutes": 10, "max_side_bias": 0.7} and SPECS["coherence"].rules == {}
    t0 = "2026-01-01T00:00:00+00:00"
    people = _people(
        [
            ("slowleft", t0, "2026-01-01T00:20:00+00:00", "2026-01-01T00:20:00+00:00"),  # 20 min, all left
            ("slowmix", t0, "2026-01-01T00:20:00+00:00", "2026-01-01T00:20:00+00:00"),  # 20 min, half left
            ("fastleft", t0, "2026-01-01T00:05:00+00:00", "2026-01-01T00:05:00+00:00"),  # 5 min, all left
        ]
    )
    rows = pd.DataFrame(
        [(p, False, 1.0, side) for p, sides in (
            ("slowleft", "LLLL"), ("slowmix", "LRLR"), ("fastleft", "LLLL")) for side in sides],
        columns=["participant_id", "is_catch", "grade", "chosen_side"],
    )  # fmt: skip
    rows["chosen_side"] = rows["chosen_side"].map({"L": "left", "R": "right"})
    out = R.checks(spec, people, rows).set_index("participant_id")
    assert out.loc["slowleft", "minutes"] == 20 and out.loc["slowmix", "left_share"] == 0.5
    assert out["failed_checks"].to_dict() == {"slowleft": 2, "slowmix": 1, "fastleft": 1}
    assert out["excluded"].to_dict() == {"slowleft": True, "slowmix": False, "fastleft": False}
    table = R.checks(spec, people, rows)
    assert R.excluded_by(spec, table) == {"max_minutes": 1, "max_side_bias": 1}


def test_someone_who_answered_nothing_has_zero_answers_not_missing(default_store, factory_template):
    sid, _, _ = create(default_store, factory_template, answers=1)
    busy = default_store.join(sid).participant_id
    idle = default_store.join(sid).participant_id
    answer_all(default_store, sid, busy)
    parts = R.results(default_store, sid).participants.set_index("participant_id")
    row = parts.loc[idle]
    assert (row["answers"], row["catch_answers"], row["catch_failed"]) == (0, 0, 0)
    for c in ("answers", "catch_answers", "catch_failed"):
        assert parts[c].dtype == np.int64, c
    assert parts.loc[busy, "catch_answers"] == SPECS["coherence"].catch


@pytest.mark.parametrize("kind", ["coherence", "describability"])
def test_each_cluster_row_carries_its_own_proxy_values(default_store, factory_copy, kind):
    """study_clusters: every row's proxy and purity are those cluster_metrics has for that cluster
    (describability: no VL 2AFC in the factory, so no proxy, but the purity)."""
    ws = Workspace(factory_copy)
    sid, _, _ = create(default_store, factory_copy, kind, answers=1)
    for _ in range(3):
        answer_all(default_store, sid, default_store.join(sid).participant_id)
    res = R.results(default_store, sid, ws)
    spec = default_store.study(sid).spec
    m = ws.read("cluster_metrics", checkpoint_id="ck0", k=4).to_pandas().set_index("cluster")
    got = res.clusters.set_index("cluster")
    assert len(got) >= 2
    assert got["purity"].to_dict() == m.loc[got.index, "purity"].to_dict()
    if kind == "coherence":
        col = spec.measure
        for c in got.index:
            assert (got.loc[c, "proxy"], got.loc[c, "proxy_lo"], got.loc[c, "proxy_hi"]) == (
                m.loc[c, col], m.loc[c, f"{col}_lo"], m.loc[c, f"{col}_hi"],
            )  # fmt: skip
    else:
        assert got[["proxy", "proxy_lo", "proxy_hi"]].isna().all().all()
