"""ADS recipes (recipes/ads) and launchers (scripts/ads): the paper's settings (Xu et al., arXiv 2606.22305, §4.1,
Table 6, and the authors' code extras) land where verl reads them under each objective, every grid cell (Table 1,
Table 2's DAPO / GSPO, the ablations) composes with its selector and passes the axes' and verl's checks, and the
launchers build the right commands (DRY_RUN=1), DOTS+RR with its replay filter, fresh batch and the preprocessing's
embeddings. No training here (scripts/ads/cpu_embedded.sh runs the CPU preset;
tests/trainer/test_ads_trainer_on_cpu.py)."""

import functools

import pytest

from tests.recipes.recipes import (
    RECIPES, ROOT, SCRIPTS, check_recipe, check_scripts, commands, compose_recipe, launch, rollout_budget,
)
from verl_ext.trainer.generation_length import AGENT_LOOP, check_generation_length

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")

SETTINGS = {  # name: (hub id, rollout tensor parallel size)
    "qwen2.5-math-1.5b": ("Qwen/Qwen2.5-Math-1.5B", 1),
    "qwen3-4b-base": ("Qwen/Qwen3-4B-Base", 2),
    "olmo-3-7b-sft": ("allenai/Olmo-3-7B-Instruct-SFT", 4),
}
# objective: (loss mode, clip low, clip high, loss aggregation); no dynamic sampling under any (DAPO: [decision])
OBJECTIVES = {
    "grpo": ("vanilla", 0.2, 0.2, "token-mean"),
    "dapo": ("vanilla", 0.2, 0.28, "token-mean"),
    "gspo": ("gspo", 3e-4, 4e-4, "seq-mean-token-mean"),
}
# selector choice: {key: value} of the composed selector config
SELECTORS = {
    "ads": {"name": "ads", "clusters_per_step": 4, "mini_cluster_size": 32, "epsilon": 0.17, "alpha": 0.3,
            "inter_cluster": True, "intra_cluster": True, "cluster_column": "cluster_id",
            "rank_column": "rank_in_cluster"},
    "ads_no_inter": {"name": "ads", "clusters_per_step": 1, "mini_cluster_size": 128, "inter_cluster": False,
                     "intra_cluster": True, "global_order_column": "difficulty"},
    "ads_no_intra": {"name": "ads", "clusters_per_step": 4, "mini_cluster_size": 32, "inter_cluster": True,
                     "intra_cluster": False},
    "uniform": {"name": "uniform"},
    "dots": {"name": "dots", "protocol": "measured", "round_steps": 2, "fresh_fraction": 0.5, "reference_size": 64,
             "target": 0.5, "temperature": 0.001, "calibrate": True, "predictor": "adapter"},
}
# DOTS+RR [authors' code]: rounds of 2 steps, the reference set measured apart; B = 128 fresh prompts per step in the
# first round, sigma B = 64 after, as many groups replayed from a buffer of one batch, every trim keeping 128 - 64
DOTS_RR = ["rollout_filter=replay_fifo", "rollout_filter.capacity=128", "rollout_filter.fraction=0.5",
           "rollout_filter.fresh_groups=64", "data.train_batch_size=128", "selector.protocol=measured", "selector.round_steps=2",
           "selector.fresh_fraction=0.5", "selector.reference_size=64", "selector.predictor=adapter"]
BENCHMARKS = ("math500", "aime24", "aime25", "minerva", "amc23", "gpqa_diamond")  # in training (MMLU-Pro: final)
ALL_BENCHMARKS = (*BENCHMARKS, "mmlu_pro")
PAPER_SETTING = "qwen2.5-math-1.5b"  # Table 2 (DAPO / GSPO) and the ablations
KL = "algorithm.use_kl_in_reward=true"


def _launch(script: str, *args: str, **env: str):
    return launch("ads", script, *args, **env)



def _overrides(words: list[str]) -> list[str]:
    """A printed training command's Hydra overrides after ``+ads=SETTING``."""
    return words[next(i for i, w in enumerate(words) if w.startswith("+ads=")) + 1:]


