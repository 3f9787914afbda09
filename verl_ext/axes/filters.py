"""Rollout filters that need no paper: keep everything (stock verl), or drop degenerate groups."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verl_ext.axes.base import RolloutFilter, require_finite
from verl_ext.axes.views import GroupRewards


@dataclass(frozen=True)
class KeepAllFilterConfig:
    """Every rollout reaches the actor update: stock verl."""

    name: str = "keep_all"


class KeepAllFilter(RolloutFilter):
    stale_evidence = "not read: keeps every rollout"

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
    stale_evidence = "not read: decides on each group's own rewards, whatever their age"

    def select(self, step: int, rollouts) -> np.ndarray:
        require_finite(f"rollout_filter={self.config.name}", step, reward=rollouts.reward)
        groups = GroupRewards.of(rollouts.group, rollouts.reward)
        degenerate = groups.degenerate if self.config.drop == "all_equal" else (groups.high <= 0)
        keep_group = ~degenerate
        if keep_group.sum() < self.config.min_keep:
            keep_group[np.flatnonzero(degenerate)[: self.config.min_keep - keep_group.sum()]] = True
        return np.flatnonzero(keep_group[groups.inverse])


@dataclass(frozen=True)
class DapoDynamicFilterConfig:
    """DAPO's dynamic sampling: the step generated ``oversample`` x the groups it trains on; groups whose
    rewards are all equal are dropped, and the first ``ceil(groups / oversample)`` that remain (in the
    step's order) are kept: fewer when too few remain, none (the update is skipped) when all are degenerate."""

    name: str = "dapo_dynamic"
    oversample: int = 3

    def __post_init__(self):
        if isinstance(self.oversample, bool) or int(self.oversample) != self.oversample or self.oversample < 1:
            raise ValueError(f"rollout_filter=dapo_dynamic: oversample={self.oversample!r} must be an integer >= 1")


class DapoDynamicFilter(RolloutFilter):
    stale_evidence = "not read: decides on each group's own rewards, whatever their age"

    def select(self, step: int, rollouts) -> np.ndarray:
        require_finite(f"rollout_filter={self.config.name}", step, reward=rollouts.reward)
        groups = GroupRewards.of(rollouts.group, rollouts.reward)
        target = -(-len(groups.ids) // self.config.oversample)
        informative = np.flatnonzero(~groups.degenerate)
        keep = np.zeros(len(groups.ids), dtype=bool)
        keep[informative[np.argsort(groups.first[informative], kind="stable")][:target]] = True
        self._metrics = {"groups": float(len(groups.ids)), "informative_groups": float(len(informative)),
                         "kept_groups": float(keep.sum()), "target_groups": float(target)}
        return np.flatnonzero(keep[groups.inverse])

    def metrics(self) -> dict[str, float]:
        return dict(getattr(self, "_metrics", {}))
