"""The generation bench (verl_ext/apps/bench/generation.py): a backend measured in its own process through the
evaluator's code reports its start-up and generation apart and the tokens it generated; the report sets both
backends side by side with the ratio. (vLLM's side runs the evaluator's ``vllm_engine`` / ``iter_vllm``, which
``tests/trainer/test_bots_coba_vllm_trainer_on_cpu.py`` runs through ``eval.evaluate --backend vllm``.)"""

import pytest

from verl_ext.apps.bench import generation as bench

pytestmark = [pytest.mark.e2e, pytest.mark.beside]  # a generation run, in make test's second lane


def test_hf_side_measured_in_its_own_process():
    [row] = bench.run(prompts=2, n=2, max_new_tokens=8, backends=("hf",))
    assert row["hf_samples"] == 4
    assert 0 < row["hf_tokens"] <= 4 * 8
    assert row["hf_start_s"] > 0 and row["hf_generate_s"] > 0
    assert row["hf_tokens_per_s"] == row["hf_tokens"] / row["hf_generate_s"]
    assert "hf_over_vllm_generate" not in row
    assert "| 2 x 2 x 8 | hf |" in bench.report([row])


def test_report_sets_both_backends_side_by_side():
    row = {"prompts": 4, "n": 4, "max_new_tokens": 64, "hf_samples": 16, "hf_tokens": 1000, "hf_start_s": 9.0,
           "hf_generate_s": 50.0, "hf_tokens_per_s": 20.0, "vllm_samples": 16, "vllm_tokens": 1000, "vllm_start_s": 51.0,
           "vllm_generate_s": 5.0, "vllm_tokens_per_s": 200.0, "hf_over_vllm_generate": 10.0,
           "vllm_over_hf_tokens_per_s": 10.0}
    text = bench.report([row])
    assert "| 4 x 4 x 64 | hf | 9.0 | 50.0 | 1000 | 20 |" in text and "| 4 x 4 x 64 | vllm | 51.0 | 5.0 |" in text
    assert "10.0x faster" in text and "51 s engine start" in text
