"""``hf``: a colocated rollout backend that samples with ``transformers``' ``generate`` on the actor's module.

verl 0.9.1's v1 trainer only talks to token-in/token-out rollout *servers* (vLLM, SGLang, TRT-LLM);
its old ``HFRollout`` cannot be instantiated any more (abstract methods, wrong ``super().__init__``).
This module provides the three pieces a backend needs (see ``workers/rollout/base.py`` and
``workers/rollout/replica.py``):

* :class:`HFServerAdapter` (``BaseRollout``), built by every hybrid actor worker through
  ``_ROLLOUT_REGISTRY[("hf", "async")]`` (``workers/engine_workers.py:667``). Nothing is copied on a
  weight sync with one actor rank: generation uses the actor's own module, so ``update_weights``
  only records ``global_steps`` (the weight version reported to the trainer for staleness metrics).
  With several data-parallel ranks a lone rank cannot run the sharded module (the others would have
  to join each all-gather), so every rank keeps a full copy of the policy, reloaded from verl's
  weight-sync generator (:func:`load_module_copy`), and generates its own share of the requests.
* :class:`HFServer`, an async Ray actor with verl's server interface: ``generate(request_id,
  prompt_ids, sampling_params, ...) -> TokenOutput`` plus no-op lifecycle methods. Requests that
  arrive together (verl's agent loop sends all ``n`` samples of every prompt at once) are grouped
  into one left-padded ``generate`` call per distinct sampling configuration.
* :class:`HFReplica` (``RolloutReplica``), registered as ``"hf"`` in ``RolloutReplicaRegistry``;
  ``launch_servers`` creates one :class:`HFServer` per actor rank.

The actual sampling is :func:`generate_batch`, a plain function of a causal-LM module (unit-tested
without Ray). It honours ``temperature`` (``<= 0`` means greedy), ``top_p``, ``top_k`` (``<= 0``:
off, vLLM convention), ``repetition_penalty`` and a per-request token cap
(``min(response_length, prompt_length + response_length - len(prompt))``, the rule of vLLM's
server), stops after the first EOS token (kept in the output, as vLLM does), and returns the
log-probability of every sampled token under ``softmax(logits / temperature)`` of the *unfiltered*
logits, i.e. the quantity verl's actor recomputes as ``old_log_probs`` (``top_p``/``top_k`` change
which tokens can be drawn, not their reported log-probs). So ``rollout.calculate_log_probs=True``
works and ``training/rollout_probs_diff_*`` measures only numerical noise.

Sampling is seeded per request, not drawn from the process's global RNG: request ``k`` (counting
from 0) among the identical requests (same prompt ids, sampling parameters and token cap) served
at one weight version samples with ``torch.Generator(seed)``, ``seed = sha256(base seed, weight
version (global_steps), prompt ids, temperature, top_p, top_k, repetition_penalty, cap, k)``
(:func:`request_seed`); the base seed is ``actor_rollout_ref.rollout.seed`` (verl's default 42;
``null`` falls back to the global RNG). The counts live in the actor process and restart when the
weight version changes. Each row then draws its own Gumbel noise (:class:`SeededSampler`, greedy
``generate`` over the noisy filtered scores), so a request's response does not depend on which
requests share its batch or on arrival order, two runs with the same seed sample the same responses,
and the ``n`` samples of a prompt differ. During a batch the
actor's FSDP2 parameters stay gathered (:func:`_fsdp_unsharded`), instead of being re-gathered for
every decoding step; the resharding settings are restored afterwards.

Diagnostics: with ``VERL_LOGGING_LEVEL=INFO`` in the Ray workers' environment the server logs each
batch (size, tokens, seconds). ``VERL_EXT_HF_ROLLOUT_MAX_BATCH`` (64),
``VERL_EXT_HF_ROLLOUT_BATCH_WAIT_S`` (0.1) and ``VERL_EXT_HF_ROLLOUT_BATCH_MAX_WAIT_S`` (2.0) tune
how requests are grouped: a batch starts once no request arrived for ``BATCH_WAIT_S``.

Limits: synchronous (colocated) training only, one actor rank per replica (rollout tp = dp = pp
= 1; verl then builds one replica per rank and balances requests over them). The generate call runs
inside the actor process through
``__ray_call__`` (the mechanism vLLM's replica uses to query its workers), so it cannot overlap
with training; that is exactly what sync mode expects.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Generator, Optional, Sequence

import torch

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))

ROLLOUT_NAME = "hf"
MAX_BATCH = int(os.getenv("VERL_EXT_HF_ROLLOUT_MAX_BATCH", "64"))
BATCH_WAIT_S = float(os.getenv("VERL_EXT_HF_ROLLOUT_BATCH_WAIT_S", "0.1"))
BATCH_MAX_WAIT_S = float(os.getenv("VERL_EXT_HF_ROLLOUT_BATCH_MAX_WAIT_S", "2.0"))


# --------------------------------------------------------------------------------------------------
# Sampling (no Ray, no verl)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SamplingParams:
    """What :func:`generate_batch` needs; :meth:`from_verl` reads verl's ``sampling_params`` dict."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    repetition_penalty: float = 1.0

    @property
    def do_sample(self) -> bool:
        return self.temperature > 0

    @classmethod
    def from_verl(cls, params: dict[str, Any]) -> "SamplingParams":
        temperature = params.get("temperature")
        top_p = params.get("top_p")
        top_k = params.get("top_k")
        rep = params.get("repetition_penalty")
        if params.get("do_sample") is False:  # agent loops may request greedy decoding explicitly
            temperature = 0.0
        return cls(
            temperature=1.0 if temperature is None else float(temperature),
            top_p=1.0 if top_p is None else float(top_p),
            top_k=-1 if top_k is None else int(top_k),
            repetition_penalty=1.0 if rep is None else float(rep),
        )


