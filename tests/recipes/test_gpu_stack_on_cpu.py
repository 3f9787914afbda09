"""The GPU recipes request an attention implementation the GPU install provides, and that implementation
handles verl's packed (remove-padding) batches correctly."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from tests.recipes.recipes import RECIPES, ROOT, compose_recipe
from verl_ext.check_gpu import attention_is_provided, gpu_install_packages, requested_attention

GPU_RECIPES = sorted((p.parent.name, p.stem) for p in RECIPES.glob("*/*.yaml")
                     if p.stem not in ("_common", "cpu_embedded"))


def test_there_are_gpu_recipes_to_check():
    assert {g for g, _ in GPU_RECIPES} == {"bots", "coba"} and len(GPU_RECIPES) >= 10


@pytest.mark.parametrize("group, setting", GPU_RECIPES)
def test_every_gpu_recipe_requests_an_attention_the_gpu_install_provides(group, setting):
    packages = gpu_install_packages(ROOT)
    assert {"vllm", "torch"} <= packages  # the GPU install as verl's metadata describes it
    cfg = compose_recipe(group, setting)
    attention = requested_attention(cfg)
    assert attention_is_provided(attention, packages), (setting, attention, sorted(packages))
    assert cfg.actor_rollout_ref.model.use_remove_padding  # packed batches: see the next test


def test_verls_default_would_not_be_provided():
    # the reason for the recipes' choice: flash-attn is in none of the extras the GPU install uses
    assert not attention_is_provided("flash_attention_2", gpu_install_packages(ROOT))


@pytest.mark.parametrize("attention", ["sdpa"])
def test_packed_sequences_get_the_same_log_probs_as_padded_ones(attention):
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                         attn_implementation=attention)).eval()
    seqs = [torch.randint(1, 64, (5,)), torch.randint(1, 64, (9,))]
    padded = torch.zeros(2, 9, dtype=torch.long)
    mask = torch.zeros(2, 9, dtype=torch.long)
    for i, s in enumerate(seqs):
        padded[i, : len(s)], mask[i, : len(s)] = s, 1
    packed = torch.cat(seqs)[None]
    restart = torch.cat([torch.arange(len(s)) for s in seqs])[None]  # verl's remove-padding position_ids
    with torch.no_grad():
        ref = model(input_ids=padded, attention_mask=mask).logits
        ours = model(input_ids=packed, position_ids=restart, use_cache=False).logits[0]  # as verl calls it
        leaky = model(input_ids=packed, position_ids=torch.arange(packed.shape[1])[None], use_cache=False).logits[0]
    want = torch.cat([ref[0, :5], ref[1, :9]])
    assert torch.allclose(ours, want, atol=1e-5)
    assert not torch.allclose(leaky[5:], want[5:], atol=1e-3)  # without the restart the 2nd sequence sees the 1st
