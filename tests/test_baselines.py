"""lu2022's baseline predictors against their formulas on tiny sets."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from conceptlens.metrics import baselines as B


def test_alignment_by_hand():
    a = np.array([[1.0, 0.0], [0.0, 2.0]])
    b = np.array([[0.0, 3.0], [0.0, 1.0]])  # first pair orthogonal (dist^2 2), second identical
    assert B.alignment(a, b) == pytest.approx(1.0)
    assert B.alignment(a, b, alpha=1) == pytest.approx(math.sqrt(2) / 2)
    with pytest.raises(ValueError, match="same non-empty shape"):
        B.alignment(a, b[:1])


def test_uniformity_by_hand_and_its_bounds():
    X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    pairs = [np.sum((X[i] - X[j]) ** 2) for i, j in itertools.combinations(range(3), 2)]
    want = math.log(np.mean(np.exp(-2 * np.array(pairs))))
    assert B.uniformity(X * [[3], [1], [0.5]]) == pytest.approx(want)  # scale-free (normalised)
    same = np.ones((5, 3))
    assert B.uniformity(same) == pytest.approx(0.0)  # all collapsed: the maximum, 0
    spread = np.random.default_rng(0).normal(size=(400, 8))
    assert -4.0 <= B.uniformity(spread) < B.uniformity(same)  # >= -t * max dist^2 = -8


def test_rate_reduction_against_a_direct_log_det():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 5))
    part = rng.integers(0, 3, 30)
    Z = X / np.linalg.norm(X, axis=1, keepdims=True)
    n, d, e = 30, 5, 0.5

    def R(M, m):  # the n x n form (MCR2 writes Z as d x m)
        return 0.5 * np.linalg.slogdet(np.eye(len(M)) + d / (m * e) * (M @ M.T))[1]

    want = R(Z, n) - sum((part == c).sum() / n * R(Z[part == c], (part == c).sum()) for c in range(3))
    assert B.rate_reduction(X, part) == pytest.approx(want)
    assert B.coding_rate(X) == pytest.approx(R(Z, n))
    # One part: nothing is reduced.
    assert B.rate_reduction(X, np.zeros(30)) == pytest.approx(0.0, abs=1e-12)


def test_rate_reduction_is_larger_for_a_partition_that_follows_the_structure():
    rng = np.random.default_rng(2)
    centres = np.eye(6)[:3] * 5
    X = np.concatenate([c + rng.normal(size=(40, 6)) * 0.3 for c in centres])
    true = np.repeat([0, 1, 2], 40)
    assert B.rate_reduction(X, true) > B.rate_reduction(X, rng.permutation(true))


def test_rotation_accuracy_reads_the_rotation_from_the_features():
    rng = np.random.default_rng(3)
    rot = np.tile([0, 1, 2, 3], 50)
    feat = np.eye(4)[rot] + rng.normal(size=(200, 4)) * 0.1
    assert B.rotation_accuracy(feat[:100], rot[:100], feat[100:], rot[100:]) == 1.0
    blind = rng.normal(size=(200, 4))  # features that ignore the rotation: chance
    assert B.rotation_accuracy(blind[:100], rot[:100], blind[100:], rot[100:]) < 0.5


def test_linear_probe_accuracy_and_entropy():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 3, 300)
    sharp = np.eye(3)[y] * 4 + rng.normal(size=(300, 3)) * 0.2
    noise = rng.normal(size=(300, 3))
    a = B.linear_probe(sharp[:200], y[:200], sharp[200:], y[200:])
    b = B.linear_probe(noise[:200], y[:200], noise[200:], y[200:])
    assert a["accuracy"] > 0.95 > b["accuracy"]
    # Confident predictions: entropy near 0; blind ones: near log 3.
    assert a["neg_entropy"] > -0.2 and b["neg_entropy"] < -0.9
    assert -math.log(3) - 1e-9 <= b["neg_entropy"] <= 0


def test_uniformity_of_many_points_is_that_of_its_seeded_sample():
    X = np.random.default_rng(5).normal(size=(40, 3))
    rows = np.sort(np.random.default_rng(7).choice(40, 12, replace=False))
    Z = X[rows] / np.linalg.norm(X[rows], axis=1, keepdims=True)
    pairs = [np.sum((Z[i] - Z[j]) ** 2) for i, j in itertools.combinations(range(12), 2)]
    want = math.log(np.mean(np.exp(-2 * np.array(pairs))))
    assert B.uniformity(X, max_points=12, random_state=7) == pytest.approx(want)
    # Another seed draws other rows: the sample, not the whole set, was measured.
    assert B.uniformity(X, max_points=12, random_state=8) != pytest.approx(want)
