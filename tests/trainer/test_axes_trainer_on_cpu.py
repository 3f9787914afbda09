"""End to end through the real trainer path: ``python -m verl_ext.main --cpu`` (verl 0.9.1 v1 trainer,
Ray, TransferQueue, FSDP2 on CPU) with non-default components on every axis.

The scenario is deterministic although sampling is not: the reward ignores the completion. Six
tasks (stable indices 100..105) of three kinds: ``easy`` always scores 1, ``hard`` always 0 and
``coin`` alternates 1, 0, 1, ... per task (counted in the run directory), so a coin group of
n >= 2 rollouts always has both rewards. ``selector=sequential selector.sort_by=[rank]
selector.descending=false`` serves the tasks in the order ``ORDER``; ``allocator=variance`` gives
unseen tasks (p = 0.5) more rollouts than solved ones; ``rollout_filter=drop_degenerate`` drops the
easy and hard groups.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from verl_ext.trainer import records

pytestmark = pytest.mark.e2e  # starts Ray, vLLM or a training run: `make test-fast` leaves it out

ROOT = Path(__file__).resolve().parents[2]
INDEX = [100, 101, 102, 103, 104, 105]
KIND = ["easy", "coin", "coin", "hard", "coin", "easy"]  # by dataset position
RANK = [5, 4, 3, 2, 1, 0]  # ascending rank: positions 5, 4, 3, 2, 1, 0
ORDER = [105, 104, 103, 102, 101, 100]  # the sequential selector's cycle (stable indices)
KIND_OF = dict(zip(INDEX, KIND))
BUDGET, TASKS_PER_STEP = 16, 4

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


def write_scenario(root: Path) -> dict[str, str]:
    """Parquet files and the reward module of the scenario under ``root``."""
    from data_prep.schema import make_row, write_rows

    rows = [make_row(data_source="scenario", question=f"Say the number {i}.", ability="test", ground_truth=str(i),
                     index=index, split="train", kind=kind, rank=rank)
            for i, (index, kind, rank) in enumerate(zip(INDEX, KIND, RANK))]
    write_rows(rows, root / "train.parquet")
    write_rows(rows[:2], root / "test.parquet")
    (root / "reward.py").write_text(REWARD)
    return {"train": str(root / "train.parquet"), "test": str(root / "test.parquet"), "reward": str(root / "reward.py")}


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


def scenario_overrides(data: dict[str, str], run_dir: Path, steps: int) -> list[str]:
    return common_overrides(data, run_dir, steps, tasks=TASKS_PER_STEP, n=4, mini=2) + [
        f"+reward.custom_reward_function.reward_kwargs.counter_file={run_dir}/coin_counts.json",
        "actor_rollout_ref.actor.entropy_coeff=0",  # per-sample entropy then comes from the old-log-prob pass
        "selector=sequential", "selector.sort_by=[rank]", "selector.descending=false",
        "allocator=variance", "allocator.min_n=2", "allocator.max_n=8",
        "rollout_filter=drop_degenerate",
    ]


def run(module: str, overrides: list[str], log: Path, timeout: int = 600, **env_vars: str) -> float:
    """Run ``python -m <module> [--cpu] <overrides>`` (CPU mode); returns the wall time."""
    env = {**os.environ, **env_vars, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), "PYTHONUNBUFFERED": "1",
           "RAY_DEDUP_LOGS": "0", "RAY_USAGE_STATS_ENABLED": "0", "RAY_DISABLE_DOCKER_CPU_WARNING": "1"}
    if "VERL_FILE_LOGGER_PATH" not in env_vars:
        env.pop("VERL_FILE_LOGGER_PATH", None)
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


STEPS, SAVE_FREQ = 3, 2


def scenario_run(tmp_path_factory) -> tuple[dict[str, str], Path]:
    """The scenario's files and its run: 3 steps, full checkpoints at steps 2 and 3 (once per session)."""
    root = tmp_path_factory.getbasetemp() / "scenario"
    if not (root / "done").exists():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        data = write_scenario(root)
        overrides = scenario_overrides(data, root / "run", STEPS) + [f"trainer.save_freq={SAVE_FREQ}"]
        print(f"verl_ext.main, {STEPS} steps: {run('verl_ext.main', overrides, root / 'run.log'):.1f} s")
        (root / "done").write_text("")
    return {"train": str(root / "train.parquet"), "test": str(root / "test.parquet"),
            "reward": str(root / "reward.py")}, root / "run"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return scenario_run(tmp_path_factory)[1]


