"""Progress-aware sampling recipes (recipes/progress) and launchers (scripts/progress): the paper's settings (Yan,
"Progress-Aware Prompt Sampling", CS224R, §3-4 and App. A) land where verl reads them under RLOO, uniform and every
variant composes with its selector's paper values and passes the axes' and verl's checks, and the launchers build the
right commands (DRY_RUN=1): the grid, the data (held-out / SFT / RL splits, decontaminated by task), the SFT warm
start the recipe trains from, RFT naive / clean from the uniform run's last checkpoint, the evaluation. No training
here (scripts/progress/cpu_embedded.sh runs the CPU preset; tests/trainer/test_progress_chain_on_cpu.py)."""

import functools

import pytest
from tests.recipes.recipes import (
    RECIPES, ROOT, SCRIPTS, check_recipe, check_scripts, commands, compose_recipe, launch, rollout_budget,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")

SETTING = "qwen2.5-0.5b_countdown"
PROGRESS = {"name": "progress", "alpha_short": 0.3, "alpha_long": 0.03, "progress_weight": 0.5,
            "bucket_column": "bucket"}
# selector choice: {key: value} of the composed selector config (Yan §3.3, App. A Table 5)
SELECTORS = {
    "uniform": {"name": "uniform"},
    "bucket_uniform": {**PROGRESS, "prior": "uniform", "epsilon": 0.2, "temperature": 0.2, "cap": 0.5,
                       "ratio_clip": None, "random_buckets": 0},
    "empirical": {**PROGRESS, "prior": "data", "epsilon": 0.5, "temperature": 0.2, "cap": 0.25, "ratio_clip": None,
                  "random_buckets": 0},
    "conservative": {**PROGRESS, "prior": "data", "epsilon": 0.8, "temperature": 0.5, "cap": 0.18,
                     "ratio_clip": None, "random_buckets": 0},
    "density_ratio": {**PROGRESS, "prior": "data", "cap": None, "ratio_clip": [0.5, 1.5], "random_buckets": 0},
    "random_buckets": {**PROGRESS, "prior": "data", "epsilon": 0.5, "temperature": 0.2, "cap": 0.25,
                       "random_buckets": 16},
    "prompt_utility": {"name": "prompt_utility", "alpha_short": 0.3, "alpha_long": 0.03},
}
ORDER = ["uniform", "bucket_uniform", "empirical", "conservative", "density_ratio", "random_buckets",
         "prompt_utility"]  # the grid's, the paper's order
# Launcher settings of these scripts a developer's shell may hold (tests.recipes.recipes.LAUNCHER_ENV has the rest)
CLEAN = {"RUN": "", "STEP": "", "RFT_PROMPTS": "", "SFT_SIZE": "", "TRAIN_SIZE": "", "WARM_START": "", "BASE_MODEL": "",
         "CPU": "", "COG_BEHAV_TRAIN_INPUT": "", "COG_BEHAV_TEST_INPUT": "", "SFT_MIX": ""}


def _launch(script: str, *args: str, **env: str):
    return launch("progress", script, *args, **{**CLEAN, **env})


def _overrides(words: list[str]) -> list[str]:
    """A printed training command's Hydra overrides after ``+progress=SETTING``."""
    return words[next(i for i, w in enumerate(words) if w.startswith("+progress=")) + 1:]


def _settings_overrides(words: list[str]) -> list[str]:
    """The overrides from ``+objective=`` on: objective, selector, their recipe settings, the user's."""
    return words[next(i for i, w in enumerate(words) if w.startswith("+objective=")):]


@functools.cache
def _command(*args: str) -> tuple[str, ...]:
    (words,) = commands(_launch(f"{SETTING}.sh", *args, DATA_DIR="/data", OUT_DIR="/out"))
    return tuple(words)


@functools.cache
def _grid(*args: str, **env: str) -> list[list[str]]:
    return commands(_launch("grid.sh", *args, DATA_DIR="/data", OUT_DIR="/out", **env))


@functools.cache
def _compose(setting: str, *overrides: str):
    return compose_recipe("progress", setting, *overrides)


def _check_rloo(cfg) -> None:
    """RLOO (Yan §3.1, Eq. 1-2): leave-one-out advantages, REINFORCE with the sequence-level importance weight capped at 2
    (verl's rollout correction in bypass mode: the rollout's log-probs are the old ones), no KL, no entropy bonus."""
    actor, corr = cfg.actor_rollout_ref.actor, cfg.algorithm.rollout_correction
    assert cfg.algorithm.adv_estimator == "rloo"
    assert (corr.rollout_is, corr.rollout_is_threshold, corr.rollout_rs) == ("sequence", 2.0, None)
    assert corr.bypass_mode and corr.loss_type == "reinforce"
    assert actor.policy_loss.loss_mode == "bypass_mode" and actor.policy_loss.rollout_correction == corr
    assert actor.loss_agg_mode == "seq-mean-token-sum" and cfg.actor_rollout_ref.rollout.calculate_log_probs
    assert not cfg.algorithm.use_kl_in_reward and not actor.use_kl_loss and actor.entropy_coeff == 0
    assert list(cfg.data_selection.prefilters) == []
    assert (cfg.allocator.name, cfg.rollout_filter.name) == ("fixed", "keep_all")


def _check_selector(cfg, choice: str) -> None:
    expected = SELECTORS[choice]
    assert {k: cfg.selector[k] for k in expected} == expected


@pytest.mark.parametrize("selector", ORDER)
def test_grid_run_has_the_paper_hyperparameters(selector):
    (words,) = [w for w in _grid() if f"trainer.experiment_name={SETTING}-rloo-{selector}" in w]
    assert _settings_overrides(words) == ["+objective=rloo", f"selector={selector}"]
    cfg = _compose(SETTING, *_overrides(words))
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    # the policy: the paper's public SFT checkpoint (ours, offline: scripts/progress/sft.sh from Qwen2.5-0.5B)
    assert cfg.recipe.base_model == "Qwen/Qwen2.5-0.5B"
    assert cfg.actor_rollout_ref.model.path == "asingh15/qwen-sft-countdown-defaultproj"
    # 100 steps of 128 prompts x 8 rollouts, lr 1e-5, temperature 1.0 [paper]; one update per step [decision]
    assert (cfg.data.train_batch_size, rollout.n, rollout.temperature) == (128, 8, 1.0)
    assert (rollout.top_p, rollout.top_k) == (1.0, -1) and rollout_budget(cfg) == 1024
    assert (actor.optim.optimizer, actor.optim.lr, actor.ppo_epochs, actor.ppo_mini_batch_size) == ("AdamW", 1e-5, 1,
                                                                                                     128)
    assert (cfg.trainer.total_training_steps, cfg.trainer.total_epochs) == (100, 1000)
    assert (cfg.data.max_response_length, cfg.data.max_prompt_length) == (1024, 256)
    _check_rloo(cfg)
    _check_selector(cfg, selector)
    # validation = the paper's evaluation protocol: 200 held-out prompts and the official 50-prompt test split x 16,
    # T 0.6, top-k 20, top-p 0.95, 1024 tokens
    val = rollout.val_kwargs
    assert (val.n, val.temperature, val.top_k, val.top_p, val.do_sample) == (16, 0.6, 20, 0.95, True)
    assert cfg.data.train_files == "/data/countdown/train.parquet"
    assert list(cfg.data.val_files) == ["/data/countdown/test.parquet",
                                        "/data/asingh15_countdown_tasks_3to4/test.parquet"]
    assert cfg.reward.custom_reward_function.path == "pkg://verl_ext.rewards"
    assert cfg.trainer.val_before_train and (cfg.trainer.test_freq, cfg.trainer.save_freq) == (10, 50)
    assert cfg.trainer.experiment_name == f"{SETTING}-rloo-{selector}"
    assert cfg.trainer.default_local_dir == f"/out/{SETTING}-rloo-{selector}"
    check_recipe(cfg)


def test_longest_course_prompt_fits_max_prompt_length(tmp_path):
    """The course's prompt (asingh15/countdown_tasks_3to4) at its longest, four 3-digit numbers and a 4-digit
    target, numbers printed as numpy prints them (padded), through the converter, verl's RLHFDataset and the chat
    template as verl's agent loop applies it: it fits the recipe's max_prompt_length with a margin (verl 0.9.1 would
    left-truncate a longer one, agent_loop.py:437-445). Tokenizer: the embedded SmolLM2's (offline, ChatML like
    Qwen2.5's), which counts 170 tokens here where Qwen2.5's BPE counts 165 (recipes/progress/README.md)."""
    import pandas as pd
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from data_prep.__main__ import main
    from tests.fixtures.hub.build_fixtures import course_countdown
    from verl_ext.models.embedded import embedded_model_path

    longest = [course_countdown([100, 100, 100, 100], 1000), course_countdown([1, 1, 1, 100], 1000)]
    longest[1]["prompt"] = longest[1]["prompt"].replace("[1 1 1 100]", "[  1   1   1 100]")
    pd.DataFrame(longest).to_parquet(tmp_path / "longest.parquet")
    assert main(["asingh15_countdown_tasks_3to4", "--input", str(tmp_path / "longest.parquet"), "--split", "test",
                 "--out", str(tmp_path)]) == 0
    data = _compose(SETTING, "+objective=rloo").data
    config = OmegaConf.create({"max_prompt_length": data.max_prompt_length, "prompt_key": data.prompt_key,
                               "filter_overlong_prompts": False, "cache_dir": str(tmp_path / "cache")})
    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path())
    dataset = RLHFDataset([str(tmp_path / "asingh15_countdown_tasks_3to4" / "test.parquet")], tokenizer, config)
    texts = [tokenizer.apply_chat_template(dataset[i]["raw_prompt"], add_generation_prompt=True, tokenize=False)
             for i in range(len(dataset))]
    assert texts == [row["prompt"] for row in longest]  # the course's string, rebuilt by the chat template
    lengths = [len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in texts]
    assert data.max_prompt_length == 256 and 150 < max(lengths) <= data.max_prompt_length - 64, lengths


