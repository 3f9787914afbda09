"""CoBA-RL, its baselines and Knapsack-RL as budget allocators (CoBA-RL, Yao et al., §2.3-2.4 and §3.4): equations
against hand computations, the (α, β) schedules, the official code's split, Knapsack-RL's rules, state round-trips,
errors, and the Hydra presets."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

from verl_ext.axes import StepResults, build_allocator, make_config
from verl_ext.axes.budget_solvers import dp_allocate, geometric_gain, heap_allocate
from verl_ext.axes.coba import beta_shape, coba_gains, coba_value, psi
from verl_ext.axes.knapsack import knapsack_gains, knapsack_value


def results(outcomes: dict[int, list[float]]) -> StepResults:
    """Rewards per task index."""
    tasks = [t for t, rewards in outcomes.items() for _ in rewards]
    return StepResults.from_rewards(tasks, [r for rewards in outcomes.values() for r in rewards])


def heap_counts(p, alpha, beta, tau, low, high, total):
    s, r = coba_gains(np.clip(np.asarray(p, dtype=float), 0.01, 0.99), alpha, beta, tau)
    return heap_allocate(geometric_gain(s.tolist(), r.tolist()), len(p), low, high, total)


# ------------------------------------------------------------------------------------------ equations
def test_psi_and_alpha_beta_mapping_hand_numbers():
    assert psi(0.7, 10) == 0.7  # identity above 1/2
    assert psi(0.5, 10) == pytest.approx(0.5)  # continuous at 1/2
    assert psi(0.3, 10) == pytest.approx(0.11920292202211755)  # 1 / (1 + e^2)
    assert beta_shape(0.7, 11, 10) == pytest.approx((7.3, 3.7))  # 1 + 9 * 0.7
    assert beta_shape(0.3, 11, 10) == pytest.approx((2.072826298199058, 8.927173701800942))
    assert beta_shape(0.0, 11, 10) == pytest.approx((1.0602356583185637, 9.939764341681436))
    assert beta_shape(1.0, 11, 10) == pytest.approx((10.0, 1.0))  # α_max = κ - 1
    assert beta_shape(1.0, 7, 10) == pytest.approx((6.0, 1.0))


def test_value_function_hand_numbers():
    # BetaPDF(1/4; 9, 2) = 0.25^8 * 0.75 / B(9, 2), B(9, 2) = 8! 1! / 10! = 1/90; k = 0.25 * 0.75 / 7.5 = 0.025
    assert coba_value(np.array(16), np.array(0.25), 9.0, 2.0, 7.5) == pytest.approx(0.0003395598891081901, rel=1e-12)
    # BetaPDF(1/2; 2, 2) = 6 * 0.25 = 1.5; k = 1/30
    assert coba_value(np.array(10), np.array(0.5), 2.0, 2.0, 7.5) == pytest.approx(0.4252030341393161, rel=1e-12)
    s, r = coba_gains(np.array([0.25]), 9.0, 2.0, 7.5)  # ΔV(16) = C e^{-16k} (1 - e^{-k})
    assert math.exp(s[0] - r[0] * 16) == pytest.approx(90 * 0.25**8 * 0.75 * math.exp(-0.4) * (1 - math.exp(-0.025)))


# ------------------------------------------------------------------------------------------ schedules
def test_failure_schedule_window_and_batch_rate():
    a = build_allocator({"name": "coba"}, 0)
    assert a.shape(1) == (9.0, 2.0)  # (κ - 2, 2) before any result
    # batch success rate is the mean over tasks of their pass rates: (1 + 1/4) / 2, not 2 / 5 over rollouts
    a.update(1, results({3: [1.0], 4: [1.0, 0.0, 0.0, 0.1]}))
    assert a.shape(2) == pytest.approx((3.0043012494277797, 7.99569875057222))  # F = 0.375
    assert a.metrics()["failure_rate"] == pytest.approx(0.375)
    a.allocate(2, np.array([3, 4]), 8)
    assert a.metrics()["alpha"] == pytest.approx(3.0043012494277797) and a.metrics()["tau"] == 7.5

    w = build_allocator({"name": "coba", "window": 3}, 0)
    for rate in ([1.0] * 4 + [0.0], [1.0] + [0.0] * 4, [1.0] * 4 + [0.0]):  # 0.8, 0.2, 0.8
        w.update(0, results({7: rate}))
    assert w.shape(0)[0] == pytest.approx(3.4204727923299565)  # F = 0.4: 1 + 9 sigmoid(-1)
    w.update(0, results({7: [1.0] + [0.0] * 4}))  # window 0.2, 0.8, 0.2: F = 0.6 > 1/2, identity
    assert w.shape(0) == pytest.approx((6.4, 4.6))


def test_baseline_schedules():
    good = results({0: [1.0] * 4 + [0.0]})  # success 0.8, failure 0.2
    coba, e2e = build_allocator({"name": "coba"}, 0), build_allocator({"name": "coba", "schedule": "success"}, 0)
    exploit = build_allocator({"name": "coba", "schedule": "static", "alpha": 10.5, "beta": 1.5}, 0)
    explore = build_allocator({"name": "coba", "schedule": "static", "alpha": 1.5, "beta": 10.5}, 0)
    assert e2e.shape(1) == (2.0, 9.0)
    for a in (coba, e2e, exploit, explore):
        a.update(1, good)
    assert coba.shape(2) == pytest.approx((1.4268328585981012, 9.573167141401899))  # Ψ(0.2) = sigmoid(-3)
    assert e2e.shape(2) == pytest.approx((8.2, 2.8))  # driven by the success rate 0.8
    assert exploit.shape(2) == (10.5, 1.5) and explore.shape(2) == (1.5, 10.5)

    decay = build_allocator({"name": "coba", "schedule": "linear_decay", "total_steps": 100}, 0)
    decay.update(1, good)  # no effect on the schedule
    assert [decay.shape(t)[0] for t in (0, 1, 10, 11, 20, 55, 90, 91, 100, 500)] == [10, 10, 10, 9, 9, 5, 2, 1, 1, 1]
    assert all(sum(decay.shape(t)) == 11 for t in range(1, 101))


def test_allocation_follows_the_density_and_equals_the_heap():
    observed = results({0: [1.0] + [0.0] * 7, 1: [1.0, 0.0] * 4, 2: [1.0] * 7 + [0.0]})  # p = 1/8, 1/2, 7/8
    tasks, p = np.array([0, 1, 2, 9]), [0.125, 0.5, 0.875, 0.5]  # 9: unseen -> 0.5
    counts = {}
    for name, (alpha, beta) in {"exploit": (10.5, 1.5), "explore": (1.5, 10.5)}.items():
        a = build_allocator({"name": "coba", "schedule": "static", "alpha": alpha, "beta": beta}, 0)
        a.update(1, observed)
        counts[name] = a.allocate(2, tasks, 64)
        assert counts[name].tolist() == heap_counts(p, alpha, beta, 7.5, 2, 128, 64).tolist()
        assert a.metrics()["unseen_fraction"] == 0.25
    assert counts["exploit"][2] > counts["exploit"][0] and counts["explore"][0] > counts["explore"][2]
    a = build_allocator({"name": "coba"}, 0)
    a.update(1, observed)
    alpha, beta = a.shape(2)
    assert a.allocate(2, tasks, 100).tolist() == heap_counts(p, alpha, beta, 7.5, 2, 128, 100).tolist()


@pytest.mark.parametrize("name", ["coba", "coba_official"])
def test_unseen_tasks(name):
    a = build_allocator({"name": name}, 0)
    tasks = np.array([5, 9, 2, 7, 1, 3, 8])
    assert a.allocate(0, tasks, 7 * 16 + 3).tolist() == [17, 17, 17, 16, 16, 16, 16]  # uniform, batch order
    # in a mixed batch an unseen task is allocated exactly as one observed at p = 1/2
    unseen, half = build_allocator({"name": name}, 0), build_allocator({"name": name}, 0)
    history = {5: [1.0, 0.0, 0.0, 0.0], 9: [1.0, 1.0, 1.0, 0.0], 2: [0.0, 0.0]}
    unseen.update(1, results(history))
    half.update(1, results(history))
    half.history.record(results({7: [1.0, 0.0]}).per_task())  # task 7 at p = 1/2; failure window untouched
    counts = unseen.allocate(2, tasks[:4], 60)
    assert counts.tolist() == half.allocate(2, tasks[:4], 60).tolist() and len(set(counts.tolist())) > 1


# ------------------------------------------------------------------------------------------ official split
def official(max_n: int, history: dict[int, list[float]]):
    a = build_allocator({"name": "coba_official", "max_n": max_n}, 0)
    a.update(1, results(history))
    return a


HARD_EXPLORE_EASY = {0: [0.0] * 4, 1: [1.0] + [0.0] * 31, 2: [1.0, 0.0], 3: [1.0, 0.0, 0.0, 0.0],
                     4: [1.0, 1.0], 5: [1.0, 1.0]}  # p = 0, 1/32 (hard), 1/2, 1/4 (explore), 1, 1 (easy)


def test_official_split_caps_and_residue():
    a = official(8, HARD_EXPLORE_EASY)
    # spare 28; 2 of 6 explore: share 0.6 + 0.2 * 4/6 -> 20, capped at the explore capacity 2 * 6 = 12;
    # left 16 to the hard tasks by 1 - p: floor(16 * 32/63) = 8, floor(16 * 31/63) = 7, both capped at 6;
    # left 4: explore is full; the easy tasks (p = 1) keep the authors' tiny weight 1 - (1 - 1e-6) each, and
    # `left` shrinks inside the loop: task 4 gets int(4 * 1/2) = 2, task 5 int(2 * 1/2) = 1; the group's
    # residue 1 goes to its first open task: [.., 2 + 2 + 1, 2 + 1]
    assert a.allocate(2, np.arange(6), 40).tolist() == [8, 8, 8, 8, 5, 3]
    m = a.metrics()
    assert (m["explore_fraction"], m["hard_fraction"], m["easy_fraction"]) == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    assert m["solver_budget_share"] == pytest.approx(12 / 28) and m["uniform"] == 0.0


def test_official_split_share_and_weights():
    a = official(128, HARD_EXPLORE_EASY)
    alpha, beta = a.shape(2)
    p = np.array([0.0, 1 / 32, 0.5, 0.25, 1.0, 1.0])
    assert np.var(p) > 0.1667  # the whole batch's variance would saturate τ at 12
    tau = 3 + 9 * np.var([0.5, 0.25]) / 0.1667  # the explore set's (tasks 2, 3), clipped to [0.01, 0.99]
    counts = a.allocate(2, np.arange(6), 52)  # spare 40: solver gets int(40 * 0.7333) = 29 on tasks 2, 3
    assert a.metrics()["tau"] == pytest.approx(tau)
    assert counts[2:4].tolist() == heap_counts(p[2:4], alpha, beta, tau, 2, 128, 4 + 29).tolist()
    # left 11 to the hard tasks (w = 1, 31/32; Σ 63/32), `left` shrinking: task 0 int(11 * 32/63) = 5 (left 6),
    # task 1 int(6 * 31/63) = 2 (left 4); the group's residue 4: 2 each. Nothing reaches explore or easy.
    assert counts[[0, 1, 4, 5]].tolist() == [9, 6, 2, 2] and counts.sum() == 52


def test_official_split_majority_explores():
    history = {0: [0.0] * 4, 1: [1.0, 0.0], 2: [1.0, 0.0], 3: [1.0, 1.0], 4: [1.0, 0.0, 0.0, 0.0]}
    a = official(10, history)  # batch rate 0.45: α = 1 + 9 * 0.55
    assert a.shape(2) == pytest.approx((5.95, 5.05))
    p = np.array([0.0, 0.5, 0.5, 1.0, 0.25, 0.5])  # task 5 unseen in a mixed batch: 1/2
    counts = a.allocate(2, np.arange(6), 32)  # 4 of 6 explore: 0.8 of the spare 20 = 16 to the solver
    explore = [1, 2, 4, 5]
    tau = 3 + 9 * np.var(p[explore]) / 0.1667  # the explore set only
    assert counts[explore].tolist() == heap_counts(p[explore], 5.95, 5.05, tau, 2, 10, 8 + 16).tolist()
    assert counts[[0, 3]].tolist() == [6, 2]  # the 4 left all go to the only hard task


# ------------------------------------------------------------------------------------------ knapsack
def test_knapsack_rules():
    k = build_allocator({"name": "knapsack"}, 0)
    k.update(1, results({1: [1.0, 0.0, 0.0, 0.0], 2: [0.0] * 8, 3: [1.0] * 8, 4: [1.0, 0.0] * 4,
                         5: [1.0, 0.0, 0.0, 0.0] * 2}))
    counts = k.allocate(2, np.arange(6), 96)
    # 0: never seen, 1: only 4 rollouts seen -> default 96 / 6; 2, 3: p = 0, 1 -> 2; 4, 5 share 96 - 36
    assert counts[:4].tolist() == [16, 16, 2, 2]
    p = np.array([0.5, 0.25])
    assert counts[4:].tolist() == heap_allocate(
        lambda i, b: float(knapsack_gains(p, 2, 128)[i, b - 2]), 2, 2, 128, 60).tolist()
    dp = dp_allocate(knapsack_value(np.arange(2, 129)[None, :], p[:, None]), 2, 60)
    assert knapsack_value(counts[4:], p).sum() == pytest.approx(knapsack_value(dp, p).sum(), rel=1e-12)
    assert counts[4] < counts[5]  # the 0.75^N term decays slower
    assert (k.metrics()["trusted_fraction"], k.metrics()["extreme_fraction"]) == pytest.approx((4 / 6, 2 / 6))
    # the last visit's p, trusted once 8 rollouts were seen in all: task 1 now has 8
    k.update(2, results({1: [1.0, 1.0, 1.0, 1.0]}))
    # p = 1 -> 2, task 0 -> 16; no task left to solve: the other 14 go round-robin over both
    assert k.allocate(3, np.array([1, 0]), 32).tolist() == [2 + 7, 16 + 7]


def test_knapsack_overflow_and_indivisible_budgets():
    k = build_allocator({"name": "knapsack"}, 0)
    assert k.allocate(0, np.arange(3), 50).tolist() == [17, 17, 16]  # no history: 16 each, 2 round-robin
    k.update(1, results({0: [0.0] * 8, 1: [1.0] * 8, 2: [1.0] * 8}))
    assert k.allocate(2, np.arange(3), 48).tolist() == [16, 16, 16]  # all p in {0, 1}: 2 each + 42 round-robin
    assert k.metrics()["overflow"] == 42.0
    small = build_allocator({"name": "knapsack", "max_n": 4}, 0)
    small.update(1, results({0: [1.0, 0.0] * 4}))
    assert small.allocate(2, np.array([0, 1]), 8).tolist() == [4, 4]


# ------------------------------------------------------------------------------------------ state and errors
CONFIGS = [{"name": "coba"}, {"name": "coba", "window": 2, "history": 3}, {"name": "coba", "schedule": "success"},
           {"name": "coba", "schedule": "linear_decay", "total_steps": 6}, {"name": "coba_official", "window": 2},
           {"name": "knapsack", "min_seen": 3}]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_state_round_trip_allocates_identically(cfg):
    rng = np.random.default_rng(0)
    truth = rng.random(40)

    def step(a, t, tasks):
        counts = a.allocate(t, tasks, 8 * len(tasks))
        task = np.repeat(tasks, counts)
        a.update(t, StepResults.from_rewards(task, (rng.random(len(task)) < truth[task]).astype(float)))
        return counts

    a = build_allocator(cfg, 0)
    batches = [rng.choice(40, 12, replace=False) for _ in range(6)]
    for t in range(3):
        step(a, t + 1, batches[t])
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)  # as the trainer checkpoints it
    buffer.seek(0)
    b = build_allocator(cfg, 0)
    b.load_state_dict(torch.load(buffer, weights_only=False))
    for t in range(3, 6):
        state = rng.bit_generator.state
        expected = step(a, t + 1, batches[t])
        rng.bit_generator.state = state  # same rewards for the resumed copy
        assert step(b, t + 1, batches[t]).tolist() == expected.tolist()
        assert b.metrics() == a.metrics()


def test_history_window_mismatch_is_refused():
    a = build_allocator({"name": "coba", "history": 2}, 0)
    a.update(1, results({1: [1.0], 2: [0.0]}))
    with pytest.raises(ValueError, match="history window"):
        build_allocator({"name": "coba", "history": 3}, 0).load_state_dict(a.state_dict())


@pytest.mark.parametrize("name", ["coba", "coba_official", "knapsack"])
def test_infeasible_budgets_raise(name):
    a = build_allocator({"name": name}, 0)
    with pytest.raises(ValueError, match=r"outside \[4\*2, 4\*128\]"):
        a.allocate(0, np.arange(4), 7)
    with pytest.raises(ValueError, match="outside"):
        a.allocate(0, np.arange(4), 513)
    with pytest.raises(ValueError, match="integers"):
        a.allocate(0, np.arange(4), 64.5)
    assert a.allocate(0, np.arange(4), 8).tolist() == [2, 2, 2, 2]
    assert a.allocate(0, np.arange(4), 512).tolist() == [128] * 4


def test_bad_configs_are_rejected():
    for cfg, message in [({"schedule": "static"}, "needs alpha > 0 and beta > 0"),
                         ({"alpha": 2.0}, "only read by schedule=static"),
                         ({"schedule": "linear_decay"}, "set trainer.total_training_steps"),
                         ({"schedule": "cosine"}, "choose from"), ({"min_n": 5, "max_n": 4}, "min_n <= max_n"),
                         ({"kappa": 2.5}, "kappa"), ({"tau": 0.0}, "tau"), ({"p_min": 0.5, "p_max": 0.4}, "p_min"),
                         ({"window": 0}, "window"), ({"tau_base": 3.0}, "unknown keys")]:
        with pytest.raises(ValueError, match=message):
            make_config("allocator", {"name": "coba", **cfg})
    with pytest.raises(ValueError, match="unknown keys \\['tau'\\]"):
        make_config("allocator", {"name": "coba_official", "tau": 4.0})
    with pytest.raises(ValueError, match="min_seen"):
        make_config("allocator", {"name": "knapsack", "min_seen": 0})


@pytest.mark.parametrize("name", ["coba", "coba_official"])
def test_coba_and_its_official_variant_share_the_common_fields_and_checks(name):
    shared = {"min_n": 2, "max_n": 128, "gamma": 10.0, "kappa": 11.0, "window": 1, "p_min": 0.01, "p_max": 0.99}
    config = make_config("allocator", {"name": name})
    assert {k: getattr(config, k) for k in shared} == shared
    for cfg, message in [({"min_n": 5, "max_n": 4}, f"allocator={name}: need integers 1 <= min_n <= max_n"),
                         ({"kappa": 2.5}, "kappa"), ({"gamma": 0.0}, "gamma"), ({"window": 1.5}, "window"),
                         ({"p_min": 0.5, "p_max": 0.4}, "p_min")]:
        with pytest.raises(ValueError, match=message):
            make_config("allocator", {"name": name, **cfg})


# ------------------------------------------------------------------------------------------ presets
def test_presets_compose_build_and_validate():
    from pathlib import Path

    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    import verl_ext
    from verl_ext.trainer.build_axes import validate_axes

    names = ("coba", "coba_official", "static_exploit", "static_explore", "explore_to_exploit", "knapsack", "grpo",
             "linear_decay")
    with initialize_config_dir(str(Path(verl_ext.__file__).parent / "config"), version_base=None):
        cfg = compose("verl_ext_trainer", overrides=[  # one composition (slow), every preset also under presets.*
            "data.train_batch_size=32", "actor_rollout_ref.rollout.n=16", "allocator=linear_decay",
            "trainer.total_training_steps=40", *(f"+allocator@presets.{n}={n}" for n in names)])
    assert cfg.allocator == cfg.presets.linear_decay
    made = {n: make_config("allocator", cfg.presets[n]) for n in names}
    assert made["coba"] == type(made["coba"])()  # the YAML spells out the dataclass defaults
    assert type(made["coba_official"])() == made["coba_official"]
    assert (made["coba"].min_n, made["coba"].max_n, made["coba"].gamma, made["coba"].kappa) == (2, 128, 10.0, 11.0)
    exploit = made["static_exploit"]
    assert (exploit.schedule, exploit.alpha, exploit.beta) == ("static", 10.5, 1.5)
    assert (made["static_explore"].alpha, made["static_explore"].beta) == (1.5, 10.5)
    assert made["explore_to_exploit"].schedule == "success"
    assert (made["linear_decay"].schedule, made["linear_decay"].total_steps) == ("linear_decay", 40)
    assert (made["knapsack"].min_seen, made["knapsack"].max_n) == (8, 128)
    assert made["grpo"].name == "fixed"
    with open_dict(cfg):
        for n in names:
            cfg.allocator = cfg.presets[n]
            validate_axes(cfg)  # builds the allocator and allocates 32 x 16 rollouts for fresh tasks
            assert build_allocator(cfg.allocator, 0).allocate(1, np.arange(32), 512).tolist() == [16] * 32
        # cfg.allocator is linear_decay from here on
        cfg.data_selection.rollout_budget = 2048  # budget sweep
        validate_axes(cfg)
        cfg.data_selection.rollout_budget = 32 * 129
        with pytest.raises(ValueError, match="rollout_budget=4128 for 32 tasks"):
            validate_axes(cfg)
        cfg.trainer.total_training_steps = None
        with pytest.raises(ValueError, match="trainer.total_training_steps"):
            validate_axes(cfg)


def test_official_tau_uses_the_explore_set_clipped():
    a = official(128, HARD_EXPLORE_EASY)
    a.allocate(2, np.arange(6), 60)
    explore = np.clip([0.5, 0.25], 0.01, 0.99)  # tasks 2, 3; the whole batch's variance would be far larger
    assert a.metrics()["tau"] == pytest.approx(3.0 + 9.0 * min(np.var(explore) / 0.1667, 1.0))
    assert a.metrics()["tau"] < 3.0 + 9.0 * min(np.var([0, 1 / 32, 0.5, 0.25, 1, 1]) / 0.1667, 1.0)


def test_official_leftovers_stay_in_their_group_with_the_residue():
    # 1 hard task, 5 explore tasks at max_n after the solver: the leftovers go to the hard task first;
    # residue of a group never leaks to another group's tasks before that group is served
    a = official(4, {0: [0.0] * 4, **{k: [1.0, 0.0] for k in range(1, 6)}, 6: [1.0, 1.0]})
    counts = a.allocate(2, np.arange(7), 26)  # spare 12: 5 of 7 explore -> int(0.8 * 12) = 9 to the solver
    # equal p: the heap deals 9 over tasks 1-5 -> [4, 4, 4, 4, 3]; left 3: the hard task takes 2 (cap), its
    # group has no room for the residue 1, so it goes to the explore group (task 5), not to the easy task 6
    assert counts.tolist() == [4, 4, 4, 4, 4, 4, 2]
