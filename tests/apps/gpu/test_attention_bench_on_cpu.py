"""The attention bench (verl_ext/apps/gpu/attention_bench.py) on the tiny model: realistic micro-batches, its rows and
tables, its time budget. The backends themselves: tests/test_attention_on_cpu.py."""

from __future__ import annotations

import importlib.metadata as md
import json
import platform

import pytest
import torch

from verl_ext.apps.gpu import attention_bench as bench
from verl_ext.apps.bench.__main__ import BENCHMARKS


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
    import tokenizers
    import transformers

    head, *summary = bench.write_summary(tmp_path, "cpu").splitlines()
    assert head.startswith(f"stack: python {platform.python_version()}, torch {torch.__version__}, transformers "
                           f"{transformers.__version__}, tokenizers {tokenizers.__version__}, huggingface_hub ")
    assert ", safetensors " in head and ", regex " in head and f", verl {md.version('verl')}, device " in head
    summary = summary[1:]
    assert summary[1].startswith("| backend | update check | log-prob gap | grad gap | 128 ms | 128 x sdpa |")
    assert summary[3].startswith("| sdpa_padded | not run | - | - | failed: RuntimeError: kernel launch failed |")
    assert summary[4].startswith("| sdpa | ok | 1.0e-07 | 2.0e-07 | ")
    assert (tmp_path / "results.md").read_text().splitlines() == [head, "", *summary]
    assert json.loads((tmp_path / "results.json").read_text())["stack"]["transformers"] == transformers.__version__
    assert json.loads((tmp_path / "results.json").read_text())["bench"]["rows"] == rows


def test_bench_starts_nothing_once_its_time_budget_is_spent():
    rows = bench.run_bench("tiny", "cpu", (128, 256), ["sdpa", "flash_attention_2"], budget_s=0)
    assert [r["status"] for r in rows] == ["skipped: time budget spent"] * 2 + ["skipped: CUDA kernel"] * 2


@pytest.mark.e2e  # compiles flex attention's kernels: `make test` runs it beside the trainer runs
@pytest.mark.beside
def test_forward_only_steps_record_flex_attentions_compilations_on_cpu(capfd):
    """``--steps --forward-only`` runs flex attention's compiled forward on the CPU in the actor's step pattern: the
    first step compiles transformers' block mask and the kernel (a first size, then dynamic sizes, then with
    gradients enabled), the second compiles nothing; every step builds block masks; a call past ``stall_s`` prints
    the stack. sdpa compiles nothing and builds no block mask."""
    results = bench.run_steps("tiny", "cpu", 256, 2, ["flex_attention", "sdpa"], forward_only=True, stall_s=0.2)
    flex, sdpa = results
    assert flex["status"] == "ok" and flex["forward_only"] and flex["recompile_limit_hits"] == 0, flex
    assert flex["graphs"][0] >= 6 and flex["graphs"][1] == 0 and flex["compile_s"][1] == 0 < flex["compile_s"][0]
    frames = [c["frame"] for c in flex["compiled"][0]]
    assert frames.count("create_block_mask") >= 3 and frames.count("flex_attention") >= 3, frames
    assert sum("grad_mode" in (c["reason"] or "") for c in flex["compiled"][0]) == 2  # eval -> train, both frames
    assert all(s > 0 for s in flex["mask_s"]) and flex["peak_gib"] == [None, None]
    assert sdpa["graphs"] == [0, 0] and sdpa["mask_s"] == [0, 0] and sdpa["status"] == "ok"
    err = capfd.readouterr().err
    assert "flex_attention step 0 eval 0: " in err  # its line, and the stack while it compiled:
    assert "flex_attention step 0 eval 0: still running after 0 s, at\n" in err and "in create_block_mask" in err
    assert "sdpa step 1 eval 0" not in err  # later calls print only when they compile
    table = bench.steps_report(results)
    assert "| flex_attention (forward only) | 256 | 2 | " in table and "| sdpa (forward only) | 256 | 2 | " in table
    skipped = bench.run_steps("tiny", "cpu", 256, 1, ["flex_attention"])  # with the backward: no CPU kernel
    assert skipped[0]["status"] == "skipped: torch has no backward for it on CPU"
