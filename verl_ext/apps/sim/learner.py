"""The simulated policy: an ability per latent skill, a memorised bonus per training task, stochastic rollouts.

Task ``i`` succeeds with ``p_i = sigmoid(x_i)``, ``x_i = w_i · θ + b_i - d_i``: ``θ`` [skills] is the policy's
ability per skill, ``w_i = softmax(cos(e_i, c_k) / transfer_temperature)`` spreads what a task teaches over the
skills near its embedding (transfer), ``b_i`` is what the policy memorised of that task itself (never of held-out
tasks), ``d_i`` the task's difficulty.

Learning is the policy gradient of the rows the update trains on, with the advantages the loop computed for them
(the objective's: GRPO / DAPO / GSPO ``(r - mean) / std``, RLOO leave-one-out; ``verl/trainer/ppo/core_algos.py``).
A rollout's outcome is Bernoulli(``p_i``), so ``∂ log π(y) / ∂x_i = s - p_i`` (``s`` its success) and the row
contributes ``g = A · (s - p_i) · a · staleness^age · reuse^uses`` with ``p_i`` the current policy's (a replayed row
is off-policy: it loses ``staleness`` per step of age and ``reuse`` per earlier update it was in), ``a`` the loss
aggregation's weight (``token-mean``: length / the update's mean length; ``seq-mean-token-mean``: 1;
``seq-mean-token-sum``: length / half the maximum length), and the opposite sign (times ``noise_harm``) when the
rollout is *spurious* (probability ``noise_rate``: a lucky guess or truncated garbage, recognisable only
statistically by a high entropy and length). In expectation a GRPO group of ``n`` teaches ``≈ n √(p (1 - p))``.
With ``G_i`` a task's summed ``g`` and ``M`` the recipe's mini-batch in rollouts (a fixed constant per study:
verl takes one optimiser step per mini-batch, so each trained row moves the policy alike and a filtered one not at
all): ``θ += lr Σ_i w_i G_i / M`` and ``b_i += lr · memorisation · G_i / M``. Every step both decay towards the
start by ``forgetting``.

Per-rollout statistics a filter sees are synthetic but tied to the state: entropy ``0.3 + 0.7 (1 - p) +
0.8 · spurious + N(0, 0.1)``, response length ``L_max · N(0.35 + 0.3 (1 - p), 0.1)`` (a spurious one is truncated
half of the time), clip fraction at an update ``0.02 + 0.04 · age + 0.1 · spurious``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verl_ext.apps.sim.world import World, sigmoid

PARTIAL_SCORE = 0.1  # Countdown: a well-formed but wrong answer
AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum")


@dataclass(frozen=True)
class LearnerConfig:
    lr: float = 0.3
    memorisation: float = 10.0  # a task's own gain relative to the skills' gain
    transfer_temperature: float = 0.1
    forgetting: float = 0.002  # per step
    staleness: float = 0.7  # weight per step of a replayed rollout's age
    reuse: float = 0.7  # weight per earlier update a replayed rollout was in
    noise_rate: float = 0.1  # share of spurious rollouts
    noise_harm: float = 1.0
    partial_credit: float = 0.8  # Countdown-style rewards: share of failed rollouts scoring 0.1 instead of 0
    max_response_length: int = 4096


@dataclass(frozen=True)
class Rollouts:
    """One step's generated rollouts, grouped by selected task (``group`` = position in the selection)."""

    task: np.ndarray  # int64 [R], task position in the world
    group: np.ndarray  # int64 [R]
    success: np.ndarray  # bool [R]
    reward: np.ndarray  # float [R]
    format_valid: np.ndarray  # bool [R]
    spurious: np.ndarray  # bool [R]
    entropy: np.ndarray  # float [R]
    length: np.ndarray  # int64 [R]


@dataclass(frozen=True)
class Update:
    """The rows an actor update trains on (fresh and replayed), by task position."""

    task: np.ndarray
    advantage: np.ndarray
    success: np.ndarray
    spurious: np.ndarray
    length: np.ndarray
    age: np.ndarray  # steps since generation
    uses: np.ndarray  # earlier updates the row was in


class Learner:
    def __init__(self, world: World, config: LearnerConfig):
        self.world, self.config = world, config
        cos = world.embedding @ world.centres.T
        z = cos / config.transfer_temperature
        w = np.exp(z - z.max(axis=1, keepdims=True))
        self.transfer = w / w.sum(axis=1, keepdims=True)  # [all tasks, skills]
        self.theta = np.zeros(world.config.skills)
        self.bonus = np.zeros(world.config.tasks)

    def own_skill_weight(self) -> float:
        """Mean transfer weight of a task on its own skill (1: no transfer)."""
        return float(np.mean(self.transfer[np.arange(len(self.transfer)), self.world.skill]))

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
        entropy = np.maximum(0.01, 0.3 + 0.7 * (1 - p) + 0.8 * spurious + rng.normal(0, 0.1, len(group)))
        frac = np.clip(rng.normal(0.35 + 0.3 * (1 - p), 0.1), 0.02, 1.0)
        frac[spurious & (rng.random(len(group)) < 0.5)] = 1.0
        length = np.ceil(frac * cfg.max_response_length).astype(np.int64)
        return Rollouts(tasks[group], group, success, reward, valid, spurious, entropy, length)

    def aggregation_weight(self, length: np.ndarray, aggregation: str) -> np.ndarray:
        """A row's weight in the loss by ``actor.loss_agg_mode`` (verl core_algos.agg_loss)."""
        if aggregation == "token-mean":
            return length / length.mean()
        if aggregation == "seq-mean-token-mean":
            return np.ones(len(length))
        if aggregation == "seq-mean-token-sum":
            return length / (0.5 * self.config.max_response_length)
        raise ValueError(f"loss_agg_mode={aggregation!r}; the simulator models {AGGREGATIONS}")

    def learn(self, rows: Update, mini_batch: int, aggregation: str) -> np.ndarray:
        """One actor update on ``rows`` normalised by ``mini_batch`` rollouts; returns each row's ``g``."""
        cfg = self.config
        if mini_batch < 1:
            raise ValueError(f"mini_batch={mini_batch}: the update's normaliser must be a positive rollout count")
        if len(rows.task) == 0:
            return np.zeros(0)
        p = self.pass_rate(rows.task)
        g = (rows.advantage * (rows.success - p) * self.aggregation_weight(rows.length, aggregation)
             * cfg.staleness ** rows.age * cfg.reuse ** rows.uses * np.where(rows.spurious, -cfg.noise_harm, 1.0))
        tasks, inverse = np.unique(rows.task, return_inverse=True)
        per_task = np.bincount(inverse, weights=g, minlength=len(tasks)) / mini_batch
        self.theta += cfg.lr * self.transfer[tasks].T @ per_task
        self.bonus[tasks] += cfg.lr * cfg.memorisation * per_task
        return g

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
