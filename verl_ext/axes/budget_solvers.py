"""Exact solvers of ``max Σ_i V_i(B_i)`` s.t. ``Σ B_i = total``, ``low <= B_i <= high`` for values with
non-increasing marginal gains (CoBA-RL, Yao et al., §2.4, Eq. 10, App. A), where greedy is optimal.

* :func:`heap_allocate`: the paper's Algorithm 1 (reference): everyone starts at ``low``; one rollout
  at a time goes to the task with the largest marginal gain ``gain(i, b)`` (of its ``b+1``-th rollout)
  while under ``high``. Ties go to the lower position. Its result is the ``total - M·low`` best
  (task, rollout) pairs under the order ``(-gain, position, rollout)``: the solvers below select exactly
  that set, so they return the heap's counts bit for bit.
* :func:`geometric_allocate`: the fast solver for CoBA's geometric gains, in log form
  ``gain(i, b) = log_scale_i - rate_i·b`` (``= ln ΔV_i(b)``, ``ΔV_i(b) = C_i e^{-k_i b}(1 - e^{-k_i})``).
  A continuous relaxation (sorted breakpoints, ``O(M log M)``) gives two thresholds ``θ_lo <= θ_hi``
  around the last gain the heap takes; the count of each task's gains above a threshold is
  ``ceil((log_scale - θ)/rate - low)``, corrected against the float gain expression itself; every pair
  above ``θ_hi`` is taken and the ``~M`` pairs in ``(θ_lo, θ_hi]`` are sorted by the heap's order.
  The per-pair key is one IEEE multiply and one subtract, no ``exp``/``log``: NumPy and the Python heap
  compute the very same float for every pair, so the results are bit-identical (tested), ties included.
* :func:`table_allocate`: any non-increasing gains given as a table (Knapsack-RL); top pairs by one
  ``np.partition``.
* :func:`dp_allocate`: dynamic programming over tasks × budget on a value table; exact for any values,
  ``O(M · R · (high - low))``: the benchmark's and the tests' second oracle.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np

from verl_ext.axes.allocators import check_budget


def heap_allocate(gain: Callable[[int, int], float], n_tasks: int, low: int, high: int, total: int) -> np.ndarray:
    """Algorithm 1 of the paper with a max-heap; ``gain(i, b)``: gain of task ``i``'s rollout ``b+1``."""
    check_budget(n_tasks, total, low, high)
    counts = [low] * n_tasks
    spare = total - n_tasks * low
    heap = [(-gain(i, low), i) for i in range(n_tasks)] if low < high else []
    heapq.heapify(heap)
    while spare and heap:
        _, i = heapq.heappop(heap)
        counts[i] += 1
        spare -= 1
        if counts[i] < high:
            heapq.heappush(heap, (-gain(i, counts[i]), i))
    return np.array(counts, dtype=np.int64)


def geometric_gain(log_scale: list[float], rate: list[float]) -> Callable[[int, int], float]:
    """The heap's gain for :func:`geometric_allocate`'s inputs (same float expression)."""
    return lambda i, b: log_scale[i] - rate[i] * b


def _checked(log_scale, rate) -> tuple[np.ndarray, np.ndarray]:
    s, r = np.asarray(log_scale, dtype=np.float64), np.asarray(rate, dtype=np.float64)
    if s.shape != r.shape or s.ndim != 1:
        raise ValueError(f"log_scale and rate must be 1-D of one length, got {s.shape} and {r.shape}")
    if len(s) and not (r.min() >= 0 and r.max() < np.inf and s.max() < np.inf):  # NaN fails too
        raise ValueError("gains need log_scale < +inf (-inf: zero gain) and finite rate >= 0, no NaN")
    return s, r


