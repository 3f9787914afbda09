"""Rollout filters in sequence (``data_selection.prefilters`` then ``rollout_filter``): each sees the
rollouts the previous one kept, e.g. DAPO's dynamic sampling, then CBS. Only the last may replay."""

from __future__ import annotations

from typing import Any

import numpy as np

from verl_ext.axes.base import RolloutFilter
from verl_ext.axes.views import RolloutView


class FilterChain(RolloutFilter):
    def __init__(self, filters: list[RolloutFilter]):
        if not filters:
            raise ValueError("a filter chain needs at least one filter")
        early = [type(f).__name__ for f in filters[:-1] if f.replays]
        if early:
            raise ValueError(f"only the last rollout filter may replay rollouts across steps; {early} come earlier "
                             "(put the replaying filter in rollout_filter, the others in data_selection.prefilters)")
        super().__init__(None, 0)
        self.filters = filters
        self.replays = filters[-1].replays
        self.replay_correction = filters[-1].replay_correction
        self.needs_clip_fraction = any(f.needs_clip_fraction for f in filters)
        self.needs_entropy = any(f.needs_entropy for f in filters)
        rules = [f.stale_evidence for f in filters]
        self.stale_evidence = None if None in rules else "; ".join(f"{type(f).__name__}: {r}" for f, r in
                                                                    zip(filters, rules))
        self._metrics: dict[str, float] = {}

    def begin_step(self, step: int, rollouts: RolloutView) -> None:
        for f in self.filters:
            f.begin_step(step, rollouts)

    def select(self, step: int, rollouts: RolloutView) -> np.ndarray:
        positions = np.arange(len(rollouts), dtype=np.int64)
        self._metrics = {}
        for i, f in enumerate(self.filters):
            chosen = np.asarray(f.select(step, rollouts.take(positions)), dtype=np.int64)
            if len(chosen) and (chosen.min() < 0 or chosen.max() >= len(positions)):
                raise RuntimeError(f"rollout filter {type(f).__name__} returned positions out of range "
                                   f"[0, {len(positions)}): {chosen.tolist()[:8]}")
            positions = positions[chosen]
            prefix = "" if i == len(self.filters) - 1 else f"{f.name}/"
            self._metrics.update({prefix + k: v for k, v in f.metrics().items()})
            self._metrics[f"{prefix}kept"] = float(len(positions))
        return positions

    def replay(self) -> np.ndarray:
        return self.filters[-1].replay()

    def stored(self) -> np.ndarray:
        return self.filters[-1].stored()

    def expire(self, step: int, ids: np.ndarray) -> None:
        self.filters[-1].expire(step, ids)

    def observe_update(self, step, rollout_id, entropy, clip_fraction) -> None:
        for f in self.filters:
            f.observe_update(step, rollout_id, entropy, clip_fraction)

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict[str, Any]:
        return {"filters": [f.state_dict() for f in self.filters]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if len(state["filters"]) != len(self.filters):
            raise ValueError(f"checkpoint holds {len(state['filters'])} rollout filters, this run has {len(self.filters)}")
        for f, s in zip(self.filters, state["filters"]):
            f.load_state_dict(s)
