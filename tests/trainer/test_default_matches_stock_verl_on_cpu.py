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
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.trainer.test_axes_trainer_on_cpu import common_overrides, run, write_scenario
from verl_ext.trainer import records

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


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("default_vs_stock")
    data = write_scenario(root)
    Path(data["reward"]).write_text(REWARD)
    out = {}
    for name, module in (("stock", "verl.trainer.main_ppo"), ("verl_ext", "verl_ext.main")):
        run_dir = root / name
        overrides = common_overrides(data, run_dir, STEPS, tasks=4, n=2, mini=4) + [
            "actor_rollout_ref.rollout.temperature=1.0", "actor_rollout_ref.actor.ppo_epochs=2",
            f"trainer.rollout_data_dir={run_dir}/rollouts", "trainer.save_freq=-1", "data.seed=7",
        ]
        env = {"VERL_FILE_LOGGER_PATH": str(root / "stock.jsonl")} if name == "stock" else {}
        seconds = run(module, overrides, root / f"{name}.log", **env)
        print(f"{module}, {STEPS} steps: {seconds:.1f} s")
        out[name] = run_dir
    stock = {}
    for line in (root / "stock.jsonl").read_text().splitlines():
        record = json.loads(line)
        stock[record["step"]] = record["data"]
    return stock, records.read_metrics(out["verl_ext"]), out["stock"] / "rollouts", out["verl_ext"] / "rollouts"


def test_same_prompts_rewards_and_responses(two_runs):
    _, _, stock_dir, ours_dir = two_runs
    for step in range(1, STEPS + 1):
        stock, ours = generations(stock_dir, step), generations(ours_dir, step)
        assert sum(stock.values()) == 8 and ours == stock, step


def test_same_metrics(two_runs):
    stock, ours, _, _ = two_runs
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

