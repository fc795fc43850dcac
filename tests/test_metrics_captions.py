"""conceptlens/metrics/captions.py: ROUGE on sampled comparisons of large clusters."""

from __future__ import annotations

import numpy as np
import pytest


# ---- captions: sampled comparisons on large clusters -----------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rouge_captions_of_clusters_larger_than_the_sample_are_their_own(seed):
    """Clusters larger than `max_compare` are compared on seeded samples of their own
    captions and of the others': the chosen caption is a row of its cluster, and where all
    but one caption of a cluster say the same thing, one of those is chosen. Catches the
    sample drawn from the wrong population (the sample size and the rows swapped)."""
    from conceptlens.metrics.captions import class_captions_rouge

    texts = (
        ["a red bird on a branch"] * 5
        + ["an engine part"]
        + ["a blue car parked outside"] * 4
        + ["a yellow flower"] * 3
    )
    labels = [0] * 6 + [1] * 7
    out = class_captions_rouge(texts, labels, max_compare=3, max_candidates=4, random_state=seed)
    assert set(out) == {0, 1}
    row0, score0 = out[0]
    assert row0 in range(5) and np.isfinite(score0)
    row1, _ = out[1]
    assert labels[row1] == 1


def test_rouge_intra_distance_leaves_the_candidate_itself_out():
    """Eq. 4's intra-cluster term of a candidate is over the *other* captions of its cluster.
    A caption with no words is at distance 1 from everything, itself included (ROUGE-L of
    two empty token lists is 0), so counting it against itself shows: by hand, each of
    the three captions below is at distance 1 from each other one, so every candidate
    scores 2/3 and the first is kept."""
    from conceptlens.metrics.captions import class_captions_rouge

    texts = ["!!!", "...", "a dog", "a cat", "a cat"]
    out = class_captions_rouge(texts, [0, 0, 0, 1, 1], negative=False)
    assert out[0][0] == 0 and out[0][1] == pytest.approx(2 / 3)
