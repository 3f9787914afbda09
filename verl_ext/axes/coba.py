"""CoBA-RL: capability-oriented rollout budget allocation (Yao et al., §2.3-2.4), its static / heuristic
baselines (§3.4) and the official code's variant.

Value of giving task ``i`` (pass rate ``p``, clipped to ``[p_min, p_max]``) ``B`` rollouts:
``V(B, p) = (1 - e^{-B p(1-p)/τ}) · BetaPDF(p; α_t, β_t)``. The Beta shape follows the model's
global failure rate ``F̄`` (mean over the last ``window`` steps of ``1 - mean_batch(p_i)``):
``α_t = clip(1 + (κ-2)·Ψ(F̄), 1, κ-1)``, ``β_t = κ - α_t``, ``Ψ(F) = F`` above 1/2, else
``sigmoid(γ(F - 1/2))``. Counts maximise ``Σ V`` within ``[min_n, max_n]`` and sum to the budget
exactly: :func:`~verl_ext.axes.budget_solvers.geometric_allocate`, identical to the paper's heap.

Schedules of ``(α, β)`` (presets under ``verl_ext/config/allocator/``): ``failure`` (the paper,
``coba``), ``success`` (``explore_to_exploit``), ``static`` (``static_exploit``, ``static_explore``),
``linear_decay`` (α stepped ``κ-1 → 1``). ``coba_official`` adds the official code's behaviours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from verl_ext.axes.allocators import check_budget
from verl_ext.axes.base import BudgetAllocator, require_finite
from verl_ext.axes.budget_solvers import geometric_allocate
from verl_ext.axes.views import StepResults, TaskStats

SCHEDULES = ("failure", "success", "static", "linear_decay")


# ---------------------------------------------------------------------------------------------- equations
def psi(rate: float, gamma: float) -> float:
    """``Ψ``: identity above 1/2, ``sigmoid(γ(rate - 1/2))`` at or below (continuous at 1/2)."""
    return rate if rate > 0.5 else 1.0 / (1.0 + math.exp(-gamma * (rate - 0.5)))


def beta_shape(rate: float, kappa: float, gamma: float) -> tuple[float, float]:
    """``(α, β)`` driven by ``rate`` (the failure rate ``F̄`` in the paper): ``α_min = 1``,
    ``α_max = κ - 1``, ``λ = κ - 2``."""
    alpha = min(max(1.0 + (kappa - 2.0) * psi(rate, gamma), 1.0), kappa - 1.0)
    return alpha, kappa - alpha


def log_beta_pdf(p: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """``ln BetaPDF(p; α, β)`` (``0·ln 0 = 0``, so ``α = 1`` at ``p = 0`` is finite)."""
    with np.errstate(divide="ignore"):
        out = (alpha - 1.0) * np.log(p) if alpha != 1.0 else np.zeros_like(p)
        if beta != 1.0:
            out = out + (beta - 1.0) * np.log1p(-p)
    return out - (math.lgamma(alpha) + math.lgamma(beta) - math.lgamma(alpha + beta))


def coba_gains(p: np.ndarray, alpha: float, beta: float, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """Log marginal gains ``ln ΔV(b) = log_scale - rate·b`` with ``rate = k = p(1-p)/τ`` and
    ``log_scale = ln C + ln(1 - e^{-k})``, ``C = BetaPDF(p)`` (``-inf`` where ``k = 0``: no gain)."""
    k = p * (1.0 - p) / tau
    with np.errstate(divide="ignore"):
        return log_beta_pdf(p, alpha, beta) + np.log(-np.expm1(-k)), k


def coba_value(counts: np.ndarray, p: np.ndarray, alpha: float, beta: float, tau: float) -> np.ndarray:
    """``V(B, p)`` per task (paper eq. 9)."""
    return -np.expm1(-counts * p * (1.0 - p) / tau) * np.exp(log_beta_pdf(p, alpha, beta))


# ---------------------------------------------------------------------------------------------- state
class TaskHistory:
    """Successes and rollouts of each task's last ``window`` visits (slot 0 = latest) and its
    rollouts ever seen, in arrays sorted by stable index."""

    def __init__(self, window: int):
        self.window = window
        self.index = np.zeros(0, dtype=np.int64)
        self.successes = np.zeros((0, window))
        self.rollouts = np.zeros((0, window))
        self.seen = np.zeros(0, dtype=np.int64)

    def record(self, stats: TaskStats) -> None:
        merged = np.union1d(self.index, stats.index)
        if len(merged) > len(self.index):
            rows = np.searchsorted(merged, self.index)
            for name in ("successes", "rollouts", "seen"):
                old = getattr(self, name)
                new = np.zeros((len(merged),) + old.shape[1:], dtype=old.dtype)
                new[rows] = old
                setattr(self, name, new)
            self.index = merged
        rows = np.searchsorted(self.index, stats.index)
        for name, latest in (("successes", stats.successes), ("rollouts", stats.n)):
            table = getattr(self, name)
            table[rows, 1:] = table[rows, :-1]
            table[rows, 0] = latest
        self.seen[rows] += stats.n

    def lookup(self, tasks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pass rate over the last ``window`` visits (NaN: never seen) and rollouts ever seen."""
        tasks = np.asarray(tasks, dtype=np.int64)
        rows = np.searchsorted(self.index, tasks)
        found = rows < len(self.index)
        found[found] = self.index[rows[found]] == tasks[found]
        rate = np.full(len(tasks), np.nan)
        seen = np.zeros(len(tasks), dtype=np.int64)
        rate[found] = self.successes[rows[found]].sum(1) / self.rollouts[rows[found]].sum(1)
        seen[found] = self.seen[rows[found]]
        return rate, seen

    def state_dict(self) -> dict:
        return {"index": self.index.copy(), "successes": self.successes.copy(), "rollouts": self.rollouts.copy(),
                "seen": self.seen.copy()}

    def load_state_dict(self, state: dict) -> None:
        successes = np.array(state["successes"], dtype=np.float64)
        if successes.shape != (len(state["index"]), self.window):
            raise ValueError(f"saved task history has shape {successes.shape}, expected ({len(state['index'])}, "
                             f"{self.window}): resume with the same history window")
        self.index = np.array(state["index"], dtype=np.int64)
        self.successes = successes
        self.rollouts = np.array(state["rollouts"], dtype=np.float64)
        self.seen = np.array(state["seen"], dtype=np.int64)


