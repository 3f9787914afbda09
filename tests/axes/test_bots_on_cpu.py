"""BOTS selector (BOTS paper §3.2-3.4, Eq. 1-5): equations against a per-task computation, Prop. 3.4 bounds, selection
rules, determinism, state, and errors on reference columns."""

from __future__ import annotations

import io
import itertools
from dataclasses import replace

import numpy as np
import pytest
import torch

from verl_ext.axes import StepResults, TaskPool, build_selector
from verl_ext.axes.bots import BotsSelector, BotsSelectorConfig
from verl_ext.apps.bench.bots import PerTaskBots


def pool_with_references(n: int, seed: int = 0, index_offset: int = 1000) -> TaskPool:
    rng = np.random.default_rng(seed)
    weak = rng.random(n)
    strong = np.clip(weak + 0.4 * rng.random(n), 0, 1)
    return TaskPool(index_offset + np.arange(n)[::-1], {"weak_pass_rate": weak, "strong_pass_rate": strong})


def step_results(pool: TaskPool, positions, rollouts, rng, binary=True) -> StepResults:
    """Random rewards for the tasks at ``positions``, ``rollouts[k]`` rollouts each."""
    task = np.repeat(pool.index[positions], rollouts)
    reward = (rng.random(len(task)) < 0.5).astype(float) if binary else rng.choice([0.0, 0.1, 1.0], len(task))
    return StepResults.from_rewards(task, reward)


def per_task_inputs(pool, results):
    s = results.per_task()
    return pool.positions(s.index).tolist(), (s.mean_reward * s.n).tolist(), s.n.tolist()


CONFIGS = [
    BotsSelectorConfig(),
    BotsSelectorConfig(forgetting=0.3, implicit_weight=0.7, momentum=0.5, pseudo_rollouts=5),
    BotsSelectorConfig(forgetting=0.0, implicit_weight=0.0),
    BotsSelectorConfig(implicit_weight=1.0, posterior_sampling=False),
    BotsSelectorConfig(implicit_weight=0.4, adaptive_implicit_weight=True, adaptive_threshold=0.1,
                       prior_alpha=2.0, prior_beta=0.5),
]


