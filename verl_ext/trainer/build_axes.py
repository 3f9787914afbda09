"""The three axes as the trainer builds them from the composed config (no Ray, no TransferQueue).

Config (see ``verl_ext/config/verl_ext_trainer.yaml``): the groups ``selector``, ``allocator``,
``rollout_filter`` and the section ``data_selection`` (``rollout_budget``: rollouts per step,
default ``data.train_batch_size * actor_rollout_ref.rollout.n``; ``seed``: default ``data.seed``;
``prefilters``: rollout-filter configs run before ``rollout_filter``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import torch

from verl_ext.axes import (
    BudgetAllocator, RolloutFilter, TaskPool, TaskSelector, build_allocator, build_filter, build_selector, make_config,
)

_SCALARS = (bool, int, float, str, np.generic)


def rollout_budget(config) -> int:
    budget = config.data_selection.get("rollout_budget")
    if budget is None:
        return int(config.data.train_batch_size) * int(config.actor_rollout_ref.rollout.n)
    if isinstance(budget, bool) or int(budget) != budget:
        raise ValueError(f"data_selection.rollout_budget={budget!r} must be an integer number of rollouts")
    return int(budget)


def axes_seed(config) -> int:
    """``data_selection.seed``, else ``data.seed``, else the seed an unseeded ``torch.Generator`` has:
    the uniform selector then serves exactly the order of verl's shuffled dataloader."""
    for seed in (config.data_selection.get("seed"), config.data.get("seed")):
        if seed is not None:
            return int(seed)
    return torch.Generator().initial_seed()


def validate_axes(config) -> None:
    """Reject unknown keys and infeasible budgets before any process starts (``ValueError``)."""
    for axis in ("selector", "allocator", "rollout_filter"):
        if axis not in config:
            raise ValueError(f"config has no '{axis}' group; compose verl_ext_trainer.yaml (python -m verl_ext.main)")
        absolute_plugin_path(config[axis])
        make_config(axis, config[axis])
    for prefilter in config.data_selection.get("prefilters") or ():
        absolute_plugin_path(prefilter)
    filters = build_rollout_filter(config, 0)  # unknown prefilter keys; a replaying filter not last
    if filters.needs_clip_fraction:
        from verl_ext.trainer.per_sample import check_clip_rule

        check_clip_rule(str(config.actor_rollout_ref.actor.policy_loss.loss_mode))
    if config.selector.name == "uniform" and not config.data.get("shuffle", True):
        raise ValueError("selector=uniform reproduces verl's shuffled dataloader; with data.shuffle=False "
                         "use selector=sequential (dataset order)")
    tasks, budget = int(config.data.train_batch_size), rollout_budget(config)
    try:  # a fresh allocator on unseen tasks must meet the budget exactly
        counts = build_allocator(config.allocator, 0).allocate(0, np.arange(tasks), budget)
    except ValueError as e:
        raise ValueError(f"data_selection.rollout_budget={budget} for {tasks} tasks per step: {e}") from e
    if int(np.sum(counts)) != budget:
        raise ValueError(f"allocator={config.allocator.name} allocated {int(np.sum(counts))} rollouts, budget {budget}")
    check_replay_matches_dots(config)


def absolute_plugin_path(section) -> None:
    """A user's component file (``<axis>=custom <axis>.path=x.py``) as an absolute path, so Ray workers, which start
    elsewhere, load the file the launch directory named."""
    from verl_ext.axes.plugins import absolute

    path = section.get("path") if section.get("name") == "custom" else None
    if path and path != "???" and absolute(str(path)) != path:
        from omegaconf import open_dict

        with open_dict(section):
            section.path = absolute(str(path))


def check_replay_matches_dots(config) -> None:
    """DOTS+RR (``selector=dots selector.protocol=measured rollout_filter=replay_fifo``): the buffer's trim keeps
    ``capacity - fresh_groups`` groups, which is the authors' ``buffer_size - int(σ B)`` only when ``fresh_groups`` is
    the selector's ``σ B``, and it starts drawing replays after the selector's first round (``mu`` steps)."""
    if config.selector.name != "dots" or config.rollout_filter.name != "replay_fifo":
        return
    dots, replay = make_config("selector", config.selector), make_config("rollout_filter", config.rollout_filter)
    if dots.protocol != "measured":
        return
    sigma_b = dots.fresh_per_step(int(config.data.train_batch_size))
    if replay.fresh_groups != sigma_b:
        raise ValueError(f"rollout_filter.fresh_groups={replay.fresh_groups} must be the selector's sigma B = "
                         f"int(selector.fresh_fraction {dots.fresh_fraction} x data.train_batch_size "
                         f"{config.data.train_batch_size}) = {sigma_b}")
    if replay.first_round_steps != dots.round_steps:
        raise ValueError(f"rollout_filter.first_round_steps={replay.first_round_steps} must be the selector's first "
                         f"round, selector.round_steps={dots.round_steps}")


def validate_training_data(config) -> None:
    """Build the selector on each local ``data.train_files`` file's ``extra_info`` before any process
    starts, so missing or bad columns (e.g. BOTS's reference pass rates) fail with the file named."""
    import pyarrow.parquet as pq
    from omegaconf import ListConfig

    files = config.data.train_files
    for path in (list(files) if isinstance(files, (list, tuple, ListConfig)) else [files]):
        if not (str(path).endswith(".parquet") and os.path.isfile(path)):
            continue  # remote or non-parquet files are checked when verl loads them
        try:
            extra_infos = pq.read_table(path, columns=["extra_info"]).column("extra_info").to_pylist()
            build_selector(config.selector, task_pool(extra_infos), 0)
        except (KeyError, ValueError) as e:
            raise ValueError(f"{path}: {e}") from e


def task_pool(extra_infos: Iterable[dict[str, Any]]) -> TaskPool:
    """Stable indices (``extra_info.index``) in dataset order, plus every scalar ``extra_info`` column."""
    rows = list(extra_infos)
    if not rows or any(not isinstance(r, dict) or r.get("index") is None for r in rows):
        raise ValueError("every training row needs extra_info.index (the stable task key)")
    keys = {k for r in rows for k in r if k != "index"}
    columns = {}
    for key in sorted(keys):
        values = [r.get(key) for r in rows]
        if all(v is None or isinstance(v, _SCALARS) for v in values):
            numeric = all(v is None or (isinstance(v, (bool, int, float, np.number))) for v in values)
            columns[key] = (np.array([np.nan if v is None else v for v in values], dtype=np.float64) if numeric
                            else np.array(values, dtype=object))
    return TaskPool(np.array([r["index"] for r in rows], dtype=np.int64), columns)


@dataclass
class Axes:
    selector: TaskSelector
    allocator: BudgetAllocator
    rollout_filter: RolloutFilter

    def state_dict(self) -> dict[str, dict]:
        return {name: getattr(self, name).state_dict() for name in ("selector", "allocator", "rollout_filter")}

    def load_state_dict(self, state: dict[str, dict]) -> None:
        for name in ("selector", "allocator", "rollout_filter"):
            getattr(self, name).load_state_dict(state[name])


def build_rollout_filter(config, seed: int) -> RolloutFilter:
    return build_filter(config.rollout_filter, seed, list(config.data_selection.get("prefilters") or ()))


def build_axes(config, pool: TaskPool) -> Axes:
    seed = axes_seed(config)
    return Axes(build_selector(config.selector, pool, seed), build_allocator(config.allocator, seed),
                build_rollout_filter(config, seed))
