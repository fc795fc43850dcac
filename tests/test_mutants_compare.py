"""What mutation testing found untested in the comparison helpers (tools/mutate.py,
conceptlens/metrics/compare.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from conceptlens.metrics.compare import cluster_changes, purity_bins


def test_a_split_and_merge_link_counts_as_both():
    links = pd.DataFrame(
        {"a": [3, 5, 6], "b": [4, 7, 8], "kind": ["split+merge", "one-to-one", "one-to-one"], "n": [9, 4, 4]}
    )
    assert cluster_changes(links) == {"splits": 1, "merges": 1, "one_to_one": 2}


def test_purity_bins_name_every_missing_column():
    with pytest.raises(ValueError, match=r"metrics lacks column\(s\) coherence_hard, describability_binary$"):
        purity_bins(pd.DataFrame({"purity": [0.5]}), values=("coherence_hard", "describability_binary"))