def test_recipe_alone_is_the_conservative_variant_and_needs_the_objective():
    """Composed without the launcher, the recipe chooses the conservative selector; its objective comes from
    +objective=rloo (what the launcher adds), in either order."""
    alone = _compose(SETTING, "+objective=rloo")
    assert _settings_overrides(list(_command())) == ["+objective=rloo", "selector=conservative"]
    assert alone == _compose(SETTING, "+objective=rloo", "selector=conservative")
    _check_selector(alone, "conservative")
    _check_rloo(alone)
    bare = _compose(SETTING).actor_rollout_ref.actor.policy_loss  # the loss is the preset's: launchers always add it
    assert _compose(SETTING).algorithm.adv_estimator == "rloo" and bare.loss_mode == "vanilla"


def test_recipes_leave_the_objectives_keys_to_the_objective():
    from verl_ext.launch.recipe_keys import recipe_values

    rloo = recipe_values(ROOT / "verl_ext" / "config" / "objective" / "rloo.yaml")
    for path in sorted((RECIPES / "progress").glob("*.yaml")):
        for key, value in recipe_values(path).items():
            assert rloo.get(key, value) == value, (path.name, key)


def test_grid_dry_run():
    names = [w.split("=", 1)[1] for r in _grid() for w in r if w.startswith("trainer.experiment_name=")]
    assert names == [f"{SETTING}-rloo-{s}" for s in ORDER] and set(ORDER) == set(SELECTORS)
    runs = _grid(SETTING, "trainer.val_before_train=false", SELECTORS="random_buckets uniform")
    assert [_settings_overrides(r) for r in runs] == [
        ["+objective=rloo", f"selector={s}", "trainer.val_before_train=false"] for s in ("random_buckets", "uniform")]
    assert _launch("grid.sh", "no_such_setting").returncode == 2
    assert _launch("grid.sh", "_common").returncode == 2