def test_selector_allocator_and_filter_saw_real_rollouts(run_dir):
    dumps = records.read_dumps(run_dir)
    assert sorted(dumps) == [1, 2, 3]
    first, second = dumps[1], dumps[2]
    # sequential selector in sort_by=[rank] ascending order, stable indices (not positions)
    assert first["tasks"] == ORDER[:4] and second["tasks"] == ORDER[4:] + ORDER[:2]
    # variance allocator: equal while nothing is known, then unequal, always summing to the budget
    assert first["counts"] == [4, 4, 4, 4]
    assert sum(second["counts"]) == BUDGET and len(set(second["counts"])) > 1
    assert second["counts"] == [5, 5, 2, 4]  # 105 (easy, solved at step 1) gets min_n
    assert dumps[3]["tasks"] == ORDER[2:] and dumps[3]["counts"] == [2, 6, 6, 2]
    # mini-batches of at most ppo_mini_batch_size * n = 8 rollouts: 8 kept -> one of 8; 9 kept -> two of 5 (one
    # padding row); 12 kept -> two of 6
    assert first["actor_mini_batches"] == {"rows": 8, "num": 1, "size": 8}
    assert second["actor_mini_batches"] == {"rows": 9, "num": 2, "size": 5}
    assert dumps[3]["actor_mini_batches"] == {"rows": 12, "num": 2, "size": 6}
    assert [d["actor_update_rows"] for d in dumps.values()] == [8, 10, 12]
    for dump in dumps.values():
        rollout_task = np.array(dump["rollout_task"])
        assert len(rollout_task) == BUDGET
        assert {t: int((rollout_task == t).sum()) for t in dump["tasks"]} == dict(zip(dump["tasks"], dump["counts"]))
        kept_tasks = set(rollout_task[dump["kept"]].tolist())
        assert kept_tasks == {t for t in dump["tasks"] if KIND_OF[t] == "coin"}  # easy/hard groups dropped
        reward = np.array(dump["rollout_reward"])
        for t in dump["tasks"]:
            expected = {"easy": {1.0}, "hard": {0.0}, "coin": {0.0, 1.0}}[KIND_OF[t]]
            assert set(reward[rollout_task == t].tolist()) == expected
        # GRPO normalises within each prompt's actual group (uid), whatever its size
        group, advantage = np.array(dump["rollout_group"]), np.array(dump["rollout_advantage"])
        for g in np.unique(group):
            r = reward[group == g]
            assert advantage[group == g] == pytest.approx((r - r.mean()) / (r.std(ddof=1) + 1e-6), abs=1e-5)
        assert len(dump["clipfrac"]) == len(dump["kept"]) == len(dump["entropy"])
        assert all(0.0 <= c <= 1.0 for c in dump["clipfrac"]) and all(e > 0 for e in dump["entropy"])


def test_metrics_logged_every_step(run_dir):
    metrics = records.read_metrics(run_dir)
    assert sorted(metrics) == [1, 2, 3]
    for step, m in metrics.items():
        for key in ("timing_s/selector", "timing_s/allocator", "timing_s/rollout_filter", "timing_s/step",
                    "actor/pg_loss", "critic/score/mean", "data_selection/effective_task_ratio",
                    "data_selection/degenerate_group_rate", "data_selection/selected_pass_rate_mean",
                    "data_selection/rollouts_per_task/min", "data_selection/rollouts_per_task/mean",
                    "data_selection/rollouts_per_task/max", "data_selection/rollouts_per_task/std",
                    "data_selection/filter_kept_fraction"):
            assert key in m, (step, key)
        assert m["data_selection/rollouts_per_task/mean"] == BUDGET / TASKS_PER_STEP
    one, two = metrics[1], metrics[2]
    # step 1: tasks easy, coin, coin, hard -> kept 8 of 16; step 2: coin, easy, easy, coin -> 9 of 16
    assert one["data_selection/filter_kept_fraction"] == 0.5
    assert two["data_selection/filter_kept_fraction"] == 9 / 16
    assert one["data_selection/effective_task_ratio"] == 0.5 == one["data_selection/degenerate_group_rate"]
    assert two["data_selection/rollouts_per_task/min"] == 2 and two["data_selection/rollouts_per_task/max"] == 5


def test_checkpoint_holds_component_state_and_trained_weights(run_dir):
    step_dir = run_dir / "global_step_2"
    state = records.load_state(step_dir)["axes"]
    assert state["selector"] == {"cursor": 2}  # 8 tasks served from a cycle of 6
    assert state["allocator"]["last_pass_rate"] == {105: 1.0, 104: 0.5, 103: 0.0, 102: 0.5, 101: 0.6, 100: 1.0}
    before = hf_weights(Path(model_path()))
    after = hf_weights(run_dir / f"global_step_{STEPS}" / "actor" / "huggingface")
    shared = sorted(set(before) & set(after))
    assert shared
    assert any(not torch.equal(before[k].float(), after[k].float()) for k in shared)
