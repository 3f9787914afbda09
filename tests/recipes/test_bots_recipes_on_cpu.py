"""BOTS recipes (recipes/bots) and launchers (scripts/bots): the paper's hyperparameters (BOTS paper App. B.3,
Table 6) land where verl reads them, every baseline composes and passes the axes' and verl's checks, and the launchers build
the right command (DRY_RUN=1). No training here (see tests/trainer)."""

import functools
import subprocess
import sys

import pytest
from tests.recipes.recipes import RECIPES, ROOT, SCRIPTS, check_recipe, check_scripts, compose_recipe, launch

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")

SETTINGS = {  # name: (prompts per step, mini-batch, FSDP CPU offload, steps, validation sets)
    "qwen2.5-1.5b-instruct_math": (256, 32, False, 100, ["math500/test", "aime24/test"]),
    "qwen2.5-1.5b-instruct_code": (256, 32, False, 70, ["humaneval/train", "humaneval/test", "mbpp/test",
                                                         "guru_livecodebench/test"]),
    "qwen2.5-1.5b-instruct_logic": (256, 32, False, 100, ["guru_ordering_puzzles/test", "guru_arc_agi/test"]),
    "qwen2.5-7b_math": (512, 64, True, 100, ["math500/test", "aime24/test"]),
    "qwen2.5-7b_code": (512, 64, True, 70, ["humaneval/train", "humaneval/test", "mbpp/test",
                                             "guru_livecodebench/test"]),
    "qwen2.5-7b_logic": (512, 64, True, 100, ["guru_ordering_puzzles/test", "guru_arc_agi/test"]),
}
PREPARED = {  # prepare_data.sh DOMAIN: (converted datasets, overlap check's training file and evaluation files)
    "math": (["guru_math", "math500", "aime24"], "guru_math/train", ["math500/test", "aime24/test"]),
    "code": (["guru_code", "humaneval", "mbpp", "guru_livecodebench"], "guru_code/train",
             ["humaneval/train", "humaneval/test", "mbpp/test", "guru_livecodebench/test"]),
    "logic": (["guru_logic", "guru_ordering_puzzles", "guru_arc_agi"], "guru_logic/train",
              ["guru_ordering_puzzles/test", "guru_arc_agi/test"]),
}
BASELINES = {  # selector= preset: (selector name, rho, lambda, posterior sampling)
    "random": ("uniform", None, None, None),
    "offline": ("sequential", None, None, None),
    "bots_mopps": ("bots", 0.0, 0.0, True),
    "bots_dots": ("bots", 1.0, 0.1, False),
    "bots": ("bots", 0.1, 0.1, True),
}


def _compose(setting: str, *overrides: str):
    return compose_recipe("bots", setting, *overrides)


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_setting_has_the_paper_hyperparameters(setting):
    batch, mini, offload, steps, val = SETTINGS[setting]
    cfg = _compose(setting, "recipe.data_dir=/data")
    actor, rollout, model = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout, cfg.actor_rollout_ref.model
    assert model.path == ("Qwen/Qwen2.5-1.5B-Instruct" if "1.5b" in setting else "Qwen/Qwen2.5-7B")
    assert cfg.algorithm.adv_estimator == "grpo" and not cfg.algorithm.use_kl_in_reward and not actor.use_kl_loss
    assert (actor.optim.optimizer, actor.optim.lr, actor.optim.weight_decay) == ("AdamW", 1e-6, 0.1)
    assert (actor.optim.lr_warmup_steps, actor.optim.lr_scheduler_type, actor.optim.clip_grad) == (10, "constant", 1.0)
    assert actor.clip_ratio_low == actor.clip_ratio_high == 0.2 and actor.entropy_coeff == 0
    assert (rollout.name, rollout.n, rollout.temperature) == ("vllm", 16, 1.0)
    assert (cfg.data.max_prompt_length, cfg.data.max_response_length) == (4096, 8192)
    assert (cfg.data.train_batch_size, actor.ppo_mini_batch_size) == (batch, mini)
    assert actor.fsdp_config.param_offload is offload and actor.fsdp_config.optimizer_offload is offload
    assert cfg.trainer.total_training_steps == steps and cfg.trainer.v1.trainer_mode == "verl_ext"
    assert cfg.trainer.val_before_train and cfg.trainer.test_freq == 10 and cfg.trainer.save_freq == 10
    domain = setting.rsplit("_", 1)[1]
    assert cfg.data.train_files == f"/data/guru_{domain}/train.parquet"
    assert list(cfg.data.val_files) == [f"/data/{v}.parquet" for v in val]
    assert cfg.reward.custom_reward_function.path == "pkg://verl_ext.rewards"
    assert cfg.selector.name == "bots" and cfg.data_selection.rollout_budget is None
    check_recipe(cfg)


