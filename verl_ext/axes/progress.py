"""Progress-aware prompt sampling for Countdown (Yan, "Progress-Aware Prompt Sampling", CS224R, §3.2-3.3,
Eq. 3-9): a bucket sampler driven by learning progress and within-prompt reward variance, and its prompt-level
follow-up.

**Bucket sampler** (``selector=progress`` and its presets ``bucket_uniform``, ``empirical``, ``conservative``,
``density_ratio``, ``random_buckets``). Every prompt belongs to one bucket (``extra_info.<bucket_column>``: the
8 buckets {3, 4 numbers} × target {<25, 25-49, 50-74, ≥75} the Countdown converters write; or, with
``random_buckets = R``, one of R seeded random partitions). After each step, for every bucket ``b`` with rollouts:

* ``p̂_b`` = mean verifier score of the bucket's rollouts (0.1 scores included),
  ``p_short ← (1−α_s) p_short + α_s p̂_b``, ``p_long ← (1−α_l) p_long + α_l p̂_b`` (α_s 0.3, α_l 0.03);
  **[decision]** both start at a bucket's first ``p̂_b`` (no progress is read into the first observation);
* ``LP_b = max(0, p_short − p_long)``; ``I_b`` = mean over the bucket's prompts of their population reward
  variance this step (kept until the bucket is sampled again); ``U_b = λ LP_b + (1−λ) I_b`` (λ 0.5).

Distribution: a bucket never observed keeps its prior probability; the other buckets share the rest as
``(1−ε) softmax(U/τ) + ε P_prior`` (both renormalised over them) **[decision: how "keep the prior until they get
data" composes with Eq. 8-9]**. Then ``cap`` bounds every bucket (``density_ratio``: ``P(b) / P_data(b)`` within
``ratio_clip``): P becomes the distribution within the bounds closest to it in KL, ``clip(c P, lower, upper)``
(:func:`bound_to_simplex`) **[decision]**. Each step draws the bucket counts from Multinomial(batch, P) and, within a
bucket, distinct prompts uniformly (a bucket asked for more prompts than it has gives them all; the rest is
drawn again over the buckets with prompts left, by P). ``P_prior`` is uniform over buckets (``prior=uniform``)
or their frequency in the training data (``prior=data``).

**Prompt-level utility** (``selector=prompt_utility``): per prompt, the same short / long success EMAs, its last
reward variance, its degenerate-group rate (groups with all-equal rewards / groups seen), its format-valid rate
(rollouts with a well-formed answer / rollouts) and how often it was chosen; ``U = LP + variance − degenerate −
invalid − oversampling`` with equal weights **[decision: the paper names the terms, not their weights]**,
oversampling = ``max(0, times / expected − 1)``, expected = prompts chosen so far / pool size. Unseen prompts keep
their uniform prior; the batch is drawn without replacement from the same mixture (Gumbel top-k over ``log P``).
Format validity comes from the step results' per-rollout ``format_valid`` flags when the trainer passes them,
otherwise from the verifier score (Countdown: 0.0 = no usable ``<answer>``).

Logged per step: ``bucket_prob/<b>``, ``learning_progress/<b>``, ``informativeness/<b>`` (at most 16 buckets),
``degenerate_rate`` (groups of the step with all-equal rewards: ``GroupRewards.degenerate``), ``format_valid_rate``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from verl_ext.axes.base import TaskSelector, require_finite
from verl_ext.axes.views import StepResults, TaskPool

PRIORS = ("uniform", "data")
LOGGED_BUCKETS_UP_TO = 16


def softmax(x: np.ndarray, temperature: float) -> np.ndarray:
    z = np.asarray(x, dtype=np.float64) / temperature
    z = np.exp(z - z.max())
    return z / z.sum()


def bound_to_simplex(p: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """The distribution within ``[lower, upper]`` closest to ``p`` in KL(q ‖ p): ``q = clip(c p, lower, upper)``
    with the one scale ``c`` that makes it sum to 1 **[decision]**.

    The paper (§3.3) caps the bucket probability (0.5, 0.25, 0.18) or clips ``P(b) / P_data(b)`` to [0.5, 1.5]
    [paper], but says nothing of how the clipped mass is shared. The KL (information) projection keeps the ratios of the
    unclipped buckets as the mixture set them, as a multiplicative clip of ``P / P_data`` suggests, and equals the
    earlier rule (bound the violators, rescale the rest in proportion to ``p``) whenever only one side binds; a
    Euclidean projection would instead shift every free bucket by the same amount. ``c`` is found exactly: the
    sum is piecewise linear and increasing in ``c`` with knots ``lower / p`` and ``upper / p``; a bisection over
    the sorted knots finds the segment, where the free entries share what the bounded ones leave in proportion to
    ``p``. Entries of ``p`` below the smallest normal float count as 0: they stay at ``lower`` unless the others
    cannot reach 1 even at ``upper``, then they fill the rest as the limit of an equal vanishing weight would.
    Raises ``ValueError`` only when no distribution lies within the bounds."""
    p, lower, upper = (np.asarray(a, dtype=np.float64) for a in (p, lower, upper))
    if not (p.ndim == 1 and p.shape == lower.shape == upper.shape):
        raise ValueError(f"p, lower and upper must be vectors of one length: {p.shape}, {lower.shape}, {upper.shape}")
    if not (np.all(np.isfinite(p)) and np.all(p >= 0)):
        raise ValueError(f"p must be finite and non-negative, got {p.tolist()}")
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper)) and np.all((0 <= lower) & (lower <= upper))):
        raise ValueError(f"the bounds must be finite with 0 <= lower <= upper, got {lower.tolist()}, {upper.tolist()}")
    upper = np.minimum(upper, 1.0)  # no probability exceeds 1: keeps the knots upper / p finite
    if lower.sum() > 1 + 1e-12 or upper.sum() < 1 - 1e-12:
        raise ValueError(f"no distribution within the bounds (lower sum {lower.sum():.3f}, upper sum "
                         f"{upper.sum():.3f})")
    q = lower.copy()
    weighted = p >= np.finfo(np.float64).tiny
    rest = 1.0 - lower[~weighted].sum()
    if upper[weighted].sum() < rest:  # the weighted entries at their upper bounds and still short of 1
        q[weighted] = upper[weighted]
        zero = ~weighted
        q[zero] = _scaled_clip(np.full(zero.sum(), 1.0), lower[zero], upper[zero], 1.0 - upper[weighted].sum())
    elif weighted.any():
        q[weighted] = _scaled_clip(p[weighted], lower[weighted], upper[weighted], rest)
    return np.clip(q, lower, upper)  # rounding only: the sum stays within 1e-12


def _scaled_clip(p: np.ndarray, lower: np.ndarray, upper: np.ndarray, total: float) -> np.ndarray:
    """``clip(c p, lower, upper)`` summing to ``total`` (``p > 0``, ``sum(lower) <= total <= sum(upper)``)."""
    knots = np.unique(np.concatenate([[0.0], lower / p, upper / p]))

    def at(c: float) -> float:  # increasing in c
        return float(np.clip(c * p, lower, upper).sum())

    lo, hi = 0, len(knots) - 1  # invariant: at(knots[lo]) < total <= at(knots[hi]), unless total is reached at 0
    if at(knots[0]) >= total:
        return lower.copy()
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if at(knots[mid]) < total else (lo, mid)
    # no knot lies strictly inside (knots[lo], knots[hi]): each entry stays at one bound or is free there
    at_lower, at_upper = lower / p >= knots[hi], upper / p <= knots[lo]
    free = ~(at_lower | at_upper)
    q = np.where(at_upper, upper, lower)
    if free.any():  # none only when rounding left the sum a hair short of total at the last knot
        q[free] = p[free] * (total - q[~free].sum()) / p[free].sum()
    return q


def mixture(utility: np.ndarray, seen: np.ndarray, prior: np.ndarray, epsilon: float, temperature: float):
    """Unseen entries keep ``prior``; the seen ones share the rest as ``(1−ε) softmax(U/τ) + ε prior``."""
    p = prior.astype(np.float64).copy()
    if seen.any():
        mass = prior[seen].sum()
        p[seen] = mass * ((1 - epsilon) * softmax(utility[seen], temperature) + epsilon * prior[seen] / mass)
    return p


@dataclass(frozen=True)
class ProgressSelectorConfig:
    """Bucket-level progress-aware sampling; the presets set ``prior`` / ``epsilon`` / ``temperature`` / ``cap``
    as Yan §3.3 (Eq. 8-9) and Table 5."""

    name: str = "progress"
    prior: str = "uniform"  # uniform | data (bucket frequency in the training data)
    epsilon: float = 0.2  # ε: weight of the prior
    temperature: float = 0.2  # τ of the utility softmax
    cap: Optional[float] = 0.5  # max probability of a bucket (null: none)
    ratio_clip: Optional[tuple[float, float]] = None  # density_ratio: P(b) / P_data(b) within [lo, hi]
    alpha_short: float = 0.3
    alpha_long: float = 0.03
    progress_weight: float = 0.5  # λ: U = λ LP + (1 − λ) I
    bucket_column: str = "bucket"  # extra_info column (data_prep's Countdown rows)
    random_buckets: int = 0  # > 0: that many seeded random partitions of the prompts instead of bucket_column

    def __post_init__(self):
        name = f"selector={self.name}"
        if self.prior not in PRIORS:
            raise ValueError(f"{name}: prior={self.prior!r}; choose from {list(PRIORS)}")
        if not 0 <= self.epsilon <= 1 or self.temperature <= 0 or not 0 <= self.progress_weight <= 1:
            raise ValueError(f"{name}: epsilon and progress_weight must lie in [0, 1], temperature > 0")
        if not 0 < self.alpha_long <= 1 or not 0 < self.alpha_short <= 1:
            raise ValueError(f"{name}: alpha_short and alpha_long must lie in (0, 1]")
        if self.cap is not None and not 0 < self.cap <= 1:
            raise ValueError(f"{name}: cap={self.cap} must lie in (0, 1]")
        if self.ratio_clip is not None and not 0 <= self.ratio_clip[0] <= 1 <= self.ratio_clip[1]:
            raise ValueError(f"{name}: ratio_clip={list(self.ratio_clip)} must be [lo <= 1, hi >= 1]")
        if self.random_buckets < 0:
            raise ValueError(f"{name}: random_buckets={self.random_buckets} must be >= 0")


def _ema(old: np.ndarray, new: np.ndarray, alpha: float, first: np.ndarray) -> np.ndarray:
    return np.where(first, new, (1 - alpha) * old + alpha * new)


class ProgressSelector(TaskSelector):
    stale_evidence = ("counted as fresh: a bucket's short and long EMAs take the score when its group trains "
                      "[decision: the EMAs' own horizons are longer than the off-policy threshold's lag]")
    def __init__(self, config: ProgressSelectorConfig, pool: TaskPool, seed: int):
        super().__init__(config, pool, seed)
        self.rng = np.random.default_rng(seed)
        if config.random_buckets:
            partition = np.random.default_rng([seed, 4]).integers(config.random_buckets, size=len(pool))
            self.bucket_ids, self.bucket_of = np.arange(config.random_buckets), partition
        else:
            if config.bucket_column not in pool.columns:
                raise ValueError(f"selector={config.name} needs extra_info.{config.bucket_column} (the Countdown "
                                 f"converters write it) or random_buckets > 0; the data has {sorted(pool.columns)}")
            values = np.asarray(pool.columns[config.bucket_column], dtype=np.float64)
            if not np.all(np.isfinite(values)) or np.any(values != np.round(values)):
                raise ValueError(f"selector={config.name}: extra_info.{config.bucket_column} must be integers")
            self.bucket_ids, self.bucket_of = np.unique(values.astype(np.int64), return_inverse=True)
        k = len(self.bucket_ids)
        self.members = [np.flatnonzero(self.bucket_of == b) for b in range(k)]
        self.p_data = np.array([len(m) for m in self.members], dtype=np.float64) / len(pool)
        self.prior = np.full(k, 1.0 / k) if config.prior == "uniform" else self.p_data.copy()
        lower, upper = np.zeros(k), np.ones(k)
        if config.cap is not None:
            upper = np.minimum(upper, config.cap)
        if config.ratio_clip is not None:
            lower, upper = config.ratio_clip[0] * self.p_data, np.minimum(upper, config.ratio_clip[1] * self.p_data)
        if lower.sum() > 1 or upper.sum() < 1:
            raise ValueError(f"selector={config.name}: cap / ratio_clip leave no distribution over {k} buckets")
        self.lower, self.upper = lower, upper
        self.short, self.long, self.informativeness = np.zeros(k), np.zeros(k), np.zeros(k)
        self.seen = np.zeros(k, dtype=bool)
        self._metrics: dict[str, float] = {}

    # ------------------------------------------------------------------ distribution and selection
    def utility(self) -> np.ndarray:
        lam = self.config.progress_weight
        return lam * np.maximum(0.0, self.short - self.long) + (1 - lam) * self.informativeness

    def distribution(self) -> np.ndarray:
        c = self.config
        p = mixture(self.utility(), self.seen, self.prior, c.epsilon, c.temperature)
        return bound_to_simplex(p, self.lower, self.upper)

    def select(self, step: int, batch_size: int, exclude=None) -> np.ndarray:
        free = self.available(exclude, batch_size)
        p = self.distribution()
        # the prompts not yet chosen (nor in flight) per bucket; replaced, never changed in place
        left = list(self.members) if free is None else [m[free[m]] for m in self.members]
        chosen: list[np.ndarray] = []
        need = batch_size
        while need:
            has = np.array([len(m) > 0 for m in left], dtype=np.float64)
            weights = p * has if (p * has).sum() > 0 else has  # buckets at probability 0 only when nothing else is left
            counts = self.rng.multinomial(need, weights / weights.sum())
            picks = {}
            for b in np.flatnonzero(counts):
                take = min(int(counts[b]), len(left[b]))
                picks[b] = self.rng.choice(len(left[b]), size=take, replace=False)
                chosen.append(left[b][picks[b]])
                need -= take
            if need:  # a bucket ran out: draw again over what is left (rare, so only then copy)
                left = [np.delete(m, picks[b]) if b in picks else m for b, m in enumerate(left)]
        positions = np.concatenate(chosen)
        self._metrics = {f"bucket_prob/{self.bucket_ids[b]}": float(v) for b, v in enumerate(p)
                         } if len(p) <= LOGGED_BUCKETS_UP_TO else {}
        return self.pool.index[self.rng.permutation(positions)]

    # ------------------------------------------------------------------ update
    def update(self, step: int, results: StepResults) -> None:
        require_finite(f"selector={self.config.name}", step, reward=results.reward)
        c, stats = self.config, results.per_task()
        bucket = self.bucket_of[self.pool.positions(stats.index)]
        k = len(self.bucket_ids)
        rollouts = np.bincount(bucket, weights=stats.n, minlength=k)
        prompts = np.bincount(bucket, minlength=k)
        observed = rollouts > 0
        score = np.bincount(bucket, weights=stats.mean_reward * stats.n, minlength=k)[observed] / rollouts[observed]
        first = ~self.seen[observed]
        self.short[observed] = _ema(self.short[observed], score, c.alpha_short, first)
        self.long[observed] = _ema(self.long[observed], score, c.alpha_long, first)
        self.informativeness[observed] = (np.bincount(bucket, weights=stats.reward_var, minlength=k)[observed]
                                          / prompts[observed])
        self.seen |= observed
        self._metrics.update(step_metrics(results, stats))
        if k <= LOGGED_BUCKETS_UP_TO:
            lp = np.maximum(0.0, self.short - self.long)
            for b, bid in enumerate(self.bucket_ids):
                self._metrics[f"learning_progress/{bid}"] = float(lp[b])
                self._metrics[f"informativeness/{bid}"] = float(self.informativeness[b])

    # ------------------------------------------------------------------ records and state
    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict:
        return {"index": self.pool.index.copy(), "bucket_of": self.bucket_of.copy(), "short": self.short.copy(),
                "long": self.long.copy(), "informativeness": self.informativeness.copy(), "seen": self.seen.copy(),
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        if not (np.array_equal(np.asarray(state["index"]), self.pool.index)
                and np.array_equal(np.asarray(state["bucket_of"]), self.bucket_of)):
            raise ValueError(f"selector={self.config.name}: the checkpoint's tasks or buckets differ from the "
                             "training data; resume with the same train_files and seed")
        for key in ("short", "long", "informativeness"):
            setattr(self, key, np.array(state[key], dtype=np.float64))
        self.seen = np.array(state["seen"], dtype=bool)
        self.rng.bit_generator.state = state["rng"]


def format_valid(results: StepResults) -> np.ndarray:
    """Per rollout: the trainer's ``format_valid`` flags, else a verifier score above 0 (an answer was parsed)."""
    return results.format_valid if results.format_valid is not None else results.reward > 0


