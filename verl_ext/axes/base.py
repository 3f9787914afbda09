"""The three axes of data selection, each a small framework-free component.

* :class:`TaskSelector`: which tasks (stable dataset indices) a step generates for;
* :class:`BudgetAllocator`: how many rollouts each selected task gets;
* :class:`RolloutFilter`: which scored rollouts reach the actor update.

Each is built from one config dataclass, learns from :class:`~verl_ext.axes.views.StepResults`
after reward, and round-trips its state through ``state_dict()`` / ``load_state_dict()`` (saved with
verl checkpoints), so a resumed run chooses exactly what an uninterrupted run would.
"""

from __future__ import annotations

import abc
from typing import Any, Optional

import numpy as np

from verl_ext.axes.views import RolloutView, StepResults, TaskPool


def require_finite(component: str, step: int, **fields: Optional[np.ndarray]) -> None:
    """Refuse NaN / inf in the named input ``fields`` (None: not given) with an error naming the component, the
    step and the field: one NaN would otherwise spread through a learned state, or count silently as a failure."""
    for field, values in fields.items():
        if values is None:
            continue
        values = np.asarray(values, dtype=np.float64).ravel()
        bad = np.flatnonzero(~np.isfinite(values))
        if len(bad):
            raise ValueError(f"{component}: step {step} has {len(bad)} non-finite {field} of {len(values)}, e.g. "
                             f"{values[bad[:3]].tolist()} at positions {bad[:3].tolist()}")


class Stateful(abc.ABC):
    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            raise ValueError(f"{type(self).__name__} has no state, got keys {sorted(state)}")


class TaskSelector(Stateful):
    def __init__(self, config, pool: TaskPool, seed: int):
        self.config, self.pool, self.seed = config, pool, seed

    @abc.abstractmethod
    def select(self, step: int, batch_size: int) -> np.ndarray:
        """Stable indices of the ``batch_size`` tasks to generate for at ``step``."""

    def update(self, step: int, results: StepResults) -> None:
        """Learn from the scored rollouts of ``step``."""

    def measurement(self, step: int) -> np.ndarray:
        """Stable indices of tasks to roll out **for measurement only** before this step's :meth:`select`: the
        trainer rolls them out with the current policy, scores them, passes them to :meth:`measure` and never trains
        on them (DOTS's reference set). None by default."""
        return np.zeros(0, dtype=np.int64)

    def measure(self, step: int, results: StepResults) -> None:
        """The scored rollouts of the tasks :meth:`measurement` named at ``step``."""
        raise NotImplementedError(f"{type(self).__name__} names no measurement tasks, so it measures nothing")

    def metrics(self) -> dict[str, float]:
        """Scalars about the last ``select`` / ``update``, logged as ``data_selection/selector/<key>``."""
        return {}

    def check_task_pool(self, state: dict[str, Any]) -> None:
        """Refuse a checkpoint ``state`` whose ``index`` (the task pool it was saved with) is not this pool's: its
        per-task arrays would describe other tasks."""
        if not np.array_equal(np.asarray(state["index"]), self.pool.index):
            raise ValueError(f"selector={self.config.name}: the checkpoint's task pool differs from the training data "
                             "(extra_info.index); resume with the same train_files")


class BudgetAllocator(Stateful):
    def __init__(self, config, seed: int):
        self.config, self.seed = config, seed

    @abc.abstractmethod
    def allocate(self, step: int, tasks: np.ndarray, total: int) -> np.ndarray:
        """Rollouts per task (int64, same order as ``tasks``), summing exactly to ``total``."""

    def update(self, step: int, results: StepResults) -> None:
        """Learn from the scored rollouts of ``step``."""

    def metrics(self) -> dict[str, float]:
        """Scalars about the last ``allocate`` / ``update``, logged as ``data_selection/allocator/<key>``."""
        return {}


def step_budget(budget: int, tasks: int, batch: int) -> int:
    """Rollouts of a step with ``tasks`` of the ``batch`` prompts a full step has: the run's budget, scaled down
    (rounded, at least one per task) when the selector chose fewer [decision: rollouts per prompt stay as set]."""
    return budget if tasks == batch else max(tasks, round(budget * tasks / batch))


class RolloutFilter(Stateful):
    """Chooses the rollouts of the actor update. A filter that replays (CBS) also keeps rollouts across
    steps: after each ``select`` it names, by stable id (:attr:`RolloutView.rollout_id`), the stored
    rollouts that train at this step too (:meth:`replay`) and every rollout the trainer must hold for
    later steps (:meth:`stored`); the trainer owns their tensors (:mod:`verl_ext.trainer.replay`)."""

    replays = False  # keeps rollouts across steps (replay / stored are used)
    needs_clip_fraction = False  # observe_update must carry clip fractions by the active loss's rule
    # observe_update's entropy is a feature: measured at each rollout's latest use, so a replayed rollout's is
    # re-measured under the policy that replays it (not the one it carried from generation)
    needs_entropy = False
    # how replayed rollouts enter the loss: "stored" (their old log-probs = the generating policy's: ratio and clip
    # against it) or "decoupled" (old log-probs recomputed by the current policy before the update, clip around
    # them, each token weighted by exp(recomputed - stored): verl's rollout_is_weights)
    replay_correction = "stored"

    def __init__(self, config, seed: int):
        self.config, self.seed = config, seed

    def begin_step(self, step: int, rollouts: RolloutView) -> None:
        """Every rollout the step generated, before any filter (``select`` may see fewer, after prefilters)."""

    @abc.abstractmethod
    def select(self, step: int, rollouts: RolloutView) -> np.ndarray:
        """Positions (into ``rollouts``, this step's rollouts) of those that reach the actor update."""

    def filter_step(self, step: int, rollouts: RolloutView) -> np.ndarray:
        """The trainer's call: :meth:`begin_step` then :meth:`select` on all of the step's rollouts."""
        self.begin_step(step, rollouts)
        return self.select(step, rollouts)

    def replay(self) -> np.ndarray:
        """Ids of stored rollouts of earlier steps that the last ``select`` sends to the actor update too."""
        return np.zeros(0, dtype=np.int64)

    def stored(self) -> np.ndarray:
        """Ids of the rollouts (this step's and earlier) to keep after the last ``select``; others are dropped."""
        return np.zeros(0, dtype=np.int64)

    def observe_update(self, step: int, rollout_id: np.ndarray, entropy: np.ndarray, clip_fraction: np.ndarray) -> None:
        """Per-rollout mean token entropy and clip fraction of the rollouts (by id) the update trained on; ``entropy``
        is None when nothing computed it (no entropy bonus and no old-log-prob pass: rollout-correction bypass)."""

    def metrics(self) -> dict[str, float]:
        """Scalars about the last ``select``, logged as ``data_selection/rollout_filter/<key>``."""
        return {}
