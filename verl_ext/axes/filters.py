"""Rollout filters that need no paper: keep everything (stock verl), or drop degenerate groups."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verl_ext.axes.base import RolloutFilter


@dataclass(frozen=True)
class KeepAllFilterConfig:
    """Every rollout reaches the actor update: stock verl."""

    name: str = "keep_all"


class KeepAllFilter(RolloutFilter):
    def select(self, step: int, rollouts) -> np.ndarray:
        return np.arange(len(rollouts))


@dataclass(frozen=True)
class DegenerateGroupFilterConfig:
    """Drop the groups whose rewards are all equal (``drop=all_equal``: no GRPO signal) or all failed
    (``drop=all_wrong``: ADS's code). When every group is degenerate nothing is kept and the trainer skips the
    actor update (``data_selection/actor_update_skipped``); ``min_keep`` > 0 keeps that many groups (the first
    ones) anyway."""

    name: str = "drop_degenerate"
    drop: str = "all_equal"
    min_keep: int = 0

    def __post_init__(self):
        if self.drop not in ("all_equal", "all_wrong"):
            raise ValueError(f"drop must be 'all_equal' or 'all_wrong', got {self.drop!r}")


class DegenerateGroupFilter(RolloutFilter):
    def select(self, step: int, rollouts) -> np.ndarray:
        groups, inverse = np.unique(rollouts.group, return_inverse=True)
        high = np.full(len(groups), -np.inf)
        low = np.full(len(groups), np.inf)
        np.maximum.at(high, inverse, rollouts.reward)
        np.minimum.at(low, inverse, rollouts.reward)
        degenerate = (high == low) if self.config.drop == "all_equal" else (high <= 0)
        keep_group = ~degenerate
        if keep_group.sum() < self.config.min_keep:
            keep_group[np.flatnonzero(degenerate)[: self.config.min_keep - keep_group.sum()]] = True
        return np.flatnonzero(keep_group[inverse])
