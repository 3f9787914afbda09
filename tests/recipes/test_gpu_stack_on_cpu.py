"""The GPU recipes request attention implementations the GPU install provides, and that implementation handles
verl's packed (remove-padding) batches correctly for the recipes' model families."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config

from tests.recipes.recipes import RECIPES, ROOT, compose_recipe
from verl_ext.check_gpu import (RECIPE_ATTENTION, attention_is_provided, gpu_install_packages, packed_batch,
                                requested_attentions)

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
        assert attention == RECIPE_ATTENTION, (setting, role)  # what `make check-gpu` checks by default
    # sdpa relies on transformers' packed-sequence mask (next tests); verl's Ulysses patch is flash-only
    assert cfg.actor_rollout_ref.model.use_remove_padding
    assert OmegaConf.select(cfg, "actor_rollout_ref.actor.ulysses_sequence_parallel_size") == 1


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


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_packed_sequences_get_the_same_log_probs_as_padded_ones(family):
    torch.manual_seed(0)
    config = FAMILIES[family](vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=RECIPE_ATTENTION).eval()
    assert model.config._attn_implementation == RECIPE_ATTENTION
    seqs = [torch.randint(1, 64, (n,)) for n in (5, 9, 3)]
    padded = torch.zeros(len(seqs), 9, dtype=torch.long)
    mask = torch.zeros_like(padded)
    for i, s in enumerate(seqs):
        padded[i, : len(s)], mask[i, : len(s)] = s, 1
    packed, restart = packed_batch(seqs)
    with torch.no_grad():
        ref = model(input_ids=padded, attention_mask=mask).logits
        # as verl's FSDP engine calls it with use_remove_padding (transformer_impl.py:1256-1260)
        ours = model(input_ids=packed, attention_mask=None, position_ids=restart, use_cache=False).logits[0]
        leaky = model(input_ids=packed, position_ids=torch.arange(packed.shape[1])[None], use_cache=False).logits[0]
    want = torch.cat([ref[i, : len(s)] for i, s in enumerate(seqs)])
    assert torch.allclose(ours.log_softmax(-1), want.log_softmax(-1), atol=1e-5)
    assert not torch.allclose(leaky[5:].log_softmax(-1), want[5:].log_softmax(-1), atol=1e-3)  # 2nd sees the 1st
