"""``python -m verl_ext.apps.bench floor`` (verl_ext/apps/bench/floor.py): plain torch's floor of old log-probs and of
the update on a tiny model, the start-up profile read from a timestamped trainer log and Ray's worker logs, and the
profile from a trainer run's metrics (a stand-in command: no trainer here)."""

import json
import sys
from datetime import datetime

import pytest
import torch

from verl_ext.apps.bench import floor
from verl_ext.apps.bench.__main__ import BENCHMARKS


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         attn_implementation="sdpa")
    return LlamaForCausalLM(config)


def test_registered_in_make_bench():
    assert BENCHMARKS["floor"] == (floor.run, floor.report)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_floor_times_a_forward_and_an_update_that_trains(precision):
    model = _tiny_llama()
    before = [p.detach().clone() for p in model.parameters()]
    threads = torch.get_num_threads()
    out = floor.measure_floor(model, rollouts=3, prompt=5, response=4, precision=precision, repeats=2, threads=1)
    assert torch.get_num_threads() == threads  # restored
    assert out["precision"] == precision and out["threads"] == 1 and out["tokens"] == 27
    assert out["params"] == sum(p.numel() for p in model.parameters())
    assert len(out["forward_all_s"]) == len(out["update_all_s"]) == 2
    assert out["forward_s"] > 0 and out["update_s"] > 0
    assert out["forward_s"] == pytest.approx(sum(out["forward_all_s"]) / 2)  # the median of two
    # three AdamW steps (warm-up + 2) moved the weights: the update is a real optimiser step
    assert any(not torch.equal(b, p.detach()) for b, p in zip(before, model.parameters()))


def test_floor_rejects_an_unknown_precision():
    with pytest.raises(ValueError, match="fp32 or bf16"):
        floor.measure_floor(_tiny_llama(), 1, 2, 2, precision="fp16", repeats=1)


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


def _fake_run(tmp_path, launch=1_800_000_000.0):
    """A trainer log as run_timestamped writes it, and a Ray session whose core-worker logs name its pids."""
    esc = "\x1b[36m"
    lines = [
        (0.0, "LAUNCH 4242"),
        (3.0, f"[{_stamp(launch + 2.5)}][verl.plugin.platform.platform_manager][INFO] - Platform override from "
              "VERL_PLATFORM: cpu"),
        (4.0, "ray init kwargs: {'num_cpus': 16}"),
        (7.0, f"{_stamp(launch + 6.5)}\tINFO worker.py:2038 -- Started a local Ray instance."),
        (12.0, f"{esc}(pid=101)\x1b[0m INFO:{_stamp(launch + 11.0)}:Platform override from VERL_PLATFORM: cpu"),
        (13.0, f"{esc}(TaskRunnerV1 pid=101)\x1b[0m INFO:{_stamp(launch + 12.5)}:train and validate dataloader "
               "initialized, train dataset size: 24"),
        (20.0, f"{esc}(WorkerDict pid=102)\x1b[0m LlamaForCausalLM contains 134.52M parameters"),
        (21.0, f"{esc}(TaskRunnerV1 pid=101)\x1b[0m INFO:{_stamp(launch + 21.0)}:all initialize finished, ready "
               "to fit"),
        (50.0, f"{esc}(TaskRunnerV1 pid=101)\x1b[0m step:1 - timing_s/step:20.0 - critic/score/mean:0.5"),
        (51.0, "EXIT 0"),
    ]
    log = tmp_path / "trainer.log"
    log.write_text("".join(f"{launch + dt:.3f} {text}\n" for dt, text in lines))
    for session, pids in (("session_2026-01-01_00-00-00_000000_4242", ((101, 9.0), (102, 15.0), (103, 16.0),
                                                                         (104, 17.0))),
                          ("session_2026-01-01_00-01-00_000000_777", ((101, 30.0), (105, 31.0)))):  # someone else's
        logs = tmp_path / "ray" / session / "logs"
        logs.mkdir(parents=True)
        for pid, at in pids:  # 103 printed nothing, nor did 104: its name from Ray's worker-*.out
            (logs / f"python-core-worker-abc_{pid}.log").write_text(f"[{_stamp(launch + at)} I {pid} {pid}] "
                                                                   "core_worker.cc:1 -- Constructing CoreWorker\n")
        (logs / "worker-abc-01000000-104.out").write_text(":actor_name:_HFServerImpl\nhello\n")
    return log


