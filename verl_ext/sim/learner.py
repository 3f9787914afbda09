"""The simulated policy: an ability per latent skill, a memorised bonus per training task, stochastic rollouts.

Task ``i`` succeeds with ``p_i = sigmoid(w_i · θ + b_i - d_i)``: ``θ`` [skills] is the policy's ability per
skill, ``w_i = softmax(cos(e_i, c_k) / transfer_temperature)`` spreads what a task teaches over the skills near
its embedding (transfer), ``b_i`` is what the policy memorised of that task itself (never of held-out tasks),
``d_i`` the task's difficulty.

Learning: every rollout that reaches the update carries the learning signal ``|r - r̄|`` (its success minus its
group's mean success at generation: a GRPO / RLOO group's expected gradient, summing to ``2 n p (1 - p)`` over a
group), weighted ``staleness ** age`` when replayed, and with the opposite sign (times ``noise_harm``) when the
rollout is *spurious* (probability ``noise_rate``: a lucky guess or truncated garbage, recognisable only
statistically by a high entropy and length). With ``S_i`` a task's summed signal and ``R`` the normaliser:
``θ += lr Σ_i w_i S_i / R`` and ``b_i += lr · memorisation · S_i / R``. ``R`` is the step's generated rollouts
(``normaliser="generated"``: an update on fewer rollouts moves the policy less, as SGD with a fixed mini-batch size
and fewer optimiser steps) or the rollouts the update trains on (``"trained"``: every update moves it alike and only
the mean signal of what it trains on counts, closer to Adam's normalised steps). Every step both decay towards the
start by ``forgetting``.

Per-rollout statistics a filter sees are synthetic but tied to the state: entropy ``0.3 + 0.7 (1 - p) +
0.8 · spurious + N(0, 0.1)``, response length ``L_max · N(0.35 + 0.3 (1 - p), 0.1)`` (a spurious one is truncated
half of the time), clip fraction at an update ``0.02 + 0.04 · age + 0.1 · spurious``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verl_ext.sim.world import World, sigmoid

PARTIAL_SCORE = 0.1  # Countdown: a well-formed but wrong answer


@dataclass(frozen=True)
class LearnerConfig:
    lr: float = 2.0
    memorisation: float = 10.0  # a task's own gain relative to the skills' gain
    transfer_temperature: float = 0.1
    forgetting: float = 0.002  # per step
    staleness: float = 0.7  # signal weight per step of a replayed rollout's age
    noise_rate: float = 0.1  # share of spurious rollouts
    noise_harm: float = 1.0
    partial_credit: float = 0.8  # Countdown-style rewards: share of failed rollouts scoring 0.1 instead of 0
    max_response_length: int = 4096
    normaliser: str = "generated"  # generated | trained: what the update's summed signal is divided by


@dataclass(frozen=True)
class Rollouts:
    """One step's generated rollouts, grouped by selected task (``group`` = position in the selection)."""

    task: np.ndarray  # int64 [R], stable task index
    group: np.ndarray  # int64 [R]
    success: np.ndarray  # bool [R]
    reward: np.ndarray  # float [R]
    format_valid: np.ndarray  # bool [R]
    spurious: np.ndarray  # bool [R]
    signal: np.ndarray  # float [R], |success - group mean success|
    entropy: np.ndarray  # float [R]
    length: np.ndarray  # int64 [R]


class Learner:
    def __init__(self, world: World, config: LearnerConfig):
        self.world, self.config = world, config
        cos = world.embedding @ world.centres.T
        z = cos / config.transfer_temperature
        w = np.exp(z - z.max(axis=1, keepdims=True))
        self.transfer = w / w.sum(axis=1, keepdims=True)  # [all tasks, skills]
        self.theta = np.zeros(world.config.skills)
        self.bonus = np.zeros(world.config.tasks)

    def pass_rate(self, tasks: np.ndarray) -> np.ndarray:
        """True success probability of training (or held-out) tasks by position."""
        bonus = np.where(tasks < len(self.bonus), self.bonus[np.minimum(tasks, len(self.bonus) - 1)], 0.0)
        return sigmoid(self.transfer[tasks] @ self.theta + bonus - self.world.difficulty[tasks])

    def generate(self, tasks: np.ndarray, counts: np.ndarray, rng: np.random.Generator, scores: str) -> Rollouts:
        """``counts[j]`` rollouts of ``tasks[j]``; ``scores``: ``binary`` (0 / 1) or ``countdown`` (0 / 0.1 / 1)."""
        cfg = self.config
        group = np.repeat(np.arange(len(tasks)), counts)
        p = self.pass_rate(tasks)[group]
        success = rng.random(len(group)) < p
        valid = success | (rng.random(len(group)) < cfg.partial_credit)
        if scores == "binary":
            reward = success.astype(np.float64)
        elif scores == "countdown":
            reward = np.where(success, 1.0, np.where(valid, PARTIAL_SCORE, 0.0))
        else:
            raise ValueError(f"scores={scores!r}; choose binary or countdown")
        spurious = rng.random(len(group)) < cfg.noise_rate
        mean = np.bincount(group, weights=success, minlength=len(tasks)) / counts
        entropy = np.maximum(0.01, 0.3 + 0.7 * (1 - p) + 0.8 * spurious + rng.normal(0, 0.1, len(group)))
        frac = np.clip(rng.normal(0.35 + 0.3 * (1 - p), 0.1), 0.02, 1.0)
        frac[spurious & (rng.random(len(group)) < 0.5)] = 1.0
        length = np.ceil(frac * cfg.max_response_length).astype(np.int64)
        return Rollouts(tasks[group], group, success, reward, valid, spurious, np.abs(success - mean[group]),
                        entropy, length)

    def learn(self, task: np.ndarray, signal: np.ndarray, spurious: np.ndarray, age: np.ndarray,
              generated: int) -> None:
        """One actor update on the given rollouts (this step's kept ones and replayed ones, with their age in
        steps); ``generated``: the step's generated rollouts."""
        cfg = self.config
        if cfg.normaliser not in ("generated", "trained"):
            raise ValueError(f"LearnerConfig.normaliser={cfg.normaliser!r}; choose generated or trained")
        if len(task) == 0:
            return
        weight = cfg.staleness ** age * np.where(spurious, -cfg.noise_harm, 1.0)
        tasks, inverse = np.unique(task, return_inverse=True)
        norm = generated if cfg.normaliser == "generated" else len(task)
        per_task = np.bincount(inverse, weights=signal * weight, minlength=len(tasks)) / norm
        self.theta += cfg.lr * self.transfer[tasks].T @ per_task
        self.bonus[tasks] += cfg.lr * cfg.memorisation * per_task

    def forget(self) -> None:
        keep = 1.0 - self.config.forgetting
        self.theta *= keep
        self.bonus *= keep

    def entropy_of(self, task: np.ndarray, spurious: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Mean token entropy of rollouts under the current policy (what the update measures)."""
        p = self.pass_rate(task)
        return np.maximum(0.01, 0.3 + 0.7 * (1 - p) + 0.8 * spurious + rng.normal(0, 0.1, len(task)))

    def held_out(self) -> np.ndarray:
        """True success probability of every held-out task."""
        return self.pass_rate(self.world.test)
