"""The simulator (verl_ext/apps/sim): deterministic per seed, sane learning and selection, the trainer's components and
configs, replay through the trainer's interface, and a short grid end to end (tables, claims, plots)."""

import json

import numpy as np
import pytest

from verl_ext.axes.allocators import FixedAllocator, FixedAllocatorConfig
from verl_ext.apps.sim import grid, loop
from verl_ext.apps.sim.learner import Learner, LearnerConfig, Update
from verl_ext.apps.sim.loop import Scenario, Setting, run
from verl_ext.apps.sim.world import World, WorldConfig

SMALL = WorldConfig(tasks=3_000, held_out=500)


def scenario(**kw) -> Scenario:
    return Scenario(**{"name": "t", "batch": 64, "rollouts": 8, "steps": 15, "mini_batch": 64, "columns": ("bots",),
                       "eval_every": 5,
                       "world": SMALL, **kw})


def without_timing(record: dict) -> dict:
    return {k: v for k, v in record.items() if k != "ms_per_step"}


def test_a_seed_fixes_the_run_and_another_changes_it():
    sc, setting = scenario(), Setting("bots", grid.sel("bots"))
    first, again, other = run(sc, setting, 0), run(sc, setting, 0), run(sc, setting, 1)
    assert without_timing(first) == without_timing(again)
    assert first["accuracy"] != other["accuracy"]


def rows(tasks, advantage, success, spurious=None, age=0.0, uses=0.0):
    n = len(tasks)
    return Update(tasks, np.asarray(advantage, dtype=float), np.asarray(success, dtype=bool),
                  np.zeros(n, dtype=bool) if spurious is None else spurious, np.full(n, 1000), np.full(n, age),
                  np.full(n, uses))


def test_learning_follows_the_advantage_times_the_score_function():
    world = World(SMALL, 0)
    learner = Learner(world, LearnerConfig())
    before = learner.held_out().mean()
    tasks, success = np.repeat(np.arange(4), 8), np.tile([True, False], 16)
    learner.learn(rows(tasks, np.zeros(32), success), 64, "token-mean")  # degenerate groups: advantage 0
    assert learner.held_out().mean() == before
    adv = loop.advantages(success.astype(float), np.repeat(np.arange(4), 8), "grpo")
    g = learner.learn(rows(tasks, adv, success), 64, "token-mean")
    p = learner.pass_rate(np.arange(4))
    assert learner.held_out().mean() > before and np.all(g > 0)  # A (s - p) > 0 for successes and failures alike
    spurious = Learner(world, LearnerConfig())
    spurious.learn(rows(tasks, adv, success, np.ones(32, dtype=bool)), 64, "token-mean")
    assert spurious.held_out().mean() < before  # spurious rollouts teach the wrong thing
    stale = Learner(world, LearnerConfig()).learn(rows(tasks, adv, success, age=2.0, uses=1.0), 64, "token-mean")
    fresh = Learner(world, LearnerConfig()).learn(rows(tasks, adv, success), 64, "token-mean")
    assert stale == pytest.approx(fresh * 0.7**3)  # staleness 0.7 per step of age, reuse 0.7 per earlier update
    assert np.all(p > 0)


def test_grpo_divides_by_the_group_std_and_rloo_leaves_one_out():
    reward, group = np.array([1.0, 0, 0, 0, 1, 1]), np.array([0, 0, 0, 0, 1, 1])
    grpo = loop.advantages(reward, group, "grpo")
    assert grpo[:4] == pytest.approx((reward[:4] - 0.25) / np.std(reward[:4], ddof=1), abs=1e-5)
    assert np.all(grpo[4:] == 0)
    assert loop.advantages(reward, group, "rloo")[:2] == pytest.approx([1 - 0, 0 - 1 / 3])


def test_training_raises_held_out_accuracy_and_a_zero_learning_rate_does_not():
    learning = run(scenario(steps=30), Setting("random", grid.sel("random")), 0)
    frozen = run(scenario(steps=30), Setting("random", grid.sel("random"), learner={"lr": 0.0}), 0)
    assert learning["accuracy"][-1] > frozen["accuracy"][-1] + 0.01  # the same evaluation draws at a step
    assert frozen["accuracy"][0] == learning["accuracy"][0]


