"""Plain NumPy views that the three axes exchange with the trainer glue (no verl, no torch).

Every per-task quantity is keyed by the stable dataset index (``extra_info.index``), never by verl's
per-step ``uid``. :class:`GroupRewards` holds the one definition of a degenerate group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike


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
class GroupRewards:
    """Lowest and highest reward of each rollout group (the rollouts of one prompt in one step), groups sorted by id.

    A group is **degenerate** when all its rewards are equal (exactly ``min == max``; one rollout included): its
    group-relative advantage is zero, so it gives GRPO / RLOO no signal. This is the only definition: the step
    statistics, the progress selectors, the rollout filters, the trainer's ``data_selection/degenerate_group_rate``
    and ``eval.metrics.degenerate_group_rate`` all read it. No variance threshold: a variance computed as
    ``E[r²] − E[r]²`` is 3.5e-18, not 0, for eight rewards of 0.1.
    """

    ids: np.ndarray  # [G] distinct group ids, sorted
    inverse: np.ndarray  # int64 [R], each reward's position in ids
    first: np.ndarray  # int64 [G], position of each group's first reward
    low: np.ndarray  # float [G]
    high: np.ndarray  # float [G]

    @classmethod
    def of(cls, group: ArrayLike, reward: ArrayLike) -> "GroupRewards":
        group, reward = np.asarray(group), np.asarray(reward, dtype=np.float64)
        if group.shape != reward.shape or group.ndim != 1:
            raise ValueError(f"one group id per reward: got {group.shape} ids for {reward.shape} rewards")
        ids, first, inverse = np.unique(group, return_index=True, return_inverse=True)
        low, high = np.full(len(ids), np.inf), np.full(len(ids), -np.inf)
        np.minimum.at(low, inverse, reward)
        np.maximum.at(high, inverse, reward)
        return cls(ids, inverse.astype(np.int64), first.astype(np.int64), low, high)

    @property
    def degenerate(self) -> np.ndarray:
        """bool [G]: all rewards of the group equal."""
        return self.low == self.high


@dataclass(frozen=True)
class StepResults:
    """Scored rollouts of one step: one entry per rollout."""

    task_index: np.ndarray  # int64 [R], stable task index of each rollout
    reward: np.ndarray  # float [R], the verifier score
    success: np.ndarray  # bool [R], reward counts as a success (score >= 1)
    format_valid: np.ndarray | None = None  # bool [R], the verifier's well-formed-answer flag (None: not reported)
    # the evidence's age (asynchronous training; None: generated for this step by the policy it trains, as in sync)
    submit_step: np.ndarray | None = None  # int64 [R], the step each rollout's prompt was submitted at
    weight_version: np.ndarray | None = None  # int64 [R, 2], oldest and newest policy version that generated it

    @classmethod
    def from_rewards(cls, task_index, reward, success_threshold: float = 1.0) -> "StepResults":
        reward = np.asarray(reward, dtype=np.float64)
        return cls(np.asarray(task_index, dtype=np.int64), reward, reward >= success_threshold)

    def lag(self, step: int) -> np.ndarray:
        """int64 [R]: policy updates between the oldest weights that generated each rollout and the policy trained at
        ``step`` (version ``step - 1``: verl's ``trajectory_staleness_worst``); 0 throughout a synchronous run."""
        if self.weight_version is None:
            return np.zeros(len(self.reward), dtype=np.int64)
        versions = np.asarray(self.weight_version, dtype=np.int64)
        if versions.shape != (len(self.reward), 2) or np.any(versions[:, 0] > versions[:, 1]):
            raise ValueError(f"step {step}: weight_version must hold (oldest, newest) per rollout, got shape "
                             f"{versions.shape} for {len(self.reward)} rollouts")
        lag = (step - 1) - versions[:, 0]
        if np.any(lag < 0):
            bad = np.flatnonzero(lag < 0)[:3]
            raise ValueError(f"step {step}: rollouts at positions {bad.tolist()} report weight versions "
                             f"{versions[bad, 0].tolist()}, newer than the policy being trained (version {step - 1})")
        return lag

    def per_task(self) -> "TaskStats":
        """Each task's rollouts of the step taken as one group (:class:`GroupRewards`)."""
        groups = GroupRewards.of(self.task_index, self.reward)
        tasks, inverse = groups.ids, groups.inverse
        counts = np.bincount(inverse, minlength=len(tasks))
        successes = np.bincount(inverse, weights=self.success.astype(np.float64), minlength=len(tasks))
        mean = np.bincount(inverse, weights=self.reward, minlength=len(tasks)) / counts
        var = np.bincount(inverse, weights=(self.reward - mean[inverse]) ** 2, minlength=len(tasks)) / counts
        degenerate = groups.degenerate
        return TaskStats(tasks, counts, successes, mean, np.where(degenerate, 0.0, var), degenerate)


@dataclass(frozen=True)
class TaskStats:
    """Per-task aggregates of a step (tasks sorted by index)."""

    index: np.ndarray  # int64 [T]
    n: np.ndarray  # int64 [T], rollouts
    successes: np.ndarray  # float [T]
    mean_reward: np.ndarray  # float [T]
    reward_var: np.ndarray  # float [T], population variance within the task (two-pass; exactly 0 when degenerate)
    degenerate: np.ndarray  # bool [T], all the task's rewards equal (GroupRewards.degenerate)

    @property
    def pass_rate(self) -> np.ndarray:
        return self.successes / self.n


ROLLOUT_ID_STRIDE = 1 << 32


def rollout_ids(step: int, count: int, start: int = 0) -> np.ndarray:
    """Stable ids of a step's ``count`` rollouts: ``step * 2**32 + position`` (the same on a resumed run); ``start``:
    the step's rollouts numbered before these (earlier local updates of one weight sync)."""
    return np.int64(step) * ROLLOUT_ID_STRIDE + start + np.arange(count, dtype=np.int64)


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
    # int64 [R], policy updates between the oldest weights that generated each rollout and the policy it trains
    # (StepResults.lag: asynchronous training); None: generated by that policy, as in synchronous training
    lag: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.task_index)

    def take(self, positions: np.ndarray) -> "RolloutView":
        """The rollouts at ``positions``, in that order."""
        p = np.asarray(positions, dtype=np.int64)
        pick = lambda a: None if a is None else a[p]  # noqa: E731
        return RolloutView(self.task_index[p], self.group[p], self.reward[p], self.advantage[p],
                           self.response_length[p], pick(self.entropy), self.max_response_length, pick(self.rollout_id),
                           pick(self.lag))

    @property
    def truncated(self) -> np.ndarray:
        """Responses that reached ``max_response_length`` (verl's ``response_length/clip_ratio`` rule)."""
        if self.max_response_length <= 0:
            raise ValueError("RolloutView.max_response_length is unknown: truncation cannot be told")
        return self.response_length >= self.max_response_length
