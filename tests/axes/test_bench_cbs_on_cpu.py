"""The CBS bench (verl_ext/bench/cbs.py): the batched reference and the per-rollout loop choose the scheduler's
rollouts round after round; rows at torch's thread count and at one thread; the report gives both ratios."""

import math

import torch

from verl_ext.bench import cbs as bench


def test_both_references_make_the_schedulers_choices_and_the_report_gives_both_ratios():
    rows = bench.run(sizes=((256, 64),), rounds=4, threads=(1,))
    [r] = rows
    assert r["batched_same_choices"] and r["same_choices"] and r["torch_threads"] == 1
    for key in ("fast_s", "batched_s", "per_rollout_s", "batched_over_fast", "per_rollout_over_fast"):
        assert math.isfinite(r[key]) and r[key] > 0, key
    table = bench.report(rows)
    assert "batched / scheduler" in table and "per-rollout / scheduler" in table and "| yes/yes |" in table


def test_rows_at_torchs_thread_count_and_at_one_thread():
    threads = torch.get_num_threads()
    rows = bench.run(sizes=((64, 16),), rounds=2, threads=(None, 1))
    assert [r["torch_threads"] for r in rows] == list(dict.fromkeys([threads, 1]))
    assert torch.get_num_threads() == threads
