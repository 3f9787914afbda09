"""Attention backends a GPU user can choose for the actor's packed micro-batches, and the batches they take.

verl trains on packed rows when ``actor_rollout_ref.model.use_remove_padding=true``: one row, no attention mask,
``position_ids`` restarting at 0 per sequence (``verl/workers/engine/fsdp/transformer_impl.py:1256-1260``);
transformers finds the sequence boundaries from those ``position_ids`` (``transformers/masking_utils.py:883-888``,
5.10) and builds each implementation's mask from them (``:992-994``). With ``use_remove_padding=false`` verl pads
each micro-batch to its longest sequence and passes an attention mask (``transformer_impl.py:1275-1309``).

Backends (:data:`BACKENDS`), each a pair of verl overrides (:meth:`AttentionBackend.overrides`):

* ``sdpa`` - packed; transformers materialises a dense ``T x T`` boolean mask per micro-batch (1 GiB at 32k
  tokens) and torch cannot use its flash kernel with an arbitrary mask: attention over the whole micro-batch (the
  CPU mode replaces it with :func:`sdpa_per_sequence_forward`, the same attention per sequence:
  :mod:`verl_ext.cpu.shims`);
* ``sdpa_padded`` - unpacked (``use_remove_padding=false``): attention per sequence, at the cost of the padding,
  and a ``B x 1 x L x L`` mask as soon as one row is padded (torch's causal flash kernel only when no row is:
  ``masking_utils.py:292-301``);
* ``flex_attention`` - packed; torch's compiled flex kernel with a block-sparse document mask (128 x 128 blocks,
  ``masking_utils.py:728-735``), no extra package; compiles at its first call (and once more when the packed
  length first changes); needs attention dropout 0 (``transformers/integrations/flex_attention.py:273``);
  torch has no backward for it on CPU (``torch/nn/attention/flex_attention.py``, ``_validate_device``);
* ``flash_attention_2`` / ``flash_attention_3`` - packed, varlen kernels; only when ``flash_attn`` /
  ``flash_attn_interface`` imports (flash-attn is source-only on PyPI);
* ``kernels-community/flash-attn2`` / ``kernels-community/vllm-flash-attn3`` - packed; the ``kernels`` package
  downloads the kernel from the Hugging Face hub when the model loads, so only where the machine reaches the hub.

What every backend needs in verl: Ulysses sequence parallelism at 1 unless the backend is flash attention
(verl's Ulysses patch replaces only the flash-attention function, ``verl/models/transformers/monkey_patch.py:551``:
with sdpa or flex, sp > 1 would be silently wrong), see :func:`config_problems`. Code of ours that calls a model
on packed rows passes ``use_cache=False``: with a cache, transformers skips the boundary detection and the
sequences attend to each other (:func:`model_inputs`).

The (backend, micro-batch token budget) pairs a GPU ran through the actor's first step, the only ones the recipes use:
:data:`MEASURED_PAIRS`; a composed trainer config's backend and budgets, and the line ``python -m verl_ext.main``
prints about them before Ray starts: :func:`actor_backend`, :func:`micro_batch_budgets`, :func:`attention_line`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class AttentionBackend:
    name: str
    attn_implementation: str  # transformers' attn_implementation, verl's override_config.attn_implementation
    packed: bool  # verl's use_remove_padding
    requires: tuple[str, str] | None = None  # (distribution, module) beyond torch + transformers
    from_hub: bool = False  # the kernel is downloaded from the Hugging Face hub when the model loads
    cpu_backward: bool = True  # torch's flex kernel has none on CPU

    def overrides(self) -> list[str]:
        """verl overrides that select this backend for the actor (the reference model copies the actor's model
        config, ``verl/workers/engine_workers.py:555``)."""
        return [f"actor_rollout_ref.model.override_config.attn_implementation={self.attn_implementation}",
                f"actor_rollout_ref.model.use_remove_padding={str(self.packed).lower()}"]

    def unavailable(self) -> str | None:
        """Why this backend cannot run in this environment, or None (a hub kernel may still fail to download)."""
        if self.requires is None:
            return None
        distribution, module = self.requires
        if importlib.util.find_spec(module) is None:
            return f"needs the {distribution} package (module {module} not found)"
        try:
            importlib.import_module(module)
        except Exception as e:  # a CUDA extension built for another torch fails here, not in find_spec
            return f"needs the {distribution} package ({module} does not import: {e})"
        if self.from_hub:
            from huggingface_hub import constants

            if constants.HF_HUB_OFFLINE:
                return "downloads its kernel from the Hugging Face hub, and HF_HUB_OFFLINE is set"
        return None


BACKENDS: dict[str, AttentionBackend] = {b.name: b for b in (
    AttentionBackend("sdpa", "sdpa", True),  # in this order in checks and benches (a time budget cuts the last)
    AttentionBackend("flex_attention", "flex_attention", True, cpu_backward=False),
    AttentionBackend("sdpa_padded", "sdpa", False),
    AttentionBackend("flash_attention_2", "flash_attention_2", True, requires=("flash-attn", "flash_attn")),
    AttentionBackend("flash_attention_3", "flash_attention_3", True,
                     requires=("flash-attn-3", "flash_attn_interface")),
    AttentionBackend("kernels-community/flash-attn2", "kernels-community/flash-attn2", True,
                     requires=("kernels", "kernels"), from_hub=True),
    AttentionBackend("kernels-community/vllm-flash-attn3", "kernels-community/vllm-flash-attn3", True,
                     requires=("kernels", "kernels"), from_hub=True),
)}
# what verl's Ulysses patch covers; hub flash kernels run through the same transformers function it replaces
# (transformers/integrations/hub_kernels.py:352-355; read, not run)
FLASH_ATTENTION = {"flash_attention_2", "flash_attention_3"}


def get_backend(name: str) -> AttentionBackend:
    if name not in BACKENDS:
        raise ValueError(f"unknown attention backend {name!r} (known: {', '.join(BACKENDS)})")
    return BACKENDS[name]


def backend_of(attn_implementation: str, use_remove_padding: bool) -> AttentionBackend:
    """The backend a verl config selects (inverse of :meth:`AttentionBackend.overrides`)."""
    packed = bool(use_remove_padding)
    for backend in BACKENDS.values():
        if backend.attn_implementation == attn_implementation and backend.packed == packed:
            return backend
    known = {b.attn_implementation: b for b in BACKENDS.values()}
    if attn_implementation not in known and attn_implementation != "eager":
        raise ValueError(f"unknown attn_implementation {attn_implementation!r} (known: {sorted(known)}, eager)")
    like = known.get(attn_implementation, BACKENDS["sdpa"])  # valid, not offered: e.g. flex unpacked, eager
    return AttentionBackend(attn_implementation + ("" if packed else "_padded"), attn_implementation, packed,
                            like.requires, like.from_hub, like.cpu_backward)


def config_problems(backend: AttentionBackend, *, ulysses_sequence_parallel_size: int = 1,
                    attention_dropout: float = 0.0) -> list[str]:
    """What in a config would make this backend wrong or fail (empty: nothing)."""
    problems = []
    is_flash = backend.attn_implementation in FLASH_ATTENTION or backend.from_hub
    if int(ulysses_sequence_parallel_size) > 1 and not is_flash:
        problems.append(f"ulysses_sequence_parallel_size={ulysses_sequence_parallel_size} with attention "
                        f"{backend.attn_implementation}: verl's Ulysses patch replaces only flash attention "
                        "(verl/models/transformers/monkey_patch.py:551), so each rank would attend within its own "
                        "slice of the sequence; keep it at 1")
    if backend.attn_implementation == "flex_attention" and float(attention_dropout) > 0:
        problems.append(f"attention_dropout={attention_dropout} with flex_attention, which has no dropout "
                        "(transformers/integrations/flex_attention.py:273); set it to 0")
    return problems


# ------------------------------------------------------------------ the batches each layout takes
def model_inputs(seqs: Sequence[torch.Tensor], packed: bool, pad_id: int = 0,
                 restart_positions: bool = True) -> dict[str, torch.Tensor | bool]:
    """Keyword arguments of a model call on ``seqs`` as verl builds them: packed, one row with ``position_ids``
    restarting at 0 per sequence and no attention mask; or padded on the right to the longest sequence, with an
    attention mask. Both with ``use_cache=False`` (with a cache, packed sequences would see each other).
    ``restart_positions=False`` (packed only) numbers the row 0..T-1: a control in which the sequences see each
    other."""
    if not seqs or any(s.ndim != 1 or len(s) == 0 for s in seqs):
        raise ValueError("model_inputs: a non-empty list of non-empty 1-D token tensors")
    device = seqs[0].device
    if packed:
        ids = torch.cat(list(seqs))[None]
        positions = (torch.cat([torch.arange(len(s), device=device) for s in seqs]) if restart_positions
                     else torch.arange(ids.shape[1], device=device))
        return {"input_ids": ids, "position_ids": positions[None], "use_cache": False}
    if not restart_positions:
        raise ValueError("model_inputs: restart_positions=False is a packed-layout control")
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, : len(s)], mask[i, : len(s)] = s, 1
    positions = torch.arange(width, device=device).expand(len(seqs), -1) * mask
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "use_cache": False}


def predicting_rows(output: torch.Tensor, lengths: Sequence[int], packed: bool) -> torch.Tensor:
    """The rows of a model output (hidden states or logits) at the tokens that predict a next token of their own
    sequence (all but each sequence's last), in sequence order: ``(sum(lengths) - len(lengths), ...)``."""
    if packed:
        starts = torch.tensor([0, *lengths[:-1]]).cumsum(0).tolist()
        return torch.cat([output[0, start: start + n - 1] for start, n in zip(starts, lengths)])
    return torch.cat([output[i, : n - 1] for i, n in enumerate(lengths)])


def next_tokens(seqs: Sequence[torch.Tensor]) -> torch.Tensor:
    """The tokens :func:`predicting_rows` predict."""
    return torch.cat([s[1:] for s in seqs])


def token_log_probs(model: torch.nn.Module, seqs: Sequence[torch.Tensor], packed: bool,
                    restart_positions: bool = True, temperature: float = 1.0) -> torch.Tensor:
    """Per-token log-probabilities of ``seqs`` under ``model`` (with its graph), in either layout, of the logits
    divided by ``temperature`` (as verl's actor computes them)."""
    logits = model(**model_inputs(seqs, packed, restart_positions=restart_positions)).logits
    rows = predicting_rows(logits, [len(s) for s in seqs], packed).float() / temperature
    return rows.log_softmax(-1).gather(-1, next_tokens(seqs)[:, None])[:, 0]


# ------------------------------------------------------------------ flex attention's reference path (CPU)
@contextlib.contextmanager
def flex_reference() -> Iterator[None]:
    """Within this context, transformers' ``flex_attention`` runs torch's eager reference of the flex-attention
    operator (dense scores, the same ``score_mod`` and block mask, torch's autograd formula for the backward)
    instead of the compiled kernel, which has no backward on CPU, and builds the block mask from transformers'
    ``mask_mod`` without compiling it. It checks transformers' document mask and the operator's semantics on CPU;
    it says nothing about the compiled kernels (CUDA: ``verl_ext.apps.gpu.check_gpu``)."""
    from torch._higher_order_ops.flex_attention import flex_attention as flex_attention_op
    from torch.nn.attention.flex_attention import _apply_kernel_options, create_block_mask
    from transformers import masking_utils
    from transformers.integrations import flex_attention as hf_flex

    def reference(query, key, value, score_mod=None, block_mask=None, enable_gqa=False, scale=None,
                  kernel_options=None, training=False, **lse_request):
        if any(lse_request.values()):
            raise NotImplementedError("flex_reference: the log-sum-exp is not requested on CPU")
        options = _apply_kernel_options(query, key, value, False, kernel_options)
        scale = query.shape[-1] ** -0.5 if scale is None else scale
        return flex_attention_op(query, key, value, score_mod, block_mask.as_tuple(), scale, options)[0]

    def eager_block_mask(*args, **kwargs):  # the same mask_mod, evaluated without compiling it (seconds on CPU)
        return create_block_mask(*args, **(kwargs | {"_compile": False}))

    compiled = hf_flex.compile_friendly_flex_attention, masking_utils.create_block_mask
    hf_flex.compile_friendly_flex_attention, masking_utils.create_block_mask = reference, eager_block_mask
    try:
        yield
    finally:
        hf_flex.compile_friendly_flex_attention, masking_utils.create_block_mask = compiled


# ------------------------------------------------------------------ per-sequence SDPA on packed rows (CPU)
SDPA_PER_SEQUENCE = "sdpa_per_sequence"


def sequence_spans(position_ids: torch.Tensor) -> list[list[tuple[int, int]]]:
    """Per row of ``position_ids`` ``(batch, T)``, the ``(start, end)`` of each packed sequence: one starts wherever
    a position does not follow the one before by 1 (transformers' ``find_packed_sequence_indices``)."""
    starts = torch.diff(position_ids, prepend=position_ids[:, :1] - 1, dim=-1) != 1
    length = position_ids.shape[1]
    spans = []
    for row in starts:
        cuts = [0, *row.nonzero().flatten().tolist(), length]
        spans.append(list(zip(cuts[:-1], cuts[1:])))
    return spans


def sdpa_per_sequence_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                              attention_mask: torch.Tensor | None, dropout: float = 0.0,
                              scaling: float | None = None, is_causal: bool | None = None, **kwargs):
    """transformers' SDPA attention, run on each sequence of a packed row with torch's causal kernel where
    :func:`sdpa_per_sequence_mask` left the mask out (no padding, no cache: training and scoring); transformers' SDPA
    unchanged otherwise (padded rows, generation, sliding windows). Equal to SDPA under the dense ``T x T`` mask,
    with the attention work of the sequences instead of the row's."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    position_ids = kwargs.get("position_ids")
    length = query.shape[2]
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    if (attention_mask is not None or not causal or position_ids is None or position_ids.dim() != 2 or length == 1
            or key.shape[2] != length):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs)
    spans = sequence_spans(position_ids.expand(query.shape[0], -1))
    rows = [torch.cat([sdpa_attention_forward(module, query[b:b + 1, :, s:e], key[b:b + 1, :, s:e],
                                              value[b:b + 1, :, s:e], None, dropout, scaling, is_causal, **kwargs)[0]
                       for s, e in row_spans], dim=1) for b, row_spans in enumerate(spans)]
    return torch.cat(rows), None


def sdpa_per_sequence_mask(batch_size: int, q_length: int, kv_length: int, *args, attention_mask=None,
                           local_size: int | None = None, use_vmap: bool = False, **kwargs):
    """No mask where :func:`sdpa_per_sequence_forward` splits the rows itself: a causal mask (``create_causal_mask``
    passes ``allow_is_causal_skip``) with no padding, no cache, no sliding window and no extra mask function (the
    ``position_ids`` mark the sequences); transformers' SDPA mask otherwise."""
    from transformers.masking_utils import sdpa_mask

    if (attention_mask is None and local_size is None and not use_vmap and "allow_is_causal_skip" in kwargs
            and q_length == kv_length):
        return None
    return sdpa_mask(batch_size, q_length, kv_length, *args, attention_mask=attention_mask, local_size=local_size,
                     use_vmap=use_vmap, **kwargs)


