"""Progress-aware selector cost per training step: the five bucket presets and the prompt-level utility selector
against the uniform selector, measured side by side on the same pool and the same scored rollouts, at the
paper's batch (SPEC.md §5: 128 prompts x 8 rollouts per step) on a 4,000-task pool (the recipe's) and on the whole
of Countdown-Tasks-3to4 (~490,000 tasks, ``TRAIN_SIZE=0``).

A step is what the trainer calls (``verl_ext/trainer/mode.py``): ``select(step, 128)``, then ``update(step,
results)`` on the 1,024 rollouts of the chosen prompts, then ``metrics()``. Every step the selectors take
turns in a new random order (so machine noise, and the cache and allocator state that the one before leaves,
fall on all alike: a selector run right after ``prompt_utility`` at 490,000 tasks was measured ~2.5x slower);
each rollout's score comes from one random draw per (step, slot, rollout) shared by all selectors, turned into a
Countdown verifier score (1.0 correct, 0.1 well-formed but wrong, 0.0 no answer) by the chosen task's synthetic
pass rate. The pool is synthetic: 8 buckets
0..7 with unequal frequencies, a pass rate per task around its bucket's. The first ``warmup`` steps (buckets or
prompts not seen yet, uniform's first epoch permutation) are not timed; the median of the rest is reported.
Presets come from ``verl_ext/config/selector/*.yaml`` composed by Hydra, as the trainer gets them.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from verl_ext.axes import StepResults, TaskPool, build_selector

SELECTORS = ("uniform", "bucket_uniform", "empirical", "conservative", "density_ratio", "random_buckets",
             "prompt_utility")
BUCKET_FREQUENCY = np.array([0.05, 0.07, 0.08, 0.10, 0.12, 0.16, 0.19, 0.23])  # synthetic, buckets 0..7
BUCKET_PASS_RATE = np.array([0.85, 0.75, 0.65, 0.55, 0.50, 0.40, 0.30, 0.20])  # synthetic
FORMAT_VALID_IF_WRONG = 0.8  # share of wrong answers that still parse (score 0.1)


def selector_configs(names=SELECTORS) -> dict[str, dict]:
    """The presets as plain dicts, composed from ``verl_ext/config/selector`` like ``selector=<name>``."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import verl_ext

    with initialize_config_dir(str(Path(verl_ext.__file__).parent / "config" / "selector"), version_base=None):
        return {name: OmegaConf.to_container(compose(name), resolve=True) for name in names}


def countdown_pool(n: int, seed: int) -> tuple[TaskPool, np.ndarray]:
    """``n`` tasks with ``extra_info.bucket`` in 0..7 and each task's pass rate."""
    rng = np.random.default_rng([seed, n])
    bucket = rng.choice(len(BUCKET_FREQUENCY), size=n, p=BUCKET_FREQUENCY / BUCKET_FREQUENCY.sum())
    rate = np.clip(BUCKET_PASS_RATE[bucket] + rng.normal(0, 0.15, size=n), 0.0, 1.0)
    return TaskPool(np.arange(n, dtype=np.int64), {"bucket": bucket.astype(np.float64)}), rate


def scored(tasks: np.ndarray, rate: np.ndarray, u: np.ndarray, v: np.ndarray) -> StepResults:
    """Verifier scores of ``u.shape[1]`` rollouts per chosen task from the shared draws ``u``, ``v``."""
    correct = u < rate[tasks][:, None]
    valid = correct | (v < FORMAT_VALID_IF_WRONG)
    reward = np.where(correct, 1.0, np.where(valid, 0.1, 0.0)).ravel()
    out = StepResults.from_rewards(np.repeat(tasks, u.shape[1]), reward)
    return StepResults(out.task_index, out.reward, out.success, valid.ravel())


def run(sizes=(4_000, 490_000), batch_size: int = 128, rollouts: int = 8, steps: int = 100, warmup: int = 3,
        names=SELECTORS, seed: int = 0) -> list[dict]:
    """One row per (pool size, selector): median milliseconds of select and of update per step, their sum and
    its ratio to the uniform selector's on the same pool."""
    configs = selector_configs(names)
    rows = []
    for n in sizes:
        pool, rate = countdown_pool(n, seed)
        selectors = [(name, build_selector(cfg, pool, seed)) for name, cfg in configs.items()]
        times = {name: ([], []) for name, _ in selectors}
        draws = np.random.default_rng([seed, n, 1])
        for step in range(warmup + steps):
            u, v = draws.random((batch_size, rollouts)), draws.random((batch_size, rollouts))
            for i in draws.permutation(len(selectors)):  # a new order each step: no fixed neighbour
                name, sel = selectors[i]
                t0 = time.perf_counter()
                tasks = np.asarray(sel.select(step, batch_size), dtype=np.int64)
                t1 = time.perf_counter()
                results = scored(tasks, rate, u, v)  # the rollouts: not the selector's cost
                t2 = time.perf_counter()
                sel.update(step, results)
                sel.metrics()
                t3 = time.perf_counter()
                if step >= warmup:
                    times[name][0].append(t1 - t0)
                    times[name][1].append(t3 - t2)
        medians = {name: (float(np.median(s)), float(np.median(u_))) for name, (s, u_) in times.items()}
        base = sum(medians["uniform"]) if "uniform" in medians else None
        for name, (sel_s, upd_s) in medians.items():
            total = sel_s + upd_s
            rows.append({"tasks": n, "selector": name, "step_ms": 1e3 * total, "select_ms": 1e3 * sel_s,
                         "update_ms": 1e3 * upd_s, "over_uniform": None if base is None else total / base,
                         "batch": batch_size, "rollouts": rollouts, "steps": steps})
    return rows


def report(rows: list[dict]) -> str:
    b, r, s = (rows[0]["batch"], rows[0]["rollouts"], rows[0]["steps"]) if rows else (128, 8, 0)
    lines = [f"Progress-aware selectors, one step = select {b} prompts + update on {b} x {r} rollouts "
             f"(+ metrics); median of {s} steps",
             "| tasks N | selector | ms / step (select + update) | / uniform |", "|---:|:---|---:|---:|"]
    for row in rows:
        ratio = "-" if row["over_uniform"] is None else f"{row['over_uniform']:.1f}x"
        lines.append(f"| {row['tasks']:,} | {row['selector']} | {row['step_ms']:.3f} ({row['select_ms']:.3f} + "
                     f"{row['update_ms']:.3f}) | {ratio} |")
    return "\n".join(lines)
