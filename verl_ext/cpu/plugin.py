"""Imported by every verl process through ``VERL_USE_EXTERNAL_MODULES=verl_ext.cpu.plugin``.

verl imports the modules named there from its own ``__init__`` (``verl/__init__.py:49-52``), i.e. in
the driver, the TaskRunner, the hybrid actor workers, the agent-loop and reward-loop workers, before
anything calls ``get_platform()``. This module:

1. registers the ``cpu`` platform (selected only by ``VERL_PLATFORM=cpu``);
2. registers the ``hf`` rollout backend in ``_ROLLOUT_REGISTRY`` and ``RolloutReplicaRegistry``
   (selected only by ``actor_rollout_ref.rollout.name=hf``).

Both are registry entries: importing this module changes nothing unless the configuration asks for
them, so it is safe on GPU machines.

3. Only when ``VERL_PLATFORM=cpu``: applies the shims of :mod:`verl_ext.cpu.shims` (monkeypatches
   for spots where verl 0.9.1 has no hook; each one is documented there).
4. Only under :func:`verl_ext.cpu.vllm_rollout.shm_cleanup` (``VERL_EXT_SHM_PREFIX`` set): names the process's
   shared-memory segments with the run's prefix, so that the clean-up removes them and no one else's.
"""

from verl_ext.cpu import is_cpu_mode, platform, shims, vllm_rollout  # noqa: F401  (platform registers on import)

HF_ROLLOUT_MODULE = "verl_ext.cpu.hf_rollout"


def _load_hf_replica():
    from verl_ext.cpu.hf_rollout import HFReplica

    return HFReplica


def register_hf_rollout() -> None:
    """Make ``actor_rollout_ref.rollout.name=hf`` resolvable in this process (idempotent).

    Both registries take names or loaders, so :mod:`verl_ext.cpu.hf_rollout` is imported only when
    the backend is actually used (it imports verl, which is still initialising at this point).
    """
    from verl.workers.rollout.base import _ROLLOUT_REGISTRY
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    _ROLLOUT_REGISTRY[("hf", "async")] = f"{HF_ROLLOUT_MODULE}.HFServerAdapter"
    RolloutReplicaRegistry.register("hf", _load_hf_replica)


register_hf_rollout()
if is_cpu_mode():
    shims.apply()
vllm_rollout.use_run_prefix()