@functools.cache
def _default_without_selector() -> dict:
    return {k: v for k, v in _compose("qwen2.5-1.5b-instruct_math").items() if k != "selector"}


@pytest.mark.parametrize("baseline", sorted(BASELINES))
def test_baselines_differ_only_in_the_selector(baseline):
    name, rho, lam, sampling = BASELINES[baseline]
    cfg = _compose("qwen2.5-1.5b-instruct_math", f"selector={baseline}")
    assert cfg.selector.name == name
    if name == "bots":
        sel = cfg.selector
        assert (sel.implicit_weight, sel.forgetting, sel.posterior_sampling) == (rho, lam, sampling)
        assert (sel.target, sel.momentum, sel.temperature, sel.prior_alpha, sel.prior_beta) == (0.5, 0.9, 0.0, 1, 1)
    if baseline == "offline":
        assert list(cfg.selector.sort_by) == ["weak_pass_rate", "strong_pass_rate"] and cfg.selector.descending
    assert {k: v for k, v in cfg.items() if k != "selector"} == _default_without_selector()
    check_recipe(cfg)


def test_sweeps_compose():
    cfg = _compose("qwen2.5-7b_code", "selector.implicit_weight=0.5", "selector.forgetting=0.2")
    assert (cfg.selector.implicit_weight, cfg.selector.forgetting) == (0.5, 0.2)
    check_recipe(cfg)


