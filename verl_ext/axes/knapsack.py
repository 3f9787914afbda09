"""Knapsack-RL budget allocation (Li et al. 2025), the main baseline of CoBA-RL (Yao et al.) §3.1 / Table 1.

Value of ``N`` rollouts for a task of pass rate ``p``: ``V(N, p) = (1 - p^N - (1-p)^N)·p(1-p)²``
(probability of a non-degenerate group × information gain). Its marginal gain
``ΔV(N) = p(1-p)²·(p^N (1-p) + (1-p)^N p)`` is a sum of two geometric sequences, so it decreases in
``N`` and the greedy allocation is exact (tested against dynamic programming);
:func:`~verl_ext.axes.budget_solvers.table_allocate` computes it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verl_ext.axes.allocators import check_budget
from verl_ext.axes.base import BudgetAllocator, require_finite
from verl_ext.axes.budget_solvers import table_allocate
from verl_ext.axes.coba import TaskHistory
from verl_ext.axes.views import StepResults


def knapsack_value(counts: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``V(N, p)`` elementwise."""
    q = 1.0 - p
    return (1.0 - p**counts - q**counts) * p * q * q


def knapsack_gains(p: np.ndarray, low: int, high: int) -> np.ndarray:
    """``[len(p), high - low]`` table of ``ΔV(N) = V(N+1) - V(N)`` for ``N = low .. high-1``."""
    n = np.arange(low, high, dtype=np.float64)
    p, q = p[:, None], 1.0 - p[:, None]
    gains = (p**n * q + q**n * p) * p * q * q
    return np.minimum.accumulate(gains, axis=1)  # float rounding must not make a row increase


@dataclass(frozen=True)
class KnapsackAllocatorConfig:
    """Knapsack-RL: a task's ``p`` is its pass rate at its last visit, trusted once the task has had
    ``min_seen`` rollouts in all; a task without a trusted ``p`` gets the default ``total / tasks``
    (``rollout.n``), one with ``p`` in {0, 1} gets ``min_n``; the others share the rest exactly
    optimally within ``[min_n, max_n]``.

    **[decision]** Budget the rules leave over once every solved task is at ``max_n`` (e.g. a batch
    of only ``p`` in {0, 1}) goes round-robin, batch order, to the remaining tasks up to ``max_n``, so
    the step's budget is always spent exactly.
    """

    name: str = "knapsack"
    min_n: int = 2  # rollouts of tasks with p in {0, 1}; lower bound of the solved tasks
    max_n: int = 128
    min_seen: int = 8  # rollouts a task needs before its p is trusted

    def __post_init__(self):
        if int(self.min_n) != self.min_n or int(self.max_n) != self.max_n or not 1 <= self.min_n <= self.max_n:
            raise ValueError(f"allocator=knapsack: need integers 1 <= min_n <= max_n, got [{self.min_n}, {self.max_n}]")
        if self.min_seen < 1:
            raise ValueError(f"allocator=knapsack: min_seen={self.min_seen} must be >= 1")


class KnapsackAllocator(BudgetAllocator):
    stale_evidence = ("counted as fresh: pass rates enter the per-task history when their group trains [decision: "
                      "Knapsack-RL keeps each task's latest estimate, the paper is silent on age]")
    def __init__(self, config: KnapsackAllocatorConfig, seed: int):
        super().__init__(config, seed)
        self.history = TaskHistory(1)
        self._metrics: dict[str, float] = {}

    def allocate(self, step: int, tasks: np.ndarray, total: int) -> np.ndarray:
        c = self.config
        m = len(tasks)
        check_budget(m, total, c.min_n, c.max_n)
        p, seen = self.history.lookup(tasks)
        trusted = seen >= c.min_seen
        extreme = trusted & ((p == 0.0) | (p == 1.0))
        solved = trusted & ~extreme
        counts = np.where(extreme, c.min_n, total // m).astype(np.int64)  # total // m is within the bounds
        budget = total - int(counts[~solved].sum())
        n_solved = int(solved.sum())
        overflow = max(budget - n_solved * c.max_n, 0)
        if n_solved:
            counts[solved] = table_allocate(knapsack_gains(p[solved], c.min_n, c.max_n), c.min_n, c.max_n,
                                            budget - overflow)
        left = overflow
        while left > 0:
            open_ = np.flatnonzero(counts < c.max_n)[:left]
            counts[open_] += 1
            left -= len(open_)
        self._metrics = {"trusted_fraction": float(trusted.mean()), "extreme_fraction": float(extreme.mean()),
                         "overflow": float(overflow),
                         "value": float(knapsack_value(counts[solved], p[solved]).sum())}
        return counts

    def update(self, step: int, results: StepResults) -> None:
        require_finite(f"allocator={self.config.name}", step, reward=results.reward)
        self.history.record(results.per_task())

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict:
        return {"history": self.history.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.history.load_state_dict(state["history"])