@dataclass
class Generation:
    token_ids: list[int]
    log_probs: list[float]
    stop_reason: str = "completed"  # "completed": EOS or length cap, as vLLM's server reports both
    finished_by_eos: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _module_device(module: torch.nn.Module) -> torch.device:
    for p in module.parameters():
        return p.device
    return torch.device("cpu")


def request_seed(base_seed: int, weight_version: int, prompt_ids: Sequence[int], params: SamplingParams,
                 max_new_tokens: int, occurrence: int) -> int:
    """The sampling seed of one request: a hash of everything that identifies it, nothing random.

    ``occurrence`` counts the earlier identical requests (same prompt, parameters and cap) at this
    weight version, so the ``n`` samples of a prompt differ but are reproducible.
    """
    key = repr((int(base_seed), int(weight_version), [int(t) for t in prompt_ids], float(params.temperature),
                float(params.top_p), int(params.top_k), float(params.repetition_penalty), int(max_new_tokens),
                int(occurrence)))
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") & (2**63 - 1)


def _filter_top_k_top_p(scores: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """``scores`` with the tokens outside the top-k / nucleus set to ``-inf`` (at least one kept)."""
    if 0 < top_k < scores.shape[-1]:
        kth = torch.topk(scores, top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=True, dim=-1)
        probs = sorted_scores.softmax(dim=-1)
        drop_sorted = (probs.cumsum(dim=-1) - probs) >= top_p  # the mass before the token already reaches top_p
        drop_sorted[..., 0] = False
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        scores = scores.masked_fill(drop, float("-inf"))
    return scores


class SeededSampler:
    """HF logits processor for greedy decoding that makes the argmax a per-row seeded sample.

    It applies temperature, top-k and top-p and adds Gumbel noise drawn from row ``i``'s own
    generator (seeded with ``seeds[i]`` on the first step; one draw of vocabulary size per step),
    so ``argmax`` is a sample of ``softmax(filtered logits / temperature)`` independent of the rest
    of the batch. Built-in processors (repetition penalty) run before it.
    """

    def __init__(self, seeds: Sequence[int], params: SamplingParams):
        self.seeds = [int(s) for s in seeds]
        self.params = params
        self.generators: Optional[list[torch.Generator]] = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if scores.shape[0] != len(self.seeds):
            raise ValueError(f"batch of {scores.shape[0]} rows for {len(self.seeds)} seeds")
        device = scores.device
        if self.generators is None:
            self.generators = [torch.Generator(device=device).manual_seed(s) for s in self.seeds]
        scaled = _filter_top_k_top_p(scores.double() / self.params.temperature, self.params.top_k, self.params.top_p)
        uniform = torch.stack(
            [torch.rand(scores.shape[-1], generator=g, device=device, dtype=torch.float64) for g in self.generators]
        )
        gumbel = -torch.log(-torch.log(uniform.clamp(min=1e-300)))
        return scaled + gumbel


def generate_batch(
    module: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int | Sequence[int],
    params: SamplingParams,
    eos_token_ids: Sequence[int],
    pad_token_id: int,
    seeds: Optional[Sequence[int]] = None,
) -> list[Generation]:
    """Sample one completion per prompt with ``module.generate`` (left-padded batch).

    ``max_new_tokens`` may differ per prompt; the batch runs to the largest and each row is cut to
    its own cap and after its first EOS. The module's train/eval mode is restored afterwards.

    When sampling, row ``i`` draws from its own ``torch.Generator`` seeded with ``seeds[i]``
    (:class:`SeededSampler`), so its tokens do not depend on the other rows of the batch. Without
    ``seeds`` the per-row seeds are drawn from the global torch RNG.
    """
    if not prompts:
        return []
    caps = [int(max_new_tokens)] * len(prompts) if isinstance(max_new_tokens, int) else [int(m) for m in max_new_tokens]
    if len(caps) != len(prompts) or min(caps) < 1:
        raise ValueError(f"max_new_tokens must be >= 1 per prompt, got {caps}")
    eos = {int(e) for e in eos_token_ids}
    width = max(len(p) for p in prompts)
    device = _module_device(module)
    input_ids = torch.full((len(prompts), width), int(pad_token_id), dtype=torch.long)
    attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        if len(p) == 0:
            raise ValueError("empty prompt")
        input_ids[i, width - len(p) :] = torch.as_tensor(list(p), dtype=torch.long)
        attention_mask[i, width - len(p) :] = 1

    kwargs: dict[str, Any] = dict(
        max_new_tokens=max(caps),
        min_new_tokens=0,
        do_sample=params.do_sample,
        eos_token_id=sorted(eos),
        pad_token_id=int(pad_token_id),
        output_logits=True,
        return_dict_in_generate=True,
        use_cache=True,
        num_beams=1,
    )
    # HF's own sampling would use the global RNG for the whole batch: decode "greedily" over
    # scores to which SeededSampler added per-row Gumbel noise instead (same distribution).
    # Explicit neutral values so the checkpoint's generation_config cannot add sampling warnings.
    kwargs.update(do_sample=False, temperature=1.0, top_p=1.0, top_k=0)
    if params.do_sample:
        if seeds is None:
            seeds = torch.randint(0, 2**63 - 1, (len(prompts),)).tolist()
        if len(seeds) != len(prompts):
            raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts")
        from transformers import LogitsProcessorList

        kwargs["logits_processor"] = LogitsProcessorList([SeededSampler(seeds, params)])
    if params.repetition_penalty != 1.0:
        kwargs["repetition_penalty"] = params.repetition_penalty

    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            out = module.generate(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device), **kwargs)
    finally:
        module.train(was_training)

    new_tokens = out.sequences[:, width:].cpu()
    logits = torch.stack([step.float().cpu() for step in out.logits], dim=1)  # (B, T, V), unprocessed
    scale = params.temperature if params.do_sample else 1.0
    logp = torch.log_softmax(logits / scale, dim=-1)
    steps = min(new_tokens.shape[1], logp.shape[1])
    token_logp = logp[:, :steps].gather(-1, new_tokens[:, :steps].unsqueeze(-1)).squeeze(-1)

    results = []
    for i, cap in enumerate(caps):
        ids = new_tokens[i, : min(cap, steps)].tolist()
        end, by_eos = len(ids), False
        for t, tok in enumerate(ids):
            if tok in eos:
                end, by_eos = t + 1, True
                break
        results.append(
            Generation(token_ids=ids[:end], log_probs=token_logp[i, :end].tolist(), finished_by_eos=by_eos)
        )
    return results