def _settings_overrides(words: list[str]) -> list[str]:
    """The overrides from ``+objective=`` on: objective, selector, their recipe settings, the user's."""
    return words[next(i for i, w in enumerate(words) if w.startswith("+objective=")):]


def _objective_settings(objective: str) -> list[str]:
    return [KL, "data_selection.prefilters=[]"] if objective == "dapo" else [KL]


def _selector_settings(setting: str, selector: str) -> list[str]:
    """What recipe.selectors.SELECTOR adds after the objective's settings."""
    if selector != "dots":
        return []
    return DOTS_RR + [f"selector.embedding_file=${{recipe.data_dir}}/openr1_ads_{setting}/train.embeddings.npy",
                      f"selector.predictor_file=${{recipe.data_dir}}/openr1_ads_{setting}/dots_predictor.pt"]


@functools.cache
def _command(setting: str, *args: str) -> tuple[str, ...]:
    (words,) = commands(_launch(f"{setting}.sh", *args, DATA_DIR="/data", OUT_DIR="/out"))
    return tuple(words)


def _compose(setting: str, *overrides: str):
    return compose_recipe("ads", setting, *overrides)



def _check_objective(cfg, objective: str) -> None:
    loss_mode, low, high, agg = OBJECTIVES[objective]
    actor = cfg.actor_rollout_ref.actor
    assert (actor.policy_loss.loss_mode, actor.clip_ratio_low, actor.clip_ratio_high) == (loss_mode, low, high)
    assert actor.loss_agg_mode == agg and not actor.use_kl_loss
    # the code extras under every objective: KL in the reward (0.001), all-wrong groups dropped, no dynamic sampling
    assert cfg.algorithm.use_kl_in_reward and cfg.algorithm.kl_ctrl.kl_coef == 0.001
    assert cfg.algorithm.kl_ctrl.type == "fixed"
    assert list(cfg.data_selection.prefilters) == []


def _check_selector(cfg, choice: str) -> None:
    """The selector's settings, and the filter and fresh batch it runs with."""
    expected = SELECTORS[choice]
    assert {k: cfg.selector[k] for k in expected} == expected
    if choice == "dots":  # B = 128 (sigma B = 64 served after round 1) + replayed groups; embeddings beside
        assert cfg.selector.embedding_file == cfg.data.train_files.replace(".parquet", ".embeddings.npy")
        # the authors' trained predictor, written beside them by prepare_data.sh step 5
        assert cfg.selector.predictor_file == cfg.data.train_files.replace("train.parquet", "dots_predictor.pt")
        assert (cfg.rollout_filter.name, cfg.rollout_filter.capacity, cfg.rollout_filter.fraction,
                cfg.rollout_filter.fresh_groups) == ("replay_fifo", 128, 0.5, 64)
        assert cfg.data.train_batch_size == 128 and rollout_budget(cfg) == 128 * 8
    else:  # all-wrong groups dropped (the code extra); 128 prompts x 8
        assert (cfg.rollout_filter.name, cfg.rollout_filter.drop) == ("drop_degenerate", "all_wrong")
        assert cfg.data.train_batch_size == 128 and rollout_budget(cfg) == 128 * 8