def test_launcher_dry_run():
    words = list(_command("uniform", "trainer.test_freq=5"))
    assert words[1:6] == ["-m", "verl_ext.main", "--config-dir", str(RECIPES), f"+progress={SETTING}"]
    assert _settings_overrides(words) == ["+objective=rloo", "selector=uniform", "trainer.test_freq=5"]
    for expected in ("recipe.data_dir=/data", f"trainer.experiment_name={SETTING}-rloo-uniform",
                     f"trainer.default_local_dir=/out/{SETTING}-rloo-uniform", "trainer.nnodes=1",
                     "trainer.n_gpus_per_node=8"):
        assert expected in words
    assert _settings_overrides(list(_command())) == ["+objective=rloo", "selector=conservative"]
    assert _settings_overrides(list(_command("x=1"))) == ["+objective=rloo", "selector=conservative", "x=1"]
    model = commands(_launch(f"{SETTING}.sh", "uniform", MODEL_PATH="/models/my-sft"))[0]
    assert "actor_rollout_ref.model.path=/models/my-sft" in model  # the user's own SFT checkpoint


def test_launcher_refuses_what_it_cannot_set_up():
    refusals = {("selector=uniform",): "first two arguments", ("+objective=grpo",): "RLOO for every",
                ("uniform", "conservative"): "one selector name", ("ads",): "unknown progress selector 'ads'",
                ("uniform", "objective=gspo"): "RLOO for every"}
    for args, message in refusals.items():
        proc = _launch(f"{SETTING}.sh", *args)
        assert proc.returncode == 2 and not proc.stdout and message in proc.stderr, args