def register_sdpa_per_sequence(name: str = SDPA_PER_SEQUENCE) -> None:
    """Make transformers' ``attn_implementation=name`` run :func:`sdpa_per_sequence_forward` in this process; the CPU
    mode registers it as ``sdpa`` (:mod:`verl_ext.cpu.shims`), so configs and saved checkpoints keep saying ``sdpa``."""
    from transformers.masking_utils import AttentionMaskInterface
    from transformers.modeling_utils import AttentionInterface

    AttentionInterface.register(name, sdpa_per_sequence_forward)
    AttentionMaskInterface.register(name, sdpa_per_sequence_mask)


# ------------------------------------------------------------------ (backend, micro-batch budget) pairs a GPU ran
@dataclass(frozen=True)
class Measurement:
    """A GPU run of the actor's step pattern (``python -m verl_ext.apps.gpu.attention_bench --steps``: per step two eval
    forwards and two train forward + backward micro-batches of new sizes in ``[3T/4, T]`` tokens, Qwen2.5-1.5B's
    shape with random weights, bf16, gradient checkpointing) that finished its first step."""
    card: str
    date: str
    stack: str
    first_step_s: float | None  # None: the step finished, its time was not recorded
    later_step_s: tuple[float, float]  # the fastest and slowest later step
    command: str