def test_a_selector_aiming_at_p_half_has_a_higher_etr_than_random():
    sc = scenario(steps=20)
    bots = run(sc, Setting("bots", grid.sel("bots")), 0)
    random = run(sc, Setting("random", grid.sel("random")), 0)
    assert np.mean(bots["etr"][5:]) > np.mean(random["etr"][5:]) + 0.1


def test_every_allocator_of_the_grid_meets_the_budget_and_a_broken_one_is_caught(monkeypatch):
    sc = scenario(steps=4)
    for setting in grid.studies(steps=0.02, tasks=SMALL.tasks)["coba"].settings:
        record = run(sc, setting, 0)  # the loop raises on counts that miss the budget
        assert len(record["counts_std"]) == 4
    revisits = scenario(steps=6, world=WorldConfig(tasks=150, held_out=100))  # tasks seen before: unequal counts
    coba = next(s for s in grid.studies()["coba"].settings if s.name == "coba")
    assert np.mean(run(revisits, coba, 0)["counts_std"][2:]) > 0

    class OneTooMany(FixedAllocator):
        def allocate(self, step, tasks, total):
            counts = super().allocate(step, tasks, total)
            counts[0] += 1
            return counts

    monkeypatch.setattr(loop, "build_allocator", lambda cfg, seed: OneTooMany(FixedAllocatorConfig(), seed))
    with pytest.raises(RuntimeError, match="budget"):
        run(sc, Setting("fixed"), 0)


def test_a_replaying_filter_trains_on_stored_rollouts():
    sc = scenario(columns=("dots",), steps=6)
    dots_rr = Setting("dots+rr", grid.sel("dots", reference_size=16), rollout_filter=grid.filt("replay_fifo"))
    record = run(sc, dots_rr, 0)
    assert record["replayed"][:2] == [0, 0] and min(record["replayed"][2:]) > 0  # no replay in the first round


def test_the_grid_is_the_recipes_composed_with_their_launchers_overrides():
    """Each checked setting equals what the full trainer composition of its launcher's command gives (a dropped
    recipe override fails here), and DOTS+RR / ADS run the ADS recipe's protocol and filter."""
    from tests.recipes.recipes import RECIPES, compose_recipe
    from verl_ext.launch.recipe_tables import with_tables
    from verl_ext.apps.sim.recipes import DATA_BOUND, DATA_PATHS

    studies = grid.studies(steps=0.02, tasks=2_000)
    setting = {study: {s.name: s for s in studies[study].settings} for study in studies}
    root = grid.STUDY_RECIPES
    for study, name, choice in (("ads", "dots+rr", "dots"), ("cbs", "cbs_star", "cbs_star")):
        group, recipe, objective, axis = root[study]
        extra = [f"+objective={objective}"] if objective else []
        command = with_tables(RECIPES, [f"+{group}={recipe}", *extra, f"{axis}={choice}"])  # as verl_ext.main does
        full = compose_recipe(group, recipe, *command[1:])
        real_data = set(DATA_PATHS) | {key for key, _ in DATA_BOUND}  # the simulator gives the world's columns
        for part in ("selector", "allocator", "rollout_filter"):
            composed = {k: v for k, v in dict(full[part]).items() if k not in real_data}
            ours = {k: v for k, v in getattr(setting[study][name], part).items() if k not in real_data}
            assert ours == composed, (study, name, part)
        batch = setting[study][name].batch or studies[study].scenario.batch
        assert batch == full.data.train_batch_size
        assert studies[study].scenario.mini_batch == (full.actor_rollout_ref.actor.ppo_mini_batch_size
                                                      * full.actor_rollout_ref.rollout.n)
    dots = setting["ads"]["dots+rr"]
    assert (dots.selector["protocol"], dots.selector["round_steps"], dots.selector["fresh_fraction"],
            dots.selector["reference_size"]) == ("measured", 2, 0.5, 64)
    assert dots.rollout_filter["name"] == "replay_fifo" and studies["ads"].scenario.batch == 128
    # the recipe's DOTS predicts with the authors' trained adapter (a file of real pass rates); the simulator with the
    # preset's attention over the world's embedding columns
    assert ("predictor", "adapter") in DATA_BOUND and dots.selector["predictor"] == "attention"
    assert setting["ads"]["ads"].rollout_filter == {"name": "drop_degenerate", "drop": "all_wrong", "min_keep": 0}
    assert setting["ads"]["uniform+rr"].batch == 64 and setting["ads"]["uniform+rr"].rollout_filter == \
        dots.rollout_filter  # replay alone: DOTS+RR's fresh prompts and buffer, no selection


