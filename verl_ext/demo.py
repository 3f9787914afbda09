"""``make demo``: real verl GRPO training on the embedded defaults, on this CPU.

1. generate the embedded arithmetic tasks (verl parquet, ``data_prep.embedded``);
2. train SmolLM2-135M-Instruct (the embedded model) with ``python -m verl_ext.main --cpu`` - verl
   0.9.1's v1 trainer, Ray, the HF-generate rollout backend - for a handful of steps, with the
   three data-selection axes at the chosen settings (defaults: uniform / fixed / keep-all = GRPO);
3. print per-step reward, effective task ratio and timings from the run's metrics log;
4. evaluate the initial and the trained policy on held-out tasks (``eval.evaluate``: k samples per
   task, pass@k), render the progress-sampler paper's table from the run's logs (``eval.tables``) and
   draw the plots (``eval.plots``) under ``<out>/report``.

Everything after ``--`` is passed to the trainer as Hydra overrides, e.g.
``python -m verl_ext.demo -- selector=sequential allocator=variance rollout_filter=drop_degenerate``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from data_prep import embedded
from verl_ext.version_check import check_verl_version

COLUMNS = (
    ("step", "step", "{:>4.0f}"),
    ("critic/score/mean", "reward", "{:>8.3f}"),
    ("data_selection/effective_task_ratio", "ETR", "{:>6.2f}"),
    ("data_selection/selected_pass_rate_mean", "pass", "{:>6.2f}"),
    ("response_length/mean", "resp_len", "{:>9.1f}"),
    ("actor/pg_loss", "pg_loss", "{:>9.4f}"),
    ("timing_s/gen", "gen_s", "{:>7.1f}"),
    ("timing_s/update_actor", "update_s", "{:>9.1f}"),
    ("timing_s/step", "step_s", "{:>7.1f}"),
)


def trainer_command(out: Path, model: str, data: dict[str, Path], args, extra: list[str]) -> list[str]:
    return [
        sys.executable, "-m", "verl_ext.main", "--cpu", "+preset=cpu_small",
        f"data.train_files={data['train']}", f"data.val_files={data['test']}",
        f"data.train_batch_size={args.prompts}", f"data.max_response_length={args.response_length}",
        f"data.seed={args.seed}", f"actor_rollout_ref.model.path={model}", f"actor_rollout_ref.rollout.n={args.n}",
        "actor_rollout_ref.actor.optim.lr=1e-5",
        f"trainer.total_training_steps={args.steps}", f"trainer.save_freq={args.steps}",
        "actor_rollout_ref.actor.checkpoint.save_contents=[model,extra,hf_model]",
        "trainer.project_name=verl_ext_demo", "trainer.experiment_name=demo",
        f"trainer.default_local_dir={out / 'run'}",
        *extra,
    ]


def print_table(metrics_dir: Path) -> None:
    files = sorted(metrics_dir.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
    if not files:
        print(f"no metrics log in {metrics_dir}")
        return
    rows = [json.loads(line) for line in files[-1].read_text().splitlines() if line.strip()]
    print("\n" + " ".join(f"{label:>{len(fmt.format(0))}}" for _, label, fmt in COLUMNS))
    for row in rows:
        values = {"step": row["step"], **row["data"]}
        print(" ".join(fmt.format(values[key]) if key in values else f"{'-':>{len(fmt.format(0))}}"
                       for key, _, fmt in COLUMNS))
    print(f"metrics: {files[-1]}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="python -m verl_ext.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="outputs/demo")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=4, help="tasks per step")
    parser.add_argument("--n", type=int, default=4, help="rollouts per task")
    parser.add_argument("--response-length", type=int, default=64)
    parser.add_argument("--num-layers", type=int, default=None, help="truncate the embedded model (faster, meaningless text)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-tasks", type=int, default=8, help="held-out tasks evaluated after training (0: none)")
    parser.add_argument("--k", type=int, default=4, help="samples per evaluated task")
    args = parser.parse_args(own)

    from verl_ext.models.embedded import embedded_model_path

    print(f"verl {check_verl_version()}", flush=True)
    start = time.monotonic()
    out = Path(args.out).resolve()
    data = embedded.build("arithmetic", out / "data", train_size=max(64, args.prompts * args.steps), test_size=16,
                          seed=args.seed)
    model = embedded_model_path(num_layers=args.num_layers)
    print(f"policy: {model}\ndata:   {data['train']}", flush=True)
    proc = subprocess.run(trainer_command(out, model, data, args, extra), env={**os.environ, "PYTHONUNBUFFERED": "1"})
    print_table(out / "run" / "metrics")
    if proc.returncode == 0 and args.eval_tasks > 0:
        report(out, model, data["test"], args)
    print(f"demo finished in {time.monotonic() - start:.0f} s (trainer exit code {proc.returncode})")
    return proc.returncode


def report(out: Path, model: str, test_file: Path, args) -> None:
    """Evaluate step 0 (the embedded model) and the last step, then the table and the plots."""
    from eval import evaluate, plots, tables

    run = out / "run"
    evaluate.main(["--run", str(run), "--steps", f"0,{args.steps}", "--base-model", model,
                   "--benchmarks", f"arithmetic={test_file}", "--limit", str(args.eval_tasks), "--k", str(args.k),
                   "--temperature", "1.0", "--max-new-tokens", str(args.response_length), "--backend", "hf",
                   "--seed", str(args.seed)])
    for line in (run / "eval" / "curve.jsonl").read_text().splitlines():
        c = json.loads(line)
        print(f"eval step {c['step']:>3}: {c['benchmark']} accuracy {c['accuracy']:.3f} "
              f"pass@{c['k']} {c['pass@k'][str(c['k'])]:.3f} ({c['n_problems']} tasks x {c['k']} samples)")
    table = out / "report" / "table.md"
    table.parent.mkdir(parents=True, exist_ok=True)
    tables.main(["progress", "--runs", f"uniform={run}", "--out", str(table)])
    print(table.read_text())
    plots.main(["--runs", f"uniform={run}", "--out", str(out / "report")])


if __name__ == "__main__":
    raise SystemExit(main())
