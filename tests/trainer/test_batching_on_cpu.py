"""Mini-batch plans at several data-parallel ranks with fixed micro-batches (no Ray)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

import verl_ext
from verl_ext.trainer.batching import (
    fixed_micro_batch_size, mini_batch_of_rows, mini_batch_tokens, plan_mini_batches, real_rows_per_row,
    spread_padding,
)


@pytest.mark.parametrize("rows, target, dp, micro", [(100, 128, 8, 2), (9, 8, 2, 2), (300, 256, 8, 4), (7, 4, 2, 3)])
def test_each_ranks_share_of_a_mini_batch_is_whole_micro_batches(rows, target, dp, micro):
    plan = plan_mini_batches(rows, target, dp, micro)
    assert (plan.mini_batch_size // dp) % micro == 0 and plan.mini_batch_size % dp == 0
    assert plan.padded_size >= rows and plan.num_mini_batches == -(-rows // target)
    assert plan.padded_size - rows < plan.num_mini_batches * dp * micro  # no more padding than the granule needs


def test_the_issue_case_no_longer_gives_odd_shares():
    # 100 kept rows at dp 8: rounding to dp alone gives 13 rows per rank, which verl's fixed
    # micro-batches of 2 reject (workers/engine/utils.py:125); the plan now gives 14
    assert plan_mini_batches(100, 128, 8).mini_batch_size // 8 == 13
    assert plan_mini_batches(100, 128, 8, 2).mini_batch_size // 8 == 14


def _compose(*overrides):
    with initialize_config_dir(config_dir=str(Path(verl_ext.__file__).parent / "config"), version_base=None):
        return compose("verl_ext_trainer", overrides=list(overrides))


def test_fixed_micro_batch_size_is_the_lcm_of_the_static_passes():
    dynamic = _compose("actor_rollout_ref.actor.use_dynamic_bsz=True",
                       "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True")
    assert fixed_micro_batch_size(dynamic, use_reference=False, use_critic=False) == 1
    static = _compose("actor_rollout_ref.actor.use_dynamic_bsz=False",
                      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
                      "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=False",
                      "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=3",
                      "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=False",
                      "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4")
    assert fixed_micro_batch_size(static, use_reference=False, use_critic=False) == 6
    assert fixed_micro_batch_size(static, use_reference=True, use_critic=False) == 12


@pytest.mark.parametrize("seed", range(20))
def test_spread_padding_keeps_rows_on_their_rank_and_evens_out_real_rows(seed):
    rng = np.random.default_rng(seed)
    dp = int(rng.choice([1, 2, 4]))
    per_mb, num = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    size = per_mb * dp
    is_padding = rng.random(size * num) < 0.4
    order = spread_padding(is_padding, size, dp)
    assert sorted(order.tolist()) == list(range(size * num))  # a permutation
    per_rank = size * num // dp
    assert np.array_equal(order // per_rank, np.arange(size * num) // per_rank)  # no row changes rank
    ids = mini_batch_of_rows(size * num, size, dp)
    for rank in range(dp):
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        real = np.bincount(ids[mine], weights=~is_padding[order][mine], minlength=num)
        assert real.max() - real.min() <= 1, real


def test_mini_batch_tokens_and_real_rows_agree_when_responses_have_one_length():
    is_padding = np.array([0, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 1], dtype=bool)
    tokens = np.where(is_padding, 0, 32)
    assert np.array_equal(mini_batch_tokens(tokens, 4, 2), 32 * real_rows_per_row(is_padding, 4, 2))
    assert mini_batch_tokens([5, 7, 1, 2], 2, 2).tolist() == [6, 9, 6, 9]  # ranks hold rows 0-1 and 2-3
