"""BOTS: Bayesian online task selection (the BOTS paper, §3.2-3.4), vectorised over the whole task pool.

Per task a Beta posterior ``(alpha, beta)``. After every step all ``N`` posteriors decay towards the
prior with forgetting ``λ`` and absorb evidence: explicit counts from the selected tasks' rollouts and,
with weight ``ρ``, implicit pseudo counts from an interpolation between a weak and a strong reference
model's pass rates (``p̃ = clip(pw + ĉ (ps - pw), 0, 1)``, capability ``ĉ`` a momentum average of
the batch's interpolation coefficient). Selection draws ``p̂ ~ Beta(alpha, beta)`` (or takes the
posterior mean) and keeps the ``B`` tasks closest to the target pass rate ``p*``.

The baselines of the paper are configurations of this one class (presets under
``verl_ext/config/selector/``): ``bots_mopps`` (ρ = 0, λ = 0; reference columns never read),
``bots_dots`` (ρ = 1, posterior mean).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import numpy as np

from verl_ext.axes.base import TaskSelector
from verl_ext.axes.views import StepResults, TaskPool

CAPABILITY_EPS = 1e-6  # denominator guard of the interpolation coefficient (BOTS §3.3: "a small ε")
# Thompson draws come from this many independent streams over fixed slices of the pool, so they are
# the same whatever the number of threads that run them (threads only for pools of THREADED_FROM tasks).
SAMPLING_STREAMS = 8
THREADED_FROM = 100_000


@lru_cache(maxsize=1)
def _threads() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=min(SAMPLING_STREAMS, os.cpu_count() or 1))


@dataclass(frozen=True)
class BotsSelectorConfig:
    """BOTS (§3.2-3.4, Eq. 1-5); field comments give the paper's symbols."""

    name: str = "bots"
    forgetting: float = 0.1  # λ: weight of the prior in every update; 0 = never forget
    implicit_weight: float = 0.1  # ρ: weight of implicit evidence; 0 = explicit only
    target: float = 0.5  # p*
    posterior_sampling: bool = True  # Thompson draw; False = posterior mean
    temperature: float = 0.0  # τ: 0 = top-B; > 0 = B without replacement from softmax(u / τ)
    momentum: float = 0.9  # of the capability estimate ĉ
    prior_alpha: float = 1.0  # α0
    prior_beta: float = 1.0  # β0
    weak_column: str = "weak_pass_rate"  # extra_info column of pw (read only when ρ > 0)
    strong_column: str = "strong_pass_rate"  # extra_info column of ps
    pseudo_rollouts: Optional[float] = None  # m of unselected tasks' pseudo counts; None = step's mean n
    adaptive_implicit_weight: bool = False  # halve ρ when the batch's mean |p̃ - observed| >= threshold
    adaptive_threshold: float = 0.25

    def __post_init__(self):
        for key in ("forgetting", "implicit_weight", "target", "adaptive_threshold"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise ValueError(f"selector=bots: {key}={getattr(self, key)} must lie in [0, 1]")
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"selector=bots: momentum={self.momentum} must lie in [0, 1)")
        if self.temperature < 0.0:
            raise ValueError(f"selector=bots: temperature={self.temperature} must be >= 0")
        if self.prior_alpha <= 0.0 or self.prior_beta <= 0.0:
            raise ValueError("selector=bots: prior_alpha and prior_beta must be > 0")
        if self.pseudo_rollouts is not None and self.pseudo_rollouts <= 0:
            raise ValueError(f"selector=bots: pseudo_rollouts={self.pseudo_rollouts} must be > 0 (or null)")

    @property
    def uses_reference(self) -> bool:
        return self.implicit_weight > 0.0


