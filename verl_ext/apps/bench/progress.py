"""Progress-aware selector cost per training step: the five bucket presets and the prompt-level utility selector
against the uniform selector, measured side by side on the same pool and the same scored rollouts, at the paper's
batch (Yan, "Progress-Aware Prompt Sampling", CS224R, §4: 128 prompts x 8 rollouts per step) on a 4,000-task pool
(the recipe's) and on the whole of Countdown-Tasks-3to4 (~490,000 tasks, ``TRAIN_SIZE=0``).

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

Each bucket preset is also measured against ``BucketSampler``, Yan's bucket sampler (§3.2-3.3) written
straightforwardly in NumPy from the same seed, taking turns with the selectors (a test checks that it computes the
same distribution, to rounding, and draws the same prompts from it). It keeps the sampler's state only: the
selectors' step also returns their logged metrics.
"""

from __future__ import annotations

import time

import numpy as np

from verl_ext.axes import StepResults, TaskPool, build_selector
from verl_ext.apps.bench.step_share import REFERENCE_STEP_S, of_reference_step

SELECTORS = ("uniform", "bucket_uniform", "empirical", "conservative", "density_ratio", "random_buckets",
             "prompt_utility")
BUCKET_FREQUENCY = np.array([0.05, 0.07, 0.08, 0.10, 0.12, 0.16, 0.19, 0.23])  # synthetic, buckets 0..7
BUCKET_PASS_RATE = np.array([0.85, 0.75, 0.65, 0.55, 0.50, 0.40, 0.30, 0.20])  # synthetic
FORMAT_VALID_IF_WRONG = 0.8  # share of wrong answers that still parse (score 0.1)


def selector_configs(names=SELECTORS) -> dict[str, dict]:
    """The presets as plain dicts, composed from ``verl_ext/config/selector`` like ``selector=<name>``."""
    from verl_ext.apps.sim.grid import component

    return {name: component("selector", name) for name in names}


def countdown_pool(n: int, seed: int) -> tuple[TaskPool, np.ndarray]:
    """``n`` tasks with ``extra_info.bucket`` in 0..7 and each task's pass rate."""
    rng = np.random.default_rng([seed, n])
    bucket = rng.choice(len(BUCKET_FREQUENCY), size=n, p=BUCKET_FREQUENCY / BUCKET_FREQUENCY.sum())
    rate = np.clip(BUCKET_PASS_RATE[bucket] + rng.normal(0, 0.15, size=n), 0.0, 1.0)
    return TaskPool(np.arange(n, dtype=np.int64), {"bucket": bucket.astype(np.float64)}), rate


def scored(tasks: np.ndarray, rate: np.ndarray, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, StepResults]:
    """Verifier scores ``[tasks, rollouts]`` of ``u.shape[1]`` rollouts per chosen task from the shared draws ``u``,
    ``v``, and the same as the selectors' step results."""
    correct = u < rate[tasks][:, None]
    valid = correct | (v < FORMAT_VALID_IF_WRONG)
    reward = np.where(correct, 1.0, np.where(valid, 0.1, 0.0))
    out = StepResults.from_rewards(np.repeat(tasks, u.shape[1]), reward.ravel())
    return reward, StepResults(out.task_index, out.reward, out.success, valid.ravel())


