"""CBS ("Contextual Rollout Bandits" §4.1-4.3): the scheduler (verl_ext.axes.cbs_scheduler: normaliser, ε schedule,
ε-greedy top-K, round reward, online regression, exact state round trips) and the CBS* rollout filter
(verl_ext.axes.cbs)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from verl_ext.axes.cbs_scheduler import FEATURES, CbsScheduler, CbsSchedulerConfig, RunningNormaliser, _fill

D = len(FEATURES)


def test_running_normaliser_matches_the_pooled_statistics_and_l2_normalises():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, D)) for n in (5, 1, 17)]
    norm = RunningNormaliser(D)
    for b in batches:
        norm.update(b)
    pooled = np.concatenate(batches)
    assert np.allclose(norm.mean, pooled.mean(0)) and np.allclose(norm.std, pooled.std(0))
    out = norm(pooled)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0)
    constant = np.zeros((3, D))  # a constant feature (here all) maps to 0, never to NaN
    flat = RunningNormaliser(D)
    flat.update(constant)
    assert np.array_equal(flat(constant), constant)


def test_epsilon_schedule_warm_up_then_linear_decay_to_the_floor():
    s = CbsScheduler(CbsSchedulerConfig(epsilon0=1.0, epsilon_min=0.2, epsilon_decay=0.1, warmup=3), seed=0)
    assert [s.epsilon(t) for t in range(3)] == [1.0, 1.0, 1.0]
    assert [round(s.epsilon(t), 6) for t in (3, 4, 10, 100)] == [1.0, 0.9, 0.3, 0.2]


def test_fill_takes_best_or_newest_unchosen_slot_by_slot():
    best = np.array([4, 2, 0, 1, 3])
    newest = np.array([0, 1, 2, 3, 4])
    assert _fill(best, newest, np.array([False, False, False])).tolist() == [4, 2, 0]
    assert _fill(best, newest, np.array([True, True])).tolist() == [0, 1]
    # newest first takes 0; greedy then skips the taken 0 only when it reaches it
    assert _fill(best, newest, np.array([True, False, False, False])).tolist() == [0, 4, 2, 1]


def test_select_is_greedy_without_exploration_and_newest_with_full_exploration():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(20, D))
    newest = rng.permutation(20)
    greedy = CbsScheduler(CbsSchedulerConfig(epsilon0=0.0, epsilon_min=0.0, warmup=0), seed=0)
    chosen = greedy.select(0, x, newest, 5, advantage=np.ones(20))
    scores = greedy.scores(x)  # the normaliser has seen exactly x
    assert set(chosen.tolist()) == set(np.argsort(-scores)[:5].tolist())
    explorer = CbsScheduler(CbsSchedulerConfig(epsilon0=1.0, warmup=10), seed=0)
    assert set(explorer.select(0, x, newest, 5, advantage=np.ones(20)).tolist()) == set(newest[:5].tolist())
    with pytest.raises(ValueError, match="permutation"):
        explorer.select(0, x, np.zeros(20, dtype=int), 5, advantage=np.ones(20))
    with pytest.raises(ValueError, match="cannot choose"):
        explorer.select(0, x, newest, 21, advantage=np.ones(20))


def test_round_reward_gates_the_entropy_term_and_smooths_with_the_ema():
    cfg = CbsSchedulerConfig(ema=0.5, entropy_weight=1.0, entropy_threshold=0.1, warmup=0, epsilon0=0.0,
                             epsilon_min=0.0)
    s = CbsScheduler(cfg, seed=0)
    x = np.random.default_rng(2).normal(size=(6, D))
    s.begin_round(0.2, 0.5)  # nothing chosen yet: no reward
    assert s.metrics() == {}
    s.select(0, x, np.arange(6), 3, advantage=np.ones(6))
    s.begin_round(0.5, 0.3)  # G = 0.3 - 1[0.5 > 0.1] (0.3 - 0.5) = 0.5; first gain = G
    assert s.metrics()["round_reward"] == pytest.approx(0.5)
    assert s.metrics()["squashed_reward"] == pytest.approx(1 / (1 + math.exp(-0.5)))
    s.select(1, x, np.arange(6), 3, advantage=np.ones(6))
    s.begin_round(0.4, 0.6)  # E_prev 0.3 > 0.1: G = -0.1 - 0.3 = -0.4; gain = 0.5 * 0.5 + 0.5 * -0.4 = 0.05
    assert s.metrics()["round_reward"] == pytest.approx(-0.4)
    assert s.metrics()["squashed_reward"] == pytest.approx(1 / (1 + math.exp(-0.05)))
    low = CbsScheduler(CbsSchedulerConfig(entropy_threshold=0.9, use_ema=False), seed=0)
    low.begin_round(0.2, 0.5)
    low.select(0, x, np.arange(6), 3, advantage=np.ones(6))
    low.begin_round(0.5, 0.3)  # E_prev 0.5 <= 0.9: no entropy term
    assert low.metrics()["round_reward"] == pytest.approx(0.3)


def test_online_regression_learns_to_prefer_large_advantages():
    """Rewarded rounds with r_i = R̃ |A_i|: after training, the MLP ranks large-|A| rollouts first."""
    rng = np.random.default_rng(3)
    s = CbsScheduler(CbsSchedulerConfig(lr=3e-3, epsilon0=1.0, warmup=10**6), seed=0)
    reward = 0.0
    for step in range(150):
        x = rng.normal(size=(32, D))
        advantage = x[:, FEATURES.index("advantage")]
        s.select(step, x, np.arange(32), 16, advantage=advantage)
        reward += 0.1  # every round improves: R̃ > 1/2
        s.begin_round(reward, 0.0)
    x = rng.normal(size=(256, D))
    rank_corr = np.corrcoef(np.argsort(np.argsort(s.scores(x))),
                            np.argsort(np.argsort(np.abs(x[:, FEATURES.index("advantage")]))))[0, 1]
    assert rank_corr > 0.5


def test_state_round_trip_continues_exactly():
    rng = np.random.default_rng(4)
    rounds = [(rng.normal(size=(12, D)), rng.permutation(12), rng.normal(size=12), rng.random(), rng.random())
              for _ in range(8)]
    cfg = CbsSchedulerConfig(epsilon0=0.5, epsilon_min=0.1, warmup=2, epsilon_decay=0.1, lr=1e-2)

    def play(s, start, stop):
        out = []
        for t in range(start, stop):
            x, newest, adv, v, e = rounds[t]
            s.begin_round(v, e)
            out.append(s.select(t, x, newest, 4, adv).tolist())
        return out

    straight = play(CbsScheduler(cfg, seed=7), 0, 8)
    first = CbsScheduler(cfg, seed=7)
    head = play(first, 0, 4)
    resumed = CbsScheduler(cfg, seed=99)
    resumed.load_state_dict(first.state_dict())
    assert head + play(resumed, 4, 8) == straight


def test_random_ablation_ignores_the_scores():
    x = np.random.default_rng(5).normal(size=(10, D))
    a = CbsScheduler(CbsSchedulerConfig(random_scores=True), seed=1).select(0, x, np.arange(10), 4, np.ones(10))
    b = CbsScheduler(CbsSchedulerConfig(random_scores=True, hidden=8), seed=1).select(0, x, np.arange(10), 4,
                                                                                       np.ones(10))
    assert a.tolist() == b.tolist() and len(set(a.tolist())) == 4


def _view(rng, groups=4, n=4, max_len=16):
    from verl_ext.axes import RolloutView

    reward = rng.integers(0, 2, size=groups * n).astype(float)
    group = np.repeat(np.arange(groups), n)
    length = rng.integers(1, max_len + 1, size=groups * n)
    return RolloutView(task_index=group + 100, group=group, reward=reward, advantage=rng.normal(size=groups * n),
                       response_length=length, entropy=rng.random(groups * n), max_response_length=max_len)


def test_rollout_features_group_statistics_length_and_fresh_defaults():
    from verl_ext.axes.cbs import rollout_features

    view = _view(np.random.default_rng(6))
    x = rollout_features(view)
    col = {f: x[:, i] for i, f in enumerate(FEATURES)}
    for g in range(4):
        r = view.reward[view.group == g]
        assert np.allclose(col["group_mean"][view.group == g], r.mean())
        assert np.allclose(col["group_std"][view.group == g], r.std())
    assert np.allclose(col["length_fraction"], view.response_length / 16)
    assert np.array_equal(col["truncated"], (view.response_length == 16).astype(float))
    assert np.array_equal(col["entropy"], view.entropy) and np.array_equal(col["reward"], view.reward)
    assert not col["usage"].any() and not col["age"].any() and not col["clip_fraction"].any()
    with pytest.raises(ValueError, match="entropy"):
        rollout_features(dataclasses.replace(view, entropy=None))


def test_cbs_star_keeps_the_fraction_and_resumes_exactly():
    from verl_ext.axes import build_filter

    cfg = {"name": "cbs_star", "keep_fraction": 0.3, "warmup": 1, "epsilon0": 0.6, "epsilon_decay": 0.2, "lr": 1e-2}
    rng = np.random.default_rng(7)
    views = [_view(rng) for _ in range(6)]
    straight = build_filter(cfg, 3)
    kept = [straight.filter_step(t, v).tolist() for t, v in enumerate(views)]
    assert all(len(k) == 5 and len(set(k)) == 5 for k in kept)  # round(0.3 * 16)
    assert straight.metrics()["epsilon"] == 0.2  # max(epsilon_min, 0.6 - 0.2 * (5 - 1))
    first = build_filter(cfg, 3)
    head = [first.filter_step(t, v).tolist() for t, v in enumerate(views[:3])]
    resumed = build_filter(cfg, 11)
    resumed.load_state_dict(first.state_dict())
    assert head + [resumed.filter_step(t, v).tolist() for t, v in enumerate(views[3:], start=3)] == kept


def _replay_views(rng, steps, groups=4, n=4):
    from verl_ext.axes.views import rollout_ids

    return [dataclasses.replace(v, rollout_id=rollout_ids(t, len(v))) for t, v in
            enumerate(_view(rng, groups, n) for _ in range(steps))]


def test_cbs_buffer_is_fifo_of_the_latest_rollouts_and_replays_by_id():
    from verl_ext.axes import build_filter

    cfg = {"name": "cbs", "buffer_size": 40, "batch_size": 12, "warmup": 0, "epsilon0": 0.5, "epsilon_min": 0.5}
    views = _replay_views(np.random.default_rng(8), 5)
    f = build_filter(cfg, 2)
    assert f.replays and f.needs_clip_fraction
    replayed_any = False
    for t, v in enumerate(views):
        fresh = f.filter_step(t, v)
        replay = f.replay()
        stored = f.stored()
        # the buffer: the latest 40 rollouts, this step's included, oldest evicted first
        expected = np.concatenate([u.rollout_id for u in views[: t + 1]])[-40:]
        assert stored.tolist() == expected.tolist()
        assert len(fresh) + len(replay) == 12 and len(set(fresh.tolist())) == len(fresh)
        assert set(replay.tolist()) <= set(expected.tolist()) - set(v.rollout_id.tolist())  # earlier steps only
        assert f.metrics()["replayed"] == len(replay) and f.metrics()["buffer"] == len(expected)
        if len(replay):
            replayed_any = True
            assert f.metrics()["chosen_age"] > 0
        ids = np.concatenate([v.rollout_id[fresh], replay])
        f.observe_update(t, ids, np.full(len(ids), 0.7), np.full(len(ids), 0.25))
    assert replayed_any
    with pytest.raises(ValueError, match="entropy_coeff > 0"):  # no entropy computed (bypass mode, no bonus)
        f.observe_update(t, ids, None, np.full(len(ids), 0.25))
    col = {name: i for i, name in enumerate(FEATURES)}
    used = f.features[:, col["usage"]] > 0
    assert used.any() and np.all(f.features[used, col["clip_fraction"]] == 0.25)
    assert np.all(f.features[used, col["entropy"]] == 0.7)


@pytest.mark.parametrize("name", ["cbs", "cbs_star", "keep_all", "replay_fifo", "drop_degenerate", "dapo_dynamic"])
def test_cbs_filters_and_only_they_ask_for_entropy_at_each_use(name):
    """Paper 001 Table 1 note 2: CBS's entropy feature is the one of a rollout's latest use, so the trainer re-measures
    a replayed rollout's (``needs_entropy``); filters without an entropy feature do not pay for that pass (the
    ablations are ``cbs`` presets)."""
    from verl_ext.axes import build_filter

    f = build_filter({"name": name}, 0)
    assert f.needs_entropy == name.startswith("cbs")


def test_cbs_usage_age_and_replay_resume_exactly():
    from verl_ext.axes import build_filter

    cfg = {"name": "cbs", "buffer_size": 24, "batch_size": 10, "warmup": 1, "epsilon0": 0.7, "epsilon_decay": 0.2,
           "lr": 1e-2}
    views = _replay_views(np.random.default_rng(9), 6)

    def play(f, start, part):
        out = []
        for t, v in enumerate(part, start=start):
            fresh, replay = f.filter_step(t, v), f.replay()
            ids = np.concatenate([v.rollout_id[fresh], replay])
            f.observe_update(t, ids, np.linspace(0, 1, len(ids)), np.linspace(1, 0, len(ids)))
            out.append((fresh.tolist(), replay.tolist(), f.stored().tolist()))
        return out

    straight = play(build_filter(cfg, 4), 0, views)
    first = build_filter(cfg, 4)
    head = play(first, 0, views[:3])
    resumed = build_filter(cfg, 123)
    resumed.load_state_dict(first.state_dict())
    assert head + play(resumed, 3, views[3:]) == straight
    assert any(r for _, r, _ in straight)  # replay happened


def test_cbs_buffer_smaller_than_a_step_and_default_batch_of_one_step():
    from verl_ext.axes import build_filter

    views = _replay_views(np.random.default_rng(10), 2)
    f = build_filter({"name": "cbs", "buffer_size": 8}, 0)
    fresh = f.filter_step(0, views[0])
    assert f.stored().tolist() == views[0].rollout_id[-8:].tolist() and len(fresh) == 8  # K = min(16, buffer)
    g = build_filter({"name": "cbs"}, 0)
    assert len(g.filter_step(0, views[0])) == 16 and len(g.replay()) == 0  # K = one step's rollouts
    with pytest.raises(ValueError, match="stable rollout ids"):
        g.filter_step(1, dataclasses.replace(views[1], rollout_id=None))
    with pytest.raises(ValueError, match="buffer_size"):
        build_filter({"name": "cbs", "buffer_size": 0}, 0)


def test_cbs_ablation_presets_compose_from_cbs():
    from pathlib import Path

    from omegaconf import OmegaConf

    from verl_ext.axes import make_config

    root = Path(__file__).resolve().parents[2] / "verl_ext" / "config" / "rollout_filter"
    base = OmegaConf.load(root / "cbs.yaml")
    for name, change in {"cbs_random": {"random_scores": True}, "cbs_no_ema": {"use_ema": False},
                         "cbs_no_entropy": {"entropy_weight": 0.0}}.items():
        preset = OmegaConf.load(root / f"{name}.yaml")
        assert list(preset.defaults) == ["cbs", "_self_"]
        merged = OmegaConf.merge(base, {k: v for k, v in preset.items() if k != "defaults"})
        config = make_config("rollout_filter", merged)
        assert config.name == "cbs"
        assert {k: getattr(config, k) for k in change} == change


def test_one_round_by_hand_features_reward_regression_step_and_epsilon_greedy_choice():
    """A whole scheduler round recomputed independently: the normalised features, the ε-greedy slots from the
    seeded draws, the round reward, and Adam's first step (each weight moves by lr * g / (|g| + eps))."""
    import copy

    import torch

    cfg = CbsSchedulerConfig(warmup=0, epsilon0=0.5, epsilon_min=0.5, lr=1e-3, use_ema=False, entropy_weight=1.0,
                             entropy_threshold=0.1, hidden=8)
    s = CbsScheduler(cfg, seed=4)
    x = np.random.default_rng(11).normal(size=(6, D))
    advantage = np.array([0.5, -1.0, 0.0, 2.0, -0.25, 1.0])

    # features: standardised by the running statistics (here this batch), then unit L2 rows
    z = (x - x.mean(0)) / x.std(0)
    z = z / np.linalg.norm(z, axis=1, keepdims=True)
    before = copy.deepcopy(s.mlp)
    with torch.no_grad():
        scores = before(torch.from_numpy(z)).squeeze(-1).numpy()
    explore = np.random.default_rng(4).random(3) < 0.5  # the scheduler's generator, seeded like it
    best, newest = list(np.argsort(-scores, kind="stable")), [5, 4, 3, 2, 1, 0]
    expected = []
    for e in explore:
        order = newest if e else best
        expected.append(next(i for i in order if i not in expected))
    s.begin_round(0.25, 0.4)
    chosen = s.select(0, x, np.array(newest), 3, advantage)
    assert chosen.tolist() == sorted(expected)
    assert np.allclose(s.pending[0], z[expected])  # kept in slot order for the next round's regression

    # next round: G = (0.5 - 0.25) - 1 * 1[0.4 > 0.1] * (0.3 - 0.4) = 0.35; no EMA: R̃ = sigmoid(0.35)
    target = (1 / (1 + math.exp(-0.35))) * np.abs(advantage[expected])
    loss = ((before(torch.from_numpy(z[expected])).squeeze(-1) - torch.from_numpy(target)) ** 2).sum()
    grads = torch.autograd.grad(loss, list(before.parameters()))
    s.begin_round(0.5, 0.3)
    assert s.metrics()["round_reward"] == pytest.approx(0.35)
    assert s.metrics()["scheduler_loss"] == pytest.approx(float(loss) / 3)
    for old, new, g in zip(before.parameters(), s.mlp.parameters(), grads):
        step = 1e-3 * g / (g.abs() + 1e-8)  # Adam, first step, bias-corrected: lr * m / (sqrt(v) + eps)
        assert torch.allclose(new.detach(), old.detach() - step, atol=1e-12)


