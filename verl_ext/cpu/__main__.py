"""``python -m verl_ext.cpu {env|overrides|run}``: the CPU mode without writing Python.

* ``env``: ``export NAME=value`` lines for ``eval``;
* ``overrides``: the Hydra overrides, one per line (``mapfile -t CPU < <(...)``);
* ``run [OVERRIDE ...]``: exec ``python -m verl.trainer.main_ppo`` with both, then yours
  (``actor_rollout_ref.rollout.name=vllm``: verl's vLLM rollout, :mod:`verl_ext.cpu.vllm_rollout`).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

from verl_ext.cpu import DRIVER_ENV, cpu_env, cpu_overrides, main_ppo_command, vllm_rollout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.cpu", description=__doc__.split("\n")[0])
    parser.add_argument("--num-threads", type=int, default=None, help="torch threads per process (default: all cores)")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default=None,
                        help="FSDP compute dtype (default: bf16 where the CPU has bf16 instructions, else fp32)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("env", help="print export lines")
    sub.add_parser("overrides", help="print Hydra overrides, one per line")
    sub.add_parser("run", help="exec verl.trainer.main_ppo in CPU mode; everything after 'run' goes to it")
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "run" in argv:  # hand everything after `run` (overrides, Hydra flags such as --cfg job) to verl untouched
        cut = argv.index("run") + 1
        argv, passthrough = argv[:cut], argv[cut:]
    args = parser.parse_args(argv)

    if args.cmd == "env":
        for k, v in {**cpu_env(num_threads=args.num_threads), **DRIVER_ENV}.items():
            print(f"export {k}={shlex.quote(v)}")
    elif args.cmd == "overrides":
        print("\n".join(cpu_overrides(num_threads=args.num_threads, precision=args.precision)))
    else:
        extra = passthrough[1:] if passthrough[:1] == ["--"] else passthrough
        cmd, env = main_ppo_command(extra, num_threads=args.num_threads, precision=args.precision)
        sys.stdout.flush()
        if vllm_rollout.requested_rollout(extra) == "vllm":  # a child, so that its shared memory can be removed
            with vllm_rollout.shm_cleanup() as run_env:
                return subprocess.call(cmd, env={**env, **run_env})
        os.execvpe(cmd[0], cmd, env)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