@pytest.mark.parametrize("objective", sorted(OBJECTIVES))
@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_setting_has_the_paper_hyperparameters(setting, objective):
    model, tp = SETTINGS[setting]
    cfg = _compose(setting, *_overrides(list(_command(setting, objective))))
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    assert rollout.tensor_model_parallel_size == tp
    if setting == PAPER_SETTING:  # Qwen2.5-Math's 4096 positions: LUFFY's 16k copy, written by prepare_data.sh
        assert cfg.recipe.base_model == model and cfg.actor_rollout_ref.model.path == f"/data/models/{setting}-16k"
        assert dict(cfg.recipe.long_context) == {"max_position_embeddings": 16384, "rope_theta": 40000}
    else:
        assert cfg.actor_rollout_ref.model.path == model
    assert cfg.algorithm.adv_estimator == "grpo" and cfg.algorithm.norm_adv_by_std_in_grpo
    assert (actor.optim.optimizer, actor.optim.lr, actor.ppo_epochs) == ("AdamW", 1e-6, 1)
    # 16 actor updates per step: 128 / 16 = 8 prompts (x 8 rollouts) per mini-batch
    assert (actor.ppo_mini_batch_size, rollout.n, rollout.temperature) == (8, 8, 1.0)
    assert cfg.data.train_batch_size // actor.ppo_mini_batch_size == 16
    assert (cfg.data.max_response_length, cfg.data.max_prompt_length) == (8192, 2048)
    _check_objective(cfg, objective)
    _check_selector(cfg, "ads")
    assert cfg.allocator.name == "fixed"
    val = rollout.val_kwargs  # temperature [paper]; top-p, frequencies and steps: the authors' train_ads.sh
    assert (val.n, val.temperature, val.top_p, val.do_sample) == (16, 0.7, 0.8, True)
    assert dict(cfg.data_selection.val_n) == {"math500": 4}
    # validation generates up to 14,336 tokens in a 16,384-token context, training stops at 8,192
    assert (rollout.response_length, rollout.max_model_len) == (14336, 16384)
    assert rollout.agent.default_agent_loop == AGENT_LOOP and check_generation_length(cfg) == []
    assert cfg.data.train_files == f"/data/openr1_ads_{setting}/train.parquet"
    assert list(cfg.data.val_files) == [f"/data/{b}/test.parquet" for b in BENCHMARKS]
    assert cfg.reward.custom_reward_function.path == "pkg://verl_ext.rewards"
    assert (cfg.trainer.test_freq, cfg.trainer.save_freq, cfg.trainer.max_actor_ckpt_to_keep) == (25, 25, None)
    assert cfg.trainer.total_training_steps == 800 and cfg.trainer.val_before_train
    assert cfg.trainer.experiment_name == f"{setting}-{objective}-ads"
    assert cfg.trainer.default_local_dir == f"/out/{setting}-{objective}-ads"
    check_recipe(cfg)


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_recipe_alone_is_grpo_with_ads(setting):
    """Composed without the launcher, a recipe is its GRPO + ADS run (KL in the reward, all-wrong drop)."""
    alone = _compose(setting)
    assert alone == _compose(setting, "+objective=grpo", "selector=ads", KL)
    _check_objective(alone, "grpo")
    _check_selector(alone, "ads")


def test_recipes_leave_the_objectives_keys_to_the_objectives():
    """The only key a recipe file sets differently from an objective preset is use_kl_in_reward, which every
    recipe.objectives entry sets again (the launchers' overrides win over the composed presets)."""
    from verl_ext.launch.recipe_keys import recipe_values

    presets = {o: recipe_values(ROOT / "verl_ext" / "config" / "objective" / f"{o}.yaml") for o in OBJECTIVES}
    for path in sorted((RECIPES / "ads").glob("*.yaml")):
        for key, value in recipe_values(path).items():
            if key == "algorithm.use_kl_in_reward":
                continue
            assert all(preset.get(key, value) == value for preset in presets.values()), (path.name, key)
    cfg = _compose(PAPER_SETTING, "+objective=dapo")
    assert cfg.actor_rollout_ref.actor.clip_ratio_high == 0.28 and not cfg.algorithm.use_kl_in_reward
    for objective in OBJECTIVES:  # hence the launchers' overrides
        assert _settings_overrides(list(_command(PAPER_SETTING, objective)))[2:] == _objective_settings(objective)


@functools.cache
def _grid(setting: str, **env: str) -> list[list[str]]:
    return commands(_launch("grid.sh", setting, DATA_DIR="/data", **env))


def _grid_cells() -> list[tuple[str, str, tuple[str, ...]]]:
    """(setting, run name, environment) of Table 1 for every setting, Table 2 and the ablations (1.5B)."""
    cells = [(s, f"grpo-{sel}", ()) for s in sorted(SETTINGS) for sel in ("uniform", "dots", "ads")]
    cells += [(PAPER_SETTING, f"{o}-{sel}", ("SWEEP=objectives",))
              for o in ("dapo", "gspo") for sel in ("uniform", "ads")]
    cells += [(PAPER_SETTING, f"grpo-{sel}", ("SWEEP=ablation",)) for sel in ("ads_no_inter", "ads_no_intra")]
    return cells


