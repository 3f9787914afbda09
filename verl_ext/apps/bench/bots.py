"""BOTS selector cost: the selector against two references of the same equations, one select + update step
each, measured side by side (BOTS paper, App. F.1: <= 0.2 % of wall time):

* ``VectorisedBots``, the strongest straightforward one: a step done the way the authors' public code
  (Trinity-RFT's interpolation estimator and difference-based selector) does it, in NumPy;
* ``PerTaskBots``: plain Python task by task (also the tests' oracle for the update equations).

Wall time and CPU time (all threads) are both measured: the selector draws its Beta samples on several
threads from 100k tasks, so "per core" compares CPU times.
"""

from __future__ import annotations

import heapq
import os
import random
import time
from collections.abc import Callable

import numpy as np

from verl_ext.axes.bots import CAPABILITY_EPS, SAMPLING_STREAMS, THREADED_FROM, BotsSelector, BotsSelectorConfig
from verl_ext.axes.views import StepResults, TaskPool
from verl_ext.apps.bench.step_share import REFERENCE_STEP_S, of_reference_step


class PerTaskBots:
    """BOTS §3.2-3.4 (Eq. 1-5) task by task: lists of floats, a loop per equation, ``random.betavariate``."""

    def __init__(self, config: BotsSelectorConfig, weak, strong, seed: int = 0):
        n = len(weak)
        self.config, self.weak, self.strong = config, list(map(float, weak)), list(map(float, strong))
        self.alpha, self.beta = [config.prior_alpha] * n, [config.prior_beta] * n
        self.capability, self.implicit_weight = None, config.implicit_weight
        self.random = random.Random(seed)

    def select(self, batch_size: int) -> list[int]:
        """Positions of the ``batch_size`` tasks closest to the target (best first)."""
        cfg, utility = self.config, []
        for a, b in zip(self.alpha, self.beta):
            p = self.random.betavariate(a, b) if cfg.posterior_sampling else a / (a + b)
            utility.append(-abs(p - cfg.target))
        return heapq.nlargest(batch_size, range(len(utility)), key=utility.__getitem__)

    def update(self, positions: list[int], successes: list[float], rollouts: list[int]) -> None:
        cfg, lam, rho = self.config, self.config.forgetting, self.implicit_weight
        observed = {p: s / n for p, s, n in zip(positions, successes, rollouts)}
        counts = {p: (s, n - s) for p, s, n in zip(positions, successes, rollouts)}
        m = cfg.pseudo_rollouts if cfg.pseudo_rollouts is not None else sum(rollouts) / len(rollouts)
        if rho > 0:
            batch_obs = sum(observed.values()) / len(positions)
            batch_weak = sum(self.weak[p] for p in positions) / len(positions)
            batch_strong = sum(self.strong[p] for p in positions) / len(positions)
            c = (batch_obs - batch_weak) / (batch_strong - batch_weak + CAPABILITY_EPS)
            k = cfg.momentum
            self.capability = c if self.capability is None else k * self.capability + (1 - k) * c
            gap = 0.0
        for i in range(len(self.alpha)):
            s, f = counts.get(i, (0.0, 0.0))
            pseudo_s = pseudo_f = 0.0
            if rho > 0:
                estimate = min(1.0, max(0.0, self.weak[i] + self.capability * (self.strong[i] - self.weak[i])))
                if i in observed:
                    gap += abs(estimate - observed[i])
                    pseudo_s, pseudo_f = s, f  # p̃ = s/n with m = n
                else:
                    pseudo_s, pseudo_f = m * estimate, m * (1 - estimate)
            self.alpha[i] = (1 - lam) * self.alpha[i] + lam * cfg.prior_alpha + (1 - rho) * s + rho * pseudo_s
            self.beta[i] = (1 - lam) * self.beta[i] + lam * cfg.prior_beta + (1 - rho) * f + rho * pseudo_f
        if rho > 0 and cfg.adaptive_implicit_weight and gap / len(positions) >= cfg.adaptive_threshold:
            self.implicit_weight = rho / 2


