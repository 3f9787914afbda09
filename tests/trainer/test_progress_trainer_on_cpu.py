"""Prompt-level progress sampling (``selector=prompt_utility``, SPEC.md §5) under the RLOO objective
(``+objective=rloo``) through the real trainer: 8 scenario tasks whose scripted reward also reports the verifier's
format flags (``format_valid`` in the reward's extra info, as the Countdown verifier's diagnostics do). The flags
reach the selector with every rollout (step dumps), a fresh selector replayed on the run's recorded rewards and
flags chooses exactly what the run chose, and the advantages are leave-one-out."""

from __future__ import annotations

import numpy as np
import pytest

from tests.trainer.test_axes_trainer_on_cpu import REWARD as SCENARIO_REWARD, common_overrides, run
from verl_ext.axes import StepResults, TaskPool, build_selector
from verl_ext.trainer import records

STEPS, SEED, N, TASKS = 3, 4, 4, 4
KINDS = ["easy", "coin", "hard", "coin", "easy", "hard", "coin", "easy"]
SELECTOR = {"name": "prompt_utility"}
REWARD = SCENARIO_REWARD + '''
_scenario_score = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, counter_file=None, **kwargs):
    """The scenario's (easy right, hard wrong, coin alternating), with format flags: a wrong coin attempt is
    malformed (0.1), a hard one has no answer (0.0); only right answers are well formed."""
    out = _scenario_score(data_source, solution_str, ground_truth, extra_info, counter_file)
    right = out["score"] == 1.0
    score = 0.1 if extra_info["kind"] == "coin" and not right else out["score"]
    return {"score": score, "acc": out["acc"], "format_valid": int(right)}
'''


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from data_prep.schema import make_row, write_rows

    root = tmp_path_factory.mktemp("progress")
    rows = [make_row(data_source="scenario", question=f"Say the number {i}.", ability="test", ground_truth=str(i),
                     index=400 + i, split="train", kind=kind) for i, kind in enumerate(KINDS)]
    write_rows(rows, root / "train.parquet")
    write_rows(rows[:2], root / "test.parquet")
    (root / "reward.py").write_text(REWARD)
    data = {"train": str(root / "train.parquet"), "test": str(root / "test.parquet"), "reward": str(root / "reward.py")}
    overrides = common_overrides(data, root / "run", STEPS, tasks=TASKS, n=N, mini=TASKS) + [
        f"+reward.custom_reward_function.reward_kwargs.counter_file={root}/run/coin_counts.json",
        f"data.seed={SEED}", "+objective=rloo", "selector=prompt_utility"]
    run("verl_ext.main", overrides, root / "run.log")
    return root / "run"


def test_the_format_flags_reach_the_selector_with_every_rollout(run_dir):
    kind = {400 + i: k for i, k in enumerate(KINDS)}
    for step, d in records.read_dumps(run_dir).items():
        flags, rewards = d["rollout_format_valid"], d["rollout_reward"]
        assert flags is not None and len(flags) == len(rewards) == N * TASKS
        for task, flag, reward in zip(d["rollout_task"], flags, rewards):
            assert flag == (reward == 1.0), (step, task)
            if kind[task] == "coin":  # malformed attempts score 0.1 (float32 in verl's batch)
                assert reward == 1.0 or reward == pytest.approx(0.1), (step, task)


def test_a_replayed_selector_chooses_what_the_run_chose(run_dir):
    from eval.run_logs import Run

    selector = build_selector(SELECTOR, TaskPool(np.arange(400, 400 + len(KINDS)), {}), SEED)
    metrics = Run("progress", run_dir).metrics
    for step, d in sorted(records.read_dumps(run_dir).items()):
        assert selector.select(step, TASKS).tolist() == d["tasks"], step
        r = StepResults.from_rewards(d["rollout_task"], d["rollout_reward"])
        selector.update(step, StepResults(r.task_index, r.reward, r.success, np.array(d["rollout_format_valid"])))
        assert metrics[step]["data_selection/selector/format_valid_rate"] == pytest.approx(
            np.mean(d["rollout_format_valid"]))
    assert selector.valid.sum() < selector.rollouts.sum()  # the flags, not the scores (0.1 > 0), were used


def test_rloo_advantages_are_leave_one_out_and_the_update_uses_the_capped_reinforce_loss(run_dir):
    from eval.run_logs import Run

    for step, d in records.read_dumps(run_dir).items():
        rewards, tasks = np.array(d["rollout_reward"]), np.array(d["rollout_task"])
        for t in np.unique(tasks):
            r = rewards[tasks == t]
            want = r - (r.sum() - r) / (len(r) - 1)
            np.testing.assert_allclose(np.array(d["rollout_advantage"])[tasks == t], want, atol=1e-5)
    # bypass mode's REINFORCE loss ran: its sequence-level weights pi_theta / pi_rollout, capped at 2, are logged
    metrics = Run("progress", run_dir).metrics
    for step in metrics:
        m = metrics[step]
        assert 0 < m["actor/rollout_corr/rollout_is_seq_min"] <= m["actor/rollout_corr/rollout_is_seq_max"] <= 2.0
        assert m["actor/rollout_corr/rollout_is_mean"] == pytest.approx(1.0, abs=0.05)  # one update per step
