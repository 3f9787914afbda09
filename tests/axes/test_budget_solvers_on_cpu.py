"""Budget solvers (CoBA-RL, Yao et al., §2.4, Algorithm 1): the fast exact allocators return the paper's heap greedy
bit for bit, ties and degenerate gains included, and reach the dynamic programme's optimal value."""

from __future__ import annotations

import math

import numpy as np
import pytest

from verl_ext.axes.budget_solvers import (
    dp_allocate, geometric_allocate, geometric_gain, heap_allocate, table_allocate,
)
from verl_ext.axes.coba import coba_gains, coba_value
from verl_ext.axes.knapsack import knapsack_gains, knapsack_value


def random_gains(rng, m: int, kind: int) -> tuple[np.ndarray, np.ndarray]:
    """``(log_scale, rate)`` of one of several regimes, most of them full of exact ties."""
    if kind == 0:  # generic
        return rng.normal(size=m), rng.uniform(0, 1, m)
    if kind == 1:  # every task equal
        return np.full(m, 0.3), np.full(m, 0.1)
    if kind == 2:  # zero gains (-inf), flat gains (rate 0), coarse values
        return rng.choice([-np.inf, 0.0, 1.0], m), rng.choice([0.0, 0.5, 1.0], m)
    if kind == 3:  # rounded values: many cross-task ties at different counts
        return np.round(rng.normal(size=m), 1), rng.choice([0.0, 0.1, 0.2], m)
    if kind == 4:  # CoBA's own gains from observed pass rates k/8, p clipped or not
        p = rng.integers(0, 9, m) / 8
        if rng.random() < 0.5:
            p = np.clip(p, 0.01, 0.99)
        alpha = float(rng.uniform(1, 10))
        return coba_gains(p, alpha, 11 - alpha, float(rng.choice([0.5, 7.5, 30.0])))
    return rng.normal(size=m) * 100, rng.choice([5e-324, 1e-300, 1e-17, 1e-3, 1.0], m)  # tiny rates: float ties


def test_fast_allocator_equals_the_heap_on_random_batches():
    rng = np.random.default_rng(0)
    for trial in range(8000):
        m = int(rng.integers(1, 25))
        low = int(rng.integers(1, 4))
        high = low + int(rng.integers(0, 9))
        total = int(rng.integers(m * low, m * high + 1) if rng.random() < 0.8 else rng.choice([m * low, m * high]))
        s, r = random_gains(rng, m, trial % 6)
        heap = heap_allocate(geometric_gain(s.tolist(), r.tolist()), m, low, high, total)
        fast = geometric_allocate(s, r, low, high, total)
        assert fast.dtype == np.int64 and fast.sum() == total
        assert np.array_equal(heap, fast), (trial, m, low, high, total, s, r)


@pytest.mark.parametrize("total", [1024, 1025, 4000, 8192, 30000, 65535, 65536])
def test_fast_allocator_equals_the_heap_at_training_size(total):
    rng = np.random.default_rng(total)
    p = np.clip(rng.binomial(16, rng.beta(0.6, 0.6, 512)) / 16, 0.01, 0.99)  # observed rates: heavy ties
    s, r = coba_gains(p, 9.0, 2.0, 7.5)
    heap = heap_allocate(geometric_gain(s.tolist(), r.tolist()), 512, 2, 128, total)
    assert np.array_equal(geometric_allocate(s, r, 2, 128, total), heap)


def test_tie_rule_is_lower_position_first_and_zero_gains_come_last():
    # equal gains everywhere: round-robin, the extra rollouts to the first positions
    assert geometric_allocate(np.zeros(3), np.full(3, 0.1), 2, 5, 10).tolist() == [4, 3, 3]
    # zero-gain tasks (-inf) get rollouts only once every other task is full, one task after another
    s, r = np.array([-np.inf, 0.0, -np.inf]), np.array([0.0, 1.0, 0.0])
    assert geometric_allocate(s, r, 1, 3, 5).tolist() == [1, 3, 1]
    assert geometric_allocate(s, r, 1, 3, 7).tolist() == [3, 3, 1]
    assert geometric_allocate(s, r, 1, 3, 8).tolist() == [3, 3, 2]
    # bounds reached exactly
    assert geometric_allocate(np.ones(4), np.ones(4), 2, 9, 8).tolist() == [2, 2, 2, 2]
    assert geometric_allocate(np.ones(4), np.ones(4), 2, 9, 36).tolist() == [9, 9, 9, 9]


