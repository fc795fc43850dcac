"""conceptlens/metrics/compmap.py: few-shot means and activation errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conceptlens.metrics import compmap as CM


# ---- compmap ---------------------------------------------------------------------------------
def test_a_few_shot_mean_leaves_out_the_episodes_without_a_value():
    v = np.array([0.2, np.nan, 0.4, 0.9, np.nan, 0.5, 0.6])
    x = v[~np.isnan(v)]
    half = 1.959963984540054 * x.std(ddof=1) / math.sqrt(len(x))
    assert CM.mean_interval(v, (0, 1)) == pytest.approx((x.mean(), x.mean() - half, x.mean() + half))


def test_activation_errors_list_the_bad_values_sorted():
    z = np.zeros((2, 3))
    with pytest.raises(ValueError, match=r"got \['max', 'none'\]$"):
        CM.activations(z, ["a", "a", "b"], ["none", "raw", "max"])
    with pytest.raises(ValueError, match=r"group 'a' mixes normalize values \['raw', 'softmax'\]$"):
        CM.activations(z, ["a", "a", "b"], ["softmax", "raw", "raw"])
