"""CBS and CBS* ("Contextual Rollout Bandits" paper, §4.3) as rollout filters around
:mod:`verl_ext.axes.cbs_scheduler`.

* ``cbs_star``: the candidates are this step's rollouts (pooled over groups), ``K = keep_fraction`` of them;
  usage and clip fraction are 0, age is the rollout's lag (steps since generation: 0 in synchronous training) and
  the entropy feature is the old-log-prob pass's.
* ``cbs``: a FIFO buffer of the latest ``buffer_size`` rollouts (this step's included) with each one's
  features at generation, its entropy and clip fraction at last use, usage count and age (steps since generation:
  its lag when it entered, :attr:`RolloutView.lag`, plus the steps since); ``K = batch_size``
  (default: as many as the step generated) are chosen from it. Chosen rollouts of earlier steps are
  replayed (:meth:`RolloutFilter.replay`), the trainer holding their tensors for every id in :meth:`stored`;
  their entropy at that use is the replaying policy's (CBS Table 1 note 2: the trainer re-measures it,
  ``needs_entropy``), not the one stored at generation.

In both, the round's ``V`` / ``E`` are the mean reward and mean token entropy of all the step's fresh rollouts
(``begin_step``, before any prefilter such as DAPO's dynamic sampling, which would bias them towards 0.5). There, too,
a NaN / inf reward, advantage or entropy is refused (it would turn the normaliser and then the MLP NaN for the rest
of the run); the trainer calls ``select`` only after ``begin_step`` (:meth:`RolloutFilter.filter_step`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Optional

import numpy as np

from verl_ext.axes.base import RolloutFilter, require_finite
from verl_ext.axes.cbs_scheduler import FEATURES, CbsScheduler, CbsSchedulerConfig
from verl_ext.axes.views import RolloutView


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


@dataclass(frozen=True)
class CbsFilterConfig(CbsSchedulerConfig):
    """CBS: a buffer of the latest ``buffer_size`` rollouts, ``batch_size`` of them per update (None: the number
    the step generated); the scheduler's fields as inherited."""

    name: str = "cbs"
    buffer_size: int = 2048
    batch_size: Optional[int] = None

    def __post_init__(self):
        super().__post_init__()
        if self.buffer_size < 1 or (self.batch_size is not None and self.batch_size < 1):
            raise ValueError(f"rollout_filter=cbs: buffer_size={self.buffer_size} and batch_size={self.batch_size} "
                             "must be >= 1")

    def scheduler(self) -> CbsSchedulerConfig:
        return CbsSchedulerConfig(**{f.name: getattr(self, f.name) for f in fields(CbsSchedulerConfig)})


def _lag(name: str, step: int, rollouts: RolloutView) -> np.ndarray:
    """int64 [R]: each rollout's lag (:attr:`RolloutView.lag`; 0 when the trainer reports none), refused when
    negative or reaching back before step 0."""
    if rollouts.lag is None:
        return np.zeros(len(rollouts), dtype=np.int64)
    lag = np.asarray(rollouts.lag, dtype=np.int64)
    if len(lag) != len(rollouts) or np.any(lag < 0) or np.any(lag >= max(step, 1)):
        raise ValueError(f"rollout_filter={name}: step {step}: RolloutView.lag must hold one lag in [0, step) per "
                         f"rollout, got {lag[:5].tolist()} for {len(rollouts)} rollouts")
    return lag


def _begin_round(name: str, scheduler: CbsScheduler, step: int, rollouts: RolloutView) -> None:
    """The round's V and E: mean reward and mean token entropy of all the step's rollouts (before prefilters)."""
    if rollouts.entropy is None:
        raise ValueError("CBS needs each rollout's mean token entropy (RolloutView.entropy) from the old-log-prob pass")
    require_finite(f"rollout_filter={name}", step, reward=rollouts.reward, advantage=rollouts.advantage,
                   entropy=rollouts.entropy)
    scheduler.begin_round(float(np.mean(rollouts.reward)), float(np.mean(rollouts.entropy)))


