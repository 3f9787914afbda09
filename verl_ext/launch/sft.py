"""``python -m verl_ext.sft [--cpu] [Hydra overrides]``: supervised fine-tuning with verl 0.9.1's own SFT trainer.

Runs ``torchrun --standalone --nproc_per_node=<trainer.n_gpus_per_node> -m verl.trainer.sft_trainer`` (the
engine-based trainer, config ``sft_trainer_engine``) on parquet files with a ``messages`` column
(:mod:`data_prep.sft_messages` writes them from RL rows). What this adds to verl's own command:

* ``--cpu``: the CPU mode of :mod:`verl_ext.cpu`, as for RL: its environment (CPU platform plugin, engine
  lookup, threads) and precision, plus the SFT trainer's CPU settings (``trainer.device=cpu``, FSDP2,
  sdpa attention, no ``torch.compile``, no data-loader worker processes);
* logging to ``[console, file]`` instead of verl's default (which includes wandb), the file at
  ``<trainer.default_local_dir>/metrics/sft.jsonl``; later overrides still win.

On GPUs the command is verl's, unchanged (one node; several nodes: run ``torchrun`` yourself).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from verl_ext.cpu import cpu_env, cpu_precision, split_hydra_flags
from verl_ext.launch.version_check import check_verl_version

CPU_FLAG = "--cpu"


def _value(overrides: list[str], key: str, default: str | None = None) -> str | None:
    """The value the overrides give ``key`` (the last one wins, as in Hydra), else ``default``."""
    found = [o.split("=", 1)[1] for o in overrides if o.lstrip("+").split("=", 1)[0] == key]
    return found[-1] if found else default


def sft_cpu_overrides(precision: str | None = None) -> list[str]:
    """Hydra overrides of ``sft_trainer_engine`` for the CPU mode."""
    dtype = precision or cpu_precision()
    return [
        "trainer.device=cpu",
        "trainer.n_gpus_per_node=1",
        "engine.strategy=fsdp2",
        "engine.use_torch_compile=False",
        f"++engine.mixed_precision={{param_dtype:{dtype},reduce_dtype:fp32,buffer_dtype:fp32}}",
        "++model.override_config.attn_implementation=sdpa",
        "data.num_workers=0",
    ]


def sft_command(args: list[str], *, base: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """``(argv, env)`` of the SFT run for the entry point's arguments (``--cpu`` and Hydra overrides)."""
    cpu = CPU_FLAG in args
    flags, overrides = split_hydra_flags([a for a in args if a != CPU_FLAG])
    env = dict(os.environ if base is None else base)
    preset = ["trainer.logger=[console,file]"]
    if cpu:
        env.update(cpu_env(env))
        preset += sft_cpu_overrides()
    overrides = preset + overrides
    nproc = _value(overrides, "trainer.n_gpus_per_node", "1")
    out = _value(overrides, "trainer.default_local_dir")
    if out is not None:
        env["VERL_FILE_LOGGER_PATH"] = str(Path(out) / "metrics" / "sft.jsonl")
        Path(out, "metrics").mkdir(parents=True, exist_ok=True)
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    argv = [torchrun, "--standalone", f"--nproc_per_node={nproc}", "-m", "verl.trainer.sft_trainer", *flags,
            *overrides]
    return argv, env


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "-h" in args or "--help" in args:
        print(__doc__)
        return 0
    check_verl_version()
    command, env = sft_command(args)
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    sys.exit(main())
