"""``make demo``: a data-selection method at work in real verl training, on this CPU, offline.

1. **Warm start** (cached after the first run): SmolLM2-135M-Instruct, the embedded model, after a
   short SFT with verl's SFT trainer on worked one-digit arithmetic (:mod:`verl_ext.apps.warm_start`),
   so that it solves the tasks some of the time.
2. **Task pool and reference pass rates** (cached): ``--pool`` embedded ``arithmetic_easy`` training
   tasks; BOTS's implicit evidence reads each task's pass rate under a weak reference (the embedded
   model) and a strong one (the warm start), measured by ``data_prep.reference_pass_rates``. Steps 1-3 are
   :mod:`verl_ext.apps.inputs`, which the study shares.
3. **Held-out accuracy before RL** (cached): ``--eval-tasks`` unseen tasks x ``--eval-k`` samples.
4. **RL**: ``python -m verl_ext.main --cpu +preset=cpu_small selector=bots allocator=coba``: each step
   BOTS picks ``--tasks`` tasks whose posterior pass rate is nearest 0.5 and CoBA-RL splits
   ``--budget`` rollouts among them. One console line per step; verl's own output goes to a log file.
5. **Held-out accuracy after RL**, the paired bootstrap CI of the change, the method's targets
   (step-1 reward, ETR and degenerate groups beside a uniform draw's expected ones, unequal rollout counts,
   selected pass rates against a uniform draw's) and PNGs under ``<out>/report``.

Everything after ``--`` is passed to the trainer as Hydra overrides, e.g. another method:
``python -m verl_ext.apps.demo -- selector=uniform allocator=fixed`` (plain GRPO).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from verl_ext.apps.inputs import TASK, WARM_START_STEPS, heldout_evaluation, prepare_inputs
from verl_ext.launch.version_check import check_verl_version

# implicit_weight 0.5, halved whenever the batch's implicit estimates miss its pass rates by 0.25 on average (BOTS's
# self-adaptive ρ, App. E.4.2; the halving rule [authors' code: modelscope/Trinity-RFT trinity/buffer/selector/
# diff_estimator.py, InterpolationBetaPREstimator, off by default]) [decision, measured]: on the 48-task pool
# over 10 steps, 10 seeds, the implicit evidence places first visits (0.1, the authors' default, spent most picks on
# unvisited tasks) and then fades as the policy learns the tasks it trains on, which fixed ρ 0.5 kept pulling back
# towards 0.5: the selected tasks' pass rate stayed within 0.13 of 0.5 from step 3 and ETR rose above uniform's,
# +0.075 [+0.005, +0.145] (verl_ext/apps/README.md "Why the real BOTS leaves its target")
METHOD = ("selector=bots", "selector.implicit_weight=0.5", "selector.adaptive_implicit_weight=true", "allocator=coba",
          "allocator.min_n=3", "allocator.max_n=8")
FIXED_RHO = (*METHOD[:2], *METHOD[3:])  # without the adaptive weight: the demo's method before it was added


@dataclass(frozen=True)
class StepLine:
    """One console column: metric key, header, format."""

    key: str
    label: str
    fmt: str


COLUMNS = (
    StepLine("critic/score/mean", "reward", "{:>6.2f}"),
    StepLine("data_selection/effective_task_ratio", "ETR", "{:>5.2f}"),
    StepLine("data_selection/selected_pass_rate_mean", "pass", "{:>5.2f}"),
    StepLine("response_length/mean", "resp", "{:>5.1f}"),
    StepLine("timing_s/gen", "gen_s", "{:>6.1f}"),
    StepLine("timing_s/update_actor", "upd_s", "{:>6.1f}"),
    StepLine("timing_s/step", "step_s", "{:>6.1f}"),
)


def step_line(step: int, metrics: dict, counts: list[int] | None) -> str:
    cells = [f"{step:>4}"]
    for c in COLUMNS:
        cells.append(c.fmt.format(metrics[c.key]) if c.key in metrics else f"{'-':>{len(c.fmt.format(0))}}")
    cells.append(" ".join(str(n) for n in counts) if counts else "-")
    return "  ".join(cells)


def header() -> str:
    return "  ".join([f"{'step':>4}", *(f"{c.label:>{len(c.fmt.format(0))}}" for c in COLUMNS),
                      "rollouts per selected task"])


# ---------------------------------------------------------------------------------------- stages
def _records():
    """``verl_ext.trainer.records`` without verl's import-time warnings on this console (the package imports verl)."""
    import logging
    import warnings

    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from verl_ext.trainer import records
    finally:
        logging.disable(logging.NOTSET)
    return records