def test_prepare_data_dry_run(tmp_path):
    train, test, split, *sft, course_train, course_test = commands(_launch(
        "prepare_data.sh", DATA_DIR=str(tmp_path), COUNTDOWN_TEST_INPUT="/dl/test.parquet",
        COG_BEHAV_TRAIN_INPUT="/dl/cog_behav_train.parquet"))
    source = f"{tmp_path}/asingh15_countdown_tasks_3to4"  # the paper's data: its train and official test splits
    assert train[1:] == ["-m", "data_prep", "asingh15_countdown_tasks_3to4", "--split", "train", "--out", str(tmp_path)]
    assert test[1:] == ["-m", "data_prep", "asingh15_countdown_tasks_3to4", "--split", "test", "--out", str(tmp_path),
                        "--input", "/dl/test.parquet"]
    assert split[1:] == ["-m", "data_prep.countdown_split", "--input", f"{source}/train.parquet",
                         "--exclude", f"{source}/test.parquet", "--out", str(tmp_path), "--test-size", "200",
                         "--sft-size", "10000", "--sft-test-size", "200", "--train-size", "4000", "--seed", "0"]
    assert [r[1:] for r in sft] == [["-m", "data_prep.sft_messages", "--from-rl",
                                     f"{tmp_path}/countdown_sft_prompts/{s}.parquet",
                                     "--out", f"{tmp_path}/countdown_sft/{s}.parquet"] for s in ("train", "test")]
    # the course's SFT data (the paper checkpoint's), for the RFT mix: from the hub or a local copy
    course = f"{tmp_path}/cog_behav_all_strategies"
    assert course_train[1:] == ["-m", "data_prep.cog_behav_sft", "--split", "train", "--out", f"{course}/train.parquet",
                                "--input", "/dl/cog_behav_train.parquet"]
    assert course_test[1:] == ["-m", "data_prep.cog_behav_sft", "--split", "test", "--out", f"{course}/test.parquet"]
    cfg = _compose(SETTING, f"recipe.data_dir={tmp_path}")  # the recipe trains and validates on these files
    assert (cfg.data.train_files, list(cfg.data.val_files)) == (
        f"{tmp_path}/countdown/train.parquet", [f"{tmp_path}/countdown/test.parquet", f"{source}/test.parquet"])
    small = commands(_launch("prepare_data.sh", DATA_DIR=str(tmp_path), SFT_SIZE="500", TRAIN_SIZE="0"))[2]
    assert small[small.index("--sft-size") + 1] == "500" and small[small.index("--train-size") + 1] == "0"
    assert not any(tmp_path.iterdir())  # a dry run writes nothing


