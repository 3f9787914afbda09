"""CBS recipes (recipes/cbs) and launchers (scripts/cbs): the paper's settings ("Contextual Rollout Bandits" §6.1,
App. D Table 4) land where verl reads them under each objective, every grid cell (Table 2, the ablations, the buffer
sweep) composes with its objective's scheduler settings and passes the axes' and verl's checks, and the launchers
build the right commands (DRY_RUN=1). prepare_data.sh runs on the hub fixtures (its merge of the two training sources
is this recipe's own code). No training here (scripts/cbs/cpu_embedded.sh runs the CPU preset)."""

import functools
import os
import subprocess

import pytest
from tests.recipes.recipes import (
    RECIPES, ROOT, SCRIPTS, check_recipe, check_scripts, commands, compose_recipe, launch, rollout_budget,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")

SETTINGS = {  # name: (hub id, rollout tensor parallel size)
    "qwen3-1.7b-base": ("Qwen/Qwen3-1.7B-Base", 1),
    "qwen3-4b-base": ("Qwen/Qwen3-4B-Base", 2),
    "qwen3-8b-base": ("Qwen/Qwen3-8B-Base", 4),
}
# objective: (loss mode, clip low, clip high, loss aggregation, prompts generated per step, steps, prefilters)
OBJECTIVES = {
    "grpo": ("vanilla", 0.2, 0.2, "token-mean", 128, 500, []),
    "dapo": ("vanilla", 0.2, 0.28, "token-mean", 384, 200, [{"name": "dapo_dynamic", "oversample": 3}]),
    "gspo": ("gspo", 3e-4, 4e-4, "seq-mean-token-mean", 128, 500, []),
}
# CBS App. D Table 4 (columns mapped by a [decision]), per objective: (entropy threshold e_min, epsilon_min)
SCHEDULER = {"grpo": (0.1, 0.2), "dapo": (0.5, 0.2), "gspo": (0.5, 0.005)}
# Table 4 cells that differ from their column elsewhere, transcribed as printed:
# (setting, objective, filter name) -> {key: value}
TABLE4_EXCEPTIONS = {
    ("qwen3-4b-base", "gspo", "cbs"): {"warmup": 0},
    ("qwen3-8b-base", "dapo", "cbs"): {"entropy_threshold": 0.8},
}
ABLATIONS = {"cbs_random": ("random_scores", True), "cbs_no_ema": ("use_ema", False),
             "cbs_no_entropy": ("entropy_weight", 0.0)}
BENCHMARKS = ("aime24", "aime25", "amc23", "math500", "minerva", "olympiadbench")
GRID = [(o, f) for o in ("grpo", "dapo", "gspo") for f in ("keep_all", "cbs_star", "cbs")]
PAPER_SETTING = "qwen3-4b-base"  # the ablations' and the buffer sweep's model (App. E.2, E.3)
BUFFERS = (1024, 2048, 3072, 4096, 5120)


def _launch(script: str, *args: str, **env: str):
    return launch("cbs", script, *args, **env)



def _overrides(words: list[str]) -> list[str]:
    """A printed training command's Hydra overrides after ``+cbs=SETTING``."""
    return words[next(i for i, w in enumerate(words) if w.startswith("+cbs=")) + 1:]


def _settings_overrides(words: list[str]) -> list[str]:
    """The overrides from ``+objective=`` on: objective, filter, their recipe settings, the user's."""
    return words[next(i for i, w in enumerate(words) if w.startswith("+objective=")):]


@functools.cache
def _command(setting: str, *args: str) -> tuple[str, ...]:
    (words,) = commands(_launch(f"{setting}.sh", *args, DATA_DIR="/data", OUT_DIR="/out"))
    return tuple(words)


def _compose(setting: str, *overrides: str):
    return compose_recipe("cbs", setting, *overrides)



def _check_objective(cfg, objective: str) -> None:
    loss_mode, low, high, agg, prompts, steps, prefilters = OBJECTIVES[objective]
    actor = cfg.actor_rollout_ref.actor
    assert (actor.policy_loss.loss_mode, actor.clip_ratio_low, actor.clip_ratio_high) == (loss_mode, low, high)
    assert actor.loss_agg_mode == agg and not actor.use_kl_loss and not cfg.algorithm.use_kl_in_reward
    assert (cfg.data.train_batch_size, cfg.trainer.total_training_steps) == (prompts, steps)
    assert [dict(p) for p in cfg.data_selection.prefilters] == prefilters
    assert rollout_budget(cfg) == prompts * 8  # every generated rollout counts (DAPO: 3 x 1,024)


def _check_scheduler(cfg, setting: str, objective: str, choice: str, **swept) -> None:
    """Table 4's row for (setting, objective, filter): the objective's e_min / epsilon_min, the shared columns;
    an ablation (``choice``) changes only its own key, a sweep the keys in ``swept``."""
    flt = cfg.rollout_filter
    name = "cbs_star" if choice == "cbs_star" else "cbs"
    assert flt.name == name
    expected = dict(zip(("entropy_threshold", "epsilon_min"), SCHEDULER[objective]),
                    epsilon0=1.0, lr=1e-4, warmup=50, ema=0.9, epsilon_decay=0.008, entropy_weight=1.0, hidden=64)
    expected |= {"keep_fraction": 0.3} if name == "cbs_star" else {"buffer_size": 2048, "batch_size": None}
    expected |= TABLE4_EXCEPTIONS.get((setting, objective, name), {})
    expected |= dict([ABLATIONS[choice]]) if choice in ABLATIONS else {"random_scores": False, "use_ema": True}
    expected |= swept
    assert {k: flt[k] for k in expected} == expected


@pytest.mark.parametrize("objective", sorted(OBJECTIVES))
@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_setting_has_the_paper_hyperparameters(setting, objective):
    model, tp = SETTINGS[setting]
    cfg = _compose(setting, *_overrides(list(_command(setting, objective))))
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    assert cfg.actor_rollout_ref.model.path == model and rollout.tensor_model_parallel_size == tp
    assert cfg.algorithm.adv_estimator == "grpo" and cfg.algorithm.norm_adv_by_std_in_grpo
    assert (actor.optim.optimizer, actor.optim.lr, actor.ppo_epochs) == ("AdamW", 1e-6, 1)
    assert (actor.ppo_mini_batch_size, rollout.n, rollout.temperature) == (16, 8, 1.0)  # 16 prompts x 8 rollouts
    assert (cfg.data.max_response_length, cfg.data.max_prompt_length) == (4096, 2048)
    _check_objective(cfg, objective)
    assert cfg.rollout_filter.name == "keep_all" and cfg.selector.name == "uniform" and cfg.allocator.name == "fixed"
    val = rollout.val_kwargs
    assert (val.n, val.temperature, val.do_sample) == (1, 1.0, True)  # App. D: Avg@1 on the large sets
    assert dict(cfg.data_selection.val_n) == {"aime24": 16, "aime25": 16, "amc23": 16}  # Avg@16 on the small ones
    assert cfg.data.train_files == "/data/dapo_math_lvl3to5/train.parquet"
    assert list(cfg.data.val_files) == [f"/data/{b}/test.parquet" for b in BENCHMARKS]
    assert cfg.reward.custom_reward_function.path == "pkg://verl_ext.rewards"
    assert (cfg.trainer.test_freq, cfg.trainer.save_freq, cfg.trainer.max_actor_ckpt_to_keep) == (20, 20, None)
    assert cfg.trainer.experiment_name == f"{setting}-{objective}-keep_all"
    assert cfg.trainer.default_local_dir == f"/out/{setting}-{objective}-keep_all"
    check_recipe(cfg)


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_recipe_alone_is_grpo_without_a_filter(setting):
    """Composed without the launcher, a recipe is its GRPO run: ``+objective=grpo rollout_filter=keep_all``
    changes nothing."""
    assert _compose(setting) == _compose(setting, "+objective=grpo", "rollout_filter=keep_all")


def test_recipes_leave_the_objectives_keys_to_the_objectives():
    """No recipe file sets a key an objective preset sets (unless to the same value in every objective), so
    ``+cbs=`` and ``+objective=`` compose in either order."""
    from verl_ext.launch.recipe_keys import recipe_values

    presets = {o: recipe_values(ROOT / "verl_ext" / "config" / "objective" / f"{o}.yaml") for o in OBJECTIVES}
    for path in sorted((RECIPES / "cbs").glob("*.yaml")):
        for key, value in recipe_values(path).items():
            assert all(preset.get(key, value) == value for preset in presets.values()), (path.name, key)
    cfg = compose_recipe("cbs", PAPER_SETTING, "+objective=dapo")
    assert cfg.actor_rollout_ref.actor.clip_ratio_high == 0.28


@functools.cache
def _grid(setting: str, **env: str) -> list[list[str]]:
    return commands(_launch("grid.sh", setting, DATA_DIR="/data", **env))


def _grid_cells() -> list[tuple[str, str, tuple[str, ...]]]:
    """(setting, run name, overrides) of the Table 2 grid of every setting, the ablations and buffer sweep."""
    cells = []
    for setting in sorted(SETTINGS):
        cells += [(setting, f"{o}-{f}", ()) for o, f in GRID]
    cells += [(PAPER_SETTING, f"dapo-{a}", ("SWEEP=ablation",)) for a in ABLATIONS]
    cells += [(PAPER_SETTING, f"grpo-cbs-buffer{b}", ("SWEEP=buffer",)) for b in BUFFERS if b != 2048]
    return cells


@pytest.mark.parametrize(("setting", "name", "env"), _grid_cells(), ids=lambda v: "/".join(v) if isinstance(v, tuple)
                         else v)
def test_grid_cell_composes_with_its_scheduler_settings(setting, name, env):
    runs = _grid(setting, **dict(e.split("=") for e in env))
    (words,) = [w for w in runs if f"trainer.experiment_name={setting}-{name}" in w]
    cfg = _compose(setting, *_overrides(words))
    objective, filter_choice = name.split("-")[:2]
    assert _settings_overrides(words)[:2] == [f"+objective={objective}", f"rollout_filter={filter_choice}"]
    _check_objective(cfg, objective)
    if filter_choice == "keep_all":
        assert cfg.rollout_filter.name == "keep_all"
    else:
        swept = {"buffer_size": int(name.rsplit("buffer", 1)[1])} if "buffer" in name else {}
        _check_scheduler(cfg, setting, objective, filter_choice, **swept)
    check_recipe(cfg)


def test_grid_dry_run():
    names = [w.split("=", 1)[1] for r in _grid(PAPER_SETTING) for w in r if w.startswith("trainer.experiment_name=")]
    assert names == [f"{PAPER_SETTING}-{o}-{f}" for o, f in GRID]
    grpo_cbs = next(r for r in _grid(PAPER_SETTING) if f"trainer.experiment_name={PAPER_SETTING}-grpo-cbs" in r)
    assert _settings_overrides(grpo_cbs) == ["+objective=grpo", "rollout_filter=cbs", "rollout_filter.entropy_threshold=0.1",
                                             "rollout_filter.epsilon_min=0.2"]
    runs = commands(_launch("grid.sh", PAPER_SETTING, "trainer.val_before_train=false", OBJECTIVES="dapo", FILTERS="cbs"))
    assert [_settings_overrides(r) for r in runs] == [[
        "+objective=dapo", "rollout_filter=cbs", "data.train_batch_size=384", "trainer.total_training_steps=200",
        "rollout_filter.entropy_threshold=0.5", "rollout_filter.epsilon_min=0.2", "trainer.val_before_train=false"]]
    ablation = commands(_launch("grid.sh", PAPER_SETTING, SWEEP="ablation", OBJECTIVES="grpo dapo gspo"))
    assert [w.split("=", 1)[1] for r in ablation for w in r if w.startswith("rollout_filter=")] == [*ABLATIONS] * 3
    assert _launch("grid.sh", PAPER_SETTING, SWEEP="nope").returncode == 2
    assert _launch("grid.sh", "no_such_setting").returncode == 2
    assert _launch("grid.sh", "_common").returncode == 2


def test_buffer_sweep():
    """GRPO + CBS at buffer 1024..5120; the recipe's own 2048 is the grid's plain grpo-cbs run."""
    runs = _grid(PAPER_SETTING, SWEEP="buffer")
    names = [w.split("=", 1)[1] for r in runs for w in r if w.startswith("trainer.experiment_name=")]
    assert names == [f"{PAPER_SETTING}-grpo-cbs" + ("" if b == 2048 else f"-buffer{b}") for b in BUFFERS]
    for buffer, words in zip(BUFFERS, runs, strict=True):
        sweep = [] if buffer == 2048 else [f"rollout_filter.buffer_size={buffer}"]
        assert _settings_overrides(words) == ["+objective=grpo", "rollout_filter=cbs",
                                              "rollout_filter.entropy_threshold=0.1", "rollout_filter.epsilon_min=0.2",
                                              *sweep]
    gspo = commands(_launch("grid.sh", PAPER_SETTING, SWEEP="buffer", OBJECTIVES="gspo", BUFFERS="2048 1024"))
    assert [_settings_overrides(r)[-1] for r in gspo] == ["rollout_filter.warmup=0", "rollout_filter.buffer_size=1024"]


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_launcher_dry_run(setting):
    words = list(_command(setting, "dapo", "cbs_star", "trainer.test_freq=5"))
    assert words[1:6] == ["-m", "verl_ext.main", "--config-dir", str(RECIPES), f"+cbs={setting}"]
    e_min, eps = SCHEDULER["dapo"]
    assert _settings_overrides(words) == [
        "+objective=dapo", "rollout_filter=cbs_star", "data.train_batch_size=384", "trainer.total_training_steps=200",
        f"rollout_filter.entropy_threshold={e_min}", f"rollout_filter.epsilon_min={eps}",
        "trainer.test_freq=5"]  # the user's overrides, last
    for expected in ("recipe.data_dir=/data", f"trainer.experiment_name={setting}-dapo-cbs_star",
                     f"trainer.default_local_dir=/out/{setting}-dapo-cbs_star", "trainer.nnodes=1",
                     "trainer.n_gpus_per_node=8"):
        assert expected in words
    assert _settings_overrides(list(_command(setting)))[:2] == ["+objective=grpo", "rollout_filter=keep_all"]
    assert _settings_overrides(list(_command(setting, "gspo", "x=1"))) == [
        "+objective=gspo", "rollout_filter=keep_all", "x=1"]


def test_launcher_refuses_what_it_cannot_set_up():
    for args in (["rollout_filter=cbs"], ["dapo", "+objective=gspo"], ["ppo"], ["grpo", "cbs_typo"]):
        proc = _launch("qwen3-4b-base.sh", *args)
        assert proc.returncode == 2 and not proc.stdout, args
    assert "first two arguments" in _launch("qwen3-4b-base.sh", "rollout_filter=cbs").stderr
    assert "unknown rollout_filter 'cbs_typo'" in _launch("qwen3-4b-base.sh", "grpo", "cbs_typo").stderr


def test_cpu_preset_composes_for_the_cpu():
    from verl_ext.cpu import cpu_overrides

    _, train = commands(_launch("cpu_embedded.sh", FORCE="1", DATA_DIR="/d"))
    assert _settings_overrides(train) == ["+objective=grpo", "rollout_filter=cbs_star",
                                          "rollout_filter.entropy_threshold=0.1", "rollout_filter.epsilon_min=0.2",
                                          "rollout_filter.warmup=1", "rollout_filter.epsilon0=0.5"]
    cfg = _compose("cpu_embedded", *cpu_overrides(), *_overrides(train))
    rollout = cfg.actor_rollout_ref.rollout
    assert (rollout.name, cfg.trainer.device, cfg.data.train_batch_size, rollout_budget(cfg)) == ("hf", "cpu", 4, 16)
    assert (cfg.rollout_filter.name, cfg.rollout_filter.keep_fraction, cfg.rollout_filter.warmup) == ("cbs_star", 0.3, 1)
    assert cfg.data.train_files == "/d/arithmetic/train.parquet" and cfg.trainer.total_training_steps == 3
    assert cfg.actor_rollout_ref.actor.ppo_mini_batch_size == 4 and cfg.data.max_response_length == 64
    check_recipe(cfg)
    _, train = commands(_launch("cpu_embedded.sh", "dapo", "cbs", FORCE="1"))
    cfg = _compose("cpu_embedded", *cpu_overrides(), *_overrides(train))
    assert (cfg.data.train_batch_size, rollout_budget(cfg), cfg.trainer.total_training_steps) == (12, 48, 3)
    assert (cfg.rollout_filter.name, cfg.rollout_filter.buffer_size, cfg.rollout_filter.entropy_threshold) == (
        "cbs", 32, 0.5)
    assert cfg.data_selection.prefilters[0].name == "dapo_dynamic"
    check_recipe(cfg)


def test_cpu_launcher_dry_run():
    prep, train = commands(_launch("cpu_embedded.sh", "gspo", "trainer.total_training_steps=2", DATA_DIR="/d",
                                FORCE="1"))
    assert " ".join(prep).endswith("-m data_prep arithmetic --out /d --train-size 12 --test-size 8")
    assert train[3:7] == ["--cpu", "--config-dir", str(RECIPES), "+cbs=cpu_embedded"]
    assert train[-1] == "trainer.total_training_steps=2" and "trainer.nnodes=1" not in train
    assert "trainer.experiment_name=cpu_embedded-gspo-cbs_star" in train
    assert "rollout_filter.epsilon_min=0.005" in train
    assert any(w.startswith("actor_rollout_ref.model.path=") and "SmolLM2-135M-Instruct" in w for w in train)


def test_prepare_data_dry_run(tmp_path):
    *runs, overlap = commands(_launch("prepare_data.sh", DATA_DIR=str(tmp_path), DAPO_MATH_INPUT="/dl/dapo.parquet"))
    (merge,) = [r for r in runs if r[2] == "data_prep.merge"]
    prep = [r for r in runs if r[2] != "data_prep.merge"]
    assert [r[3] for r in prep] == ["dapo_math", "math_lvl3to5", *BENCHMARKS]
    assert prep[0][-2:] == ["--input", "/dl/dapo.parquet"] and all(r[4:6] == ["--out", str(tmp_path)] for r in prep)
    assert merge[3:7] == ["--out", *(f"{tmp_path}/{n}/train.parquet" for n in ("dapo_math_lvl3to5", "dapo_math",
                                                                                "math_lvl3to5"))]
    assert overlap[1:5] == ["-m", "data_prep.overlap", "--train", f"{tmp_path}/dapo_math_lvl3to5/train.parquet"]
    assert overlap[5:-2] == ["--eval", *(f"{tmp_path}/{b}/test.parquet" for b in BENCHMARKS)]


def test_prepare_data_on_the_hub_fixtures(tmp_path):
    """The real script on local copies: one training file of both sources with task keys unique over it (two
    files would repeat each source's 0..n-1: the trainer's task pool refuses them), reward by source."""
    from data_prep.schema import read_rows
    from verl_ext.trainer.build_axes import task_pool

    hub = ROOT / "tests" / "fixtures" / "hub"
    inputs = {"DAPO_MATH": "dapo-math-17k.parquet", "MATH_LVL3TO5": "math_lighteval_train.parquet",
              "AIME24": "aime_2024.parquet", "AIME25": "aime25_test.jsonl", "AMC23": "amc23.parquet",
              "MATH500": "math500_test.jsonl", "MINERVA": "minerva_test.jsonl",
              "OLYMPIADBENCH": "olympiadbench_OE_TO_maths_en_COMP.parquet"}
    env = {f"{k}_INPUT": str(hub / v) for k, v in inputs.items()}
    proc = _launch("prepare_data.sh", DATA_DIR=str(tmp_path), DRY_RUN="0", **env)
    assert proc.returncode == 0, proc.stderr
    dapo, math = (read_rows(tmp_path / n / "train.parquet") for n in ("dapo_math", "math_lvl3to5"))
    merged = read_rows(tmp_path / "dapo_math_lvl3to5" / "train.parquet")
    assert [r["extra_info"]["index"] for r in merged] == list(range(len(dapo) + len(math)))
    assert [r["data_source"] for r in merged] == ["dapo_math"] * len(dapo) + ["math_lvl3to5"] * len(math)
    assert [(r["prompt"], r["reward_model"]) for r in merged] == [(r["prompt"], r["reward_model"]) for r in dapo + math]
    assert [r["extra_info"]["source_index"] for r in merged] == [r["extra_info"]["index"] for r in dapo + math]
    assert len(task_pool(r["extra_info"] for r in merged).index) == len(merged)
    with pytest.raises(ValueError, match="unique"):
        task_pool([r["extra_info"] for r in dapo + math])
    for bench in BENCHMARKS:
        assert read_rows(tmp_path / bench / "test.parquet")
    assert (tmp_path / "overlap_dapo_math_lvl3to5.json").exists()
    again = _launch("prepare_data.sh", DATA_DIR=str(tmp_path), DRY_RUN="0", **env)  # kept: nothing rebuilt
    assert again.returncode == 0 and f"exists: {tmp_path}/dapo_math_lvl3to5/train.parquet" in again.stdout


def test_merge_drops_a_prompt_already_seen(tmp_path):
    from data_prep.schema import make_row, read_rows, write_rows

    def rows(questions, source):
        return [make_row(data_source=source, question=q, ability="math", ground_truth="1", index=i, split="train")
                for i, q in enumerate(questions)]

    write_rows(rows(["a", "b"], "dapo_math"), tmp_path / "x.parquet")
    write_rows(rows(["b", "c"], "math_lvl3to5"), tmp_path / "y.parquet")
    proc = subprocess.run(["bash", "-c", f'source "{SCRIPTS}/cbs/common.sh"; merge_train "$@"', "merge",
                           str(tmp_path / "m.parquet"), str(tmp_path / "x.parquet"), str(tmp_path / "y.parquet")],
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "FORCE")})
    assert proc.returncode == 0, proc.stderr
    merged = read_rows(tmp_path / "m.parquet")
    assert [(r["prompt"][0]["content"], r["data_source"], r["extra_info"]["index"], r["extra_info"]["source_index"])
            for r in merged] == [("a", "dapo_math", 0, 0), ("b", "dapo_math", 1, 1), ("c", "math_lvl3to5", 2, 1)]
    assert "1 dropped" in proc.stdout


def test_scripts_parse():
    scripts = sorted(SCRIPTS.glob("cbs/*.sh")) + [SCRIPTS / "common.sh"]
    assert len(scripts) == 9
    check_scripts(scripts)