# --------------------------------------------------------------------------------------------------
# Worker side: the BaseRollout adapter and the function run inside the actor process
# --------------------------------------------------------------------------------------------------

from verl.workers.rollout.base import BaseRollout  # noqa: E402


def _world_size() -> int:
    return torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1


class HFServerAdapter(BaseRollout):
    """The rollout object inside each hybrid actor worker.

    One actor rank: nothing to load, release or copy (generation uses the actor's own module).
    Several ranks: each keeps a full, unsharded copy of the policy (:attr:`module_copy`) and reloads
    it on every weight sync, since a lone FSDP rank cannot run a forward pass of the sharded module.
    """

    def __init__(self, config, model_config, device_mesh, *args, **kwargs):
        super().__init__(config, model_config, device_mesh, *args, **kwargs)
        self.model_config = model_config
        self.global_steps: int = 0
        self.sleeping = False
        self.sample_counts: tuple[int, dict] = (0, {})  # (weight version, occurrences per request key)
        self.module_copy: Optional[torch.nn.Module] = None

    async def resume(self, tags: list[str]):
        self.sleeping = False

    async def release(self):
        self.sleeping = True

    async def update_weights(self, weights: Generator, wire_format: str = "named_tensors", **kwargs):
        # Every rank runs this (ONE_TO_ALL, engine_workers.py:727): the generator all-gathers each
        # tensor, so with several ranks all of them consume it in the same order.
        if _world_size() > 1:
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
        from transformers import AutoModelForCausalLM

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
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # pragma: no cover
        FSDPModule = ()
    mods = [m for m in module.modules() if isinstance(m, FSDPModule)] if FSDPModule else []
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


