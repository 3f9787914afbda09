"""One simulated training run: the trainer's step (``verl_ext/trainer/mode.py``) with the simulated learner in place
of generation, reward and the actor update, driving the components the trainer builds, through the same calls:

``selector.select`` -> ``step_budget`` -> ``allocator.allocate`` -> rollouts scored -> ``selector.update`` ->
``allocator.update`` -> ``rollout_filter.filter_step`` (+ ``replay`` / ``stored`` of a replaying filter) ->
actor update on the kept and replayed rollouts -> ``rollout_filter.observe_update``.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from eval.metrics import degenerate_group_rate, effective_task_ratio, task_pass_rates, transition_matrix
from verl_ext.axes import build_allocator, build_filter, build_selector
from verl_ext.axes.base import step_budget
from verl_ext.axes.types import RolloutView, StepResults, rollout_ids
from verl_ext.sim.learner import PARTIAL_SCORE, Learner, LearnerConfig
from verl_ext.sim.world import World, WorldConfig

TRANSITION_TASKS = 4_000  # training tasks whose empirical pass rate (16 samples) is measured before and after
TRANSITION_SAMPLES = 16


@dataclass(frozen=True)
class Setting:
    """A configuration of the three axes: each a dict as the Hydra group gives it (``name`` + fields)."""

    name: str
    selector: dict = field(default_factory=lambda: {"name": "uniform"})
    allocator: dict = field(default_factory=lambda: {"name": "fixed"})
    rollout_filter: dict = field(default_factory=lambda: {"name": "keep_all"})
    learner: dict = field(default_factory=dict)  # LearnerConfig overrides (a learner-parameter sweep)
    world: dict = field(default_factory=dict)  # WorldConfig overrides (a world-parameter sweep)


@dataclass(frozen=True)
class Scenario:
    """A paper's training regime: prompts per step, rollouts per prompt, steps, advantage, rewards."""

    name: str
    batch: int
    rollouts: int
    steps: int
    advantage: str = "grpo"  # grpo (group-normalised) | rloo (leave-one-out)
    scores: str = "binary"  # binary | countdown (0 / 0.1 / 1)
    columns: tuple[str, ...] = ()  # World.pool column families
    eval_every: int = 10
    world: WorldConfig = WorldConfig()
    learner: LearnerConfig = LearnerConfig()


def advantages(reward: np.ndarray, group: np.ndarray, kind: str) -> np.ndarray:
    """Sequence-level advantage per rollout: GRPO ``(r - mean) / (std + 1e-6)`` or RLOO ``r - mean of the others``."""
    size = np.bincount(group).astype(np.float64)
    mean = np.bincount(group, weights=reward) / size
    centred = reward - mean[group]
    if kind == "grpo":
        std = np.sqrt(np.maximum(np.bincount(group, weights=reward**2) / size - mean**2, 0.0))
        return centred / (std[group] + 1e-6)
    if kind == "rloo":
        n = size[group]
        return np.where(n > 1, centred * n / np.maximum(n - 1, 1), 0.0)
    raise ValueError(f"advantage={kind!r}; choose grpo or rloo")


class _Store:
    """What the simulation keeps of the rollouts a replaying filter stores: id, task, signal, spurious, step."""

    def __init__(self):
        self.ids = np.zeros(0, dtype=np.int64)
        self.cols = {k: np.zeros(0, dtype=d) for k, d in
                     (("task", np.int64), ("signal", np.float64), ("spurious", bool), ("born", np.int64))}

    def add(self, ids: np.ndarray, **cols) -> None:
        self.ids = np.concatenate([self.ids, ids])
        for k, v in cols.items():
            self.cols[k] = np.concatenate([self.cols[k], v])

    def rows(self, ids: np.ndarray) -> np.ndarray:
        order = np.argsort(self.ids, kind="stable")
        pos = order[np.searchsorted(self.ids, ids, sorter=order)] if len(ids) else np.zeros(0, dtype=np.int64)
        if len(ids) and np.any(self.ids[pos] != ids):
            raise RuntimeError("the rollout filter replays rollouts it did not keep in stored()")
        return pos

    def keep(self, ids: np.ndarray) -> None:
        mask = np.isin(self.ids, ids)
        self.ids = self.ids[mask]
        self.cols = {k: v[mask] for k, v in self.cols.items()}


def components(setting: Setting, pool, seed: int, state: dict | None = None) -> tuple:
    """Selector, allocator and rollout filter as the trainer builds them; with ``state`` (a checkpoint's
    ``state_dict()`` of each, after a ``torch.save`` / ``torch.load`` round trip) restored as on resume."""
    built = (build_selector(setting.selector, pool, seed), build_allocator(setting.allocator, seed),
             build_filter(setting.rollout_filter, seed))
    if state is not None:
        buffer = io.BytesIO()
        torch.save(state, buffer)
        buffer.seek(0)
        for component, saved in zip(built, torch.load(buffer, weights_only=False)):
            component.load_state_dict(saved)
    return built