class CbsStarFilter(RolloutFilter):
    needs_entropy = True
    stale_evidence = ("scores the rows trained at a step by features the trainer measures under the policy that trains "
                      "them (entropy, advantage) and by their age, the steps since generation (their lag) "
                      "[decision: the paper is synchronous, where age is 0]; its bandit learns from that update")

    def __init__(self, config: CbsStarFilterConfig, seed: int):
        super().__init__(config, seed)
        self.scheduler = CbsScheduler(config.scheduler(), seed)

    def begin_step(self, step: int, rollouts: RolloutView) -> None:
        _begin_round(self.config.name, self.scheduler, step, rollouts)

    def select(self, step: int, rollouts: RolloutView) -> np.ndarray:
        features = rollout_features(rollouts, age=_lag(self.config.name, step, rollouts))
        # at least one, none when a prefilter kept none (the scheduler then skips the round)
        k = min(len(rollouts), max(1, int(round(self.config.keep_fraction * len(rollouts)))))
        # all candidates are of this round: "newest first" is their order in the step
        return self.scheduler.select(step, features, np.arange(len(rollouts)), k, rollouts.advantage)

    def metrics(self) -> dict[str, float]:
        return self.scheduler.metrics()

    def state_dict(self) -> dict[str, Any]:
        return {"scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(state["scheduler"])


_COLUMN = {name: i for i, name in enumerate(FEATURES)}


class CbsFilter(RolloutFilter):
    replays = True
    needs_clip_fraction = True
    needs_entropy = True  # Table 1 note 2: the entropy at a rollout's latest round of use
    stale_evidence = ("scores rows by features the trainer measures under the policy that would train them, and by "
                      "their age, the steps since generation (a row's lag when it enters the buffer, then one per "
                      "step); a stored row expires from the buffer once replaying it would exceed the trainer's "
                      "off-policy threshold [decision: the paper's buffer is synchronous]")

    def __init__(self, config: CbsFilterConfig, seed: int):
        super().__init__(config, seed)
        self.scheduler = CbsScheduler(config.scheduler(), seed)
        self.ids = np.zeros(0, dtype=np.int64)  # oldest first
        self.born = np.zeros(0, dtype=np.int64)  # the step that generated each (its entry step minus its lag)
        self.features = np.zeros((0, len(FEATURES)))  # age column refreshed at selection
        self._replay = np.zeros(0, dtype=np.int64)
        self._metrics: dict[str, float] = {}

    def select(self, step: int, rollouts: RolloutView) -> np.ndarray:
        if rollouts.rollout_id is None:
            raise ValueError("rollout_filter=cbs needs stable rollout ids (RolloutView.rollout_id)")
        keep = slice(max(0, len(self.ids) + len(rollouts) - self.config.buffer_size), None)
        self.ids = np.concatenate([self.ids, rollouts.rollout_id])[keep]
        self.born = np.concatenate([self.born, step - _lag(self.config.name, step, rollouts)])[keep]
        self.features = np.concatenate([self.features, rollout_features(rollouts)])[keep]
        self.features[:, _COLUMN["age"]] = step - self.born
        n = len(self.ids)
        k = min(n, len(rollouts) if self.config.batch_size is None else self.config.batch_size)
        chosen = self.scheduler.select(step, self.features, np.arange(n)[::-1], k,
                                       self.features[:, _COLUMN["advantage"]])
        fresh = np.isin(self.ids[chosen], rollouts.rollout_id)  # this step's; the others replay
        position = {int(i): p for p, i in enumerate(rollouts.rollout_id)}
        self._replay = self.ids[chosen[~fresh]]
        age = self.features[chosen, _COLUMN["age"]]
        self._metrics = {**self.scheduler.metrics(), "buffer": float(n), "replayed": float((~fresh).sum()),
                         "chosen_age": float(age.mean()) if k else 0.0,
                         "chosen_usage": float(self.features[chosen, _COLUMN["usage"]].mean()) if k else 0.0}
        return np.sort(np.array([position[int(i)] for i in self.ids[chosen[fresh]]], dtype=np.int64))

    def begin_step(self, step: int, rollouts: RolloutView) -> None:
        _begin_round(self.config.name, self.scheduler, step, rollouts)

    def replay(self) -> np.ndarray:
        return self._replay.copy()

    def stored(self) -> np.ndarray:
        return self.ids.copy()

    def expire(self, step: int, ids: np.ndarray) -> None:
        keep = ~np.isin(self.ids, np.asarray(ids, dtype=np.int64))
        self.ids, self.born, self.features = self.ids[keep], self.born[keep], self.features[keep]

    def observe_update(self, step, rollout_id, entropy, clip_fraction) -> None:
        if entropy is None:
            raise ValueError("rollout_filter=cbs needs each rollout's entropy (a feature): set "
                             "actor_rollout_ref.actor.entropy_coeff > 0, or keep verl's old-log-prob pass (no "
                             "rollout-correction bypass mode)")
        require_finite(f"rollout_filter={self.config.name}", step, entropy=entropy, clip_fraction=clip_fraction)
        where = {int(i): p for p, i in enumerate(self.ids)}
        rows = np.array([where.get(int(i), -1) for i in rollout_id], dtype=np.int64)
        found = rows >= 0
        rows = rows[found]
        self.features[rows, _COLUMN["usage"]] += 1
        self.features[rows, _COLUMN["entropy"]] = np.asarray(entropy, dtype=np.float64)[found]
        self.features[rows, _COLUMN["clip_fraction"]] = np.asarray(clip_fraction, dtype=np.float64)[found]

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict[str, Any]:
        return {"scheduler": self.scheduler.state_dict(), "ids": self.ids.copy(), "born": self.born.copy(),
                "features": self.features.copy(), "replay": self._replay.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(state["scheduler"])
        self.ids, self.born = np.array(state["ids"], dtype=np.int64), np.array(state["born"], dtype=np.int64)
        self.features, self._replay = np.array(state["features"]), np.array(state["replay"], dtype=np.int64)