def reference_pass_rates(pool: TaskPool, config: BotsSelectorConfig) -> tuple[np.ndarray, np.ndarray]:
    """``(pw, ps)`` from the pool's ``extra_info`` columns, checked: present, numeric, in [0, 1]."""
    hint = ("compute them with `python -m data_prep.reference_pass_rates` (GURU ships them), or set "
            "selector.implicit_weight=0 (explicit evidence only, e.g. selector=bots_mopps)")
    out = []
    for column in (config.weak_column, config.strong_column):
        if column not in pool.columns:
            raise ValueError(f"selector=bots with implicit_weight={config.implicit_weight} needs the reference pass "
                             f"rate column extra_info.{column}, which the training data lacks; {hint}")
        try:
            values = np.asarray(pool.columns[column], dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"extra_info.{column} is not numeric: {e}") from e
        bad = np.flatnonzero(~((values >= 0.0) & (values <= 1.0)))  # NaN fails both comparisons
        if len(bad):
            examples = ", ".join(f"index {pool.index[p]} (row {p}): {values[p]}" for p in bad[:5])
            raise ValueError(f"extra_info.{column} is missing or outside [0, 1] for {len(bad)} of {len(values)} "
                             f"training tasks, e.g. {examples}; {hint}")
        out.append(values)
    return out[0], out[1]