def run(scenario: Scenario, setting: Setting, seed: int, world: World | None = None,
        resume_after: int | None = None) -> dict[str, Any]:
    """Train ``scenario.steps`` steps; returns the per-run record (curves, per-step metrics, transitions, timing).
    ``resume_after``: after that step, rebuild the components from their saved state (a resumed run)."""
    world = world or World(replace(scenario.world, **setting.world), seed)
    learner = Learner(world, replace(scenario.learner, **setting.learner))
    pool = world.pool(scenario.columns)
    selector, allocator, rollout_filter = components(setting, pool, seed)
    rng, probe = np.random.default_rng([seed, 1]), np.random.default_rng([seed, 2])
    budget_full = scenario.batch * scenario.rollouts
    sample = np.random.default_rng([seed, 3]).choice(world.config.tasks, min(TRANSITION_TASKS, world.config.tasks),
                                                     replace=False)
    initial = probe.binomial(TRANSITION_SAMPLES, learner.pass_rate(sample)) / TRANSITION_SAMPLES
    store, rec = _Store(), _Record()
    rec.evaluate(0, learner, scenario)
    for step in range(1, scenario.steps + 1):
        t0 = time.perf_counter()
        tasks = np.asarray(selector.select(step, scenario.batch), dtype=np.int64)
        t1 = time.perf_counter()
        budget = step_budget(budget_full, len(tasks), scenario.batch)
        counts = np.asarray(allocator.allocate(step, tasks, budget), dtype=np.int64)
        t2 = time.perf_counter()
        if len(counts) != len(tasks) or counts.sum() != budget or counts.min() < 1:
            raise RuntimeError(f"step {step}: allocator counts {counts.tolist()} for budget {budget}")
        aimed = learner.pass_rate(pool.positions(tasks))  # what the selector chose, before the update
        out = learner.generate(pool.positions(tasks), counts, rng, scenario.scores)
        results = StepResults(out.task, out.reward, out.success, out.format_valid)
        t3 = time.perf_counter()
        selector.update(step, results)
        t4 = time.perf_counter()
        allocator.update(step, results)
        t5 = time.perf_counter()
        ids = rollout_ids(step, len(out.task))
        view = RolloutView(out.task, out.group, out.reward, advantages(out.reward, out.group, scenario.advantage),
                           out.length, out.entropy, learner.config.max_response_length, ids)
        kept = np.sort(np.asarray(rollout_filter.filter_step(step, view), dtype=np.int64))
        replayed = store.rows(rollout_filter.replay()) if rollout_filter.replays else np.zeros(0, dtype=np.int64)
        t6 = time.perf_counter()
        r_task = np.concatenate([out.task[kept], store.cols["task"][replayed]])
        r_spur = np.concatenate([out.spurious[kept], store.cols["spurious"][replayed]])
        r_age = np.concatenate([np.zeros(len(kept)), step - store.cols["born"][replayed]]).astype(np.float64)
        trained_ids = np.concatenate([ids[kept], store.ids[replayed]])
        entropy = learner.entropy_of(pool.positions(r_task), r_spur, rng)
        clip = np.minimum(1.0, 0.02 + 0.04 * r_age + 0.1 * r_spur)
        learner.learn(pool.positions(r_task), np.concatenate([out.signal[kept], store.cols["signal"][replayed]]),
                      r_spur, r_age, len(out.task))
        if rollout_filter.replays:
            store.add(ids, task=out.task, signal=out.signal, spurious=out.spurious,
                      born=np.full(len(ids), step, dtype=np.int64))
            store.keep(rollout_filter.stored())
        t7 = time.perf_counter()
        rollout_filter.observe_update(step, trained_ids, entropy, clip)
        t8 = time.perf_counter()
        learner.forget()
        rec.step(step, out, counts, len(kept), len(replayed), aimed,
                 {"selector": (t1 - t0) + (t4 - t3), "allocator": (t2 - t1) + (t5 - t4),
                  "rollout_filter": (t6 - t5) + (t8 - t7)})
        if step % scenario.eval_every == 0 or step == scenario.steps:
            rec.evaluate(step, learner, scenario)
        if step == resume_after:
            saved = [c.state_dict() for c in (selector, allocator, rollout_filter)]
            selector, allocator, rollout_filter = components(setting, pool, seed, saved)
    final = probe.binomial(TRANSITION_SAMPLES, learner.pass_rate(sample)) / TRANSITION_SAMPLES
    return rec.finish(transition_matrix(initial, final)[1])


class _Record:
    def __init__(self):
        self.eval_steps, self.accuracy, self.score, self.pass16 = [], [], [], []
        self.series: dict[str, list[float]] = {k: [] for k in (
            "etr", "degenerate", "kept_fraction", "replayed", "selected_p", "counts_std")}
        self.seconds = {"selector": 0.0, "allocator": 0.0, "rollout_filter": 0.0}
        self.steps = 0

    def evaluate(self, step: int, learner: Learner, scenario: Scenario) -> None:
        p = learner.held_out()
        self.eval_steps.append(step)
        self.accuracy.append(float(p.mean()))  # avg@k in expectation (pass@1)
        partial = learner.config.partial_credit * PARTIAL_SCORE if scenario.scores == "countdown" else 0.0
        self.score.append(float((p + (1 - p) * partial).mean()))  # mean verifier score
        self.pass16.append(float((1 - (1 - p) ** 16).mean()))  # pass@16 in expectation

    def step(self, step: int, out, counts: np.ndarray, kept: int, replayed: int, selected_p: np.ndarray,
             seconds: dict[str, float]) -> None:
        s = self.series
        s["etr"].append(effective_task_ratio(task_pass_rates(out.group, out.reward)))
        s["degenerate"].append(degenerate_group_rate(out.group, out.reward))
        s["kept_fraction"].append(kept / len(out.task))
        s["replayed"].append(float(replayed))
        s["selected_p"].append(float(selected_p.mean()))  # mean true pass rate of the chosen tasks
        s["counts_std"].append(float(np.std(counts)))
        for k, v in seconds.items():
            self.seconds[k] += v
        self.steps = step

    def finish(self, transitions: np.ndarray) -> dict[str, Any]:
        return {"eval_steps": self.eval_steps, "accuracy": self.accuracy, "score": self.score, "pass16": self.pass16,
                **self.series,
                "transitions": transitions.tolist(),
                "ms_per_step": {k: 1e3 * v / max(self.steps, 1) for k, v in self.seconds.items()}}
