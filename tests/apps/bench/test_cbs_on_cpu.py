"""The CBS bench (verl_ext/apps/bench/cbs.py): the batched reference and the per-rollout loop choose the scheduler's
rollouts round after round, all on one torch thread as the scheduler runs; the report gives both ratios."""

import math

import torch

from verl_ext.apps.bench import cbs as bench


def test_both_references_make_the_schedulers_choices_and_the_report_gives_both_ratios():
    threads = torch.get_num_threads()
    rows = bench.run(sizes=((256, 64),), rounds=4)
    assert torch.get_num_threads() == threads  # restored
    [r] = rows
    assert r["batched_same_choices"] and r["same_choices"]
    for key in ("fast_s", "batched_s", "per_rollout_s", "batched_over_fast", "per_rollout_over_fast"):
        assert math.isfinite(r[key]) and r[key] > 0, key
    table = bench.report(rows)
    assert "batched / scheduler" in table and "per-rollout / scheduler" in table and "| yes/yes |" in table


def test_per_rollout_oracle_makes_the_same_choices_on_a_small_pool():
    rows = bench.run(sizes=((64, 16),), rounds=3)
    assert rows[0]["same_choices"] and rows[0]["fast_s"] > 0
