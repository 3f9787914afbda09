"""What ``python -m verl_ext.main`` refuses before Ray starts: unsupported settings, recipe typos, missing
mandatory values, unusable validation files (no Ray here)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.recipes.recipes import RECIPES, ROOT, compose_recipe
from verl_ext.trainer.startup_checks import check_supported, check_validation_files

CPU_RECIPE = ("bots", "cpu_embedded", "actor_rollout_ref.model.path=/m")


@pytest.mark.parametrize("override, named", [
    ("trainer.v1.trainer_mode=colocate_async", "verl_ext_colocate_async is verl's colocate_async with the three axes"),
    ("+trainer.v1.sync.parameter_sync_step=2", "parameter_sync_step=2"),
    ("trainer.v1.sampler.sync_refill_failed_groups=true", "sync_refill_failed_groups"),
    ("algorithm.filter_groups.enable=true", "algorithm.filter_groups.enable"),
    ("distillation.enabled=true", "distillation.enabled"),
    ("actor_rollout_ref.actor.ulysses_sequence_parallel_size=2", "actor: ulysses_sequence_parallel_size=2 with attention sdpa"),
    ("actor_rollout_ref.ref.ulysses_sequence_parallel_size=2", "ref: ulysses_sequence_parallel_size=2 with attention sdpa"),
    ("actor_rollout_ref.rollout.response_length=128", "needs actor_rollout_ref.rollout.agent.default_agent_loop="
                                                      "verl_ext_single_turn"),
])
def test_unsupported_settings_are_refused_by_name(override, named):
    check_supported(compose_recipe(*CPU_RECIPE))  # the recipe itself is fine
    with pytest.raises(ValueError, match="not supported by trainer mode verl_ext") as err:
        check_supported(compose_recipe(*CPU_RECIPE, override))
    assert named in str(err.value)


@pytest.mark.parametrize("mode", ["verl_ext_colocate_async", "verl_ext_separate_async"])
def test_async_modes_run_components_with_a_stale_evidence_rule_and_name_the_nearest_setting_otherwise(mode):
    base = (*CPU_RECIPE, f"trainer.v1.trainer_mode={mode}", "trainer.v1.separate_async.parameter_sync_step=1",
            "actor_rollout_ref.actor.ppo_mini_batch_size=${data.train_batch_size}")
    check_supported(compose_recipe(*base))
    check_supported(compose_recipe(*base, "rollout_filter=cbs"))  # replayed rows expire beyond the threshold
    verl_mode = mode.removeprefix("verl_ext_")
    for override, named in [("selector=ads", "nearest: selector=bots"), ("selector=dots", "nearest: selector=bots_dots"),
                            (f"++trainer.v1.{verl_mode}.parameter_sync_step=2", "parameter_sync_step=2")]:
        with pytest.raises(ValueError, match="not supported by trainer mode verl_ext") as err:
            check_supported(compose_recipe(*base, override))
        assert named in str(err.value)


def test_separate_async_trains_parameter_sync_step_mini_batches_a_step_and_async_separate_sets_one():
    check_supported(compose_recipe(*CPU_RECIPE, "+async=separate"))
    check_supported(compose_recipe(*CPU_RECIPE, "+async=separate", "trainer.v1.separate_async.parameter_sync_step=2",
                                   "actor_rollout_ref.actor.ppo_mini_batch_size=2"))  # verl's fully-async shape
    with pytest.raises(ValueError, match=r"data.train_batch_size=4 != trainer.v1.separate_async.parameter_sync_step=1 "
                                         r"x actor_rollout_ref.actor.ppo_mini_batch_size=2"):
        check_supported(compose_recipe(*CPU_RECIPE, "+async=separate", "actor_rollout_ref.actor.ppo_mini_batch_size=2"))
    for replaying in ("cbs", "replay_fifo"):  # accepted with one update a sync, refused with two
        check_supported(compose_recipe(*CPU_RECIPE, "+async=separate", f"rollout_filter={replaying}"))
        with pytest.raises(ValueError, match=rf"rollout_filter={replaying} with parameter_sync_step=2: a replaying"):
            check_supported(compose_recipe(*CPU_RECIPE, "+async=separate", f"rollout_filter={replaying}",
                                           "trainer.v1.separate_async.parameter_sync_step=2",
                                           "actor_rollout_ref.actor.ppo_mini_batch_size=2"))
    with pytest.raises(ValueError, match=r"parameter_sync_step=2 \(several actor updates per weight sync: "
                                         r"separate_async only"):
        check_supported(compose_recipe(*CPU_RECIPE, "+async=colocate", "++trainer.v1.colocate_async.parameter_sync_step=2"))


def test_sequence_parallelism_is_accepted_with_flash_attention_only():
    flash = "actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2"
    check_supported(compose_recipe(*CPU_RECIPE, flash, "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2"))
    flex = "actor_rollout_ref.model.override_config.attn_implementation=flex_attention"
    with pytest.raises(ValueError, match="with attention flex_attention"):
        check_supported(compose_recipe(*CPU_RECIPE, flex, "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2"))


def test_a_longer_validation_length_is_accepted_with_the_capping_agent_loop():
    ads = compose_recipe("ads", "cpu_embedded", "actor_rollout_ref.model.path=/m")
    assert ads.actor_rollout_ref.rollout.response_length > ads.data.max_response_length
    check_supported(ads)
    with pytest.raises(ValueError, match="verl's own loop would train at the rollout's length"):
        check_supported(compose_recipe("ads", "cpu_embedded", "actor_rollout_ref.model.path=/m",
                                       "actor_rollout_ref.rollout.agent.default_agent_loop=single_turn_agent"))


def _recipes_with(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of recipes/ whose bots/cpu_embedded.yaml has ``old`` replaced by ``new``."""
    copy = tmp_path / "recipes"
    shutil.copytree(RECIPES, copy)
    recipe = copy / "bots" / "cpu_embedded.yaml"
    assert old in recipe.read_text()
    recipe.write_text(recipe.read_text().replace(old, new, 1))
    return copy