def test_round_statistics_come_from_every_rollout_of_the_step_not_the_prefiltered_ones():
    from verl_ext.axes import build_filter
    from verl_ext.axes.views import rollout_ids

    views = _replay_views(np.random.default_rng(12), 2)
    chain = build_filter({"name": "cbs_star", "warmup": 0}, 0, [{"name": "dapo_dynamic", "oversample": 4}])
    alone = build_filter({"name": "cbs_star", "warmup": 0}, 0)
    for t, v in enumerate(views):
        chain.filter_step(t, v)
        alone.begin_step(t, v)  # the same V, E: all 16 rollouts
        alone.select(t, v.take(np.arange(4)))
    scheduler = chain.filters[-1].scheduler
    assert scheduler.previous == (pytest.approx(views[1].reward.mean()), pytest.approx(views[1].entropy.mean()))
    assert scheduler.previous == alone.scheduler.previous
    nothing = dataclasses.replace(views[0], reward=np.zeros(16))  # dynamic sampling keeps no group
    assert chain.filter_step(2, nothing).tolist() == [] and chain.metrics()["kept"] == 0.0
    replay = build_filter({"name": "cbs", "buffer_size": 32}, 0, [{"name": "dapo_dynamic"}])
    replay.filter_step(0, views[0])
    replay.filter_step(1, dataclasses.replace(views[1], reward=np.zeros(16), rollout_id=rollout_ids(1, 16)))
    assert all(np.isfinite(v) for v in replay.metrics().values())