class VectorisedBots:
    """BOTS §3.2-3.4 (default configuration, ``m`` rollouts for every selected task) as the authors' public code
    does a step: whole-pool arrays rebuilt at every update (explicit counts scattered into zeros, ``p̃`` of
    every task, the posteriors recomputed from them), one Beta draw over the pool from one generator, top-B."""

    def __init__(self, config: BotsSelectorConfig, weak, strong, seed: int = 0):
        self.config = config
        self.weak, self.strong = np.asarray(weak, dtype=np.float64), np.asarray(strong, dtype=np.float64)
        self.alpha = np.full(len(self.weak), config.prior_alpha)
        self.beta = np.full(len(self.weak), config.prior_beta)
        self.capability = None
        self.rng = np.random.default_rng(seed)

    def estimates(self) -> np.ndarray:
        if self.config.posterior_sampling:
            return self.rng.beta(self.alpha, self.beta)
        return self.alpha / (self.alpha + self.beta)

    def select(self, batch_size: int) -> np.ndarray:
        """Positions of the ``batch_size`` tasks of highest utility ``-|p̂ - p*|`` (best first)."""
        utility = -np.abs(self.estimates() - self.config.target)
        top = np.argpartition(-utility, batch_size - 1)[:batch_size]
        return top[np.argsort(-utility[top], kind="stable")]

    def update(self, positions: np.ndarray, pass_rates: np.ndarray, m: int) -> None:
        cfg, lam, rho = self.config, self.config.forgetting, self.config.implicit_weight
        weak, strong = self.weak[positions].mean(), self.strong[positions].mean()
        c = (pass_rates.mean() - weak) / (strong - weak + CAPABILITY_EPS)
        k = cfg.momentum
        self.capability = c if self.capability is None else k * self.capability + (1 - k) * c
        s, f = np.zeros(len(self.alpha)), np.zeros(len(self.alpha))
        s[positions], f[positions] = pass_rates * m, (1 - pass_rates) * m
        p_tilde = np.clip(self.weak + self.capability * (self.strong - self.weak), 0, 1)
        p_tilde[positions] = pass_rates
        self.alpha = (1 - lam) * self.alpha + lam * cfg.prior_alpha + (1 - rho) * s + rho * m * p_tilde
        self.beta = (1 - lam) * self.beta + lam * cfg.prior_beta + (1 - rho) * f + rho * m * (1 - p_tilde)


def _time_steps(steps: list[tuple[Callable, Callable, Callable]], repeats: int) -> list[dict[str, float]]:
    """Median wall and CPU seconds of select, update and both, per ``(select, scored, update)``: ``scored(tasks)``
    draws the step's rollouts in the implementation's input format (not timed). The implementations take turns."""
    times = [{key: [] for key in ("select", "update", "step", "select_cpu", "update_cpu", "step_cpu")} for _ in steps]
    for _ in range(repeats):
        for (select, scored, update), t in zip(steps, times):
            w0, c0 = time.perf_counter(), time.process_time()
            tasks = select()
            w1, c1 = time.perf_counter(), time.process_time()
            results = scored(tasks)
            w2, c2 = time.perf_counter(), time.process_time()
            update(tasks, results)
            w3, c3 = time.perf_counter(), time.process_time()
            for key, value in (("select", w1 - w0), ("update", w3 - w2), ("select_cpu", c1 - c0),
                               ("update_cpu", c3 - c2)):
                t[key].append(value)
            t["step"].append(w1 - w0 + w3 - w2)
            t["step_cpu"].append(c1 - c0 + c3 - c2)
    return [{key: float(np.median(v)) for key, v in t.items()} for t in times]


