"""Batch accounting that follows the actual number of rollouts, not ``rollout.n`` (pure functions).

verl 0.9.1 sizes actor/critic mini-batches as ``ppo_mini_batch_size * rollout.n`` trajectories and
pads the batch to a multiple of that (``trainer_base.py:1589-1606, 1807, 1830``). With per-task
rollout counts and a rollout filter the number of trajectories ``K`` reaching an update varies, so:

* the *target* mini-batch stays ``ppo_mini_batch_size * rollout.n`` trajectories (a filter that
  keeps fewer rollouts gives fewer optimizer steps, as CBS specifies);
* ``K`` is split into ``m = ceil(K / target)`` equal mini-batches of ``ceil(K / m)`` rows rounded
  up to a multiple of ``dp_size * micro``, where ``micro`` is the lcm of the fixed micro-batch sizes
  per rank (``use_dynamic_bsz=False`` asserts that each rank's share divides into them,
  ``workers/engine/utils.py:125``); the few padding rows verl's
  ``upsample_batch_to_divisible_size`` adds (``response_mask = 0``) fill the gap. When ``K`` is a
  multiple of the target (stock GRPO) this is exactly verl's own sizing and needs no padding;
* within each rank's share, real rows are dealt round-robin over its mini-batches
  (:func:`spread_padding`), so padding never piles up in one optimizer step;
* ``seq-mean-*`` losses divide by the mini-batch's *real* row count (:func:`real_rows_per_row`),
  so padding rows never dilute them (``token-mean`` already counts real tokens only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MiniBatchPlan:
    rows: int  # real (non-padding) trajectories
    num_mini_batches: int
    mini_batch_size: int  # global rows per mini-batch, padding included, a multiple of dp

    @property
    def padded_size(self) -> int:
        return self.num_mini_batches * self.mini_batch_size


def plan_mini_batches(rows: int, target: int, dp_size: int, micro: int = 1) -> MiniBatchPlan:
    """Equal mini-batches of at most ``target`` real rows covering ``rows``, each rounded up to a
    multiple of ``dp_size * micro`` (every rank's share a whole number of ``micro``-row micro-batches)."""
    if min(rows, target, dp_size, micro) < 1:
        raise ValueError(f"need rows, target, dp_size, micro >= 1, got {rows}, {target}, {dp_size}, {micro}")
    num = math.ceil(rows / target)
    granule = dp_size * micro
    size = math.ceil(math.ceil(rows / num) / granule) * granule
    return MiniBatchPlan(rows, num, size)


def fixed_micro_batch_size(config, use_reference: bool, use_critic: bool) -> int:
    """lcm of the per-rank micro-batch sizes verl asserts divisibility by (``use_dynamic_bsz=False``
    passes of the actor update, the old/ref log-prob passes and the critic); 1 when all are dynamic."""
    arr = config.actor_rollout_ref
    sizes = []
    if not arr.actor.use_dynamic_bsz:
        sizes.append(arr.actor.ppo_micro_batch_size_per_gpu)
    if not arr.rollout.log_prob_use_dynamic_bsz:
        sizes.append(arr.rollout.log_prob_micro_batch_size_per_gpu)
    if use_reference and not arr.ref.log_prob_use_dynamic_bsz:
        sizes.append(arr.ref.log_prob_micro_batch_size_per_gpu)
    if use_critic and not config.critic.use_dynamic_bsz:
        sizes.append(config.critic.ppo_micro_batch_size_per_gpu)
    return math.lcm(1, *(int(s) for s in sizes if s))


def mini_batch_of_rows(padded_size: int, mini_batch_size: int, dp_size: int) -> np.ndarray:
    """Mini-batch id of each row of a batch as verl splits it without shuffling: ``dp_size``
    contiguous chunks (``KVBatchMeta.chunk``), each cut into consecutive per-rank mini-batches
    (``tensordict_utils.make_iterator``)."""
    if padded_size % dp_size or mini_batch_size % dp_size or padded_size % mini_batch_size:
        raise ValueError(f"{padded_size} rows cannot be split into mini-batches of {mini_batch_size} over dp={dp_size}")
    per_rank = padded_size // dp_size
    return (np.arange(padded_size) % per_rank) // (mini_batch_size // dp_size)


def real_rows_per_row(is_padding: np.ndarray, mini_batch_size: int, dp_size: int) -> np.ndarray:
    """For every row, the number of real rows in its (global) mini-batch: the ``seq-mean-*`` divisor."""
    is_padding = np.asarray(is_padding, dtype=bool)
    ids = mini_batch_of_rows(len(is_padding), mini_batch_size, dp_size)
    real = np.bincount(ids, weights=~is_padding).astype(np.int64)
    return real[ids]


def mini_batch_tokens(tokens: np.ndarray, mini_batch_size: int, dp_size: int) -> np.ndarray:
    """For every row, the response tokens of its (global) mini-batch as the plan lays the rows out;
    verl reports the same count as ``batch_num_tokens`` (``transformer_impl.py:730``), so comparing
    the two checks the layout :func:`real_rows_per_row` relies on."""
    tokens = np.asarray(tokens, dtype=np.int64)
    ids = mini_batch_of_rows(len(tokens), mini_batch_size, dp_size)
    return np.bincount(ids, weights=tokens).astype(np.int64)[ids]


def spread_padding(is_padding: np.ndarray, mini_batch_size: int, dp_size: int) -> np.ndarray:
    """A reordering that keeps every row on its rank (verl's dispatch chunks) and deals each rank's real
    rows round-robin over its mini-batches: real rows per mini-batch then differ by at most one per rank."""
    is_padding = np.asarray(is_padding, dtype=bool)
    n = len(is_padding)
    mini_batch_of_rows(n, mini_batch_size, dp_size)  # validates the layout
    per_rank, per_mb = n // dp_size, mini_batch_size // dp_size
    num = per_rank // per_mb
    order = []
    for start in range(0, n, per_rank):
        rows = np.arange(start, start + per_rank)
        dealt = np.concatenate([rows[~is_padding[rows]], rows[is_padding[rows]]])
        slots = [dealt[j::num] for j in range(num)]  # slot j: the j-th, (j+num)-th, ... rows dealt
        order.extend(np.concatenate(slots).tolist())
    return np.asarray(order, dtype=np.int64)
