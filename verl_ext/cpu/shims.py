"""Monkeypatches for the CPU mode, applied by :mod:`verl_ext.cpu.plugin` only when ``VERL_PLATFORM=cpu``.

Kept to places where verl 0.9.1 offers no hook. Each patch wraps (never copies) verl's code and is
applied right after the verl module is first imported (:func:`when_imported`), so a process that
never uses that module does not pay for importing it, and modules that later bind the name with
``from ... import`` get the patched object.

1. ``verl.utils.distributed.initialize_global_process_group_ray`` (``utils/distributed.py:83-99``)
   builds the backend string ``f"cpu:gloo,{device}:{backend}"``; with device ``cpu`` that is
   ``"cpu:gloo,cpu:gloo"``, which ``torch.distributed`` rejects ("Duplicate device type cpu"). Its
   caller (``workers/engine_workers.py:89``) passes no backend, so the default becomes
   ``"cpu:gloo"``. ``initialize_global_process_group`` (``utils/distributed.py:62-75``, used by the
   SFT trainer) has no backend argument; its ``init_process_group`` call gets the same fix. Once the
   group exists, each actor rank takes its share of the cores (``LOCAL_WORLD_SIZE`` ranks on a host).
2. ``verl.utils.fsdp_utils.CPUOffloadPolicy``: the FSDP engine always builds
   ``CPUOffloadPolicy(pin_memory=True)`` for forward-only models, i.e. the reference policy
   (``workers/engine/fsdp/transformer_impl.py:459-463``); pinning needs an accelerator ("Cannot
   access accelerator device when none is available"). The class is replaced by a subclass whose
   ``pin_memory`` is always ``False``.
3. transformers' ``sdpa`` attention (``AttentionInterface`` / ``AttentionMaskInterface``, when
   ``transformers.modeling_utils`` is imported): verl trains on packed rows, for which transformers builds a dense
   ``T x T`` mask and torch's CPU kernel attends over the whole micro-batch (1,800 tokens in ``make demo``'s update:
   ~24x the work of its ~75-token sequences). Registered under the same name,
   :func:`verl_ext.models.attention.sdpa_per_sequence_forward` runs torch's causal SDPA on each sequence of such a row
   and is transformers' SDPA everywhere else (padded rows, generation), so configs and saved checkpoints keep
   ``attn_implementation: sdpa``. In ``make bench``'s floor: old log-probs 5.41 -> 3.19 s, update
   16.6 -> 12.8 s.
4. ``verl.utils.fsdp_utils.fsdp2_sharded_save_to_cpu`` (``utils/fsdp_utils.py:1167,1180``): ``separate_async`` keeps
   pi_old as ``.detach().cpu()`` of the local shards (``experimental/separation/engine_workers.py:95-99``), a copy on a
   GPU and the live parameters themselves on a CPU, which the optimizer then overwrites: with ``parameter_sync_step >
   1`` the later mini-batches' old log-probs came from the current policy (``actor/ppo_kl`` 0 and ``pg_clipfrac`` 0
   every step, exit 0; shared notes §K). Each saved tensor is cloned.
"""

from __future__ import annotations

import functools
import importlib.abc
import os
import sys
from typing import Callable

_APPLIED = False