@pytest.mark.parametrize("old, new, key, suggestion", [
    ("  total_training_steps: 3", "  total_training_step: 3", "trainer.total_training_step", "total_training_steps"),
    ("\ntrainer:\n", "\ntrainer:\n  v1:\n    trainer_mod: sync\n", "trainer.v1.trainer_mod", "trainer_mode"),
])
def test_a_typo_in_a_recipe_fails_naming_file_key_and_the_closest_key(tmp_path, old, new, key, suggestion):
    recipes = _recipes_with(tmp_path, old, new)
    with pytest.raises(ValueError, match="recipe config errors") as err:
        compose_recipe(*CPU_RECIPE, recipes=recipes)
    message = str(err.value)
    assert str(recipes / "bots" / "cpu_embedded.yaml") in message and f"'{key}'" in message
    assert f"did you mean {suggestion}" in message


def test_free_form_places_and_the_recipe_section_accept_new_keys(tmp_path):
    recipes = _recipes_with(tmp_path, "\nrecipe:\n", "\nrecipe:\n  anything: 1\n")
    recipe = recipes / "bots" / "cpu_embedded.yaml"
    model = "  model:\n    path: ???"
    assert model in recipe.read_text()
    recipe.write_text(recipe.read_text().replace(
        model, model + "\n    override_config:\n      attn_implementation: eager\n      free_key: 2", 1))
    cfg = compose_recipe(*CPU_RECIPE, recipes=recipes)
    assert cfg.actor_rollout_ref.model.override_config.attn_implementation == "eager"  # the recipe says sdpa
    assert cfg.actor_rollout_ref.model.override_config.free_key == 2 and cfg.recipe.anything == 1


def test_a_mandatory_recipe_value_must_be_given():
    with pytest.raises(ValueError, match=r"actor_rollout_ref\.model\.path' is mandatory"):
        compose_recipe("bots", "cpu_embedded")
    with pytest.raises(ValueError, match=r"actor_rollout_ref\.model\.path' is mandatory"):
        compose_recipe("coba", "cpu_embedded")


