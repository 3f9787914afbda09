"""Plain NumPy views that the three axes exchange with the trainer glue (no verl, no torch).

Every per-task quantity is keyed by the stable dataset index (``extra_info.index``), never by verl's
per-step ``uid``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class TaskPool:
    """The training tasks: stable indices in dataset order, plus metadata columns from ``extra_info``."""

    index: np.ndarray  # int64 [N], unique
    columns: dict[str, np.ndarray] = field(default_factory=dict)  # each [N]

    def __post_init__(self):
        index = np.asarray(self.index, dtype=np.int64)
        if len(np.unique(index)) != len(index):
            raise ValueError("TaskPool.index must be unique (extra_info.index)")
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "_order", np.argsort(index, kind="stable"))  # for positions(), once
        for name, col in self.columns.items():
            if len(col) != len(index):
                raise ValueError(f"column {name!r} has {len(col)} values for {len(index)} tasks")

    def __len__(self) -> int:
        return len(self.index)

    def positions(self, indices: np.ndarray) -> np.ndarray:
        """Dataset positions of stable indices (raises ``KeyError`` on an unknown index)."""
        order = self._order
        pos = order[np.clip(np.searchsorted(self.index, indices, sorter=order), 0, len(order) - 1)]
        bad = self.index[pos] != indices
        if np.any(bad):
            raise KeyError(f"unknown task indices {np.asarray(indices)[bad][:5].tolist()}")
        return pos

    def column(self, name: str) -> np.ndarray:
        if name not in self.columns:
            raise KeyError(f"the dataset has no extra_info column {name!r} (have: {sorted(self.columns)})")
        return self.columns[name]


@dataclass(frozen=True)
class StepResults:
    """Scored rollouts of one step: one entry per rollout."""

    task_index: np.ndarray  # int64 [R], stable task index of each rollout
    reward: np.ndarray  # float [R], the verifier score
    success: np.ndarray  # bool [R], reward counts as a success (score >= 1)
    format_valid: np.ndarray | None = None  # bool [R], the verifier's well-formed-answer flag (None: not reported)

    @classmethod
    def from_rewards(cls, task_index, reward, success_threshold: float = 1.0) -> "StepResults":
        reward = np.asarray(reward, dtype=np.float64)
        return cls(np.asarray(task_index, dtype=np.int64), reward, reward >= success_threshold)

    def per_task(self) -> "TaskStats":
        tasks, inverse, counts = np.unique(self.task_index, return_inverse=True, return_counts=True)
        successes = np.bincount(inverse, weights=self.success.astype(np.float64), minlength=len(tasks))
        reward_sum = np.bincount(inverse, weights=self.reward, minlength=len(tasks))
        reward_sq = np.bincount(inverse, weights=self.reward**2, minlength=len(tasks))
        mean = reward_sum / counts
        return TaskStats(tasks, counts, successes, mean, np.maximum(reward_sq / counts - mean**2, 0.0))


@dataclass(frozen=True)
class TaskStats:
    """Per-task aggregates of a step (tasks sorted by index)."""

    index: np.ndarray  # int64 [T]
    n: np.ndarray  # int64 [T], rollouts
    successes: np.ndarray  # float [T]
    mean_reward: np.ndarray  # float [T]
    reward_var: np.ndarray  # float [T], population variance within the task

    @property
    def pass_rate(self) -> np.ndarray:
        return self.successes / self.n


ROLLOUT_ID_STRIDE = 1 << 32


def rollout_ids(step: int, count: int) -> np.ndarray:
    """Stable ids of a step's ``count`` rollouts: ``step * 2**32 + position`` (the same on a resumed run)."""
    return np.int64(step) * ROLLOUT_ID_STRIDE + np.arange(count, dtype=np.int64)


@dataclass(frozen=True)
class RolloutView:
    """What a rollout filter sees of the step's candidate rollouts (after reward and advantage)."""

    task_index: np.ndarray  # int64 [R]
    group: np.ndarray  # int64 [R], rollouts of the same prompt instance share a group id
    reward: np.ndarray  # float [R]
    advantage: np.ndarray  # float [R], sequence-level advantage
    response_length: np.ndarray  # int64 [R]
    entropy: np.ndarray | None = None  # float [R], mean token entropy from the old-log-prob pass (None: not computed)
    max_response_length: int = 0  # data.max_response_length (0: unknown)
    rollout_id: np.ndarray | None = None  # int64 [R], unique over the run (see rollout_ids); None: not assigned

    def __len__(self) -> int:
        return len(self.task_index)

    def take(self, positions: np.ndarray) -> "RolloutView":
        """The rollouts at ``positions``, in that order."""
        p = np.asarray(positions, dtype=np.int64)
        pick = lambda a: None if a is None else a[p]  # noqa: E731
        return RolloutView(self.task_index[p], self.group[p], self.reward[p], self.advantage[p],
                           self.response_length[p], pick(self.entropy), self.max_response_length, pick(self.rollout_id))

    @property
    def truncated(self) -> np.ndarray:
        """Responses that reached ``max_response_length`` (verl's ``response_length/clip_ratio`` rule)."""
        if self.max_response_length <= 0:
            raise ValueError("RolloutView.max_response_length is unknown: truncation cannot be told")
        return self.response_length >= self.max_response_length
