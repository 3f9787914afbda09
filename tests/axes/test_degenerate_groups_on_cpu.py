"""One definition of a degenerate group, all rewards equal (exact min == max, no variance threshold;
verl_ext/axes/views.py): the step's per-task statistics, the progress selectors, the rollout filters, the
trainer's ``data_selection/degenerate_group_rate`` and the evaluation's rate all use it and agree."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval.metrics import degenerate_group_rate
from verl_ext.axes import RolloutView, StepResults, TaskPool, build_filter, build_selector
from verl_ext.axes.views import GroupRewards, rollout_ids


def test_equal_rewards_are_degenerate_however_the_variance_rounds():
    # eight rewards of 0.1: the one-pass variance E[r^2] - E[r]^2 gives 3.5e-18, not 0
    groups = GroupRewards.of([7] * 8 + [3, 3] + [5], [0.1] * 8 + [0.1, 1.0] + [0.0])
    assert groups.ids.tolist() == [3, 5, 7] and groups.degenerate.tolist() == [False, True, True]
    assert groups.low.tolist() == [0.1, 0.0, 0.1] and groups.high.tolist() == [1.0, 0.0, 0.1]
    assert groups.first.tolist() == [8, 10, 0] and groups.inverse.tolist() == [2] * 8 + [0, 0, 1]
    stats = StepResults.from_rewards([1] * 8 + [2] * 8, [0.1] * 8 + [0.1] * 4 + [1.0] * 4).per_task()
    assert stats.degenerate.tolist() == [True, False]
    assert stats.reward_var[0] == 0.0 and stats.reward_var[1] == pytest.approx(np.var([0.1] * 4 + [1.0] * 4))
    with pytest.raises(ValueError, match="one group id per reward"):
        GroupRewards.of([1, 1, 2], [0.5, 0.5])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.sampled_from([(0.1,), (0.0, 1.0), (0.1, 1.0), (0.0, 0.1, 1.0)])),
                min_size=1, max_size=12),
       st.integers(0, 2**16))
def test_every_component_finds_the_same_degenerate_groups(groups, seed):
    """One group per task (sizes 1-6, rewards drawn from a Countdown score set): the degenerate rate, the
    progress selectors' counts, the filters' kept / stored groups are those of GroupRewards.degenerate."""
    from verl_ext.trainer.step_metrics import selection_metrics

    rng = np.random.default_rng(seed)
    task = np.repeat(np.arange(len(groups)), [n for n, _ in groups])
    reward = np.concatenate([rng.choice(values, size=n) for n, values in groups])
    degenerate = GroupRewards.of(task, reward).degenerate
    mixed_rollouts = np.flatnonzero(~degenerate[task])
    rate = float(degenerate.mean())

    results = StepResults.from_rewards(task, reward)
    assert results.per_task().degenerate.tolist() == degenerate.tolist()
    assert degenerate_group_rate(task, reward) == rate
    view = RolloutView(task, task, reward, reward - reward.mean(), np.full(len(task), 5), None, 8,
                       rollout_ids(1, len(task)))
    m = selection_metrics(results, view, np.array([n for n, _ in groups]), np.arange(len(task)), {})
    assert m["data_selection/degenerate_group_rate"] == rate

    pool = TaskPool(np.arange(len(groups)), {"bucket": np.zeros(len(groups))})
    bucket = build_selector({"name": "progress", "cap": None}, pool, 0)
    bucket.update(1, results)
    assert bucket.metrics()["degenerate_rate"] == rate
    prompt = build_selector({"name": "prompt_utility"}, pool, 0)
    prompt.update(1, results)
    assert prompt.degenerate.tolist() == degenerate.tolist() and prompt.metrics()["degenerate_rate"] == rate

    for dropping in ({"name": "drop_degenerate"}, {"name": "dapo_dynamic", "oversample": 1}):
        assert build_filter(dropping, 0).select(1, view).tolist() == mixed_rollouts.tolist()
    fifo = build_filter({"name": "replay_fifo", "capacity": 64}, 0)
    fifo.select(1, view)
    assert sorted(fifo.stored().tolist()) == view.rollout_id[mixed_rollouts].tolist()