def geometric_allocate(log_scale, rate, low: int, high: int, total: int) -> np.ndarray:
    """Counts equal to ``heap_allocate(geometric_gain(log_scale, rate), ...)``, vectorised.

    Tasks with ``log_scale = -inf`` (zero gain: ``k = 0`` or ``C = 0``) only get rollouts beyond ``low``
    once every other task is at ``high``, in position order, as the heap gives them.
    """
    s, r = _checked(log_scale, rate)
    n = len(s)
    check_budget(n, total, low, high)
    width, spare = high - low, total - n * low
    if spare == 0 or spare == n * width:
        return np.full(n, low if spare == 0 else high, dtype=np.int64)
    if s.min() > -np.inf:
        return low + _geometric_extra(s, r, low, width, spare)
    counts = np.full(n, low, dtype=np.int64)
    live = s > -np.inf
    capacity = width * int(live.sum())
    if spare >= capacity:  # every live task at `high`; the rest fills dead tasks one after another
        counts[live] = high
        counts[~live] += np.clip(spare - capacity - width * np.arange(n - int(live.sum())), 0, width)
        return counts
    counts[live] += _geometric_extra(s[live], r[live], low, width, spare)
    return counts


def _count_above(s, r, low, width, theta) -> np.ndarray:
    """``#{j < width : s - r·(low + j) > θ}`` per task (float), exactly as the float gain expression
    says, for each threshold in the column ``theta`` ([t, 1]; one row per threshold)."""
    j = np.fmin(np.fmax(np.ceil((s - theta) / r - low), 0.0), width)  # closed form; NaN (r = 0, s = θ) -> 0
    while True:  # gains do not increase with j: the count is the first j whose gain is <= θ
        b = j + low
        up = (j < width) & (s - r * b > theta)
        down = (j > 0) & (s - r * (b - 1) <= theta)
        if not (up.any() or down.any()):
            return j
        j = j + up - down


def _relaxed_thresholds(s, r, low, width, targets) -> np.ndarray:
    """Column of ``θ`` with ``f(θ) = Σ_i clip((s_i - θ)/r_i - low, 0, width) ≈ target`` per target
    (``f`` is piecewise linear; ``r_i = 0`` steps by ``width`` at ``s_i``)."""
    n = len(s)
    if r.min() > 0:
        inv = 1.0 / r
        icpt = s * inv - low
    else:
        sloped = r > 0
        inv = np.divide(1.0, r, out=np.zeros(n), where=sloped)
        icpt = (s * inv - low) * sloped
    at = np.concatenate((s - r * low, s - r * (low + width)))  # f_i starts rising / saturates, θ descending
    order = np.argsort(at)[::-1]
    at = at[order]
    slope = np.concatenate((inv, -inv))[order].cumsum()  # of f in -θ
    offset = np.concatenate((icpt, width - icpt))[order].cumsum()  # a saturated task counts `width`
    level = np.maximum.accumulate(offset - at * slope)  # f at each breakpoint
    thetas = []
    for target, k in zip(targets, np.searchsorted(level, targets).tolist()):
        if target <= 0 or target >= n * width:
            thetas.append(np.inf if target <= 0 else -np.inf)
        elif k == 0 or k == 2 * n:
            thetas.append(float(at[min(k, 2 * n - 1)]))
        else:  # f is linear between breakpoints k - 1 and k
            m = slope[k - 1]
            theta = (offset[k - 1] - target) / m if m > 0 else at[k]
            thetas.append(float(min(max(theta, at[k]), at[k - 1])))
    return np.array(thetas)[:, None]


