"""With its defaults (uniform selector, fixed allocator, keep-all filter) ``python -m verl_ext.main`` trains
exactly like stock ``python -m verl.trainer.main_ppo`` (GRPO, same seed, data and batch): the same prompts
per step (verl's shuffled dataloader order, across an epoch boundary), the same rewards, responses and
batch accounting, and the same update (losses, gradient norm), step after step.

Both runs *sample* (temperature 1, no top-k/top-p): the ``hf`` CPU rollout seeds every request from
``actor_rollout_ref.rollout.seed``, the weight version, the prompt, the sampling parameters and the
occurrence of the request, so the two runs draw the same responses although their batching may differ.
The reward is the parity of the response's character codes, so the two rollouts of a prompt often score
differently; the tiny truncated model never emits EOS within 32 tokens (equal lengths), so a single
on-policy update would have ``pg_loss`` 0 whatever the rewards: two PPO epochs over the step's one
mini-batch (``ppo_epochs=2``) make the second pass off-policy, and its ``pg_loss`` is compared too. (Two
mini-batches would not do: the two trainers may order a step's rows differently, which splits them
differently.)

The stock run is the CPU smoke launcher ``scripts/cpu_grpo_smoke.sh`` (``verl.trainer.main_ppo`` in CPU mode, the
truncated embedded model), its own settings overridden by this test's: so the launcher is tested too, its step
lines, wall time and the weights it saves.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.trainer.scenario import ROOT, common_overrides, hf_weights, model_path, run, write_scenario
from verl_ext.trainer import records

pytestmark = [pytest.mark.e2e, pytest.mark.beside]  # a training run, in make test's second lane

STEPS = 2
REWARD = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    score = float(sum(map(ord, solution_str)) % 2)  # varies from sample to sample
    return {"score": score, "acc": score}
"""
EXACT = ("critic/score/mean", "critic/score/max", "critic/score/min", "response_length/mean", "response_length/max",
         "prompt_length/mean", "global_seqlen/mean", "global_seqlen/max", "critic/advantages/mean",
         "critic/advantages/max", "critic/advantages/min")
CLOSE = ("actor/pg_loss", "actor/entropy", "actor/entropy_loss", "actor/grad_norm", "actor/pg_clipfrac",
         "training/rollout_probs_diff_mean")
# mean(old log-prob - log-prob) after an update: a difference of O(1) float32 values, so its float noise is
# absolute (~1e-6, seen 1.07e-6 at 0.0078 between two runs of the same code path), not relative
KL_ABS = 5e-6


def generations(rollout_dir: Path, step: int) -> Counter:
    """(prompt, response, score) of every real rollout of a step (verl's ``trainer.rollout_data_dir`` dump)."""
    rows = [json.loads(line) for line in (rollout_dir / f"{step}.jsonl").read_text().splitlines() if line.strip()]
    return Counter((r["input"], r["output"], r["score"]) for r in rows if not r["uid"].startswith("pad"))


def smoke(overrides: list[str], out: Path) -> str:
    """``scripts/cpu_grpo_smoke.sh OVERRIDES`` into ``out``; returns its log."""
    env = {**os.environ, "PYTHON": sys.executable, "SMOKE_OUT": str(out), "SMOKE_NUM_LAYERS": "2",
           "SMOKE_STEPS": str(STEPS)}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "cpu_grpo_smoke.sh"), *overrides], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    (out / "run.log").write_text(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-6000:]
    return proc.stdout


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("default_vs_stock")
    data = write_scenario(root)
    Path(data["reward"]).write_text(REWARD)
    out = {}
    for name in ("stock", "verl_ext"):
        run_dir = root / name
        overrides = common_overrides(data, run_dir, STEPS, tasks=4, n=2, mini=4) + [
            "actor_rollout_ref.rollout.temperature=1.0", "actor_rollout_ref.actor.ppo_epochs=2",
            f"trainer.rollout_data_dir={run_dir}/rollouts", "data.seed=7",
        ]
        if name == "stock":  # the launcher saves the last step's Hugging Face weights
            run_dir.mkdir()
            launcher = [o for o in overrides if o != "+preset=cpu_small"]  # the launcher composes the preset itself
            out["log"] = smoke([*launcher, f"trainer.save_freq={STEPS}"], run_dir)
        else:
            seconds = run("verl_ext.main", [*overrides, "trainer.save_freq=-1"], root / "ours.log")
            print(f"verl_ext.main, {STEPS} steps: {seconds:.1f} s")
        out[name] = run_dir
    stock = {}
    for line in (out["stock"] / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        stock[record["step"]] = record["data"]
    return stock, records.read_metrics(out["verl_ext"]), out["stock"], out["verl_ext"] / "rollouts", out["log"]


def test_same_prompts_rewards_and_responses(two_runs):
    _, _, stock_dir, ours_dir, _ = two_runs
    for step in range(1, STEPS + 1):
        stock, ours = generations(stock_dir / "rollouts", step), generations(ours_dir, step)
        assert sum(stock.values()) == 8 and ours == stock, step


def test_same_metrics(two_runs):
    stock, ours, _, _, _ = two_runs
    assert sorted(stock) == sorted(ours) == list(range(1, STEPS + 1))
    for step in stock:
        for key in EXACT:
            assert ours[step][key] == pytest.approx(stock[step][key], rel=1e-9, abs=1e-9), (step, key)
        for key in CLOSE:
            assert ours[step][key] == pytest.approx(stock[step][key], rel=1e-4, abs=1e-6), (step, key)
        assert ours[step]["actor/ppo_kl"] == pytest.approx(stock[step]["actor/ppo_kl"], abs=KL_ABS), step
        assert ours[step]["data_selection/filter_kept_fraction"] == 1.0
        assert ours[step]["data_selection/rollouts_per_task/std"] == 0.0
        assert abs(ours[step]["training/rollout_probs_diff_max"]) < 1e-3, step
    # sampling, not greedy decoding: groups with both rewards, hence a real policy-gradient signal
    assert any(stock[step]["critic/advantages/max"] > 0.1 for step in stock)
    assert max(abs(stock[step]["actor/pg_loss"]) for step in stock) > 1e-5



def test_the_smoke_launcher_logs_its_steps_and_saves_weights_that_moved(two_runs):
    stock, _, stock_dir, _, log = two_runs
    assert "[smoke] step 1:" in log and f"[smoke] step {STEPS}:" in log and "[smoke] wall time" in log
    for d in stock.values():  # the backend's log-probs vs the actor's recomputation: numerical noise only
        assert d["training/rollout_probs_diff_valid"] == 1 and d["training/rollout_probs_diff_max"] < 1e-3
        assert d["actor/grad_norm"] > 0 and math.isfinite(d["actor/pg_loss"])
    before = hf_weights(Path(model_path()))
    after = hf_weights(stock_dir / f"global_step_{STEPS}" / "actor" / "huggingface")
    assert set(after) == set(before)
    diffs = {k: (after[k].float() - before[k].float()).abs().max().item() for k in before}
    # every trainable tensor moved: Adam steps of about lr = 1e-4 each (weight decay 0: only gradients act)
    assert all(math.isfinite(v) and v > 0 for v in diffs.values()), sorted(k for k, v in diffs.items() if not v > 0)
    assert max(diffs.values()) < 1e-2