def test_sft_dry_run(tmp_path):
    sft, link = commands(_launch("sft.sh", "optim.lr=2e-5", DATA_DIR=str(tmp_path), OUT_DIR="/out"))
    run = f"/out/sft-{SETTING}"
    assert sft[1:3] == ["-m", "verl_ext.sft"] and "--cpu" not in sft
    assert sft[3:] == ["model.path=Qwen/Qwen2.5-0.5B", f"data.train_files={tmp_path}/countdown_sft/train.parquet",
                       f"data.val_files={tmp_path}/countdown_sft/test.parquet", "data.train_batch_size=64",
                       "data.micro_batch_size_per_gpu=8", "data.max_length=1024", "data.truncation=error",
                       "optim.lr=1e-5", "trainer.total_epochs=2", "trainer.test_freq=after_each_epoch",
                       "checkpoint.save_contents=[hf_model]", "trainer.resume_mode=disable",
                       "trainer.project_name=progress", f"trainer.experiment_name=sft-{SETTING}",
                       f"trainer.default_local_dir={run}", "trainer.n_gpus_per_node=8", "optim.lr=2e-5"]
    # its last step's weights, linked where MODEL_PATH finds them (the offline policy)
    offline = f"{tmp_path}/models/qwen2.5-0.5b-countdown-sft"
    assert link == ["ln", "-sfn", f"{run}/global_step_LAST/huggingface", offline]
    cpu = commands(_launch("sft.sh", DATA_DIR=str(tmp_path), CPU="1", BASE_MODEL="/models/q05"))[0]
    assert cpu[3:5] == ["--cpu", "model.path=/models/q05"] and not any("n_gpus" in w for w in cpu)
    (tmp_path / "models" / "qwen2.5-0.5b-countdown-sft").mkdir(parents=True)
    kept = _launch("sft.sh", DATA_DIR=str(tmp_path))
    assert kept.returncode == 0 and kept.stdout.startswith("exists:")


def test_rft_dry_run(tmp_path):
    run = tmp_path / f"{SETTING}-rloo-uniform"  # the uniform run, trained to step 100
    run.mkdir()
    (run / "latest_checkpointed_iteration.txt").write_text("100\n")
    data = "/data"
    for name in ("naive", "clean"):
        (words,) = commands(_launch("rft.sh", name, DATA_DIR=data, OUT_DIR=str(tmp_path)))
        assert words[1:] == ["-m", "verl_ext.apps.rft", "--model", f"{run}/global_step_100/actor",
                             "--train", f"{data}/countdown/train.parquet",
                             "--sft", f"{data}/cog_behav_all_strategies/train.parquet",  # the paper's SFT data
                             "--test", f"{data}/countdown/test.parquet", "--filter", name,
                             "--out", f"{tmp_path}/{SETTING}-rft_{name}", "--k", "32", "--train-limit", "4000",
                             "--test-limit", "200", "--seed", "0", "--", "trainer.n_gpus_per_node=8"]
        assert not any(w.startswith("optim.lr") for w in words)  # the filter's lr: verl_ext.apps.rft's (1e-5 / 5e-6)
    # another run and step, verl_ext.apps.rft's own flags, SFT overrides after --; on the CPU
    (words,) = commands(_launch("rft.sh", "clean", "--backend", "hf", "--", "optim.lr=1e-6", RUN="/runs/u",
                                STEP="50", CPU="1", RFT_PROMPTS="64"))
    assert words[words.index("--model") + 1] == "/runs/u/global_step_50/actor"
    assert words[words.index("--train-limit") + 1] == "64"
    assert words[-5:] == ["--cpu", "--backend", "hf", "--", "optim.lr=1e-6"]
    (words,) = commands(_launch("rft.sh", "naive", RUN="/runs/u", CPU="1", SFT_MIX="/data/countdown_sft/train.parquet"))
    assert words[words.index("--sft") + 1] == "/data/countdown_sft/train.parquet"  # from our SFT: its data
    # not trained yet: its last step, 100
    assert words[words.index("--model") + 1] == "/runs/u/global_step_100/actor" and "--" not in words
    assert _launch("rft.sh", "strict", RUN=str(run)).returncode == 2
    assert _launch("rft.sh", RUN=str(run)).returncode == 2
    missing = _launch("rft.sh", "naive", RUN=str(tmp_path / "nothing"), DRY_RUN="0", PYTHON="false")
    assert missing.returncode == 2 and "no checkpoint" in missing.stderr


