"""``python -m verl_ext.apps.rft``: verifier-filtered self-training (RFT; Yan, "Progress-Aware Prompt Sampling",
CS224R, §3.4) in one command.

    python -m verl_ext.apps.rft --model CKPT --train TRAIN.parquet --sft SFT.parquet --test TEST.parquet \\
        --filter naive|clean --out OUT [--k 32] [--train-limit N] [--test-limit 200] [--max-new-tokens 1024] \\
        [--seed 0] [--backend auto|vllm|hf] [--batch-size 32] [--sft-batch-size 32] [--cpu] [-- SFT Hydra overrides]

1. **sample**: ``K`` completions of every training prompt from ``CKPT`` with the evaluator's sampling
   (``eval.evaluate --preset progress --k K``) into ``OUT/samples/model/train/samples.jsonl``;
2. **filter**: :mod:`data_prep.rft_filter` (``naive`` or ``clean``, with its share of the original SFT rows) into
   ``OUT/data/train.parquet`` and its ``.json`` summary;
3. **train**: one epoch of verl's SFT trainer (``python -m verl_ext.sft``) from ``CKPT`` at the filter's learning
   rate (naive 1e-5, clean 5e-6), the model saved as ``OUT/sft/global_step_N/huggingface``;
4. **evaluate**: ``eval.evaluate --run OUT/sft --steps N --benchmarks countdown=TEST --preset progress`` into
   ``OUT/sft/eval``, so that ``python -m eval.tables progress --runs uniform=RUN rft_naive=OUT/sft`` lists it.

``CKPT``: a Hugging Face directory, a hub id, ``embedded[:K]`` or an RL run's FSDP actor directory
(``RUN/global_step_N/actor``; its ``huggingface/`` copy when saved, else merged once into ``OUT/merged``).
Everything after ``--`` goes to the SFT trainer and wins over the chain's settings ([decision] ``data.max_length``
2048: a 1024-token completion and its prompt; SFT batch ``--sft-batch-size``, at most the written rows).

Resuming: the evaluator keeps the samples it has; a finished SFT run (its last ``huggingface/`` checkpoint) is
not trained again. ``OUT/rft.json`` records the chain's settings, and another chain into the same ``OUT`` stops.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from data_prep import rft_filter
from data_prep.generation import resolve_model

TEST_BENCHMARK = "countdown"  # the held-out prompts' name in OUT/sft/eval (eval.tables reads it)


class RftError(SystemExit):
    def __init__(self, message: str):
        super().__init__(f"verl_ext.apps.rft: {message}")


def policy_dir(spec: str, merged_dir: Path) -> str:
    """What verl's SFT trainer and the evaluator load for ``spec``: FSDP shards are merged first (once)."""
    from eval.evaluate import loadable, step_checkpoint

    if not (Path(spec) / "fsdp_config.json").is_file():
        return resolve_model(spec)
    return loadable(step_checkpoint(0, Path(spec)), merged_dir)  # its huggingface/ copy when saved


def saved_steps(run_dir: Path) -> list[int]:
    """Steps of ``run_dir`` whose Hugging Face model was saved (verl's SFT trainer: ``global_step_N/huggingface``)."""
    from eval.evaluate import has_hf_weights

    return sorted(int(m[1]) for p in run_dir.glob("global_step_*")
                  if (m := re.fullmatch(r"global_step_(\d+)", p.name)) and has_hf_weights(p / "huggingface"))


def stage(name: str, argv: list[str]) -> None:
    print(f"[rft] {name}: {' '.join(argv)}", flush=True)
    proc = subprocess.run(argv)
    if proc.returncode:
        raise RftError(f"{name} failed (exit {proc.returncode}): {' '.join(argv)}")