def _generate_on_worker(
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
    w = _find_rollout_worker(actor_process)
    start = time.perf_counter()
    copy = w.rollout.module_copy
    module = w.actor.engine.module if copy is None else copy
    version = int(w.rollout.global_steps)
    seeds = None
    if base_seed is not None and params.do_sample:
        counted_version, counts = getattr(w.rollout, "sample_counts", (None, {}))
        if counted_version != version:
            counts = {}
        seeds = []
        for prompt, cap in zip(prompts, max_new_tokens, strict=True):
            key = (tuple(prompt), params, int(cap))
            occurrence = counts.get(key, 0)
            counts[key] = occurrence + 1
            seeds.append(request_seed(base_seed, version, prompt, params, cap, occurrence))
        w.rollout.sample_counts = (version, counts)
    with _fsdp_unsharded(module) if copy is None else contextlib.nullcontext():
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


# --------------------------------------------------------------------------------------------------
# Server actor and replica (trainer side)
# --------------------------------------------------------------------------------------------------

import ray  # noqa: E402
from verl.workers.rollout.replica import RolloutReplica, TokenOutput  # noqa: E402


@dataclass
class _Request:
    prompt_ids: list[int]
    max_tokens: int
    future: asyncio.Future


class _HFServerImpl:
    """Token-in/token-out server forwarding batched requests to one actor worker."""

    def __init__(self, worker, *, response_length: int, prompt_length: int, eos_token_ids, pad_token_id: int,
                 max_model_len: Optional[int] = None, seed: Optional[int] = 42):
        self.worker = worker
        self.seed = None if seed is None else int(seed)  # base of the per-request seeds; None: global RNG
        self.response_length = int(response_length)
        self.prompt_length = int(prompt_length)
        self.max_model_len = int(max_model_len) if max_model_len else None
        self.eos_token_ids = [int(e) for e in eos_token_ids]
        self.pad_token_id = int(pad_token_id)
        self.global_steps = 0
        self._queues: dict[SamplingParams, list[_Request]] = {}
        self._runner: Optional[asyncio.Task] = None
        self.num_requests = 0
        self.num_batches = 0

    def _cap(self, prompt_len: int, sampling_params: dict[str, Any]) -> int:
        if sampling_params.get("max_tokens") is not None:
            cap = int(sampling_params["max_tokens"])
        elif sampling_params.get("max_new_tokens") is not None:
            cap = int(sampling_params["max_new_tokens"])
        else:
            cap = min(self.response_length, self.prompt_length + self.response_length - prompt_len)
        if self.max_model_len is not None:
            cap = min(cap, self.max_model_len - prompt_len)
        if cap < 1:
            raise ValueError(f"prompt of {prompt_len} tokens leaves no room to generate")
        return cap

    async def generate(self, request_id=None, *, prompt_ids, sampling_params, image_data=None, video_data=None,
                       **kwargs) -> TokenOutput:
        if image_data or video_data or kwargs.get("audio_data"):
            raise NotImplementedError("the hf rollout backend is text-only")
        prompt_ids = [int(t) for t in prompt_ids]
        params = SamplingParams.from_verl(dict(sampling_params or {}))
        fut = asyncio.get_running_loop().create_future()
        cap = self._cap(len(prompt_ids), sampling_params or {})
        self._queues.setdefault(params, []).append(_Request(prompt_ids, cap, fut))
        self.num_requests += 1
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run())
        gen, steps = await fut
        return TokenOutput(
            token_ids=gen.token_ids,
            log_probs=gen.log_probs,
            stop_reason=gen.stop_reason,
            extra_fields={"global_steps": steps},
        )

    async def _collect(self) -> None:
        """Wait until requests stop arriving (verl's agent loop submits a wave over a few ms)."""
        deadline = time.monotonic() + BATCH_MAX_WAIT_S
        seen = -1
        while time.monotonic() < deadline:
            queued = sum(map(len, self._queues.values()))
            if queued == seen or queued >= MAX_BATCH:
                return
            seen = queued
            await asyncio.sleep(BATCH_WAIT_S)

    async def _run(self):
        while any(self._queues.values()):
            await self._collect()
            params = next(p for p, q in self._queues.items() if q)
            queue = self._queues[params]
            batch, self._queues[params] = queue[:MAX_BATCH], queue[MAX_BATCH:]
            start = time.perf_counter()
            try:
                gens, steps = await self.worker.__ray_call__.remote(
                    _generate_on_worker,
                    [r.prompt_ids for r in batch],
                    [r.max_tokens for r in batch],
                    params,
                    self.eos_token_ids,
                    self.pad_token_id,
                    self.seed,
                )
                self.global_steps = steps
                self.num_batches += 1
                logger.info(
                    "hf rollout: batch of %d (%d queued) generated %d tokens in %.2f s (%.2f s in the worker, "
                    "%s threads)",
                    len(batch), sum(map(len, self._queues.values())), sum(len(g.token_ids) for g in gens),
                    time.perf_counter() - start, gens[0].extra.get("worker_seconds", float("nan")) if gens else 0.0,
                    gens[0].extra.get("torch_threads") if gens else None,
                )
                for r, g in zip(batch, gens, strict=True):
                    if not r.future.done():
                        r.future.set_result((g, steps))
            except Exception as e:  # fail this batch's requests, keep serving
                logger.exception("hf rollout batch failed")
                for r in batch:
                    if not r.future.done():
                        r.future.set_exception(e)

    # Lifecycle methods called by RolloutReplica / CheckpointEngineManager: nothing to do.
    async def wake_up(self):
        return None

    async def sleep(self):
        return None

    async def clear_kv_cache(self):
        return None

    async def release_kv_cache(self):
        return None

    async def resume_kv_cache(self):
        return None

    async def abort_all_requests(self, reject_request: bool = False):
        return None

    async def resume_generation(self):
        return None

    async def start_profile(self, **kwargs):
        return None

    async def stop_profile(self):
        return None

    async def set_global_steps(self, global_steps: int):
        self.global_steps = int(global_steps)

    async def stats(self) -> dict[str, int]:
        return {"requests": self.num_requests, "batches": self.num_batches}


