"""One-GPU smoke runs (scripts/<group>/gpu_smoke.sh, recipes/<group>/gpu_smoke.yaml): each script's DRY_RUN=1
commands, composed as the launcher runs them, are a 3-step, 1 x 1 GPU run of Qwen2.5-0.5B-Instruct with vLLM and few
short rollouts, validated and saved once at the end, that differs from its paper setting (composed from the paper
launcher's own DRY_RUN) only in sizes, paths and names: the method's components are the paper run's. The data
preparation writes the files the run reads; the end of a run checks the save and the validation. No training here."""

import functools
import os
import subprocess

import pytest
import yaml
from omegaconf import OmegaConf
from tests.recipes.recipes import (
    RECIPES, SCRIPTS, check_recipe, check_scripts, commands, compose_recipe, launch, rollout_budget,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")

MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
STEPS, RESPONSE, ROLLOUTS = 3, 512, 512  # at most: training steps, response tokens, rollouts per step
# group: (paper setting, launcher arguments, (data preparation modules), axis whose component the method is)
RUNS = {
    "bots": ("qwen2.5-1.5b-instruct_math", (), ("data_prep", "data_prep.reference_pass_rates"), "selector"),
    "cbs": ("qwen3-1.7b-base", ("grpo", "cbs_star"), ("data_prep",), "rollout_filter"),
    "cbs-dapo": ("qwen3-1.7b-base", ("dapo", "cbs"), ("data_prep",), "rollout_filter"),
    "coba": ("qwen3-1.7b-base", (), ("data_prep",), "allocator"),
    "ads": ("qwen3-4b-base", ("grpo", "ads"), ("data_prep", "data_prep.ads_clusters"), "selector"),
    "progress": ("qwen2.5-0.5b_countdown", ("conservative",), ("data_prep", "data_prep.countdown_split"),
                 "selector"),
}
# Config keys a smoke run may set differently from its paper run: the model, sizes, GPUs, paths, names, and a
# fresh start every time.
SIZES = {
    "actor_rollout_ref.model.path", "actor_rollout_ref.rollout.prometheus.served_model_name",
    "actor_rollout_ref.actor.ppo_mini_batch_size", "critic.ppo_mini_batch_size",
    "actor_rollout_ref.rollout.gpu_memory_utilization", "actor_rollout_ref.rollout.n_gpus_per_node",
    "actor_rollout_ref.rollout.tensor_model_parallel_size", "actor_rollout_ref.rollout.prompt_length",
    "actor_rollout_ref.rollout.response_length", "actor_rollout_ref.rollout.max_model_len",
    "actor_rollout_ref.rollout.val_kwargs.n",
    "distillation.teacher_models.teacher_model.inference.prompt_length",
    "distillation.teacher_models.teacher_model.inference.response_length",
    "data.train_batch_size", "data.max_prompt_length", "data.max_response_length", "data.train_files", "data.val_files",
    "actor_rollout_ref.rollout.trace.experiment_name", "trainer.experiment_name", "trainer.default_local_dir",
    "trainer.n_gpus_per_node", "trainer.total_training_steps", "trainer.test_freq", "trainer.save_freq",
    "trainer.val_before_train", "trainer.resume_mode",
}
# Component keys a smoke run sets differently (recipes/<group>/gpu_smoke.yaml says why); every other key of the
# selector, allocator, rollout filter and objective is the paper run's.
COMPONENT_SIZES = {
    "cbs": {"rollout_filter.warmup", "rollout_filter.epsilon0"},
    "cbs-dapo": {"rollout_filter.warmup", "rollout_filter.epsilon0", "rollout_filter.buffer_size"},
    "ads": {"selector.clusters_per_step", "selector.mini_cluster_size"},
}


def _group(run: str) -> str:
    return run.split("-")[0]


def _launch(group: str, script: str, *args: str, **env: str):
    return launch(group, script, *args, **{"CPU": "", "DATA_DIR": "/d", "OUT_DIR": "/o", **env})


def _recipe(words: list[str], group: str) -> list[str]:
    """[setting, Hydra overrides...] of a printed training command: ``+GROUP=SETTING`` and what follows it."""
    i = next(i for i, w in enumerate(words) if w.startswith(f"+{group}="))
    return [words[i].split("=", 1)[1], *words[i + 1:]]


def _leaves(cfg) -> dict[str, object]:
    def walk(node, prefix: str):
        if isinstance(node, dict):
            for key, value in node.items():
                yield from walk(value, f"{prefix}{key}.")
        else:
            yield prefix[:-1], node

    return dict(walk(OmegaConf.to_container(cfg, resolve=True), ""))


@functools.cache
def _smoke(run: str):
    """(data preparation commands, training command, composed config) of the smoke script's DRY_RUN."""
    group, (_, args, _, _) = _group(run), RUNS[run]
    *prep, train = commands(_launch(group, "gpu_smoke.sh", *args, FORCE="1"))
    return prep, train, compose_recipe(group, *_recipe(train, group))


@functools.cache
def _paper(run: str):
    group, (setting, args, _, _) = _group(run), RUNS[run]
    (train,) = commands(_launch(group, f"{setting}.sh", *args))
    assert _recipe(train, group)[0] == setting
    return compose_recipe(group, *_recipe(train, group))


@pytest.mark.parametrize("run", sorted(RUNS))
def test_smoke_run_is_small_on_one_gpu(run):
    group = _group(run)
    _, train, cfg = _smoke(run)
    assert train[1:5] == ["-m", "verl_ext.main", "--config-dir", str(RECIPES)]
    assert f"+{group}=gpu_smoke" in train and "--cpu" not in train
    assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node) == (1, 1)
    assert cfg.actor_rollout_ref.model.path == MODEL and f"actor_rollout_ref.model.path={MODEL}" in train
    recipe = yaml.safe_load((RECIPES / group / "gpu_smoke.yaml").read_text())
    assert recipe["actor_rollout_ref"]["model"]["path"] == MODEL  # the recipe alone (no MODEL_PATH) too
    rollout = cfg.actor_rollout_ref.rollout
    assert (rollout.name, rollout.tensor_model_parallel_size) == ("vllm", 1) and rollout.gpu_memory_utilization <= 0.3
    assert cfg.data.max_response_length <= RESPONSE and rollout_budget(cfg) <= ROLLOUTS
    steps = cfg.trainer.total_training_steps
    assert steps <= STEPS and cfg.trainer.test_freq == cfg.trainer.save_freq == steps  # once, after the last step
    assert not cfg.trainer.val_before_train and cfg.trainer.resume_mode == "disable"  # a rerun trains again
    assert cfg.trainer.default_local_dir == f"/o/{cfg.trainer.experiment_name}"
    assert cfg.trainer.experiment_name.startswith("gpu_smoke-")
    check_recipe(cfg)