def _parameters(scheduler: CbsScheduler) -> list:
    return [p.detach().clone() for p in scheduler.mlp.parameters()]


def test_a_round_that_chose_nothing_is_skipped_whole_by_the_scheduler():
    """[decision] No chosen rollout, no arm to reward: the next round folds no gain into the EMA and takes no
    optimiser step (Adam's leftover momentum would otherwise move the MLP on a zero gradient)."""
    s = CbsScheduler(CbsSchedulerConfig(lr=1e-2), seed=0)
    x = np.random.default_rng(13).normal(size=(8, D))
    s.begin_round(0.2, 0.5)
    s.select(0, x, np.arange(8), 3, advantage=np.ones(8))
    s.begin_round(0.4, 0.5)  # a real update: the gain is set and Adam has moments
    gain, weights = s.gain, _parameters(s)
    assert s.select(1, x, np.arange(8), 0, advantage=np.ones(8)).tolist() == []
    s.begin_round(0.9, 0.1)
    assert s.gain == gain and "scheduler_loss" not in s.metrics() and "round_reward" not in s.metrics()
    assert all(torch.equal(a, b) for a, b in zip(weights, _parameters(s)))
    assert s.previous == (0.9, 0.1)  # the next gain is measured from this round


@pytest.mark.parametrize("name", ["cbs_star", "cbs"])
def test_cbs_and_cbs_star_skip_a_round_whose_prefilter_kept_nothing_alike(name):
    from verl_ext.axes import build_filter

    views = _replay_views(np.random.default_rng(14), 3)
    nothing = dataclasses.replace(views[1], reward=np.zeros(16))  # dynamic sampling keeps no group
    f = build_filter({"name": name, "lr": 1e-2}, 0, [{"name": "dapo_dynamic", "oversample": 1}])
    f.filter_step(0, views[0])
    f.begin_step(1, nothing)  # rewards the step-0 choice: the MLP moves
    scheduler = f.filters[-1].scheduler
    gain, weights = scheduler.gain, _parameters(scheduler)
    assert f.select(1, nothing).tolist() == [] and len(f.replay()) == 0
    f.begin_step(2, views[2])
    assert scheduler.gain == gain and all(torch.equal(a, b) for a, b in zip(weights, _parameters(scheduler)))