HFServer = ray.remote(num_cpus=0)(_HFServerImpl)


def _as_id_list(value) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in (value if isinstance(value, (list, tuple)) else [value]) if v is not None]


def _special_ids_on_worker(actor_process) -> tuple[list[int], int]:
    """(EOS ids, pad id) from the actor's own ``HFModelConfig``: generation config, then tokenizer."""
    w = _find_rollout_worker(actor_process)
    mc = w.actor.model_config
    eos = _as_id_list(getattr(getattr(mc, "generation_config", None), "eos_token_id", None))
    tok = getattr(mc, "tokenizer", None)
    eos += _as_id_list(getattr(tok, "eos_token_id", None))
    eos += _as_id_list(getattr(getattr(w.actor.engine.module, "config", None), "eos_token_id", None))
    if not eos:
        raise ValueError(f"{mc.path}: no EOS token id in the generation config, tokenizer or model config")
    pad = getattr(tok, "pad_token_id", None)
    return sorted(set(eos)), int(pad if pad is not None else eos[0])


class HFReplica(RolloutReplica):
    """One :class:`HFServer` per actor rank (hybrid mode only)."""

    async def launch_servers(self):
        if len(self.workers) != 1:
            raise NotImplementedError(
                f"the hf rollout backend serves one actor rank per replica (rollout tp = dp = pp = 1), got "
                f"{len(self.workers)} workers (hybrid mode only)"
            )
        eos, pad = await self.workers[0].__ray_call__.remote(_special_ids_on_worker)
        name = f"hf_server_{self.replica_rank}{self.name_suffix}_{os.getpid()}"
        server = HFServer.options(name=name, max_concurrency=self.max_concurrency).remote(
            self.workers[0],
            response_length=self.config.response_length,
            prompt_length=self.config.prompt_length,
            eos_token_ids=eos,
            pad_token_id=pad,
            max_model_len=self.config.max_model_len,
            seed=getattr(self.config, "seed", 42),
        )
        self.servers = [server]
        self._server_handle = server
        self._server_address = name
