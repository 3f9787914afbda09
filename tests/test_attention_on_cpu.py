"""The attention backends' verl overrides, requirements and batch layouts (verl_ext.models.attention). Their bench:
tests/apps/bench/test_attention_on_cpu.py; backends' log-probs and gradients: tests/recipes/test_gpu_stack_on_cpu.py;
the bench and the update check on a simulated bare GPU machine: tests/apps/gpu/test_check_gpu_on_cpu.py and
tests/apps/gpu/test_gpu_first_hour_on_cpu.py."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from verl_ext.models import attention
from verl_ext.models.attention import BACKENDS, backend_of, config_problems, get_backend, model_inputs, predicting_rows


def test_overrides_select_the_backend_in_verl():
    assert BACKENDS["sdpa_padded"].overrides() == [
        "actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "actor_rollout_ref.model.use_remove_padding=false"]
    for backend in BACKENDS.values():  # each pair of overrides names exactly one backend
        implementation, padding = (o.split("=", 1)[1] for o in backend.overrides())
        assert backend_of(implementation, padding == "true") == backend
    assert backend_of("flex_attention", False).name == "flex_attention_padded"
    assert backend_of("flash_attention_2", False).requires == ("flash-attn", "flash_attn")
    assert backend_of("eager", True).name == "eager"
    assert config_problems(backend_of("eager", True), ulysses_sequence_parallel_size=2)  # not flash either
    with pytest.raises(ValueError, match="unknown attn_implementation 'flash_attention_9'"):
        backend_of("flash_attention_9", True)
    with pytest.raises(ValueError, match="unknown attention backend 'sdpa_packed' .*sdpa_padded"):
        get_backend("sdpa_packed")


def test_sequence_parallel_and_dropout_are_refused_where_they_break_the_backend():
    for name in ("sdpa", "sdpa_padded", "flex_attention"):
        assert "monkey_patch.py:551" in config_problems(BACKENDS[name], ulysses_sequence_parallel_size=2)[0]
    for name in ("flash_attention_2", "kernels-community/flash-attn2"):  # verl's Ulysses patch covers them
        assert config_problems(BACKENDS[name], ulysses_sequence_parallel_size=4) == []
    assert "no dropout" in config_problems(BACKENDS["flex_attention"], attention_dropout=0.1)[0]
    assert config_problems(BACKENDS["sdpa"], attention_dropout=0.1) == []


def test_a_missing_or_broken_package_makes_a_backend_unavailable(monkeypatch):
    assert BACKENDS["sdpa"].unavailable() is None and BACKENDS["flex_attention"].unavailable() is None
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "flash_attn" else find_spec(name))
    assert BACKENDS["flash_attention_2"].unavailable() == "needs the flash-attn package (module flash_attn not found)"
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())  # installed, but its import fails

    def broken(name):
        raise ImportError("undefined symbol: _ZN3c10")

    monkeypatch.setattr(attention.importlib, "import_module", broken)
    assert "kernels does not import: undefined symbol" in BACKENDS["kernels-community/flash-attn2"].unavailable()
    monkeypatch.setattr(attention.importlib, "import_module", lambda name: None)  # imports: the hub decides
    from huggingface_hub import constants

    offline = "downloads its kernel from the Hugging Face hub, and HF_HUB_OFFLINE is set"
    for hub_offline, expected in ((True, offline), (False, None)):
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", hub_offline)
        assert BACKENDS["kernels-community/vllm-flash-attn3"].unavailable() == expected
        assert BACKENDS["flash_attention_2"].unavailable() is None  # a local package needs no hub


def test_layouts_put_each_token_in_the_same_place():
    seqs = [torch.tensor([5, 6, 7]), torch.tensor([8, 9]), torch.tensor([4, 3, 2, 1])]
    packed, padded = model_inputs(seqs, packed=True), model_inputs(seqs, packed=False)
    assert packed["position_ids"].tolist() == [[0, 1, 2, 0, 1, 0, 1, 2, 3]] and packed["use_cache"] is False
    assert "attention_mask" not in packed  # verl's remove-padding call (transformer_impl.py:1256-1260)
    assert padded["attention_mask"].tolist() == [[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]]
    assert padded["position_ids"].tolist() == [[0, 1, 2, 0], [0, 1, 0, 0], [0, 1, 2, 3]]
    assert model_inputs(seqs, True, restart_positions=False)["position_ids"].tolist() == [list(range(9))]
    lengths = [3, 2, 4]  # the rows that predict a next token, in order, from either layout
    assert predicting_rows(packed["input_ids"], lengths, True).tolist() == [5, 6, 8, 4, 3, 2]
    assert predicting_rows(padded["input_ids"], lengths, False).tolist() == [5, 6, 8, 4, 3, 2]
    assert attention.next_tokens(seqs).tolist() == [6, 7, 9, 3, 2, 1]
    for bad in ([], [torch.tensor([])], [torch.ones(2, 2, dtype=torch.long)]):
        with pytest.raises(ValueError, match="non-empty 1-D token tensors"):
            model_inputs(bad, packed=True)


def test_start_up_line_names_backend_budgets_and_their_measurement():
    """verl_ext.main prints attention_line before Ray starts (tests/trainer/test_startup_checks_on_cpu.py)."""
    from tests.recipes.recipes import compose_recipe

    measured = "; first step measured on NVIDIA H200 2026-11-26 (torch 2.11.0+cu130, transformers 5.17.0)"
    assert attention.attention_line(compose_recipe("coba", "qwen3-1.7b-base")) == (
        "attention flex_attention (packed), micro-batch tokens/GPU update 8192, log-probs 8192" + measured)
    assert attention.attention_line(compose_recipe("ads", "qwen3-4b-base")) == (  # a KL in the reward: a reference
        "attention sdpa (packed), micro-batch tokens/GPU update 16384, log-probs 16384, reference 16384" + measured)
    unmeasured = compose_recipe("coba", "qwen3-1.7b-base", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=32768",
                                "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=8192")
    assert attention.attention_line(unmeasured) == (
        "attention flex_attention (packed), micro-batch tokens/GPU update 32768, log-probs 8192; flex_attention at "
        "32768: not measured on a GPU, its first step may stall (measured: flex_attention 8192, sdpa 16384; "
        "verl_ext/models/attention.py MEASURED_PAIRS)")
    fixed = compose_recipe("cbs", "qwen3-8b-base", "actor_rollout_ref.actor.use_dynamic_bsz=false",
                           "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=false",
                           "actor_rollout_ref.model.use_remove_padding=false")
    assert attention.micro_batch_budgets(fixed) == {"update": None, "log-probs": None}
    assert attention.attention_line(fixed).startswith(
        "attention flex_attention_padded (padded), micro-batch tokens/GPU update fixed sequence counts, log-probs "
        "fixed sequence counts; flex_attention_padded at fixed sequence counts: not measured on a GPU")
    cpu = compose_recipe("bots", "cpu_embedded", "actor_rollout_ref.model.path=/m", "trainer.device=cpu",
                         "++actor_rollout_ref.model.override_config.attn_implementation=sdpa")  # the CPU preset's
    assert attention.attention_line(cpu).endswith("; a CPU run: the GPU measurements do not apply")