def step_metrics(results: StepResults, stats) -> dict[str, float]:
    return {"degenerate_rate": float(np.mean(stats.degenerate)),
            "format_valid_rate": float(np.mean(format_valid(results)))}


@dataclass(frozen=True)
class PromptUtilitySelectorConfig:
    """The prompt-level follow-up (Yan §3.3, §5.4): per-prompt progress + variance − penalties."""

    name: str = "prompt_utility"
    epsilon: float = 0.5  # [decision] the empirical variant's mixing, over prompts
    temperature: float = 0.2
    alpha_short: float = 0.3
    alpha_long: float = 0.03

    def __post_init__(self):
        if not 0 <= self.epsilon <= 1 or self.temperature <= 0:
            raise ValueError("selector=prompt_utility: epsilon must lie in [0, 1] and temperature > 0")
        if not 0 < self.alpha_long <= 1 or not 0 < self.alpha_short <= 1:
            raise ValueError("selector=prompt_utility: alpha_short and alpha_long must lie in (0, 1]")


class PromptUtilitySelector(TaskSelector):
    stale_evidence = ("counted as fresh: a prompt's utility takes its group's results when the group trains "
                      "[decision: as the progress selector]")
    FIELDS = ("short", "long", "variance", "groups", "degenerate", "rollouts", "valid", "times")

    def __init__(self, config: PromptUtilitySelectorConfig, pool: TaskPool, seed: int):
        super().__init__(config, pool, seed)
        self.rng = np.random.default_rng(seed)
        n = len(pool)
        for name in self.FIELDS:
            setattr(self, name, np.zeros(n))
        self.seen = np.zeros(n, dtype=bool)
        self._metrics: dict[str, float] = {}

    def utility(self) -> np.ndarray:
        groups, rollouts = np.maximum(self.groups, 1), np.maximum(self.rollouts, 1)
        expected = self.times.sum() / len(self.pool)
        over = np.maximum(0.0, self.times / expected - 1) if expected > 0 else np.zeros(len(self.pool))
        return (np.maximum(0.0, self.short - self.long) + self.variance - self.degenerate / groups
                - (1 - self.valid / rollouts) - over)

    def distribution(self) -> np.ndarray:
        n = len(self.pool)
        return mixture(self.utility(), self.seen, np.full(n, 1.0 / n), self.config.epsilon, self.config.temperature)

    def select(self, step: int, batch_size: int, exclude=None) -> np.ndarray:
        free = self.available(exclude, batch_size)
        keys = np.log(self.distribution()) + self.rng.gumbel(size=len(self.pool))
        if free is not None:
            keys[~free] = -np.inf
        positions = np.argsort(-keys, kind="stable")[:batch_size]
        self.times[positions] += 1
        return self.pool.index[positions]

    def update(self, step: int, results: StepResults) -> None:
        require_finite(f"selector={self.config.name}", step, reward=results.reward)
        c, stats = self.config, results.per_task()
        pos = self.pool.positions(stats.index)
        first = ~self.seen[pos]
        self.short[pos] = _ema(self.short[pos], stats.mean_reward, c.alpha_short, first)
        self.long[pos] = _ema(self.long[pos], stats.mean_reward, c.alpha_long, first)
        self.variance[pos] = stats.reward_var
        self.groups[pos] += 1
        self.degenerate[pos] += stats.degenerate
        self.rollouts[pos] += stats.n
        valid = np.bincount(np.searchsorted(stats.index, results.task_index), weights=format_valid(results),
                            minlength=len(stats.index))
        self.valid[pos] += valid
        self.seen[pos] = True
        self._metrics = step_metrics(results, stats)
        self._metrics["utility_mean_seen"] = float(self.utility()[self.seen].mean())

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict:
        return {"index": self.pool.index.copy(), "seen": self.seen.copy(), "rng": self.rng.bit_generator.state,
                **{name: getattr(self, name).copy() for name in self.FIELDS}}

    def load_state_dict(self, state: dict) -> None:
        self.check_task_pool(state)
        for name in self.FIELDS:
            setattr(self, name, np.array(state[name], dtype=np.float64))
        self.seen = np.array(state["seen"], dtype=bool)
        self.rng.bit_generator.state = state["rng"]