def _pool(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weak and strong reference pass rates and each task's true pass rate."""
    rng = np.random.default_rng([seed, n])
    weak = rng.random(n)
    strong = np.clip(weak + 0.3 * rng.random(n), 0, 1)
    return weak, strong, np.clip(weak + 0.5 * (strong - weak), 0, 1)


def run(sizes=(10_000, 100_000, 1_000_000), batch_size: int = 512, rollouts: int = 16, repeats: int = 5,
        per_task_repeats: int = 1, seed: int = 0) -> list[dict]:
    """One row per pool size: milliseconds per step (wall and CPU) of the selector and the references."""
    config = BotsSelectorConfig()
    rows = []
    for n in sizes:
        weak, strong, truth = _pool(n, seed)
        rng = np.random.default_rng([seed, n, 1])
        pool = TaskPool(np.arange(n), {"weak_pass_rate": weak, "strong_pass_rate": strong})
        fast, ref = BotsSelector(config, pool, seed), VectorisedBots(config, weak, strong, seed)
        slow = PerTaskBots(config, weak, strong, seed)

        def wins(tasks):
            return rng.binomial(rollouts, truth[np.asarray(tasks)]).astype(np.float64)

        def results(tasks):
            reward = (np.arange(rollouts)[None, :] < wins(tasks)[:, None]).astype(np.float64).ravel()
            return StepResults.from_rewards(np.repeat(tasks, rollouts), reward)

        vec, ref_t = _time_steps([(lambda: fast.select(0, batch_size), results, lambda _, r: fast.update(0, r)),
                                  (lambda: ref.select(batch_size), lambda t: wins(t) / rollouts,
                                   lambda t, p: ref.update(t, p, rollouts))], repeats)
        [loop] = _time_steps([(lambda: slow.select(batch_size), lambda t: wins(t).tolist(),
                               lambda t, s: slow.update(t, s, [rollouts] * batch_size))], per_task_repeats)
        rows.append({"tasks": n, "threads": _threads(n), "vectorised_ms": 1e3 * vec["step"],
                     "select_ms": 1e3 * vec["select"], "update_ms": 1e3 * vec["update"],
                     "vectorised_cpu_ms": 1e3 * vec["step_cpu"], "reference_ms": 1e3 * ref_t["step"],
                     "reference_cpu_ms": 1e3 * ref_t["step_cpu"], "per_task_ms": 1e3 * loop["step"],
                     "reference_over_vectorised": ref_t["step"] / vec["step"],
                     "reference_over_vectorised_per_core": ref_t["step_cpu"] / vec["step_cpu"],
                     "per_task_over_vectorised": loop["step"] / vec["step"],
                     "share_of_reference_step": of_reference_step(vec["step"])})
    return rows


def _threads(n: int) -> int:
    """Threads the selector's Beta draws run on at ``n`` tasks (the reference: one)."""
    return min(SAMPLING_STREAMS, os.cpu_count() or 1) if n >= THREADED_FROM else 1


def report(rows: list[dict], batch_size: int = 512, rollouts: int = 16) -> str:
    lines = [f"BOTS select + update, batch {batch_size} tasks x {rollouts} rollouts (median step; reference = "
             "the authors' code's step in NumPy, 1 thread; per core = CPU time of all threads; step = "
             f"{REFERENCE_STEP_S:.0f} s, see share.py)",
             "| tasks N | threads | selector ms (select + update) | reference ms | reference / selector "
             "(per core) | per-task Python ms | per-task / selector | % of step |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['tasks']:,} | {r['threads']} | {r['vectorised_ms']:.1f} ({r['select_ms']:.1f} + "
                     f"{r['update_ms']:.1f}) | {r['reference_ms']:.1f} | {r['reference_over_vectorised']:.1f}x "
                     f"({r['reference_over_vectorised_per_core']:.1f}x) | {r['per_task_ms']:.0f} | "
                     f"{r['per_task_over_vectorised']:.0f}x | {100 * r['share_of_reference_step']:.4f} |")
    return "\n".join(lines)
