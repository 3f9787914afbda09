"""The three axes' default and simple components: verl-exact uniform order, budgets, filters, state."""

import copy
import pickle

import numpy as np
import pytest

from verl_ext.axes import (
    RolloutView,
    StepResults,
    TaskPool,
    build_allocator,
    build_filter,
    build_selector,
    make_config,
)


def verl_dataloader_batches(n, batch, seed, steps):
    """The positions verl 0.9.1's train dataloader serves (its own sampler and loader, restarted per epoch)."""
    from omegaconf import OmegaConf
    from torchdata.stateful_dataloader import StatefulDataLoader

    from verl.trainer.ppo.utils import create_rl_sampler

    data = list(range(n))
    sampler = create_rl_sampler(OmegaConf.create({"shuffle": True, "seed": seed}), data)
    loader = StatefulDataLoader(dataset=data, batch_size=batch, drop_last=True, sampler=sampler,
                                collate_fn=lambda rows: rows)
    out, it = [], iter(loader)
    while len(out) < steps:
        try:
            out.append(next(it))
        except StopIteration:  # verl's _fetch_one_gen_batch restarts the iterator
            it = iter(loader)
    return out


@pytest.mark.parametrize("n, batch, seed", [(10, 4, 1), (37, 8, 7), (16, 16, 0)])
def test_uniform_selector_serves_exactly_verls_order(n, batch, seed):
    pool = TaskPool(np.arange(n) * 3 + 1000)  # stable indices differ from positions
    selector = build_selector({"name": "uniform"}, pool, seed)
    steps = 3 * (n // batch) + 1
    expected = verl_dataloader_batches(n, batch, seed, steps)
    for step, positions in enumerate(expected):
        assert selector.select(step, batch).tolist() == pool.index[positions].tolist()


def test_uniform_selector_resumes_exactly():
    pool = TaskPool(np.arange(23))
    a = build_selector({"name": "uniform"}, pool, 5)
    for step in range(4):
        a.select(step, 6)
    state = pickle.loads(pickle.dumps(a.state_dict()))
    b = build_selector({"name": "uniform"}, pool, 5)
    b.load_state_dict(state)
    for step in range(4, 12):
        assert a.select(step, 6).tolist() == b.select(step, 6).tolist()


def test_sequential_selector_offline_easy_to_hard_and_resume():
    pool = TaskPool(np.array([10, 11, 12, 13]), {"weak_pass_rate": np.array([0.2, 0.9, 0.2, 0.5]),
                                                  "strong_pass_rate": np.array([0.3, 1.0, 0.8, 0.5])})
    cfg = {"name": "sequential", "sort_by": ["weak_pass_rate", "strong_pass_rate"]}
    s = build_selector(cfg, pool, 0)
    assert s.select(0, 3).tolist() == [11, 13, 12]  # easy first; ps breaks the tie between 10 and 12
    t = build_selector(cfg, pool, 0)
    t.load_state_dict(copy.deepcopy(s.state_dict()))
    assert s.select(1, 3).tolist() == t.select(1, 3).tolist() == [10, 11, 13]
    bad = TaskPool(np.arange(2), {"weak_pass_rate": np.array([0.1, np.nan])})
    with pytest.raises(ValueError, match="NaN"):
        build_selector({"name": "sequential", "sort_by": ["weak_pass_rate"]}, bad, 0)
    with pytest.raises(KeyError, match="no extra_info column 'strong_pass_rate'"):
        build_selector(cfg, TaskPool(np.arange(2), {"weak_pass_rate": np.zeros(2)}), 0)


def test_unknown_names_and_keys_are_rejected_with_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown selector 'nope'; choose from \['ads', 'bots', 'dots', 'progress', "
                                         r"'prompt_utility', 'sequential', 'uniform'\]"):
        make_config("selector", {"name": "nope"})
    with pytest.raises(ValueError, match=r"unknown keys \['bogus'\]; valid keys are"):
        make_config("allocator", {"name": "variance", "bogus": 1})


def test_fixed_allocator_is_stock_grpo():
    a = build_allocator({"name": "fixed"}, 0)
    assert a.allocate(0, np.arange(4), 32).tolist() == [8, 8, 8, 8]
    with pytest.raises(ValueError, match="multiple"):
        a.allocate(0, np.arange(3), 32)


def test_variance_allocator_budgets():
    a = build_allocator({"name": "variance", "min_n": 2, "max_n": 10}, 0)
    tasks = np.array([7, 8, 9, 4])
    assert a.allocate(0, tasks, 16).tolist() == [4, 4, 4, 4]  # unseen: equal
    a.update(0, StepResults.from_rewards([7, 7, 8, 8, 9, 9, 4, 4], [1, 0, 1, 1, 0, 0, 1, 0]))
    counts = a.allocate(1, tasks, 20)
    assert counts.sum() == 20 and counts.min() >= 2 and counts.max() <= 10
    assert counts[0] == counts[3] > counts[1] == counts[2]  # p = 1/2 gets more than p in {0, 1}
    mixed = build_allocator({"name": "variance", "min_n": 2, "max_n": 8}, 0)
    mixed.update(0, StepResults.from_rewards([105] * 4 + [104] * 4, [1, 1, 1, 1, 1, 0, 1, 0]))
    # unseen 101, 100 and seen 104 at p = 0.5 (weight 0.3 each), solved 105 (0.05): 2 each, the spare 8 by weight
    # (2.67, 2.67, 0.44, 2.67 -> 2 each and the remaining 2 to the largest remainders, the lower position first)
    assert mixed.allocate(1, np.array([101, 100, 105, 104]), 16).tolist() == [5, 5, 2, 4]
    rng = np.random.default_rng(0)
    for _ in range(200):
        m = int(rng.integers(1, 20))
        lo, hi = sorted(rng.integers(1, 12, size=2))
        total = int(rng.integers(m * lo, m * hi + 1))
        b = build_allocator({"name": "variance", "min_n": int(lo), "max_n": int(hi)}, 0)
        b.update(0, StepResults.from_rewards(np.arange(m), rng.integers(0, 2, m)))
        c = b.allocate(0, np.arange(m), total)
        assert c.sum() == total and c.min() >= lo and c.max() <= hi
    with pytest.raises(ValueError, match="outside"):
        a.allocate(0, tasks, 100)
    b = build_allocator({"name": "variance"}, 0)
    b.load_state_dict(pickle.loads(pickle.dumps(a.state_dict())))
    assert b.allocate(2, tasks, 20).tolist() == counts.tolist()


def view(groups, rewards):
    r = np.asarray(rewards, dtype=float)
    return RolloutView(np.asarray(groups), np.asarray(groups), r, r - r.mean(), np.full(len(r), 5))


def test_keep_all_and_degenerate_filters():
    v = view([0, 0, 1, 1, 2, 2], [1, 1, 0, 1, 0, 0])
    assert build_filter({"name": "keep_all"}, 0).select(0, v).tolist() == [0, 1, 2, 3, 4, 5]
    assert build_filter({"name": "drop_degenerate"}, 0).select(0, v).tolist() == [2, 3]
    assert build_filter({"name": "drop_degenerate", "drop": "all_wrong"}, 0).select(0, v).tolist() == [0, 1, 2, 3]
    all_equal = view([0, 0, 1, 1], [1, 1, 0, 0])
    assert build_filter({"name": "drop_degenerate"}, 0).select(0, all_equal).tolist() == []  # the update is skipped
    assert build_filter({"name": "drop_degenerate", "min_keep": 1}, 0).select(0, all_equal).tolist() == [0, 1]
    with pytest.raises(ValueError, match="drop must be"):
        build_filter({"name": "drop_degenerate", "drop": "x"}, 0)


def test_step_results_per_task():
    stats = StepResults.from_rewards([5, 3, 5, 5, 3], [1.0, 0.1, 0.0, 1.0, 1.0]).per_task()
    assert stats.index.tolist() == [3, 5] and stats.n.tolist() == [2, 3]
    assert stats.pass_rate.tolist() == [0.5, 2 / 3]
    np.testing.assert_allclose(stats.mean_reward, [0.55, 2 / 3])
    np.testing.assert_allclose(stats.reward_var, [np.var([0.1, 1.0]), np.var([1, 0, 1])])
    pool = TaskPool(np.array([30, 10, 20]))
    assert pool.positions(np.array([20, 30])).tolist() == [2, 0]
    with pytest.raises(KeyError):
        pool.positions(np.array([99]))
    with pytest.raises(ValueError, match="unique"):
        TaskPool(np.array([1, 1]))


def test_dapo_dynamic_keeps_the_first_third_of_the_informative_groups():
    from verl_ext.axes import RolloutView, build_filter

    # 6 groups of 2: groups 0, 3 degenerate; target ceil(6 / 3) = 2 -> groups 1 and 2
    reward = np.array([1, 1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0], dtype=float)
    group = np.repeat([5, 4, 3, 2, 1, 0], 2)  # group ids need not follow the step's order
    view = RolloutView(group, group, reward, reward - 0.5, np.full(12, 5))
    f = build_filter({"name": "dapo_dynamic", "oversample": 3}, 0)
    assert f.select(0, view).tolist() == [2, 3, 4, 5]
    assert f.metrics() == {"groups": 6.0, "informative_groups": 4.0, "kept_groups": 2.0, "target_groups": 2.0}
    assert f.select(0, RolloutView(group, group, np.zeros(12), np.zeros(12), np.full(12, 5))).tolist() == []
    assert build_filter({"name": "dapo_dynamic", "oversample": 1}, 0).select(0, view).tolist() == [2, 3, 4, 5, 8, 9,
                                                                                                 10, 11]
    with pytest.raises(ValueError, match="oversample"):
        build_filter({"name": "dapo_dynamic", "oversample": 0}, 0)


def test_filter_chain_runs_each_filter_on_what_the_previous_kept():
    from verl_ext.axes import RolloutView, build_filter
    from verl_ext.axes.views import rollout_ids

    reward = np.array([1, 1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0], dtype=float)
    group = np.repeat(np.arange(6), 2)
    view = RolloutView(group, group, reward, reward - 0.5, np.full(12, 5), np.full(12, 0.3), 8, rollout_ids(2, 12))
    chain = build_filter({"name": "cbs", "buffer_size": 16, "batch_size": 2}, 0,
                         [{"name": "dapo_dynamic", "oversample": 3}])
    assert chain.replays and chain.needs_clip_fraction and chain.needs_entropy  # cbs's needs, through the chain
    kept = chain.filter_step(2, view)
    assert set(kept.tolist()) <= {2, 3, 4, 5} and len(kept) == 2  # cbs chose 2 of dapo's 4
    assert chain.stored().tolist() == rollout_ids(2, 12)[[2, 3, 4, 5]].tolist()  # cbs saw only dapo's rows
    m = chain.metrics()
    assert m["dapo_dynamic/kept_groups"] == 2.0 and m["kept"] == 2.0 and "epsilon" in m
    state = chain.state_dict()
    again = build_filter({"name": "cbs", "buffer_size": 16, "batch_size": 2}, 5,
                         [{"name": "dapo_dynamic", "oversample": 3}])
    again.load_state_dict(state)
    assert again.stored().tolist() == chain.stored().tolist()
    with pytest.raises(ValueError, match="only the last"):
        build_filter({"name": "keep_all"}, 0, [{"name": "cbs"}])
    with pytest.raises(ValueError, match="unknown keys"):
        build_filter({"name": "keep_all"}, 0, [{"name": "dapo_dynamic", "oversampling": 3}])


def test_replay_fifo_stores_informative_groups_and_replays_a_fraction_of_groups():
    """DOTS+RR's buffer by group: mixed-reward groups kept, a task's newest group replacing its older one (even an
    uninformative one), the older ones trimmed to the newest ``capacity - fresh_groups`` (here none),
    ``fraction / (1 - fraction) x`` fresh groups replayed."""
    from verl_ext.axes import RolloutView, build_filter
    from verl_ext.axes.views import rollout_ids

    def view(step, tasks, rewards):  # one group of 2 rollouts per task
        reward = np.array(rewards, dtype=float)
        return RolloutView(np.repeat(tasks, 2), np.repeat(np.arange(len(tasks)), 2), reward, reward - 0.5,
                           np.full(len(reward), 5), None, 8, rollout_ids(step, len(reward)))

    def group(step, g):
        return rollout_ids(step, 2 * g + 2)[2 * g:].tolist()

    f = build_filter({"name": "replay_fifo", "capacity": 3, "fraction": 0.5, "fresh_groups": 3,
                      "first_round_steps": 0}, 0)
    assert f.replays
    # step 1: tasks 10 (mixed), 11 (all right), 12 (mixed), 13 (all wrong)
    assert f.select(1, view(1, [10, 11, 12, 13], [1, 0, 1, 1, 0, 1, 0, 0])).tolist() == list(range(8))
    assert len(f.replay()) == 0  # nothing stored before the step
    assert sorted(f.stored().tolist()) == sorted(group(1, 0) + group(1, 2))
    # step 2: task 12 again (now all right: its stored group leaves), 14 and 15 mixed, 16 mixed
    f.select(2, view(2, [12, 14, 15, 16], [1, 1, 0, 1, 1, 0, 1, 0]))
    assert sorted(f.replay().tolist()) == sorted(group(1, 0) + group(1, 2))  # wants 4 groups, had 2, both whole
    assert sorted(f.stored().tolist()) == sorted(group(2, 1) + group(2, 2) + group(2, 3))  # 3 - 3 kept: 10 evicted
    g = build_filter({"name": "replay_fifo", "capacity": 3, "fraction": 0.2, "fresh_groups": 3}, 0)
    g.load_state_dict(f.state_dict())
    g.select(3, view(3, [20, 21, 22, 23], [0, 0] * 4))
    replayed = g.replay().tolist()
    assert len(replayed) == 2 and replayed in (group(2, 1), group(2, 2), group(2, 3))  # round(0.25 x 4) = 1 group
    with pytest.raises(ValueError, match="fraction"):
        build_filter({"name": "replay_fifo", "fraction": 1.0}, 0)
