"""``hf``: a colocated rollout backend that samples with ``transformers``' ``generate`` on the actor's module.

verl 0.9.1's v1 trainer only talks to token-in/token-out rollout *servers* (vLLM, SGLang, TRT-LLM);
its old ``HFRollout`` cannot be instantiated any more (abstract methods, wrong ``super().__init__``).
A backend needs three pieces (see ``workers/rollout/base.py`` and ``workers/rollout/replica.py``);
this module names the two that verl's registries resolve (:mod:`verl_ext.cpu.plugin` registers them)
and the sampling they share, each in its own module:

* :mod:`verl_ext.cpu.hf_sampling`: :func:`generate_batch`, the sampling itself, a plain function of a
  causal-LM module (no Ray, no verl; unit-tested alone), with per-request seeds (:func:`request_seed`,
  :class:`SeededSampler`) and the log-probs verl's actor recomputes;
* :mod:`verl_ext.cpu.hf_worker`: :class:`HFServerAdapter` (``BaseRollout``) and the functions that run
  inside the hybrid actor process (generation with the actor's module or its full copy, weight sync);
* :mod:`verl_ext.cpu.hf_server`: :class:`HFServer`, the Ray actor with verl's server interface that
  batches requests, and :mod:`verl_ext.cpu.hf_replica`: :class:`HFReplica` (``RolloutReplica``), one server per
  actor rank.

Limits: one rank per replica (rollout tp = dp = pp = 1; verl then builds one replica per rank and balances requests
over them, all requests of a prompt to one replica: :mod:`verl_ext.cpu.hf_router`). In hybrid mode (``sync``,
``colocate_async``) the generate call runs inside the actor process through ``__ray_call__`` (the mechanism vLLM's
replica uses to query its workers), so it cannot overlap with training; ``colocate_async`` pauses it around weight
updates. As ``separate_async``'s standalone replica it runs in verl's ``CheckpointEngineWorker`` on a copy of the
policy that the checkpoint engine refreshes after every step, alongside training.
"""

from verl_ext.cpu.hf_sampling import Generation, SamplingParams, SeededSampler, generate_batch, request_seed
from verl_ext.cpu.hf_replica import HFReplica
from verl_ext.cpu.hf_server import HFServer
from verl_ext.cpu.hf_worker import HFServerAdapter, load_module_copy

__all__ = [
    "Generation",
    "HFReplica",
    "HFServer",
    "HFServerAdapter",
    "SamplingParams",
    "SeededSampler",
    "generate_batch",
    "load_module_copy",
    "request_seed",
]
