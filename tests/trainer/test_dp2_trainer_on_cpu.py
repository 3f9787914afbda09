"""Two data-parallel ranks end to end: ``python -m verl_ext.main --cpu trainer.n_gpus_per_node=2``.

Two actor processes (FSDP2 over gloo), each generating its share of the rollouts with the ``hf``
backend from its own copy of the policy. The scenario of ``test_axes_trainer_on_cpu`` (scripted
rewards: easy / hard / coin tasks) with ``allocator=variance`` (unequal rollout counts) and
``rollout_filter=drop_degenerate`` (the filter cuts rows, so the actor batch is padded), under the
``seq-mean-token-mean`` loss (whose divisor padding would dilute) and two update epochs. One run (Ray and two
FSDP ranks cost a minute and a half) with fixed micro-batches of 2 rows per rank (verl then asks for fixed ones in
the log-prob pass too), whose mini-batches must split into whole micro-batches on each rank. The other trainer tests
run dynamic (token-balanced) micro-batches on one rank; ``test_batching_on_cpu`` plans mini-batches at several ranks
without Ray.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from tests.trainer.test_axes_trainer_on_cpu import run, scenario_overrides, write_scenario
from verl_ext.trainer import records

STEPS, EPOCHS, DP, RESPONSE = 2, 2, 2, 32
MICRO_BATCHES = ["actor_rollout_ref.actor.use_dynamic_bsz=False", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
                 "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=False",
                 "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2"]


@pytest.fixture(scope="module")
def dp2_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dp2")
    data = write_scenario(root)
    overrides = scenario_overrides(data, root / "run", STEPS) + [
        f"trainer.n_gpus_per_node={DP}", f"actor_rollout_ref.actor.ppo_epochs={EPOCHS}",
        "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean", "actor_rollout_ref.actor.shuffle=False",
        *MICRO_BATCHES]
    print(f"dp={DP}: {run('verl_ext.main', overrides, root / 'run.log', timeout=900):.1f} s")
    return root


def dumps(root: Path) -> list[dict]:
    out = records.read_dumps(root / "run")
    assert sorted(out) == list(range(1, STEPS + 1))
    return list(out.values())


def step_metrics(root: Path) -> list[dict]:
    return list(records.read_metrics(root / "run").values())


def test_both_ranks_generate_and_train_with_finite_losses(dp2_run):
    root = dp2_run
    metrics = [m for m in step_metrics(root) if "actor/pg_loss" in m]
    assert len(metrics) == STEPS
    for m in metrics:
        assert math.isfinite(m["actor/pg_loss"]) and math.isfinite(m["actor/grad_norm"]), m
        # each rank samples from a full copy of the current policy: behaviour = actor up to numerics
        assert m["training/rollout_probs_diff_max"] < 1e-3, m["training/rollout_probs_diff_max"]
    counts = [d["counts"] for d in dumps(root)]
    assert any(len(set(c)) > 1 for c in counts), counts  # unequal rollout counts reached the trainer


def test_every_kept_rollout_is_trained_once_per_epoch_and_nothing_else(dp2_run):
    root = dp2_run
    cut = False
    for d in dumps(root):
        rollouts, kept = len(d["rollout_task"]), d["kept"]
        cut |= len(kept) < rollouts
        seen = Counter(d["actor_update"]["pos"])
        padding = seen.pop(-1, 0)
        assert seen == {p: EPOCHS for p in kept}, (seen, kept)
        plan = d["actor_mini_batches"]
        assert plan["rows"] == len(kept)
        assert padding == (plan["num"] * plan["size"] - len(kept)) * EPOCHS
        assert plan["size"] % DP == 0
    assert cut, "the filter never cut a row: the padded path was not exercised"


def test_seq_mean_divisor_is_the_real_rows_of_each_mini_batch(dp2_run):
    root = dp2_run
    padded = False
    for d in dumps(root):
        # every response runs to the length cap, so verl's token count of a mini-batch is RESPONSE
        # tokens per real row (padding rows have no response tokens): the real-row count, from verl
        assert set(d["rollout_length"]) == {RESPONSE}, d["rollout_length"]
        upd, size = d["actor_update"], d["actor_mini_batches"]["size"]
        for pos, divisor, tokens in zip(upd["pos"], upd["divisor"], upd["mb_tokens"]):
            if pos >= 0:
                assert divisor == tokens // RESPONSE and tokens % RESPONSE == 0, (pos, divisor, tokens)
                padded |= divisor < size
        real = [div for pos, div in zip(upd["pos"], upd["divisor"]) if pos >= 0]
        assert max(real) - min(real) <= DP, real  # padding spread over the mini-batches, not piled up
    assert padded, "no mini-batch had padding rows: the divisor was never tested"


def test_fixed_micro_batches_divide_each_ranks_share(dp2_run):
    for d in dumps(dp2_run):
        assert (d["actor_mini_batches"]["size"] // DP) % 2 == 0, d["actor_mini_batches"]
