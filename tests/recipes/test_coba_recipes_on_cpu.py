"""CoBA-RL recipes (recipes/coba) and launchers (scripts/coba): the paper's settings (CoBA-RL, Yao et al., §3.1,
App. C, Table 5) land where verl reads them, every baseline and sweep point composes and passes the axes' and verl's
checks, and the launchers build the right commands (DRY_RUN=1). No training here (scripts/coba/cpu_embedded.sh runs
the CPU preset)."""

import functools

import pytest
from tests.recipes.recipes import (
    RECIPES, ROOT, SCRIPTS, check_recipe, check_scripts, commands, compose_recipe, launch, rollout_budget,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")

SETTINGS = {  # name: (hub id, prompts per step M, mini-batch, steps)
    "qwen2.5-7b-instruct": ("Qwen/Qwen2.5-7B-Instruct", 256, 128, 1000),
    "qwen2.5-7b-base": ("Qwen/Qwen2.5-7B", 256, 128, 1000),
    "qwen3-4b-base": ("Qwen/Qwen3-4B-Base", 512, 256, 500),
    "qwen3-1.7b-base": ("Qwen/Qwen3-1.7B-Base", 512, 256, 500),
}
BENCHMARKS = ("aime24", "aime25", "amc23", "math500", "olympiadbench")
BASELINES = {  # allocator= preset: (allocator name, schedule, (alpha, beta))
    "grpo": ("fixed", None, None),
    "knapsack": ("knapsack", None, None),
    "coba": ("coba", "failure", (None, None)),
    "static_exploit": ("coba", "static", (10.5, 1.5)),
    "static_explore": ("coba", "static", (1.5, 10.5)),
    "linear_decay": ("coba", "linear_decay", (None, None)),
    "explore_to_exploit": ("coba", "success", (None, None)),
    "coba_official": ("coba_official", None, None),
}
PAPER_SETTING = "qwen2.5-7b-instruct"  # the ablations' model (Tables 2-3, Figure 6)


def _compose(setting: str, *overrides: str):
    return compose_recipe("coba", setting, *overrides)



@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_setting_has_the_paper_hyperparameters(setting):
    model, tasks, mini, steps = SETTINGS[setting]
    cfg = _compose(setting, "recipe.data_dir=/data")
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    assert cfg.actor_rollout_ref.model.path == model
    assert cfg.algorithm.adv_estimator == "grpo" and not cfg.algorithm.use_kl_in_reward and not actor.use_kl_loss
    assert (actor.optim.optimizer, actor.optim.lr) == ("AdamW", 1e-6)
    assert (actor.clip_ratio_low, actor.clip_ratio_high) == (0.2, 0.28)
    assert (cfg.data.max_prompt_length, cfg.data.max_response_length) == (2048, 4096)
    assert (cfg.data.train_batch_size, actor.ppo_mini_batch_size, rollout.n) == (tasks, mini, 16)
    assert rollout_budget(cfg) == tasks * 16 and cfg.data_selection.rollout_budget is None  # B_total = M G
    val = rollout.val_kwargs
    assert (val.n, val.temperature, val.top_p, val.do_sample) == (16, 1.0, 0.9, True)  # avg@16, Table 5
    assert cfg.trainer.total_training_steps == steps and cfg.trainer.v1.trainer_mode == "verl_ext"
    assert cfg.data.train_files == "/data/dapo_math/train.parquet"
    assert list(cfg.data.val_files) == [f"/data/{b}/test.parquet" for b in BENCHMARKS]
    assert cfg.reward.custom_reward_function.path == "pkg://verl_ext.rewards"
    alloc = cfg.allocator
    assert (alloc.name, alloc.min_n, alloc.max_n, alloc.kappa, alloc.gamma) == ("coba", 2, 128, 11, 10)
    assert (alloc.window, alloc.history, alloc.schedule) == (1, 1, "failure") and cfg.selector.name == "uniform"
    check_recipe(cfg)


@functools.cache
def _default_without_allocator() -> dict:
    return {k: v for k, v in _compose(PAPER_SETTING).items() if k != "allocator"}


@pytest.mark.parametrize("baseline", sorted(BASELINES))
def test_baselines_differ_only_in_the_allocator(baseline):
    name, schedule, shape = BASELINES[baseline]
    cfg = _compose(PAPER_SETTING, f"allocator={baseline}")
    alloc = cfg.allocator
    assert alloc.name == name
    if schedule is not None:
        assert alloc.schedule == schedule and (alloc.alpha, alloc.beta) == shape
    if baseline == "linear_decay":
        assert alloc.total_steps == 1000  # alpha 10 -> 1 over the run
    if name in ("knapsack", "coba_official"):
        assert (alloc.min_n, alloc.max_n) == (2, 128)
    assert {k: v for k, v in cfg.items() if k != "allocator"} == _default_without_allocator()
    check_recipe(cfg)


def test_cpu_preset_composes_for_the_cpu():
    from verl_ext.cpu import cpu_overrides

    cfg = _compose("cpu_embedded", *cpu_overrides(), "actor_rollout_ref.model.path=/m")
    rollout = cfg.actor_rollout_ref.rollout
    assert (rollout.name, cfg.trainer.device, cfg.data.train_batch_size, rollout_budget(cfg)) == ("hf", "cpu", 4, 16)
    assert (cfg.allocator.name, cfg.allocator.min_n, cfg.allocator.max_n) == ("coba", 2, 8)
    assert cfg.data.train_files == "data/coba_cpu/arithmetic/train.parquet" and rollout.val_kwargs.top_p == 0.9
    assert cfg.actor_rollout_ref.actor.clip_ratio_high == 0.28 and cfg.trainer.total_training_steps == 3
    check_recipe(cfg)


def _launch(script: str, *args: str, **env: str):
    return launch("coba", script, *args, timeout=60, **env)



def _overrides(words: list[str]) -> list[str]:
    """A printed training command's Hydra overrides after ``+coba=SETTING``, without the launcher's paths."""
    start = next(i for i, w in enumerate(words) if w.startswith("+coba=")) + 1
    return [w for w in words[start:] if not w.startswith(("trainer.experiment_name=", "trainer.default_local_dir="))]


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_launcher_dry_run(setting):
    (words,) = commands(_launch(f"{setting}.sh", "allocator=knapsack", "trainer.test_freq=5", DATA_DIR="/d", OUT_DIR="/o"))
    assert words[1:6] == ["-m", "verl_ext.main", "--config-dir", str(RECIPES), f"+coba={setting}"]
    assert words[-2:] == ["allocator=knapsack", "trainer.test_freq=5"]  # the user's overrides, last
    for expected in ("recipe.data_dir=/d", f"trainer.experiment_name={setting}-knapsack",
                     f"trainer.default_local_dir=/o/{setting}-knapsack", "trainer.nnodes=1",
                     "trainer.n_gpus_per_node=8"):
        assert expected in words


def test_grid_dry_run():
    runs = commands(_launch("grid.sh", PAPER_SETTING, "x=1"))
    symmetric = ["actor_rollout_ref.actor.clip_ratio_high=0.2"]  # the paper's GRPO: no clip-higher
    assert [_overrides(r) for r in runs] == [["recipe.data_dir=" + str(ROOT / "data" / "coba"), "trainer.nnodes=1",
                                              "trainer.n_gpus_per_node=8", f"allocator={a}",
                                              *(symmetric if a == "grpo" else []), "x=1"]
                                             for a in ("grpo", "knapsack", "coba")]
    grpo = compose_recipe("coba", PAPER_SETTING, *_overrides(runs[0])[3:-1])
    coba = compose_recipe("coba", PAPER_SETTING, *_overrides(runs[2])[3:-1])
    assert (grpo.actor_rollout_ref.actor.clip_ratio_high, coba.actor_rollout_ref.actor.clip_ratio_high) == (0.2, 0.28)
    runs = commands(_launch("grid.sh", PAPER_SETTING, BASELINES="1"))
    assert [w.split("=", 1)[1] for r in runs for w in r if w.startswith("allocator=")] == [
        "grpo", "knapsack", "coba", "static_exploit", "static_explore", "linear_decay", "explore_to_exploit",
        "coba_official"]
    kappa = commands(_launch("grid.sh", PAPER_SETTING, SWEEP="kappa"))
    assert [r[-1] for r in kappa] == ["allocator.kappa=7", "allocator.kappa=15", "allocator.kappa=21"]
    assert _launch("grid.sh", PAPER_SETTING, SWEEP="nope").returncode == 2
    assert _launch("grid.sh", "no_such_setting").returncode == 2


SWEEP_RUNS = [(b, a) for b in (2048, 4096, 8192) for a in ("grpo", "knapsack", "coba")]


@pytest.mark.parametrize("setting", ["qwen2.5-7b-instruct", "qwen3-4b-base"])
def test_budget_sweep(setting):
    """Every allocator at B_total 2048 / 4096 / 8192 with rollout.n = B_total / M; the recipe's own B_total (M x 16)
    is the plain run, under the plain run's name and overrides. Every run composes and passes the axes' checks; GRPO
    gets n each. One launch per setting (the grid composes the recipe twice for M and n: seconds)."""
    from verl_ext.axes import build_allocator

    tasks = SETTINGS[setting][1]
    runs = commands(_launch("grid.sh", setting, SWEEP="budget", DATA_DIR="/d"))
    for (budget, allocator), words in zip(SWEEP_RUNS, runs, strict=True):
        plain = budget == tasks * 16
        assert f"trainer.experiment_name={setting}-{allocator}{'' if plain else f'-b{budget}'}" in words
        sweep = [f"actor_rollout_ref.rollout.n={budget // tasks}", f"data_selection.rollout_budget={budget}"]
        clip = ["actor_rollout_ref.actor.clip_ratio_high=0.2"] if allocator == "grpo" else []
        assert _overrides(words)[3:] == [f"allocator={allocator}", *clip] + ([] if plain else sweep)
        cfg = _compose(setting, *_overrides(words))
        assert (rollout_budget(cfg), cfg.actor_rollout_ref.rollout.n) == (budget, budget // tasks)
        if cfg.allocator.name == "fixed":
            assert set(build_allocator(cfg.allocator, 0).allocate(0, list(range(tasks)), budget)) == {budget // tasks}
        check_recipe(cfg)


def test_cpu_launcher_dry_run():
    prep, train = commands(_launch("cpu_embedded.sh", "trainer.total_training_steps=2", DATA_DIR="/d", FORCE="1"))
    assert " ".join(prep).endswith("-m data_prep arithmetic --out /d --train-size 6 --test-size 8")
    assert train[3:7] == ["--cpu", "--config-dir", str(RECIPES), "+coba=cpu_embedded"]
    assert train[-1] == "trainer.total_training_steps=2" and "trainer.nnodes=1" not in train
    assert "trainer.experiment_name=cpu_embedded-coba" in train
    assert any(w.startswith("actor_rollout_ref.model.path=") and "SmolLM2-135M-Instruct" in w for w in train)


def test_prepare_data_dry_run(tmp_path):
    *runs, overlap = commands(_launch("prepare_data.sh", DATA_DIR=str(tmp_path), DAPO_MATH_INPUT="/dl/dapo.parquet"))
    assert [r[3] for r in runs] == ["dapo_math", *BENCHMARKS]
    assert runs[0][-2:] == ["--input", "/dl/dapo.parquet"] and all(r[4:6] == ["--out", str(tmp_path)] for r in runs)
    assert overlap[1:5] == ["-m", "data_prep.overlap", "--train", f"{tmp_path}/dapo_math/train.parquet"]
    assert overlap[5:-2] == ["--eval", *(f"{tmp_path}/{b}/test.parquet" for b in BENCHMARKS)]


def test_scripts_parse():
    scripts = sorted(SCRIPTS.glob("coba/*.sh")) + [SCRIPTS / "common.sh"]
    assert len(scripts) == 10
    check_scripts(scripts)
