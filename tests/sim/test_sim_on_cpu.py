"""The simulator (verl_ext/sim): deterministic per seed, sane learning and selection, the trainer's components and
configs, replay through the trainer's interface, and a short grid end to end (tables, claims, plots)."""

import json

import numpy as np
import pytest

from verl_ext.axes.allocators import FixedAllocator, FixedAllocatorConfig
from verl_ext.sim import grid, loop
from verl_ext.sim.learner import Learner, LearnerConfig
from verl_ext.sim.loop import Scenario, Setting, run
from verl_ext.sim.world import World, WorldConfig

SMALL = WorldConfig(tasks=3_000, held_out=500)


def scenario(**kw) -> Scenario:
    return Scenario(**{"name": "t", "batch": 64, "rollouts": 8, "steps": 15, "columns": ("bots",), "eval_every": 5,
                       "world": SMALL, **kw})


def without_timing(record: dict) -> dict:
    return {k: v for k, v in record.items() if k != "ms_per_step"}


def test_a_seed_fixes_the_run_and_another_changes_it():
    sc, setting = scenario(), Setting("bots", grid.sel("bots"))
    first, again, other = run(sc, setting, 0), run(sc, setting, 0), run(sc, setting, 1)
    assert without_timing(first) == without_timing(again)
    assert first["accuracy"] != other["accuracy"]


def test_learning_comes_from_informative_rollouts_only():
    world = World(SMALL, 0)
    learner = Learner(world, LearnerConfig())
    before = learner.held_out().mean()
    tasks = np.arange(4)
    zero = np.zeros(32)
    learner.learn(np.repeat(tasks, 8), zero, zero.astype(bool), zero, 32)  # degenerate groups: |r - mean| = 0
    assert learner.held_out().mean() == before
    learner.learn(np.repeat(tasks, 8), np.full(32, 0.5), zero.astype(bool), zero, 32)
    assert learner.held_out().mean() > before
    spurious = Learner(world, LearnerConfig())
    spurious.learn(np.repeat(tasks, 8), np.full(32, 0.5), np.ones(32, dtype=bool), zero, 32)
    assert spurious.held_out().mean() < before  # spurious rollouts teach the wrong thing


def test_training_raises_held_out_accuracy_and_a_zero_learning_rate_does_not():
    learning = run(scenario(steps=30), Setting("random", grid.sel("random")), 0)
    frozen = run(scenario(steps=30), Setting("random", grid.sel("random"), learner={"lr": 0.0}), 0)
    assert learning["accuracy"][-1] > learning["accuracy"][0] + 0.01
    assert frozen["accuracy"][-1] == frozen["accuracy"][0]


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


def test_the_grid_builds_the_trainers_component_configs():
    from tests.recipes.recipes import compose_recipe

    studies = grid.studies()
    setting = {study: {s.name: s for s in studies[study].settings} for study in studies}
    trainer = compose_recipe("bots", "qwen2.5-1.5b-instruct_math", "selector=bots_dots", "allocator=knapsack",
                             "rollout_filter=cbs_star")
    assert setting["bots"]["bots_dots"].selector == dict(trainer.selector)
    assert setting["coba"]["knapsack"].allocator == dict(trainer.allocator)
    assert setting["cbs"]["cbs_star"].rollout_filter == dict(trainer.rollout_filter)
    trainer = compose_recipe("ads", "qwen2.5-math-1.5b", "selector=ads_no_intra")
    assert setting["ads"]["ads_no_intra"].selector == dict(trainer.selector)


def test_a_short_grid_writes_tables_claims_and_plots(tmp_path):
    from verl_ext.sim.__main__ import main
    from verl_ext.sim.claims import CLAIMS

    assert main(["--seeds", "2", "--tasks", "2000", "--steps-scale", "0.05", "--workers", "1",
                 "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "results.json").read_text())["records"]
    for name, study in grid.studies().items():
        assert {s.name for s in study.settings} == set(saved[name])
        assert all(set(runs) == {"0", "1"} for runs in saved[name].values())
    claims = (tmp_path / "claims.md").read_text()
    assert all(c.text in claims for c in CLAIMS)
    assert "not run" not in claims
    tables = (tmp_path / "tables.md").read_text()
    assert "TTB50" in tables and "task transitions" in tables and "bots+coba+cbs_star" in tables
    for png in ("bots_curves", "cbs_curves", "coba_transitions", "bots_sweeps", "progress_etr"):
        assert (tmp_path / f"{png}.png").stat().st_size > 1000
    assert main(["--from-results", str(tmp_path / "results.json"), "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "claims.md").read_text() == claims
    assert main(["--compare", str(tmp_path), "--out", str(tmp_path / "compare")]) == 0
    compare = (tmp_path / "compare" / "claims_compare.md").read_text()
    assert "| the defaults |" in compare.splitlines()[0] and all(c.text in compare for c in CLAIMS)


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


def test_the_normaliser_decides_whether_an_update_on_fewer_rollouts_moves_the_policy_less():
    world, tasks = World(SMALL, 0), np.repeat(np.arange(4), 8)
    signal, spurious, age = np.full(32, 0.5), np.zeros(32, dtype=bool), np.zeros(32)
    gains = {}
    for normaliser in ("generated", "trained"):
        for kept in (32, 8):
            learner = Learner(world, LearnerConfig(normaliser=normaliser))
            learner.learn(tasks[:kept], signal[:kept], spurious[:kept], age[:kept], 32)
            gains[normaliser, kept] = np.abs(learner.theta).sum()
    assert gains["generated", 8] < 0.5 * gains["generated", 32]
    assert gains["trained", 8] == pytest.approx(gains["trained", 32], rel=0.5)
    assert gains["trained", 8] > 2 * gains["generated", 8]


def test_model_overrides_are_typed_and_unknown_fields_named():
    assert grid.overrides(["learner.lr=1", "world.tasks=100", "learner.normaliser=trained"]) == {
        "world": {"tasks": 100}, "learner": {"lr": 1.0, "normaliser": "trained"}}
    with pytest.raises(ValueError, match="learner.<field>"):
        grid.overrides(["learner.speed=2"])
    study = grid.studies(steps=0.01, tasks=2_000, learner_set={"lr": 0.5})["bots"]
    assert study.scenario.learner.lr == 0.5 and study.scenario.world.tasks == 2_000
