"""``python -m verl_ext.apps.bench [NAME ...] [--run DIR] [--component SPEC ...] [--out DIR]``: run benchmarks, print
Markdown tables and write ``<out>/<name>.json``; with ``--run``, also each component's measured share of that trainer
run's step (``<out>/run_share.json``; only that when no NAME is given); with ``--component`` (e.g. a user's:
``selector=custom,selector.path=F.py,selector.cls=C``), that component's cost per step beside its axis's default
(``<out>/component.json``; only that when no NAME is given). Without vLLM (no ``.venv-vllm``) the generation bench
measures HF only and a last line names what was skipped."""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

from verl_ext.apps.bench import bots, cbs, coba, component, floor, generation, progress, refill, step_share
from verl_ext.apps.gpu import attention_bench
from verl_ext.cpu import vllm_rollout

BENCHMARKS = {"attention": (attention_bench.run, attention_bench.report),  # on a CPU only its tiny model (a run check)
              "bots": (bots.run, bots.report), "cbs": (cbs.run, cbs.report), "coba": (coba.run, coba.report),
              "progress": (progress.run, progress.report), "generation": (generation.run, generation.report),
              "floor": (floor.run, floor.report),  # a demo step's profile beside plain torch's floor
              "refill": (refill.run, refill.report)}  # an async step's selection: its batch plus refills of k


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.apps.bench", description=__doc__)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"benchmarks to run (default: all of {sorted(BENCHMARKS)})")
    parser.add_argument("--run", metavar="DIR", help="a trainer run (trainer.default_local_dir): report each "
                        "component's median share of its step from metrics/*.jsonl")
    parser.add_argument("--component", action="append", default=[], metavar="SPEC",
                        help="a component's cost per step beside its axis's default, as the trainer takes it, e.g. "
                             "selector=custom,selector.path=recipes/own_method/epsilon_greedy.py,selector.cls="
                             "EpsilonGreedy,+selector.config.epsilon=0.2 (repeatable)")
    parser.add_argument("--out", default="outputs/bench", help="directory of the JSON results")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmarks {unknown}; choose from {sorted(BENCHMARKS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    machine = platform.processor() or platform.machine()
    if args.run:
        rows = step_share.run_shares(args.run)
        print(step_share.report_run(args.run, rows), flush=True)
        (out / "run_share.json").write_text(json.dumps({"machine": machine, "run": str(args.run), "rows": rows},
                                                       indent=2))
    if args.component:
        try:
            rows = [row for spec in args.component for row in component.run(spec)]
        except ValueError as e:
            parser.error(str(e))
        for spec in args.component:
            print(component.report([r for r in rows if r["component"] == spec]), flush=True)
        (out / "component.json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))
    names = args.names or ([] if args.run or args.component else sorted(BENCHMARKS))
    if names:
        print(f"'% of step': of a {step_share.REFERENCE_STEP_S:.0f} s step, {step_share.REFERENCE_STEP_SOURCE}",
              flush=True)
    for name in names:
        run, report = BENCHMARKS[name]
        rows = run()
        print(report(rows), flush=True)
        step = {"seconds": step_share.REFERENCE_STEP_S, "source": step_share.REFERENCE_STEP_SOURCE}
        (out / f"{name}.json").write_text(json.dumps({"machine": machine, "reference_step": step, "rows": rows},
                                                     indent=2))
    if "generation" in names and "vllm" not in generation.backends_here():
        print(f"skipped: generation's vllm backend (no vLLM here and no {vllm_rollout.VENV_NAME}; "
              "`make vllm-env` builds it, then `make bench` runs it)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
