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


def pairs(groups: list[list[int]]) -> list[list[int]]:
    """The rollout ids of every 2 of ``groups`` (a draw of 2 whole groups), sorted."""
    return [sorted(a + b) for i, a in enumerate(groups) for b in groups[i + 1:]]


def test_the_first_round_trim_keeps_capacity_minus_sigma_b_of_step_1s_groups():
    """The recipe's buffer (capacity = buffer_size = B = 128, σ 0.5: fresh_groups σB = 64, first round of 2 steps)
    by the authors' rule, trim to buffer_size - int(σB) = 64 in every step (ray_trainer.py:118, called at :992 in
    epoch 0). Hand-computed with every group mixed: step 1 stores its 128 groups; step 2 (128 fresh, no draw) keeps
    the newest 64 of them (tasks 64-127; the old rule capacity - fresh = 0 kept none), then stores its 128: 192;
    step 3 (64 fresh) draws 64 of those 192, trims them to the newest 64 (step 2's last 64), stores its 64: 128."""
    cfg = {"name": "replay_fifo", "capacity": 128, "fraction": 0.5, "fresh_groups": 64, "first_round_steps": 2}
    f = build_filter(cfg, 0)
    f.select(1, view(1, list(range(128)), [1, 0] * 128))
    f.select(2, view(2, list(range(128, 256)), [1, 0] * 128))
    survivors = [i for g in range(64, 128) for i in group(1, g)]
    step2 = [i for g in range(128) for i in group(2, g)]
    assert len(f.replay()) == 0 and f.metrics()["trimmed_groups"] == 64.0
    assert f.stored().tolist() == survivors + step2 and f.metrics()["buffer_groups"] == 192.0

    f.select(3, view(3, list(range(256, 320)), [1, 0] * 64))
    replayed = f.replay()
    assert len(replayed) == 128 and set(replayed.tolist()) <= set(survivors + step2)
    assert f.metrics()["trimmed_groups"] == 128.0
    assert f.stored().tolist() == step2[128:] + [i for g in range(64) for i in group(3, g)]


def test_authors_rounds_no_first_round_replay_then_draw_trim_store():
    """capacity (buffer_size) 4, fraction 0.5 (σ 0.5), fresh_groups 2 (σB of B = 4): every trim keeps the newest
    4 - 2 = 2 older groups; a first round of 2 steps of B = 4 fresh groups, σB = 2 after. Hand-computed:
    step 1 [first round] stores 1, 3, 4 (2 all right);
    step 2 [first round] replays nothing, trims [1, 3, 4] to [3, 4] (the old rule 4 - 4: none), stores 5, 6 (7 and
    task 1's new group all wrong) -> [3, 4, 5, 6];
    step 3 draws 2 of [3, 4, 5, 6], trims to [5, 6], stores 8 (9 all right) -> [5, 6, 8];
    step 4 draws 2 of [5, 6, 8], trims to [6, 8], stores 10 and task 6's new group in place of its older one."""
    cfg = {"name": "replay_fifo", "capacity": 4, "fraction": 0.5, "fresh_groups": 2, "first_round_steps": 2}
    f = build_filter(cfg, 0)
    assert f.select(1, view(1, [1, 2, 3, 4], [1, 0, 1, 1, 0, 1, 1, 0])).tolist() == list(range(8))
    assert len(f.replay()) == 0 and f.stored().tolist() == group(1, 0) + group(1, 2) + group(1, 3)

    f.select(2, view(2, [5, 6, 7, 1], [1, 0, 0, 1, 0, 0, 0, 0]))
    assert len(f.replay()) == 0 and f.metrics()["first_round"] == 1.0
    assert f.metrics()["trimmed_groups"] == 1.0
    assert f.stored().tolist() == group(1, 2) + group(1, 3) + group(2, 0) + group(2, 1)

    resumed = build_filter(cfg, 0)
    resumed.load_state_dict(f.state_dict())
    for g in (f, resumed):
        g.select(3, view(3, [8, 9], [0, 1, 1, 1]))
        assert g.replay().tolist() in pairs([group(1, 2), group(1, 3), group(2, 0), group(2, 1)])
        assert g.stored().tolist() == group(2, 0) + group(2, 1) + group(3, 0)
        assert g.metrics()["first_round"] == 0.0 and g.metrics()["trimmed_groups"] == 2.0
    assert f.replay().tolist() == resumed.replay().tolist()

    f.select(4, view(4, [10, 6], [1, 0, 0, 1]))
    assert f.replay().tolist() in pairs([group(2, 0), group(2, 1), group(3, 0)])
    assert f.metrics()["trimmed_groups"] == 1.0
    assert f.stored().tolist() == group(3, 0) + group(4, 0) + group(4, 1)


def test_trim_empties_the_older_buffer_when_the_fresh_groups_fill_the_capacity():
    """buffer_size - σB = 0: the authors' ``buffer = None`` (only the step's groups stay); draws use floor."""
    f = build_filter({"name": "replay_fifo", "capacity": 3, "fraction": 0.25, "fresh_groups": 3,
                      "first_round_steps": 0}, 0)
    f.select(1, view(1, [1, 2], [1, 0, 0, 1]))
    f.select(2, view(2, [3, 4, 5], [1, 0, 1, 0, 0, 1]))
    assert len(f.replay()) == 2  # floor(1/3 x 3) = 1 group of 2 rollouts
    assert f.stored().tolist() == group(2, 0) + group(2, 1) + group(2, 2)


def test_equal_non_binary_rewards_are_degenerate_and_not_stored():
    """The authors keep a group of equal rewards 0.5 (mean not 0 or 1); here it is degenerate (GroupRewards)."""
    f = build_filter({"name": "replay_fifo", "capacity": 8, "fresh_groups": 3, "first_round_steps": 0}, 0)
    f.select(1, view(1, [1, 2, 3], [0.5, 0.5, 1, 0, 0.1, 1]))
    assert f.stored().tolist() == group(1, 1) + group(1, 2)
    with pytest.raises(ValueError, match="first_round_steps"):
        build_filter({"name": "replay_fifo", "first_round_steps": -1}, 0)
    for sigma_b in (0, 9):  # σB in [1, capacity]: none fresh, or a negative trim budget
        with pytest.raises(ValueError, match="fresh_groups"):
            build_filter({"name": "replay_fifo", "capacity": 8, "fresh_groups": sigma_b}, 0)
