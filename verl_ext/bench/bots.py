"""BOTS selector cost: the vectorised selector against the same equations written per task in plain
Python, one select + update step each, measured side by side (SPEC.md §1: cost must stay negligible).

``PerTaskBots`` is also the tests' oracle for the update equations.
"""

from __future__ import annotations

import heapq
import random
import time

import numpy as np

from verl_ext.axes.bots import CAPABILITY_EPS, BotsSelector, BotsSelectorConfig
from verl_ext.axes.types import StepResults, TaskPool


class PerTaskBots:
    """SPEC.md §1 task by task: lists of floats, a loop per equation, ``random.betavariate``."""

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


def _time_step(select, update, repeats: int) -> tuple[float, float]:
    """Median seconds of ``select()`` and of ``update(selection)`` over ``repeats`` steps."""
    s_times, u_times = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        chosen = select()
        t1 = time.perf_counter()
        update(chosen)
        u_times.append(time.perf_counter() - t1)
        s_times.append(t1 - t0)
    return float(np.median(s_times)), float(np.median(u_times))


def run(sizes=(10_000, 100_000, 1_000_000), batch_size: int = 512, rollouts: int = 16, repeats: int = 3,
        per_task_repeats: int = 1, seed: int = 0) -> list[dict]:
    """One row per pool size: vectorised and per-task milliseconds per step, and their ratio."""
    config = BotsSelectorConfig()
    rows = []
    for n in sizes:
        rng = np.random.default_rng(seed)
        weak = rng.random(n)
        strong = np.clip(weak + 0.3 * rng.random(n), 0, 1)
        truth = np.clip(weak + 0.5 * (strong - weak), 0, 1)  # each task's true pass rate
        pool = TaskPool(np.arange(n), {"weak_pass_rate": weak, "strong_pass_rate": strong})
        fast, slow = BotsSelector(config, pool, seed), PerTaskBots(config, weak, strong, seed)

        def outcomes(positions):
            return rng.binomial(rollouts, truth[positions]).astype(np.float64)

        def fast_update(tasks):
            wins = outcomes(tasks)
            reward = (np.arange(rollouts)[None, :] < wins[:, None]).astype(np.float64).ravel()
            fast.update(0, StepResults.from_rewards(np.repeat(tasks, rollouts), reward))

        def slow_update(positions):
            slow.update(positions, outcomes(np.array(positions)).tolist(), [rollouts] * len(positions))

        fast_select, fast_upd = _time_step(lambda: fast.select(0, batch_size), fast_update, repeats)
        slow_select, slow_upd = _time_step(lambda: slow.select(batch_size), slow_update, per_task_repeats)
        vec, loop = fast_select + fast_upd, slow_select + slow_upd
        rows.append({"tasks": n, "vectorised_ms": 1e3 * vec, "select_ms": 1e3 * fast_select,
                     "update_ms": 1e3 * fast_upd, "per_task_ms": 1e3 * loop, "speedup": loop / vec,
                     "vectorised_us_per_1k_tasks": 1e6 * vec / (n / 1000)})
    return rows


def report(rows: list[dict], batch_size: int = 512, rollouts: int = 16) -> str:
    lines = [f"BOTS select + update, batch {batch_size} tasks x {rollouts} rollouts (median step)",
             "| tasks N | vectorised ms (select + update) | per-task Python ms | per-task / vectorised | "
             "vectorised us per 1k tasks |", "|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['tasks']:,} | {r['vectorised_ms']:.1f} ({r['select_ms']:.1f} + {r['update_ms']:.1f}) | "
                     f"{r['per_task_ms']:.0f} | {r['speedup']:.0f}x | {r['vectorised_us_per_1k_tasks']:.1f} |")
    return "\n".join(lines)
