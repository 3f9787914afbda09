"""Evaluation and training-log metrics shared by the recipes: BOTS paper App. B.4 (ETR, TTB, BSF), CoBA-RL
(Yao et al.) App. D.1 (task transitions), Yan, "Progress-Aware Prompt Sampling", CS224R, §4 (pass@k, paired
bootstrap, degenerate batches).

Pure NumPy, vectorised over problems / prompts / steps:

* sample metrics: :func:`pass_at_k` (unbiased), :func:`mean_at_k`, :func:`mean_and_std_over_runs`,
  :func:`zero_success_rate`, :func:`all_success_rate`;
* learning curves (BOTS): :func:`time_to_baseline`, :func:`best_so_far`, :func:`aggregate_curves`;
* training logs: :func:`effective_task_ratio`, :func:`degenerate_group_rate`, :func:`etr_over_steps`,
  :func:`degenerate_rate_over_steps`, :func:`degenerate_rate_summary`;
* paired comparisons: :func:`paired_bootstrap_ci`, :func:`paired_wins_losses_ties`;
* :func:`transition_matrix` over :data:`PASS_RATE_BINS`; :func:`countdown_format_diagnostics`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike


ETR_KEY = "data_selection/effective_task_ratio"
DEGENERATE_KEY = "data_selection/degenerate_group_rate"
SUCCESS_THRESHOLD = 1.0  # a rollout succeeds when its reward is >= 1 (the trainer's definition)
PASS_RATE_BINS = ("p = 0", "(0, 0.2]", "(0.2, 0.8)", "[0.8, 1)", "p = 1")
_BOOTSTRAP_CHUNK_ELEMENTS = 1 << 22  # resampled values held at once (32 MiB of float64)


class MeanSE(NamedTuple):
    mean: float
    se: float  # standard error of the mean: sample std (ddof=1) / sqrt(n); NaN when n < 2
    n: int


class BootstrapCI(NamedTuple):
    diff: np.ndarray | float  # mean over prompts of a − b
    low: np.ndarray | float
    high: np.ndarray | float


# --------------------------------------------------------------------------- sample metrics
def pass_at_k(n: ArrayLike, c: ArrayLike, k: int) -> np.ndarray:
    """Unbiased pass@k ``1 − C(n−c, k)/C(n, k)`` per problem from ``n`` samples with ``c`` correct.

    Product form ``C(n−c, k)/C(n, k) = Π_{j<k} (1 − c/(n−j))`` summed in log space
    (``1 − exp(Σ log1p(−c/(n−j)))``): no binomial is formed and every value (n = 1024
    included) is within a few ulps of the exact one. Memory is ``problems × k``. ``n`` and ``c``
    broadcast; fails if ``k > n``, ``k < 1`` or ``c ∉ [0, n]``.
    """
    n, c = np.broadcast_arrays(np.asarray(n, dtype=np.int64), np.asarray(c, dtype=np.int64))
    if k < 1 or np.any(k > n):
        raise ValueError(f"pass@{k} needs 1 <= k <= n samples per problem (min n = {n.min(initial=k)})")
    if np.any((c < 0) | (c > n)):
        raise ValueError("correct counts must lie in [0, n]")
    reachable = n - c >= k  # otherwise every k-subset holds a correct sample
    denominators = n[..., None] - np.arange(k)  # n, n−1, ..., n−k+1 (all >= 1)
    fractions = np.where(reachable[..., None], c[..., None] / denominators, 0.0)
    return np.where(reachable, -np.expm1(np.log1p(-fractions).sum(axis=-1)) + 0.0, 1.0)


def mean_at_k(scores: ArrayLike | Sequence[ArrayLike]) -> float:
    """avg@k / mean@k: mean score over each problem's samples, then over problems.

    ``scores`` is a ``[problems, k]`` matrix, or a sequence of per-problem sample arrays (ragged k).
    """
    if isinstance(scores, np.ndarray) and scores.ndim == 2:
        return float(scores.mean(axis=1).mean())
    return float(np.mean([np.mean(s) for s in scores]))


def mean_and_std_over_runs(values: ArrayLike, ddof: int = 1) -> tuple[np.ndarray | float, np.ndarray | float]:
    """Mean and std over repeated evaluation runs (axis 0; each run a scalar or an array).

    The sample std (``ddof=1``) by default: NaN for a single run.
    """
    values = np.asarray(values, dtype=np.float64)
    std = np.std(values, axis=0, ddof=ddof) if len(values) > ddof else np.full(values.shape[1:], np.nan)
    return values.mean(axis=0)[()], std[()]


def zero_success_rate(c: ArrayLike) -> float:
    """Fraction of problems with no correct sample (``c == 0``)."""
    return float(np.mean(np.asarray(c) == 0))


def all_success_rate(n: ArrayLike, c: ArrayLike) -> float:
    """Fraction of problems whose every sample is correct (``c == n``)."""
    n, c = np.broadcast_arrays(np.asarray(n), np.asarray(c))
    return float(np.mean(c == n))


# --------------------------------------------------------------------------- learning curves (BOTS)
def _curve(steps: ArrayLike, values: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    steps, values = np.asarray(steps, dtype=np.float64), np.asarray(values, dtype=np.float64)
    if steps.shape != values.shape or steps.ndim != 1 or len(steps) == 0:
        raise ValueError("a curve needs equally long, non-empty 1-D steps and values")
    order = np.argsort(steps, kind="stable")
    if np.any(np.diff(steps[order]) == 0):
        raise ValueError("a curve has two evaluations at the same step")
    return steps[order], values[order]


def _first_reach(steps: np.ndarray, values: np.ndarray, target: float) -> float:
    """First step the piecewise-linear curve reaches ``target`` (``steps[0]`` if it starts there)."""
    above = np.flatnonzero(values >= target)
    if len(above) == 0:
        return np.nan
    j = above[0]
    if j == 0:
        return float(steps[0])
    frac = (target - values[j - 1]) / (values[j] - values[j - 1])
    return float(steps[j - 1] + frac * (steps[j] - steps[j - 1]))


def time_to_baseline(steps: ArrayLike, method_curve: ArrayLike, baseline_steps: ArrayLike,
                     baseline_curve: ArrayLike, q: float, window: float | None = None) -> float:
    """TTB(q) = T_m / T_random (BOTS App. B.4); NaN (rendered "−") when the method never gets there.

    P0 is the baseline at its first evaluation, P* its best within the window T (default: its last
    evaluated step), ``Pq = P0 + q·(P* − P0)``. ``T_x`` is the first step, within the window, where
    curve x reaches Pq, linearly interpolated between the two evaluations around the crossing; a curve
    already at Pq at its first evaluation reaches it there (nothing is extrapolated before it). With
    ``P* = P0`` (the baseline never improves) TTB is undefined and NaN. ``0 < q <= 1``.
    """
    if not 0 < q <= 1:
        raise ValueError(f"q must lie in (0, 1], got {q}")
    b_steps, b_vals = _curve(baseline_steps, baseline_curve)
    m_steps, m_vals = _curve(steps, method_curve)
    window = b_steps[-1] if window is None else window
    b_in, m_in = b_steps <= window, m_steps <= window
    p0, p_best = b_vals[0], b_vals[b_in].max()
    if p_best <= p0:
        return np.nan
    target = min(p0 + q * (p_best - p0), p_best)  # min: rounding must not lift P1 above P*
    return _first_reach(m_steps[m_in], m_vals[m_in], target) / _first_reach(b_steps[b_in], b_vals[b_in], target)


def best_so_far(steps: ArrayLike, method_curve: ArrayLike, baseline_steps: ArrayLike,
                baseline_curve: ArrayLike, b: float, window: float | None = None) -> float:
    """BSF(b) = max_{t <= bT} P_m(t) / max_{t <= bT} P_random(t) over evaluated steps (BOTS App. B.4).

    T is the window (default: the baseline's last evaluated step). Only evaluated steps count (no
    interpolation at bT); NaN when either curve has no evaluation at or before bT; inf (or NaN) when the
    baseline's best is 0.
    """
    b_steps, b_vals = _curve(baseline_steps, baseline_curve)
    m_steps, m_vals = _curve(steps, method_curve)
    budget = b * (b_steps[-1] if window is None else window)
    m_in, b_in = m_steps <= budget, b_steps <= budget
    if not m_in.any() or not b_in.any():
        return np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.divide(m_vals[m_in].max(), b_vals[b_in].max()))


def aggregate_curves(curves: Mapping[str, Mapping[int, float]]) -> tuple[np.ndarray, np.ndarray]:
    """A domain's aggregated curve: ``{benchmark: {step: value}}`` → (steps evaluated on every
    benchmark, mean over benchmarks at those steps)."""
    if not curves:
        raise ValueError("no curves to aggregate")
    steps = sorted(set.intersection(*(set(c) for c in curves.values())))
    if not steps:
        raise ValueError(f"benchmarks {sorted(curves)} share no evaluated step")
    return np.asarray(steps), np.array([[c[s] for s in steps] for c in curves.values()], dtype=np.float64).mean(0)


# --------------------------------------------------------------------------- training logs
def task_pass_rates(tasks: ArrayLike, rewards: ArrayLike, success_threshold: float = SUCCESS_THRESHOLD) -> np.ndarray:
    """Per distinct task (sorted by index): fraction of its rollouts with reward >= threshold."""
    _, inverse, counts = np.unique(np.asarray(tasks), return_inverse=True, return_counts=True)
    success = np.asarray(rewards, dtype=np.float64) >= success_threshold
    return np.bincount(inverse, weights=success, minlength=len(counts)) / counts


def effective_task_ratio(pass_rates: ArrayLike) -> float:
    """ETR: fraction of tasks whose empirical pass rate lies strictly in (0, 1)."""
    p = np.asarray(pass_rates, dtype=np.float64)
    return float(np.mean((p > 0) & (p < 1)))


def degenerate_group_rate(groups: ArrayLike, rewards: ArrayLike) -> float:
    """Fraction of rollout groups (one id per rollout) whose rewards are all equal
    (``verl_ext.axes.views.GroupRewards.degenerate``, the trainer's definition)."""
    from verl_ext.axes.views import GroupRewards  # verl_ext.axes imports torch: only when a rate is computed

    return float(np.mean(GroupRewards.of(groups, rewards).degenerate))


def expected_uniform_rates(successes: ArrayLike, samples: int, rollouts: int) -> tuple[float, float]:
    """Expected effective task ratio and degenerate-group rate of a uniform draw from a pool when each drawn task gets
    ``rollouts`` rollouts of 0/1 reward, from each task's ``successes`` in ``samples`` reference samples: the
    posterior predictive of the rollouts under a Beta(1, 1) prior [decision: the plug-in rate would call a task with
    no reference success degenerate for certain, from as few as 4 samples]. A group of 0/1 rewards is degenerate
    exactly when none or all succeed, so the two rates sum to 1."""
    s = np.asarray(successes, dtype=np.float64)
    if not np.all(np.isfinite(s)) or np.any((s < 0) | (s > samples)) or samples < 1 or rollouts < 1:
        raise ValueError(f"expected_uniform_rates: successes must lie in [0, {samples}], samples and rollouts >= 1")
    a, b = 1.0 + s, 1.0 + samples - s
    log_beta = np.vectorize(lambda x, y: math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y))
    none = np.exp(log_beta(a, b + rollouts) - log_beta(a, b))
    every = np.exp(log_beta(a + rollouts, b) - log_beta(a, b))
    degenerate = float(np.mean(np.minimum(none + every, 1.0)))  # 1 + 1e-16 from the logs' rounding
    return 1.0 - degenerate, degenerate


