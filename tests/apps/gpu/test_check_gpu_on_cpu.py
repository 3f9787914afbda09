"""``python -m verl_ext.apps.gpu.check_gpu`` on a machine without a GPU (its ``main`` in this process; as a command in
scripts/gpu_first_hour.sh: tests/apps/gpu/test_gpu_first_hour_on_cpu.py), and its pieces that run on a CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from verl_ext.apps.gpu import check_gpu
from verl_ext.models.attention import BACKENDS
from verl_ext.cpu import project_root

ROOT = Path(project_root())


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny_llama")
    LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2)).save_pretrained(path)
    return str(path)


def test_fails_fast_and_clearly_without_a_gpu(capsys):
    assert check_gpu.main([]) == 1
    out, err = capsys.readouterr()
    assert "[ok] python" in out and "[FAILED] no CUDA device" in err
    assert "[ok] vllm" not in out  # stops at the first failure


def test_cpu_flag_runs_the_update_check(tiny_model, capsys):
    assert check_gpu.main(["--cpu", "--model", tiny_model]) == 0
    out = capsys.readouterr().out
    assert "[ok] attention: flex_attention" in out and "[ok] attention: sdpa" in out
    assert out.count("[ok] actor update: loss") == 2
    assert "[ok] vllm" not in out and "sdpa_padded" not in out  # the recipes' ones only


def test_missing_attention_package_fails_by_name(tiny_model, capsys):
    assert check_gpu.main(["--cpu", "--model", tiny_model, "--attention", "flash_attention_2"]) == 1
    err = capsys.readouterr().err
    assert "needs the flash-attn package" in err and "attn_implementation=flex_attention" in err


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


def test_update_check_on_a_checkpoint(tiny_model):
    build = lambda: AutoModelForCausalLM.from_pretrained(tiny_model)  # noqa: E731
    result = check_gpu.update_check(build, BACKENDS["sdpa"], device="cpu")
    assert 0 < result["loss"] < 100 and result["change"] > 0
    assert result["logp_gap"] < 1e-5 and result["grad_gap"] < 1e-5  # fp32: the same numbers as eager padded
    assert result["leak_logp_gap"] > 1e-2 and result["leak_grad_gap"] > 1e-2  # the control sees the difference
    assert "gap to eager padded" in check_gpu.check_update(result, "cpu")


GOOD = {"loss": 1.0, "change": 1e-4, "logp_gap": 0.01, "grad_gap": 0.01, "leak_logp_gap": 3.0,
        "leak_grad_gap": 1.0, "seconds": 1.0}


@pytest.mark.parametrize("bad, message", [
    ({"loss": float("nan")}, "loss nan"),
    ({"change": 0.0}, "largest parameter change 0.0"),
    ({"logp_gap": 0.3}, "log-probs differ .* by 0.3 .*tolerance 0.25"),
    ({"grad_gap": 0.2}, "gradients differ .* by 0.2 .*tolerance 0.1"),
    ({"leak_logp_gap": 0.05}, "log-probs .* sequences that see each other: 0.05"),  # within tolerance, not apart
])
def test_failed_update_is_reported(bad, message):
    assert "loss 1.000" in check_gpu.check_update(GOOD, "cuda")
    with pytest.raises(check_gpu.CheckFailed, match=message):
        check_gpu.check_update(GOOD | bad, "cuda")


@pytest.mark.parametrize("driver, message", [
    ("570.86.15", "driver 570.86.15 is too old for the installed torch's CUDA 13.0"),  # before torch's device count
    ("580.65.06", "no CUDA device visible to torch"),  # this machine has none
])
def test_driver_is_checked_before_the_devices(monkeypatch, driver, message):
    monkeypatch.setattr(torch.version, "cuda", "13.0")  # as the GPU install's torch 2.11.0
    monkeypatch.setattr(check_gpu, "driver_version", lambda: driver)
    with pytest.raises(check_gpu.CheckFailed, match=message):
        check_gpu.run_checks(None, ["sdpa"])


def test_without_vllm_a_missing_nvidia_smi_leaves_the_decision_to_torch(monkeypatch, capsys):
    monkeypatch.setattr(torch.version, "cuda", "13.0")

    def no_smi():
        raise check_gpu.CheckFailed("no CUDA device: nvidia-smi not found (no NVIDIA driver on this machine)")

    monkeypatch.setattr(check_gpu, "driver_version", no_smi)
    with pytest.raises(check_gpu.CheckFailed, match="nvidia-smi not found"):
        check_gpu.run_checks(None, None, vllm=True)
    with pytest.raises(check_gpu.CheckFailed, match="no CUDA device visible to torch"):
        check_gpu.run_checks(None, None, vllm=False)
    assert "[skip] driver: no CUDA device: nvidia-smi not found" in capsys.readouterr().out
