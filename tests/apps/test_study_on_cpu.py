"""``python -m verl_ext.apps.study``: the method registry, the per-step metrics of step dumps, the summary over seeds
with paired differences, resuming (a stand-in trainer), and one real study of uniform against the own-method guide's
example (a selector from a user's file), 1 seed x 2 steps each, on the 2-layer truncated model with a 2-step warm start (marked e2e; the paired intervals over seeds and methods are the
unit tests')."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from verl_ext.apps import demo, study
from verl_ext.axes import StepResults, build_selector
from verl_ext.trainer.build_axes import task_pool
from verl_ext.trainer.records import read_dumps

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "recipes" / "own_method" / "epsilon_greedy.py"


def test_the_registry_names_each_method_once_and_refuses_unknown_names():
    assert study.METHODS["uniform"] == ("selector=uniform", "allocator=fixed")
    assert study.METHODS["bots+coba"] == demo.METHOD
    assert "selector.adaptive_implicit_weight=true" in demo.METHOD and study.METHODS["bots+coba_fixed_rho"] == tuple(
        o for o in demo.METHOD if "adaptive" not in o)  # the same method with ρ fixed
    assert study.METHODS["bots+coba_rho0.1"][:2] == ("selector=bots", "selector.implicit_weight=0.1")
    assert set(study.METHODS) == {"uniform", "bots+coba", "bots+coba_fixed_rho", "bots+coba_rho0.1", "coba", "knapsack",
                                  "cbs", "dots"}
    got = study.parse_methods("uniform, knapsack,mine=selector=bots,allocator=coba,allocator.max_n=8")
    assert list(got) == ["uniform", "knapsack", "mine"]
    assert got["mine"] == ("selector=bots", "allocator=coba", "allocator.max_n=8")
    with pytest.raises(ValueError, match="unknown method 'bots'; known: uniform, bots\\+coba, bots\\+coba_fixed_rho, "
                                         "bots\\+coba_rho0.1, coba"):
        study.parse_methods("uniform,bots")
    with pytest.raises(ValueError, match="follows no custom method"):
        study.parse_methods("uniform,allocator=coba")
    with pytest.raises(SystemExit):
        study.parse_args(["--methods", "nope"])


def test_placeholders_scale_with_the_budget_and_tasks(tmp_path):
    args, extra = study.parse_args(["--budget", "30", "--tasks", "5", "--", "trainer.x=1"])
    assert extra == ["trainer.x=1"] and args.steps == 10 and args.seeds == [0, 1, 2]
    assert (args.pool, args.eval_k) == (48, 5)  # the demo's pool, half its held-out samples
    data = study.Inputs("warm", tmp_path / "pool.parquet", tmp_path / "heldout.parquet")
    assert "rollout_filter.buffer_size=60" in study.resolve(study.METHODS["cbs"], data, args)
    assert study.resolve(study.METHODS["uniform"], data, args) == study.METHODS["uniform"]


def _dump(task, group, reward, advantage, rollout_id, kept, replayed, counts):
    return {"rollout_task": task, "rollout_group": group, "rollout_reward": reward, "rollout_advantage": advantage,
            "rollout_id": rollout_id, "kept": kept, "replayed": replayed, "counts": counts}


def test_per_step_metrics_count_the_update_rows_with_a_nonzero_advantage_replays_included():
    dumps = {
        1: _dump([3, 3, 5, 5], [0, 0, 1, 1], [1.0, 0.0, 1.0, 1.0], [0.7, -0.7, 0.0, 0.0], [10, 11, 12, 13],
                 [0, 1, 2, 3], [], [2, 2]),
        # step 2 keeps 2 of its 3 rollouts (both degenerate: advantage 0) and replays 10 (0.7) and 12 (0.0)
        2: _dump([4, 4, 4], [0, 0, 0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [20, 21, 22], [0, 2], [10, 12], [3]),
    }
    s = study.series_of_dumps(dumps)
    assert s["nonzero_advantage"] == [0.5, 0.25]
    assert s["kept"] == [1.0, pytest.approx(2 / 3)]
    assert s["etr"] == [0.5, 0.0] and s["degenerate"] == [0.5, 1.0] and s["observed_p"] == [0.75, 0.0]
    assert s["counts_mean"] == [2.0, 3.0] and s["counts_std"] == [0.0, 0.0] and s["reward"] == [0.75, 0.0]


def _series(rng, steps=3, seeds=(0, 1, 2), shift=0.0):
    return {s: {k: list(np.clip(rng.uniform(0.2, 0.6, steps) + shift, 0, 1)) for k in study.METRICS} for s in seeds}


def test_the_summary_is_a_t_interval_over_seed_means_and_a_paired_difference_with_uniform(tmp_path):
    rng = np.random.default_rng(0)
    series = {"uniform": _series(rng), "coba": _series(rng, shift=0.1)}
    heldout = {"uniform": {0: 0.2, 1: 0.3, 2: 0.4}, "coba": {0: 0.3, 1: 0.3, 2: 0.6}}
    rows = {(r["method"], r["metric"]): r for r in study.summarize(study.per_seed(series, heldout))}
    etr = {m: np.array([np.mean(series[m][s]["etr"]) for s in (0, 1, 2)]) for m in series}
    half = stats.t.ppf(0.975, 2) * etr["coba"].std(ddof=1) / np.sqrt(3)
    r = rows[("coba", "etr")]
    assert (r["mean"], r["low"], r["high"]) == pytest.approx((etr["coba"].mean(), etr["coba"].mean() - half,
                                                              etr["coba"].mean() + half))
    d = etr["coba"] - etr["uniform"]
    half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / np.sqrt(3)
    assert (r["diff"]["mean"], r["diff"]["low"]) == pytest.approx((d.mean(), d.mean() - half))
    assert rows[("uniform", "etr")]["diff"] is None
    assert rows[("coba", "heldout")]["diff"]["mean"] == pytest.approx(0.1)  # +0.1, 0, +0.2
    assert study.summarize(study.per_seed({"coba": series["coba"]}, {"coba": {0: None}}))[0]["diff"] is None

    import matplotlib.pyplot as plt

    kept = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plt, "close", kept.append)  # keep the figures to read their titles
        table = study.write(tmp_path, series, heldout, "the note")
    assert table.count("| `coba` |") == len(study.METRICS) + 1 and "minus `uniform`, paired by seed" in table
    assert all((tmp_path / f"{k}.png").stat().st_size > 5000 for k in study.METRICS)
    steps = len(series["coba"][0]["etr"])
    assert len(kept) == len(study.METRICS) and all(
        " ".join(fig.axes[0].get_title().split()).endswith(f"3 seeds a method (line: mean, band: min-max), CPU, "
                                                           f"{steps} RL steps of the real trainer") for fig in kept)
    plt.close("all")
    assert json.loads((tmp_path / "study.json").read_text())["summary"][0]["method"] == "uniform"
    study.write(tmp_path, {"coba": series["coba"]}, {"coba": {}}, "n")
    assert "`uniform` is not among the methods: no paired differences" in (tmp_path / "study.md").read_text()
    one = {m: {0: v[0]} for m, v in series.items()}  # one seed: its mean, no interval, no paired difference
    r = {(r["method"], r["metric"]): r for r in study.summarize(study.per_seed(one, {}))}[("coba", "etr")]
    assert (r["mean"], r["low"], r["diff"]) == (pytest.approx(np.mean(series["coba"][0]["etr"])), None, None)
    assert f"| `coba` | ETR | {r['mean']:.3f} (1 seed) | — |" in study.markdown(study.summarize(study.per_seed(one, {})))


def test_finished_runs_are_kept_and_changed_or_unfinished_ones_trained_again(tmp_path, monkeypatch):
    calls = []

    def train(out, warm, pool_ref, heldout, args, extra, method):
        calls.append((out.parent.name, args.seed, method))
        run = out / "run" / "data_selection"
        run.mkdir(parents=True, exist_ok=True)
        for step in range(1, args.steps + 1):
            (run / f"step_{step:06d}.json").write_text(json.dumps(_dump(
                [1, 1], [0, 0], [1.0, 0.0], [1.0, -1.0], [step * 10, step * 10 + 1], [0, 1], [], [2])))
        (out / "run" / f"global_step_{args.steps}" / "actor").mkdir(parents=True)
        return 0, out / "run"

    monkeypatch.setattr(demo, "train", train)
    data = study.Inputs("warm", tmp_path / "pool.parquet", tmp_path / "heldout.parquet")
    argv = ["--methods", "uniform,coba", "--seeds", "0,1", "--steps", "2", "--eval-tasks", "0", "--out", str(tmp_path)]
    args, _ = study.parse_args(argv)
    root = tmp_path / "runs"
    study.train_all(root, args.methods, args.seeds, args, [], data)
    assert len(calls) == 4 and calls[0] == ("uniform", 0, study.METHODS["uniform"])
    assert not list(root.glob("*/seed_*/run/global_step_*"))  # evaluated: the checkpoints are removed
    (root / "coba" / "seed_1" / study.MARKER).unlink()  # an interrupted run: no marker
    study.train_all(root, args.methods, args.seeds, args, [], data)
    assert calls[4:] == [("coba", 1, study.METHODS["coba"])]
    study.train_all(root, args.methods, args.seeds, args, ["trainer.x=1"], data)  # other overrides: all again
    assert len(calls) == 9
    series, heldout, req = study.read_runs(root, ["uniform", "coba"], [0, 1])
    assert series["coba"][1]["nonzero_advantage"] == [1.0, 1.0] and heldout["uniform"] == {0: None, 1: None}
    assert req["extra"] == ["trainer.x=1"] and req["overrides"] == list(study.METHODS["uniform"])
    with pytest.raises(SystemExit, match="knapsack seed 0 has not finished"):
        study.read_runs(root, ["knapsack"], [0])
    assert study.main([*argv, "--report-only"]) == 0 and len(calls) == 9
    args, _ = study.parse_args([*argv, "--keep-checkpoints"])
    study.train_all(root, args.methods, args.seeds, args, ["trainer.x=2"], data)
    assert len(list(root.glob("*/seed_*/run/global_step_2"))) == 4
    assert "every run: `trainer.x=1`" in (tmp_path / "study.md").read_text()


# The truncated model never solves a task: a coin per response (its text's CRC) rewards half of them, so the groups,
# advantages and CoBA's counts vary as they would with a real policy; it goes to every run after `--`.
COIN = """
import zlib

