"""conceptlens/metrics/bootstrap.py: every resample block is used (not the first one again), in the
order drawn, against a direct loop over the same seeded resamples."""

from __future__ import annotations

import numpy as np
import pytest

from conceptlens.metrics import bootstrap as B
from conceptlens.metrics.intrinsic import twonn_fit
from conceptlens.metrics.scores import purity


# ---- values computed another way ----------------------------------------------------------------
def direct(n: int, n_boot: int, rng) -> list[np.ndarray]:
    """The resamples of the definition: one `rng.integers(0, n, n)` per resample."""
    return [rng.integers(0, n, n) for _ in range(n_boot)]


def q(stats, est):
    lo, hi = np.quantile(stats, [0.025, 0.975])
    return min(lo, est), max(hi, est)


# ---- bootstrap: every resample block is used, not the first one again ------------------------
@pytest.fixture
def small_blocks(monkeypatch):
    """`resamples` cut into blocks of 3 resamples each (at the real MAX_CELLS, a test needs
    millions of index cells for a second block): the stream is the same, so every interval
    must be too; one that reuses a block for the next ones is not."""
    real = B.resamples

    def few_rows(n, n_boot, rng, max_cells=B.MAX_CELLS):
        return real(n, n_boot, rng, max_cells=3 * n)

    monkeypatch.setattr(B, "resamples", few_rows)


def test_a_ratio_interval_over_many_blocks_is_the_direct_loop(small_blocks):
    rng0 = np.random.default_rng(11)
    den = rng0.integers(1, 5, 60)
    num = rng0.binomial(den, 0.5)
    lo, hi = B.ratio_interval(num, den, 200, B.rng_for(2, "cl"))
    est = num.sum() / den.sum()
    ref = q([num[i].sum() / den[i].sum() for i in direct(60, 200, B.rng_for(2, "cl"))], est)
    assert (lo, hi) == pytest.approx(ref, abs=1e-12)
    # the spread of a ratio of 60 images: a few standard errors wide, not a point
    assert hi - lo > 0.1


def test_purity_statistics_over_many_blocks_are_one_per_resample(small_blocks):
    y = np.random.default_rng(12).choice([0, 2, 5], size=50, p=[0.6, 0.3, 0.1])
    stats = B.purity_stats(y, 6, 100, B.rng_for(1, "purity"))
    ref = [purity(y[i], 6)[0] for i in direct(50, 100, B.rng_for(1, "purity"))]
    assert stats == pytest.approx(ref, abs=1e-12)
    assert len(set(np.round(stats, 12))) > 10  # resamples differ, so do their purities


def test_twonn_statistics_over_many_blocks_are_one_per_resample(small_blocks):
    mu = 1 + np.random.default_rng(13).pareto(3.0, 120)  # a TwoNN ratio of dimension 3
    stats = B.twonn_stats(mu, 60, B.rng_for(0, "id"))
    srt = np.sort(mu)
    ref = [twonn_fit(srt[i]) for i in direct(120, 60, B.rng_for(0, "id"))]
    assert stats == pytest.approx(ref, rel=1e-10)
    assert np.std(stats) > 0.05


def test_purity_statistics_at_the_real_block_size_are_n_boot_distinct_resamples():
    """Two real blocks (n = 2,049 labels: 2,047 resamples a block): n_boot statistics, the
    second block's its own."""
    y = np.random.default_rng(14).choice([0, 1, 2, 3], size=2049)
    stats = B.purity_stats(y, 4, 2060, B.rng_for(3, "purity"))
    assert len(stats) == 2060
    tail = [purity(y[i], 4)[0] for i in direct(2049, 2060, B.rng_for(3, "purity"))[-13:]]
    assert stats[-13:] == pytest.approx(tail, abs=1e-12)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_blocks_fitted_on_threads_come_back_in_the_order_drawn(threads):
    """bootstrap.in_order: a block that finishes first is not put first, and the blocks
    are drawn lazily (never more than `threads` held at once)."""
    import time

    held, drawn = [], []

    def blocks():
        for b in range(7):
            drawn.append(b)
            held.append(len(drawn) - len(done))
            yield b

    done = []

    def f(b):
        time.sleep(0.03 if b % 2 == 0 else 0.0)  # even blocks finish after the odd ones
        done.append(b)
        return b * 10

    assert B.in_order(f, blocks(), threads=threads) == [0, 10, 20, 30, 40, 50, 60]
    assert max(held) <= threads + 1


@pytest.mark.parametrize("fit_cells", [1, 7 * 50, 1 << 30])
def test_statistics_computed_by_runs_of_rows_are_those_of_whole_blocks(monkeypatch, fit_cells):
    """bootstrap.by_rows_of: the statistics of resamples fitted a run of rows at a time
    (one row, several, the whole block) are the same numbers, and as many."""
    rng = np.random.default_rng(21)
    mu = 1 + rng.pareto(3.0, 50)
    flags = (rng.random(50) < 0.7).astype(float)
    den = rng.integers(1, 4, 50).astype(float)

    def run():
        return (
            B.twonn_stats(mu, 33, B.rng_for(2, "id")),
            B.mean_stats(flags, 33, B.rng_for(2, "knn_acc")),
            B.ratio_interval(flags * den, den, 33, B.rng_for(2, "cl")),
        )

    monkeypatch.setattr(B, "FIT_CELLS", 1 << 30)
    whole = run()
    monkeypatch.setattr(B, "FIT_CELLS", fit_cells)
    got = run()
    assert len(got[0]) == len(got[1]) == 33
    np.testing.assert_array_equal(got[0], whole[0])
    np.testing.assert_array_equal(got[1], whole[1])
    assert got[2] == whole[2]
