"""Rollout replay of DOTS+RR (the ADS paper's baseline; Sun et al. 2025, "rollout replay"): a FIFO buffer of recent
informative rollouts, part of each actor update drawn from it at random.

Every rollout of the step trains; rollouts with a non-zero advantage enter the buffer (the newest ``capacity``
are kept), and ``fraction`` of the update's rows are replayed from what earlier steps stored:
``round(fraction / (1 - fraction) * fresh)`` of them, uniformly without replacement, fewer when the buffer holds
fewer. Replayed rollouts train with their stored old log-probs (an off-policy ratio) and generation-time
advantages (:mod:`verl_ext.trainer.replay`). **[decision]** the paper's method section was not available here:
the informative-only buffer, uniform sampling and the default fraction are reconstructed, not checked against the
authors' code; the paper generates ``(1 - fraction) x`` the prompts of a batch, which is ``data.train_batch_size``
here. Composes with any selector: ``selector=dots rollout_filter=replay_fifo``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from verl_ext.axes.base import RolloutFilter
from verl_ext.axes.types import RolloutView


@dataclass(frozen=True)
class ReplayFifoFilterConfig:
    """A buffer of the latest ``capacity`` informative rollouts; ``fraction`` of each update replayed from it."""

    name: str = "replay_fifo"
    capacity: int = 2048
    fraction: float = 0.5

    def __post_init__(self):
        if self.capacity < 1 or not 0.0 <= self.fraction < 1.0:
            raise ValueError(f"rollout_filter=replay_fifo: capacity={self.capacity} must be >= 1 and "
                             f"fraction={self.fraction} in [0, 1)")


class ReplayFifoFilter(RolloutFilter):
    replays = True

    def __init__(self, config: ReplayFifoFilterConfig, seed: int):
        super().__init__(config, seed)
        self.rng = np.random.default_rng(seed)
        self.ids = np.zeros(0, dtype=np.int64)  # oldest first
        self._replay = np.zeros(0, dtype=np.int64)
        self._metrics: dict[str, float] = {}

    def select(self, step: int, rollouts: RolloutView) -> np.ndarray:
        if rollouts.rollout_id is None:
            raise ValueError("rollout_filter=replay_fifo needs stable rollout ids (RolloutView.rollout_id)")
        c = self.config
        want = int(round(c.fraction / (1.0 - c.fraction) * len(rollouts)))
        k = min(want, len(self.ids))
        self._replay = np.sort(self.rng.choice(self.ids, size=k, replace=False)) if k else np.zeros(0, np.int64)
        informative = rollouts.rollout_id[rollouts.advantage != 0]
        self.ids = np.concatenate([self.ids, informative])[-c.capacity:]
        self._metrics = {"buffer": float(len(self.ids)), "replayed": float(k), "stored_now": float(len(informative))}
        return np.arange(len(rollouts))

    def replay(self) -> np.ndarray:
        return self._replay.copy()

    def stored(self) -> np.ndarray:
        return self.ids.copy()

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict[str, Any]:
        return {"ids": self.ids.copy(), "replay": self._replay.copy(), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ids, self._replay = np.array(state["ids"], dtype=np.int64), np.array(state["replay"], dtype=np.int64)
        self.rng.bit_generator.state = state["rng"]