class BucketSampler:
    """The progress-aware bucket sampler (Yan §3), straightforward NumPy over task positions: per observed bucket
    the score's short / long EMAs (both start at the first score) and the mean within-prompt reward variance;
    ``U = λ LP + (1−λ) I``; unseen buckets keep their prior, seen ones share the rest as
    ``(1−ε) softmax(U/τ) + ε P_prior``; bounds (cap, density ratio) as the KL projection ``clip(c P)`` with the
    ``c`` that makes it sum to 1, found by bisection; bucket counts from one multinomial, prompts uniform without
    replacement within a bucket (each bucket must hold its draw)."""

    def __init__(self, config: dict, bucket: np.ndarray, seed: int):
        self.c = config
        if config["random_buckets"]:  # the selector's seeded partition
            bucket = np.random.default_rng([seed, 4]).integers(config["random_buckets"], size=len(bucket))
        _, self.bucket_of = np.unique(np.asarray(bucket, dtype=np.int64), return_inverse=True)
        k = self.bucket_of.max() + 1
        self.members = [np.flatnonzero(self.bucket_of == b) for b in range(k)]
        p_data = np.array([len(m) for m in self.members]) / len(bucket)
        self.prior = np.full(k, 1 / k) if config["prior"] == "uniform" else p_data
        lo, hi = config["ratio_clip"] or (0.0, np.inf)
        self.lower, self.upper = lo * p_data, np.minimum(hi * p_data, config["cap"] or 1.0)
        self.short, self.long, self.informativeness = np.zeros(k), np.zeros(k), np.zeros(k)
        self.seen = np.zeros(k, dtype=bool)
        self.rng = np.random.default_rng(seed)

    def distribution(self) -> np.ndarray:
        c, p = self.c, self.prior.copy()
        if self.seen.any():
            lam = c["progress_weight"]
            utility = lam * np.maximum(0, self.short - self.long) + (1 - lam) * self.informativeness
            z = np.exp((utility[self.seen] - utility[self.seen].max()) / c["temperature"])
            mass = self.prior[self.seen].sum()
            p[self.seen] = (1 - c["epsilon"]) * mass * z / z.sum() + c["epsilon"] * self.prior[self.seen]
        return self._bounded(p)

    def _bounded(self, p: np.ndarray) -> np.ndarray:
        """The KL projection onto the bounds, straightforwardly: ``clip(c p, lower, upper)`` with the scale ``c`` at
        which it sums to 1, found by bisection (the sum is non-decreasing in ``c``)."""
        def total(c: float) -> float:
            return float(np.clip(c * p, self.lower, self.upper).sum())

        low, high = 0.0, 1.0
        while total(high) < 1:
            high *= 2
            if high > 1e300:
                raise ValueError("no distribution within the bounds")
        for _ in range(200):
            middle = (low + high) / 2
            low, high = (middle, high) if total(middle) < 1 else (low, middle)
        return np.clip(high * p, self.lower, self.upper)

    def select(self, batch_size: int, p: np.ndarray | None = None) -> np.ndarray:
        """Task positions drawn from ``p`` (default: :meth:`distribution`)."""
        p = self.distribution() if p is None else p
        counts = self.rng.multinomial(batch_size, p / p.sum())
        chosen = [self.members[b][self.rng.choice(len(self.members[b]), counts[b], replace=False)]
                  for b in np.flatnonzero(counts)]
        return self.rng.permutation(np.concatenate(chosen))

    def update(self, tasks: np.ndarray, reward: np.ndarray) -> None:
        """``reward[i, j]``: score of rollout ``j`` of task position ``tasks[i]``."""
        c, bucket, variance = self.c, self.bucket_of[tasks], reward.var(axis=1)
        for b in np.unique(bucket):
            score = reward[bucket == b].mean()
            if self.seen[b]:
                self.short[b] = (1 - c["alpha_short"]) * self.short[b] + c["alpha_short"] * score
                self.long[b] = (1 - c["alpha_long"]) * self.long[b] + c["alpha_long"] * score
            else:
                self.short[b] = self.long[b] = score
            self.informativeness[b] = variance[bucket == b].mean()
            self.seen[b] = True


def _contestants(configs: dict[str, dict], pool: TaskPool, seed: int) -> list[tuple[str, object, object]]:
    """``(name, select(step, batch), update(step, tasks, reward, results))`` of every selector, then of the
    reference of every bucket preset (``<name>/reference``)."""
    out = []
    for name, cfg in configs.items():
        sel = build_selector(cfg, pool, seed)
        out.append((name, sel.select, lambda step, tasks, reward, results, sel=sel: (sel.update(step, results),
                                                                                    sel.metrics())))
    for name, cfg in configs.items():
        if cfg["name"] == "progress":
            ref = BucketSampler(cfg, pool.columns["bucket"], seed)
            out.append((f"{name}/reference", lambda step, batch, ref=ref: ref.select(batch),
                        lambda step, tasks, reward, results, ref=ref: ref.update(tasks, reward)))
    return out


