"""``make demo`` (verl_ext.apps.demo): its summary arithmetic on hand-built logs, and one whole demo through the real
warm start, reference pass rates, trainer and evaluator on the 2-layer truncated model (text meaningless)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from data_prep.embedded_datasets import make_row
from data_prep.schema import write_rows
from verl_ext.apps import demo

pytestmark = pytest.mark.e2e  # starts Ray, vLLM or a training run: `make test-fast` leaves it out


def _write_run(run: Path, steps: dict[int, dict]) -> None:
    (run / "metrics").mkdir(parents=True)
    (run / "data_selection").mkdir()
    lines = []
    for step, d in steps.items():
        lines.append(json.dumps({"step": step, "data": d["metrics"]}))
        (run / "data_selection" / f"step_{step:06d}.json").write_text(json.dumps(d["dump"]))
    (run / "metrics" / "from_step_000000.1.jsonl").write_text("\n".join(lines) + "\n")


def test_selection_signal_reads_the_targets_from_metrics_dumps_and_reference_rates(tmp_path):
    strong = {0: 0.0, 1: 0.5, 2: 1.0, 3: 0.25}
    rows = [make_row(data_source="arithmetic", ability="math", index=i, split="train", question=f"q{i}",
                     ground_truth="1", strong_pass_rate=p, weak_pass_rate=0.0) for i, p in strong.items()]
    pool = write_rows(rows, tmp_path / "pool.parquet")
    run = tmp_path / "run"
    _write_run(run, {
        1: {"metrics": {"critic/score/mean": 0.3, "data_selection/effective_task_ratio": 0.5,
                        "data_selection/degenerate_group_rate": 0.5},
            "dump": {"tasks": [1, 2], "counts": [2, 2], "rollout_task": [1, 1, 2, 2],
                     "rollout_reward": [1.0, 0.0, 1.0, 1.0]}},
        2: {"metrics": {"critic/score/mean": 0.6, "data_selection/effective_task_ratio": 1.0,
                        "data_selection/degenerate_group_rate": 0.0},
            "dump": {"tasks": [1, 3], "counts": [3, 1], "rollout_task": [1, 1, 1, 3],
                     "rollout_reward": [1.0, 0.0, 0.1, 0.0]}},
    })
    s = demo.selection_signal(run, pool, ref_n=4, rollouts_per_task=2)
    assert s["steps"] == 2 and s["reward_step1"] == 0.3 and s["etr_mean"] == pytest.approx(0.75)
    # a uniform draw, 2 rollouts a task, from 0, 2, 4, 1 reference successes of 4 (eval.metrics' hand case)
    assert s["uniform_expected_degenerate"] == pytest.approx(114 / 168) and s["degenerate_mean"] == 0.25
    assert s["uniform_expected_etr"] == pytest.approx(54 / 168) and s["uniform_rollouts_per_task"] == 2
    assert s["steps_with_unequal_counts"] == 1
    # observed pass rates (success = reward >= 1): step 1: 0.5, 1.0; step 2: 1/3, 0.0
    assert s["distance_selected_observed"] == pytest.approx(np.mean([0.0, 0.5, 0.5 - 1 / 3, 0.5]))
    assert s["distance_selected_reference"] == pytest.approx(np.mean([0.0, 0.5, 0.0, 0.25]))
    assert s["distance_uniform_reference"] == pytest.approx(np.mean([0.5, 0.0, 0.5, 0.25]))
    missed = demo.print_summary(s, None, None)
    assert missed == []  # 0.3 in [0.2, 0.8], ETR 0.75, degenerate 0.25 < 0.68, unequal counts, 0.1875 < 0.3125
    assert demo.print_summary(s | {"degenerate_mean": 0.7}, None, None) == ["fewer_degenerate"]



def test_heldout_change_pairs_tasks_and_refuses_different_sets(tmp_path):
    def samples(path: Path, hits: dict[int, list[int]]) -> Path:
        path.write_text("".join(json.dumps({"index": i, "sample": j, "success": bool(h)}) + "\n"
                                for i, hs in hits.items() for j, h in enumerate(hs)))
        return path

    before = samples(tmp_path / "before.jsonl", {0: [0, 0], 1: [1, 0], 2: [1, 1]})
    after = samples(tmp_path / "after.jsonl", {0: [1, 0], 1: [1, 1], 2: [1, 1]})
    c = demo.heldout_change(before, after)
    assert c["tasks"] == 3 and c["before"] == pytest.approx(0.5) and c["after"] == pytest.approx(5 / 6)
    assert c["delta"] == pytest.approx(1 / 3) and c["low"] <= c["delta"] <= c["high"]
    other = samples(tmp_path / "other.jsonl", {0: [1], 5: [1]})
    with pytest.raises(RuntimeError, match="different tasks"):
        demo.heldout_change(before, other)


def test_demo_end_to_end_on_the_truncated_model(tmp_path, truncated_model_cache):
    """Warm start, reference pass rates, before/after evaluation and two BOTS + CoBA-RL steps; the console gets
    one line per step and the summary, verl's own output stays in the log file."""
    root = truncated_model_cache / "models"
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "verl_ext.apps.demo", "--num-layers", "2", "--out", str(out), "--steps", "2",
         "--tasks", "2", "--budget", "6", "--pool", "4", "--ref-n", "1", "--eval-tasks", "2", "--eval-k", "2",
         "--warm-start-steps", "2"],
        capture_output=True, text=True, env={**os.environ, "VERL_EXT_CACHE": str(truncated_model_cache)}, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["step", "reward"])
    assert [line.split()[0] for line in lines[start + 1 : start + 3]] == ["1", "2"]
    counts = [list(map(int, line.split()[8:])) for line in lines[start + 1 : start + 3]]
    assert all(len(c) == 2 and sum(c) == 6 for c in counts)  # 2 tasks share the budget of 6
    log = (out / "trainer.log").read_text()
    assert "TaskRunner" in log and "TaskRunner" not in proc.stdout  # verl's chatter only in the log
    summary = json.loads((out / "report" / "summary.json").read_text())
    assert summary["selection"]["steps"] == 2 and summary["heldout"]["tasks"] == 2
    assert "held-out accuracy (2 unseen tasks x 2 samples" in proc.stdout
    assert (out / "report" / "etr.png").is_file() and (out / "report" / "rollouts_per_task.png").is_file()
    assert (out / "report" / "eval_arithmetic_easy.png").is_file()  # before/after, the change's interval on it
    assert (out / "report" / "degenerate.png").is_file() and "expected from the warm start's reference rates" in proc.stdout
    assert 0 <= summary["selection"]["uniform_expected_etr"] <= 1 and summary["selection"]["uniform_rollouts_per_task"] == 3
    warm = json.loads(next(root.glob("*-sft-arithmetic_easy-*/verl_ext_embedded.json")).read_text())
    assert warm["heldout"] is None and warm["sft_loss_last"] < warm["sft_loss_first"]  # measured by the demo