@pytest.mark.parametrize("run", sorted(RUNS))
def test_smoke_run_has_the_paper_runs_components(run):
    smoke, paper = _leaves(_smoke(run)[2]), _leaves(_paper(run))
    differ = {k for k in smoke.keys() | paper.keys() if smoke.get(k, KeyError) != paper.get(k, KeyError)}
    # recipe.* are the launchers' tables, whose chosen entries land in the component keys compared here;
    # data_selection.val_n.* the validation n per data source, a size like val_kwargs.n
    sized = {k for k in differ if not k.startswith(("recipe.", "data_selection.val_n"))}
    assert sized <= SIZES | COMPONENT_SIZES.get(run, set())
    assert COMPONENT_SIZES.get(run, set()) <= differ  # the smoke's own component sizes do reach the config
    axis = RUNS[run][3]
    assert smoke[f"{axis}.name"] == paper[f"{axis}.name"] and smoke[f"{axis}.name"] not in ("uniform", "fixed",
                                                                                          "keep_all")
    assert smoke["actor_rollout_ref.rollout.n"] == paper["actor_rollout_ref.rollout.n"]
    assert smoke["algorithm.adv_estimator"] == paper["algorithm.adv_estimator"]


def _writes(words: list[str]) -> set[str]:
    """The files a printed data preparation command writes."""
    out = words[words.index("--out") + 1]
    if words[2] == "data_prep":  # an embedded dataset: OUT/NAME/{train,test}.parquet
        return {f"{out}/{words[3]}/{split}.parquet" for split in ("train", "test")}
    if words[2] == "data_prep.countdown_split":
        return {f"{out}/countdown/{split}.parquet" for split in ("train", "test")}
    return {out}