def test_cpu_preset_composes_through_the_cli():
    """The real entry point, ``--cpu`` re-exec included: leading Hydra flags must survive it."""
    proc = subprocess.run(
        [sys.executable, "-m", "verl_ext.main", "--cpu", "--config-dir", str(RECIPES), "+bots=cpu_embedded",
         "actor_rollout_ref.model.path=/m", "data.train_batch_size=2", "--cfg", "job", "--resolve"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import yaml

    cfg = yaml.safe_load(proc.stdout)
    rollout = cfg["actor_rollout_ref"]["rollout"]
    assert (rollout["name"], rollout["n"], cfg["trainer"]["device"]) == ("hf", 4, "cpu")  # CPU preset over recipe
    assert cfg["data"]["train_batch_size"] == 2  # user override over both
    assert cfg["selector"]["name"] == "bots" and cfg["actor_rollout_ref"]["actor"]["optim"]["lr"] == 1e-6
    assert cfg["data"]["train_files"] == "data/bots_cpu/arithmetic/train_ref.parquet"


def test_cpu_argv_puts_hydra_flags_first():
    from verl_ext.launch.main import cpu_argv

    argv = cpu_argv(["--cpu", "--config-dir", "r", "+bots=x", "a=1"])
    assert argv[3:5] == ["--config-dir", "r"] and argv[-2:] == ["+bots=x", "a=1"]
    assert "trainer.device=cpu" in argv[5:-2]


def _launch(script: str, *args: str, **env: str):
    return launch("bots", script, *args, timeout=60, **env)


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_launcher_dry_run(setting):
    proc = _launch(f"{setting}.sh", "selector=random", "trainer.test_freq=5", DATA_DIR="/d", OUT_DIR="/o")
    assert proc.returncode == 0, proc.stderr
    words = proc.stdout.split()
    assert words[1:3] == ["-m", "verl_ext.main"] and "--cpu" not in words
    assert words[3:6] == ["--config-dir", str(RECIPES), f"+bots={setting}"]
    assert words[-2:] == ["selector=random", "trainer.test_freq=5"]  # the user's overrides, last
    for expected in ("recipe.data_dir=/d", f"trainer.default_local_dir=/o/{setting}-random",
                     "trainer.nnodes=1", "trainer.n_gpus_per_node=8"):
        assert expected in words


def test_launcher_multi_node_needs_a_cluster():
    proc = _launch("qwen2.5-7b_math.sh", NNODES="2")
    assert proc.returncode == 2 and "RAY_ADDRESS" in proc.stderr
    proc = _launch("qwen2.5-7b_math.sh", NNODES="2", RAY_ADDRESS="auto", GPUS_PER_NODE="4", MODEL_PATH="/m/7b")
    assert proc.returncode == 0, proc.stderr
    for expected in ("trainer.nnodes=2", "trainer.n_gpus_per_node=4", "actor_rollout_ref.model.path=/m/7b"):
        assert expected in proc.stdout.split()


def test_grid_dry_run():
    runs = [line.split() for line in _launch("grid.sh", "qwen2.5-1.5b-instruct_logic", "x=1").stdout.splitlines()]
    assert [w for r in runs for w in r if w.startswith("selector=")] == [f"selector={b}" for b in
                                                                         ("random", "offline", "bots_mopps", "bots_dots", "bots")]
    assert all(r[-1] == "x=1" and "+bots=qwen2.5-1.5b-instruct_logic" in r for r in runs)
    names = {w for r in runs for w in r if w.startswith("trainer.experiment_name=")}
    assert len(names) == 5
    rho = _launch("grid.sh", "qwen2.5-7b_math", SWEEP="rho").stdout
    assert [w for w in rho.split() if w.startswith("selector.implicit_weight=")] == [
        f"selector.implicit_weight={v}" for v in ("0", "0.05", "0.2", "0.5", "1.0")]
    assert _launch("grid.sh", "qwen2.5-7b_math", SWEEP="nope").returncode == 2
    assert _launch("grid.sh", "no_such_setting").returncode == 2


def test_cpu_launcher_dry_run():
    proc = _launch("cpu_embedded.sh", "trainer.total_training_steps=2", DATA_DIR="/d", FORCE="1")
    assert proc.returncode == 0, proc.stderr
    prep, ref, train = proc.stdout.splitlines()
    assert "-m data_prep arithmetic --out /d" in prep
    assert "--weak-model embedded:2 --strong-model embedded" in ref
    words = train.split()
    assert words[3:7] == ["--cpu", "--config-dir", str(RECIPES), "+bots=cpu_embedded"]
    assert words[-1] == "trainer.total_training_steps=2" and "trainer.nnodes=1" not in words
    assert any(w.startswith("actor_rollout_ref.model.path=") and "SmolLM2-135M-Instruct" in w for w in words)


@pytest.mark.parametrize("domain", sorted(PREPARED))
def test_prepare_data_converts_the_recipes_files_then_checks_overlap(domain):
    datasets, train, evals = PREPARED[domain]
    proc = _launch("prepare_data.sh", domain, DATA_DIR="/d", FORCE="1")
    assert proc.returncode == 0, proc.stderr
    *prep, overlap = [line.split() for line in proc.stdout.splitlines()]
    assert [words[3] for words in prep] == datasets and all(words[1:3] == ["-m", "data_prep"] for words in prep)
    assert overlap[1:5] == ["-m", "data_prep.overlap", "--train", f"/d/{train}.parquet"]
    assert overlap[5:-2] == ["--eval", *(f"/d/{e}.parquet" for e in evals)]
    for setting, (*_, val) in SETTINGS.items():  # exactly the files the domain's recipes validate on
        if setting.endswith(domain):
            assert sorted(val) == sorted(evals)


def test_prepare_data_stops_when_validation_prompts_are_training_prompts(tmp_path):
    """A real run on the hub fixtures: clean files pass; a validation file holding training rows stops it."""
    hub = ROOT / "tests" / "fixtures" / "hub"
    inputs = {"GURU_CODE_INPUT": str(hub / "guru"), "MBPP_INPUT": str(hub / "mbpp_full_test.parquet"),
              "GURU_LIVECODEBENCH_INPUT": str(hub / "guru"), "DATA_DIR": str(tmp_path), "DRY_RUN": "0"}
    proc = _launch("prepare_data.sh", "code", **inputs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ": 0 overlap" in proc.stdout and (tmp_path / "overlap_guru_code.json").is_file()
    (tmp_path / "mbpp" / "test.parquet").write_bytes((tmp_path / "guru_code" / "train.parquet").read_bytes())
    stopped = _launch("prepare_data.sh", "code", **inputs)
    assert stopped.returncode == 1 and "OVERLAP" in stopped.stdout
    assert "ALLOW_OVERLAP=1" in stopped.stderr and str(tmp_path / "overlap_guru_code.json") in stopped.stderr
    allowed = _launch("prepare_data.sh", "code", **inputs, ALLOW_OVERLAP="1")
    assert allowed.returncode == 0 and "warning: evaluation prompts overlap" in allowed.stderr


def test_scripts_parse():
    scripts = sorted(SCRIPTS.glob("bots/*.sh")) + [SCRIPTS / "ray_cluster.sh"] + sorted(SCRIPTS.glob("slurm/*"))
    assert len(scripts) == 14
    check_scripts(scripts)