# ---------------------------------------------------------------------------------------------- CoBA
@dataclass(frozen=True)
class CobaBaseConfig:
    """The fields and checks CoBA-RL (``coba``) and the official code's variant (``coba_official``) share; field
    comments give the paper's symbols."""

    name: str
    min_n: int = 2  # B_low
    max_n: int = 128  # B_up
    gamma: float = 10.0  # γ of Ψ
    kappa: float = 11.0  # κ = α + β
    window: int = 1  # k: steps averaged into the global failure rate
    p_min: float = 0.01  # p clipped to [p_min, p_max] in V
    p_max: float = 0.99

    def __post_init__(self):
        where = f"allocator={self.name}"
        if int(self.min_n) != self.min_n or int(self.max_n) != self.max_n or not 1 <= self.min_n <= self.max_n:
            raise ValueError(f"{where}: need integers 1 <= min_n <= max_n, got [{self.min_n}, {self.max_n}]")
        if self.kappa < 3:
            raise ValueError(f"{where}: kappa={self.kappa} must be >= 3 "
                             "(alpha in [1, kappa - 1], start (kappa - 2, 2))")
        if self.gamma <= 0:
            raise ValueError(f"{where}: gamma={self.gamma} must be > 0")
        if int(self.window) != self.window or self.window < 1:
            raise ValueError(f"{where}: window={self.window} must be an integer >= 1")
        if not 0.0 <= self.p_min < self.p_max <= 1.0:
            raise ValueError(f"{where}: need 0 <= p_min < p_max <= 1, got [{self.p_min}, {self.p_max}]")


