"""Sampling of the ``hf`` rollout backend with ``transformers``' ``generate``: a plain function of a causal-LM
module, no Ray and no verl (the backend: :mod:`verl_ext.cpu.hf_rollout`).

:func:`generate_batch` honours ``temperature`` (``<= 0`` means greedy), ``top_p``, ``top_k`` (``<= 0``:
off, vLLM convention), ``repetition_penalty`` and a per-request token cap, stops after the first EOS
token (kept in the output, as vLLM does), and returns the log-probability of every sampled token under
``softmax(logits / temperature)`` of the *unfiltered* logits, i.e. the quantity verl's actor recomputes
as ``old_log_probs`` (``top_p``/``top_k`` change which tokens can be drawn, not their reported
log-probs). So ``rollout.calculate_log_probs=True`` works and ``training/rollout_probs_diff_*``
measures only numerical noise.

Sampling is seeded per request, not drawn from the process's global RNG: request ``k`` (counting
from 0) among the identical requests (same prompt ids, sampling parameters and token cap) served
at one weight version samples with ``torch.Generator(seed)``, ``seed = sha256(base seed, weight
version (global_steps), prompt ids, temperature, top_p, top_k, repetition_penalty, cap, k)``
(:func:`request_seed`); the base seed is ``actor_rollout_ref.rollout.seed`` (verl's default 42;
``null`` falls back to the global RNG). The counts live in the actor process
(:func:`verl_ext.cpu.hf_worker.generate_on_worker`) and restart when the weight version changes; all
requests of a prompt go to one rank (:mod:`verl_ext.cpu.hf_router`), so with several ranks too they are numbered
0, 1, 2, ... as on one.
Each row then draws its own Gumbel noise (:class:`SeededSampler`, greedy ``generate`` over the noisy
filtered scores), so a request's response does not depend on which requests share its batch or on
arrival order, two runs with the same seed sample the same responses, and the ``n`` samples of a
prompt differ.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import torch
from transformers import LogitsProcessorList


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
