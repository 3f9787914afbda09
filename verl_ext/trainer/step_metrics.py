"""Per-step ``data_selection/*`` metrics (scalars only: verl's aggregator drops anything else)."""

from __future__ import annotations

import numpy as np

from verl_ext.axes import RolloutView, StepResults
from verl_ext.axes.views import GroupRewards

PREFIX = "data_selection/"
# Rollouts-per-task histogram bins (power-of-two ranges; the last is open): 1, 2-3, 4-7, ..., 128+
COUNT_BINS = (1, 2, 4, 8, 16, 32, 64, 128)


def count_histogram(counts: np.ndarray) -> dict[str, float]:
    """Fraction of the step's tasks per rollout-count bin, as ``rollouts_per_task/hist/<lo>-<hi>``."""
    counts = np.asarray(counts)
    edges = list(COUNT_BINS) + [np.inf]
    out = {}
    for lo, hi in zip(edges[:-1], edges[1:]):
        name = f"{lo}+" if hi == np.inf else (str(lo) if hi == lo + 1 else f"{lo}-{int(hi) - 1}")
        out[f"{PREFIX}rollouts_per_task/hist/{name}"] = float(np.mean((counts >= lo) & (counts < hi)))
    return out


def selection_metrics(results: StepResults, view: RolloutView, counts: np.ndarray, kept: np.ndarray,
                      components: dict[str, dict[str, float]]) -> dict[str, float]:
    """``results``/``view``: this step's scored rollouts; ``counts``: rollouts allocated per selected
    task; ``kept``: positions the rollout filter passed to the actor update; ``components``: each
    axis's own scalars by axis name (``TaskSelector.metrics``, ``BudgetAllocator.metrics``)."""
    stats = results.per_task()
    pass_rate = stats.pass_rate
    counts = np.asarray(counts, dtype=np.float64)
    return {
        PREFIX + "effective_task_ratio": float(np.mean((pass_rate > 0) & (pass_rate < 1))),
        PREFIX + "degenerate_group_rate": float(np.mean(GroupRewards.of(view.group, view.reward).degenerate)),
        PREFIX + "selected_pass_rate_mean": float(np.mean(pass_rate)),
        PREFIX + "rollouts_per_task/min": float(counts.min()),
        PREFIX + "rollouts_per_task/mean": float(counts.mean()),
        PREFIX + "rollouts_per_task/max": float(counts.max()),
        PREFIX + "rollouts_per_task/std": float(counts.std()),
        **count_histogram(counts),
        PREFIX + "filter_kept_fraction": len(kept) / len(view),
        **{f"{PREFIX}{axis}/{k}": float(v) for axis, scalars in components.items() for k, v in scalars.items()},
    }
