"""SFT through verl 0.9.1's own SFT trainer on the CPU (``python -m verl_ext.sft --cpu``), one run shared by
the assertions: the 2-layer embedded model on worked arithmetic answers (``data_prep.sft_messages``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from data_prep import embedded_datasets
from data_prep.sft_messages import build, sft_row, worked_solution, write_sft
from data_prep.schema import DataError
from verl_ext.cpu import PRECISION_ENV, cpu_precision
from verl_ext.launch.sft import sft_command

pytestmark = [pytest.mark.e2e, pytest.mark.beside]  # a training run, in make test's second lane

STEPS, BATCH = 3, 8


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory):
    from verl_ext.models.embedded import embedded_model_path

    root = tmp_path_factory.mktemp("sft")
    files = build("arithmetic", root / "data", train_size=STEPS * BATCH, test_size=8, seed=3)
    model = embedded_model_path(num_layers=2)
    out = root / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "verl_ext.sft", "--cpu", f"model.path={model}", f"data.train_files={files['train']}",
         f"data.val_files={files['test']}", f"data.train_batch_size={BATCH}", f"data.micro_batch_size_per_gpu={BATCH}",
         "data.use_dynamic_bsz=False", "data.max_length=256", "optim.lr=1e-4", "trainer.total_epochs=1",
         "model.enable_gradient_checkpointing=False", "checkpoint.save_contents=[hf_model]",
         "trainer.project_name=test", "trainer.experiment_name=sft", f"trainer.default_local_dir={out}"],
        capture_output=True, text=True, timeout=600,  # the launcher picks the precision, as for a user (not conftest's)
        env={k: v for k, v in os.environ.items() if k != PRECISION_ENV})
    return {"proc": proc, "out": out, "model": model, "files": files}


def test_sft_trains_through_verls_sft_trainer_and_logs_every_step(sft_run):
    proc = sft_run["proc"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the launcher passes this CPU's default compute dtype through (bf16 with bf16 instructions, else fp32; the choice
    # itself is unit-tested below), fp32 weights
    assert f"'mixed_precision': {{'param_dtype': '{cpu_precision({})}', 'reduce_dtype': 'fp32'" in proc.stdout
    records = [json.loads(line) for line in (sft_run["out"] / "metrics" / "sft.jsonl").read_text().splitlines()]
    train = [r for r in records if "train/loss" in r["data"]]
    assert [r["step"] for r in train] == list(range(1, STEPS + 1))
    losses = [r["data"]["train/loss"] for r in train]
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0]
    assert any("val/loss" in r["data"] for r in records)  # the held-out split, after the last step


def test_sft_saves_loadable_weights_that_moved(sft_run):
    from safetensors.torch import load_file

    assert sft_run["proc"].returncode == 0
    saved = sft_run["out"] / f"global_step_{STEPS}" / "huggingface"
    before = load_file(str(Path(sft_run["model"]) / "model.safetensors"))
    after = load_file(str(saved / "model.safetensors"))
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k].to(before[k].dtype)) for k in before)
    assert (saved / "tokenizer_config.json").is_file()


def test_worked_solutions_are_what_the_verifier_rewards():
    rows = embedded_datasets.arithmetic(train_size=16, test_size=4, seed=5)["train"]
    example = sft_row(rows[0], worked_solution(rows[0]))
    assert example["messages"][:-1] == rows[0]["prompt"] and example["messages"][-1]["role"] == "assistant"
    assert example["messages"][-1]["content"].endswith(f"\\boxed{{{rows[0]['reward_model']['ground_truth']}}}.")
    countdown = embedded_datasets.countdown(train_size=4, test_size=2, seed=0)["train"]
    assert "<answer>" in worked_solution(countdown[0])
    wrong = {**rows[1], "reward_model": {**rows[1]["reward_model"], "ground_truth": "-99999"}}
    with pytest.raises(ValueError, match="not the ground truth"):
        worked_solution(wrong)
    with pytest.raises(ValueError, match="empty response"):
        sft_row(rows[0], "  ")


def test_sft_files_are_checked_and_read_by_verls_dataset(tmp_path):
    from transformers import AutoTokenizer
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset
    from omegaconf import OmegaConf

    from verl_ext.models.embedded import embedded_model_path

    rows = embedded_datasets.arithmetic(train_size=4, test_size=1, seed=2)["train"]
    path = write_sft([sft_row(r, worked_solution(r)) for r in rows], tmp_path / "sft.parquet")
    assert list(pd.read_parquet(path).columns) == ["messages", "data_source", "index"]
    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path(num_layers=2))
    config = OmegaConf.create({"max_length": 256, "truncation": "error", "messages_key": "messages"})
    item = MultiTurnSFTDataset([str(path)], tokenizer, config)[0]
    answer = tokenizer.decode(item["input_ids"][item["loss_mask"].bool()])
    assert worked_solution(rows[0]) in answer  # the loss covers the answer, not the prompt
    bad = [sft_row(rows[0], "x")]
    bad[0]["messages"] = bad[0]["messages"][:-1]
    with pytest.raises(DataError) as err:
        write_sft(bad, tmp_path / "bad.parquet")
    assert err.value.field == "messages" and err.value.row == 0


def test_sft_command_cpu_preset_and_precision(tmp_path):
    argv, env = sft_command(["--cpu", "model.path=/m", f"trainer.default_local_dir={tmp_path}", "optim.lr=1"],
                            base={"PATH": "/usr/bin"})
    assert argv[1:5] == ["--standalone", "--nproc_per_node=1", "-m", "verl.trainer.sft_trainer"]
    assert argv[-3:] == ["model.path=/m", f"trainer.default_local_dir={tmp_path}", "optim.lr=1"]  # the user's, last
    assert "trainer.device=cpu" in argv and "trainer.logger=[console,file]" in argv
    assert env["VERL_PLATFORM"] == "cpu" and env["VERL_FILE_LOGGER_PATH"] == str(tmp_path / "metrics" / "sft.jsonl")
    gpu, gpu_env = sft_command(["trainer.n_gpus_per_node=8"], base={})
    assert "--nproc_per_node=8" in gpu and "trainer.device=cpu" not in gpu and "VERL_PLATFORM" not in gpu_env
    assert cpu_precision({}, "flags : fpu avx512f avx512_bf16") == "bf16"
    assert cpu_precision({}, "flags : fpu avx2") == "fp32"
    assert cpu_precision({"VERL_EXT_CPU_PRECISION": "fp32"}, "flags : avx512_bf16") == "fp32"
    with pytest.raises(ValueError):
        cpu_precision({"VERL_EXT_CPU_PRECISION": "fp16"})
