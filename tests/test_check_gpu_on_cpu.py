"""``python -m verl_ext.check_gpu`` on a machine without a GPU, and its pieces that run on a CPU."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from verl_ext import check_gpu
from verl_ext.cpu import project_root


def test_fails_fast_and_clearly_without_a_gpu():
    proc = subprocess.run([sys.executable, "-m", "verl_ext.check_gpu"], capture_output=True, text=True, timeout=120,
                          cwd=project_root())
    assert proc.returncode == 1
    assert "[ok] python" in proc.stdout and "[FAILED] no CUDA device" in proc.stderr


def test_gpu_install_packages_follow_verls_extras():
    packages = check_gpu.gpu_install_packages(project_root())
    assert {"verl", "vllm", "torch", "transformers", "wandb", "math-verify"} <= packages
    assert "flash-attn" not in packages  # only verl's fsdp / megatron extras name it


@pytest.mark.parametrize("cuda, driver", [("13.0", 580), ("12.8", 525)])
def test_minimum_driver_per_cuda_generation(cuda, driver):
    assert check_gpu.min_driver(cuda) == driver
    with pytest.raises(check_gpu.CheckFailed):
        check_gpu.min_driver("9.2")


def test_unknown_attention_is_an_error():
    with pytest.raises(ValueError, match="unknown attention"):
        check_gpu.attention_is_provided("flash_attention_9", set())


def test_tiny_update_changes_parameters_on_cpu(tmp_path):
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                 num_attention_heads=4, num_key_value_heads=2)).save_pretrained(tmp_path)
    loss, change = check_gpu.tiny_update(str(tmp_path), "sdpa", device="cpu")
    assert loss == loss and 0 < loss < 100 and change > 0
