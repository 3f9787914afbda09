"""CoBA-RL allocation cost: the exact vectorised allocator used in training against three references, on the same
batches, measured side by side (CoBA-RL, Yao et al., §3.6, Table 4: heap 0.124 s vs DP 115 s at M = 512, B = 8192):

* ``table_greedy``, the strongest straightforward one: the paper's greedy vectorised, every marginal gain of the
  ``M x (B_up - B_low)`` table computed at once and the spare budget's best taken by one partition;
* the paper's heap greedy (Algorithm 1, one rollout at a time in Python);
* dynamic programming.

Pass rates are observed ones (``k/16`` of 16 rollouts, so many tasks tie), α, β, τ the defaults'.
DP needs ``O(M · R · (B_up - B_low))`` work and an ``M × R`` table of choices (``R = B - M·B_low``);
above ``dp_max_cells`` it is not run and its time is extrapolated from the smaller size by that count.
"""

from __future__ import annotations

import time

import numpy as np

from verl_ext.axes.budget_solvers import dp_allocate, geometric_allocate, geometric_gain, heap_allocate
from verl_ext.axes.coba import CobaAllocatorConfig, coba_gains, coba_value
from verl_ext.apps.bench.step_share import REFERENCE_STEP_S, of_reference_step


def table_greedy(log_scale: np.ndarray, rate: np.ndarray, low: int, high: int, total: int) -> np.ndarray:
    """The heap's counts from the whole table of log gains ``log_scale_i - rate_i·b`` (the heap's float
    expression), ``b = low .. high-1``: the ``total - M·low`` largest (one partition), ties in (task, rollout)
    order as the heap takes them."""
    n, spare = len(log_scale), total - len(log_scale) * low
    gains = (log_scale[:, None] - rate[:, None] * np.arange(low, high)[None, :]).ravel()
    kth = np.partition(gains, gains.size - spare)[gains.size - spare]  # the spare-th largest gain
    take = gains > kth
    take[np.flatnonzero(gains == kth)[: spare - take.sum()]] = True
    return low + take.reshape(n, -1).sum(axis=1)


def _median_seconds(fn, repeats: int, inner: int = 1):
    out, times = None, []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            out = fn()
        times.append((time.perf_counter() - t0) / inner)
    return out, float(np.median(times))


def run(sizes=((512, 8192), (4096, 65536)), repeats: int = 5, dp_max_cells: float = 2e9, seed: int = 0) -> list[dict]:
    """One row per ``(M, B_total)``: seconds of each solver, ratios, whether outputs agree."""
    c = CobaAllocatorConfig()
    alpha, beta = c.kappa - 2.0, 2.0  # the schedule's start
    rng = np.random.default_rng(seed)
    rows, dp_rate = [], None
    for m, total in sizes:
        p = np.clip(rng.binomial(16, rng.beta(0.6, 0.6, m)) / 16, c.p_min, c.p_max)
        s, r = coba_gains(p, alpha, beta, c.tau)
        gain = geometric_gain(s.tolist(), r.tolist())
        heap, heap_s = _median_seconds(lambda: heap_allocate(gain, m, c.min_n, c.max_n, total), repeats)
        fast, fast_s = _median_seconds(lambda: geometric_allocate(s, r, c.min_n, c.max_n, total), repeats, inner=20)
        table, table_s = _median_seconds(lambda: table_greedy(s, r, c.min_n, c.max_n, total), repeats, inner=5)
        cells = m * (total - m * c.min_n + 1) * (c.max_n - c.min_n + 1)
        row = {"tasks": m, "budget": total, "heap_s": heap_s, "fast_s": fast_s, "table_s": table_s,
               "table_over_fast": table_s / fast_s, "heap_over_fast": heap_s / fast_s,
               "identical": bool(np.array_equal(heap, fast)), "table_identical": bool(np.array_equal(table, fast)),
               "dp_cells": cells, "share_of_reference_step": of_reference_step(fast_s)}
        if cells <= dp_max_cells:
            values = coba_value(np.arange(c.min_n, c.max_n + 1)[None, :], p[:, None], alpha, beta, c.tau)
            dp, dp_s = _median_seconds(lambda: dp_allocate(values, c.min_n, total), 1)
            dp_rate = dp_s / cells
            greedy_value = coba_value(fast, p, alpha, beta, c.tau).sum()
            row.update(dp_s=dp_s, dp_measured=True, dp_same_value=bool(
                np.isclose(coba_value(dp, p, alpha, beta, c.tau).sum(), greedy_value, rtol=1e-12, atol=0)))
        else:
            row.update(dp_s=None if dp_rate is None else dp_rate * cells, dp_measured=False, dp_same_value=None)
        if row["dp_s"] is not None:
            row["dp_over_fast"] = row["dp_s"] / fast_s
        rows.append(row)
    return rows


def report(rows: list[dict]) -> str:
    lines = ["CoBA-RL allocation, [B_low, B_up] = [2, 128] (median; DP once; est.: scaled by M·R·(B_up-B_low); "
             f"step = {REFERENCE_STEP_S:.0f} s, see share.py)",
             "| tasks M | budget B | fast ms | table ms | table / fast | heap ms | heap / fast | DP s | DP / fast "
             "| table = heap = fast | DP value = fast value | % of step |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|:---:|---:|"]
    for r in rows:
        if r["dp_s"] is None:
            dp, dp_ratio = "skipped", "-"
        else:
            dp = f"{r['dp_s']:.2f}" if r["dp_measured"] else f"~{r['dp_s']:.0f} (est., not run)"
            dp_ratio = f"{r['dp_over_fast']:,.0f}x"
        same = "-" if r["dp_same_value"] is None else ("yes" if r["dp_same_value"] else "NO")
        lines.append(f"| {r['tasks']:,} | {r['budget']:,} | {1e3 * r['fast_s']:.3f} | {1e3 * r['table_s']:.2f} | "
                     f"{r['table_over_fast']:.0f}x | {1e3 * r['heap_s']:.1f} | {r['heap_over_fast']:.0f}x | {dp} | "
                     f"{dp_ratio} | {'yes' if r['identical'] and r['table_identical'] else 'NO'} | {same} | "
                     f"{100 * r['share_of_reference_step']:.5f} |")
    return "\n".join(lines)