def test_evaluate_dry_run(tmp_path):
    run = tmp_path / f"{SETTING}-rloo-uniform"
    run.mkdir()
    (run / "latest_checkpointed_iteration.txt").write_text("60")
    *evals, tables = commands(_launch("evaluate.sh", "--backend", "hf", DATA_DIR="/data", OUT_DIR=str(tmp_path),
                                      SELECTORS="uniform conservative"))
    assert [e[1:] for e in evals] == [
        ["-m", "eval.evaluate", "--run", f"{tmp_path}/{SETTING}-rloo-{s}", "--steps", step, "--benchmarks",
         "countdown=/data/countdown/test.parquet",
         "countdown_official=/data/asingh15_countdown_tasks_3to4/test.parquet",
         "--preset", "progress", "--backend", "hf"]
        for s, step in (("uniform", "60"), ("conservative", "100"))]
    assert tables[1:] == ["-m", "eval.tables", "progress", "--runs", f"uniform={run}",
                          f"conservative={tmp_path}/{SETTING}-rloo-conservative",
                          f"rft_naive={tmp_path}/{SETTING}-rft_naive/sft",
                          f"rft_clean={tmp_path}/{SETTING}-rft_clean/sft",
                          "--out", f"{tmp_path}/tables.md"]


@pytest.mark.parametrize("selector", ORDER)
def test_cpu_preset_composes_for_the_cpu(selector):
    from verl_ext.cpu import cpu_overrides

    prep, warm, train = commands(_launch("cpu_embedded.sh", selector, FORCE="1", DATA_DIR="/d"))
    assert prep[1:] == ["-m", "data_prep", "countdown", "--out", "/d", "--train-size", "64", "--test-size", "8"]
    assert warm[1:] == ["-m", "verl_ext.apps.warm_start", "--task", "countdown"]
    assert train[3:7] == ["--cpu", "--config-dir", str(RECIPES), "+progress=cpu_embedded"]
    assert f"trainer.experiment_name=cpu_embedded-rloo-{selector}" in train and "trainer.nnodes=1" not in train
    assert any(w.startswith("actor_rollout_ref.model.path=") and "-sft-countdown-" in w for w in train)
    cfg = _compose("cpu_embedded", *cpu_overrides(), *_overrides(train))
    rollout = cfg.actor_rollout_ref.rollout
    assert (rollout.name, cfg.trainer.device) == ("hf", "cpu")
    assert cfg.data.train_files == "/d/countdown/train.parquet" and cfg.trainer.total_training_steps == 3
    actor = cfg.actor_rollout_ref.actor
    assert (cfg.data.train_batch_size, rollout_budget(cfg), actor.ppo_mini_batch_size) == (4, 16, 4)
    assert (rollout.val_kwargs.n, rollout.val_kwargs.temperature, rollout.val_kwargs.top_k) == (2, 0.6, 20)
    _check_rloo(cfg)
    _check_selector(cfg, selector)
    check_recipe(cfg)


def test_cpu_launcher_dry_run():
    prep, train = commands(_launch("cpu_embedded.sh", "trainer.total_training_steps=2", DATA_DIR="/d", FORCE="1",
                                   WARM_START="0", NUM_LAYERS="2"))
    assert prep[3] == "countdown" and train[-1] == "trainer.total_training_steps=2"
    assert "trainer.experiment_name=cpu_embedded-rloo-conservative" in train
    assert any(w.startswith("actor_rollout_ref.model.path=") and w.endswith("SmolLM2-135M-Instruct-L2") for w in train)


def test_scripts_parse():
    scripts = sorted(SCRIPTS.glob("progress/*.sh")) + [SCRIPTS / "common.sh"]
    assert len(scripts) == 10
    check_scripts(scripts)