def print_steps(run: str | Path, after: int = 0) -> int:
    """Print the step lines of a run's steps after ``after`` (with the header when ``after`` is 0); returns the
    last step printed. Also used by :mod:`verl_ext.apps.run_summary`."""
    records = _records()
    run = Path(run)
    metrics = records.read_metrics(run) if (run / records.METRICS_DIR).exists() else {}
    new = sorted(s for s in metrics if s > after)
    if new:
        dumps = records.read_dumps(run)
        if after == 0:
            print(header(), flush=True)
        for s in new:
            print(step_line(s, metrics[s], dumps.get(s, {}).get("counts")), flush=True)
    return new[-1] if new else after


def trainer_command(warm: str, pool_ref: Path, heldout: Path, args, method: tuple[str, ...] = METHOD) -> list[str]:
    """The trainer's command for ``method`` at the demo's sizes (``args``), before the run's output and checkpoint
    settings (:func:`train`; ``make bench``'s floor profile)."""
    return [
        sys.executable, "-m", "verl_ext.main", "--cpu", "+preset=cpu_small", *method,
        f"data.train_files={pool_ref}", f"data.val_files={heldout}", f"data.train_batch_size={args.tasks}",
        f"data_selection.rollout_budget={args.budget}", f"data.max_response_length={args.response_length}",
        f"data.seed={args.seed}", f"actor_rollout_ref.model.path={warm}", f"actor_rollout_ref.actor.optim.lr={args.lr}",
        f"trainer.total_training_steps={args.steps}",
    ]


