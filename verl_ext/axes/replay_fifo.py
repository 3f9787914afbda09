"""Rollout replay of DOTS+RR (the ADS paper's baseline; Sun et al. 2025, arXiv 2506.05316, "RR"): a FIFO buffer
of recent informative groups, part of each actor update replayed from it.

As the authors' trainer does (ASTRAL-Group/data-efficient-llm-rl @ 59df918,
``rl_training/verl/verl/trainer/ppo/ray_trainer.py`` = RT: ``select_buffer`` RT:55-132, its calls RT:986-1015), by
**group** (a prompt's rollouts of one step). Every rollout of the step trains. Each step, in this order:

1. **Draw** ``⌊fraction / (1 - fraction) x fresh groups⌋`` stored groups uniformly without replacement (fewer when
   the buffer holds fewer) and replay them whole: the authors' ``int((1 - σ) B)`` (RT:104-116) with
   ``fraction = 1 - σ`` and ``σ B`` fresh groups, so replayed groups always come from earlier steps. They stay stored.
   **No draw in the first round** [authors' code]: the first ``first_round_steps`` steps (the authors' ``mu = 2``
   steps of epoch 0, RT:986-996) only fill the buffer.
2. **Trim** [authors' code] the stored groups to the newest ``capacity − fresh_groups`` in every step, the first
   round included (RT:118-124: ``buffer_size − int(σ B)``, ``fresh_groups`` = σ B; called at RT:992 in epoch 0 and
   RT:1001 after; none left when ``fresh_groups = capacity``; a larger σ B is refused: their slice
   ``[-remaining_budget*8:]`` would then drop only the oldest groups). A first-round step serves ``B`` groups
   (RT:906-921), so ``capacity − σ B`` of the previous step's groups stay beside them (the recipe: 64 of step 1's
   128); after it the buffer holds at most ``capacity`` groups once the step's σ B are in.
3. **Store** the step's groups, a task's newest group replacing its older one (the authors' de-duplication by last
   occurrence, RT:70-83, also when the new group is not kept), except groups whose rewards are all equal
   (:attr:`GroupRewards.degenerate`, the project's one definition).

[decision] The authors drop a group when its mean reward is exactly 0 or 1 (RT:87-95). With rewards in [0, 1]
(binary verifiers: theirs and the ADS recipes') that is exactly a degenerate group whose common reward is 0 or 1.
The two rules part only on **equal non-binary** rewards (e.g. eight format scores of 0.1): the authors' filter keeps
such a group, whose group-relative advantage is zero, here it is dropped as degenerate like every other filter does
(and, with rewards outside [0, 1], a mixed group with mean 0 or 1, e.g. {-1, 1}, which they drop, is kept here).
With ``data.train_batch_size = σ B`` the update holds ``B`` groups of which ``σ B`` were generated this step:
the paper's σ = 0.5, ``capacity`` = the authors' ``buffer_size`` = ``B``, ``fresh_groups`` = σ B.

Replayed rollouts keep their generation-time advantages (:mod:`verl_ext.trainer.replay`). Their loss: the paper's
modified replay loss as the authors compute it (``correction=decoupled``; [authors' code]
``rl_training/verl/verl/trainer/ppo/core_algos.py:197-235``): the current policy recomputes their old log-probs
π_old before the update, the ratio π_θ/π_old is clipped as usual and each token is weighted by π_old/μ
(μ: the generating policy's stored log-prob; verl's ``rollout_is_weights``, untruncated); fresh rollouts get weight 1.
``correction=stored`` trains them against μ directly (CBS's convention). Composes with any selector:
``selector=dots rollout_filter=replay_fifo``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from verl_ext.axes.base import RolloutFilter, require_finite
from verl_ext.axes.views import GroupRewards, RolloutView


@dataclass(frozen=True)
class ReplayFifoFilterConfig:
    """A buffer of informative groups trimmed to ``capacity - fresh_groups`` each step; ``fraction`` of each update's
    groups replayed."""

    name: str = "replay_fifo"
    capacity: int = 128  # groups (the authors' buffer_size: one training batch of prompts, 512 of 512)
    fraction: float = 0.5  # replayed share of the update's groups (1 - σ)
    fresh_groups: int = 64  # σ B, the fresh groups of a step after the first round: each trim keeps capacity - σ B
    first_round_steps: int = 2  # [authors' code] steps that only fill the buffer (mu = 2, final_ds_teacher_replay.sh)
    correction: str = "decoupled"  # decoupled (π_old recomputed, weight π_old/μ) | stored (ratio against μ)

    def __post_init__(self):
        if self.capacity < 1 or not 0.0 <= self.fraction < 1.0:
            raise ValueError(f"rollout_filter=replay_fifo: capacity={self.capacity} must be >= 1 and "
                             f"fraction={self.fraction} in [0, 1)")
        if not 1 <= self.fresh_groups <= self.capacity:
            raise ValueError(f"rollout_filter=replay_fifo: fresh_groups={self.fresh_groups} (σ B) must be in "
                             f"[1, capacity={self.capacity}]")
        if self.first_round_steps < 0:
            raise ValueError(f"rollout_filter=replay_fifo: first_round_steps={self.first_round_steps} must be >= 0")
        if self.correction not in ("decoupled", "stored"):
            raise ValueError(f"rollout_filter=replay_fifo: correction={self.correction!r}; choose decoupled or stored")


class ReplayFifoFilter(RolloutFilter):
    replays = True
    stale_evidence = ("decides on each group's own rewards; a stored group expires whole once replaying any of its "
                      "rollouts would exceed the trainer's off-policy threshold [decision: the authors' trainer is "
                      "synchronous, their buffer trims by count only]")

    def __init__(self, config: ReplayFifoFilterConfig, seed: int):
        super().__init__(config, seed)
        self.rng = np.random.default_rng(seed)
        self.groups: dict[int, np.ndarray] = {}  # task index -> rollout ids of its newest stored group, oldest first
        self.steps_done = 0  # select calls so far (the first round is the first first_round_steps of them)
        self._replay = np.zeros(0, dtype=np.int64)
        self._metrics: dict[str, float] = {}
        self.replay_correction = config.correction

    def select(self, step: int, rollouts: RolloutView) -> np.ndarray:
        if rollouts.rollout_id is None:
            raise ValueError("rollout_filter=replay_fifo needs stable rollout ids (RolloutView.rollout_id)")
        require_finite("rollout_filter=replay_fifo", step, reward=rollouts.reward)
        c = self.config
        groups = GroupRewards.of(rollouts.group, rollouts.reward)
        fresh = len(groups.ids)
        first_round = self.steps_done < c.first_round_steps
        want = 0 if first_round else int(c.fraction / (1.0 - c.fraction) * fresh + 1e-9)
        tasks = np.array(list(self.groups), dtype=np.int64)
        k = min(want, len(tasks))
        picked = self.rng.choice(tasks, size=k, replace=False) if k else np.zeros(0, np.int64)
        self._replay = np.sort(np.concatenate([self.groups[int(t)] for t in picked])) if k else np.zeros(0, np.int64)
        trimmed = max(len(self.groups) - (c.capacity - c.fresh_groups), 0)
        for task in list(self.groups)[:trimmed]:  # oldest first
            del self.groups[task]
        stored_now = 0
        for g in np.argsort(groups.first):  # the step's groups in rollout order
            members = np.flatnonzero(groups.inverse == g)
            task = int(rollouts.task_index[members[0]])
            self.groups.pop(task, None)  # the newest group of a task replaces the older one, informative or not
            if not groups.degenerate[g]:
                self.groups[task] = rollouts.rollout_id[members].astype(np.int64)
                stored_now += 1
        self.steps_done += 1
        self._metrics = {"buffer_groups": float(len(self.groups)), "replayed_groups": float(k),
                         "replayed": float(len(self._replay)), "stored_now_groups": float(stored_now),
                         "trimmed_groups": float(trimmed), "first_round": float(first_round)}
        return np.arange(len(rollouts))

    def replay(self) -> np.ndarray:
        return self._replay.copy()

    def stored(self) -> np.ndarray:
        return np.concatenate([np.zeros(0, np.int64), *self.groups.values()])

    def expire(self, step: int, ids: np.ndarray) -> None:
        gone = np.asarray(ids, dtype=np.int64)
        for task in [t for t, members in self.groups.items() if np.isin(members, gone).any()]:
            del self.groups[task]

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict[str, Any]:
        return {"tasks": np.array(list(self.groups), dtype=np.int64),
                "groups": [ids.copy() for ids in self.groups.values()], "replay": self._replay.copy(),
                "steps_done": self.steps_done, "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.groups = {int(t): np.array(ids, dtype=np.int64) for t, ids in zip(state["tasks"], state["groups"])}
        self._replay = np.array(state["replay"], dtype=np.int64)
        self.steps_done = int(state["steps_done"])
        self.rng.bit_generator.state = state["rng"]
