"""The BOTS bench (verl_ext/apps/bench/bots.py): its vectorised reference, a step as the authors' code does it, chooses
tasks of the same utilities (ties in either order) and keeps the same posteriors as the selector; the report gives both
ratios and the step share."""

import math

import numpy as np
import pytest

from verl_ext.axes.bots import BotsSelector, BotsSelectorConfig
from verl_ext.axes.views import StepResults, TaskPool
from verl_ext.apps.bench import bots as bench

N, B, M = 3000, 64, 16


def _pair(config: BotsSelectorConfig):
    weak, strong, truth = bench._pool(N, seed=0)
    pool = TaskPool(np.arange(N), {"weak_pass_rate": weak, "strong_pass_rate": strong})
    return BotsSelector(config, pool, 0), bench.VectorisedBots(config, weak, strong, 0), truth


def _update(fast, ref, step, tasks, wins):
    reward = (np.arange(M)[None, :] < wins[:, None]).astype(np.float64).ravel()
    fast.update(step, StepResults.from_rewards(np.repeat(tasks, M), reward))
    ref.update(tasks, wins / M, M)


def _same_posteriors(fast, ref):
    np.testing.assert_allclose(ref.alpha, fast.alpha, rtol=1e-12)
    np.testing.assert_allclose(ref.beta, fast.beta, rtol=1e-12)
    assert ref.capability == pytest.approx(fast.capability, rel=1e-12)


def test_reference_chooses_the_selectors_tasks_on_the_posterior_mean():
    fast, ref, truth = _pair(BotsSelectorConfig(posterior_sampling=False))
    rng = np.random.default_rng(1)
    tasks = rng.choice(N, B, replace=False)  # at Beta(1, 1) every task ties: one random batch first
    for step in range(8):
        _update(fast, ref, step, tasks, rng.binomial(M, truth[tasks]).astype(np.float64))
        tasks = fast.select(step + 1, B)
        # the same utilities in the same order (best first); tasks that tie (e.g. two at p = 0.5) may come in either
        # order: the selector breaks ties at random, the reference as numpy's argpartition does on this CPU
        distance = np.abs(ref.estimates() - ref.config.target)
        np.testing.assert_allclose(distance[ref.select(B)], distance[tasks], rtol=0, atol=1e-12)
    _same_posteriors(fast, ref)


def test_reference_keeps_the_selectors_posteriors_under_thompson_sampling():
    fast, ref, truth = _pair(BotsSelectorConfig())
    rng = np.random.default_rng(2)
    for step in range(8):
        tasks = fast.select(step, B)
        assert len(np.unique(ref.select(B))) == B  # its own draws: B distinct tasks
        _update(fast, ref, step, tasks, rng.binomial(M, truth[tasks]).astype(np.float64))
    _same_posteriors(fast, ref)


def test_report_gives_both_ratios_and_the_step_share():
    rows = bench.run(sizes=(2000,), batch_size=32, repeats=7, per_task_repeats=5)  # sub-ms steps: medians of several
    [r] = rows
    for key in ("vectorised_ms", "reference_ms", "per_task_ms", "reference_over_vectorised",
                "reference_over_vectorised_per_core", "per_task_over_vectorised", "share_of_reference_step"):
        assert math.isfinite(r[key]) and r[key] > 0, key
    assert r["threads"] == 1 and r["per_task_over_vectorised"] > 1
    assert r["share_of_reference_step"] == pytest.approx(r["vectorised_ms"] / 1e3 / 155.0)
    table = bench.report(rows)
    assert "reference / selector (per core)" in table and "per-task / selector" in table and "% of step" in table
    assert f"| {r['reference_over_vectorised']:.1f}x ({r['reference_over_vectorised_per_core']:.1f}x) |" in table