def train(out: Path, warm: str, pool_ref: Path, heldout: Path, args, extra: list[str],
          method: tuple[str, ...] = METHOD) -> tuple[int, Path]:
    """Run the trainer with ``method``'s components (output to ``<out>/trainer.log``) and print a line per step as
    it lands."""
    run = out / "run"
    shutil.rmtree(run, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    command = [
        *trainer_command(warm, pool_ref, heldout, args, method), f"trainer.save_freq={args.steps}",
        "actor_rollout_ref.actor.checkpoint.save_contents=[model,extra,hf_model]",
        "trainer.project_name=verl_ext_demo", "trainer.experiment_name=demo", f"trainer.default_local_dir={run}",
        *extra,
    ]
    log = out / "trainer.log"
    print(f"training: {' '.join(method + tuple(extra))}, {args.steps} steps of {args.tasks} tasks / "
          f"{args.budget} rollouts\n  verl's output: {log}\n  (Ray and the workers start first: about a minute)",
          flush=True)
    printed = 0
    with open(log, "w") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        while True:
            done = proc.poll() is not None
            printed = print_steps(run, printed)
            if done:
                break
            time.sleep(2)
    if proc.returncode != 0:
        print(f"the trainer failed (exit {proc.returncode}); the end of {log}:\n" + "".join(
            log.read_text(errors="replace").splitlines(keepends=True)[-30:]), file=sys.stderr)
    return proc.returncode, run


# ---------------------------------------------------------------------------------------- summary
def selection_signal(run: Path, pool_ref: Path, ref_n: int, rollouts_per_task: int) -> dict:
    """The method's targets from the run's metrics and step dumps (see :func:`print_summary`), beside what a uniform
    draw from the same pool would give with ``rollouts_per_task`` rollouts each (plain GRPO on the same budget):
    its expected ETR and degenerate-group rate from the warm start's reference pass rates (``ref_n`` samples a
    task; :func:`eval.metrics.expected_uniform_rates`), no extra run."""
    from data_prep.schema import read_rows
    from eval.metrics import expected_uniform_rates, task_pass_rates

    metrics, dumps = _records().read_metrics(run), _records().read_dumps(run)
    steps = sorted(metrics)
    rows = read_rows(pool_ref)
    strong = {int(r["extra_info"]["index"]): float(r["extra_info"]["strong_pass_rate"]) for r in rows}
    observed, selected_ref, unequal = [], [], 0
    for s in sorted(dumps):
        d = dumps[s]
        tasks = np.asarray(d["rollout_task"])
        observed.extend(task_pass_rates(tasks, np.asarray(d["rollout_reward"])).tolist())
        selected_ref.extend(strong[int(t)] for t in d["tasks"])
        unequal += int(min(d["counts"]) != max(d["counts"]))
    pool_ref_rates = np.asarray(list(strong.values()))
    uniform_etr, uniform_degenerate = expected_uniform_rates(np.round(pool_ref_rates * ref_n), ref_n,
                                                             rollouts_per_task)
    return {
        "steps": len(steps),
        "reward_step1": metrics[steps[0]].get("critic/score/mean") if steps else None,
        "etr_mean": float(np.mean([metrics[s]["data_selection/effective_task_ratio"] for s in steps])) if steps else None,
        "degenerate_mean": (float(np.mean([metrics[s]["data_selection/degenerate_group_rate"] for s in steps]))
                            if steps else None),
        "uniform_rollouts_per_task": rollouts_per_task,
        "uniform_expected_etr": uniform_etr,
        "uniform_expected_degenerate": uniform_degenerate,
        "steps_with_unequal_counts": unequal,
        "distance_selected_observed": float(np.mean(np.abs(np.asarray(observed) - 0.5))) if observed else None,
        "distance_selected_reference": float(np.mean(np.abs(np.asarray(selected_ref) - 0.5))) if selected_ref else None,
        "distance_uniform_reference": float(np.mean(np.abs(pool_ref_rates - 0.5))),
    }


def heldout_change(before: Path, after: Path) -> dict:
    """Per-task accuracies of two evaluations of the same tasks and the paired bootstrap CI of the change."""
    from eval.metrics import paired_bootstrap_ci

    def per_task(path: Path) -> dict[int, float]:
        hits: dict[int, list[float]] = {}
        for line in path.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                hits.setdefault(int(rec["index"]), []).append(float(rec["success"]))
        return {i: float(np.mean(v)) for i, v in hits.items()}

    a, b = per_task(after), per_task(before)
    tasks = sorted(set(a) & set(b))
    if tasks != sorted(b):
        raise RuntimeError(f"{after} and {before} evaluate different tasks")
    ci = paired_bootstrap_ci([a[t] for t in tasks], [b[t] for t in tasks])
    return {"tasks": len(tasks), "before": float(np.mean([b[t] for t in tasks])),
            "after": float(np.mean([a[t] for t in tasks])), "delta": float(ci.diff), "low": float(ci.low),
            "high": float(ci.high)}


def plot_subtitle(args, policy: str) -> str:
    """What a reader of the demo's plots needs: one seed, CPU, the steps, the model and the held-out tasks x samples."""
    held = f"held-out {args.eval_tasks} tasks x {args.eval_k} samples" if args.eval_tasks > 0 else "no held-out tasks"
    return (f"one seed ({args.seed}), CPU, {args.steps} RL steps of {args.tasks} tasks / {args.budget} rollouts; "
            f"{policy} (SmolLM2-135M-Instruct warm start); {held}")


def heldout_verdict(low: float, high: float, atol: float = 1e-12) -> str:
    """What the change's CI shows; an end within ``atol`` of 0 (float noise of a mean of 0/1 differences: a bootstrap
    quantile of exactly 0 can come out as 1e-18) counts as containing 0."""
    if low > atol:
        return "improved"
    if high < -atol:
        return "got worse"
    return "no change detectable: the CI contains 0"


def print_summary(signal: dict, change: dict | None, args) -> list[str]:
    """Print what the demo compares; returns the targets missed."""
    missed = []

    def target(ok: bool, text: str, name: str) -> None:
        print(f"  [{'x' if ok else ' '}] {text}")
        if not ok:
            missed.append(name)

    print("\nBOTS + CoBA-RL: what the method did")
    r1, etr = signal["reward_step1"], signal["etr_mean"]
    target(r1 is not None and 0.2 <= r1 <= 0.8, f"mean training reward at step 1: {r1:.2f} (target 0.2-0.8)",
           "reward_step1")
    uniform = (f"a uniform draw with {signal['uniform_rollouts_per_task']} rollouts a task: expected from the warm "
               "start's reference rates")
    target(etr is not None and etr >= 0.5, f"effective task ratio (tasks with 0 < pass rate < 1), mean over steps: "
           f"{etr:.2f} (target >= 0.5; {uniform}: {signal['uniform_expected_etr']:.2f})", "etr")
    degenerate, uniform_degenerate = signal["degenerate_mean"], signal["uniform_expected_degenerate"]
    target(degenerate is not None and degenerate < uniform_degenerate, f"degenerate groups (all rewards equal), mean "
           f"over steps: {degenerate:.2f} vs {uniform_degenerate:.2f} for {uniform}", "fewer_degenerate")
    target(signal["steps_with_unequal_counts"] > 0, f"steps where CoBA-RL gave tasks unequal rollout counts: "
           f"{signal['steps_with_unequal_counts']} of {signal['steps']}", "unequal_counts")
    sel, uni = signal["distance_selected_reference"], signal["distance_uniform_reference"]
    target(sel < uni, f"selected tasks' mean |pass rate - 0.5|: {sel:.3f} (warm start's reference rates; "
           f"{signal['distance_selected_observed']:.3f} in their rollouts) vs {uni:.3f} for a uniform draw "
           "from the pool", "closer_to_half")
    if change is not None:
        verdict = heldout_verdict(change["low"], change["high"])
        print(f"\nheld-out accuracy ({change['tasks']} unseen tasks x {args.eval_k} samples, T = 1.0): warm start "
              f"{change['before']:.3f} -> after {args.steps} RL steps {change['after']:.3f}; change "
              f"{change['delta']:+.3f}, 95% paired bootstrap CI [{change['low']:+.3f}, {change['high']:+.3f}]: "
              f"{verdict}")
    return missed


# ---------------------------------------------------------------------------------------- main
def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="python -m verl_ext.apps.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(parser)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(own), extra


def add_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The demo's setting (also :mod:`verl_ext.apps.study`'s): output, steps, pool, budget, evaluation, model."""
    parser.add_argument("--out", default="outputs/demo")
    parser.add_argument("--steps", type=int, default=5, help="RL steps")
    parser.add_argument("--tasks", type=int, default=6, help="tasks selected per step")
    parser.add_argument("--budget", type=int, default=24, help="rollouts per step, allocated over the tasks")
    # 48: on 24 tasks BOTS ran out of tasks near 0.5 and came back to ones the policy had learnt
    # (verl_ext/apps/README.md "Why the real BOTS leaves its target")
    parser.add_argument("--pool", type=int, default=48, help="training tasks to select from")
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--response-length", type=int, default=32, help="the worked answers take ~20 tokens")
    parser.add_argument("--ref-n", type=int, default=4, help="samples per task for the reference pass rates")
    parser.add_argument("--eval-tasks", type=int, default=32, help="held-out tasks (0: no evaluation)")
    parser.add_argument("--eval-k", type=int, default=10, help="samples per held-out task")
    parser.add_argument("--warm-start-steps", type=int, default=WARM_START_STEPS,
                        help="SFT steps of 16 worked answers for the warm start (built once per setting, cached)")
    parser.add_argument("--num-layers", type=int, default=None, help="truncated model (tests: fast, meaningless)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(sys.argv[1:] if argv is None else argv)
    from eval import evaluate, plots
    from verl_ext.apps.warm_start import warm_start_info

    import transformers

    transformers.utils.logging.disable_progress_bar()  # weight loading; the samplers show their own bars
    print(f"verl {check_verl_version()}", flush=True)
    start = time.monotonic()
    out = Path(args.out).resolve()
    data = prepare_inputs(out, args, args.seed)
    warm, pool_ref, heldout = data.warm, data.pool_ref, data.heldout
    info = warm_start_info(warm)
    print(f"policy: {warm} (SFT loss {info['sft_loss_first']:.3f} -> {info['sft_loss_last']:.3f})", flush=True)
    print(f"pool:   {pool_ref} ({args.pool} tasks with reference pass rates)", flush=True)

    before = out / "heldout_before"  # kept between runs: the evaluator reuses its samples
    if args.eval_tasks > 0:
        evaluate.run(heldout_evaluation(heldout, args, model=warm, out=before))

    code, run = train(out, warm, pool_ref, heldout, args, extra)
    if code != 0:
        return code
    change = None
    if args.eval_tasks > 0:
        step0 = run / "eval" / "step_0"
        shutil.copytree(before / "model", step0)
        evaluate.run(heldout_evaluation(heldout, args, run=run, steps=f"0,{args.steps}", base_model=warm))
        change = heldout_change(step0 / TASK / "samples.jsonl", run / "eval" / f"step_{args.steps}" / TASK / "samples.jsonl")
    signal = selection_signal(run, pool_ref, args.ref_n, max(1, round(args.budget / args.tasks)))
    missed = print_summary(signal, change, args)
    report = out / "report"
    report.mkdir(parents=True, exist_ok=True)
    (report / "summary.json").write_text(json.dumps({"selection": signal, "heldout": change, "missed": missed},
                                                    indent=2))
    uniform = "uniform (expected)"
    intervals = {} if change is None else {"bots+coba": plots.Interval(
        TASK, args.steps, change["before"] + change["low"], change["before"] + change["high"],
        "95% paired bootstrap CI of the change")}
    pngs = plots.run(plots.PlotsConfig(
        runs={"bots+coba": run}, out=report, subtitle=plot_subtitle(args, Path(warm).name), intervals=intervals,
        baselines={"etr": {uniform: signal["uniform_expected_etr"]},
                   "degenerate": {uniform: signal["uniform_expected_degenerate"]}}))
    print(f"\nplots: {', '.join(str(p) for p in pngs)}\nsummary: {report / 'summary.json'}")
    print(f"demo finished in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
