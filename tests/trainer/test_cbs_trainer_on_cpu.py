"""CBS* through the real trainer path (``rollout_filter=cbs_star``): on the scenario of
``test_axes_trainer_on_cpu`` (easy / hard / coin tasks, rewards independent of the text), every step keeps
round(0.3 x 16) = 5 rollouts, the actor trains on exactly those, the scheduler's scalars are logged, and a fresh
filter replayed on the run's recorded rollouts (reward, advantage, group, length, old-log-prob entropy) keeps
exactly what the run kept."""

from __future__ import annotations

import numpy as np
import pytest

from tests.trainer.test_axes_trainer_on_cpu import common_overrides, run, write_scenario
from verl_ext.axes import RolloutView, build_filter
from verl_ext.trainer import records

STEPS, SEED = 3, 1
FILTER = {"name": "cbs_star", "keep_fraction": 0.3, "warmup": 1, "epsilon0": 0.5, "epsilon_decay": 0.1, "lr": 1e-2}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cbs_star")
    data = write_scenario(root)
    overrides = common_overrides(data, root / "run", STEPS, tasks=4, n=4, mini=2) + [
        f"+reward.custom_reward_function.reward_kwargs.counter_file={root}/run/coin_counts.json",
        "actor_rollout_ref.actor.entropy_coeff=0", f"data.seed={SEED}",
        "selector=sequential", "selector.sort_by=[rank]", "selector.descending=false",
        *(f"rollout_filter.{k}={v}" if k != "name" else f"rollout_filter={v}" for k, v in FILTER.items()),
    ]
    run("verl_ext.main", overrides, root / "run.log")
    return root / "run"


def test_cbs_star_kept_the_fraction_and_the_actor_trained_on_them(run_dir):
    dumps = records.read_dumps(run_dir)
    assert sorted(dumps) == list(range(1, STEPS + 1))
    for d in dumps.values():
        assert len(d["rollout_reward"]) == 16 and len(d["kept"]) == 5 == len(set(d["kept"]))
        assert len(d["rollout_entropy"]) == 16 and all(e > 0 for e in d["rollout_entropy"])
        assert d["actor_update_rows"] >= 5 and sorted(p for p in d["actor_update"]["pos"] if p >= 0) == d["kept"]
    metrics = records.read_metrics(run_dir)
    assert [metrics[s]["data_selection/rollout_filter/chosen"] for s in sorted(metrics)] == [5.0] * STEPS
    assert metrics[1]["data_selection/rollout_filter/epsilon"] == 0.5
    assert "data_selection/rollout_filter/squashed_reward" in metrics[2]
    assert metrics[1]["data_selection/filter_kept_fraction"] == pytest.approx(5 / 16)


def test_a_replayed_filter_keeps_what_the_run_kept(run_dir):
    replay = build_filter(FILTER, SEED)
    for step, d in sorted(records.read_dumps(run_dir).items()):
        view = RolloutView(np.array(d["rollout_task"]), np.array(d["rollout_group"]), np.array(d["rollout_reward"]),
                           np.array(d["rollout_advantage"]), np.array(d["rollout_length"]),
                           np.array(d["rollout_entropy"]), d["max_response_length"])
        assert replay.select(step, view).tolist() == d["kept"], f"step {step}"
