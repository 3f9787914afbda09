"""One simulated training run: the trainer's step (``verl_ext/trainer/mode.py``) with the simulated learner in place
of generation, reward and the actor update, driving the components the trainer builds, through the same calls:

``selector.measurement`` (rolled out, scored, ``selector.measure``; never trained on) -> ``selector.select`` ->
``step_budget`` -> ``allocator.allocate`` -> rollouts scored -> ``selector.update`` -> ``allocator.update`` ->
``rollout_filter.filter_step`` (+ ``replay`` / ``stored`` of a replaying filter) -> actor update on the kept and
replayed rollouts -> ``rollout_filter.observe_update``. The components see stable task indices (``World.index``),
never positions.
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
from verl_ext.axes.views import RolloutView, StepResults, rollout_ids
from verl_ext.apps.sim.learner import PARTIAL_SCORE, Learner, LearnerConfig, Rollouts, Update
from verl_ext.apps.sim.world import World, WorldConfig

TRANSITION_TASKS = 4_000  # training tasks whose empirical pass rate (16 samples) is measured before and after
TRANSITION_SAMPLES = 16
ADVANTAGES = ("grpo", "grpo_centred", "rloo")


@dataclass(frozen=True)
class Setting:
    """A configuration of the three axes: each a dict as the trainer's composed config gives it (``name`` +
    fields); ``batch``: prompts asked of the selector per step when it differs from the study's."""

    name: str
    selector: dict = field(default_factory=lambda: {"name": "uniform"})
    allocator: dict = field(default_factory=lambda: {"name": "fixed"})
    rollout_filter: dict = field(default_factory=lambda: {"name": "keep_all"})
    batch: int | None = None
    learner: dict = field(default_factory=dict)  # LearnerConfig overrides (a learner-parameter sweep)
    world: dict = field(default_factory=dict)  # WorldConfig overrides (a world-parameter sweep)


@dataclass(frozen=True)
class Scenario:
    """A recipe's training regime: prompts per step, rollouts per prompt, the actor's mini-batch in rollouts (the
    update's normaliser), the objective's advantage and loss aggregation, rewards, held-out samples per task."""

    name: str
    batch: int
    rollouts: int
    steps: int
    mini_batch: int = 0  # rollouts; 0: batch * rollouts
    advantage: str = "grpo"  # grpo (std-normalised) | grpo_centred | rloo (leave-one-out)
    aggregation: str = "token-mean"
    scores: str = "binary"  # binary | countdown (0 / 0.1 / 1)
    columns: tuple[str, ...] = ()  # World.pool column families
    eval_every: int = 10
    eval_samples: int = 4  # k samples per held-out task
    world: WorldConfig = WorldConfig()
    learner: LearnerConfig = LearnerConfig()


def advantages(reward: np.ndarray, group: np.ndarray, kind: str) -> np.ndarray:
    """Sequence-level advantage per rollout (verl core_algos): GRPO ``(r - mean) / (std + 1e-6)`` (``grpo_centred``:
    ``norm_adv_by_std_in_grpo=false``, ``r - mean``) or RLOO ``r - mean of the others``."""
    size = np.bincount(group).astype(np.float64)
    mean = np.bincount(group, weights=reward) / size
    centred = reward - mean[group]
    if kind == "grpo":
        n = size[group]
        var = np.bincount(group, weights=centred**2)[group] / np.maximum(n - 1, 1)  # torch.std: unbiased
        return np.where(n > 1, centred / (np.sqrt(var) + 1e-6), 0.0)
    if kind == "grpo_centred":
        return np.where(size[group] > 1, centred, 0.0)
    if kind == "rloo":
        n = size[group]
        return np.where(n > 1, centred * n / np.maximum(n - 1, 1), 0.0)
    raise ValueError(f"advantage={kind!r}; choose from {ADVANTAGES}")


class _Store:
    """What the simulation keeps of the rollouts a replaying filter stores, by rollout id."""

    COLUMNS = (("task", np.int64), ("advantage", np.float64), ("success", bool), ("spurious", bool),
               ("length", np.int64), ("born", np.int64), ("uses", np.int64))

    def __init__(self):
        self.ids = np.zeros(0, dtype=np.int64)
        self.cols = {k: np.zeros(0, dtype=d) for k, d in self.COLUMNS}

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


