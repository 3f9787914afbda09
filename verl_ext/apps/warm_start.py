"""The warm-started embedded policy: the embedded model after a short SFT on worked embedded tasks.

RL on the CPU needs a policy that solves some of its tasks (an untrained 135M model scores about 0).
:func:`warm_start_path` fine-tunes the embedded model with verl's own SFT trainer (``python -m
verl_ext.sft --cpu``) on worked answers (:mod:`data_prep.sft_messages`), measures its held-out accuracy
(``eval.evaluate``, k samples at temperature 1.0) and caches the result like the converted model:
built in a temporary directory, renamed into place, trusted only with its marker file, which also
records the settings, the SFT losses and the accuracy. Each setting has its own directory, so a
changed setting never reuses a stale model; ``rebuild=True`` (``--rebuild``) builds it again.

    python -m verl_ext.apps.warm_start [--num-layers N] [--steps S] [--rebuild]   # prints the directory
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from verl_ext.models.embedded import MARKER, _publish, _write_marker, cache_root, embedded_model_path, model_name


@dataclass(frozen=True)
class WarmStartConfig:
    """What a warm start is made of; every field is part of its cache directory's name."""

    task: str = "arithmetic"  # embedded dataset with worked solutions (data_prep.sft_messages)
    steps: int = 25  # SFT steps of `batch` examples, one epoch
    batch: int = 16
    lr: float = 5e-5
    seed: int = 0
    eval_tasks: int = 32  # held-out tasks x `k` samples for the recorded accuracy; 0: not measured here
    k: int = 4
    num_layers: int | None = None  # truncated copies for tests

    def name(self) -> str:
        return (f"{model_name(self.num_layers)}-sft-{self.task}-{self.steps}x{self.batch}-lr{self.lr:g}"
                f"-s{self.seed}")


def warm_start_path(config: WarmStartConfig = WarmStartConfig(), *, rebuild: bool = False,
                    cache_dir: str | Path | None = None) -> str:
    """Directory of the warm-started model (a Hugging Face checkpoint), built on first use."""
    models_dir = Path(cache_dir) if cache_dir is not None else cache_root() / "models"
    target = models_dir / config.name()
    if (target / MARKER).is_file() and not rebuild:
        return str(target)
    base = embedded_model_path(config.num_layers, cache_dir=cache_dir)
    models_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{target.name}-", dir=models_dir))
    try:
        info = _build(config, base, tmp, log=models_dir / f"{config.name()}.log")
        model = tmp / "model"
        _write_marker(model, base=base, warm_start=asdict(config), **info)
        if rebuild and target.exists():
            shutil.rmtree(target)
        _publish(model, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return str(target)


def _build(config: WarmStartConfig, base: str, work: Path, log: Path) -> dict:
    """SFT of ``base`` into ``work/model``, then its held-out accuracy; returns what the marker records."""
    from data_prep import embedded_datasets
    from data_prep.sft_messages import build

    sft = build(config.task, work / "data", train_size=config.steps * config.batch, test_size=max(config.eval_tasks, 4),
                seed=config.seed)
    run = work / "run"
    command = [
        sys.executable, "-m", "verl_ext.sft", "--cpu", f"model.path={base}",
        f"data.train_files={sft['train']}", f"data.val_files={sft['test']}",
        f"data.train_batch_size={config.batch}", f"data.micro_batch_size_per_gpu={config.batch}",
        "data.use_dynamic_bsz=False", "data.max_length=256", f"optim.lr={config.lr}", "trainer.total_epochs=1",
        f"trainer.seed={config.seed}", "model.enable_gradient_checkpointing=False",
        "checkpoint.save_contents=[hf_model]", "trainer.resume_mode=disable",
        "trainer.project_name=verl_ext_warm_start", f"trainer.experiment_name={config.name()}",
        f"trainer.default_local_dir={run}",
    ]
    print(f"warm start: SFT of {base} on {config.steps} x {config.batch} worked {config.task} answers "
          f"(log: {log})", flush=True)
    with open(log, "w") as out:
        proc = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"warm-start SFT failed (exit {proc.returncode}); see {log}")
    shutil.move(str(run / f"global_step_{config.steps}" / "huggingface"), str(work / "model"))
    records = [json.loads(line) for line in (run / "metrics" / "sft.jsonl").read_text().splitlines()]
    losses = [r["data"]["train/loss"] for r in records if "train/loss" in r["data"]]
    val = [r["data"]["val/loss"] for r in records if "val/loss" in r["data"]]
    info = {"sft_loss_first": losses[0], "sft_loss_last": losses[-1], "sft_val_loss": val[-1] if val else None,
            "heldout": None}
    print(f"warm start: SFT loss {losses[0]:.3f} -> {losses[-1]:.3f}", flush=True)
    if config.eval_tasks == 0:  # the caller measures it (make demo: its held-out evaluation before RL)
        return info

    from eval import evaluate

    rl_test = embedded_datasets.build(config.task, work / "rl", train_size=config.steps * config.batch,
                             test_size=config.eval_tasks, seed=config.seed)["test"]
    summaries = evaluate.run(evaluate.EvalConfig(
        benchmarks=(f"{config.task}={rl_test}",), model=str(work / "model"), k=config.k, temperature=1.0,
        max_new_tokens=48, backend="hf", seed=config.seed, out=work / "eval"))
    summary = summaries["model"]["benchmarks"][config.task]
    info["heldout"] = {"tasks": summary["n_problems"], "k": config.k, "accuracy": summary["accuracy"],
                       "pass_at_k": summary["pass@k"][str(config.k)]}
    print(f"warm start: held-out accuracy {summary['accuracy']:.3f}, pass@{config.k} "
          f"{info['heldout']['pass_at_k']:.3f} ({config.eval_tasks} tasks x {config.k} samples)", flush=True)
    return info


def warm_start_info(path: str | Path) -> dict:
    """What the marker of a warm-started model records."""
    return json.loads((Path(path) / MARKER).read_text())


def main(argv: list[str] | None = None) -> int:
    defaults = WarmStartConfig()
    parser = argparse.ArgumentParser(prog="python -m verl_ext.apps.warm_start", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default=defaults.task, choices=("arithmetic", "arithmetic_easy", "countdown"))
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--batch", type=int, default=defaults.batch)
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--eval-tasks", type=int, default=defaults.eval_tasks)
    parser.add_argument("--k", type=int, default=defaults.k)
    parser.add_argument("--num-layers", type=int, default=None, help="truncated copy (tests)")
    parser.add_argument("--rebuild", action="store_true", help="build again even if cached")
    args = parser.parse_args(argv)
    config = WarmStartConfig(args.task, args.steps, args.batch, args.lr, args.seed, args.eval_tasks, args.k,
                             args.num_layers)
    print(warm_start_path(config, rebuild=args.rebuild))
    return 0


if __name__ == "__main__":
    sys.exit(main())