def record_settings(out: Path, settings: dict) -> None:
    path = out / "rft.json"
    if path.exists():
        before = json.loads(path.read_text())
        if before != settings:
            changed = ", ".join(f"{k}: {before.get(k)!r} -> {v!r}" for k, v in settings.items() if before.get(k) != v)
            raise RftError(f"{out} holds another chain ({changed}); use another --out")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2) + "\n")


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    ours, sft_overrides = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(prog="python -m verl_ext.apps.rft", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="the generator and the SFT start (CKPT above)")
    parser.add_argument("--train", type=Path, required=True, help="RL parquet of the training prompts")
    parser.add_argument("--sft", type=Path, required=True, help="the original SFT parquet to mix in")
    parser.add_argument("--test", type=Path, required=True, help="RL parquet of the held-out prompts")
    parser.add_argument("--filter", choices=sorted(rft_filter.FILTERS), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--k", type=int, default=32, help="samples per training prompt (default 32)")
    parser.add_argument("--train-limit", type=int, help="first N training prompts (default all)")
    parser.add_argument("--test-limit", type=int, default=200, help="first N held-out prompts (default 200)")
    parser.add_argument("--max-new-tokens", type=int, help="default: the preset's 1024")
    parser.add_argument("--seed", type=int, default=0, help="sampling and SFT-mix seed")
    parser.add_argument("--backend", default="auto", help="the evaluator's generation backend")
    parser.add_argument("--batch-size", type=int, default=32, help="hf backend: samples per generate call")
    parser.add_argument("--sft-batch-size", type=int, default=32, help="[decision] SFT rows per step (default 32)")
    parser.add_argument("--cpu", action="store_true", help="the SFT trainer's CPU mode (python -m verl_ext.sft --cpu)")
    return parser.parse_args(ours), sft_overrides


def main(argv: list[str] | None = None) -> int:
    args, sft_overrides = parse_args(sys.argv[1:] if argv is None else argv)
    out = args.out.resolve()
    flt = rft_filter.FILTERS[args.filter]
    record_settings(out, {"model": args.model, "train": str(args.train.resolve()), "sft": str(args.sft.resolve()),
                          "test": str(args.test.resolve()), "filter": args.filter, "k": args.k,
                          "train_limit": args.train_limit, "test_limit": args.test_limit, "seed": args.seed,
                          "max_new_tokens": args.max_new_tokens,
                          "sft_overrides": sft_overrides})
    py = sys.executable
    sampling = ["--preset", "progress", "--seed", str(args.seed), "--backend", args.backend,
                "--batch-size", str(args.batch_size),
                *(["--max-new-tokens", str(args.max_new_tokens)] if args.max_new_tokens else [])]
    model = policy_dir(args.model, out / "merged")

    stage("sample", [py, "-m", "eval.evaluate", "--model", model, "--benchmarks", f"train={args.train}",
                     "--k", str(args.k), *sampling, "--out", str(out / "samples"),
                     *(["--limit", str(args.train_limit)] if args.train_limit else [])])

    data = out / "data" / "train.parquet"
    samples = out / "samples" / "model" / "train" / "samples.jsonl"
    stage("filter", [py, "-m", "data_prep.rft_filter", "--samples", str(samples),
                     "--train", str(args.train), "--sft", str(args.sft), "--filter", args.filter,
                     "--out", str(data), "--seed", str(args.seed)])
    summary = json.loads(data.with_suffix(".json").read_text())
    if not summary["rft_rows"]:
        raise RftError(f"no verifier-correct completion in {summary['samples']} samples: nothing to self-train on "
                       f"({data.with_suffix('.json')})")
    rows = summary["rows"]

    run = out / "sft"
    if not saved_steps(run):
        batch = min(args.sft_batch_size, rows)
        stage("train", [py, "-m", "verl_ext.sft", *(["--cpu"] if args.cpu else []), f"model.path={model}",
                        f"data.train_files={data}", f"data.train_batch_size={batch}", "data.max_length=2048",
                        f"optim.lr={flt.lr}", "trainer.total_epochs=1", "checkpoint.save_contents=[hf_model]",
                        f"trainer.seed={args.seed}", "trainer.project_name=verl_ext_rft",
                        f"trainer.experiment_name=rft_{args.filter}", f"trainer.default_local_dir={run}",
                        *sft_overrides])
    steps = saved_steps(run)
    if not steps:
        raise RftError(f"the SFT run saved no Hugging Face model under {run}/global_step_N/huggingface")

    stage("evaluate", [py, "-m", "eval.evaluate", "--run", str(run), "--steps", str(steps[-1]),
                       "--benchmarks", f"{TEST_BENCHMARK}={args.test}", *sampling,
                       "--limit", str(args.test_limit)])
    print(f"[rft] done: python -m eval.tables progress --runs rft_{args.filter}={run} uniform=<the uniform run>")
    return 0


if __name__ == "__main__":
    sys.exit(main())