@pytest.mark.parametrize("config", CONFIGS, ids=range(len(CONFIGS)))
@pytest.mark.parametrize("binary", [True, False])
def test_update_matches_per_task_equations(config, binary):
    rng = np.random.default_rng(7)
    pool = pool_with_references(60)
    fast = BotsSelector(config, pool, seed=0)
    slow = PerTaskBots(config, pool.columns["weak_pass_rate"], pool.columns["strong_pass_rate"])
    for step in range(1, 8):
        positions = rng.choice(len(pool), size=12, replace=False)
        rollouts = rng.integers(1, 9, size=12)  # unequal budgets, as an allocator gives
        results = step_results(pool, positions, rollouts, rng, binary)
        fast.update(step, results)
        slow.update(*per_task_inputs(pool, results))
        np.testing.assert_allclose(fast.alpha, slow.alpha, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(fast.beta, slow.beta, rtol=1e-12, atol=1e-12)
        assert fast.implicit_weight == slow.implicit_weight
        if config.implicit_weight > 0:
            assert fast.capability == pytest.approx(slow.capability, rel=1e-12)
    if config.adaptive_implicit_weight:
        assert fast.implicit_weight < config.implicit_weight  # random rewards are far from p̃


def test_posterior_mean_selection_matches_per_task_top_b():
    """Greedy selection = the per-task top-B of -|mean - p*| (exact ties broken at random)."""
    rng = np.random.default_rng(3)
    pool = pool_with_references(200)
    config = BotsSelectorConfig(posterior_sampling=False, target=0.3)
    fast, slow = BotsSelector(config, pool, 0), PerTaskBots(config, pool.columns["weak_pass_rate"],
                                                            pool.columns["strong_pass_rate"])
    for step in range(1, 5):
        results = step_results(pool, rng.choice(200, 40, replace=False), np.full(40, 16), rng)
        fast.update(step, results)
        slow.update(*per_task_inputs(pool, results))
        chosen = pool.positions(fast.select(step + 1, 25))
        top = slow.select(25)
        # the same utilities, best first; tasks that tie (p̃ clipped to 0 or 1) may be swapped
        utility = -np.abs(np.array(slow.alpha) / (np.array(slow.alpha) + np.array(slow.beta)) - 0.3)
        np.testing.assert_allclose(utility[chosen], utility[top], rtol=0, atol=1e-12)
        untied = np.isin(chosen, top) | np.isclose(utility[chosen], utility[top].min(), rtol=0, atol=1e-12)
        assert untied.all()


@pytest.mark.parametrize("rho,lam,m", [(0.1, 0.1, 16), (0.5, 0.2, 8), (1.0, 0.05, 4)])
def test_effective_sample_size_bounds(rho, lam, m):
    """Prop. 3.4: in the limit alpha + beta lies in [2 + ρm/λ, 2 + m/λ] (never / always selected)."""
    rng = np.random.default_rng(0)
    pool = pool_with_references(50)
    sel = BotsSelector(BotsSelectorConfig(forgetting=lam, implicit_weight=rho, pseudo_rollouts=m), pool, 0)
    always, never = np.arange(10), np.arange(40, 50)
    for step in range(1, int(40 / lam)):  # (1 - λ)^steps < 1e-15
        sometimes = rng.choice(np.arange(10, 40), size=rng.integers(1, 30), replace=False)
        sel.update(step, step_results(pool, np.concatenate([always, sometimes]), m, rng))
    ess = sel.alpha + sel.beta
    low, high = 2 + rho * m / lam, 2 + m / lam
    assert np.all(ess >= low - 1e-9) and np.all(ess <= high + 1e-9)
    np.testing.assert_allclose(ess[always], high, rtol=1e-9)
    np.testing.assert_allclose(ess[never], low, rtol=1e-9)


class _Untouchable(dict):
    def __getitem__(self, key):
        raise AssertionError(f"read reference column {key!r}")

    def get(self, key, default=None):
        raise AssertionError(f"read reference column {key!r}")

    def __contains__(self, key):
        raise AssertionError(f"looked up reference column {key!r}")


def test_rho_zero_never_reads_reference_columns():
    columns = _Untouchable(weak_pass_rate=np.full(30, np.nan), strong_pass_rate=np.full(30, np.nan))
    pool = TaskPool(np.arange(30), columns)
    bare = TaskPool(np.arange(30))
    runs = []
    for p in (pool, bare):
        rng = np.random.default_rng(0)
        sel = build_selector({"name": "bots", "implicit_weight": 0.0, "forgetting": 0.0}, p, seed=5)
        picks = []
        for step in range(1, 6):
            picks.append(sel.select(step, 8).tolist())
            sel.update(step, step_results(p, p.positions(np.array(picks[-1])), 4, rng))
        runs.append(picks)
        assert np.isnan(sel.capability)
    assert runs[0] == runs[1]


def test_missing_or_bad_reference_columns_are_clear_errors():
    with pytest.raises(ValueError, match=r"extra_info\.weak_pass_rate.*data_prep\.reference_pass_rates"):
        build_selector({"name": "bots"}, TaskPool(np.arange(5)), 0)
    weak = np.array([0.1, np.nan, 0.3, 0.2])
    pool = TaskPool(np.array([10, 11, 12, 13]), {"weak_pass_rate": weak, "strong_pass_rate": np.full(4, 0.5)})
    with pytest.raises(ValueError, match=r"weak_pass_rate is missing or outside \[0, 1\] for 1 of 4.*index 11 \(row 1\)"):
        build_selector({"name": "bots"}, pool, 0)
    pool = TaskPool(np.arange(2), {"weak_pass_rate": np.array([0.1, 0.2]), "strong_pass_rate": np.array([0.5, 1.5])})
    with pytest.raises(ValueError, match="strong_pass_rate is missing or outside"):
        build_selector({"name": "bots"}, pool, 0)
    build_selector({"name": "bots", "implicit_weight": 0.0}, TaskPool(np.arange(5)), 0)  # not needed
    with pytest.raises(ValueError, match="implicit_weight=1.5"):
        BotsSelectorConfig(implicit_weight=1.5)


@pytest.mark.parametrize("sampling", [True, False])
def test_first_step_is_uniformly_random(sampling):
    """All posteriors equal: every subset of B tasks equally likely (chi-square over seeds)."""
    pool = pool_with_references(6)
    config = BotsSelectorConfig(posterior_sampling=sampling)
    subsets = {s: 0 for s in itertools.combinations(sorted(pool.index.tolist()), 2)}
    draws = 3000
    for seed in range(draws):
        subsets[tuple(sorted(BotsSelector(config, pool, seed).select(1, 2).tolist()))] += 1
    counts = np.array(list(subsets.values()))
    expected = draws / len(counts)
    chi2 = float(np.sum((counts - expected) ** 2 / expected))
    assert chi2 < 36.12, counts  # chi-square, 14 degrees of freedom: P(chi2 > 36.12) = 0.001


def test_selection_is_deterministic_under_a_seed():
    def trajectory(seed):
        rng = np.random.default_rng(1)
        pool = pool_with_references(500)
        sel = BotsSelector(BotsSelectorConfig(), pool, seed)
        out = []
        for step in range(1, 6):
            out.append(sel.select(step, 32).tolist())
            sel.update(step, step_results(pool, pool.positions(np.array(out[-1])), 8, rng))
        return out

    assert trajectory(3) == trajectory(3)
    assert trajectory(3) != trajectory(4)


def test_draws_do_not_depend_on_threading(monkeypatch):
    from verl_ext.axes import bots

    pool = pool_with_references(2000)
    threaded = BotsSelector(BotsSelectorConfig(), pool, 9)
    monkeypatch.setattr(bots, "THREADED_FROM", 1)
    a = threaded.select(1, 100)
    monkeypatch.setattr(bots, "THREADED_FROM", 10**9)
    b = BotsSelector(BotsSelectorConfig(), pool, 9).select(1, 100)
    assert a.tolist() == b.tolist()


@pytest.mark.parametrize("config", [BotsSelectorConfig(adaptive_implicit_weight=True, adaptive_threshold=0.05),
                                    BotsSelectorConfig(posterior_sampling=False), BotsSelectorConfig(temperature=0.1)],
                         ids=["adaptive", "posterior_mean", "softmax"])
def test_state_round_trip_resumes_exactly(config):
    """Save after step 3 (through torch.save, as the trainer does), load into a fresh selector: steps
    4..6 select exactly what the uninterrupted selector selects."""
    pool = pool_with_references(300)

    def run(sel, steps, rng):
        picks = []
        for step in steps:
            picks.append(sel.select(step, 20).tolist())
            sel.update(step, step_results(pool, pool.positions(np.array(picks[-1])), 6, rng))
        return picks

    full = BotsSelector(config, pool, 11)
    rng = np.random.default_rng(2)
    run(full, range(1, 4), rng)
    buffer = io.BytesIO()
    torch.save(full.state_dict(), buffer)
    rng_state = rng.bit_generator.state
    expected = run(full, range(4, 7), rng)

    resumed = BotsSelector(config, pool, seed=999)  # the seed is overwritten by the state
    buffer.seek(0)
    resumed.load_state_dict(torch.load(buffer, weights_only=False))
    rng = np.random.default_rng(2)
    rng.bit_generator.state = rng_state
    assert run(resumed, range(4, 7), rng) == expected
    np.testing.assert_array_equal(resumed.alpha, full.alpha)

    other = pool_with_references(300, index_offset=0)
    with pytest.raises(ValueError, match="task pool differs"):
        BotsSelector(config, other, 0).load_state_dict(full.state_dict())


def test_softmax_temperature_draws_follow_softmax():
    """B = 1 from softmax(u / τ) (Gumbel top-1) on known posterior means."""
    pool = TaskPool(np.arange(4))
    config = BotsSelectorConfig(implicit_weight=0.0, forgetting=0.0, posterior_sampling=False, temperature=0.2)
    sel = BotsSelector(config, pool, 0)
    sel.alpha, sel.beta = np.array([1.0, 5.0, 9.0, 3.0]), np.array([9.0, 5.0, 1.0, 1.0])  # means .1 .5 .9 .75
    utility = -np.abs(sel.alpha / (sel.alpha + sel.beta) - 0.5)
    expected = np.exp(utility / 0.2) / np.exp(utility / 0.2).sum()
    picks = np.array([sel.select(1, 1)[0] for _ in range(20000)])
    freq = np.bincount(picks, minlength=4) / len(picks)
    np.testing.assert_allclose(freq, expected, atol=0.015)
    assert len(set(sel.select(1, 4).tolist())) == 4  # without replacement


def test_thompson_prefers_tasks_near_the_target_and_learns():
    """Tasks whose observed pass rate is near p* are selected more after a few updates."""
    rng = np.random.default_rng(0)
    truth = np.repeat([0.0, 0.5, 1.0], 20)
    pool = TaskPool(np.arange(60))
    sel = BotsSelector(BotsSelectorConfig(implicit_weight=0.0), pool, 0)
    mid = []
    for step in range(1, 30):
        chosen = sel.select(step, 10)
        mid.append(np.mean(truth[chosen] == 0.5))
        reward = (rng.random((10, 16)) < truth[chosen][:, None]).astype(float).ravel()
        sel.update(step, StepResults.from_rewards(np.repeat(chosen, 16), reward))
    assert np.mean(mid[-10:]) > 0.75  # chance: 1/3


def test_rewards_outside_unit_interval_are_rejected():
    pool = TaskPool(np.arange(3))
    sel = BotsSelector(BotsSelectorConfig(implicit_weight=0.0), pool, 0)
    with pytest.raises(ValueError, match=r"rewards outside \[0, 1\]"):
        sel.update(1, StepResults.from_rewards(np.array([0, 0]), np.array([1.0, -1.0])))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_reward_is_rejected_before_any_posterior_changes(bad):
    pool = pool_with_references(6)
    sel = BotsSelector(BotsSelectorConfig(implicit_weight=0.1), pool, 0)
    before = (sel.alpha.copy(), sel.beta.copy())
    with pytest.raises(ValueError, match=r"step 3 has rewards outside \[0, 1\] or not finite.*tasks \[4\]"):
        sel.update(3, StepResults.from_rewards(np.array([2, 2, 4]), np.array([1.0, 0.0, bad])))
    assert np.array_equal(sel.alpha, before[0]) and np.array_equal(sel.beta, before[1])


def test_an_update_without_rollouts_is_rejected():
    sel = BotsSelector(BotsSelectorConfig(implicit_weight=0.1), pool_with_references(6), 0)
    with pytest.raises(ValueError, match="step 2 update has no rollouts"):
        sel.update(2, StepResults.from_rewards(np.array([], dtype=np.int64), np.array([])))
    assert np.all(np.isfinite(sel.alpha)) and np.all(np.isfinite(sel.beta))


def test_metrics_are_scalars():
    rng = np.random.default_rng(0)
    pool = pool_with_references(40)
    sel = BotsSelector(BotsSelectorConfig(), pool, 0)
    chosen = sel.select(1, 8)
    sel.update(1, step_results(pool, pool.positions(chosen), 4, rng))
    m = sel.metrics()
    assert set(m) >= {"capability", "implicit_weight", "implicit_error", "selected_estimate_mean",
                      "effective_sample_size_mean"}
    assert all(np.isfinite(v) for v in m.values())


def test_presets_compose_to_the_spec_settings():
    from pathlib import Path

    from hydra import compose, initialize_config_dir

    import verl_ext

    with initialize_config_dir(str(Path(verl_ext.__file__).parent / "config"), version_base=None):
        def selector(preset):
            return compose("verl_ext_trainer", overrides=[f"selector={preset}"]).selector

        mopps, dots, bots = selector("bots_mopps"), selector("bots_dots"), selector("bots")
        random_, offline = selector("random"), selector("offline")
    assert (mopps.name, mopps.implicit_weight, mopps.forgetting, mopps.posterior_sampling) == ("bots", 0.0, 0.0, True)
    assert (dots.name, dots.implicit_weight, dots.forgetting, dots.posterior_sampling) == ("bots", 1.0, 0.1, False)
    assert dict(bots) | {"name": "bots"} == {f: getattr(BotsSelectorConfig(), f) for f in dict(bots)}
    assert random_.name == "uniform"
    assert (offline.name, list(offline.sort_by), offline.descending) == (
        "sequential", ["weak_pass_rate", "strong_pass_rate"], True)
    pool = pool_with_references(10)
    for cfg in (mopps, dots, bots, random_, offline):
        assert len(set(build_selector(cfg, pool, 0).select(1, 4).tolist())) == 4
    # offline: easy first (weak descending, strong breaking ties)
    order = build_selector(offline, pool, 0).select(1, 10)
    weak = pool.columns["weak_pass_rate"][pool.positions(order)]
    assert np.all(np.diff(weak) <= 0)
    assert replace(BotsSelectorConfig(), implicit_weight=0.0).uses_reference is False