@dataclass(frozen=True)
class CobaAllocatorConfig(CobaBaseConfig):
    """CoBA-RL (§2.3, Eq. 5-9; heap greedy §2.4, Algorithm 1).

    **[decision]** ``tau = 7.5``: the paper never states τ (Appendix C lists only ``[B_low, B_up]``
    and κ); the official code moves τ with the batch's pass-rate variance, ``τ = 3 + 9·clip(Var/0.1667)``
    (``coba_official``). 7.5 is that rule at ``Var = 1/12``, pass rates spread uniformly over [0, 1],
    the middle of its range [3, 12].

    **[decision]** Tasks never seen count as ``p = unseen_pass_rate = 0.5``: the paper assumes every
    task's ``p_i`` is known and is silent on fresh tasks; 0.5 is the Beta(1, 1) prior mean, the official
    code's value in mixed batches, and makes an all-unseen batch (all of epoch 1) uniform, as the
    official code does (equal gains, the heap hands rollouts round-robin).

    **[decision]** ``success`` schedule (explore → exploit): ``α = clip(1 + (κ-2)·Ψ(S̄))`` with the
    success rate ``S̄ = 1 - F̄``, starting from the mirror image of ``failure``'s ``(κ-2, 2)``:
    ``(2, κ-2)``.
    """

    name: str = "coba"
    tau: float = 7.5  # τ of the budget saturation factor 1 - exp(-B p(1-p)/τ)
    history: int = 1  # W: visits pooled into a task's pass rate
    unseen_pass_rate: float = 0.5
    schedule: str = "failure"  # failure | success | static | linear_decay
    alpha: Optional[float] = None  # static: fixed (α, β)
    beta: Optional[float] = None
    total_steps: Optional[int] = None  # linear_decay: training steps (trainer.total_training_steps)

    def __post_init__(self):
        where = f"allocator={self.name}"
        if self.schedule not in SCHEDULES:
            raise ValueError(f"{where}: schedule={self.schedule!r}, choose from {list(SCHEDULES)}")
        super().__post_init__()
        if self.tau <= 0:
            raise ValueError(f"{where}: tau={self.tau} must be > 0")
        if not 0.0 <= self.unseen_pass_rate <= 1.0:
            raise ValueError(f"{where}: unseen_pass_rate={self.unseen_pass_rate} must lie in [0, 1]")
        if int(self.history) != self.history or self.history < 1:
            raise ValueError(f"{where}: history={self.history} must be an integer >= 1")
        static = self.schedule == "static"
        if static and not (self.alpha is not None and self.beta is not None and self.alpha > 0 and self.beta > 0):
            raise ValueError(f"{where}: schedule=static needs alpha > 0 and beta > 0, got ({self.alpha}, {self.beta})")
        if not static and (self.alpha is not None or self.beta is not None):
            raise ValueError(f"{where}: alpha/beta are only read by schedule=static (got schedule={self.schedule})")
        if self.schedule == "linear_decay" and (self.total_steps is None or self.total_steps < 1):
            raise ValueError(f"{where}: schedule=linear_decay needs the number of training steps; set "
                             f"trainer.total_training_steps (or allocator.total_steps), got {self.total_steps}")