def _log_series(run_dir: str | os.PathLike, key: str,
                from_dump: Callable[[dict], float]) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of a per-step metric: the logged value, else recomputed from the step's dump."""
    from verl_ext.trainer import records  # imports verl and Ray: only when a run's logs are read

    logged = {s: float(m[key]) for s, m in records.read_metrics(run_dir).items() if key in m}
    dumped = {s: from_dump(d) for s, d in records.read_dumps(run_dir).items() if s not in logged}
    series = sorted({**dumped, **logged}.items())
    return np.array([s for s, _ in series], dtype=np.int64), np.array([v for _, v in series], dtype=np.float64)


def etr_over_steps(run_dir: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """(steps, ETR) of a run: ``data_selection/effective_task_ratio`` from ``metrics/*.jsonl``,
    recomputed from ``data_selection/step_N.json`` for steps not logged there."""
    return _log_series(run_dir, ETR_KEY,
                       lambda d: effective_task_ratio(task_pass_rates(d["rollout_task"], d["rollout_reward"])))


def degenerate_rate_over_steps(run_dir: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """(steps, degenerate-group rate) of a run, from the metrics log or else the step dumps."""
    return _log_series(run_dir, DEGENERATE_KEY,
                       lambda d: degenerate_group_rate(d["rollout_group"], d["rollout_reward"]))


class Delta(NamedTuple):
    """A mean (of paired differences, over seeds) with its interval and the number of pairs."""

    mean: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        return f"{self.mean:+.4f} [{self.low:+.4f}, {self.high:+.4f}]"


def t_interval(d: ArrayLike, alpha: float = 0.05) -> Delta:
    """Mean of paired differences with its two-sided ``1 - alpha`` Student t interval."""
    from scipy import stats

    d = np.asarray(d, dtype=np.float64)
    if len(d) < 2:
        raise ValueError(f"a t interval needs at least 2 paired seeds, got {len(d)}")
    half = stats.t.ppf(1 - alpha / 2, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
    return Delta(float(d.mean()), float(d.mean() - half), float(d.mean() + half), len(d))


def mean_se(values: ArrayLike) -> MeanSE:
    """Mean and its standard error (sample std / sqrt(n)) of a 1-D series."""
    values = np.asarray(values, dtype=np.float64)
    se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else np.nan
    return MeanSE(float(values.mean()) if len(values) else np.nan, float(se), len(values))


def degenerate_rate_summary(run_dir: str | os.PathLike) -> MeanSE:
    """Degenerate-batch rate of a run: mean ± s.e. over its training steps (Yan §5.3, Table 7)."""
    return mean_se(degenerate_rate_over_steps(run_dir)[1])


# --------------------------------------------------------------------------- paired comparisons
def paired_bootstrap_ci(a: ArrayLike, b: ArrayLike, resamples: int = 20000, alpha: float = 0.05,
                        seed: int = 0) -> BootstrapCI:
    """Mean of ``a − b`` over prompts with its percentile bootstrap CI (prompts resampled with
    replacement, pairs kept). ``a``, ``b``: ``[prompts]`` or ``[prompts, metrics]`` (the metrics
    share the resamples). Resampled in chunks of bounded memory; deterministic for a given seed."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if d.ndim == 0 or len(d) == 0:
        raise ValueError("need per-prompt values of both methods, paired, for at least one prompt")
    n = len(d)
    rng = np.random.default_rng(seed)
    rows = max(1, _BOOTSTRAP_CHUNK_ELEMENTS // d.size)
    means = np.concatenate([d[rng.integers(0, n, size=(min(rows, resamples - start), n))].mean(axis=1)
                            for start in range(0, resamples, rows)])
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2], axis=0)
    return BootstrapCI(d.mean(axis=0)[()], low[()], high[()])


def paired_wins_losses_ties(a: ArrayLike, b: ArrayLike, atol: float = 1e-12) -> tuple[int, int, int]:
    """Prompts where ``a > b``, ``a < b`` and ``|a − b| <= atol`` (ties absorb float noise)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    tie = np.abs(d) <= atol
    return int(np.sum((d > 0) & ~tie)), int(np.sum((d < 0) & ~tie)), int(np.sum(tie))


# --------------------------------------------------------------------------- task transitions
def pass_rate_bin(p: ArrayLike) -> np.ndarray:
    """Index into :data:`PASS_RATE_BINS`: p = 0, (0, 0.2], (0.2, 0.8), [0.8, 1), p = 1."""
    p = np.asarray(p, dtype=np.float64)
    if np.any(~((p >= 0) & (p <= 1))):
        raise ValueError("pass rates must lie in [0, 1]")
    return np.select([p == 0, p <= 0.2, p < 0.8, p < 1], [0, 1, 2, 3], 4)


def transition_matrix(initial_p: ArrayLike, final_p: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Task transitions between pass-rate bins: (row-normalised fractions, counts), both 5×5 with
    rows = initial bin and columns = final bin (:data:`PASS_RATE_BINS`); an empty row is NaN."""
    flat = pass_rate_bin(initial_p) * len(PASS_RATE_BINS) + pass_rate_bin(final_p)
    counts = np.bincount(flat.ravel(), minlength=len(PASS_RATE_BINS) ** 2)
    counts = counts.reshape(len(PASS_RATE_BINS), len(PASS_RATE_BINS))
    with np.errstate(invalid="ignore"):
        return counts / counts.sum(axis=1, keepdims=True), counts


# --------------------------------------------------------------------------- Countdown format
def countdown_format_diagnostics(samples: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Rates over completions of: no ``<answer>``, several ``<answer>``, several ``<think>``, hitting the
    length limit, and a parse failure as the Countdown verifier reports it (disallowed characters, or an
    expression using the given numbers that cannot be evaluated). ``samples``: per-completion flags as the
    verifier's ``compute_score`` and the evaluator's ``samples.jsonl`` give them (``has_answer``,
    ``multiple_answers``, ``multiple_think``, ``parse_error``, ``too_long``); a ``too_long`` of ``None``
    (unknown) is left out of that rate."""
    if not samples:
        raise ValueError("no samples")

    def rate(key: str, invert: bool = False) -> float:
        known = [bool(s[key]) != invert for s in samples if s.get(key) is not None]
        return float(np.mean(known)) if known else float("nan")

    return {"missing_answer": rate("has_answer", invert=True), "multiple_answers": rate("multiple_answers"),
            "multiple_think": rate("multiple_think"), "too_long": rate("too_long"),
            "parse_failure": rate("parse_error")}
