"""CBS* (SPEC.md §2, paper 001): the contextual-bandit scheduler choosing, each step, ``keep_fraction`` of
the step's own rollouts (pooled over groups) for the actor update.

The candidates are the step's fresh rollouts, so usage count, age and clip fraction are 0 and the entropy
feature is the old-log-prob pass's; the round's ``V`` / ``E`` are the mean reward and mean token entropy of
all of them. The replay variant (a buffer across steps, ``cbs``) needs the replay interface of the rollout-filter
axis and is not here yet. The scheduler itself: :mod:`verl_ext.axes.cbs_scheduler`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from verl_ext.axes.base import RolloutFilter
from verl_ext.axes.cbs_scheduler import FEATURES, CbsScheduler, CbsSchedulerConfig
from verl_ext.axes.types import RolloutView


@dataclass(frozen=True)
class CbsStarFilterConfig(CbsSchedulerConfig):
    """CBS*: K = ``keep_fraction`` of the step's rollouts (at least one); the scheduler's fields as inherited."""

    name: str = "cbs_star"
    keep_fraction: float = 0.3

    def __post_init__(self):
        super().__post_init__()
        if not 0.0 < self.keep_fraction <= 1.0:
            raise ValueError(f"rollout_filter=cbs_star: keep_fraction={self.keep_fraction} must lie in (0, 1]")

    def scheduler(self) -> CbsSchedulerConfig:
        return CbsSchedulerConfig(**{f.name: getattr(self, f.name) for f in fields(CbsSchedulerConfig)})


def rollout_features(view: RolloutView, usage: np.ndarray | None = None, age: np.ndarray | None = None,
                     clip_fraction: np.ndarray | None = None) -> np.ndarray:
    """The ``[R, 10]`` feature matrix of :data:`FEATURES` for the rollouts of ``view``; group statistics are
    over each rollout's own group (population std); usage, age and clip fraction default to 0 (fresh)."""
    if view.entropy is None:
        raise ValueError("CBS needs each rollout's mean token entropy (RolloutView.entropy) from the old-log-prob pass")
    groups, inverse = np.unique(view.group, return_inverse=True)
    size = np.bincount(inverse).astype(np.float64)
    mean = np.bincount(inverse, weights=view.reward) / size
    var = np.bincount(inverse, weights=view.reward**2) / size - mean**2
    zeros = np.zeros(len(view))
    columns = {
        "reward": view.reward, "advantage": view.advantage, "group_mean": mean[inverse],
        "group_std": np.sqrt(np.maximum(var, 0.0))[inverse],
        "length_fraction": view.response_length / float(view.max_response_length),
        "truncated": view.truncated.astype(np.float64), "entropy": view.entropy,
        "clip_fraction": zeros if clip_fraction is None else clip_fraction,
        "usage": zeros if usage is None else usage, "age": zeros if age is None else age,
    }
    return np.stack([np.asarray(columns[f], dtype=np.float64) for f in FEATURES], axis=1)


class CbsStarFilter(RolloutFilter):
    def __init__(self, config: CbsStarFilterConfig, seed: int):
        super().__init__(config, seed)
        self.scheduler = CbsScheduler(config.scheduler(), seed)

    def select(self, step: int, rollouts: RolloutView) -> np.ndarray:
        features = rollout_features(rollouts)
        self.scheduler.begin_round(float(np.mean(rollouts.reward)), float(np.mean(rollouts.entropy)))
        k = max(1, int(round(self.config.keep_fraction * len(rollouts))))
        # all candidates are of this round: "newest first" is their order in the step
        return self.scheduler.select(step, features, np.arange(len(rollouts)), k, rollouts.advantage)

    def metrics(self) -> dict[str, float]:
        return self.scheduler.metrics()

    def state_dict(self) -> dict[str, Any]:
        return {"scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(state["scheduler"])
