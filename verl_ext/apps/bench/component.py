"""Any component's cost per step, a user's included (``--component``), beside the trainer's default on its axis
(uniform, fixed, keep_all: the straightforward reference, the least a step can do), on the same tasks and rewards.

A step is what the trainer calls: selector ``select`` + ``update``; allocator ``allocate`` + ``update``; rollout filter
``filter_step``. Rewards are Bernoulli draws from fixed per-task pass rates, ``batch`` tasks x ``rollouts``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from omegaconf import OmegaConf

from verl_ext.apps.bench.step_share import of_reference_step
from verl_ext.axes import build_allocator, build_filter, build_selector
from verl_ext.axes.plugins import spec_overrides
from verl_ext.axes.views import RolloutView, StepResults, TaskPool

DEFAULTS = {"selector": "uniform", "allocator": "fixed", "rollout_filter": "keep_all"}  # verl_ext_trainer.yaml


def component_config(spec: str) -> tuple[str, dict]:
    """``selector=custom,selector.path=f.py,selector.cls=C,+selector.config.epsilon=0.2`` (as the trainer and the study
    take it) -> ``("selector", {"name": "custom", "path": "/abs/f.py", ...})``
    (:func:`verl_ext.axes.plugins.spec_overrides`)."""
    try:
        choice, *fields = spec_overrides(spec)
    except ValueError as e:
        raise ValueError(f"--component {e}") from e
    axis, _, name = choice.partition("=")
    return axis, OmegaConf.to_container(OmegaConf.from_dotlist([f"{axis}.name={name}", *fields]))[axis]


@dataclass(frozen=True)
class World:
    """Fixed pass rates of ``tasks`` tasks; ``rewards`` draws a step's."""

    tasks: int
    rollouts: int
    seed: int = 0

    def __post_init__(self):
        object.__setattr__(self, "rng", np.random.default_rng(self.seed))
        object.__setattr__(self, "truth", self.rng.beta(0.5, 0.5, self.tasks))

    def results(self, tasks: np.ndarray, counts: np.ndarray) -> StepResults:
        task_index = np.repeat(tasks, counts)
        return StepResults.from_rewards(task_index, (self.rng.random(len(task_index)) < self.truth[task_index]) * 1.0)


def _step_fn(axis: str, cfg: dict, world: World, batch: int):
    """A closure running one step of the component on ``world``."""
    pool = TaskPool(np.arange(world.tasks))
    if axis == "selector":
        selector = build_selector(cfg, pool, 0)
        counts = np.full(batch, world.rollouts)

        def step(s):
            tasks = np.asarray(selector.select(s, batch))
            selector.update(s, world.results(tasks, counts))
    elif axis == "allocator":
        allocator = build_allocator(cfg, 0)

        def step(s):
            tasks = world.rng.choice(world.tasks, batch, replace=False)
            counts = np.asarray(allocator.allocate(s, tasks, batch * world.rollouts))
            allocator.update(s, world.results(tasks, counts))
    else:
        rollout_filter = build_filter(cfg, 0)

        def step(s):
            tasks = world.rng.choice(world.tasks, batch, replace=False)
            r = world.results(tasks, np.full(batch, world.rollouts))
            group = np.repeat(np.arange(batch), world.rollouts)
            mean = np.bincount(group, r.reward) / world.rollouts
            view = RolloutView(r.task_index, group, r.reward, r.reward - mean[group],
                               np.full(len(group), 64, dtype=np.int64), np.zeros(len(group)), 128,
                               s * (1 << 32) + np.arange(len(group), dtype=np.int64))
            rollout_filter.filter_step(s, view)
    return step


def _ms_per_step(step, steps: int) -> float:
    times = []
    for s in range(1, steps + 1):
        start = time.perf_counter()
        step(s)
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def run(spec: str, sizes=(10_000, 100_000), batch: int = 512, rollouts: int = 16, steps: int = 10) -> list[dict]:
    """Median ms per step of the component of ``spec`` and of its axis's default, side by side, per pool size."""
    axis, cfg = component_config(spec)
    rows = []
    for n in sizes:
        ours = _ms_per_step(_step_fn(axis, cfg, World(n, rollouts), batch), steps)
        default = _ms_per_step(_step_fn(axis, {"name": DEFAULTS[axis]}, World(n, rollouts), batch), steps)
        rows.append({"component": spec, "axis": axis, "tasks": n, "batch": batch, "rollouts": rollouts,
                     "ms": ours, "default_ms": default, "over_default": ours / default,
                     "share_of_reference_step": of_reference_step(ours / 1e3)})
    return rows


def report(rows: list[dict]) -> str:
    lines = [f"### Component: {rows[0]['component']}" if rows else "### Component", "",
             f"| tasks | batch x rollouts | ms/step | `{DEFAULTS[rows[0]['axis']] if rows else ''}` ms/step | ratio | "
             "% of step |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['tasks']:,} | {r['batch']} x {r['rollouts']} | {r['ms']:.2f} | {r['default_ms']:.2f} | "
              f"{r['over_default']:.1f}x | {100 * r['share_of_reference_step']:.4f} |" for r in rows]
    return "\n".join(lines)