def run(sizes=(4_000, 490_000), batch_size: int = 128, rollouts: int = 8, steps: int = 100, warmup: int = 3,
        names=SELECTORS, seed: int = 0) -> list[dict]:
    """One row per (pool size, selector): median milliseconds of select and of update per step, their sum, its
    ratio to the uniform selector's on the same pool, and (bucket presets) the reference's to it."""
    configs = selector_configs(names)
    rows = []
    for n in sizes:
        pool, rate = countdown_pool(n, seed)
        contestants = _contestants(configs, pool, seed)
        times = {name: ([], []) for name, _, _ in contestants}
        draws = np.random.default_rng([seed, n, 1])
        for step in range(warmup + steps):
            u, v = draws.random((batch_size, rollouts)), draws.random((batch_size, rollouts))
            for i in draws.permutation(len(contestants)):  # a new order each step: no fixed neighbour
                name, select, update = contestants[i]
                t0 = time.perf_counter()
                tasks = np.asarray(select(step, batch_size), dtype=np.int64)
                t1 = time.perf_counter()
                reward, results = scored(tasks, rate, u, v)  # the rollouts: not the selector's cost
                t2 = time.perf_counter()
                update(step, tasks, reward, results)
                t3 = time.perf_counter()
                if step >= warmup:
                    times[name][0].append(t1 - t0)
                    times[name][1].append(t3 - t2)
        rows += _rows(n, times, batch_size, rollouts, steps)
    return rows


def _rows(n: int, times: dict, batch_size: int, rollouts: int, steps: int) -> list[dict]:
    medians = {name: (float(np.median(s)), float(np.median(u))) for name, (s, u) in times.items()}
    base = sum(medians["uniform"]) if "uniform" in medians else None
    rows = []
    for name, (sel_s, upd_s) in medians.items():
        if name.endswith("/reference"):
            continue
        total, ref = sel_s + upd_s, f"{name}/reference"
        row = {"tasks": n, "selector": name, "step_ms": 1e3 * total, "select_ms": 1e3 * sel_s,
               "update_ms": 1e3 * upd_s, "over_uniform": None if base is None else total / base,
               "reference_ms": None, "reference_over_selector": None,
               "share_of_reference_step": of_reference_step(total), "batch": batch_size, "rollouts": rollouts,
               "steps": steps}
        if ref in medians:
            ref_s = sum(medians[ref])
            row.update(reference_ms=1e3 * ref_s, reference_over_selector=ref_s / total)
        rows.append(row)
    return rows


def report(rows: list[dict]) -> str:
    b, r, s = (rows[0]["batch"], rows[0]["rollouts"], rows[0]["steps"]) if rows else (128, 8, 0)
    lines = [f"Progress-aware selectors, one step = select {b} prompts + update on {b} x {r} rollouts "
             f"(+ metrics); median of {s} steps; reference = Yan §3.2-3.3's bucket sampler in NumPy; step = "
             f"{REFERENCE_STEP_S:.0f} s, see share.py",
             "| tasks N | selector | ms / step (select + update) | / uniform | reference ms | reference / selector "
             "| % of step |", "|---:|:---|---:|---:|---:|---:|---:|"]
    for row in rows:
        ratio = "-" if row["over_uniform"] is None else f"{row['over_uniform']:.1f}x"
        if row["reference_ms"] is None:
            ref = "- | -"
        else:
            ref = f"{row['reference_ms']:.3f} | {row['reference_over_selector']:.1f}x"
        lines.append(f"| {row['tasks']:,} | {row['selector']} | {row['step_ms']:.3f} ({row['select_ms']:.3f} + "
                     f"{row['update_ms']:.3f}) | {ratio} | {ref} | {100 * row['share_of_reference_step']:.5f} |")
    return "\n".join(lines)
