"""DOTS+RR's group replay buffer against hand-computed rounds of the authors' rule
(ASTRAL-Group/data-efficient-llm-rl, rl_training/verl/verl/trainer/ppo/ray_trainer.py, select_buffer)."""

import numpy as np
import pytest

from verl_ext.axes import RolloutView, build_filter
from verl_ext.axes.views import rollout_ids


def view(step: int, tasks: list[int], rewards: list[float]) -> RolloutView:
    """One group of two rollouts per task, in task order."""
    reward = np.array(rewards, dtype=float)
    return RolloutView(np.repeat(tasks, 2), np.repeat(np.arange(len(tasks)), 2), reward, reward - 0.5,
                       np.full(len(reward), 5), None, 8, rollout_ids(step, len(reward)))


def group(step: int, g: int) -> list[int]:
    """Rollout ids of the g-th group of a step."""
    return rollout_ids(step, 2 * g + 2)[2 * g:].tolist()


def test_authors_rounds_no_first_round_replay_then_draw_trim_store():
    """capacity (buffer_size) 4, fraction 0.5 (σ 0.5), first round of 2 steps. Hand-computed:
    step 1 [first round] stores 1, 3 (2 all right);  step 2 [first round] replays nothing (the old rule: 2 groups),
    trims the older {1, 3} to 4 - 3 = 1 -> {3}, stores 4, 5 (1 all wrong) -> [3, 4, 5];
    step 3 draws 3 of [3, 4, 5] (all), trims to 4 - 3 = 1 -> [5], stores 6 -> [5, 6] (the old rule: [3, 4, 5, 6]);
    step 4 draws 2 of [5, 6] (step 3's 6), trims to 4 - 2 = 2 (nothing), stores 9 and task 6's new group."""
    f = build_filter({"name": "replay_fifo", "capacity": 4, "fraction": 0.5, "first_round_steps": 2}, 0)
    assert f.select(1, view(1, [1, 2, 3], [1, 0, 1, 1, 0, 1])).tolist() == list(range(6))
    assert len(f.replay()) == 0 and sorted(f.stored().tolist()) == sorted(group(1, 0) + group(1, 2))

    f.select(2, view(2, [4, 5, 1], [1, 0, 0, 1, 0, 0]))
    assert len(f.replay()) == 0 and f.metrics()["first_round"] == 1.0
    assert f.metrics()["trimmed_groups"] == 1.0
    assert f.stored().tolist() == group(1, 2) + group(2, 0) + group(2, 1)

    resumed = build_filter({"name": "replay_fifo", "capacity": 4, "fraction": 0.5, "first_round_steps": 2}, 0)
    resumed.load_state_dict(f.state_dict())
    for g in (f, resumed):
        g.select(3, view(3, [6, 7, 8], [0, 1, 1, 1, 0, 0]))
        assert g.replay().tolist() == sorted(group(1, 2) + group(2, 0) + group(2, 1))
        assert g.stored().tolist() == group(2, 1) + group(3, 0)
        assert g.metrics()["first_round"] == 0.0 and g.metrics()["trimmed_groups"] == 2.0

    f.select(4, view(4, [9, 6], [1, 0, 0, 1]))
    assert f.replay().tolist() == sorted(group(2, 1) + group(3, 0))  # task 6's step-3 group, then replaced
    assert f.stored().tolist() == group(2, 1) + group(4, 0) + group(4, 1)


def test_trim_empties_the_older_buffer_when_the_fresh_groups_fill_the_capacity():
    """buffer_size - σB <= 0: the authors' ``buffer = None`` (only the step's groups stay); draws use floor."""
    f = build_filter({"name": "replay_fifo", "capacity": 3, "fraction": 0.25, "first_round_steps": 0}, 0)
    f.select(1, view(1, [1, 2], [1, 0, 0, 1]))
    f.select(2, view(2, [3, 4, 5], [1, 0, 1, 0, 0, 1]))
    assert len(f.replay()) == 2  # floor(1/3 x 3) = 1 group of 2 rollouts
    assert f.stored().tolist() == group(2, 0) + group(2, 1) + group(2, 2)


def test_equal_non_binary_rewards_are_degenerate_and_not_stored():
    """The authors keep a group of equal rewards 0.5 (mean not 0 or 1); here it is degenerate (GroupRewards)."""
    f = build_filter({"name": "replay_fifo", "capacity": 8, "first_round_steps": 0}, 0)
    f.select(1, view(1, [1, 2, 3], [0.5, 0.5, 1, 0, 0.1, 1]))
    assert f.stored().tolist() == group(1, 1) + group(1, 2)
    with pytest.raises(ValueError, match="first_round_steps"):
        build_filter({"name": "replay_fifo", "first_round_steps": -1}, 0)
