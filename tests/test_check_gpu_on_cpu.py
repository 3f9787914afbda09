"""``python -m verl_ext.check_gpu`` on a machine without a GPU, and its pieces that run on a CPU."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from verl_ext import check_gpu
from verl_ext.cpu import project_root


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "verl_ext.check_gpu", *args], capture_output=True, text=True,
                          timeout=300, cwd=project_root())


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny_llama")
    LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2)).save_pretrained(path)
    return str(path)


def test_fails_fast_and_clearly_without_a_gpu():
    proc = _run()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[ok] python" in proc.stdout and "[FAILED] no CUDA device" in proc.stderr
    assert "[ok] vllm" not in proc.stdout  # stops at the first failure


def test_cpu_flag_runs_the_update_check(tiny_model):
    proc = _run("--cpu", "--model", tiny_model)
    assert proc.returncode == 0, proc.stderr
    assert "[ok] attention: sdpa" in proc.stdout and "[ok] actor update: loss" in proc.stdout


def test_missing_attention_package_fails_by_name(tiny_model):
    proc = _run("--cpu", "--model", tiny_model, "--attention", "flash_attention_2")
    assert proc.returncode == 1
    assert "needs the flash-attn package" in proc.stderr and "attn_implementation=sdpa" in proc.stderr


def test_gpu_install_packages_follow_verls_extras():
    packages = check_gpu.gpu_install_packages(project_root())
    assert {"verl", "vllm", "torch", "transformers", "wandb", "math-verify", "transferqueue"} <= packages
    assert "flash-attn" not in packages and "liger-kernel" not in packages  # verl's fsdp extra, not used


def test_gpu_install_packages_expand_only_the_extras_named(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\noptional-dependencies = {gpu = ["verl[fsdp]==0.9.1"]}\n')
    packages = check_gpu.gpu_install_packages(tmp_path)
    assert {"flash-attn", "liger-kernel", "wandb"} <= packages and "vllm" not in packages


@pytest.mark.parametrize("cuda, driver", [("13.0", 580), ("12.8", 525), ("11.8", 450)])
def test_minimum_driver_per_cuda_generation(cuda, driver):
    assert check_gpu.min_driver(cuda) == driver
    assert "needs >= %d" % driver in check_gpu.check_driver(f"{driver}.65.06", cuda)
    with pytest.raises(check_gpu.CheckFailed, match=f"driver {driver - 5}.1 is too old .* CUDA {cuda}"):
        check_gpu.check_driver(f"{driver - 5}.1", cuda)
    with pytest.raises(check_gpu.CheckFailed, match="no known minimum driver"):
        check_gpu.min_driver("9.2")


def test_driver_version_parsing():
    assert check_gpu.parse_driver_version("580.65.06\n580.65.06\n") == "580.65.06"
    for bad in ("", "NVIDIA-SMI has failed", "570.1\n580.2\n"):
        with pytest.raises(check_gpu.CheckFailed, match="cannot read the NVIDIA driver version"):
            check_gpu.parse_driver_version(bad)


def test_unknown_attention_is_an_error():
    with pytest.raises(ValueError, match="unknown attention"):
        check_gpu.attention_is_provided("flash_attention_9", set())


def test_tiny_update_on_cpu(tiny_model):
    result = check_gpu.tiny_update(tiny_model, "sdpa", device="cpu")
    assert 0 < result["loss"] < 100 and result["change"] > 0 and result["packed_gap"] < 1e-5
    assert "packed vs padded" in check_gpu.check_update(result, 1e-4)


@pytest.mark.parametrize("result, message", [
    ({"loss": float("nan"), "change": 1e-4, "packed_gap": 0.0}, "loss nan"),
    ({"loss": 1.0, "change": 0.0, "packed_gap": 0.0}, "largest parameter change 0.0"),
    ({"loss": 1.0, "change": 1e-4, "packed_gap": 2.0}, "do(es)? not separate packed sequences"),
])
def test_failed_update_is_reported(result, message):
    with pytest.raises(check_gpu.CheckFailed, match=message):
        check_gpu.check_update(result, 0.1)


@pytest.mark.parametrize("driver, message", [
    ("570.86.15", "driver 570.86.15 is too old for the installed torch's CUDA 13.0"),  # before torch's device count
    ("580.65.06", "no CUDA device visible to torch"),  # this machine has none
])
def test_driver_is_checked_before_the_devices(monkeypatch, driver, message):
    monkeypatch.setattr(torch.version, "cuda", "13.0")  # as the GPU install's torch 2.11.0
    monkeypatch.setattr(check_gpu, "driver_version", lambda: driver)
    with pytest.raises(check_gpu.CheckFailed, match=message):
        check_gpu.run_checks(None, "sdpa")
