"""Resume exactness: a run stopped after its step-2 checkpoint and resumed with ``trainer.resume_mode=auto``
selects, allocates and filters at step 3 exactly like the uninterrupted run of ``test_axes_trainer_on_cpu``
(both the sequential cursor and the variance allocator's pass rates must be restored for that).

The stopped run is the uninterrupted run's directory as it was right after the step-2 checkpoint: what
it wrote later (checkpoint 3, the step-3 record and metrics line) is removed, and the scenario reward's
own counter file is set back to its step-2 value (rollouts of steps 1-2 per task).
"""

from __future__ import annotations

import json
import shutil
from collections import Counter

from tests.trainer.test_axes_trainer_on_cpu import ORDER, STEPS, run, scenario_overrides, scenario_run
from verl_ext.trainer import records

STOP = 2


def decisions(dump: dict) -> dict:
    """A step's selection, allocation, rewards and filter decision, independent of the rollouts' order in
    the batch (verl orders them by arrival and sequence length)."""
    rollouts = list(zip(dump["rollout_task"], dump["rollout_reward"]))
    return {"tasks": dump["tasks"], "counts": dump["counts"], "rollouts": sorted(rollouts),
            "kept": sorted(rollouts[i] for i in dump["kept"]), "actor_mini_batches": dump["actor_mini_batches"]}


def stop_after(run_dir, step: int, last: int = STEPS) -> None:
    """Make ``run_dir`` (a run of ``last`` steps) what a run killed right after its ``step`` checkpoint leaves."""
    for later in range(step + 1, last + 1):
        shutil.rmtree(run_dir / f"global_step_{later}", ignore_errors=True)
        (run_dir / records.DUMP_DIR / f"step_{later:06d}.json").unlink()
    (run_dir / "latest_checkpointed_iteration.txt").write_text(str(step))
    (log,) = (run_dir / records.METRICS_DIR).glob("*.jsonl")
    log.write_text("".join(line + "\n" for line in log.read_text().splitlines() if json.loads(line)["step"] <= step))
    done = Counter()
    for dump in records.read_dumps(run_dir).values():
        done.update(str(t) for t in dump["rollout_task"])
    (run_dir / "coin_counts.json").write_text(json.dumps(dict(done)))


def test_resumed_run_selects_like_the_uninterrupted_one(tmp_path_factory):
    data, uninterrupted = scenario_run(tmp_path_factory)
    resumed = tmp_path_factory.mktemp("resume") / "run"
    shutil.copytree(uninterrupted, resumed)
    stop_after(resumed, STOP)
    seconds = run("verl_ext.main", scenario_overrides(data, resumed, STEPS) + ["trainer.resume_mode=auto"],
                  resumed.parent / "resumed.log")
    print(f"verl_ext.main, resumed at step {STOP}, {STEPS - STOP} step(s): {seconds:.1f} s")

    got, want = records.read_dumps(resumed), records.read_dumps(uninterrupted)
    assert sorted(got) == sorted(want) == list(range(1, STEPS + 1))
    assert want[3]["tasks"] == ORDER[2:6]  # the cursor continued (a fresh selector restarts at ORDER[0])
    assert len(set(want[3]["counts"])) > 1  # the pass rates of steps 1-2 are in use
    for step in range(STOP + 1, STEPS + 1):
        assert decisions(got[step]) == decisions(want[step]), step

    # one metrics file per run: the resumed run did not truncate the first run's file
    assert len(list((resumed / records.METRICS_DIR).glob("*.jsonl"))) == 2
    metrics, reference = records.read_metrics(resumed), records.read_metrics(uninterrupted)
    assert sorted(metrics) == list(range(1, STEPS + 1))
    for key in ("data_selection/filter_kept_fraction", "data_selection/rollouts_per_task/std", "critic/score/mean"):
        assert metrics[STEPS][key] == reference[STEPS][key], key
