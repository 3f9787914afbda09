"""The GPU recipes request attention implementations the GPU install provides, each with micro-batch token budgets
a GPU ran through the first step (verl_ext.models.attention.MEASURED_PAIRS), and those implementations handle verl's packed
(remove-padding) batches correctly for the recipes' model families."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config

from tests.recipes.recipes import RECIPES, ROOT, compose_recipe
from verl_ext.models.attention import (BACKENDS, MEASURED_PAIRS, SDPA_PER_SEQUENCE, AttentionBackend, actor_backend,
                                attention_line, config_problems, micro_batch_budgets, model_inputs,
                                register_sdpa_per_sequence, sequence_spans)
from verl_ext.apps.gpu.attention_bench import model_config, random_model
from verl_ext.apps.gpu.check_gpu import (RECIPE_ATTENTIONS, attention_is_provided, check_update, gpu_install_packages,
                                requested_attentions, update_check)

GPU_RECIPES = sorted((p.parent.name, p.stem) for p in RECIPES.glob("*/*.yaml")
                     if p.stem not in ("_common", "cpu_embedded"))


@pytest.fixture(scope="module")
def packages():
    names = gpu_install_packages(ROOT)
    assert {"vllm", "torch", "transformers"} <= names  # the GPU install as verl's metadata describes it
    return names


def test_there_are_gpu_recipes_to_check():
    assert {g for g, _ in GPU_RECIPES} == {"ads", "bots", "cbs", "coba", "progress"} and len(GPU_RECIPES) >= 17


@pytest.mark.parametrize("group, setting", GPU_RECIPES)
def test_every_gpu_recipe_requests_an_attention_the_gpu_install_provides(group, setting, packages):
    cfg = compose_recipe(group, setting)
    for role, attention in requested_attentions(cfg).items():
        assert attention_is_provided(attention, packages), (setting, role, attention, sorted(packages))
        assert attention in RECIPE_ATTENTIONS, (setting, role)  # what `make check-gpu` checks by default
    # packed rows rely on transformers' packed-sequence mask (next tests); verl's Ulysses patch is flash-only
    assert cfg.actor_rollout_ref.model.use_remove_padding
    backend = actor_backend(cfg)
    sp = OmegaConf.select(cfg, "actor_rollout_ref.actor.ulysses_sequence_parallel_size")
    assert sp == 1 and config_problems(backend, ulysses_sequence_parallel_size=sp) == []


@pytest.mark.parametrize("group, setting", GPU_RECIPES)
def test_every_gpu_recipe_uses_measured_attention_pairs_that_hold_its_longest_sequence(group, setting):
    """Each pass that runs the actor's model (update, old log-probs, and the reference's, which a KL override
    would add) takes a micro-batch budget that, with the recipe's backend, a GPU ran through the first step, and that
    holds the longest sequence (verl asserts it: verl/utils/seqlen_balancing.py:384)."""
    cfg = compose_recipe(group, setting)
    backend, budgets = actor_backend(cfg), micro_batch_budgets(cfg)
    assert cfg.actor_rollout_ref.ref.log_prob_use_dynamic_bsz
    budgets["reference"] = cfg.actor_rollout_ref.ref.log_prob_max_token_len_per_gpu
    longest = cfg.data.max_prompt_length + cfg.data.max_response_length
    for role, budget in budgets.items():
        assert (backend.name, budget) in MEASURED_PAIRS, (setting, role, backend.name, budget)
        assert budget >= longest, (setting, role, budget, longest)
    assert "; first step measured on NVIDIA H200 2026-11-26" in attention_line(cfg)



def test_ref_and_critic_are_checked_when_used():
    bots = next(s for g, s in GPU_RECIPES if g == "bots")
    cfg = compose_recipe("bots", bots, "algorithm.use_kl_in_reward=true", "critic.enable=true",
                         "+critic.model.override_config.attn_implementation=flash_attention_2")
    assert requested_attentions(cfg) == {"actor": "sdpa", "ref": "sdpa", "critic": "flash_attention_2"}


def test_verls_default_would_not_be_provided(packages):
    # the reason for the recipes' choice: flash-attn is in none of the extras the GPU install uses
    assert not attention_is_provided("flash_attention_2", packages)
    assert not attention_is_provided("flash_attention_3", packages)


FAMILIES = {  # the recipes' model families (Qwen2.5, Qwen3) and the embedded model's (Llama)
    "llama": LlamaConfig, "qwen2": Qwen2Config, "qwen3": Qwen3Config,
}


COMPILED = (pytest.mark.e2e, pytest.mark.beside)  # flex attention compiles: `make test` runs it beside the trainer runs


@pytest.mark.parametrize("attention", [pytest.param(a, marks=COMPILED if a == "flex_attention" else ())
                                       for a in RECIPE_ATTENTIONS])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_packed_sequences_get_the_same_log_probs_as_padded_ones(family, attention):
    torch.manual_seed(0)
    # flex attention: one head_dim for the three families (Qwen3's default is 128, not hidden / heads), so its kernel
    # compiles once for them (the three 94 -> 64 s with a cold inductor cache); sdpa keeps each family's default
    shape = {"head_dim": 8} if attention == "flex_attention" else {}
    config = FAMILIES[family](vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, **shape)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attention).eval()
    assert model.config._attn_implementation == attention
    seqs = [torch.randint(1, 64, (n,)) for n in (5, 9, 3)]
    with torch.no_grad():
        ref = model(**model_inputs(seqs, packed=False)).logits
        # as verl's FSDP engine calls it with use_remove_padding (transformer_impl.py:1256-1260)
        ours = model(**model_inputs(seqs, packed=True)).logits[0]
        leaky = model(**model_inputs(seqs, packed=True, restart_positions=False)).logits[0]
    want = torch.cat([ref[i, : len(s)] for i, s in enumerate(seqs)])
    assert torch.allclose(ours.log_softmax(-1), want.log_softmax(-1), atol=1e-5)
    assert not torch.allclose(leaky[5:].log_softmax(-1), want[5:].log_softmax(-1), atol=1e-3)  # 2nd sees the 1st


CPU_BACKENDS = [name for name, b in BACKENDS.items() if b.requires is None]  # the others need CUDA kernels


def test_every_backend_without_a_cuda_kernel_is_checked_here():
    assert CPU_BACKENDS == ["sdpa", "flex_attention", "sdpa_padded"]


@pytest.mark.parametrize("name", CPU_BACKENDS)
def test_each_backend_gives_the_padded_batchs_log_probs_and_gradients(name):
    """A tiny random Qwen2 (the recipes' family), fp32: the backend in its layout (packed rows, or padded) against
    eager attention on the padded batch, per-token log-probs and every parameter's gradient, then an AdamW step
    (verl_ext.apps.gpu.check_gpu.update_check). flex_attention runs torch's reference path of the flex operator here
    (its compiled kernel has no backward on CPU): this proves transformers' document mask built from the
    restarting position_ids and the operator's semantics, not the compiled CUDA kernel (check_gpu --no-vllm)."""
    config = model_config("tiny")
    result = update_check(lambda: random_model(config, "sdpa", "cpu", torch.float32), BACKENDS[name], "cpu")
    assert result["logp_gap"] < 5e-6 and result["grad_gap"] < 5e-6, result
    assert result["leak_logp_gap"] > 0.1 and result["leak_grad_gap"] > 0.1  # sequences seeing each other differ
    assert "gap to eager padded" in check_update(result, "cpu")


def test_the_cpu_modes_per_sequence_sdpa_gives_the_padded_batchs_log_probs_and_gradients():
    """The CPU mode's sdpa on packed rows (verl_ext.cpu.shims, registered here under its own name): torch's causal
    SDPA per sequence, against eager attention on the padded batch (log-probs and every gradient), and the leak
    control as above."""
    register_sdpa_per_sequence()
    config = model_config("tiny")
    backend = AttentionBackend(SDPA_PER_SEQUENCE, SDPA_PER_SEQUENCE, packed=True)
    result = update_check(lambda: random_model(config, "sdpa", "cpu", torch.float32), backend, "cpu")
    assert result["logp_gap"] < 5e-6 and result["grad_gap"] < 5e-6, result
    assert result["leak_logp_gap"] > 0.1 and result["leak_grad_gap"] > 0.1


def test_the_cpu_modes_attention_is_sdpa_where_rows_carry_a_mask_or_a_cache():
    """Padded rows (a 2-D mask) and generation with a KV cache take transformers' SDPA path unchanged: the same
    logits and the same greedy tokens as sdpa; a packed row is split at its restarting positions, never across."""
    register_sdpa_per_sequence()
    config = model_config("tiny")
    ours, sdpa = (random_model(config, name, "cpu", torch.float32).eval() for name in (SDPA_PER_SEQUENCE, "sdpa"))
    gen = torch.Generator().manual_seed(1)
    seqs = [torch.randint(3, config.vocab_size, (n,), generator=gen) for n in (5, 9, 3)]
    with torch.no_grad():
        padded = model_inputs(seqs, packed=False)
        assert torch.equal(ours(**padded).logits, sdpa(**padded).logits)
        prompt = torch.stack([seqs[1][:4], seqs[1][4:8]])
        kwargs = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
        assert torch.equal(ours.generate(prompt, use_cache=True, **kwargs), sdpa.generate(prompt, use_cache=True,
                                                                                           **kwargs))
        packed = ours(**model_inputs(seqs, packed=True)).logits[0]
        alone = torch.cat([ours(input_ids=s[None], use_cache=False).logits[0] for s in seqs])
        assert torch.allclose(packed, alone, atol=1e-5)
    assert sequence_spans(torch.tensor([[0, 1, 2, 0, 1, 0], [0, 1, 2, 3, 4, 5]])) == [
        [(0, 3), (3, 5), (5, 6)], [(0, 6)]]