@pytest.mark.parametrize(("setting", "name", "env"), _grid_cells(), ids=lambda v: "/".join(v) if isinstance(v, tuple)
                         else v)
def test_grid_cell_composes_with_its_selector(setting, name, env):
    runs = _grid(setting, **dict(e.split("=") for e in env))
    (words,) = [w for w in runs if f"trainer.experiment_name={setting}-{name}" in w]
    cfg = _compose(setting, *_overrides(words))
    objective, selector = name.split("-", 1)
    assert _settings_overrides(words) == [f"+objective={objective}", f"selector={selector}",
                                          *_objective_settings(objective), *_selector_settings(setting, selector)]
    _check_objective(cfg, objective)
    _check_selector(cfg, selector)
    check_recipe(cfg)


def test_grid_dry_run():
    names = [w.split("=", 1)[1] for r in _grid(PAPER_SETTING) for w in r if w.startswith("trainer.experiment_name=")]
    assert names == [f"{PAPER_SETTING}-grpo-{s}" for s in ("uniform", "dots", "ads")]
    names = [w.split("=", 1)[1] for r in _grid(PAPER_SETTING, SWEEP="objectives") for w in r
             if w.startswith("trainer.experiment_name=")]
    assert names == [f"{PAPER_SETTING}-{o}-{s}" for o in ("dapo", "gspo") for s in ("uniform", "ads")]
    runs = commands(_launch("grid.sh", PAPER_SETTING, "trainer.val_before_train=false", OBJECTIVES="gspo",
                         SELECTORS="ads_no_intra"))
    assert [_settings_overrides(r) for r in runs] == [["+objective=gspo", "selector=ads_no_intra", KL,
                                                       "trainer.val_before_train=false"]]
    assert _launch("grid.sh", PAPER_SETTING, SWEEP="nope").returncode == 2
    assert _launch("grid.sh", "no_such_setting").returncode == 2
    assert _launch("grid.sh", "_common").returncode == 2


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_launcher_dry_run(setting):
    words = list(_command(setting, "dapo", "ads_no_inter", "trainer.test_freq=5"))
    assert words[1:6] == ["-m", "verl_ext.main", "--config-dir", str(RECIPES), f"+ads={setting}"]
    assert _settings_overrides(words) == ["+objective=dapo", "selector=ads_no_inter", KL,
                                          "data_selection.prefilters=[]", "trainer.test_freq=5"]  # the user's last
    for expected in ("recipe.data_dir=/data", f"trainer.experiment_name={setting}-dapo-ads_no_inter",
                     f"trainer.default_local_dir=/out/{setting}-dapo-ads_no_inter", "trainer.nnodes=1",
                     "trainer.n_gpus_per_node=8"):
        assert expected in words
    assert _settings_overrides(list(_command(setting)))[:3] == ["+objective=grpo", "selector=ads", KL]
    assert _settings_overrides(list(_command(setting, "gspo", "x=1"))) == ["+objective=gspo", "selector=ads", KL, "x=1"]


def test_launcher_refuses_what_it_cannot_set_up():
    for args in (["selector=uniform"], ["dapo", "+objective=gspo"], ["ppo"], ["grpo", "ads_typo"]):
        proc = _launch("qwen3-4b-base.sh", *args)
        assert proc.returncode == 2 and not proc.stdout, args
    assert "first two arguments" in _launch("qwen3-4b-base.sh", "selector=uniform").stderr
    assert "unknown selector 'ads_typo'" in _launch("qwen3-4b-base.sh", "grpo", "ads_typo").stderr


