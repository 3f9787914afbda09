"""What every registered selector, allocator and rollout filter owes the trainer: its ``state_dict()`` is a snapshot
(later steps of the component, or of another one that loaded it, leave it unchanged: a checkpoint kept in memory must
not drift with training, e.g. Adam's moments), and a NaN / inf reward is refused with an error naming the step."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch

from verl_ext.axes import REGISTRY, RolloutView, StepResults, TaskPool, build_allocator, build_filter, build_selector
from verl_ext.axes.views import rollout_ids
from verl_ext.apps.sim.world import World, WorldConfig

BATCH, ROLLOUTS = 128, 4  # ADS's default step: 4 clusters x 32 prompts
SEED = 3


@pytest.fixture(scope="module")
def pool():
    """A simulated pool carrying every selector's offline columns (reference pass rates, clusters, embeddings,
    buckets)."""
    return World(WorldConfig(tasks=600, held_out=10, ads_clusters=8), 0).pool(("bots", "ads", "dots", "progress"))


def _binary(size: int, rng: np.random.Generator, nan: bool) -> np.ndarray:
    """Random 0 / 1 rewards; with ``nan`` the second one is NaN."""
    reward = rng.integers(0, 2, size=size).astype(np.float64)
    reward[1] = np.nan if nan else reward[1]
    return reward


def _rewards(tasks: np.ndarray, counts: np.ndarray, rng: np.random.Generator, nan: bool) -> StepResults:
    task_index = np.repeat(tasks, counts)
    return StepResults.from_rewards(task_index, _binary(len(task_index), rng, nan))


def _play(axis: str, component, pool, steps: range, rng: np.random.Generator, nan_at: int | None = None) -> None:
    """The trainer's calls on ``component`` for ``steps`` (``verl_ext/trainer/mode.py``: select / allocate ->
    update; filter_step -> observe_update), on random binary rewards, one of them NaN at step ``nan_at``."""
    for step in steps:
        nan = step == nan_at
        if axis == "selector":
            tasks = component.select(step, BATCH)
            component.update(step, _rewards(tasks, np.full(len(tasks), ROLLOUTS), rng, nan))
        elif axis == "allocator":
            tasks = rng.choice(pool.index, BATCH, replace=False)
            component.update(step, _rewards(tasks, component.allocate(step, tasks, BATCH * ROLLOUTS), rng, nan))
        else:
            groups = 16
            reward = _binary(groups * ROLLOUTS, rng, nan)
            view = RolloutView(task_index=np.repeat(rng.choice(pool.index, groups, replace=False), ROLLOUTS),
                               group=np.repeat(np.arange(groups), ROLLOUTS), reward=reward,
                               advantage=reward - reward.reshape(groups, ROLLOUTS).mean(1).repeat(ROLLOUTS),
                               response_length=rng.integers(1, 33, size=len(reward)), entropy=rng.random(len(reward)),
                               max_response_length=32, rollout_id=rollout_ids(step, len(reward)))
            kept = np.asarray(component.filter_step(step, view), dtype=np.int64)
            trained = np.concatenate([view.rollout_id[kept], component.replay()])
            component.observe_update(step, trained, rng.random(len(trained)), rng.random(len(trained)))


def _equal(a: Any, b: Any) -> bool:
    """Deep equality over dicts, sequences, arrays and tensors (NaN equals NaN)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and bool(torch.equal(a, b) or (
            a.is_floating_point() and torch.equal(torch.nan_to_num(a, nan=0.5), torch.nan_to_num(b, nan=0.5))))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a):
        return bool(np.isnan(b))
    return type(a) is type(b) and a == b


def _build(axis: str, name: str, pool):
    cfg = {"name": name}
    if axis == "selector":
        return build_selector(cfg, pool, SEED)
    return build_allocator(cfg, SEED) if axis == "allocator" else build_filter(cfg, SEED)


COMPONENTS = [(axis, name) for axis, names in REGISTRY.items() for name in names]


@pytest.mark.parametrize(("axis", "name"), COMPONENTS, ids=[f"{a}={n}" for a, n in COMPONENTS])
def test_state_dict_is_a_copy_that_later_steps_leave_unchanged(axis, name, pool):
    rng = np.random.default_rng(0)
    component = _build(axis, name, pool)
    _play(axis, component, pool, range(1, 4), rng)
    state = component.state_dict()
    frozen = copy.deepcopy(state)
    _play(axis, component, pool, range(4, 7), rng)  # the component goes on training
    assert _equal(state, frozen), f"{axis}={name}: its earlier state_dict changed as it trained on"
    if frozen:  # the steps did change the live state: the check above could have failed
        assert not _equal(component.state_dict(), frozen)
    resumed = _build(axis, name, pool)
    resumed.load_state_dict(state)
    _play(axis, resumed, pool, range(4, 7), rng)  # a component resumed from it trains on
    assert _equal(state, frozen), f"{axis}={name}: a state_dict loaded into another component changed with it"


# nothing they compute reads a reward: a NaN one passes through them unread
READS_NO_REWARD = {("selector", "uniform"), ("selector", "sequential"), ("allocator", "fixed"),
                   ("rollout_filter", "keep_all")}


@pytest.mark.parametrize(("axis", "name"), COMPONENTS, ids=[f"{a}={n}" for a, n in COMPONENTS])
def test_a_nan_reward_is_refused_naming_the_step(axis, name, pool):
    component = _build(axis, name, pool)
    rng = np.random.default_rng(1)
    _play(axis, component, pool, range(1, 3), rng)
    if (axis, name) in READS_NO_REWARD:
        _play(axis, component, pool, range(3, 4), rng, nan_at=3)
        return
    with pytest.raises(ValueError, match=rf"{axis}={name}: step 3 .*reward"):
        _play(axis, component, pool, range(3, 4), rng, nan_at=3)



POOL_SELECTORS = ("ads", "bots", "dots", "progress", "prompt_utility")  # their state is per task of the pool


@pytest.mark.parametrize("name", POOL_SELECTORS)
def test_a_checkpoint_of_another_task_pool_is_refused_naming_the_selector(name, pool):
    """A state saved with other tasks (same count, one index changed) is refused, naming the selector."""
    state = _build("selector", name, pool).state_dict()
    index = pool.index.copy()
    index[0] = index.max() + 1
    with pytest.raises(ValueError, match=rf"selector={name}: the checkpoint's task"):
        _build("selector", name, TaskPool(index, pool.columns)).load_state_dict(state)
    _build("selector", name, pool).load_state_dict(state)  # its own pool's state loads
