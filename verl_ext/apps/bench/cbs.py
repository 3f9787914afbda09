"""CBS scheduler cost per round: the scheduler (normalise + MLP score + ε-greedy top-K, then the online
regression step) against two references of the same procedure, side by side on the same candidates, at the
paper's buffer M = 2048 and the sweep's largest, 5120 ("Contextual Rollout Bandits" paper, §6.2, Table 3: the
scheduler took <= 3.83 % of training time).
K = one batch of 128 prompts x 8 rollouts = 1024.

* batched (the strongest straightforward one): the whole buffer normalised and scored by one MLP forward,
  then the paper's ε-greedy rule (§4.2, Eq. 8-9) slot by slot, each slot a vectorised scan for the first unchosen candidate
  of the argsort of the scores (or of the newest-first order);
* per rollout: rows normalised and scored one at a time, slots filled by Python scans.

All three share the regression step (``begin_round``: its cost is the same). Torch runs every MLP on one thread,
as the scheduler does (:func:`verl_ext.axes.cbs_scheduler.one_thread`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from verl_ext.axes.cbs_scheduler import FEATURES, CbsScheduler, CbsSchedulerConfig, one_thread
from verl_ext.apps.bench.step_share import REFERENCE_STEP_S, of_reference_step


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


def _batched_round(s: CbsScheduler, step: int, x: np.ndarray, newest: np.ndarray, k: int, adv: np.ndarray,
                   v: float, e: float) -> list[int]:
    """One round straightforwardly vectorised: one forward over the buffer, then per slot one masked scan."""
    s.begin_round(v, e)
    s.normaliser.update(x)
    z = s.normaliser(x)
    with torch.no_grad():
        scores = s.mlp(torch.from_numpy(z)).squeeze(-1).numpy()
    best_first = np.argsort(-scores, kind="stable")
    explore = s.rng.random(k) < s.epsilon(step)
    taken = np.zeros(len(x), dtype=bool)
    chosen = np.empty(k, dtype=np.int64)
    for slot in range(k):
        order = newest if explore[slot] else best_first
        chosen[slot] = order[np.argmin(taken[order])]  # the first unchosen one
        taken[chosen[slot]] = True
    s.pending = (z[chosen], np.abs(adv[chosen]))
    return sorted(chosen.tolist())


def _fast_round(s: CbsScheduler, step: int, x: np.ndarray, newest: np.ndarray, k: int, adv: np.ndarray,
                v: float, e: float) -> list[int]:
    """One round of the scheduler as the rollout filters call it."""
    s.begin_round(v, e)
    return s.select(step, x, newest, k, adv).tolist()


def _timed(fn: Callable, *args) -> tuple[list[int], float]:
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def run(sizes=((2048, 1024), (5120, 1024)), rounds: int = 3, seed: int = 0) -> list[dict]:
    """One row per ``(M, K)``: seconds per round of each implementation, ratios, equal choices."""
    with one_thread():
        return [_row(m, k, rounds, seed) for m, k in sizes]


def _row(m: int, k: int, rounds: int, seed: int) -> dict:
    cfg = CbsSchedulerConfig(epsilon0=0.5, epsilon_min=0.2, warmup=0)
    rounds_of = {"fast": _fast_round, "batched": _batched_round, "per_rollout": _per_rollout_round}
    rng = np.random.default_rng(seed)
    data = [(rng.normal(size=(m, len(FEATURES))), rng.permutation(m), rng.normal(size=m), float(t) * 0.01,
             1.0 - 0.01 * t) for t in range(rounds + 1)]
    schedulers = {name: CbsScheduler(cfg, seed) for name in rounds_of}
    seconds = {name: [] for name in rounds_of}
    same = {name: True for name in rounds_of}
    for t, (x, newest, adv, v, e) in enumerate(data):
        chosen = {}
        for name, round_ in rounds_of.items():
            chosen[name], s = _timed(round_, schedulers[name], t, x, newest, k, adv, v, e)
            if t > 0:  # round 0 has no regression step: not a steady-state round
                seconds[name].append(s)
            same[name] &= chosen[name] == chosen["fast"]
    s = {name: float(np.median(v)) for name, v in seconds.items()}
    return {"buffer": m, "chosen": k, "fast_s": s["fast"],
            "batched_s": s["batched"], "per_rollout_s": s["per_rollout"], "batched_over_fast": s["batched"] / s["fast"],
            "per_rollout_over_fast": s["per_rollout"] / s["fast"], "batched_same_choices": same["batched"],
            "same_choices": same["per_rollout"], "share_of_reference_step": of_reference_step(s["fast"])}


def report(rows: list[dict]) -> str:
    lines = [f"CBS scheduler, one round (normalise + score + epsilon-greedy top-K + regression step; median; step = "
             f"{REFERENCE_STEP_S:.0f} s, see share.py)",
             "| buffer M | chosen K | scheduler ms | batched ms | batched / scheduler | per-rollout ms "
             "| per-rollout / scheduler | same choices (batched, per-rollout) | % of step |",
             "|---:|---:|---:|---:|---:|---:|---:|:---:|---:|"]
    for r in rows:
        same = "/".join("yes" if r[key] else "NO" for key in ("batched_same_choices", "same_choices"))
        lines.append(f"| {r['buffer']:,} | {r['chosen']:,} | {1e3 * r['fast_s']:.1f} | "
                     f"{1e3 * r['batched_s']:.1f} | {r['batched_over_fast']:.1f}x | {1e3 * r['per_rollout_s']:.0f} | "
                     f"{r['per_rollout_over_fast']:.0f}x | {same} | {100 * r['share_of_reference_step']:.4f} |")
    return "\n".join(lines)
