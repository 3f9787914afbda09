"""Budget allocators that need no paper: a fixed n per task (stock GRPO) and a variance-proportional
split (more rollouts where the last observed pass rate is near 1/2)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verl_ext.axes.base import BudgetAllocator, require_finite


def check_budget(n_tasks: int, total: int, low: int, high: int) -> None:
    """Fail clearly on a budget no allocation within [low, high] per task can meet."""
    if int(total) != total or int(low) != low or int(high) != high:
        raise ValueError(f"budgets must be integers, got total={total}, bounds=[{low}, {high}]")
    if not 1 <= low <= high:
        raise ValueError(f"need 1 <= min_n <= max_n, got [{low}, {high}]")
    if not n_tasks * low <= total <= n_tasks * high:
        raise ValueError(f"total rollouts {total} outside [{n_tasks}*{low}, {n_tasks}*{high}] for {n_tasks} tasks")


@dataclass(frozen=True)
class FixedAllocatorConfig:
    """Every task gets ``total / tasks`` rollouts (``actor_rollout_ref.rollout.n``): stock GRPO."""

    name: str = "fixed"


class FixedAllocator(BudgetAllocator):
    stale_evidence = "not read: the counts do not depend on results"

    def allocate(self, step: int, tasks: np.ndarray, total: int) -> np.ndarray:
        if total % len(tasks):
            raise ValueError(f"fixed allocator: total {total} is not a multiple of {len(tasks)} tasks")
        return np.full(len(tasks), total // len(tasks), dtype=np.int64)


@dataclass(frozen=True)
class VarianceAllocatorConfig:
    """Rollouts proportional to ``p(1-p) + floor`` of each task's last observed pass rate ``p`` (unseen
    tasks count as ``p = 0.5``), within ``[min_n, max_n]``, rounded by largest remainder."""

    name: str = "variance"
    min_n: int = 2
    max_n: int = 16
    floor: float = 0.05


class VarianceAllocator(BudgetAllocator):
    stale_evidence = ("counted as fresh: a task's last pass rate is its latest trained group, whatever its age "
                      "[decision: the only evidence the rule keeps]")
    def __init__(self, config: VarianceAllocatorConfig, seed: int):
        super().__init__(config, seed)
        self._last_pass_rate: dict[int, float] = {}

    def allocate(self, step: int, tasks: np.ndarray, total: int) -> np.ndarray:
        c = self.config
        check_budget(len(tasks), total, c.min_n, c.max_n)
        p = np.array([self._last_pass_rate.get(int(t), 0.5) for t in tasks])
        weight = p * (1 - p) + c.floor
        counts = np.full(len(tasks), c.min_n, dtype=np.int64)
        spare = total - counts.sum()
        while spare > 0:  # water-filling: share the spare by weight among tasks below max_n
            open_ = counts < c.max_n
            share = weight * open_ / (weight * open_).sum() * spare
            room = c.max_n - counts
            add = np.minimum(np.floor(share).astype(np.int64), room)
            if add.sum() == 0:  # hand out single rollouts by largest remainder (ties: lower position)
                order = np.lexsort((np.arange(len(tasks)), -(share - np.floor(share))))
                add = np.zeros_like(counts)
                add[[i for i in order if open_[i]][:spare]] = 1
            counts += add
            spare = total - counts.sum()
        return counts

    def update(self, step: int, results) -> None:
        require_finite(f"allocator={self.config.name}", step, reward=results.reward)
        stats = results.per_task()
        self._last_pass_rate.update(zip(stats.index.tolist(), stats.pass_rate.tolist()))

    def state_dict(self) -> dict:
        return {"last_pass_rate": dict(self._last_pass_rate)}

    def load_state_dict(self, state: dict) -> None:
        self._last_pass_rate = {int(k): float(v) for k, v in state["last_pass_rate"].items()}
