"""CBS* composed with every other axis through the real trainer: a selector (BOTS without reference pass rates),
an allocator (CoBA, unequal counts), DAPO's dynamic sampling (a prefilter, 2x oversampling) and ``cbs_star``
under the GSPO loss, on the scenario of ``tests.trainer.scenario`` (easy / hard / coin tasks, rewards independent
of the text). Each step CBS* keeps round(0.3 x) of the rollouts dynamic sampling kept, the actor trains on exactly
those with GSPO's sequence-level ratio and clipping, the scheduler's scalars are logged, and a fresh filter chain
replayed on the run's recorded rollouts (reward, advantage, group, length, old-log-prob entropy) keeps exactly
what the run kept."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.trainer.scenario import common_overrides, run, write_scenario
from verl_ext.axes import RolloutView, build_filter
from verl_ext.trainer import records

pytestmark = [pytest.mark.e2e, pytest.mark.beside]  # a training run, in make test's second lane

STEPS, SEED = 3, 1
FILTER = {"name": "cbs_star", "keep_fraction": 0.3, "warmup": 1, "epsilon0": 0.5, "epsilon_decay": 0.1, "lr": 1e-2,
          "entropy_threshold": 0.5, "epsilon_min": 0.005}
PREFILTERS = [{"name": "dapo_dynamic", "oversample": 2}]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cbs_star")
    data = write_scenario(root)
    overrides = common_overrides(data, root / "run", STEPS, tasks=4, n=4, mini=2) + [
        f"+reward.custom_reward_function.reward_kwargs.counter_file={root}/run/coin_counts.json",
        "+objective=gspo", "actor_rollout_ref.actor.entropy_coeff=0", f"data.seed={SEED}",
        "data_selection.prefilters=[{name:dapo_dynamic,oversample:2}]",
        "selector=bots", "selector.implicit_weight=0", "allocator=coba", "allocator.min_n=2", "allocator.max_n=8",
        *(f"rollout_filter.{k}={v}" if k != "name" else f"rollout_filter={v}" for k, v in FILTER.items()),
    ]
    run("verl_ext.main", overrides, root / "run.log")
    return root / "run"


def test_cbs_star_kept_its_fraction_of_what_dynamic_sampling_kept(run_dir):
    dumps = records.read_dumps(run_dir)
    metrics = records.read_metrics(run_dir)
    assert sorted(dumps) == sorted(metrics) == list(range(1, STEPS + 1))
    assert any(len(set(d["counts"])) > 1 for d in dumps.values())  # the allocator's unequal budgets
    trained = 0
    for step, d in dumps.items():
        m = metrics[step]
        assert len(d["rollout_reward"]) == 16 and all(e > 0 for e in d["rollout_entropy"])
        informative = m["data_selection/rollout_filter/dapo_dynamic/kept_groups"]
        assert informative <= 2  # ceil(4 groups / 2)
        groups = np.array(d["rollout_group"])
        after_dapo = int(m["data_selection/rollout_filter/dapo_dynamic/kept"])
        if after_dapo == 0:
            assert d["kept"] == [] and m["data_selection/actor_update_skipped"] == 1.0
            continue
        assert len(d["kept"]) == max(1, round(0.3 * after_dapo)) == m["data_selection/rollout_filter/chosen"]
        for g in set(groups[d["kept"]].tolist()):  # kept rollouts come from informative groups only
            assert len(set(np.array(d["rollout_reward"])[groups == g].tolist())) > 1
        assert sorted(p for p in d["actor_update"]["pos"] if p >= 0) == d["kept"]
        trained += 1
    assert trained and "data_selection/rollout_filter/squashed_reward" in metrics[STEPS]


def test_the_update_used_gspo_sequence_ratios(run_dir):
    rows = 0
    for d in records.read_dumps(run_dir).values():
        u = d["actor_update"]
        for pos, lp, old, ratio, clip in zip(u["pos"], u["log_prob"], u["old_log_prob"], u["ratio"], u["clipfrac"]):
            if pos < 0:
                continue
            assert ratio == pytest.approx(math.exp(lp - old), rel=1e-4)  # sequence-level: exp(mean log-ratio)
            assert clip in (0.0, 1.0)  # one ratio per sequence: all of its tokens clipped or none
            rows += 1
    assert rows


def test_a_replayed_filter_chain_keeps_what_the_run_kept(run_dir):
    replay = build_filter(FILTER, SEED, PREFILTERS)
    for step, d in sorted(records.read_dumps(run_dir).items()):
        view = RolloutView(np.array(d["rollout_task"]), np.array(d["rollout_group"]), np.array(d["rollout_reward"]),
                           np.array(d["rollout_advantage"]), np.array(d["rollout_length"]),
                           np.array(d["rollout_entropy"]), d["max_response_length"], np.array(d["rollout_id"]))
        assert replay.filter_step(step, view).tolist() == d["kept"], f"step {step}"