def test_startup_reads_milestones_processes_and_step_ones_start(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    out = floor.startup(_fake_run(tmp_path), step1_s=20.0)
    assert out["startup_s"] == pytest.approx(30.0)  # step:1 arrived at 50 s, the step took 20 s
    ms = out["milestones"]
    assert ms["driver imports verl"] == pytest.approx(2.5, abs=0.01)  # the line's own clock, not its arrival
    assert ms["ray.init called"] == pytest.approx(4.0) and ms["Ray instance up"] == pytest.approx(6.5, abs=0.01)
    assert ms["dataloaders ready"] == pytest.approx(12.5, abs=0.01)
    assert ms["ready to fit"] == pytest.approx(21.0, abs=0.01)
    procs = {p["pid"]: p for p in out["processes"]}
    assert procs[101]["name"] == "TaskRunnerV1" and procs[101]["started_s"] == pytest.approx(9.0, abs=0.01)
    assert procs[101]["verl_import_s"] == pytest.approx(11.0, abs=0.01)
    assert procs[102]["name"] == "WorkerDict" and procs[102]["first_line_s"] == pytest.approx(20.0)
    assert procs[103]["name"] == "(idle worker)" and procs[103]["started_s"] == pytest.approx(16.0, abs=0.01)
    assert procs[104]["name"] == "_HFServerImpl" and procs[104]["first_line_s"] is None
    assert [p["pid"] for p in out["processes"]] == [101, 102, 103, 104]  # by start; not the other session's 105
    assert out["ray_session"].endswith("_4242")


def test_startup_without_step_one_has_no_startup_time(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "none"))
    log = _fake_run(tmp_path)
    log.write_text("".join(line + "\n" for line in log.read_text().splitlines() if "step:1" not in line))
    out = floor.startup(log, step1_s=20.0)
    assert out["startup_s"] is None and out["ray_session"] is None


def test_profile_reads_timings_and_shapes_from_the_runs_metrics(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "none"))
    metrics = tmp_path / "floor_run" / "metrics"
    step = {s: {"timing_s/gen": 6.0, "timing_s/old_log_prob": 2.0 + s, "timing_s/update_actor": 9.0 + s,
                "timing_s/step": 20.0 + s, "prompt_length/mean": 57.0, "response_length/mean": 21.0 + s / 10,
                "perf/total_num_tokens": 24 * (78.0 + s / 10)} for s in (1, 2, 3, 4)}
    # a stand-in for the trainer: writes the metrics and a step:1 line
    script = (f"import json, pathlib; p = pathlib.Path({str(metrics)!r}); p.mkdir(parents=True); "
              f"(p / 'from_step_000000.1.jsonl').write_text(''.join(json.dumps({{'step': s, 'data': d}}) + chr(10) "
              f"for s, d in {json.dumps({str(k): v for k, v in step.items()})}.items())); "
              "print('(TaskRunnerV1 pid=7) step:1 - timing_s/step:21.0')")
    out = floor.profile_run(tmp_path, command=[sys.executable, "-c", script])
    assert out["steps"] == 4
    assert out["timing_s"]["old_log_prob"] == pytest.approx(5.0)  # median of steps 2..4: step 1 pays warm-ups
    assert out["timing_s"]["update_actor"] == pytest.approx(12.0)
    assert out["timing_s"]["reward"] == 0.0  # not logged by this run
    assert out["step1_timing_s"]["step"] == pytest.approx(21.0)
    assert out["shapes"] == {"rollouts": 24, "prompt": 57, "response": 21}
    assert out["startup_s"] is not None and out["startup_s"] < 0  # its step:1 line came 21 s "after" its start


def test_profile_of_a_failing_trainer_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="exit 3"):
        floor.profile_run(tmp_path, command=[sys.executable, "-c", "raise SystemExit(3)"])


def test_report_names_the_ratios_and_a_skipped_profile():
    f = {"rollouts": 24, "prompt": 57, "response": 21, "precision": "bf16", "threads": 2, "repeats": 3,
         "forward_s": 2.0, "update_s": 8.0}
    t = {"gen": 6.0, "old_log_prob": 3.0, "reward": 0.0, "adv": 0.04, "update_actor": 10.0, "update_weights": 0.01,
         "step": 20.0}
    prof = {"timing_s": t, "step1_timing_s": {**t, "step": 26.0}, "startup_s": 40.5,
            "milestones": {"ready to fit": 38.0}, "processes": [{"pid": 1, "name": "WorkerDict", "started_s": 25.0,
                                                                 "verl_import_s": 29.0, "first_line_s": 29.5}]}
    text = floor.report([{"floor": f, "profile": prof, "ratio_old_log_prob": 1.5, "ratio_update_actor": 1.25}])
    assert "| old log-probs | 3.00 | 2.00 | 1.50x |" in text and "| update | 10.00 | 8.00 | 1.25x |" in text
    assert "Start-up (launch to step 1's start): 40.5 s" in text and "| WorkerDict | 1 | 25.0 | 29.0 | 29.5 |" in text
    text = floor.report([{"floor": f, "profile": None, "skipped": "skipped: the trainer's profile (no pool)"}])
    assert "| update | | 8.00 | |" in text and text.endswith("skipped: the trainer's profile (no pool)")
