"""Selection + allocation per refill of k prompts in verl's asynchronous modes (issue 36): the trainer's
``_next_train_batch(k)``, i.e. ``BotsSelector.select(step, k, exclude=tasks in flight)`` then
``CobaAllocator.allocate`` of the step's budget scaled to k, on a pool of N tasks with two batches of 512 in flight
(``num_warmup_batches=1``). Side by side: the step's own selection of the whole batch (sync's one call per step).
Target: ≤ 0.1 % of the reference step (:mod:`verl_ext.apps.bench.step_share`) per refill."""

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
        in_flight = np.sort(rng.choice(n, 2 * BATCH, replace=False))
        budget = BATCH * ROLLOUTS

        def choose(k: int, exclude):
            tasks = selector.select(2, k, exclude=exclude)
            return allocator.allocate(2, tasks, step_budget(budget, k, BATCH))

        step_ms = _median_ms(lambda: choose(BATCH, None), repeats)
        for k in refills:
            ms = _median_ms(lambda: choose(k, in_flight), repeats)
            rows.append({"tasks": n, "refill": k, "in_flight": len(in_flight), "refill_ms": ms, "step_select_ms": step_ms,
                         "refill_over_step_select": ms / step_ms, "share_of_reference_step": of_reference_step(ms / 1e3),
                         "within_target": of_reference_step(ms / 1e3) <= TARGET_SHARE})
    return rows


def report(rows: list[dict]) -> str:
    lines = [f"Async refill of k prompts: BOTS select (tasks in flight excluded) + CoBA allocate of the budget scaled to k "
             f"(median; {2 * BATCH} in flight; step's own selection = {BATCH} tasks, none in flight; step = "
             f"{REFERENCE_STEP_S:.0f} s, target ≤ {100 * TARGET_SHARE:g} % per refill)",
             "| tasks N | refill k | refill ms | step's selection ms | refill / step's | % of step | within target |",
             "|---:|---:|---:|---:|---:|---:|:---:|"]
    for r in rows:
        lines.append(f"| {r['tasks']:,} | {r['refill']} | {r['refill_ms']:.2f} | {r['step_select_ms']:.2f} | "
                     f"{r['refill_over_step_select']:.2f}x | {100 * r['share_of_reference_step']:.4f} | "
                     f"{'yes' if r['within_target'] else 'NO'} |")
    return "\n".join(lines)