@pytest.mark.parametrize("selector", sorted(SELECTORS))
def test_cpu_preset_composes_for_the_cpu(selector):
    from verl_ext.cpu import cpu_overrides

    _, _, train = commands(_launch("cpu_embedded.sh", "grpo", selector, FORCE="1", DATA_DIR="/d"))
    cfg = _compose("cpu_embedded", *cpu_overrides(), *_overrides(train))
    rollout = cfg.actor_rollout_ref.rollout
    assert (rollout.name, cfg.trainer.device) == ("hf", "cpu") and cfg.algorithm.use_kl_in_reward
    assert cfg.data.train_files == "/d/arithmetic_ads/train.parquet" and cfg.trainer.total_training_steps == 3
    assert cfg.selector.name == SELECTORS[selector]["name"]
    if selector == "dots":  # 1 reference prompt measured per round, 2 prompts a step (1 after the first round)
        assert (cfg.data.train_batch_size, rollout_budget(cfg), cfg.selector.reference_size) == (2, 8, 1)
        assert cfg.selector.embedding_file == "/d/arithmetic_ads/train.embeddings.npy"
        assert (cfg.selector.predictor, cfg.selector.predictor_file) == ("attention", None)  # no trained one here
        assert (cfg.rollout_filter.name, cfg.rollout_filter.capacity, cfg.rollout_filter.fresh_groups) == (
            "replay_fifo", 8, 1)
    else:
        assert (cfg.data.train_batch_size, rollout_budget(cfg)) == (4, 16)
        assert (cfg.rollout_filter.name, cfg.rollout_filter.drop) == ("drop_degenerate", "all_wrong")
    if selector.startswith("ads"):  # 4 prompts a step: 2 clusters x 2, or one mini-cluster of 4
        assert cfg.selector.clusters_per_step * cfg.selector.mini_cluster_size == 4
    check_recipe(cfg)


def test_cpu_launcher_dry_run():
    prep, clusters, train = commands(_launch("cpu_embedded.sh", "gspo", "trainer.total_training_steps=2", DATA_DIR="/d",
                                          FORCE="1"))
    assert " ".join(prep).endswith("-m data_prep arithmetic --out /d --train-size 16 --test-size 8")
    assert clusters[1:7] == ["-m", "data_prep.ads_clusters", "--input", "/d/arithmetic/train.parquet", "--out",
                             "/d/arithmetic_ads/train.parquet"]
    assert "--solution-field" in clusters and clusters[clusters.index("--solution-field") + 1] == "worked"
    assert train[3:7] == ["--cpu", "--config-dir", str(RECIPES), "+ads=cpu_embedded"]
    assert train[-1] == "trainer.total_training_steps=2" and "trainer.nnodes=1" not in train
    assert "trainer.experiment_name=cpu_embedded-gspo-ads" in train
    assert any(w.startswith("actor_rollout_ref.model.path=") and "SmolLM2-135M-Instruct" in w for w in train)


def test_prepare_data_dry_run(tmp_path):
    runs = commands(_launch("prepare_data.sh", DATA_DIR=str(tmp_path), OPENR1_MATH_INPUT="/dl/openr1",
                         QWEN3_4B_BASE_MODEL="/models/q4b"))
    openr1, *prep, overlap = runs[:1 + len(ALL_BENCHMARKS) + 1]
    (long_context,) = [r for r in runs if "data_prep.long_context" in r]
    clusters = [r for r in runs if "data_prep.ads_clusters" in r]
    assert openr1[1:] == ["-m", "data_prep.sources.openr1", "--out", str(tmp_path), "--sample-size", "11500",
                          "--seed", "42", "--input", "/dl/openr1"]
    assert [r[1:4] for r in prep] == [["-m", "data_prep", b] for b in ALL_BENCHMARKS]
    assert all(r[4:6] == ["--out", str(tmp_path)] for r in prep)
    train = f"{tmp_path}/openr1_math_11k/train.parquet"
    assert overlap[1:5] == ["-m", "data_prep.overlap", "--train", train]
    assert overlap[5:-2] == ["--eval", *(f"{tmp_path}/{b}/test.parquet" for b in ALL_BENCHMARKS)]
    long_model = f"{tmp_path}/models/qwen2.5-math-1.5b-16k"  # written before its clusters, from recipe.base_model
    assert long_context[1:] == ["-m", "data_prep.long_context", "--model", "Qwen/Qwen2.5-Math-1.5B", "--out",
                                long_model, "--max-position-embeddings", "16384", "--rope-theta", "40000"]
    models = {"olmo-3-7b-sft": "allenai/Olmo-3-7B-Instruct-SFT", "qwen2.5-math-1.5b": long_model,
              "qwen3-4b-base": "/models/q4b"}
    assert [r[1:9] for r in clusters] == [["-m", "data_prep.ads_clusters", "--input", train, "--out",
                                           f"{tmp_path}/openr1_ads_{s}/train.parquet", "--model", m]
                                          for s, m in models.items()]
    for r in clusters:
        assert " ".join(r[9:]) == ("--solution-field extra_info.target --clusters 64 --pca-dims 128 --seed 42 "
                                   "--n-init auto --max-length 4096 --device cuda --dtype bf16")  # the authors' text and length
    # every recipe trains on the file prepare_data.sh writes for it
    for setting in SETTINGS:
        cfg = _compose(setting, f"recipe.data_dir={tmp_path}")
        assert cfg.data.train_files == f"{tmp_path}/openr1_ads_{setting}/train.parquet"
    assert _compose(PAPER_SETTING, f"recipe.data_dir={tmp_path}").actor_rollout_ref.model.path == long_model
    one = commands(_launch("prepare_data.sh", DATA_DIR=str(tmp_path), SETTINGS="qwen3-4b-base"))
    assert [r[8] for r in one if "data_prep.ads_clusters" in r] == ["Qwen/Qwen3-4B-Base"]
    assert _launch("prepare_data.sh", DATA_DIR=str(tmp_path), SETTINGS="nope").returncode == 2
    assert not any(tmp_path.iterdir())  # a dry run writes nothing


