"""The embedded SmolLM2 checkpoint: conversion from the packaged GGUF, tokenizer, truncation, generation.

Uses the real cache (``$VERL_EXT_CACHE`` or ``~/.cache/verl_ext``): the first run converts the GGUF
once (about 30 s), later runs and the CPU GRPO smoke test reuse it.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from verl_ext.models import embedded
from verl_ext.models.embedded import EOS_TOKEN, EOS_TOKEN_ID, embedded_model_path

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def full_path():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return Path(embedded_model_path())


@pytest.fixture(scope="module")
def tokenizer(full_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(full_path))


def test_checkpoint_layout_and_idempotence(full_path):
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "generation_config.json", embedded.MARKER):
        assert (full_path / name).is_file(), name
    stamp = (full_path / "model.safetensors").stat().st_mtime_ns
    assert embedded_model_path() == str(full_path)  # second call: no conversion
    assert (full_path / "model.safetensors").stat().st_mtime_ns == stamp
    config = json.loads((full_path / "config.json").read_text())
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 30
    assert config["eos_token_id"] == EOS_TOKEN_ID and config["pad_token_id"] == EOS_TOKEN_ID
    assert not list(full_path.parent.glob(f".tmp-{full_path.name}-*")), "temporary directories left behind"


def test_tokenizer_round_trip_and_chat_template(tokenizer):
    text = "Using the numbers [3, 5, 7], make 22: <answer> 3 * 5 + 7 </answer>"
    ids = tokenizer(text, add_special_tokens=False).input_ids
    assert tokenizer.decode(ids) == text
    assert tokenizer.eos_token == EOS_TOKEN and tokenizer.eos_token_id == EOS_TOKEN_ID
    assert tokenizer.pad_token_id == EOS_TOKEN_ID
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                             add_generation_prompt=True)
    assert rendered.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


def test_truncated_copy(full_path, tmp_path):
    out = tmp_path / "trunc"
    out.mkdir()
    embedded._truncate(full_path, out, 2)
    config = json.loads((out / "config.json").read_text())
    assert config["num_hidden_layers"] == 2
    with safe_open(str(out / "model.safetensors"), framework="pt") as f:
        layers = {int(k.split(".")[2]) for k in f.keys() if k.startswith("model.layers.")}
        assert layers == {0, 1}
        assert "model.embed_tokens.weight" in set(f.keys())
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(out))
    assert len(model.model.layers) == 2
    out_ids = model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=3, do_sample=False, pad_token_id=2)
    assert out_ids.shape == (1, 6)
    with pytest.raises(embedded.EmbeddedModelError):
        embedded_model_path(0)


def test_cached_truncated_model_and_cli(full_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "verl_ext.models.embedded", "--num-layers", "4"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    path = Path(proc.stdout.strip().splitlines()[-1])
    assert path == full_path.parent / "SmolLM2-135M-Instruct-L4"
    assert json.loads((path / "config.json").read_text())["num_hidden_layers"] == 4
    assert embedded.is_converted(path)


def test_full_model_answers_sensibly(full_path):
    answer = embedded.check(full_path, "What is the capital of France?", max_new_tokens=12)
    assert "Paris" in answer


def test_conversion_is_atomic_and_replaces_unmarked_leftovers(tmp_path, monkeypatch):
    calls = []

    def fake_convert(out: Path) -> None:
        calls.append(out)
        assert out.parent == tmp_path and out.name.startswith(".tmp-")
        (out / "config.json").write_text(json.dumps({"num_hidden_layers": 30}))
        embedded._write_marker(out, name="fake")

    monkeypatch.setattr(embedded, "_convert_full", fake_convert)
    stale = tmp_path / embedded.MODEL_NAME
    stale.mkdir()
    (stale / "half-written").write_text("x")  # no marker: an interrupted conversion
    path = Path(embedded_model_path(cache_dir=tmp_path))
    assert path == stale and embedded.is_converted(path) and not (path / "half-written").exists()
    assert embedded_model_path(cache_dir=tmp_path) == str(path) and len(calls) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [embedded.MODEL_NAME]
    monkeypatch.setenv("VERL_EXT_CACHE", str(tmp_path / "root"))
    assert embedded.cache_root() == tmp_path / "root"


def test_the_conversion_parses_the_gguf_once_and_restores_gguf(tmp_path, monkeypatch):
    import gguf
    import numpy as np
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    path = str(tmp_path / "tiny.gguf")  # a one-tensor file: parsing the real one takes ~4 s
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((2, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    parses, reader = [], gguf.GGUFReader

    def counted(*args, **kwargs):
        parses.append(args)
        return reader(*args, **kwargs)

    monkeypatch.setattr(gguf, "GGUFReader", counted)
    with embedded._gguf_parsed_once():
        for _ in range(3):  # transformers' own loader, as the tokenizer's, the config's and the model's calls use it
            assert load_gguf_checkpoint(path)["config"]["model_type"] == "llama"
    assert len(parses) == 1 and gguf.GGUFReader is counted  # one parse; gguf's own names back after the block
    load_gguf_checkpoint(path)
    assert len(parses) == 2
