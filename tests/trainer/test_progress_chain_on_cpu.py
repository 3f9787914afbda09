"""The Countdown chain of Yan, "Progress-Aware Prompt Sampling", CS224R, §3-4 on the 2-layer embedded model, through
verl's trainers, once for the module: SFT warm start (``python -m verl_ext.sft``) → RLOO with the conservative bucket
sampler (``+objective=rloo selector=conservative``) → naive RFT (``python -m verl_ext.apps.rft``: K samples, filter,
one SFT epoch, evaluation) → ``eval.evaluate --preset progress`` of the RL run → ``eval.tables progress``. (The clean
filter is the same chain with another ``--filter``; its selection is unit-tested in
``tests/data_prep/test_rft_filter_on_cpu.py``.)

A policy that scores: every "known" prompt is a permutation of the numbers 3, 5, 7 with target 15, so the one
answer the warm start learns, ``3 + 5 + 7``, is right for all of them (bucket 0) and wrong, with the verifier's 0.1
for well-formed answers, for the other prompts (one in each of six other buckets: the conservative cap of 0.18 needs
six). The rewards are the real Countdown verifier's; the bucket sampler sees unequal buckets, and RFT finds correct
completions to keep."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.trainer.scenario import ROOT, common_overrides, hf_weights, model_path, run
from verl_ext.axes import StepResults, TaskPool, build_selector
from verl_ext.trainer import records

pytestmark = pytest.mark.e2e  # starts Ray, vLLM or a training run: `make test-fast` leaves it out

STEPS, SEED, N, TASKS, RESPONSE = 2, 4, 4, 4, 48
SELECTOR = {"name": "progress", "prior": "data", "epsilon": 0.8, "temperature": 0.5, "cap": 0.18}  # conservative
KNOWN = [list(p) for p in itertools.permutations([3, 5, 7])]  # target 15; KNOWN[:4] train, KNOWN[4:] held out
# buckets 1, 2, 3, 5, 6, 7 (train) and 4 (held out)
OTHER = [([4, 6, 8], 32), ([7, 8, 6], 62), ([9, 9, 3], 84), ([2, 3, 4, 5], 29), ([6, 8, 3, 5], 56),
         ([12, 7, 4, 9], 96), ([2, 5, 6, 1], 13)]
ANSWER = "<think>3 + 5 + 7 = 15</think> <answer>3 + 5 + 7</answer>"
REWARD = "from verl_ext.rewards import compute_score  # the project's verifiers (Countdown: 0 / 0.1 / 1)\n"


def countdown_row(numbers: list[int], target: int, index: int, split: str) -> dict:
    from data_prep.embedded_datasets import COUNTDOWN_TEMPLATE, countdown_bucket
    from data_prep.schema import make_row

    return make_row(data_source="countdown", question=COUNTDOWN_TEMPLATE.format(numbers=numbers, target=target),
                    ability="math", ground_truth={"target": target, "numbers": numbers}, index=index, split=split,
                    num_count=len(numbers), target=target, bucket=countdown_bucket(len(numbers), target))


def sft(overrides: list[str], log: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "verl_ext.sft", "--cpu", *overrides], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    log.write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, f"SFT failed, log {log}:\n{(proc.stdout + proc.stderr)[-4000:]}"


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> dict[str, Path]:
    import pandas as pd

    from data_prep.schema import write_rows
    from data_prep.sft_messages import sft_row

    root = tmp_path_factory.mktemp("progress_chain")
    train = [countdown_row(n, 15, 500 + i, "train") for i, n in enumerate(KNOWN[:4])] + \
        [countdown_row(n, t, 510 + i, "train") for i, (n, t) in enumerate(OTHER[:6])]
    test = [countdown_row(n, 15, 600 + i, "test") for i, n in enumerate(KNOWN[4:])] + \
        [countdown_row(*OTHER[6], 610, "test")]
    write_rows(train, root / "train.parquet")
    write_rows(test, root / "test.parquet")
    (root / "reward.py").write_text(REWARD)
    pd.DataFrame([sft_row(r, ANSWER) for r in train[:4]] * 4).to_parquet(root / "sft.parquet", index=False)

    # 1. SFT warm start: 4 epochs of 16 rows, 4 per step (it solves about 60 % of the known prompts' samples)
    sft([f"model.path={model_path()}", f"data.train_files={root / 'sft.parquet'}", "data.train_batch_size=4",
         "data.micro_batch_size_per_gpu=4", "data.use_dynamic_bsz=False", "model.enable_gradient_checkpointing=False",
         "data.max_length=256", "optim.lr=3e-3", "trainer.total_epochs=4", "checkpoint.save_contents=[hf_model]",
         "trainer.project_name=test", "trainer.experiment_name=warm_start", f"trainer.default_local_dir={root / 'sft'}"],
        root / "sft.log")
    warm = root / "sft" / "global_step_16" / "huggingface"

    # 2. RLOO with the conservative bucket sampler, from the warm start
    data = {"train": str(root / "train.parquet"), "test": str(root / "test.parquet"), "reward": str(root / "reward.py")}
    rl = root / "rl"
    run("verl_ext.main", common_overrides(data, rl, STEPS, tasks=TASKS, n=N, mini=TASKS, response=RESPONSE) + [
        f"actor_rollout_ref.model.path={warm}", f"data.seed={SEED}", f"trainer.save_freq={STEPS}",
        "actor_rollout_ref.actor.entropy_coeff=0",  # the recipe's: with bypass mode, no pass computes entropy
        "+objective=rloo", "selector=conservative"], root / "rl.log")
    sampling = ["--max-new-tokens", str(RESPONSE), "--batch-size", "64"]
    subprocess.run([sys.executable, "-m", "eval.evaluate", "--run", str(rl), "--steps", str(STEPS),
                    "--benchmarks", f"countdown={root / 'test.parquet'}", "--preset", "progress", *sampling],
                   cwd=ROOT, check=True, capture_output=True)

    # 3. naive RFT from the RL checkpoint, one command
    proc = subprocess.run(
        [sys.executable, "-m", "verl_ext.apps.rft", "--model", str(rl / f"global_step_{STEPS}" / "actor"),
         "--train", str(root / "train.parquet"), "--sft", str(root / "sft.parquet"), "--test", str(root / "test.parquet"),
         "--filter", "naive", "--out", str(root / "rft_naive"), "--k", "4", *sampling, "--cpu", "--",
         "model.enable_gradient_checkpointing=False"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    (root / "rft_naive.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return {"root": root, "warm": warm, "rl": rl}


def test_the_warm_start_scores_and_rloo_trains_on_real_verifier_rewards(chain):
    dumps = records.read_dumps(chain["rl"])
    assert sorted(dumps) == list(range(1, STEPS + 1))
    rewards = np.concatenate([d["rollout_reward"] for d in dumps.values()])
    assert (rewards == 1.0).any() and (rewards < 1.0).any(), rewards  # a policy that scores, not every rollout
    for d in dumps.values():
        flags = d["rollout_format_valid"]
        assert flags is not None and len(flags) == len(d["rollout_reward"]) == N * TASKS
        assert all(f for f, r in zip(flags, d["rollout_reward"]) if r == 1.0)  # a right answer is well formed
        rewards, tasks = np.array(d["rollout_reward"]), np.array(d["rollout_task"])
        for t in np.unique(tasks):  # leave-one-out advantages
            r = rewards[tasks == t]
            np.testing.assert_allclose(np.array(d["rollout_advantage"])[tasks == t],
                                       r - (r.sum() - r) / (len(r) - 1), atol=1e-5)
    metrics = records.read_metrics(chain["rl"])
    for m in metrics.values():  # bypass mode's REINFORCE loss: sequence weights pi_theta / pi_rollout capped at 2
        assert 0 < m["actor/rollout_corr/rollout_is_seq_min"] <= m["actor/rollout_corr/rollout_is_seq_max"] <= 2.0
        assert m["timing_s/selector"] > 0  # the bucket sampler's select + update, timed per step


def test_a_replayed_bucket_sampler_chooses_what_the_run_chose(chain):
    import pandas as pd

    train = pd.read_parquet(chain["root"] / "train.parquet")
    pool = TaskPool(np.array([e["index"] for e in train["extra_info"]]),
                    {"bucket": np.array([e["bucket"] for e in train["extra_info"]])})
    selector = build_selector(SELECTOR, pool, SEED)
    metrics = records.read_metrics(chain["rl"])
    probabilities = {}
    for step, d in sorted(records.read_dumps(chain["rl"]).items()):
        probabilities[step] = selector.distribution()
        assert selector.select(step, TASKS).tolist() == d["tasks"], step
        r = StepResults.from_rewards(d["rollout_task"], d["rollout_reward"])
        selector.update(step, StepResults(r.task_index, r.reward, r.success, np.array(d["rollout_format_valid"])))
        logged = [metrics[step][f"data_selection/selector/bucket_prob/{b}"] for b in selector.bucket_ids]
        np.testing.assert_allclose(logged, probabilities[step], atol=1e-9)
        assert metrics[step]["data_selection/selector/format_valid_rate"] == pytest.approx(
            np.mean(d["rollout_format_valid"]))
    assert max(max(p) for p in probabilities.values()) == pytest.approx(SELECTOR["cap"])  # the cap binds


def test_rft_keeps_verified_completions_trains_one_epoch_and_evaluates(chain):
    rl_weights = hf_weights(chain["rl"] / f"global_step_{STEPS}" / "actor" / "huggingface")
    out = chain["root"] / "rft_naive"
    summary = json.loads((out / "data" / "train.json").read_text())
    assert summary["filter"] == "naive" and summary["samples"] == 4 * 10
    assert 0 < summary["rft_rows"] <= 2 * summary["rft_prompts"]
    kept = pd_rows(out / "data" / "train.parquet")
    assert {r["index"] for r in kept[:summary["rft_rows"]]} <= {500, 501, 502, 503}  # only the solvable ones
    sft_log = [json.loads(line)["data"] for line in (out / "sft" / "metrics" / "sft.jsonl").read_text().splitlines()]
    assert [round(d["train/lr"], 12) for d in sft_log if "train/lr" in d] == [1e-5]  # one step: one epoch, its lr
    (step,) = [int(p.name.split("_")[-1]) for p in (out / "sft").glob("global_step_*")]
    after = hf_weights(out / "sft" / f"global_step_{step}" / "huggingface")
    assert any(not np.array_equal(after[k].float().numpy(), rl_weights[k].float().numpy()) for k in rl_weights)
    evaluated = json.loads((out / "sft" / "eval" / f"step_{step}" / "summary.json").read_text())
    assert evaluated["sampling"]["preset"] == "progress" and evaluated["sampling"]["top_k"] == 20
    assert evaluated["benchmarks"]["countdown"]["n_problems"] == 3


def pd_rows(path: Path) -> list[dict]:
    import pandas as pd

    return pd.read_parquet(path).to_dict("records")


def test_progress_tables_list_our_runs(chain):
    root = chain["root"]
    proc = subprocess.run([sys.executable, "-m", "eval.tables", "progress", "--runs", f"conservative={chain['rl']}",
                           f"rft_naive={root / 'rft_naive' / 'sft'}",
                           "--baseline", "conservative"], cwd=ROOT, capture_output=True, text=True, check=True)
    lines = proc.stdout.splitlines()
    summary = lines[lines.index("### Progress: countdown"):]
    for name in ("conservative", "rft_naive"):
        row = next(line for line in summary if line.startswith(f"| {name} |"))
        assert float(row.split("|")[2]) > 0, row  # avg score: ours, measured
    assert any(line.startswith("| rft_naive |") and "/" in line for line in lines
               if "W/L/T" not in line)  # the paired table's wins/losses/ties against the RL run