class Run:
    """One run's state (learner, the three components, the replay store, the record) and the trainer's two halves of a
    step: :meth:`choose` (measurement, ``select``, ``step_budget``, ``allocate``, generation) and :meth:`learn` (the
    components' updates, the filter, the actor update on kept and replayed rows, ``observe_update``). :func:`run` calls
    them in the synchronous order; :mod:`verl_ext.apps.sim.staleness` with generation delays in between."""

    def __init__(self, scenario: Scenario, setting: Setting, seed: int, world: World | None = None):
        self.scenario, self.setting, self.seed = scenario, setting, seed
        self.world = world or World(replace(scenario.world, **setting.world), seed)
        self.learner = Learner(self.world, replace(scenario.learner, **setting.learner))
        self.pool = self.world.pool(scenario.columns)
        self.selector, self.allocator, self.rollout_filter = components(setting, self.pool, seed)
        self.rng, self.probe = np.random.default_rng([seed, 1]), np.random.default_rng([seed, 2])
        self.batch = setting.batch or scenario.batch
        self.mini_batch = scenario.mini_batch or scenario.batch * scenario.rollouts
        self.sample = np.random.default_rng([seed, 3]).choice(
            self.world.config.tasks, min(TRANSITION_TASKS, self.world.config.tasks), replace=False)
        self.initial = self.probe.binomial(TRANSITION_SAMPLES, self.learner.pass_rate(self.sample)) / TRANSITION_SAMPLES
        self.store, self.rec = _Store(), _Record(seed)
        self.rec.evaluate(0, self.learner, scenario)

    def choose(self, step: int, k: int, exclude: np.ndarray | None = None) -> tuple:
        """``k`` prompts as the trainer's ``_next_train_batch`` chooses them (``exclude``: tasks in flight) and their
        rollouts from the current policy: ``(counts, aimed pass rates, rollouts, measured rollouts, seconds)``."""
        sc, learner, selector = self.scenario, self.learner, self.selector
        t0 = time.perf_counter()
        named = np.asarray(selector.measurement(step), dtype=np.int64)
        if len(named):  # measurement only (verl_ext/trainer/measurement.py): scored, measured, never trained on
            m = learner.generate(self.pool.positions(named), np.full(len(named), sc.rollouts), self.rng, sc.scores)
            selector.measure(step, StepResults.from_rewards(self.pool.index[m.task], m.reward))
        tasks = np.asarray(selector.select(step, k, exclude=exclude), dtype=np.int64)
        t1 = time.perf_counter()
        budget = step_budget(self.batch * sc.rollouts, len(tasks), self.batch)
        counts = np.asarray(self.allocator.allocate(step, tasks, budget), dtype=np.int64)
        t2 = time.perf_counter()
        if len(counts) != len(tasks) or counts.sum() != budget or counts.min() < 1:
            raise RuntimeError(f"step {step}: allocator counts {counts.tolist()} for budget {budget}")
        positions = self.pool.positions(tasks)
        aimed = learner.pass_rate(positions)  # what the selector chose, before the update
        out = learner.generate(positions, counts, self.rng, sc.scores)
        return counts, aimed, out, len(named) * sc.rollouts, {"selector": t1 - t0, "allocator": t2 - t1}

    def learn(self, step: int, out: Rollouts, counts: np.ndarray, aimed: np.ndarray, measured: int,
              seconds: dict[str, float], age: np.ndarray | None = None) -> None:
        """The step's scored rollouts ``out`` (``age``: per rollout, policy updates since the weights that generated
        it; None: 0, synchronous) through the components and the actor update; the step recorded."""
        sc, learner, store, rollout_filter = self.scenario, self.learner, self.store, self.rollout_filter
        age = np.zeros(len(out.task), dtype=np.int64) if age is None else np.asarray(age, dtype=np.int64)
        index = self.pool.index[out.task]
        results = StepResults(index, out.reward, out.success, out.format_valid,
                              weight_version=None if not age.any() else np.repeat((step - 1 - age)[:, None], 2, axis=1))
        t3 = time.perf_counter()
        self.selector.update(step, results)
        t4 = time.perf_counter()
        self.allocator.update(step, results)
        t5 = time.perf_counter()
        ids = rollout_ids(step, len(out.task))
        adv = advantages(out.reward, out.group, sc.advantage)
        view = RolloutView(index, out.group, out.reward, adv, out.length, out.entropy,
                           learner.config.max_response_length, ids)
        kept = np.sort(np.asarray(rollout_filter.filter_step(step, view), dtype=np.int64))
        replayed = store.rows(rollout_filter.replay()) if rollout_filter.replays else np.zeros(0, dtype=np.int64)
        t6 = time.perf_counter()
        old = store.cols
        rows = Update(np.concatenate([out.task[kept], old["task"][replayed]]),
                      np.concatenate([adv[kept], old["advantage"][replayed]]),
                      np.concatenate([out.success[kept], old["success"][replayed]]),
                      np.concatenate([out.spurious[kept], old["spurious"][replayed]]),
                      np.concatenate([out.length[kept], old["length"][replayed]]),
                      np.concatenate([age[kept], step - old["born"][replayed]]).astype(np.float64),
                      np.concatenate([np.zeros(len(kept)), old["uses"][replayed]]).astype(np.float64))
        trained_ids = np.concatenate([ids[kept], store.ids[replayed]])
        entropy = learner.entropy_of(rows.task, rows.spurious, self.rng)
        clip = np.minimum(1.0, 0.02 + 0.04 * rows.age + 0.1 * rows.spurious)
        learner.learn(rows, self.mini_batch, sc.aggregation)
        if rollout_filter.replays:
            store.cols["uses"][replayed] += 1
            fresh_uses = np.zeros(len(ids), dtype=np.int64)
            fresh_uses[kept] = 1
            store.add(ids, task=out.task, advantage=adv, success=out.success, spurious=out.spurious,
                      length=out.length, born=np.full(len(ids), step, dtype=np.int64) - age, uses=fresh_uses)
            store.keep(rollout_filter.stored())
        t7 = time.perf_counter()
        rollout_filter.observe_update(step, trained_ids, entropy, clip)
        t8 = time.perf_counter()
        learner.forget()
        self.rec.step(out, counts, len(kept), len(replayed), measured, aimed,
                      {"selector": seconds["selector"] + (t4 - t3), "allocator": seconds["allocator"] + (t5 - t4),
                       "rollout_filter": (t6 - t5) + (t8 - t7)})
        if step % sc.eval_every == 0 or step == sc.steps:
            self.rec.evaluate(step, learner, sc)

    def resume(self) -> None:
        """Rebuild the components from their saved state, as a resumed run does."""
        saved = [c.state_dict() for c in (self.selector, self.allocator, self.rollout_filter)]
        self.selector, self.allocator, self.rollout_filter = components(self.setting, self.pool, self.seed, saved)

    def finish(self) -> dict[str, Any]:
        final = self.probe.binomial(TRANSITION_SAMPLES, self.learner.pass_rate(self.sample)) / TRANSITION_SAMPLES
        return self.rec.finish(transition_matrix(self.initial, final)[1])