# ---------------------------------------------------------------------------------------------------
# post-import hooks
# ---------------------------------------------------------------------------------------------------


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Runs callbacks on a module right after it has been executed for the first time."""

    def __init__(self):
        self.hooks: dict[str, list[Callable]] = {}

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.hooks:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        hooks = self.hooks.pop(fullname)
        exec_module = spec.loader.exec_module  # file loaders are per module: patching the instance is local

        def exec_then_patch(module):
            exec_module(module)
            for hook in hooks:
                hook(module)

        spec.loader.exec_module = exec_then_patch
        return spec


_FINDER = _PostImportFinder()


def when_imported(name: str, hook: Callable) -> None:
    """Call ``hook(module)`` now if ``name`` is imported, else right after its first import."""
    if name in sys.modules:
        hook(sys.modules[name])
        return
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    _FINDER.hooks.setdefault(name, []).append(hook)


# ---------------------------------------------------------------------------------------------------
# the patches
# ---------------------------------------------------------------------------------------------------


def _dedupe_backend(backend: str | None) -> str:
    """``"cpu:gloo,cpu:gloo"`` -> ``"cpu:gloo"``; ``None`` -> ``"cpu:gloo"``; anything else unchanged."""
    if not backend:
        return "cpu:gloo"
    pairs, seen = [], set()
    for part in backend.split(","):
        device = part.split(":", 1)[0] if ":" in part else None
        if device is not None and device in seen:
            continue
        seen.add(device)
        pairs.append(part)
    return ",".join(pairs)


def _patch_distributed(vdist) -> None:
    import torch.distributed

    original_ray = vdist.initialize_global_process_group_ray

    @functools.wraps(original_ray)
    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        out = original_ray(timeout_second=timeout_second, backend=_dedupe_backend(backend))
        _share_cores(int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("RAY_LOCAL_WORLD_SIZE") or 1))
        return out

    vdist.initialize_global_process_group_ray = initialize_global_process_group_ray

    original_global = vdist.initialize_global_process_group

    @functools.wraps(original_global)
    def initialize_global_process_group(timeout_second=36000):
        init = torch.distributed.init_process_group

        def init_with_cpu_backend(*args, backend=None, **kwargs):
            return init(*args, backend=_dedupe_backend(backend), **kwargs)

        torch.distributed.init_process_group = init_with_cpu_backend
        try:
            return original_global(timeout_second=timeout_second)
        finally:
            torch.distributed.init_process_group = init

    vdist.initialize_global_process_group = initialize_global_process_group


def _share_cores(ranks_on_host: int) -> None:
    """Split the host's cores between the processes computing on it at once (``OMP_NUM_THREADS`` is per process): the
    actor ranks, or with ``separate_async``'s standalone rollout pool those and the rollout ranks
    (``VERL_EXT_COMPUTE_PROCESSES_PER_HOST``; otherwise both run every core's threads and OpenMP's spinning slows
    both)."""
    import torch

    from verl_ext.cpu import COMPUTE_PROCESSES_ENV  # set by verl_ext.cpu.separate_async_settings

    ranks_on_host = max(ranks_on_host, int(os.environ.get(COMPUTE_PROCESSES_ENV) or 1))
    if ranks_on_host > 1:
        cores = int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)
        torch.set_num_threads(max(1, cores // ranks_on_host))


def _patch_offload_policy(fsdp_utils) -> None:
    base = getattr(fsdp_utils, "CPUOffloadPolicy", None)
    if base is None or getattr(base, "_verl_ext_cpu", False):
        return

    class CPUOffloadPolicy(base):  # noqa: D101 - same dataclass, never pinned
        _verl_ext_cpu = True

        def __init__(self, pin_memory: bool = False):
            super().__init__(pin_memory=False)

    CPUOffloadPolicy.__doc__ = base.__doc__
    fsdp_utils.CPUOffloadPolicy = CPUOffloadPolicy


def _patch_sharded_save(fsdp_utils) -> None:
    original = getattr(fsdp_utils, "fsdp2_sharded_save_to_cpu", None)
    if original is None or getattr(original, "_verl_ext_cpu", False):
        return

    @functools.wraps(original)
    def fsdp2_sharded_save_to_cpu(model):
        state, spec = original(model)
        return {name: (tensor.clone(), s) for name, (tensor, s) in state.items()}, spec

    fsdp2_sharded_save_to_cpu._verl_ext_cpu = True
    fsdp_utils.fsdp2_sharded_save_to_cpu = fsdp2_sharded_save_to_cpu


def _register_packed_sdpa(_modeling_utils) -> None:
    from verl_ext.models.attention import register_sdpa_per_sequence

    register_sdpa_per_sequence("sdpa")


def apply(per_sequence_sdpa: bool = True) -> None:
    """Install the CPU-mode patches (idempotent). ``per_sequence_sdpa=False`` leaves out patch 3: packed rows then go
    through transformers' own ``sdpa`` and its dense mask, as on a GPU (the first-hour dry run's ``sdpa`` backend)."""
    global _APPLIED
    if _APPLIED:
        return
    when_imported("verl.utils.distributed", _patch_distributed)
    when_imported("verl.utils.fsdp_utils", _patch_offload_policy)
    when_imported("verl.utils.fsdp_utils", _patch_sharded_save)
    if per_sequence_sdpa:
        when_imported("transformers.modeling_utils", _register_packed_sdpa)
    _APPLIED = True