def test_the_entry_point_refuses_a_recipe_typo_before_ray(tmp_path):
    """Refused before Ray starts and before verl is imported (``-X importtime`` lists every module imported)."""
    recipes = _recipes_with(tmp_path, "  test_freq: 3", "  test_freqq: 3")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "verl_ext.main", "--config-dir", str(recipes),
                           "+bots=cpu_embedded", "actor_rollout_ref.model.path=/m"], capture_output=True, text=True,
                          timeout=180, cwd=ROOT)
    assert proc.returncode != 0
    assert "'trainer.test_freqq' is not a config key" in proc.stderr and "did you mean test_freq" in proc.stderr
    assert "ray init" not in proc.stdout + proc.stderr
    imported = {line.rpartition("|")[2].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "verl_ext.launch.recipe_keys" in imported and not {m for m in imported if m.split(".")[0] in ("verl", "ray")}


def test_the_entry_point_names_the_attention_pair_before_ray(monkeypatch, capsys):
    """verl_ext.launch.main.run prints the actor's attention backend, budgets and their measurement before verl's run_ppo
    (which starts Ray) is called."""
    import verl.trainer.main_ppo

    from verl_ext.launch import main

    for name in ("VERL_USE_EXTERNAL_MODULES", "PYTHONPATH"):  # export_trainer_module sets them: restored after
        monkeypatch.setenv(name, os.environ.get(name, ""))
    printed = []
    monkeypatch.setattr(verl.trainer.main_ppo, "run_ppo",
                        lambda config, task_runner_class: printed.append(capsys.readouterr().out))
    main.run(compose_recipe("ads", "qwen3-4b-base", "trainer.test_freq=-1", "trainer.val_before_train=false"))
    assert len(printed) == 1 and ("\nverl_ext.main: attention sdpa (packed), micro-batch tokens/GPU update 16384, "
                                  "log-probs 16384, reference 16384; first step measured on NVIDIA H200 2026-11-26"
                                  in printed[0]), printed


def _val_file(tmp_path: Path, rows: list[dict]) -> str:
    path = tmp_path / "val.parquet"
    pd.DataFrame(rows).to_parquet(path)
    return str(path)


GOOD_ROW = {"prompt": [{"role": "user", "content": "1+1?"}], "data_source": "math",
            "reward_model": {"style": "rule", "ground_truth": "2"}, "extra_info": {"index": 0, "split": "test"}}


def test_validation_files_are_checked_when_validation_runs(tmp_path):
    missing = str(tmp_path / "nope.parquet")
    cfg = compose_recipe(*CPU_RECIPE, f"data.val_files={missing}", "trainer.test_freq=-1",
                         "trainer.val_before_train=false")
    check_validation_files(cfg)  # no validation: nothing to read
    with pytest.raises(FileNotFoundError, match="nope.parquet does not exist"):
        check_validation_files(compose_recipe(*CPU_RECIPE, f"data.val_files=[{missing}]", "trainer.test_freq=5"))
    good = _val_file(tmp_path, [GOOD_ROW])
    check_validation_files(compose_recipe(*CPU_RECIPE, f"data.val_files={good}", "trainer.val_before_train=true"))
    no_column = _val_file(tmp_path, [{k: v for k, v in GOOD_ROW.items() if k != "reward_model"}])
    with pytest.raises(ValueError, match=r"no column\(s\) \['reward_model'\]"):
        check_validation_files(compose_recipe(*CPU_RECIPE, f"data.val_files={no_column}"))
    no_index = _val_file(tmp_path, [GOOD_ROW, {**GOOD_ROW, "extra_info": {"index": None, "split": "test"}}])
    with pytest.raises(ValueError, match="row 1: extra_info.index is missing"):
        check_validation_files(compose_recipe(*CPU_RECIPE, f"data.val_files={no_index}"))


CUSTOM = ("selector=custom", "selector.path=recipes/own_method/epsilon_greedy.py", "selector.cls=EpsilonGreedy",
          "+selector.config.epsilon=0.2")
NO_RULE = """
from dataclasses import dataclass
from verl_ext.axes.selectors import UniformSelector


@dataclass(frozen=True)
class NoRuleConfig:
    pass


class NoRule(UniformSelector):
    config_class = NoRuleConfig
    stale_evidence = None
"""


def test_a_users_selector_is_checked_and_made_absolute_before_ray_and_refused_async_without_a_rule(tmp_path,
                                                                                                   monkeypatch):
    from verl_ext.trainer.build_axes import validate_axes

    monkeypatch.chdir(ROOT)  # the launch directory the relative path is read from
    config = compose_recipe(*CPU_RECIPE, *CUSTOM)
    validate_axes(config)
    assert config.selector.path == str(ROOT / "recipes" / "own_method" / "epsilon_greedy.py")  # for the Ray workers
    with pytest.raises(ValueError, match=r"unknown keys \['eps'\] in selector.config; valid keys are \['epsilon'\]"):
        validate_axes(compose_recipe(*CPU_RECIPE, *CUSTOM[:3], "+selector.config.eps=0.2"))
    (tmp_path / "no_rule.py").write_text(NO_RULE)
    asynchronous = ("trainer.v1.trainer_mode=verl_ext_colocate_async", "trainer.v1.separate_async.parameter_sync_step=1",
                    "actor_rollout_ref.actor.ppo_mini_batch_size=${data.train_batch_size}")
    check_supported(compose_recipe(*CPU_RECIPE, *asynchronous, *CUSTOM))  # the example states its rule
    with pytest.raises(ValueError, match="selector=custom.*it states no rule for evidence older than the policy"):
        check_supported(compose_recipe(*CPU_RECIPE, *asynchronous, "selector=custom",
                                       f"selector.path={tmp_path / 'no_rule.py'}", "selector.cls=NoRule"))


def test_the_launch_refuses_a_missing_user_file_before_ray(tmp_path, monkeypatch):
    """verl_ext.launch.main.run (what ``python -m verl_ext.main`` runs after composing) refuses it before verl's
    run_ppo (which starts Ray) is called; the entry point's own path is the recipe-typo test's."""
    import verl.trainer.main_ppo

    from verl_ext.launch import main

    monkeypatch.setattr(verl.trainer.main_ppo, "run_ppo", lambda *args, **kwargs: pytest.fail("run_ppo was called"))
    missing = tmp_path / "mine.py"
    cfg = compose_recipe("bots", "cpu_embedded", "actor_rollout_ref.model.path=/m", "selector=custom",
                         f"selector.path={missing}", "selector.cls=Mine")
    with pytest.raises(ValueError, match=re.escape(f"selector=custom selector.path={missing} selector.cls=Mine: no file")):
        main.run(cfg)


OWN_AXES = """
from dataclasses import dataclass
import numpy as np
from verl_ext.axes.base import BudgetAllocator, RolloutFilter


@dataclass(frozen=True)
class EvenConfig:
    pass


class Even(BudgetAllocator):
    config_class = EvenConfig
    stale_evidence = "not read"

    def allocate(self, step, tasks, total):
        return np.full(len(tasks), total // len(tasks)) + (np.arange(len(tasks)) < total % len(tasks))


@dataclass(frozen=True)
class KeepFirstConfig:
    keep: int = 1


class KeepFirst(RolloutFilter):
    config_class = KeepFirstConfig
    stale_evidence = "not read"

    def select(self, step, rollouts):
        return np.arange(min(self.config.keep, len(rollouts)))
"""


def test_a_users_allocator_and_prefilter_are_loaded_from_a_relative_path_like_a_selector(tmp_path, monkeypatch):
    import numpy as np

    from verl_ext.axes import RolloutView
    from verl_ext.trainer.build_axes import build_rollout_filter, validate_axes

    (tmp_path / "own.py").write_text(OWN_AXES)
    monkeypatch.chdir(tmp_path)
    config = compose_recipe(*CPU_RECIPE, "allocator=custom", "allocator.path=own.py", "allocator.cls=Even",
                            "data_selection.prefilters=[{name:custom,path:own.py,cls:KeepFirst,config:{keep:3}}]")
    validate_axes(config)  # the allocator met the budget exactly
    assert config.allocator.path == config.data_selection.prefilters[0].path == str(tmp_path / "own.py")
    view = RolloutView(np.arange(8), np.repeat(np.arange(2), 4), np.ones(8), np.zeros(8), np.full(8, 4))
    chain = build_rollout_filter(config, 0)
    assert chain.select(1, view).tolist() == [0, 1, 2]  # the user's prefilter, then keep_all
    assert chain.metrics()["custom KeepFirst/kept"] == 3.0
