"""The attention backends' verl overrides, requirements and batch layouts (verl_ext.attention), and the attention
bench on the tiny model (verl_ext.apps.bench.attention). Backends' log-probs and gradients:
tests/recipes/test_gpu_stack_on_cpu.py; the bench and the update check on a simulated bare GPU machine:
tests/test_check_gpu_on_cpu.py."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from verl_ext import attention
from verl_ext.attention import BACKENDS, backend_of, config_problems, get_backend, model_inputs, predicting_rows
from verl_ext.apps.bench import attention as bench
from verl_ext.apps.bench.__main__ import BENCHMARKS


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


@pytest.mark.parametrize("tokens, size", [(8192, "1.5b"), (32768, "1.5b"), (512, "tiny")])
def test_micro_batches_fill_their_tokens_with_realistic_lengths(tokens, size):
    lengths = bench.micro_batch_lengths(tokens, size)
    (p_lo, p_hi), (r_lo, r_hi) = bench.LENGTHS[size]
    assert sum(lengths) == tokens and min(lengths) >= 2
    assert all(n <= p_hi + r_hi for n in lengths) and all(n >= p_lo + r_lo for n in lengths[:-1])
    assert lengths == bench.micro_batch_lengths(tokens, size)  # the same batch for every backend


def test_bench_rows_and_tables_on_the_tiny_model(tmp_path, monkeypatch):
    assert BENCHMARKS["attention"] == (bench.run, bench.report)
    measure = bench.measure

    def failing_once(step, device, repeats):  # one failure must not lose the other rows
        if not hasattr(failing_once, "failed"):
            failing_once.failed = True
            raise RuntimeError("kernel launch failed")
        return measure(step, device, repeats)

    monkeypatch.setattr(bench, "measure", failing_once)
    rows = bench.run_bench("tiny", "cpu", (128, 256), ["sdpa_padded", "sdpa", "flex_attention", "flash_attention_2"],
                           repeats=1, json_path=tmp_path / "bench.json")
    status = {(r["backend"], r["tokens"]): r["status"] for r in rows}
    assert status[("sdpa_padded", 128)] == "failed: RuntimeError: kernel launch failed"
    assert status[("sdpa_padded", 256)] == status[("sdpa", 128)] == status[("sdpa", 256)] == "ok"
    assert status[("flex_attention", 128)] == "skipped: torch has no backward for it on CPU"
    assert status[("flash_attention_2", 256)] == "skipped: CUDA kernel"
    padded = next(r for r in rows if r["backend"] == "sdpa_padded" and r["tokens"] == 256)
    assert padded["layout_tokens"] == padded["sequences"] * max(bench.micro_batch_lengths(256, "tiny")) > 256
    assert json.loads((tmp_path / "bench.json").read_text())["rows"] == rows  # written as they come
    table = bench.report(rows)
    assert "| sdpa | 256 | " in table and " | 1.00 | " in table
    (tmp_path / "update.json").write_text(json.dumps({"rows": [{"backend": "sdpa", "status": "ok", "logp_gap": 1e-7,
                                                                "grad_gap": 2e-7}]}))
    summary = bench.write_summary(tmp_path).splitlines()
    assert summary[1].startswith("| backend | update check | log-prob gap | grad gap | 128 ms | 128 x sdpa |")
    assert summary[3].startswith("| sdpa_padded | not run | - | - | failed: RuntimeError: kernel launch failed |")
    assert summary[4].startswith("| sdpa | ok | 1.0e-07 | 2.0e-07 | ")
    assert (tmp_path / "results.md").read_text().splitlines() == summary
    assert json.loads((tmp_path / "results.json").read_text())["bench"]["rows"] == rows


def test_bench_starts_nothing_once_its_time_budget_is_spent():
    rows = bench.run_bench("tiny", "cpu", (128, 256), ["sdpa", "flash_attention_2"], budget_s=0)
    assert [r["status"] for r in rows] == ["skipped: time budget spent"] * 2 + ["skipped: CUDA kernel"] * 2
