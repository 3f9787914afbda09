"""The ``hf`` rollout backend inside the process that generates (the backend: :mod:`verl_ext.cpu.hf_rollout`).

:class:`HFServerAdapter` (``BaseRollout``) is built through ``_ROLLOUT_REGISTRY[("hf", "async")]`` by every hybrid
actor worker (``workers/engine_workers.py:667``) and, for ``separate_async``'s standalone rollout pool, by verl's
``CheckpointEngineWorker`` (``checkpoint_engine/base.py:325``, no device mesh). Nothing is copied on a weight sync
with one hybrid actor rank: generation uses the actor's own module, so ``update_weights`` only records
``global_steps`` (the weight version reported to the trainer for staleness metrics). With several data-parallel
ranks a lone rank cannot run the sharded module (the others would have to join each all-gather), and a standalone
replica has no actor at all, so they keep a full copy of the policy, reloaded from verl's weight-sync generator
(:func:`load_module_copy`; the checkpoint engine's is asynchronous), and generate their own share of the requests.

The server reaches this process through ``__ray_call__`` (the mechanism vLLM's replica uses to query
its workers) with :func:`generate_on_worker` and :func:`special_ids_on_worker`. During a batch the
actor's FSDP2 parameters stay gathered (:func:`_fsdp_unsharded`) instead of being re-gathered for
every decoding step; the resharding settings are restored afterwards.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, AsyncIterator, Generator, Optional

import torch
from torch.distributed.fsdp import FSDPModule
from transformers import AutoModelForCausalLM
from verl.workers.rollout.base import BaseRollout

from verl_ext.cpu.hf_sampling import Generation, SamplingParams, generate_batch, request_seed


def _world_size() -> int:
    return torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1


class HFServerAdapter(BaseRollout):
    """The rollout object inside each hybrid actor worker.

    One actor rank: nothing to load, release or copy (generation uses the actor's own module).
    Several ranks: each keeps a full, unsharded copy of the policy (:attr:`module_copy`) and reloads
    it on every weight sync, since a lone FSDP rank cannot run a forward pass of the sharded module.
    """

    def __init__(self, config, model_config, device_mesh, *args, **kwargs):
        super().__init__(config, model_config, device_mesh, *args, **kwargs)  # model_config: an HFModelConfig
        self.standalone = device_mesh is None  # separate_async's rollout pool: no actor in this process
        self.global_steps: int = 0
        self.sleeping = False
        self.sample_counts: tuple[int, dict] = (0, {})  # (weight version, occurrences per request key)
        self.module_copy: Optional[torch.nn.Module] = None

    async def resume(self, tags: list[str]):
        self.sleeping = False

    async def release(self):
        self.sleeping = True

    async def update_weights(self, weights: Generator | AsyncIterator, wire_format: str = "named_tensors", **kwargs):
        # Every rank runs this (ONE_TO_ALL, engine_workers.py:727): the generator all-gathers each
        # tensor, so with several ranks all of them consume it in the same order.
        if wire_format != "named_tensors":
            raise NotImplementedError(f"the hf rollout backend loads full tensors, not {wire_format!r}")
        if hasattr(weights, "__aiter__"):  # a checkpoint engine's receive_weights
            weights = [item async for item in weights]
        if self.standalone or _world_size() > 1:
            self.module_copy = load_module_copy(self.module_copy, self.model_config.hf_config, weights)
        steps = kwargs.get("global_steps")
        if steps is not None:
            self.global_steps = int(steps)


def load_module_copy(module: Optional[torch.nn.Module], hf_config, weights) -> torch.nn.Module:
    """Load ``(name, full tensor)`` pairs (HF names) into ``module``, built from ``hf_config`` when ``None``.

    Every parameter must be given exactly once (a tied weight counts as given under either name),
    and every given name must exist: a partial copy would silently sample from a mixed policy.
    """
    if module is None:
        module = AutoModelForCausalLM.from_config(hf_config, torch_dtype=torch.float32, attn_implementation="sdpa")
        module.eval().requires_grad_(False)
    state = module.state_dict(keep_vars=True)
    loaded: set[int] = set()
    with torch.no_grad():
        for name, tensor in weights:
            if name not in state:
                raise KeyError(f"weight sync: {name!r} is not a parameter of the rollout copy "
                               f"({type(module).__name__})")
            target = state[name]
            target.data.copy_(tensor.to(device=target.device, dtype=target.dtype))
            loaded.add(id(target))
    missing = [n for n, p in module.named_parameters() if id(p) not in loaded]
    if missing:
        raise KeyError(f"weight sync: no tensor for {missing[:5]} ({len(missing)} parameters)")
    return module


def _generation_target(process, *, loaded: bool = True) -> tuple[HFServerAdapter, torch.nn.Module, Any, bool]:
    """``(adapter, module to generate with, HFModelConfig, whether the module is the actor's FSDP one)`` in a
    standalone rollout worker (verl's ``CheckpointEngineWorker``: the adapter's copy, ``None`` before the first weight
    sync unless ``loaded`` is required) or a hybrid actor process."""
    adapter = getattr(process, "server_adapter", None)
    if isinstance(adapter, HFServerAdapter):
        if adapter.module_copy is None and loaded:
            raise RuntimeError("standalone hf rollout: no weights received yet (the trainer syncs them at start-up)")
        return adapter, adapter.module_copy, adapter.model_config, False
    w = _find_rollout_worker(process)
    copy = w.rollout.module_copy
    return w.rollout, (w.actor.engine.module if copy is None else copy), getattr(w.actor, "model_config", None), \
        copy is None


def _find_rollout_worker(actor_process) -> Any:
    """The inner ``ActorRolloutRefWorker`` of a ``WorkerDict`` (or a plain worker) holding an HF adapter."""
    candidates = list(getattr(actor_process, "worker_dict", {}).values()) or [actor_process]
    candidates += list(getattr(actor_process, "fused_worker_dict", {}).values())
    for w in candidates:
        if isinstance(getattr(w, "rollout", None), HFServerAdapter) and getattr(w, "actor", None) is not None:
            return w
    raise RuntimeError("no worker with an 'hf' rollout and an actor engine in this process")


@contextlib.contextmanager
def _fsdp_unsharded(module: torch.nn.Module):
    """Keep an FSDP2 module's parameters gathered for the whole ``generate`` call.

    Otherwise every decoding step re-gathers and frees every parameter group (with one rank that is
    a full copy of the weights per token: generation takes about twice as long). Each module's
    resharding setting is saved and restored exactly (FSDP2 treats the root specially), using the
    private ``_get_fsdp_state`` / ``post_forward_mesh_info`` of torch 2.13; if they are missing the
    module is used as it is.
    """
    mods = [m for m in module.modules() if isinstance(m, FSDPModule)]
    saved = []
    try:
        for m in mods:
            state = m._get_fsdp_state()
            saved.append(
                (state, state._auto_reshard_after_forward, [g.post_forward_mesh_info for g in state._fsdp_param_groups])
            )
    except AttributeError:
        mods, saved = [], []
    try:
        for m in mods:
            m.set_reshard_after_forward(False, recurse=False)
            m.unshard()
        yield
    finally:
        for m in mods:
            m.reshard()
        for state, auto, infos in saved:
            state._auto_reshard_after_forward = auto
            for g, info in zip(state._fsdp_param_groups, infos, strict=True):
                g.post_forward_mesh_info = info


def generate_on_worker(
    actor_process,
    prompts: list[list[int]],
    max_new_tokens: list[int],
    params: SamplingParams,
    eos_token_ids: list[int],
    pad_token_id: int,
    base_seed: Optional[int] = None,
) -> tuple[list[Generation], int]:
    """Runs inside the hybrid actor process (via ``__ray_call__``): generate with the actor module.

    With a ``base_seed`` each request is sampled with :func:`request_seed` of the current weight
    version and its occurrence among identical requests at that version (counted here, on the
    adapter, and reset when the version changes), so samples do not depend on batching or order.
    """
    adapter, module, _, sharded = _generation_target(actor_process)
    start = time.perf_counter()
    version = int(adapter.global_steps)
    seeds = None
    if base_seed is not None and params.do_sample:
        counted_version, counts = getattr(adapter, "sample_counts", (None, {}))
        if counted_version != version:
            counts = {}
        seeds = []
        for prompt, cap in zip(prompts, max_new_tokens, strict=True):
            key = (tuple(prompt), params, int(cap))
            occurrence = counts.get(key, 0)
            counts[key] = occurrence + 1
            seeds.append(request_seed(base_seed, version, prompt, params, cap, occurrence))
        adapter.sample_counts = (version, counts)
    with _fsdp_unsharded(module) if sharded else contextlib.nullcontext():
        gens = generate_batch(
            module,
            prompts,
            max_new_tokens=max_new_tokens,
            params=params,
            eos_token_ids=eos_token_ids,
            pad_token_id=pad_token_id,
            seeds=seeds,
        )
    if gens:
        gens[0].extra["worker_seconds"] = time.perf_counter() - start
        gens[0].extra["torch_threads"] = torch.get_num_threads()
    return gens, version


def _as_id_list(value) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in (value if isinstance(value, (list, tuple)) else [value]) if v is not None]


def special_ids_on_worker(actor_process) -> tuple[list[int], int]:
    """(EOS ids, pad id) from the policy's ``HFModelConfig``: generation config, tokenizer, model config."""
    _, module, mc, _ = _generation_target(actor_process, loaded=False)  # a standalone server starts before weights
    eos = _as_id_list(getattr(getattr(mc, "generation_config", None), "eos_token_id", None))
    tok = getattr(mc, "tokenizer", None)
    eos += _as_id_list(getattr(tok, "eos_token_id", None))
    eos += _as_id_list(getattr(getattr(mc, "hf_config", None), "eos_token_id", None))
    eos += _as_id_list(getattr(getattr(module, "config", None), "eos_token_id", None))
    if not eos:
        raise ValueError(f"{mc.path}: no EOS token id in the generation config, tokenizer or model config")
    pad = getattr(tok, "pad_token_id", None)
    return sorted(set(eos)), int(pad if pad is not None else eos[0])