def test_greedy_reaches_the_dp_optimum_on_coba_values():
    rng = np.random.default_rng(1)
    for _ in range(200):
        m, low = int(rng.integers(1, 7)), int(rng.integers(1, 3))
        high = low + int(rng.integers(0, 7))
        total = int(rng.integers(m * low, m * high + 1))
        p = rng.integers(0, 9, m) / 8
        p = np.clip(p, 0.01, 0.99) if rng.random() < 0.7 else p  # unclipped 0 / 1: zero value and gains
        alpha, tau = float(rng.uniform(1, 10)), float(rng.uniform(0.5, 10))
        values = coba_value(np.arange(low, high + 1)[None, :], p[:, None], alpha, 11 - alpha, tau)
        dp = dp_allocate(values, low, total)
        fast = geometric_allocate(*coba_gains(p, alpha, 11 - alpha, tau), low, high, total)
        assert dp.sum() == total and dp.min() >= low and dp.max() <= high
        assert coba_value(fast, p, alpha, 11 - alpha, tau).sum() == pytest.approx(
            coba_value(dp, p, alpha, 11 - alpha, tau).sum(), rel=1e-12)


def test_coba_log_gains_are_the_value_increments():
    p = np.array([0.01, 0.2, 0.5, 0.9, 0.99])
    s, r = coba_gains(p, 7.3, 3.7, 7.5)
    b = np.arange(2, 128)[None, :]
    increments = coba_value(b + 1, p[:, None], 7.3, 3.7, 7.5) - coba_value(b, p[:, None], 7.3, 3.7, 7.5)
    np.testing.assert_allclose(np.exp(s[:, None] - r[:, None] * b), increments, rtol=1e-7)


def test_knapsack_gains_decrease_so_greedy_is_exact():
    p = np.linspace(0.0, 1.0, 201)
    n = np.arange(0, 130)
    raw = knapsack_value(n[None, :] + 1, p[:, None]) - knapsack_value(n[None, :], p[:, None])
    assert (np.diff(raw, axis=1) <= 1e-15).all()  # ΔV(N) = pq²(p^N q + q^N p): two decaying geometric terms
    np.testing.assert_allclose(knapsack_gains(p, 0, 130), raw, atol=1e-15)
    rng = np.random.default_rng(2)
    for _ in range(200):
        m, low = int(rng.integers(1, 7)), int(rng.integers(1, 3))
        high = low + int(rng.integers(0, 9))
        total = int(rng.integers(m * low, m * high + 1))
        q = rng.integers(0, 9, m) / 8
        gains = knapsack_gains(q, low, high)
        table = table_allocate(gains, low, high, total)
        heap = heap_allocate(lambda i, b: float(gains[i, b - low]), m, low, high, total)
        assert np.array_equal(table, heap)
        dp = dp_allocate(knapsack_value(np.arange(low, high + 1)[None, :], q[:, None]), low, total)
        assert knapsack_value(table, q).sum() == pytest.approx(knapsack_value(dp, q).sum(), rel=1e-12, abs=1e-15)


