"""The CBS scheduler ("Contextual Rollout Bandits" paper, §4.1-4.2): a contextual bandit that scores rollouts and
picks K of them.

Framework-free: it sees a ``[candidates, 10]`` feature matrix (:data:`FEATURES`) and returns positions; the
rollout filter that owns the candidates (this round's rollouts for CBS*, a replay buffer for CBS) builds
the features and records what the update did with the chosen ones. Per round ``t``:

1. :meth:`CbsScheduler.begin_round` with the mean verifier reward ``V`` and mean token entropy ``E`` of the
   round's fresh rollouts: the previous selection's round reward
   ``G = (V_t − V_{t−1}) − w_e · 1[E_{t−1} > e_min] · (E_t − E_{t−1})`` is smoothed
   (``ĝ ← γ ĝ + (1 − γ) G``; ablation ``use_ema=False``: ``ĝ = G``) and squashed (``R̃ = sigmoid(ĝ)``),
   and the MLP takes one step of squared regression of ``f(x_i)`` on ``r_i = R̃ · |A_i|`` over the
   previously chosen rollouts (their features at selection time). **[decision]** A round that chose nothing
   (a prefilter kept no rollout) has no arm to reward: the next round skips both (no EMA fold, no optimiser
   step, whose leftover Adam momentum would move the MLP on a zero gradient) and only records its ``V`` / ``E``;
   CBS always selects ``K >= 1``;
2. :meth:`CbsScheduler.select`: features standardised with running mean / std, each row L2-normalised,
   scored by the MLP (10 → 64 → 64 → 1, ReLU); each of the K slots takes the best-scoring unchosen
   candidate with probability ``1 − ε_t``, else the newest unchosen one (``ε_t = ε0`` during the warm-up
   ``T_w``, then ``max(ε_min, ε0 − d (t − T_w))``). Ablation ``random_scores``: a random subset of K.

**[decision]** The scheduler's optimiser is Adam with learning rate ``lr`` (the paper writes a gradient
step with η = 1e-4 and names no optimiser; plain SGD at that rate barely moves the MLP).
"""

from __future__ import annotations

import copy
import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch

