"""CBS* composed with every other axis through the real trainer: a selector (sequential, in rank order), an
allocator (``variance``: in proportion to p(1 - p) + 0.05 of each task's last observed pass rate p, an unseen task
at p = 0.5, within [2, 8]), DAPO's dynamic sampling (a prefilter, 2x oversampling) and
``cbs_star`` under the GSPO loss, on eight tasks of the kinds of ``tests.trainer.scenario`` (easy / hard / coin,
rewards independent of the text), 4 per step. Each step CBS* keeps round(0.3 x) of the rollouts dynamic sampling kept,
the actor trains on exactly those with GSPO's sequence-level ratio and clipping, the scheduler's scalars are logged,
and a fresh filter chain replayed on the run's recorded rollouts (reward, advantage, group, length, old-log-prob
entropy) keeps exactly what the run kept, the allocator's counts are the ones its rule gives on the run's rewards,
and a checkpoint holds the selector's cursor and the allocator's pass rates (the filter's buffer: the CBS replay
test's resume).

Step 2 serves only solved and unsolvable tasks (every group degenerate), so the filters keep nothing: the step logs
``data_selection/actor_update_skipped = 1``, trains on no row and leaves the weights exactly as step 1 saved them
(a checkpoint every step); step 1 trained."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tests.trainer.scenario import axis_overrides, common_overrides, hf_weights, model_path, run, write_scenario
from verl_ext.axes import RolloutView, build_filter
from verl_ext.trainer import records

pytestmark = [pytest.mark.e2e, pytest.mark.beside]  # a training run, in make test's second lane

STEPS, SEED = 3, 1
FILTER = {"name": "cbs_star", "keep_fraction": 0.3, "warmup": 1, "epsilon0": 0.5, "epsilon_decay": 0.1, "lr": 1e-2,
          "entropy_threshold": 0.5, "epsilon_min": 0.005}
PREFILTERS = [{"name": "dapo_dynamic", "oversample": 2}]
# the sequential selector serves ranks 0-3 (two coins), then 4-7 (all degenerate), then 0-3 again
INDEX, KIND, RANK = list(range(400, 408)), ["coin", "easy", "coin", "hard", "easy", "hard", "easy", "hard"], range(8)
SKIPPED = 2
ALLOCATOR = {"name": "variance", "min_n": 2, "max_n": 8}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cbs_star")
    data = write_scenario(root, INDEX, KIND, RANK)
    overrides = common_overrides(data, root / "run", STEPS, tasks=4, n=4, mini=2) + [
        f"+reward.custom_reward_function.reward_kwargs.counter_file={root}/run/coin_counts.json",
        "+objective=gspo", "actor_rollout_ref.actor.entropy_coeff=0", f"data.seed={SEED}", "trainer.save_freq=1",
        "data_selection.prefilters=[{name:dapo_dynamic,oversample:2}]",
        "selector=sequential", "selector.sort_by=[rank]", "selector.descending=false",
        *axis_overrides("allocator", ALLOCATOR),
        *axis_overrides("rollout_filter", FILTER),
    ]
    run("verl_ext.main", overrides, root / "run.log")
    return root / "run"


def test_cbs_star_kept_its_fraction_of_what_dynamic_sampling_kept(run_dir):
    dumps = records.read_dumps(run_dir)
    metrics = records.read_metrics(run_dir)
    assert sorted(dumps) == sorted(metrics) == list(range(1, STEPS + 1))
    assert [d["tasks"] for d in dumps.values()] == [[400, 401, 402, 403], [404, 405, 406, 407], [400, 401, 402, 403]]
    trained = 0
    for step, d in dumps.items():
        m = metrics[step]
        assert len(d["rollout_reward"]) == 16 and all(e > 0 for e in d["rollout_entropy"])
        informative = m["data_selection/rollout_filter/dapo_dynamic/kept_groups"]
        assert informative == (0 if step == SKIPPED else 2)  # two coins, ceil(4 groups / 2) at most
        groups = np.array(d["rollout_group"])
        after_dapo = int(m["data_selection/rollout_filter/dapo_dynamic/kept"])
        assert m["data_selection/actor_update_skipped"] == float(step == SKIPPED)
        if step == SKIPPED:
            assert after_dapo == 0 and d["kept"] == [] and d["actor_update_rows"] == 0
            assert m["data_selection/filter_kept_fraction"] == 0.0
            continue
        assert len(d["kept"]) == max(1, round(0.3 * after_dapo)) == m["data_selection/rollout_filter/chosen"]
        for g in set(groups[d["kept"]].tolist()):  # kept rollouts come from informative groups only
            assert len(set(np.array(d["rollout_reward"])[groups == g].tolist())) > 1
        assert sorted(p for p in d["actor_update"]["pos"] if p >= 0) == d["kept"]
        trained += 1
    assert trained == STEPS - 1
    # the scheduler's round reward for a pick arrives with the next step's rollouts: step 1's at step 2; step 2
    # picked nothing, so step 3 regresses on nothing
    reward = "data_selection/rollout_filter/squashed_reward"
    assert [reward in metrics[s] for s in range(1, STEPS + 1)] == [False, True, False]


def test_the_variance_allocator_shares_the_budget_by_what_it_saw(run_dir):
    dumps = records.read_dumps(run_dir)
    # nothing known at steps 1 and 2 (new tasks): 4 each; step 3 serves step 1's tasks again, coins at p = 0.5
    # (weight 0.3), the easy and hard ones at p = 1 and 0 (weight 0.05): 2 each, the spare 8 by weight (3.43, 0.57,
    # 3.43, 0.57 -> 3, 0, 3, 0 and the remaining 2 to the coins' larger remainders)
    assert [d["counts"] for d in dumps.values()] == [[4, 4, 4, 4], [4, 4, 4, 4], [6, 2, 6, 2]]
    for step, d in dumps.items():
        tasks = np.array(d["rollout_task"])
        assert {t: int((tasks == t).sum()) for t in d["tasks"]} == dict(zip(d["tasks"], d["counts"])), step


def test_each_step_logs_what_it_served_and_kept(run_dir):
    dumps, metrics = records.read_dumps(run_dir), records.read_metrics(run_dir)
    for step, d in dumps.items():
        m = metrics[step]
        assert all(f"timing_s/{t}" in m for t in ("selector", "allocator", "rollout_filter", "step")), step
        counts, reward, tasks = np.array(d["counts"]), np.array(d["rollout_reward"]), np.array(d["rollout_task"])
        assert [m[f"data_selection/rollouts_per_task/{k}"] for k in ("min", "mean", "max", "std")] == pytest.approx(
            [counts.min(), counts.mean(), counts.max(), counts.std()]), step
        pass_rate = np.array([reward[tasks == t].mean() for t in d["tasks"]])  # rewards are 0 or 1 here
        mixed = float(np.mean((pass_rate > 0) & (pass_rate < 1)))
        assert m["data_selection/effective_task_ratio"] == pytest.approx(mixed), step
        assert m["data_selection/degenerate_group_rate"] == pytest.approx(1 - mixed), step  # one group a task
        assert m["data_selection/filter_kept_fraction"] == pytest.approx(len(d["kept"]) / len(reward)), step
        # the update's per-row record: one clip fraction and entropy per kept row, the plan over the kept rows
        assert len(d["clipfrac"]) == len(d["kept"]) == len(d["entropy"]), step
        assert all(0.0 <= c <= 1.0 for c in d["clipfrac"]) and all(e > 0 for e in d["entropy"]), step
        assert (d["actor_mini_batches"] or {}).get("rows", 0) == len(d["kept"]), step  # none when skipped
        group, advantage = np.array(d["rollout_group"]), np.array(d["rollout_advantage"])
        for g in np.unique(group):  # GRPO normalises within each prompt's actual group, whatever its size
            r = reward[group == g]
            assert advantage[group == g] == pytest.approx((r - r.mean()) / (r.std(ddof=1) + 1e-6), abs=1e-5)


def test_a_checkpoint_holds_the_selector_and_allocator_state(run_dir):
    dumps = records.read_dumps(run_dir)
    state = records.load_state(run_dir / "global_step_1")["axes"]
    assert state["selector"] == {"cursor": 4}  # 4 tasks served from a cycle of 8
    reward, tasks = np.array(dumps[1]["rollout_reward"]), np.array(dumps[1]["rollout_task"])
    observed = {t: float(reward[tasks == t].mean()) for t in dumps[1]["tasks"]}  # coins 0.5, easy 1, hard 0
    assert state["allocator"]["last_pass_rate"] == pytest.approx(observed) and len(set(observed.values())) == 3
    assert set(state) == {"selector", "allocator", "rollout_filter"}


def test_a_step_whose_filters_keep_nothing_skips_the_update(run_dir):
    before = hf_weights(run_dir / f"global_step_{SKIPPED - 1}" / "actor" / "huggingface")
    after = hf_weights(run_dir / f"global_step_{SKIPPED}" / "actor" / "huggingface")
    assert before.keys() == after.keys() and all((before[k] == after[k]).all() for k in before)
    initial = hf_weights(Path(model_path()))  # the step before did train
    assert any(not (initial[k] == before[k]).all() for k in before if k in initial)


def test_the_update_used_gspo_sequence_ratios(run_dir):
    rows = 0
    for step, d in records.read_dumps(run_dir).items():
        u = d["actor_update"]
        if step == SKIPPED:  # no update: nothing recorded
            assert u == {}
            continue
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
