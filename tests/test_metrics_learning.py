"""conceptlens/metrics/learning.py: neighbours without a scored value cast no vote."""

from __future__ import annotations

import numpy as np
import pytest

from conceptlens.metrics import learning as L


# ---- learning: neighbours without a scored value do not vote ---------------------------------
def test_neighbours_whose_value_is_not_scored_cast_no_vote():
    """A training image without the factor's value (None) or with a value outside `classes`
    is a neighbour that must not vote: the shares are those of a loop over the scored
    neighbours only."""
    sims = np.array([[0.9, 0.8, 0.7, 0.6], [0.95, 0.5, 0.4, 0.3], [0.2, 0.1, 0.0, -0.1]])
    nb = np.array([["a", None, "b", "z"], [None, "b", "b", "a"], [None, "z", None, "z"]], dtype=object)
    classes = np.array(["a", "b"], dtype=object)
    shares = L.shares_from_neighbours(sims, nb, classes, temperature=0.1)
    ref = np.zeros((3, 2))
    for r in range(3):
        for s, lab in zip(sims[r], nb[r]):
            if lab in ("a", "b"):
                ref[r, ["a", "b"].index(lab)] += np.exp(s / 0.1)
        if ref[r].sum():
            ref[r] /= ref[r].sum()
    assert shares == pytest.approx(ref, abs=1e-12)
    assert shares[2].tolist() == [0.0, 0.0]  # no scored neighbour: no vote at all