# [decision] the pairs the recipes may use: a pair not here (flex_attention at 16384 tokens: no step line within
# 250 s on the same H200) may stall in its first step. Source: scripts/README.md "Attention backends".
MEASURED_PAIRS: dict[tuple[str, int], Measurement] = {
    ("flex_attention", 8192): Measurement(
        "NVIDIA H200", "2026-11-26", "torch 2.11.0+cu130, transformers 5.17.0", 66.6, (0.67, 0.85),
        "python -m verl_ext.apps.gpu.attention_bench --steps 12 --tokens 8192 --backends flex_attention"),
    ("sdpa", 16384): Measurement(
        "NVIDIA H200", "2026-11-26", "torch 2.11.0+cu130, transformers 5.17.0", None, (3.0, 3.1),
        "python -m verl_ext.apps.gpu.attention_bench --steps N --tokens 16384 --backends sdpa (3.0-3.1 s a step after "
        "two warm-up steps)"),
}


def actor_backend(config) -> AttentionBackend:
    """The backend a composed trainer config gives the actor's model (the reference model copies it)."""
    model = config.actor_rollout_ref.model
    attention = str((model.get("override_config") or {}).get("attn_implementation",
                                                               "flash_attention_2"))  # verl/workers/config/model.py:185
    return backend_of(attention, bool(model.get("use_remove_padding", True)))