def run(scenario: Scenario, setting: Setting, seed: int, world: World | None = None,
        resume_after: int | None = None) -> dict[str, Any]:
    """Train ``scenario.steps`` steps; returns the per-run record (curves, per-step metrics, transitions, and the
    components' ``ms_per_step``, the only entry that is not a function of the seed).
    ``resume_after``: after that step, rebuild the components from their saved state (a resumed run)."""
    r = Run(scenario, setting, seed, world)
    for step in range(1, scenario.steps + 1):
        counts, aimed, out, measured, seconds = r.choose(step, r.batch)
        r.learn(step, out, counts, aimed, measured, seconds)
        if step == resume_after:
            r.resume()
    return r.finish()


def _r(x: float) -> float:
    return round(float(x), 6)


class _Record:
    SERIES = ("etr", "degenerate", "kept_fraction", "replayed", "measured", "selected_p", "observed_p",
              "rollouts_per_task", "counts_std")

    def __init__(self, seed: int):
        self.seed = seed
        self.eval_steps, self.accuracy, self.score, self.pass_at_k = [], [], [], []
        self.series: dict[str, list[float]] = {k: [] for k in self.SERIES}
        self.seconds = {"selector": 0.0, "allocator": 0.0, "rollout_filter": 0.0}
        self.steps = 0

    def evaluate(self, step: int, learner: Learner, scenario: Scenario) -> None:
        """``eval_samples`` sampled rollouts per held-out task, as ``eval.evaluate`` scores them: avg@k, the mean
        verifier score and pass@k. The draws are common to every setting of a seed and step (paired comparisons
        see the policies' difference, not the draws')."""
        p = learner.held_out()
        draws = np.random.default_rng([self.seed, 4, step]).random((2, len(p), scenario.eval_samples))
        success = draws[0] < p[:, None]
        valid = success | (draws[1] < learner.config.partial_credit)
        score = np.where(success, 1.0, np.where(valid, PARTIAL_SCORE, 0.0)) if scenario.scores == "countdown" \
            else success.astype(np.float64)
        self.eval_steps.append(step)
        self.accuracy.append(_r(success.mean()))
        self.score.append(_r(score.mean()))
        self.pass_at_k.append(_r(success.any(axis=1).mean()))

    def step(self, out, counts: np.ndarray, kept: int, replayed: int, measured: int, selected_p: np.ndarray,
             seconds: dict[str, float]) -> None:
        s = self.series
        observed = task_pass_rates(out.group, out.reward)
        s["etr"].append(_r(effective_task_ratio(observed)))
        s["degenerate"].append(_r(degenerate_group_rate(out.group, out.reward)))
        s["kept_fraction"].append(_r(kept / len(out.task)))
        s["replayed"].append(float(replayed))
        s["measured"].append(float(measured))
        s["selected_p"].append(_r(selected_p.mean()))  # mean true pass rate of the chosen tasks
        s["observed_p"].append(_r(observed.mean()))  # ... and in their rollouts
        s["rollouts_per_task"].append(_r(counts.mean()))
        s["counts_std"].append(_r(np.std(counts)))
        for k, v in seconds.items():
            self.seconds[k] += v
        self.steps += 1

    def finish(self, transitions: np.ndarray) -> dict[str, Any]:
        return {"eval_steps": self.eval_steps, "accuracy": self.accuracy, "score": self.score,
                "pass_at_k": self.pass_at_k, **self.series, "transitions": transitions.tolist(),
                "ms_per_step": {k: 1e3 * v / max(self.steps, 1) for k, v in self.seconds.items()}}