def test_table_allocator_ties_follow_the_heap():
    gains = np.array([[3.0, 1.0, 1.0], [2.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    for total in range(3, 13):
        heap = heap_allocate(lambda i, b: float(gains[i, b - 1]), 3, 1, 4, total)
        assert np.array_equal(table_allocate(gains, 1, 4, total), heap)
    assert table_allocate(gains, 1, 4, 7).tolist() == [4, 2, 1]  # gains 3, 2, then the 1s of task 0 first
    with pytest.raises(ValueError, match="non-increasing"):
        table_allocate(np.array([[1.0, 2.0]]), 1, 3, 2)


def test_dp_on_hand_computed_cases():
    values = np.array([[0.0, 5.0, 6.0], [0.0, 4.0, 7.5]])  # V(1..3); marginal gains 5, 1 and 4, 3.5
    assert [dp_allocate(values, 1, total).tolist() for total in range(2, 7)] == [
        [1, 1], [2, 1], [2, 2], [2, 3], [3, 3]]  # values 0, 5, 9, 12.5, 13.5
    convex = np.array([[0.0, 5.0, 6.0], [0.0, 1.0, 7.5]])  # task 1's gains increase (1, 6.5): greedy fails
    assert dp_allocate(convex, 1, 4).tolist() == [1, 3]  # 7.5 > 6 of [3, 1] and [2, 2]
    assert heap_allocate(lambda i, b: float(np.diff(convex[i])[b - 1]), 2, 1, 3, 4).tolist() == [3, 1]


@pytest.mark.parametrize("solver", ["heap", "fast", "table", "dp"])
def test_infeasible_budgets_raise(solver):
    def call(total, low=2, high=4, m=3):
        if solver == "heap":
            return heap_allocate(lambda i, b: -b, m, low, high, total)
        if solver == "fast":
            return geometric_allocate(np.zeros(m), np.ones(m), low, high, total)
        if solver == "table":
            return table_allocate(-np.ones((m, max(high - low, 0))), low, high, total)
        return dp_allocate(np.zeros((m, max(high - low + 1, 1))), low, total)

    with pytest.raises(ValueError, match="outside"):
        call(5)
    if solver != "dp":  # dp takes its upper bound from the table
        with pytest.raises(ValueError, match="outside"):
            call(13)
        with pytest.raises(ValueError, match="min_n <= max_n"):
            call(6, low=3, high=2)
    with pytest.raises(ValueError, match="integers"):
        call(7.5)
    assert call(6).tolist() == [2, 2, 2]


def test_bad_gains_are_rejected():
    with pytest.raises(ValueError, match="NaN"):
        geometric_allocate(np.array([np.nan, 0.0]), np.ones(2), 1, 3, 4)
    with pytest.raises(ValueError, match="rate >= 0"):
        geometric_allocate(np.zeros(2), np.array([-1.0, 1.0]), 1, 3, 4)
    with pytest.raises(ValueError, match="log_scale < \\+inf"):
        geometric_allocate(np.array([np.inf, 0.0]), np.ones(2), 1, 3, 4)
    assert math.isinf(coba_gains(np.array([0.0]), 2.0, 9.0, 7.5)[0][0])  # p = 0 unclipped: zero gain


@pytest.mark.parametrize("log_scale, rate, high, total", [  # inputs that looped forever (found by fuzzing)
    ([1e308, -50.0, 50.0, -1e300, -50.0], [1.7e308, 0.0, 1e300, 1e-300, 1.0], 98, 475),
    ([-1e308, -50.0, 1.0, 1e300, 50.0], [1e-320, 1e-300, 0.1, 1e307, 0.1], 36, 178),
    ([0.0, 1.0, -2.0, 3.0], [1e307, 2e307, 0.1, 1e308], 8, 21),  # rate·b overflows to inf: gain -inf
])
def test_extreme_gains_terminate_and_match_the_heap(log_scale, rate, high, total):
    import threading

    low = 2
    out = {}
    worker = threading.Thread(target=lambda: out.update(fast=geometric_allocate(log_scale, rate, low, high, total)),
                              daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "geometric_allocate did not return (the overflow loop)"
    heap = heap_allocate(geometric_gain(log_scale, rate), len(rate), low, high, total)
    assert out["fast"].tolist() == heap.tolist() and out["fast"].sum() == total