def micro_batch_budgets(config) -> dict[str, int | None]:
    """Tokens per GPU in one micro-batch of each pass that runs the actor's model (``use_dynamic_bsz``), by pass:
    the update, the old log-probs, and the reference's log-probs when verl builds a reference
    (``verl/trainer/ppo/utils.py`` ``need_reference_policy``). None: a pass with micro-batches of a fixed number
    of sequences, whose tokens have no bound."""
    section = config.actor_rollout_ref
    budgets = {"update": section.actor.ppo_max_token_len_per_gpu if section.actor.use_dynamic_bsz else None,
               "log-probs": (section.rollout.log_prob_max_token_len_per_gpu
                             if section.rollout.log_prob_use_dynamic_bsz else None)}
    if config.algorithm.get("use_kl_in_reward", False) or section.actor.use_kl_loss:
        budgets["reference"] = (section.ref.log_prob_max_token_len_per_gpu
                                if section.ref.log_prob_use_dynamic_bsz else None)
    return {role: None if budget is None else int(budget) for role, budget in budgets.items()}


def attention_line(config) -> str:
    """One line for a run's start: the actor's attention backend, its micro-batch budgets and whether a GPU
    measured each (backend, budget) pair (:data:`MEASURED_PAIRS`)."""
    backend = actor_backend(config)
    budgets = micro_batch_budgets(config)
    named = {b: "fixed sequence counts" if b is None else str(b) for b in budgets.values()}
    head = (f"attention {backend.name} ({'packed' if backend.packed else 'padded'}), micro-batch tokens/GPU "
            + ", ".join(f"{role} {named[b]}" for role, b in budgets.items()))
    if str(config.trainer.get("device", "cuda")) == "cpu":
        return f"{head}; a CPU run: the GPU measurements do not apply"
    found = {b: MEASURED_PAIRS.get((backend.name, b)) for b in named}
    if all(found.values()):
        return head + "; first step measured on " + "; ".join(
            dict.fromkeys(f"{m.card} {m.date} ({m.stack})" for m in found.values()))
    missing = ", ".join(named[b] for b, m in found.items() if m is None)
    known = ", ".join(f"{name} {b}" for name, b in MEASURED_PAIRS)
    return (f"{head}; {backend.name} at {missing}: not measured on a GPU, its first step may stall (measured: "
            f"{known}; verl_ext/models/attention.py MEASURED_PAIRS)")