class CobaAllocator(BudgetAllocator):
    stale_evidence = ("counted as fresh: pass rates enter the per-task history and the failure-rate window when "
                      "their group trains [decision: the window (CoBA-RL §2.2) already averages over steps]")
    """CoBA-RL with the ``(α, β)`` schedule of its config (see the module docstring)."""

    def __init__(self, config, seed: int):
        super().__init__(config, seed)
        self.history = TaskHistory(config.history)
        self.rates: list[float] = []  # batch success rates mean_i(p_i) of the last `window` steps
        k = config.kappa
        self.alpha, self.beta = (2.0, k - 2.0) if config.schedule == "success" else (k - 2.0, 2.0)
        self._metrics: dict[str, float] = {}

    def shape(self, step: int) -> tuple[float, float]:
        """``(α, β)`` to allocate with at ``step``."""
        c = self.config
        if c.schedule == "static":
            return float(c.alpha), float(c.beta)
        if c.schedule == "linear_decay":  # κ-1, κ-2, ..., 1: equal stretches of steps 1..total_steps
            stages = int(math.floor(c.kappa - 2.0)) + 1
            stage = min(max(step - 1, 0) * stages // c.total_steps, stages - 1)
            return c.kappa - 1.0 - stage, 1.0 + stage
        return self.alpha, self.beta

    def pass_rates(self, tasks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each task's pass rate over its last ``history`` visits (unseen: ``unseen_pass_rate``), unseen mask."""
        p, _ = self.history.lookup(tasks)
        unseen = np.isnan(p)
        return np.where(unseen, self.config.unseen_pass_rate, p), unseen

    def allocate(self, step: int, tasks: np.ndarray, total: int) -> np.ndarray:
        c = self.config
        check_budget(len(tasks), total, c.min_n, c.max_n)
        p, unseen = self.pass_rates(tasks)
        alpha, beta = self.shape(step)
        p = np.clip(p, c.p_min, c.p_max)
        counts = geometric_allocate(*coba_gains(p, alpha, beta, c.tau), c.min_n, c.max_n, total)
        self._allocation_metrics(counts, p, alpha, beta, c.tau, unseen)
        return counts

    def _allocation_metrics(self, counts, p, alpha, beta, tau, unseen) -> None:
        self._metrics.update(alpha=alpha, beta=beta, tau=tau, unseen_fraction=float(unseen.mean()),
                             value=float(coba_value(counts, p, alpha, beta, tau).sum()),
                             saturation_mean=float(np.mean(-np.expm1(-counts * p * (1 - p) / tau))))

    def update(self, step: int, results: StepResults) -> None:
        require_finite(f"allocator={self.config.name}", step, reward=results.reward)
        stats = results.per_task()
        self.history.record(stats)
        self.rates = (self.rates + [float(stats.pass_rate.mean())])[-self.config.window:]
        failure = 1.0 - float(np.mean(self.rates))
        driver = 1.0 - failure if self.config.schedule == "success" else failure
        self.alpha, self.beta = beta_shape(driver, self.config.kappa, self.config.gamma)
        self._metrics.update(failure_rate=failure, step_failure_rate=1.0 - self.rates[-1],
                             psi=psi(driver, self.config.gamma))

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict:
        return {"history": self.history.state_dict(), "rates": list(self.rates), "alpha": self.alpha, "beta": self.beta}

    def load_state_dict(self, state: dict) -> None:
        self.history.load_state_dict(state["history"])
        self.rates = [float(x) for x in state["rates"]]
        self.alpha, self.beta = float(state["alpha"]), float(state["beta"])


# ---------------------------------------------------------------------------------------------- official code
@dataclass(frozen=True)
class CobaOfficialAllocatorConfig(CobaBaseConfig):
    """CoBA-RL as the authors' code runs it ([authors' code] github.com/Within-yao/CoBA-RL): ``failure``
    schedule; ``τ = tau_base + tau_scale·clip(Var(p)/variance_ref, 0, 1)`` over the explore set's pass
    rates clipped to ``[p_min, p_max]``; an all-unseen batch is split uniformly, unseen tasks in a mixed
    batch count as ``p = 0.5``; every task gets ``min_n``, the solver spreads a share of the spare budget
    over the explore set (``hard_below <= p <= easy_above``: 0.8 if more than half the batch explores,
    else ``0.6 + 0.2·(2·#explore/M)``), the rest goes to very hard, then explore, then very easy tasks
    as :class:`CobaOfficialAllocator` describes.
    """

    name: str = "coba_official"
    tau_base: float = 3.0
    tau_scale: float = 9.0
    variance_ref: float = 0.1667
    hard_below: float = 0.05
    easy_above: float = 0.99
    schedule = "failure"  # fixed in the official code (class attributes, not config keys)
    history = 1
    unseen_pass_rate = 0.5

    def __post_init__(self):
        where = f"allocator={self.name}"
        super().__post_init__()
        if self.tau_base <= 0 or self.tau_scale < 0 or self.variance_ref <= 0:
            raise ValueError(f"{where}: need tau_base > 0, tau_scale >= 0, variance_ref > 0")
        if not 0.0 <= self.hard_below <= self.easy_above <= 1.0:
            raise ValueError(f"{where}: need 0 <= hard_below <= easy_above <= 1")


class CobaOfficialAllocator(CobaAllocator):
    """The authors' ``BetaAllocator.allocate`` (github.com/Within-yao/CoBA-RL,
    ``recipe/coba_rl/budget_allocators.py``), step by step:

    * ``τ`` from the explore set's pass rates clipped to ``[p_min, p_max]`` (``_update_tau_global``,
      called from ``_allocate_beta_greedy_internal`` with the explore rates), population variance;
    * the leftover budget goes to very hard, then explore, then very easy tasks
      (``_allocate_remaining_weighted``): within a group, tasks under ``max_n`` in batch order get
      ``int(left·w / Σw)`` with ``w = 1 - clip(p, 1e-6, 1 - 1e-6)`` (a solved task keeps a tiny weight)
      and ``left`` decreasing as the loop goes, capped at ``max_n``; the group's residue is spread over
      the same tasks (``left // k`` each, the first ``left % k`` one more, capped); Σw = 0 -> uniform.
    * **[decision]** what that code leaves unspent (caps hit inside a residue split) is given one by one
      in batch order to tasks under ``max_n``: the trainer needs the exact budget.
    """

    WEIGHT_CLIP = 1e-6

    def allocate(self, step: int, tasks: np.ndarray, total: int) -> np.ndarray:
        c = self.config
        m = len(tasks)
        check_budget(m, total, c.min_n, c.max_n)
        p, unseen = self.pass_rates(tasks)
        alpha, beta = self.shape(step)
        if unseen.all():
            counts = np.full(m, total // m, dtype=np.int64)
            counts[: total % m] += 1
            self._metrics.update(alpha=alpha, beta=beta, uniform=1.0, unseen_fraction=1.0)
            return counts
        hard, easy = p < c.hard_below, p > c.easy_above
        explore = ~hard & ~easy
        counts = np.full(m, c.min_n, dtype=np.int64)
        spare = total - m * c.min_n
        n_explore = int(explore.sum())
        share = 0.8 if n_explore > m / 2 else 0.6 + 0.2 * (2 * n_explore / m)
        solver_budget = min(int(share * spare), n_explore * (c.max_n - c.min_n))
        tau = float("nan")
        if n_explore:
            clipped = np.clip(p[explore], c.p_min, c.p_max)
            tau = c.tau_base + c.tau_scale * float(np.clip(np.var(clipped) / c.variance_ref, 0.0, 1.0))
            gains = coba_gains(clipped, alpha, beta, tau)
            counts[explore] = geometric_allocate(*gains, c.min_n, c.max_n, n_explore * c.min_n + solver_budget)
        left = spare - solver_budget
        for group in (hard, explore, easy):
            left = self._spread_weighted(counts, p, np.flatnonzero(group), left)
        while left > 0:  # [decision] see the class docstring
            open_ = np.flatnonzero(counts < c.max_n)[:left]
            counts[open_] += 1
            left -= len(open_)
        self._allocation_metrics(counts, np.clip(p, c.p_min, c.p_max), alpha, beta, tau, unseen)
        self._metrics.update(uniform=0.0, explore_fraction=n_explore / m, hard_fraction=float(hard.mean()),
                             easy_fraction=float(easy.mean()), solver_budget_share=solver_budget / max(spare, 1))
        return counts

    def _spread_weighted(self, counts: np.ndarray, p: np.ndarray, group: np.ndarray, left: int) -> int:
        """Give ``left`` rollouts to the tasks at ``group`` (positions, batch order); returns what is left."""
        cap = self.config.max_n
        open_ = [i for i in group.tolist() if counts[i] < cap]
        if left <= 0 or not open_:
            return left
        weight = [(1.0 - min(max(float(p[i]), self.WEIGHT_CLIP), 1.0 - self.WEIGHT_CLIP)) for i in open_]
        total_weight = sum(weight)
        if total_weight > 0:
            for i, w in zip(open_, weight):
                add = min(int(left * w / total_weight), cap - int(counts[i]))
                counts[i] += add
                left -= add
        open_ = [i for i in open_ if counts[i] < cap]
        if left > 0 and open_:
            each, extra = divmod(left, len(open_))
            for k, i in enumerate(open_):
                add = min(each + (1 if k < extra else 0), cap - int(counts[i]))
                counts[i] += add
                left -= add
        return left