def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    score = float(zlib.crc32(solution_str.encode()) % 2)
    return {"score": score, "acc": score}
"""


@pytest.mark.e2e  # a training run: `make test-fast` leaves it out
def test_a_study_on_the_truncated_model(tmp_path, truncated_model_cache):
    out = tmp_path / "study"
    coin = tmp_path / "coin.py"
    coin.write_text(COIN)
    # uniform against the own-method guide's example, loaded from its file by configuration (relative to this cwd)
    methods = f"uniform,mine=selector=custom,selector.path={EXAMPLE.relative_to(ROOT)},selector.cls=EpsilonGreedy,"\
              "+selector.config.epsilon=0.5"
    command = [sys.executable, "-m", "verl_ext.apps.study", "--num-layers", "2", "--methods", methods, "--seeds", "0",
               "--steps", "2", "--tasks", "2", "--budget", "6", "--pool", "4", "--ref-n", "1", "--warm-start-steps", "2",
               "--eval-tasks", "0", "--out", str(out), "--", f"reward.custom_reward_function.path={coin}",
               "reward.custom_reward_function.name=compute_score"]
    env = {**os.environ, "VERL_EXT_CACHE": str(truncated_model_cache)}  # the demo test's warm start, if it ran
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count(": training 2 steps") == 2 and proc.stdout.count(": done in") == 2
    table = (out / "study.md").read_text()
    assert table.count("| `mine` |") == table.count("| `uniform` |") == len(study.METRICS)
    assert "minus `uniform`, paired by seed" in table  # one seed: no paired interval (unit-tested above with three)
    (pool_file,) = (out / "data").glob("*.ref.*.parquet")
    extra_info = pd.read_parquet(pool_file)["extra_info"].tolist()
    selector = build_selector({"name": "custom", "path": str(EXAMPLE), "cls": "EpsilonGreedy",
                               "config": {"epsilon": 0.5}}, task_pool(extra_info), 0)
    for step, dump in sorted(read_dumps(out / "runs" / "mine" / "seed_0" / "run").items()):
        assert selector.select(step, 2).tolist() == dump["tasks"], step  # the study trained the user's class
        selector.update(step, StepResults.from_rewards(dump["rollout_task"], dump["rollout_reward"]))
    assert "seeds 0 (`data.seed`)" in table and "CPU results on a 135M model" in table
    summary = json.loads((out / "study.json").read_text())
    assert all(r["seeds"] == [0] and r["low"] is None and r["diff"] is None for r in summary["summary"])
    series = summary["series"]
    unit = [k for k in study.METRICS if not k.startswith("counts_")]
    values = [x for runs in series.values() for run in runs.values() for k in unit for x in run[k]]
    assert len(values) == 2 * 2 * len(unit) and all(0 <= x <= 1 for x in values)
    assert any(x > 0 for runs in series.values() for run in runs.values() for x in run["reward"])
    assert all(run["counts_mean"] == [3.0, 3.0] for runs in series.values() for run in runs.values())
    assert all((out / f"{k}.png").stat().st_size > 5000 for k in study.METRICS)

    start = time.monotonic()  # again: every run finished, nothing trained
    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0 and again.stdout.count("finished earlier, kept") == 2, again.stdout[-2000:]
    assert ": training" not in again.stdout and time.monotonic() - start < 60
