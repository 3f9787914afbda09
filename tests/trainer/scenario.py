"""The trainer tests' shared scenario and launcher: ``python -m verl_ext.main --cpu`` (verl 0.9.1 v1 trainer, Ray,
TransferQueue, FSDP2 on CPU) on the 2-layer truncated embedded model.

The scenario is deterministic although sampling is not: the reward ignores the completion. Six tasks (stable
indices 100..105) of three kinds: ``easy`` always scores 1, ``hard`` always 0 and ``coin`` alternates 1, 0, 1, ...
per task (counted in the run directory), so a coin group of n >= 2 rollouts always has both rewards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
INDEX = [100, 101, 102, 103, 104, 105]
KIND = ["easy", "coin", "coin", "hard", "coin", "easy"]  # by dataset position
RANK = [5, 4, 3, 2, 1, 0]  # ascending rank: positions 5, 4, 3, 2, 1, 0
ORDER = [105, 104, 103, 102, 101, 100]  # the sequential selector's cycle (stable indices)

REWARD = '''
import json, os, threading
_lock = threading.Lock()

def compute_score(data_source, solution_str, ground_truth, extra_info=None, counter_file=None, **kwargs):
    kind, index = extra_info["kind"], str(extra_info["index"])
    if kind != "coin":
        score = 1.0 if kind == "easy" else 0.0
    else:  # the counts live in the run directory, so a resumed run continues them
        with _lock:
            os.makedirs(os.path.dirname(counter_file), exist_ok=True)
            counts = json.load(open(counter_file)) if os.path.exists(counter_file) else {}
            counts[index] = counts.get(index, 0) + 1
            with open(counter_file + ".tmp", "w") as f:
                json.dump(counts, f)
            os.replace(counter_file + ".tmp", counter_file)
        score = float(counts[index] % 2)
    return {"score": score, "acc": score}
'''


def model_path() -> str:
    from verl_ext.models.embedded import embedded_model_path

    return embedded_model_path(num_layers=2)


def write_scenario(root: Path, index=INDEX, kinds=KIND, ranks=RANK) -> dict[str, str]:
    """Parquet files and the reward module of the scenario (or of tasks ``index`` of ``kinds`` and ``ranks``) under
    ``root``."""
    from data_prep.schema import make_row, write_rows

    rows = [make_row(data_source="scenario", question=f"Say the number {i}.", ability="test", ground_truth=str(i),
                     index=idx, split="train", kind=kind, rank=rank)
            for i, (idx, kind, rank) in enumerate(zip(index, kinds, ranks, strict=True))]
    write_rows(rows, root / "train.parquet")
    write_rows(rows[:2], root / "test.parquet")
    (root / "reward.py").write_text(REWARD)
    return {"train": str(root / "train.parquet"), "test": str(root / "test.parquet"), "reward": str(root / "reward.py")}


WEAK = {"easy": 0.8, "coin": 0.3, "hard": 0.0}  # reference pass rates by kind (BOTS's implicit evidence)
STRONG = {"easy": 1.0, "coin": 0.7, "hard": 0.1}


def write_reference_scenario(root: Path, index=INDEX, kinds=KIND) -> tuple[list[dict], dict[str, str]]:
    """The scenario's rows (``index`` / ``kinds``) with weak and strong reference pass-rate columns, and its files
    under ``root``."""
    from data_prep.schema import make_row, write_rows

    rows = [make_row(data_source="scenario", question=f"Say the number {i}.", ability="test", ground_truth=str(i),
                     index=idx, split="train", kind=kind, weak_pass_rate=WEAK[kind], strong_pass_rate=STRONG[kind])
            for i, (idx, kind) in enumerate(zip(index, kinds))]
    write_rows(rows, root / "train.parquet")
    write_rows(rows[:2], root / "test.parquet")
    (root / "reward.py").write_text(REWARD)
    return rows, {"train": str(root / "train.parquet"), "test": str(root / "test.parquet"),
                  "reward": str(root / "reward.py")}


def common_overrides(data: dict[str, str], run_dir: Path, steps: int, *, tasks: int, n: int, mini: int,
                     response: int = 32) -> list[str]:
    """A tiny GRPO job: the shared small-CPU preset with the scenario's sizes, reward and checkpoints."""
    return [
        "+preset=cpu_small",
        f"data.train_files={data['train']}", f"data.val_files={data['test']}",
        f"data.train_batch_size={tasks}", "data.max_prompt_length=128", f"data.max_response_length={response}",
        f"actor_rollout_ref.model.path={model_path()}",
        "actor_rollout_ref.actor.optim.lr=1e-4", "actor_rollout_ref.actor.optim.weight_decay=0.0",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={mini}", "actor_rollout_ref.actor.entropy_coeff=0.001",
        "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]",
        f"actor_rollout_ref.rollout.n={n}", "actor_rollout_ref.rollout.calculate_log_probs=True",
        f"reward.custom_reward_function.path={data['reward']}",
        "trainer.project_name=verl_ext_tests", "trainer.experiment_name=run",
        "trainer.total_epochs=100", f"trainer.total_training_steps={steps}", f"trainer.default_local_dir={run_dir}",
        "++ray_kwargs.ray_init.include_dashboard=False",
    ]


def axis_overrides(axis: str, cfg: dict) -> list[str]:
    """Hydra overrides choosing ``cfg["name"]`` for ``axis`` (``selector``, ``allocator``, ``rollout_filter``) and
    setting its other fields: ``{"name": "variance", "min_n": 2}`` -> ``allocator=variance allocator.min_n=2``."""
    return [f"{axis}={v}" if k == "name" else f"{axis}.{k}={v}" for k, v in cfg.items()]


def run_env(**env_vars: str) -> dict[str, str]:
    """The environment of a trainer run: offline hubs, this checkout importable, Ray quiet."""
    env = {**os.environ, **env_vars, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), "PYTHONUNBUFFERED": "1",
           "RAY_DEDUP_LOGS": "0", "RAY_USAGE_STATS_ENABLED": "0", "RAY_DISABLE_DOCKER_CPU_WARNING": "1"}
    if "VERL_FILE_LOGGER_PATH" not in env_vars:
        env.pop("VERL_FILE_LOGGER_PATH", None)
    return env


def run(module: str, overrides: list[str], log: Path, timeout: int = 600, **env_vars: str) -> float:
    """Run ``python -m <module> [--cpu] <overrides>`` (CPU mode); returns the wall time."""
    env = run_env(**env_vars)
    if module == "verl_ext.main":
        argv = [sys.executable, "-m", module, "--cpu", *overrides]
    else:
        # stock verl.trainer.main_ppo; --config-dir makes the project's preset group visible to it
        argv = [sys.executable, "-m", "verl_ext.cpu", "run", "--config-dir", str(ROOT / "verl_ext" / "config"),
                *overrides]
    start = time.perf_counter()
    with open(log, "w") as out:  # own process group: a run past its timeout is ended with every process it started
        proc = subprocess.Popen(argv, cwd=log.parent, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail(f"{module} still running after {timeout} s (killed); log {log}:\n{log.read_text()[-6000:]}")
    if returncode:
        tail = log.read_text()[-6000:]
        pytest.fail(f"{module} exited with {returncode}; log {log}:\n{tail}")
    return time.perf_counter() - start


def hf_weights(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    out: dict[str, torch.Tensor] = {}
    for f in sorted(Path(path).glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out