def test_prepare_data_dots_predictor_dry_run(tmp_path):
    """DOTS_PREDICTOR=1 (off by default): every policy's pass rates into one table, two models a call, then the
    authors' adapter trained per setting over its clustered embeddings (data_prep.dots_predictor), the table the
    DOTS+RR runs read as selector.embedding_file (test_grid_cell_composes_with_its_selector)."""
    env = {"DATA_DIR": str(tmp_path), "SETTINGS": "qwen3-4b-base olmo-3-7b-sft"}
    assert not any(w in ("data_prep.reference_pass_rates", "data_prep.dots_predictor")
                   for r in commands(_launch("prepare_data.sh", **env)) for w in r)
    runs = commands(_launch("prepare_data.sh", DOTS_PREDICTOR="1", DOTS_POLICIES="Qwen/Qwen3-4B-Base /m/a b.c", **env))
    measure = [r for r in runs if "data_prep.reference_pass_rates" in r]
    train = [r for r in runs if "data_prep.dots_predictor" in r]
    assert runs.index(measure[0]) > max(runs.index(r) for r in runs if "data_prep.ads_clusters" in r)
    rates, columns = f"{tmp_path}/openr1_math_11k/dots_pass_rates.parquet", ["pass_rate_Qwen_Qwen3_4B_Base",
                                                                                 "pass_rate__m_a", "pass_rate_b_c"]
    sampling = ["--n", "8", "--temperature", "1.0", "--max-new-tokens", "8192"]
    assert [r[1:] for r in measure] == [
        ["-m", "data_prep.reference_pass_rates", "--input", f"{tmp_path}/openr1_math_11k/train.parquet", "--out",
         rates, *sampling, "--weak-model", "Qwen/Qwen3-4B-Base", "--weak-column", columns[0], "--strong-model", "/m/a",
         "--strong-column", columns[1]],
        ["-m", "data_prep.reference_pass_rates", "--input", rates, "--out", rates, *sampling, "--weak-model", "b.c",
         "--weak-column", columns[2], "--strong-column", columns[0]]]  # present: copied, no model
    assert [r[1:] for r in train] == [
        ["-m", "data_prep.dots_predictor", "--input", rates, "--out", f"{tmp_path}/openr1_ads_{s}/dots_predictor.pt",
         "--pass-rate-columns", *columns, "--embeddings", f"{tmp_path}/openr1_ads_{s}/train.embeddings.npy"]
        for s in ("qwen3-4b-base", "olmo-3-7b-sft")]
    assert _launch("prepare_data.sh", DOTS_PREDICTOR="1", DOTS_POLICIES="one", **env).returncode == 2
    assert not any(tmp_path.iterdir())

def test_scripts_parse():
    scripts = sorted(SCRIPTS.glob("ads/*.sh")) + [SCRIPTS / "common.sh"]
    assert len(scripts) == 9
    check_scripts(scripts)
