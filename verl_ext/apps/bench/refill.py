"""Selection + allocation per step in verl's asynchronous modes: a step chooses its own batch, then one refill of k
prompts each time verl's buffer evicts groups while it waits (``data_selection/async/refills`` counts them per step),
each the trainer's ``_next_train_batch(k)``, i.e. ``BotsSelector.select(step, k, exclude=tasks in flight)`` then
``CobaAllocator.allocate`` of the step's budget scaled to k, on a pool of N tasks with batches of 512 and
``num_warmup_batches=1``: the step's batch is chosen with the warm-up window (one batch) in flight, a refill with two. Target: the step's whole selection (its batch's and its refills', which verl's
``timing_s/selector`` + ``timing_s/allocator`` sum) ≤ 0.1 % of the reference step
(:mod:`verl_ext.apps.bench.step_share`): each row gives a step with one refill and how many refills fit."""

from __future__ import annotations

import time

import numpy as np

from verl_ext.apps.bench.bots import _pool
from verl_ext.apps.bench.step_share import REFERENCE_STEP_S, of_reference_step
from verl_ext.axes.base import step_budget
from verl_ext.axes.bots import BotsSelector, BotsSelectorConfig
from verl_ext.axes.coba import CobaAllocator, CobaAllocatorConfig
from verl_ext.axes.views import StepResults, TaskPool

BATCH, ROLLOUTS, TARGET_SHARE = 512, 16, 1e-3


def _median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def run(sizes=(10_000, 100_000, 1_000_000), refills=(1, 64, BATCH), repeats: int = 7, seed: int = 0) -> list[dict]:
    """One row per pool size and refill size k: median ms of select + allocate, its share of the reference step."""
    rows = []
    for n in sizes:
        weak, strong, truth = _pool(n, seed)
        pool = TaskPool(np.arange(n), {"weak_pass_rate": weak, "strong_pass_rate": strong})
        selector, allocator = BotsSelector(BotsSelectorConfig(), pool, seed), CobaAllocator(CobaAllocatorConfig(), seed)
        rng = np.random.default_rng([seed, n])
        seen = rng.choice(n, 4 * BATCH, replace=False)  # a few steps of history, so every component has state
        wins = rng.binomial(ROLLOUTS, truth[seen])
        results = StepResults.from_rewards(np.repeat(seen, ROLLOUTS), (np.arange(ROLLOUTS)[None, :] <
                                                                       wins[:, None]).astype(float).ravel())
        selector.update(1, results)
        allocator.update(1, results)
        in_flight = rng.choice(n, 2 * BATCH, replace=False)  # the window, then the step's batch
        window, in_flight = np.sort(in_flight[:BATCH]), np.sort(in_flight)
        budget = BATCH * ROLLOUTS

        def choose(k: int, exclude):
            tasks = selector.select(2, k, exclude=exclude)
            return allocator.allocate(2, tasks, step_budget(budget, k, BATCH))

        step_ms = _median_ms(lambda: choose(BATCH, window), repeats)
        for k in refills:
            ms = _median_ms(lambda: choose(k, in_flight), repeats)
            one = of_reference_step((step_ms + ms) / 1e3)  # a step with one refill
            fit = (TARGET_SHARE * REFERENCE_STEP_S * 1e3 - step_ms) // ms
            rows.append({"tasks": n, "refill": k, "in_flight": len(in_flight), "refill_ms": ms, "step_select_ms": step_ms,
                         "step_with_one_refill_share": one, "refills_within_target": int(max(fit, 0)),
                         "within_target": one <= TARGET_SHARE})
    return rows


def report(rows: list[dict]) -> str:
    lines = [f"Async selection per step: the step's own batch ({BATCH} tasks, {BATCH} in flight excluded) plus "
             f"refills of k prompts (BOTS select with {2 * BATCH} tasks in flight excluded + CoBA allocate of the budget scaled to "
             f"k; median; step = {REFERENCE_STEP_S:.0f} s, target ≤ {100 * TARGET_SHARE:g} % of it per step)",
             "| tasks N | refill k | step's batch ms | refill ms | step + 1 refill, % of step | refills within target "
             "| within target |", "|---:|---:|---:|---:|---:|---:|:---:|"]
    for r in rows:
        lines.append(f"| {r['tasks']:,} | {r['refill']} | {r['step_select_ms']:.2f} | {r['refill_ms']:.2f} | "
                     f"{100 * r['step_with_one_refill_share']:.4f} | {r['refills_within_target']} | "
                     f"{'yes' if r['within_target'] else 'NO'} |")
    return "\n".join(lines)