class BotsSelector(TaskSelector):
    stale_evidence = ("weighted (1 - λ)^lag: evidence generated lag policy updates ago counts as if absorbed then and "
                      "forgotten at every update since [decision: §3.2's forgetting applied to the evidence's age]")

    def __init__(self, config: BotsSelectorConfig, pool: TaskPool, seed: int):
        super().__init__(config, pool, seed)
        if config.uses_reference:
            self.weak, strong = reference_pass_rates(pool, config)
            self.span = strong - self.weak  # ps - pw
        else:
            self.weak = self.span = None
        self.alpha = np.full(len(pool), config.prior_alpha)
        self.beta = np.full(len(pool), config.prior_beta)
        self.capability = float("nan")  # ĉ, unset until the first update
        self.implicit_weight = config.implicit_weight  # ρ, halved by the adaptive rule
        seeds = np.random.SeedSequence(seed).spawn(1 + SAMPLING_STREAMS)
        self.rng = np.random.Generator(np.random.PCG64(seeds[0]))  # tie-breaks and Gumbel keys
        self.streams = [np.random.Generator(np.random.PCG64(s)) for s in seeds[1:]]  # Beta draws
        self._bounds = np.linspace(0, len(pool), SAMPLING_STREAMS + 1).astype(np.int64)
        self._metrics: dict[str, float] = {}

    # ---------------------------------------------------------------- selection
    def estimates(self) -> np.ndarray:
        """``p̂`` of every task: a Thompson draw, or the posterior mean."""
        if not self.config.posterior_sampling:
            return self.alpha / (self.alpha + self.beta)
        out = np.empty(len(self.alpha))

        def draw(k: int) -> None:  # numpy releases the GIL while sampling
            lo, hi = self._bounds[k], self._bounds[k + 1]
            out[lo:hi] = self.streams[k].beta(self.alpha[lo:hi], self.beta[lo:hi])

        if len(out) >= THREADED_FROM:
            list(_threads().map(draw, range(SAMPLING_STREAMS)))
        else:
            for k in range(SAMPLING_STREAMS):
                draw(k)
        return out

    def select(self, step: int, batch_size: int, exclude=None) -> np.ndarray:
        n = len(self.pool)
        free = self.available(exclude, batch_size)
        p_hat = self.estimates()
        distance = np.subtract(p_hat, self.config.target)  # -utility: the B smallest |p̂ - p*| win
        np.abs(distance, out=distance)
        if free is not None:  # tasks in flight: drawn as usual (same random streams), never chosen
            distance[~free] = np.inf
        if self.config.temperature > 0:  # Gumbel top-B = B draws without replacement from softmax(u / τ)
            distance /= self.config.temperature
            keys, order = np.subtract(distance, self.rng.gumbel(size=n), out=distance), None
        elif self.config.posterior_sampling:
            keys, order = distance, None  # continuous draws: ties have probability zero
        else:  # the posterior mean ties (e.g. every task at the prior): break ties uniformly at random
            order = self.rng.permutation(n)
            keys = distance[order]
        top = np.argpartition(keys, batch_size - 1)[:batch_size]
        top = top[np.argsort(keys[top], kind="stable")]  # best first
        positions = top if order is None else order[top]
        self._metrics = {"selected_estimate_mean": float(p_hat[positions].mean()),
                         "selected_posterior_mean": float(np.mean(self.alpha[positions] /
                                                                  (self.alpha[positions] + self.beta[positions])))}
        return self.pool.index[positions]

    # ---------------------------------------------------------------- update
    def update(self, step: int, results: StepResults) -> None:
        cfg = self.config
        if len(results.reward) == 0:  # the capability and p̃ are means over the batch: undefined
            raise ValueError(f"selector=bots: step {step} update has no rollouts")
        bad = ~np.isfinite(results.reward) | (results.reward < 0.0) | (results.reward > 1.0)
        if np.any(bad):  # one NaN would turn every posterior NaN through the capability when ρ > 0
            where = np.flatnonzero(bad)[:3]
            raise ValueError(f"selector=bots: step {step} has rewards outside [0, 1] or not finite: "
                             f"{results.reward[where].tolist()} for tasks {results.task_index[where].tolist()}; "
                             "the Beta posterior counts rewards as successes")
        stats = results.per_task()
        positions = self.pool.positions(stats.index)
        n = stats.n.astype(np.float64)
        successes = stats.mean_reward * n  # s_i = Σ r (fractional for non-binary rewards)
        lag = results.lag(step)
        if lag.any():  # as if absorbed when generated and forgotten once per policy update since (STALE_EVIDENCE)
            weight = (1.0 - cfg.forgetting) ** lag
            inverse = np.searchsorted(stats.index, results.task_index)
            n = np.bincount(inverse, weights=weight, minlength=len(stats.index))
            successes = np.bincount(inverse, weights=weight * results.reward, minlength=len(stats.index))
        observed = successes / n

        lam, rho = cfg.forgetting, self.implicit_weight
        self.alpha *= 1.0 - lam
        self.beta *= 1.0 - lam
        metrics = {"implicit_weight": rho}
        if rho > 0.0:
            p_tilde = self._implicit_estimates(positions, observed)
            gap = float(np.mean(np.abs(p_tilde[positions] - observed)))
            m = float(cfg.pseudo_rollouts) if cfg.pseudo_rollouts is not None else float(stats.n.mean())
            pseudo_s = np.multiply(p_tilde, rho * m, out=p_tilde)
            pseudo_f = np.subtract(rho * m, pseudo_s)
            # selected tasks: p̃ is the observed s/n with m = n, so (1-ρ)s + ρ n (s/n) = s
            pseudo_s[positions], pseudo_f[positions] = successes, n - successes
            pseudo_s += lam * cfg.prior_alpha
            pseudo_f += lam * cfg.prior_beta
            self.alpha += pseudo_s
            self.beta += pseudo_f
            metrics.update(capability=self.capability, implicit_error=gap)
            if cfg.adaptive_implicit_weight and gap >= cfg.adaptive_threshold:
                self.implicit_weight = rho / 2.0
        else:
            self.alpha += lam * cfg.prior_alpha
            self.beta += lam * cfg.prior_beta
            self.alpha[positions] += successes
            self.beta[positions] += n - successes
        metrics["effective_sample_size_mean"] = float(np.mean(self.alpha + self.beta))
        self._metrics.update(metrics)

    def _implicit_estimates(self, positions: np.ndarray, observed: np.ndarray) -> np.ndarray:
        """``p̃`` of every task from the capability ``ĉ`` updated on the batch (BOTS §3.3, Eq. 5)."""
        pw, span = self.weak[positions], self.span[positions]
        c = (observed.mean() - pw.mean()) / (span.mean() + CAPABILITY_EPS)  # mean(ps) - mean(pw) = mean(span)
        m = self.config.momentum
        self.capability = float(c) if np.isnan(self.capability) else float(m * self.capability + (1.0 - m) * c)
        p_tilde = np.multiply(self.span, self.capability)
        p_tilde += self.weak
        return np.clip(p_tilde, 0.0, 1.0, out=p_tilde)

    # ---------------------------------------------------------------- records and state
    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict:
        return {"index": self.pool.index.copy(), "alpha": self.alpha.copy(), "beta": self.beta.copy(),
                "capability": self.capability, "implicit_weight": self.implicit_weight,
                "rng": self.rng.bit_generator.state, "streams": [g.bit_generator.state for g in self.streams]}

    def load_state_dict(self, state: dict) -> None:
        self.check_task_pool(state)
        self.alpha = np.array(state["alpha"], dtype=np.float64)
        self.beta = np.array(state["beta"], dtype=np.float64)
        self.capability = float(state["capability"])
        self.implicit_weight = float(state["implicit_weight"])
        self.rng.bit_generator.state = state["rng"]
        for generator, saved in zip(self.streams, state["streams"], strict=True):
            generator.bit_generator.state = saved