@pytest.mark.parametrize("run", sorted(RUNS))
def test_data_preparation_writes_what_the_run_reads(run):
    prep, _, cfg = _smoke(run)
    assert [words[2] for words in prep] == list(RUNS[run][2])
    written = set()
    for words in prep:  # each step reads what an earlier one wrote, with the policy as its model
        if "--input" in words:
            assert words[words.index("--input") + 1] in written, words
        models = [words[i + 1] for i, w in enumerate(words) if w in ("--model", "--weak-model", "--strong-model")]
        assert models == [MODEL] * len(models)
        written |= _writes(words)
    assert cfg.data.train_files in written and set(cfg.data.val_files) <= written
    assert all(path.startswith("/d/") for path in written)  # DATA_DIR


def test_environment_overrides_and_kept_data(tmp_path):
    words = commands(_launch("bots", "gpu_smoke.sh", "selector=random", FORCE="1", MODEL_PATH="/m/q05",
                             GPUS_PER_NODE="2", EXPERIMENT_NAME="mine"))
    ref, train = words[1], words[2]
    assert ref[ref.index("--weak-model") + 1] == ref[ref.index("--strong-model") + 1] == "/m/q05"
    for expected in ("actor_rollout_ref.model.path=/m/q05", "trainer.n_gpus_per_node=2",
                     "trainer.default_local_dir=/o/mine"):
        assert expected in train
    assert train[-1] == "selector=random"
    (tmp_path / "arithmetic").mkdir()
    (tmp_path / "arithmetic" / "train_ref.parquet").touch()
    (kept,) = commands(_launch("bots", "gpu_smoke.sh", DATA_DIR=str(tmp_path)))  # prepared data is kept
    assert f"recipe.data_dir={tmp_path}" in kept


# Stands in for python in a real (not DRY_RUN) smoke script: the trainer writes a run folder with what SAVE and
# METRICS say; every other Python step does nothing.
FAKE_PYTHON = """#!/usr/bin/env bash
[[ "$2" == verl_ext.main ]] || exit 0
for arg; do [[ "$arg" == trainer.default_local_dir=* ]] && run="${arg#*=}"; done
mkdir -p "$run/metrics"
if [[ -n "$SAVE" ]]; then echo 3 >"$run/latest_checkpointed_iteration.txt"; mkdir -p "$run/global_step_3"; fi
echo "$METRICS" >"$run/metrics/from_step_000000.$RANDOM$RANDOM.jsonl"
"""


def _finish(tmp_path, save: bool, metrics: str):
    """``scripts/bots/gpu_smoke.sh`` run for real with :data:`FAKE_PYTHON`: only the end of the script is exercised."""
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    environ = {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "FORCE", "CPU")}
    return subprocess.run(["bash", str(SCRIPTS / "bots" / "gpu_smoke.sh")], capture_output=True, text=True, timeout=60,
                          env={**environ, "PYTHON": str(python), "DATA_DIR": str(tmp_path / "data"),
                               "OUT_DIR": str(tmp_path), "EXPERIMENT_NAME": "r", "SAVE": "1" if save else "",
                               "METRICS": f'{{"step": 3, "data": {metrics}}}'})


def test_end_of_run_checks_that_this_run_saved_and_validated(tmp_path):
    validated = '{"val-core/arithmetic/acc/mean@1": 0.5}'
    done = _finish(tmp_path, save=True, metrics=validated)
    run = tmp_path / "r"
    assert done.returncode == 0, done.stderr
    assert f"checkpoint: {run}/global_step_3" in done.stdout and f"metrics:    {run}/metrics/" in done.stdout
    assert "critic/score/mean" in done.stdout and "data_selection/selector/*" in done.stdout
    unsaved = _finish(tmp_path, save=False, metrics=validated)  # the first run's checkpoint does not count
    assert unsaved.returncode == 1 and "saved no checkpoint" in unsaved.stderr
    unvalidated = _finish(tmp_path, save=True, metrics='{"critic/score/mean": 0.5}')  # nor its validation
    assert unvalidated.returncode == 1 and "no validation metrics" in unvalidated.stderr


def test_scripts_parse():
    scripts = [SCRIPTS / g / "gpu_smoke.sh" for g in sorted({_group(r) for r in RUNS})]
    assert len(scripts) == 5
    check_scripts(scripts)
    proc = subprocess.run(["bash", "-n", str(SCRIPTS / "smoke.sh")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