@contextmanager
def one_thread():
    """Torch on one thread for the scheduler's small MLP: as fast as two when the machine is idle, and it does not
    contend with the generation / update workers for the cores (2 threads measured 6 -> ~200 ms under load)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


FEATURES = ("reward", "advantage", "group_mean", "group_std", "length_fraction", "truncated", "entropy",
            "clip_fraction", "usage", "age")


@dataclass(frozen=True)
class CbsSchedulerConfig:
    """CBS App. D Table 4 defaults, GRPO rows (the mapping of that unlabeled table's columns is a [decision]);
    DAPO / GSPO change ``epsilon_min`` and ``entropy_threshold``."""

    epsilon0: float = 1.0  # ε0; 1 = the warm-up is on-policy training
    epsilon_min: float = 0.2  # GRPO, DAPO; GSPO 0.005
    epsilon_decay: float = 0.008  # d, per round after the warm-up
    warmup: int = 50  # T_w rounds
    ema: float = 0.9  # γ of the round reward
    use_ema: bool = True  # False: the "w/o EMA" ablation
    entropy_weight: float = 1.0  # w_e; 0: the "w/o entropy" ablation
    entropy_threshold: float = 0.1  # e_min: GRPO 0.1, DAPO / GSPO 0.5
    lr: float = 1e-4  # η
    hidden: int = 64
    random_scores: bool = False  # the "random subset of the same size" ablation

    def __post_init__(self):
        for key in ("epsilon0", "epsilon_min", "ema"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise ValueError(f"cbs: {key}={getattr(self, key)} must lie in [0, 1]")
        if self.epsilon_min > self.epsilon0:
            raise ValueError(f"cbs: epsilon_min={self.epsilon_min} exceeds epsilon0={self.epsilon0}")
        if self.epsilon_decay < 0 or self.warmup < 0 or self.lr <= 0 or self.hidden < 1:
            raise ValueError("cbs: epsilon_decay and warmup must be >= 0, lr > 0, hidden >= 1")


class RunningNormaliser:
    """Per-feature running mean and variance over every row seen (Chan et al.'s batch merge)."""

    def __init__(self, dim: int):
        self.count = 0
        self.mean = np.zeros(dim)
        self.m2 = np.zeros(dim)

    def update(self, x: np.ndarray) -> None:
        n = len(x)
        if n == 0:
            return
        mean, m2 = x.mean(axis=0), ((x - x.mean(axis=0)) ** 2).sum(axis=0)
        total = self.count + n
        delta = mean - self.mean
        self.mean = self.mean + delta * n / total
        self.m2 = self.m2 + m2 + delta**2 * self.count * n / total
        self.count = total

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(self.m2 / max(self.count, 1))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Standardised (a constant feature maps to 0), then every row scaled to unit L2 norm (zero rows stay 0)."""
        z = (x - self.mean) / np.where(self.std > 1e-8, self.std, 1.0)
        norm = np.linalg.norm(z, axis=1, keepdims=True)
        return z / np.where(norm > 0, norm, 1.0)

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count, "mean": self.mean.copy(), "m2": self.m2.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count, self.mean, self.m2 = int(state["count"]), np.array(state["mean"]), np.array(state["m2"])


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


class CbsScheduler:
    def __init__(self, config: CbsSchedulerConfig, seed: int):
        self.config = config
        self.rng = np.random.default_rng(seed)
        generator = torch.Generator().manual_seed(seed)
        dims = (len(FEATURES), config.hidden, config.hidden, 1)
        layers: list[torch.nn.Module] = []
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            linear = torch.nn.Linear(a, b, dtype=torch.float64)
            bound = 1.0 / math.sqrt(a)  # torch's default init, drawn from our own generator
            with torch.no_grad():
                linear.weight.uniform_(-bound, bound, generator=generator)
                linear.bias.uniform_(-bound, bound, generator=generator)
            layers += [linear] if i == len(dims) - 2 else [linear, torch.nn.ReLU()]
        self.mlp = torch.nn.Sequential(*layers)
        self.optimiser = torch.optim.Adam(self.mlp.parameters(), lr=config.lr)
        self.normaliser = RunningNormaliser(len(FEATURES))
        self.gain: Optional[float] = None  # ĝ
        self.previous: Optional[tuple[float, float]] = None  # (V, E) of the last round
        self.pending: Optional[tuple[np.ndarray, np.ndarray]] = None  # normalised features, |A| of the last pick
        self._metrics: dict[str, float] = {}

    # ------------------------------------------------------------------ schedule and reward
    def epsilon(self, step: int) -> float:
        c = self.config
        if step < c.warmup:
            return c.epsilon0
        return max(c.epsilon_min, c.epsilon0 - c.epsilon_decay * (step - c.warmup))

    def begin_round(self, mean_reward: float, mean_entropy: float) -> None:
        """The round's fresh rollouts are scored: reward the previous selection, if any, and update the MLP."""
        c = self.config
        self._metrics = {}
        if self.previous is not None and self.pending is not None:
            v0, e0 = self.previous
            gated = c.entropy_weight * float(e0 > c.entropy_threshold) * (mean_entropy - e0)
            g = (mean_reward - v0) - gated
            self.gain = g if not c.use_ema or self.gain is None else c.ema * self.gain + (1 - c.ema) * g
            squashed = sigmoid(self.gain)
            features, advantage = self.pending
            loss = self._regress(features, squashed * advantage)
            self._metrics.update(round_reward=g, squashed_reward=squashed, scheduler_loss=loss)
        self.previous = (float(mean_reward), float(mean_entropy))
        self.pending = None

    def _regress(self, features: np.ndarray, target: np.ndarray) -> float:
        with one_thread():
            prediction = self.mlp(torch.from_numpy(features)).squeeze(-1)
            loss = ((prediction - torch.from_numpy(target)) ** 2).sum()
            self.optimiser.zero_grad()
            loss.backward()
            self.optimiser.step()
        return float(loss.detach()) / max(len(target), 1)

    # ------------------------------------------------------------------ selection
    def scores(self, features: np.ndarray) -> np.ndarray:
        with torch.no_grad(), one_thread():
            return self.mlp(torch.from_numpy(self.normaliser(features))).squeeze(-1).numpy()

    def select(self, step: int, features: np.ndarray, newest_first: np.ndarray, k: int,
               advantage: np.ndarray) -> np.ndarray:
        """Positions of the ``k`` candidates chosen at ``step``. ``features``: ``[n, 10]`` in :data:`FEATURES`
        order; ``newest_first``: candidate positions from the newest to the oldest; ``advantage``: each
        candidate's ``A_i`` (its reward target is ``R̃ |A_i|``)."""
        features = np.asarray(features, dtype=np.float64)
        n = len(features)
        if features.ndim != 2 or features.shape[1] != len(FEATURES):
            raise ValueError(f"cbs: features must be [candidates, {len(FEATURES)}], got {features.shape}")
        if not 0 <= k <= n:
            raise ValueError(f"cbs: cannot choose {k} of {n} candidates")
        if sorted(np.asarray(newest_first).tolist()) != list(range(n)):
            raise ValueError("cbs: newest_first must be a permutation of the candidate positions")
        self.normaliser.update(features)
        eps = self.epsilon(step)
        if self.config.random_scores:
            chosen = self.rng.choice(n, size=k, replace=False)
        else:
            best_first = np.argsort(-self.scores(features), kind="stable")
            explore = self.rng.random(k) < eps
            chosen = _fill(best_first, np.asarray(newest_first), explore)
        self.pending = (self.normaliser(features[chosen]),
                        np.abs(np.asarray(advantage, dtype=np.float64)[chosen])) if k else None  # None: skipped
        self._metrics.update(epsilon=eps, chosen=float(k), candidates=float(n))
        return np.sort(chosen)

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """A snapshot: torch's ``Optimizer.state_dict`` hands out Adam's live moment tensors, so they are copied."""
        return {"mlp": {k: v.clone() for k, v in self.mlp.state_dict().items()},
                "optimiser": copy.deepcopy(self.optimiser.state_dict()), "normaliser": self.normaliser.state_dict(),
                "gain": self.gain, "previous": self.previous,
                "pending": None if self.pending is None else tuple(a.copy() for a in self.pending),
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mlp.load_state_dict(state["mlp"])
        # Optimizer.load_state_dict keeps the given tensors (same dtype / device) and Adam updates them in place
        self.optimiser.load_state_dict(copy.deepcopy(state["optimiser"]))
        self.normaliser.load_state_dict(state["normaliser"])
        self.gain, self.previous = state["gain"], state["previous"]
        self.pending = None if state["pending"] is None else tuple(np.array(a) for a in state["pending"])
        self.rng.bit_generator.state = state["rng"]


def _fill(best_first: np.ndarray, newest_first: np.ndarray, explore: np.ndarray) -> np.ndarray:
    """Slot by slot: the next unchosen candidate of ``newest_first`` where ``explore``, else of ``best_first``."""
    taken = np.zeros(len(best_first), dtype=bool)
    pointers = [0, 0]
    orders = (best_first, newest_first)
    out = np.empty(len(explore), dtype=np.int64)
    for slot, e in enumerate(explore):
        order = orders[int(e)]
        while taken[order[pointers[int(e)]]]:
            pointers[int(e)] += 1
        out[slot] = order[pointers[int(e)]]
        taken[out[slot]] = True
    return out