def _geometric_extra(s, r, low, width, spare) -> np.ndarray:
    """Rollouts above ``low`` per task, all ``s`` finite, ``0 < spare < len(s)·width``."""
    n = len(s)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lo_theta, hi_theta = _relaxed_thresholds(s, r, low, width, [spare, spare - n])
        below, above = _count_above(s, r, low, width, np.stack([lo_theta, np.maximum(hi_theta, lo_theta)]))
        step = n
        while below.sum() < spare:  # the relaxation is only a guess: widen the bracket until it holds
            if lo_theta.max() == -np.inf:  # all finite gains taken; the rest are -inf (rate·b overflowed)
                return _fill_in_order(below.astype(np.int64), width, spare)
            step *= 2
            lo_theta = np.minimum(_relaxed_thresholds(s, r, low, width, [spare + step])[0], lo_theta)
            below = _count_above(s, r, low, width, lo_theta)
        step = n
        while above.sum() > spare:
            step *= 2
            hi_theta = np.maximum(_relaxed_thresholds(s, r, low, width, [spare - step])[0], lo_theta)
            above = _count_above(s, r, low, width, hi_theta)
        # every pair with gain > hi_theta is taken; the rest are the best pairs in (lo_theta, hi_theta]
        sizes = (below - above).astype(np.int64)
        task = np.repeat(np.arange(n), sizes)
        b = np.repeat(above + low - (np.cumsum(sizes) - sizes), sizes) + np.arange(len(task))  # rollout counts
        neg_gain = r[task] * b - s[task]  # exactly -(s - r·b); pairs come in (task, b) order: a stable sort
        chosen = np.argsort(neg_gain, kind="stable")[: spare - int(above.sum())]  # ends in the heap's order
    return above.astype(np.int64) + np.bincount(task[chosen], minlength=n)


def _fill_in_order(counts: np.ndarray, width: int, spare: int) -> np.ndarray:
    """``counts`` plus the missing rollouts task after task in position order (up to ``width`` each):
    the heap's order for equal (``-inf``) gains, as for tasks with zero gain."""
    room = width - counts
    return counts + np.clip(spare - counts.sum() - (np.cumsum(room) - room), 0, room)


def table_allocate(gains, low: int, high: int, total: int) -> np.ndarray:
    """Counts equal to ``heap_allocate(lambda i, b: gains[i][b - low], ...)`` for a table
    ``gains[i, j]`` (gain of task ``i``'s rollout ``low + j + 1``) whose rows do not increase."""
    g = np.asarray(gains, dtype=np.float64)
    n = g.shape[0]
    check_budget(n, total, low, high)
    if g.shape != (n, high - low) or np.isnan(g).any() or (np.diff(g, axis=1) > 0).any():
        raise ValueError(f"gains must be a NaN-free [{n}, {high - low}] table with non-increasing rows")
    spare = total - n * low
    flat = g.ravel()  # row-major: flat position order = (task, rollout) order, the heap's tie rule
    take = np.zeros(flat.size, dtype=bool)
    if spare:
        kth = np.partition(flat, flat.size - spare)[flat.size - spare]  # the spare-th largest gain
        take = flat > kth
        take[np.flatnonzero(flat == kth)[: spare - int(take.sum())]] = True
    return low + take.reshape(n, -1).sum(axis=1)


def dp_allocate(values, low: int, total: int) -> np.ndarray:
    """Optimal counts for ``values[i, j] = V_i(low + j)`` (any values) by dynamic programming over
    tasks and spent budget; ties between optimal allocations are broken arbitrarily."""
    v = np.asarray(values, dtype=np.float64)
    n, width = v.shape[0], v.shape[1] - 1
    check_budget(n, total, low, low + width)
    spare = total - n * low
    best = np.full(spare + 1, -np.inf)
    best[0] = 0.0
    choice = np.empty((n, spare + 1), dtype=np.int16 if width < 2**15 else np.int64)
    for i in range(n):  # windows[b, t] = best[b - (width - t)]: t indexes rollouts above low, reversed
        windows = np.lib.stride_tricks.sliding_window_view(np.concatenate([np.full(width, -np.inf), best]), width + 1)
        candidates = windows + v[i, ::-1]
        pick = candidates.argmax(axis=1)
        best = np.take_along_axis(candidates, pick[:, None], axis=1)[:, 0]
        choice[i] = width - pick
    counts = np.empty(n, dtype=np.int64)
    left = spare
    for i in range(n - 1, -1, -1):
        counts[i] = low + choice[i, left]
        left -= choice[i, left]
    return counts
