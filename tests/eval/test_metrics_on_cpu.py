"""eval.metrics against hand-computed cases: exact combinatorics for pass@k, the BOTS paper's TTB / BSF
examples (App. B.4), bootstrap determinism and coverage, bin edges, Countdown format diagnostics and
the training-log readers on a synthetic run directory."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest

from verl_ext.rewards import countdown

from eval.metrics import (
    expected_uniform_rates,
    PASS_RATE_BINS,
    aggregate_curves,
    all_success_rate,
    best_so_far,
    countdown_format_diagnostics,
    degenerate_group_rate,
    degenerate_rate_over_steps,
    degenerate_rate_summary,
    effective_task_ratio,
    etr_over_steps,
    mean_and_std_over_runs,
    mean_at_k,
    mean_se,
    paired_bootstrap_ci,
    paired_wins_losses_ties,
    pass_at_k,
    pass_rate_bin,
    task_pass_rates,
    time_to_baseline,
    transition_matrix,
    zero_success_rate,
)


# --------------------------------------------------------------------------- pass@k and friends
def brute_force_pass_at_k(n: int, c: int, k: int) -> Fraction:
    """Fraction of the k-subsets of n samples (the first c correct) holding a correct one."""
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(any(i < c for i in s) for s in subsets), len(subsets))


def test_pass_at_k_equals_brute_force_and_exact_binomials_for_small_n():
    for n in range(1, 9):
        for k in range(1, n + 1):
            c = np.arange(n + 1)
            got = pass_at_k(n, c, k)
            exact = [1 - Fraction(math.comb(n - ci, k), math.comb(n, k)) for ci in range(n + 1)]
            np.testing.assert_allclose(got, [float(x) for x in exact], rtol=1e-14, atol=0)
            if n <= 6:
                assert [brute_force_pass_at_k(n, ci, k) for ci in range(n + 1)] == exact


def test_pass_at_k_is_accurate_at_n_1024():
    c = np.array([0, 1, 2, 3, 10, 100, 500, 1000, 1008, 1009, 1023, 1024])
    for k in (1, 4, 8, 16, 64, 512, 1024):
        exact = np.array([float(1 - Fraction(math.comb(1024 - ci, k), math.comb(1024, k))) for ci in c])
        np.testing.assert_allclose(pass_at_k(1024, c, k), exact, rtol=1e-14, atol=0)
    assert pass_at_k(1024, 0, 16) == 0.0 and pass_at_k(1024, 1009, 16) == 1.0


def test_pass_at_k_broadcasts_and_validates():
    assert pass_at_k([16, 16, 4], [1, 0, 4], 1).tolist() == [1 / 16, 0.0, 1.0]
    assert pass_at_k(np.full((2, 3), 8), np.zeros((2, 3), dtype=int), 4).shape == (2, 3)
    np.testing.assert_allclose(pass_at_k(16, 1, 16), 1.0)
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k([16, 8], [1, 1], 16)
    with pytest.raises(ValueError, match=r"\[0, n\]"):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 0)


def test_mean_at_k_and_repeated_runs():
    assert mean_at_k(np.array([[1.0, 0.0], [1.0, 1.0]])) == 0.75
    assert mean_at_k([[1, 0, 0, 0], [1]]) == 0.625  # ragged: per-problem means first
    mean, std = mean_and_std_over_runs([0.2, 0.4, 0.3])
    assert mean == pytest.approx(0.3) and std == pytest.approx(0.1)
    mean, std = mean_and_std_over_runs([[0.2, 1.0], [0.4, 1.0]])  # runs × benchmarks
    np.testing.assert_allclose(mean, [0.3, 1.0])
    np.testing.assert_allclose(std, [math.sqrt(0.02), 0.0])
    assert np.isnan(mean_and_std_over_runs([0.5])[1])


def test_zero_and_all_success_rates():
    assert zero_success_rate([0, 3, 4, 0]) == 0.5
    assert all_success_rate(4, [0, 3, 4, 0]) == 0.25
    assert all_success_rate([4, 3, 4, 2], [0, 3, 4, 0]) == 0.5


# --------------------------------------------------------------------------- TTB / BSF
# BOTS App. B.4: the baseline starts at 0.2 and reaches its best 0.6 at step 100; the 50% target 0.4
# is reached by the baseline at step 40 and by the method at step 30 → TTB(50%) = 0.75.
STEPS = [0, 20, 40, 60, 80, 100]
BASELINE = [0.2, 0.3, 0.4, 0.5, 0.55, 0.6]
METHOD = [0.2, 0.3, 0.5, 0.6, 0.6, 0.65]  # crosses 0.4 between steps 20 and 40: 20 + 20·(0.1/0.2) = 30


def test_ttb_paper_example_with_interpolation():
    assert time_to_baseline(STEPS, METHOD, STEPS, BASELINE, 0.5) == pytest.approx(30 / 40)
    assert time_to_baseline(STEPS, METHOD, STEPS, BASELINE, 0.75) == pytest.approx(40 / 60)  # 0.5 at 40 vs 60
    assert time_to_baseline(STEPS, METHOD, STEPS, BASELINE, 1.0) == pytest.approx(60 / 100)
    # interpolated on both sides: P60 = 0.44, the baseline at 40 + 20·0.04/0.1 = 48, the method at 34
    assert time_to_baseline(STEPS, METHOD, STEPS, BASELINE, 0.6) == pytest.approx((20 + 20 * 0.14 / 0.2) / 48)
    for q in (0.5, 0.75, 1.0):
        assert time_to_baseline(STEPS, BASELINE, STEPS, BASELINE, q) == pytest.approx(1.0)


def test_ttb_never_reached_window_and_edge_cases():
    flat = [0.2] * 6
    assert np.isnan(time_to_baseline(STEPS, flat, STEPS, BASELINE, 0.5))  # rendered "−"
    assert np.isnan(time_to_baseline(STEPS, METHOD, STEPS, flat, 0.5))  # P* = P0: undefined
    # a method already at the target at its first evaluation reaches it there (step 0): TTB = 0
    assert time_to_baseline(STEPS, [0.7] * 6, STEPS, BASELINE, 1.0) == 0.0
    # crossings after the window do not count; the window also bounds the baseline's P* (0.5 at 60)
    assert np.isnan(time_to_baseline(STEPS, [0.2, 0.2, 0.2, 0.2, 0.2, 0.7], STEPS, BASELINE, 0.5, window=80))
    assert time_to_baseline(STEPS, METHOD, STEPS, BASELINE, 1.0, window=60) == pytest.approx(40 / 60)
    # different evaluation steps per curve, given unsorted
    assert time_to_baseline([50, 0, 25], [0.6, 0.2, 0.3], STEPS, BASELINE, 0.5) == pytest.approx(
        (25 + 25 * 0.1 / 0.3) / 40)
    # P0 + 1·(P* − P0) rounds above P* here: the baseline must still reach its own best
    assert 0.03 + 1.0 * (0.29 - 0.03) > 0.29
    assert time_to_baseline([0, 10], [0.03, 0.29], [0, 10], [0.03, 0.29], 1.0) == 1.0
    with pytest.raises(ValueError):
        time_to_baseline(STEPS, METHOD, STEPS, BASELINE, 0.0)
    with pytest.raises(ValueError, match="same step"):
        time_to_baseline([0, 0], [0.1, 0.2], STEPS, BASELINE, 0.5)


def test_bsf_paper_example():
    # App. B.4: T = 100, b = 50%: the baseline's best by step 50 is 0.4, the method's 0.6 → 1.5
    method = [0.25, 0.35, 0.6, 0.5, 0.55, 0.58]
    assert best_so_far(STEPS, method, STEPS, BASELINE, 0.5) == pytest.approx(1.5)
    assert best_so_far(STEPS, METHOD, STEPS, BASELINE, 0.25) == pytest.approx(0.3 / 0.3)
    assert best_so_far(STEPS, METHOD, STEPS, BASELINE, 1.0) == pytest.approx(0.65 / 0.6)
    assert best_so_far(STEPS, BASELINE, STEPS, BASELINE, 0.5) == 1.0
    assert best_so_far(STEPS, method, STEPS, BASELINE, 1.0, window=50) == pytest.approx(1.5)
    assert np.isnan(best_so_far([30, 60], [0.5, 0.6], STEPS, BASELINE, 0.25))  # no method point by step 25


def test_aggregate_curves_uses_common_steps():
    steps, mean = aggregate_curves({"math500": {0: 0.4, 10: 0.5, 20: 0.6}, "aime24": {20: 0.2, 0: 0.0}})
    assert steps.tolist() == [0, 20] and mean.tolist() == pytest.approx([0.2, 0.4])
    with pytest.raises(ValueError, match="share no"):
        aggregate_curves({"a": {0: 0.1}, "b": {10: 0.2}})


# --------------------------------------------------------------------------- training logs
def test_etr_and_degenerate_groups():
    assert effective_task_ratio([0.0, 0.5, 1.0, 0.25]) == 0.5
    # success is reward >= 1: a 0.1 format score is a failure
    np.testing.assert_allclose(task_pass_rates([7, 3, 7, 3, 7], [1.0, 0.1, 0.0, 1.0, 1.0]), [0.5, 2 / 3])
    assert degenerate_group_rate([5, 5, 1, 1, 9, 9, 9], [1, 1, 0, 1, 0.1, 0.1, 0.1]) == pytest.approx(2 / 3)
    summary = mean_se([0.2, 0.4, 0.3])
    assert summary.mean == pytest.approx(0.3) and summary.se == pytest.approx(0.1 / math.sqrt(3)) and summary.n == 3


def test_expected_uniform_rates_by_hand():
    # 2 rollouts a task, Beta(1 + s, 1 + 4 - s) after s of 4 reference successes: P(none) = b(b + 1) / 42,
    # P(both) = a(a + 1) / 42 (a + b = 6); s = 0, 2, 4, 1 -> 32, 24, 32, 26 of 42 degenerate
    etr, degenerate = expected_uniform_rates([0, 2, 4, 1], samples=4, rollouts=2)
    assert degenerate == pytest.approx(114 / 168) and etr == pytest.approx(54 / 168)
    assert expected_uniform_rates([1], samples=2, rollouts=1) == (0.0, 1.0)  # one rollout: always degenerate
    for bad in ([5], [-1], [float("nan")]):
        with pytest.raises(ValueError, match="successes must lie in"):
            expected_uniform_rates(bad, samples=4, rollouts=2)


def test_run_dir_readers(tmp_path):
    (tmp_path / "metrics").mkdir()
    (tmp_path / "data_selection").mkdir()
    logged = {"data_selection/effective_task_ratio": 0.7, "data_selection/degenerate_group_rate": 0.25}
    (tmp_path / "metrics" / "from_step_000000.1.jsonl").write_text(json.dumps({"step": 1, "data": logged}) + "\n")
    dump = {"tasks": [3, 4], "counts": [2, 2], "rollout_task": [3, 3, 4, 4], "rollout_group": [0, 0, 1, 1],
            "rollout_reward": [1.0, 0.0, 0.1, 0.1]}
    for step in (1, 2):  # step 1 is logged (the log wins), step 2 only dumped (recomputed)
        (tmp_path / "data_selection" / f"step_{step:06d}.json").write_text(json.dumps(dump))
    steps, etr = etr_over_steps(tmp_path)
    assert steps.tolist() == [1, 2] and etr.tolist() == [0.7, 0.5]
    steps, rate = degenerate_rate_over_steps(tmp_path)
    assert steps.tolist() == [1, 2] and rate.tolist() == [0.25, 0.5]
    summary = degenerate_rate_summary(tmp_path)
    assert summary.mean == pytest.approx(0.375) and summary.se == pytest.approx(0.125) and summary.n == 2


# --------------------------------------------------------------------------- paired comparisons
def test_paired_bootstrap_ci_hand_case_and_identical_inputs():
    # two prompts with differences 0 and 1: resampled means 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4
    ci = paired_bootstrap_ci([1.0, 1.0], [1.0, 0.0])
    assert (ci.diff, ci.low, ci.high) == (0.5, 0.0, 1.0)
    ci = paired_bootstrap_ci([1.0, 1.0], [1.0, 0.0], alpha=0.6)
    assert (ci.low, ci.high) == (0.5, 0.5)
    a = np.random.default_rng(1).random(50)
    assert tuple(paired_bootstrap_ci(a, a)) == (0.0, 0.0, 0.0)


def test_paired_bootstrap_ci_coverage_and_determinism():
    rng = np.random.default_rng(0)
    b = rng.random(400)
    a = b + 0.1 + rng.normal(0, 0.2, 400)  # true difference 0.1, s.e. of the mean 0.01
    ci = paired_bootstrap_ci(a, b)
    assert ci.low < 0.1 < ci.high and ci.low < ci.diff < ci.high
    assert ci.high - ci.low == pytest.approx(2 * 1.96 * np.std(a - b) / 20, rel=0.1)
    assert paired_bootstrap_ci(a, b) == ci
    assert paired_bootstrap_ci(a, b, seed=1) != ci
    # several metrics share the resamples; a metric with no difference gets [0, 0]
    multi = paired_bootstrap_ci(np.stack([a, b], 1), np.stack([b, b], 1), resamples=2000)
    assert multi.diff.shape == multi.low.shape == (2,)
    assert multi.low[0] < 0.1 < multi.high[0] and multi.low[1] == multi.high[1] == 0.0


def test_paired_wins_losses_ties():
    assert paired_wins_losses_ties([1.0, 0.5, 0.3, 0.1 + 0.2], [0.0, 0.5, 0.4, 0.3]) == (1, 1, 2)


# --------------------------------------------------------------------------- transitions
def test_pass_rate_bins_at_the_edges():
    p = [0.0, 1e-9, 0.2, 1 / 5, 3 / 15, 0.2 + 1e-12, 0.8 - 1e-12, 0.8, 4 / 5, 1 - 1e-12, 1.0]
    assert pass_rate_bin(p).tolist() == [0, 1, 1, 1, 1, 2, 2, 3, 3, 3, 4]
    assert len(PASS_RATE_BINS) == 5
    with pytest.raises(ValueError):
        pass_rate_bin([1.1])
    with pytest.raises(ValueError):
        pass_rate_bin([np.nan])


def test_transition_matrix():
    initial = [0.0, 0.0, 0.2, 0.8, 1.0, 0.5]
    final = [0.0, 0.5, 0.8, 1.0, 0.2, 0.5]
    fractions, counts = transition_matrix(initial, final)
    expected = np.zeros((5, 5), dtype=int)
    for i, j in [(0, 0), (0, 2), (1, 3), (3, 4), (4, 1), (2, 2)]:
        expected[i, j] += 1
    assert counts.tolist() == expected.tolist()
    np.testing.assert_allclose(fractions[0], [0.5, 0, 0.5, 0, 0])
    np.testing.assert_allclose(fractions[[1, 2, 3, 4]].sum(axis=1), 1.0)
    assert np.isnan(transition_matrix([0.0], [1.0])[0][1:]).all()  # empty rows


# --------------------------------------------------------------------------- Countdown
def test_countdown_format_diagnostics():
    gt = {"target": 9, "numbers": [1, 2, 3]}
    responses = [
        "<think>ok</think><answer>(1 + 2) * 3</answer>",
        "I give up",
        "<answer>1</answer> then <answer>(1 + 2) * 3</answer>",
        "<think>a</think><think>b</think><answer>1 + 2 + 3</answer>",
        "<answer>(1 + 2) ^ 3</answer>",
    ]
    samples = [{**countdown.score(r, gt), "too_long": long} for r, long in zip(responses, [False, True, False, False, False])]
    diag = countdown_format_diagnostics(samples)
    assert diag == pytest.approx({"missing_answer": 0.2, "multiple_answers": 0.2, "multiple_think": 0.2,
                                  "too_long": 0.2, "parse_failure": 0.2})
    samples[1]["too_long"] = None  # unknown: left out of that rate only
    assert countdown_format_diagnostics(samples)["too_long"] == 0.0
    with pytest.raises(ValueError):
        countdown_format_diagnostics([])
