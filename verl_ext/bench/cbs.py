"""CBS scheduler cost per round: the vectorised scheduler (normalise + MLP score + ε-greedy top-K, then the
online regression step) against the same procedure written rollout by rollout, side by side on the same
candidates, at the paper's buffer M = 2048 and the sweep's largest, 5120 (SPEC.md §2: the scheduler took
<= 3.8 % of a step). K = one batch of 128 prompts x 8 rollouts = 1024.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from verl_ext.axes.cbs_scheduler import FEATURES, CbsScheduler, CbsSchedulerConfig


def _per_rollout_round(s: CbsScheduler, step: int, x: np.ndarray, newest: np.ndarray, k: int, adv: np.ndarray,
                       v: float, e: float) -> list[int]:
    """One round the straightforward way: rows normalised and scored one at a time, slots filled by scans."""
    s.begin_round(v, e)  # the regression on the previous pick (same code: its cost is the same)
    s.normaliser.update(x)
    rows = []
    for row in x:
        rows.append(s.normaliser(row[None, :])[0])
    scores = []
    with torch.no_grad():
        for row in rows:
            scores.append(float(s.mlp(torch.from_numpy(row)[None, :])[0, 0]))
    explore = s.rng.random(k) < s.epsilon(step)
    taken = [False] * len(x)
    chosen = []
    for slot in range(k):
        if explore[slot]:
            pick = next(int(i) for i in newest if not taken[i])
        else:
            pick = max((i for i in range(len(x)) if not taken[i]), key=scores.__getitem__)
        taken[pick] = True
        chosen.append(pick)
    s.pending = (np.stack([rows[i] for i in chosen]), np.abs(adv[chosen]))
    return sorted(chosen)


def run(sizes=((2048, 1024), (5120, 1024)), rounds: int = 3, seed: int = 0) -> list[dict]:
    """One row per ``(M, K)``: seconds per round of each implementation, their ratio, equal choices."""
    rows = []
    for m, k in sizes:
        rng = np.random.default_rng(seed)
        data = [(rng.normal(size=(m, len(FEATURES))), rng.permutation(m), rng.normal(size=m), float(t) * 0.01,
                 1.0 - 0.01 * t) for t in range(rounds + 1)]
        cfg = CbsSchedulerConfig(epsilon0=0.5, epsilon_min=0.2, warmup=0)
        fast, slow = CbsScheduler(cfg, seed), CbsScheduler(cfg, seed)
        fast_s, slow_s, same = [], [], True
        for t, (x, newest, adv, v, e) in enumerate(data):
            t0 = time.perf_counter()
            fast.begin_round(v, e)
            a = fast.select(t, x, newest, k, adv).tolist()
            t1 = time.perf_counter()
            b = _per_rollout_round(slow, t, x, newest, k, adv, v, e)
            t2 = time.perf_counter()
            if t > 0:  # round 0 has no regression step: not a steady-state round
                fast_s.append(t1 - t0)
                slow_s.append(t2 - t1)
            same &= a == b
        f, s = float(np.median(fast_s)), float(np.median(slow_s))
        rows.append({"buffer": m, "chosen": k, "fast_s": f, "per_rollout_s": s, "per_rollout_over_fast": s / f,
                     "same_choices": bool(same)})
    return rows


def report(rows: list[dict]) -> str:
    lines = ["CBS scheduler, one round (normalise + score + epsilon-greedy top-K + regression step; median)",
             "| buffer M | chosen K | vectorised ms | per-rollout ms | per-rollout / vectorised | same choices |",
             "|---:|---:|---:|---:|---:|:---:|"]
    for r in rows:
        lines.append(f"| {r['buffer']:,} | {r['chosen']:,} | {1e3 * r['fast_s']:.1f} | {1e3 * r['per_rollout_s']:.0f} | "
                     f"{r['per_rollout_over_fast']:.0f}x | {'yes' if r['same_choices'] else 'NO'} |")
    return "\n".join(lines)
