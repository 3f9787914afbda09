"""End to end through the real trainer path: ``python -m verl_ext.main --cpu`` (verl 0.9.1 v1 trainer,
Ray, TransferQueue, FSDP2 on CPU) with non-default components on every axis.

On the scenario of :mod:`tests.trainer.scenario` (easy / hard / coin tasks): ``selector=sequential selector.sort_by=[rank]
selector.descending=false`` serves the tasks in the order ``ORDER``; ``allocator=variance`` gives
unseen tasks (p = 0.5) more rollouts than solved ones; ``rollout_filter=drop_degenerate`` drops the
easy and hard groups.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.trainer.scenario import BUDGET, KIND_OF, ORDER, STEPS, TASKS_PER_STEP, hf_weights, model_path, scenario_run
from verl_ext.trainer import records

pytestmark = [pytest.mark.e2e, pytest.mark.beside]  # a training run, in make test's second lane


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return scenario_run(tmp_path_factory)[1]


def test_selector_allocator_and_filter_saw_real_rollouts(run_dir):
    dumps = records.read_dumps(run_dir)
    assert sorted(dumps) == [1, 2, 3]
    first, second = dumps[1], dumps[2]
    # sequential selector in sort_by=[rank] ascending order, stable indices (not positions)
    assert first["tasks"] == ORDER[:4] and second["tasks"] == ORDER[4:] + ORDER[:2]
    # variance allocator: equal while nothing is known, then unequal, always summing to the budget
    assert first["counts"] == [4, 4, 4, 4]
    assert sum(second["counts"]) == BUDGET and len(set(second["counts"])) > 1
    assert second["counts"] == [5, 5, 2, 4]  # 105 (easy, solved at step 1) gets min_n
    assert dumps[3]["tasks"] == ORDER[2:] and dumps[3]["counts"] == [2, 6, 6, 2]
    # mini-batches of at most ppo_mini_batch_size * n = 8 rollouts: 8 kept -> one of 8; 9 kept -> two of 5 (one
    # padding row); 12 kept -> two of 6
    assert first["actor_mini_batches"] == {"rows": 8, "num": 1, "size": 8}
    assert second["actor_mini_batches"] == {"rows": 9, "num": 2, "size": 5}
    assert dumps[3]["actor_mini_batches"] == {"rows": 12, "num": 2, "size": 6}
    assert [d["actor_update_rows"] for d in dumps.values()] == [8, 10, 12]
    for dump in dumps.values():
        rollout_task = np.array(dump["rollout_task"])
        assert len(rollout_task) == BUDGET
        assert {t: int((rollout_task == t).sum()) for t in dump["tasks"]} == dict(zip(dump["tasks"], dump["counts"]))
        kept_tasks = set(rollout_task[dump["kept"]].tolist())
        assert kept_tasks == {t for t in dump["tasks"] if KIND_OF[t] == "coin"}  # easy/hard groups dropped
        reward = np.array(dump["rollout_reward"])
        for t in dump["tasks"]:
            expected = {"easy": {1.0}, "hard": {0.0}, "coin": {0.0, 1.0}}[KIND_OF[t]]
            assert set(reward[rollout_task == t].tolist()) == expected
        # GRPO normalises within each prompt's actual group (uid), whatever its size
        group, advantage = np.array(dump["rollout_group"]), np.array(dump["rollout_advantage"])
        for g in np.unique(group):
            r = reward[group == g]
            assert advantage[group == g] == pytest.approx((r - r.mean()) / (r.std(ddof=1) + 1e-6), abs=1e-5)
        assert len(dump["clipfrac"]) == len(dump["kept"]) == len(dump["entropy"])
        assert all(0.0 <= c <= 1.0 for c in dump["clipfrac"]) and all(e > 0 for e in dump["entropy"])


def test_metrics_logged_every_step(run_dir):
    metrics = records.read_metrics(run_dir)
    assert sorted(metrics) == [1, 2, 3]
    for step, m in metrics.items():
        for key in ("timing_s/selector", "timing_s/allocator", "timing_s/rollout_filter", "timing_s/step",
                    "actor/pg_loss", "critic/score/mean", "data_selection/effective_task_ratio",
                    "data_selection/degenerate_group_rate", "data_selection/selected_pass_rate_mean",
                    "data_selection/rollouts_per_task/min", "data_selection/rollouts_per_task/mean",
                    "data_selection/rollouts_per_task/max", "data_selection/rollouts_per_task/std",
                    "data_selection/filter_kept_fraction"):
            assert key in m, (step, key)
        assert m["data_selection/rollouts_per_task/mean"] == BUDGET / TASKS_PER_STEP
    one, two = metrics[1], metrics[2]
    # step 1: tasks easy, coin, coin, hard -> kept 8 of 16; step 2: coin, easy, easy, coin -> 9 of 16
    assert one["data_selection/filter_kept_fraction"] == 0.5
    assert two["data_selection/filter_kept_fraction"] == 9 / 16
    assert one["data_selection/effective_task_ratio"] == 0.5 == one["data_selection/degenerate_group_rate"]
    assert two["data_selection/rollouts_per_task/min"] == 2 and two["data_selection/rollouts_per_task/max"] == 5


def test_checkpoint_holds_component_state_and_trained_weights(run_dir):
    step_dir = run_dir / "global_step_2"
    state = records.load_state(step_dir)["axes"]
    assert state["selector"] == {"cursor": 2}  # 8 tasks served from a cycle of 6
    assert state["allocator"]["last_pass_rate"] == {105: 1.0, 104: 0.5, 103: 0.0, 102: 0.5, 101: 0.6, 100: 1.0}
    before = hf_weights(Path(model_path()))
    after = hf_weights(run_dir / f"global_step_{STEPS}" / "actor" / "huggingface")
    shared = sorted(set(before) & set(after))
    assert shared
    assert any(not torch.equal(before[k].float(), after[k].float()) for k in shared)
