"""``python -m data_prep.long_context``: a linked copy of a model with a longer context and a larger RoPE base,
which transformers loads with those values (the rotary frequencies follow the new base) and the same weights."""

import json

import pytest
import torch

from data_prep.long_context import main
from verl_ext.models.embedded import embedded_model_path


@pytest.fixture(scope="module")
def source():
    return embedded_model_path(num_layers=2)


def test_linked_copy_loads_with_the_new_context_and_rope_base(source, tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "long"
    assert main(["--model", source, "--out", str(out), "--max-position-embeddings", "16384",
                 "--rope-theta", "40000"]) == 0
    assert (out / "model.safetensors").is_symlink() and not (out / "config.json").is_symlink()
    record = json.loads((out / "long_context.json").read_text())
    assert record["changes"]["max_position_embeddings"] == [8192, 16384]
    config = AutoConfig.from_pretrained(out)
    assert config.max_position_embeddings == 16384 and config.rope_parameters["rope_theta"] == 40000
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    original = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    inv_freq = model.model.rotary_emb.inv_freq
    dim = 2 * len(inv_freq)
    assert inv_freq[1].item() == pytest.approx(1.0 / 40000 ** (2 / dim), rel=1e-5)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), original.state_dict().values()))
    ids = AutoTokenizer.from_pretrained(out)("The sum of two and three is", return_tensors="pt")["input_ids"]
    with torch.no_grad():  # same weights, another RoPE base: the positions beyond the first differ
        assert not torch.allclose(model(ids).logits[0, -1], original(ids).logits[0, -1])


def test_existing_folder_and_bad_values_are_refused(source, tmp_path, capsys):
    out = tmp_path / "long"
    assert main(["--model", source, "--out", str(out)]) == 0
    assert main(["--model", source, "--out", str(out)]) == 2 and "--overwrite" in capsys.readouterr().err
    assert main(["--model", source, "--out", str(out), "--overwrite", "--rope-theta", "20000"]) == 0
    assert json.loads((out / "config.json").read_text())["rope_parameters"]["rope_theta"] == 20000
    assert main(["--model", source, "--out", str(tmp_path / "x"), "--rope-theta", "0"]) == 2
    assert main(["--model", str(tmp_path), "--out", str(tmp_path / "y")]) == 2
    assert "no config.json" in capsys.readouterr().err