@pytest.mark.parametrize("field", ["reward", "advantage", "entropy"])
@pytest.mark.parametrize("name", ["cbs_star", "cbs"])
def test_non_finite_rollout_fields_are_refused_naming_the_step_and_field(name, field):
    from verl_ext.axes import build_filter

    views = _replay_views(np.random.default_rng(15), 2)
    f = build_filter({"name": name}, 0)
    f.filter_step(0, views[0])
    values = getattr(views[1], field).copy()
    values[3] = np.nan if field != "advantage" else np.inf
    with pytest.raises(ValueError, match=rf"rollout_filter={name}: step 1 .*{field}"):
        f.filter_step(1, dataclasses.replace(views[1], **{field: values}))


@pytest.mark.parametrize("field", ["entropy", "clip_fraction"])
def test_cbs_refuses_non_finite_update_statistics(field):
    from verl_ext.axes import build_filter

    view = _replay_views(np.random.default_rng(16), 1)[0]
    f = build_filter({"name": "cbs"}, 0)
    ids = view.rollout_id[f.filter_step(0, view)]
    stats = {"entropy": np.full(len(ids), 0.5), "clip_fraction": np.full(len(ids), 0.1)}
    stats[field][-1] = np.nan
    with pytest.raises(ValueError, match=rf"rollout_filter=cbs: step 0 .*{field}"):
        f.observe_update(0, ids, stats["entropy"], stats["clip_fraction"])
