"""End to end: real verl GRPO training on the CPU (``scripts/cpu_grpo_smoke.sh``).

``python -m verl.trainer.main_ppo`` with the v1 trainer, Ray and TransferQueue, the embedded SmolLM2
(truncated to 2 layers), the ``hf`` rollout backend and the project's reward, two steps. Takes about
two minutes on a 2-core machine.
"""

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from verl_ext.models.embedded import embedded_model_path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "cpu_grpo_smoke.sh"
NUM_LAYERS = 2  # the truncated model the other trainer tests use (text does not matter here)
STEPS = 2
TIMEOUT_S = 600


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cpu_grpo")
    env = {**os.environ, "PYTHON": sys.executable, "SMOKE_OUT": str(out), "SMOKE_NUM_LAYERS": str(NUM_LAYERS),
           "SMOKE_STEPS": str(STEPS)}
    env.pop("RAY_ADDRESS", None)
    log = out / "run.log"
    start = time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.run(["bash", str(SCRIPT)], stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                              timeout=TIMEOUT_S)
    elapsed = time.monotonic() - start
    text = log.read_text(errors="replace")
    metrics_path = out / "metrics.jsonl"
    records = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()] \
        if metrics_path.exists() else []
    steps = [r for r in records if "timing_s/step" in r["data"]]  # a step-0 record would hold validation only
    return {"rc": proc.returncode, "log": text, "steps": steps, "out": out, "elapsed": elapsed}


def _tail(run, n=60):
    return "\n".join(run["log"].splitlines()[-n:])


def test_runs_two_steps(smoke_run):
    assert smoke_run["rc"] == 0, _tail(smoke_run)
    assert [s["step"] for s in smoke_run["steps"]] == list(range(1, STEPS + 1)), _tail(smoke_run)
    assert "[smoke] wall time" in smoke_run["log"]
    print(f"CPU GRPO smoke: {smoke_run['elapsed']:.1f} s wall, step times "
          f"{[round(s['data']['timing_s/step'], 1) for s in smoke_run['steps']]}")


def test_rollout_backend_produced_responses_with_logprobs(smoke_run):
    assert smoke_run["rc"] == 0, _tail(smoke_run)
    for s in smoke_run["steps"]:
        d = s["data"]
        assert d["response_length/mean"] > 0
        assert d["response_length/max"] <= 48
        # the backend's log-probs vs the actor's recomputation (same fp32 weights): numerical noise only
        assert d["training/rollout_probs_diff_valid"] == 1
        assert d["training/rollout_probs_diff_max"] < 1e-3, d["training/rollout_probs_diff_max"]
        assert "critic/score/mean" in d and math.isfinite(d["critic/score/mean"])
        assert d["actor/grad_norm"] > 0 and math.isfinite(d["actor/pg_loss"])


def test_actor_weights_changed(smoke_run):
    assert smoke_run["rc"] == 0, _tail(smoke_run)
    saved = smoke_run["out"] / "ckpt" / f"global_step_{STEPS}" / "actor" / "huggingface" / "model.safetensors"
    assert saved.is_file(), _tail(smoke_run)
    before = load_file(str(Path(embedded_model_path(NUM_LAYERS)) / "model.safetensors"))
    after = load_file(str(saved))
    assert set(after) == set(before)
    diffs = {k: (after[k].float() - before[k].float()).abs().max().item() for k in before}
    assert all(math.isfinite(v) for v in diffs.values())
    changed = [k for k, v in diffs.items() if v > 0]
    # every trainable tensor moved (Adam steps of about lr=1e-5 each; weight decay is 0, so only gradients act)
    assert len(changed) == len(diffs), sorted(set(diffs) - set(changed))
    assert 1e-7 < max(diffs.values()) < 1e-3
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(after[q], before[q])