def test_a_short_grid_writes_tables_claims_and_plots_byte_identical_per_seed(tmp_path):
    from verl_ext.apps.sim.__main__ import main
    from verl_ext.apps.sim.world import PRESETS

    args = ["--seeds", "2", "--seed-offset", "3", "--tasks", "2000", "--steps-scale", "0.02", "--workers", "1",
            "--studies", "ads", "--worlds", "base", "noisy_reference"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    for name in ("results.json", "tables.md", "claims.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    saved = json.loads((tmp_path / "a" / "results.json").read_text())["records"]
    assert set(saved) == {"base", "noisy_reference"}
    assert all(set(runs) == {"3", "4"} for runs in saved["base"]["ads"].values())
    claims = (tmp_path / "a" / "claims.md").read_text()
    assert "ADS beats DOTS+RR" in claims and "`noisy_reference`" in claims and "Bonferroni" in claims
    tables = (tmp_path / "a" / "tables.md").read_text()
    assert PRESETS["noisy_reference"].assumption in tables and "TTB50" in tables
    assert (tmp_path / "a" / "noisy_reference_ads_curves.png").stat().st_size > 1000
    assert "ms_per_step" in (tmp_path / "a" / "timings.json").read_text()
    assert main(["--from-results", str(tmp_path / "a" / "results.json"), "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "claims.md").read_text() == claims
    assert (tmp_path / "again" / "tables.md").read_text() == tables


def test_verdicts_have_an_equivalence_margin_and_t_intervals():
    from verl_ext.apps.sim.claims import verdict
    from eval.metrics import t_interval

    d = t_interval(np.array([0.1, 0.2, 0.3]))
    assert d.mean == pytest.approx(0.2) and d.high - d.mean == pytest.approx(4.303 * 0.1 / np.sqrt(3), rel=1e-3)
    assert verdict(t_interval(np.array([0.001, 0.002, 0.0015])), 1) == "no difference"
    assert verdict(t_interval(np.array([0.02, 0.03, 0.025])), 1) == "holds"
    assert verdict(t_interval(np.array([0.02, 0.03, 0.025])), -1) == "does not hold"
    assert verdict(t_interval(np.array([0.05, -0.05, 0.01])), 1) == "inconclusive"


def test_components_see_stable_indices_not_positions():
    world = World(SMALL, 0)
    assert not np.array_equal(world.index, np.arange(SMALL.tasks))
    seen = []

    class Spy(FixedAllocator):
        def allocate(self, step, tasks, total):
            seen.append(np.asarray(tasks))
            return super().allocate(step, tasks, total)

    import verl_ext.apps.sim.loop as sim_loop

    original = sim_loop.build_allocator
    sim_loop.build_allocator = lambda cfg, seed: Spy(FixedAllocatorConfig(), seed)
    try:
        run(scenario(steps=2), Setting("random", grid.sel("random")), 0)
    finally:
        sim_loop.build_allocator = original
    assert np.isin(np.concatenate(seen), world.index).all()


def test_every_setting_of_the_grid_resumes_from_its_saved_state_exactly():
    """Each study's every setting, rebuilt from its components' state_dict() after step 2, runs on exactly as
    without the restart: the selector, allocator and filter state the trainer checkpoints is complete."""
    studies = grid.studies(steps=0.02, tasks=3_000)
    scheduled = {f: grid.filt(f, warmup=0, epsilon0=0.5) for f in ("cbs", "cbs_star")}  # past the warm-up at once
    cases = [(study.scenario, setting) for study in studies.values() for setting in study.settings]
    cases += [(studies["cbs"].scenario, Setting(f"{f} scheduled", rollout_filter=c)) for f, c in scheduled.items()]
    for scenario, setting in cases:
        whole = run(scenario, setting, 0)
        resumed = run(scenario, setting, 0, resume_after=2)
        assert without_timing(resumed) == without_timing(whole), (scenario.name, setting.name)


def test_the_update_is_normalised_by_the_fixed_mini_batch_so_filtered_rows_teach_nothing():
    world, tasks = World(SMALL, 0), np.repeat(np.arange(4), 8)
    success = np.tile([True, False], 16)
    adv = loop.advantages(success.astype(float), np.repeat(np.arange(4), 8), "grpo")
    gains = {}
    for kept in (32, 8):
        learner = Learner(world, LearnerConfig())
        learner.learn(rows(tasks[:kept], adv[:kept], success[:kept]), 64, "seq-mean-token-mean")
        gains[kept] = np.abs(learner.theta).sum()
    assert gains[8] == pytest.approx(gains[32] * 8 / 32, rel=0.3)


def test_model_overrides_are_typed_and_unknown_fields_named():
    assert grid.overrides(["learner.lr=1", "world.tasks=100", "learner.reuse=0.5"]) == {
        "world": {"tasks": 100}, "learner": {"lr": 1.0, "reuse": 0.5}}
    with pytest.raises(ValueError, match="learner.<field>"):
        grid.overrides(["learner.speed=2"])
    study = grid.studies(steps=0.01, tasks=2_000, learner_set={"lr": 0.5})["bots"]
    assert study.scenario.learner.lr == 0.5 and study.scenario.world.tasks == 2_000


def test_a_grid_plot_says_it_is_simulated_with_its_seeds_and_steps():
    from verl_ext.apps.sim.grid_plots import sim_note

    runs = {"grpo": {0: {"etr": [0.5] * 6}, 1: {"etr": [0.4] * 6}}, "bots": {0: {"etr": [0.6] * 6}, 1: {"etr": [0.6] * 6}}}
    assert sim_note(runs) == "simulated (a model's prediction, no training): 2 seeds, 6 steps"


def test_a_users_selector_runs_beside_each_selector_study_and_learns_from_its_rewards():
    """``--custom``: the own-method guide's example, loaded from its file, joins every study that varies the selector
    (not the allocator's or the filter's); aiming at p = 0.5, it has a higher ETR than random selection, and it
    resumes from its state_dict exactly."""
    custom = grid.custom_settings(["mine=selector=custom,selector.path=recipes/own_method/epsilon_greedy.py,"
                                   "selector.cls=EpsilonGreedy,+selector.config.epsilon=0.1"])
    assert custom["mine"][1].startswith("selector.path=/") and custom["mine"][3] == "selector.config.epsilon=0.1"
    studies = grid.studies(steps=0.02, tasks=2_000, custom=custom)
    assert {k for k, s in studies.items() if "mine" in [x.name for x in s.settings]} == {"bots", "ads", "progress"}
    mine = next(s for s in studies["bots"].settings if s.name == "mine")
    assert mine.selector["config"] == {"epsilon": 0.1} and mine.selector["cls"] == "EpsilonGreedy"
    sc = scenario(steps=20, world=WorldConfig(tasks=256, held_out=500))  # every task seen by step 4: then it knows
    ours, random = run(sc, Setting("mine", mine.selector), 0), run(sc, Setting("random", grid.sel("random")), 0)
    assert np.mean(ours["etr"][8:]) > np.mean(random["etr"][8:]) + 0.1
    assert without_timing(run(sc, Setting("mine", mine.selector), 0, resume_after=2)) == without_timing(ours)
    with pytest.raises(ValueError, match="expected NAME=AXIS=CHOICE"):
        grid.custom_settings(["mine=selector.path=x.py"])
