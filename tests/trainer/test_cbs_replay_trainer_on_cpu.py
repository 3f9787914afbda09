"""CBS with its replay buffer through the real trainer (``rollout_filter=cbs``): on the tasks of
``tests.trainer.scenario`` (easy / hard / coin; a coin's reward here is the parity of a hash of the sampled text,
which the seeded CPU rollout reproduces on a resumed run), 4 tasks x 4 rollouts per step, a buffer of the latest 24
rollouts and 8 rollouts per update. Rollouts of earlier steps reach the actor update with the old log-probs stored at
their generation (the loss reports, per row, the old and current mean token log-probs it used) and with their entropy
feature re-measured by the replaying step's policy (checked against that step's weights, a checkpoint every step),
the buffer lives in each checkpoint, and a run resumed in the middle replays exactly what the uninterrupted run
replays.

The project's resume test through the trainer: the sequential selector runs too, so the resumed run selects,
filters and replays like the uninterrupted one only if the selector's cursor and the filter's buffer came back with
the checkpoint (the components' state is saved and loaded by one loop over the three axes; each axis's
``state_dict`` round trip is unit-tested in tests/axes)."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest
import torch

from tests.trainer.scenario import ORDER, axis_overrides, common_overrides, run, write_scenario
from verl_ext.axes.views import ROLLOUT_ID_STRIDE
from verl_ext.trainer import records
from verl_ext.trainer.replay import FILE as STORE_FILE

pytestmark = [pytest.mark.e2e, pytest.mark.beside]  # a training run, in make test's second lane

STEPS, STOP, ROLLOUTS = 4, 2, 16
FILTER = {"name": "cbs", "buffer_size": 24, "batch_size": 8, "warmup": 0, "epsilon0": 0.5, "epsilon_min": 0.5,
          "lr": 1e-2}


REWARD = '''
import zlib

def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    kind = extra_info["kind"]
    score = float(kind == "easy") if kind != "coin" else float(zlib.crc32(solution_str.encode()) % 2)
    return {"score": score, "acc": score}
'''


def stop_after(run_dir, step: int, last: int) -> None:
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


def overrides(data, run_dir):
    return common_overrides(data, run_dir, STEPS, tasks=4, n=4, mini=4) + [
        f"reward.custom_reward_function.path={data['reward']}",
        "actor_rollout_ref.actor.entropy_coeff=0", "data.seed=3", "trainer.save_freq=1",
        "selector=sequential", "selector.sort_by=[rank]", "selector.descending=false",
        *axis_overrides("rollout_filter", FILTER),
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cbs_replay")
    data = write_scenario(root)
    (root / "text_reward.py").write_text(REWARD)
    data["reward"] = str(root / "text_reward.py")
    straight = root / "run"
    print(f"cbs, {STEPS} steps: {run('verl_ext.main', overrides(data, straight), root / 'run.log'):.1f} s")
    resumed = root / "resumed" / "run"
    shutil.copytree(straight, resumed)
    stop_after(resumed, STOP, STEPS)
    seconds = run("verl_ext.main", overrides(data, resumed) + ["trainer.resume_mode=auto"], resumed.parent / "run.log")
    print(f"cbs, resumed at step {STOP}: {seconds:.1f} s")
    return straight, resumed


def _replayed_rows(dump):
    """(rollout id, row position in the update) of each replayed rollout."""
    return [(rid, len(dump["rollout_task"]) + j) for j, rid in enumerate(dump["replayed"])]


def test_replayed_rollouts_of_earlier_steps_reach_the_actor_update(runs):
    dumps = records.read_dumps(runs[0])
    assert sorted(dumps) == list(range(1, STEPS + 1))
    ages = []
    for step, d in dumps.items():
        assert len(d["rollout_id"]) == ROLLOUTS and len(d["kept"]) + len(d["replayed"]) == 8
        trained = {p for p in d["actor_update"]["pos"] if p >= 0}
        assert trained == set(d["kept"]) | {p for _, p in _replayed_rows(d)}, step
        ages += [step - rid // ROLLOUT_ID_STRIDE for rid in d["replayed"]]
    assert ages and min(ages) > 0  # only earlier steps' rollouts are replayed, and some were
    metrics = records.read_metrics(runs[0])
    assert metrics[STEPS]["data_selection/replay/stored"] == 24.0  # the FIFO buffer is full
    assert sum(metrics[s]["data_selection/replay/replayed"] for s in metrics) == len(ages)
    assert all(f"timing_s/{t}" in metrics[STEPS] for t in ("rollout_filter", "replay_store"))


def test_replayed_rows_train_with_their_stored_old_log_probs(runs):
    dumps = records.read_dumps(runs[0])
    gaps = []
    for step, d in dumps.items():
        update = d["actor_update"]
        row = {p: i for i, p in enumerate(update["pos"]) if p >= 0}
        for p in d["kept"]:  # one mini-batch, one epoch: a fresh row's ratio is on-policy
            assert update["log_prob"][row[p]] == pytest.approx(update["old_log_prob"][row[p]], abs=2e-3)
        for rid, p in _replayed_rows(d):
            born, position = divmod(rid, ROLLOUT_ID_STRIDE)
            stored = dumps[born]["rollout_old_log_prob"][position]  # computed at generation, by older weights
            assert update["old_log_prob"][row[p]] == pytest.approx(stored, abs=1e-5), (step, rid)
            gap = update["log_prob"][row[p]] - stored  # current policy vs behaviour policy
            if abs(gap) > 1e-3:
                assert update["ratio"][row[p]] != pytest.approx(1.0, abs=1e-4), (step, rid)
            gaps.append(abs(gap))
    # the policy moved between generation and replay for some rows: a recomputed old log-prob would show no gap
    assert gaps and max(gaps) > 1e-3, gaps


def _mean_entropy(model, row: dict, temperature: float = 1.0) -> float:
    """Mean token entropy of a stored row's response under ``model`` (fp32, no padding: the row's own tokens)."""
    response = row["responses"]
    mask = row["response_mask"].bool()[: len(response)]
    ids = row["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=ids[None]).logits[0, len(ids) - len(response) - 1: len(ids) - 1].float() / temperature
    entropy = torch.logsumexp(logits, -1) - (torch.softmax(logits, -1) * logits).sum(-1)
    return float(entropy[mask].mean())


def test_a_replayed_rows_entropy_is_re_measured_by_the_policy_that_replays_it(runs):
    """Paper 001 Table 1 note 2: a rollout's entropy feature is that of its latest round of use. At step s the policy
    is the step s - 1 checkpoint's; each replayed row's entropy the filter observed equals the entropy of its stored
    tokens under those weights (recomputed here with transformers), not the generation-time one it carried
    (entropy_coeff 0: verl computes none in the update)."""
    from transformers import AutoModelForCausalLM

    dumps = records.read_dumps(runs[0])
    moved = []
    for step, d in dumps.items():
        if not d["replayed"]:
            continue
        checkpoint = runs[0] / f"global_step_{step - 1}"
        rows = torch.load(checkpoint / STORE_FILE, weights_only=False)["rows"]  # what step s put back
        model = AutoModelForCausalLM.from_pretrained(checkpoint / "actor" / "huggingface", dtype=torch.float32)
        for j, rid in enumerate(d["replayed"]):
            born, position = divmod(rid, ROLLOUT_ID_STRIDE)
            now = _mean_entropy(model, rows[rid])
            observed = d["entropy"][len(d["kept"]) + j]  # the update's rows: kept, then replayed
            assert observed == pytest.approx(now, abs=1e-4), (step, rid)
            moved.append(abs(dumps[born]["rollout_entropy"][position] - now))
    # the weights moved between generation and replay for some row: its carried entropy fails the check above
    assert moved and max(moved) > 1e-2, moved


def test_the_buffer_is_checkpointed_and_a_resumed_run_replays_the_same(runs):
    straight, resumed = runs
    assert (straight / f"global_step_{STOP}" / STORE_FILE).is_file()
    want, got = records.read_dumps(straight), records.read_dumps(resumed)
    assert want[STOP + 1]["tasks"] == ORDER[2:6]  # the cursor continued (a fresh selector restarts at ORDER[0])
    for step in range(STOP + 1, STEPS + 1):
        for key in ("tasks", "rollout_reward", "rollout_id", "kept", "replayed"):
            assert got[step][key] == want[step][key], (step, key)
        # the restored weights recompute the old log-probs up to float noise (batch composition)
        assert got[step]["rollout_old_log_prob"] == pytest.approx(want[step]["rollout_old_log_prob"], abs=1e-4)
    assert any(want[s]["replayed"] for s in range(STOP + 1, STEPS + 1))
    # one metrics file per run: the resumed run did not truncate the first run's file
    assert len(list((resumed / records.METRICS_DIR).glob("*.jsonl"))) == 2
    metrics, reference = records.read_metrics(resumed), records.read_metrics(straight)
    assert sorted(metrics) == list(range(1, STEPS + 1))
    for key in ("data_selection/replay/replayed", "data_selection/replay/stored", "critic/score/mean"):
        assert metrics[STEPS][key] == reference[STEPS][key], key


def test_run_summary_prints_what_the_filter_did_each_step(runs, capsys):
    from verl_ext.apps.run_summary import summarise

    lines = summarise(runs[0], "rollout_filter")
    dumps = records.read_dumps(runs[0])
    assert len(lines) == STEPS
    for step, line in zip(sorted(dumps), lines):
        d = dumps[step]
        assert line.startswith(f"step {step}: kept {len(d['kept'])} of its {ROLLOUTS} rollouts, "
                               f"replayed {len(d['replayed'])}") and "'buffer'" in line
    assert capsys.readouterr().out.count("\n") > 2 * STEPS  # the step table too
    with pytest.raises(ValueError, match="axis"):
        summarise(runs[0], "critic")
