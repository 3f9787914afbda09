"""Reference pass rates (``python -m data_prep.reference_pass_rates``): real CPU sampling with the
embedded model cut to 2 layers, exact rates with a scripted generator, the skip / partial / overwrite
paths, input errors, and the vLLM path against a fake ``vllm`` module."""

import gc
import importlib.machinery
import json
import sys
import types
import weakref

import pandas as pd
import pytest
import torch

from data_prep import embedded_datasets, generation
from data_prep.generation import Sampling
from data_prep.reference_pass_rates import main
from data_prep.schema import ground_truth_json, make_row, read_rows
from verl_ext.models.embedded import embedded_model_path
from verl_ext.rewards import compute_score

TINY = "embedded:2"  # same tokenizer and chat template as the full model, a fraction of the compute
SMALL_RUN = ["--n", "2", "--max-new-tokens", "8", "--batch-size", "4"]


@pytest.fixture(scope="module")
def arithmetic(tmp_path_factory):
    return embedded_datasets.build("arithmetic", tmp_path_factory.mktemp("data"), train_size=3, test_size=1)["train"]


def _rows():
    """Three verifier domains, each with a reference answer that scores 1."""
    return [
        make_row(data_source="arithmetic", ability="math", question="What is 2 + 3?", ground_truth="5", index=10,
                 split="train"),
        make_row(data_source="countdown", ability="math", question="Make 6 from [1, 2, 3].", index=11, split="train",
                 ground_truth=ground_truth_json({"target": 6, "numbers": [1, 2, 3]})),
        make_row(data_source="logic", ability="logic", question="Who is the knight?", ground_truth="Alice", index=12,
                 split="train"),
        make_row(data_source="gsm8k", ability="math", question="Tom has 4 apples and eats 1.", ground_truth="3",
                 index=13, split="train"),
    ]


RIGHT = {10: "so \\boxed{5}", 11: "<answer>1 + 2 + 3</answer>", 12: "<answer>Alice</answer>", 13: "\\boxed{3}"}
WRONG = {10: "\\boxed{6}", 11: "<answer>1 + 2 * 3</answer>", 12: "<answer>Bob</answer>", 13: "no idea"}
# correct completions out of N_FAKE, per model and task index
CORRECT = {"weak-m": {10: 1, 11: 0, 12: 4, 13: 2}, "strong-m": {10: 3, 11: 2, 12: 4, 13: 1}}
N_FAKE = 4


def _write(rows, path):
    """Parquet written directly (not through write_rows), so rows may carry nulls and NaNs."""
    pd.DataFrame(rows).to_parquet(path, index=False)
    return path


class FakeGenerator:
    """Stands in for :func:`data_prep.generation.generate`: ``CORRECT[model][index]`` right answers first."""

    def __init__(self, rows):
        self.index_of = {r["prompt"][-1]["content"]: r["extra_info"]["index"] for r in rows}
        self.calls = []

    def __call__(self, model, prompts, sampling, *, backend, batch_size):
        indices = [self.index_of[p[-1]["content"]] for p in prompts]
        self.calls.append(dict(model=model, indices=indices, sampling=sampling, backend=backend, batch_size=batch_size))
        k = CORRECT[model]
        return [[RIGHT[i]] * k[i] + [WRONG[i]] * (sampling.n - k[i]) for i in indices]


@pytest.fixture
def fake(monkeypatch):
    gen = FakeGenerator(_rows())
    monkeypatch.setattr(generation, "generate", gen)
    return gen


def _fake_args(src, out, *extra):
    return ["--input", str(src), "--out", str(out), "--weak-model", "weak-m", "--strong-model", "strong-m",
            "--n", str(N_FAKE), *extra]


def test_fixture_answers_score_as_intended():
    for row in _rows():
        i, gt = row["extra_info"]["index"], row["reward_model"]["ground_truth"]
        assert compute_score(row["data_source"], RIGHT[i], gt)["score"] == 1.0
        assert compute_score(row["data_source"], WRONG[i], gt)["score"] < 1.0


def test_pass_rates_are_successes_over_n(tmp_path, fake, capsys):
    src = _write(_rows(), tmp_path / "in.parquet")
    samples = tmp_path / "samples.jsonl"
    args = _fake_args(src, tmp_path / "out.parquet", "--temperature", "0.6", "--top-p", "0.9",
                      "--max-new-tokens", "128", "--seed", "7", "--backend", "hf", "--batch-size", "3",
                      "--samples-out", str(samples))
    assert main(args) == 0
    out = read_rows(tmp_path / "out.parquet")
    for row in out:
        i = row["extra_info"]["index"]
        assert row["extra_info"]["weak_pass_rate"] == CORRECT["weak-m"][i] / N_FAKE
        assert row["extra_info"]["strong_pass_rate"] == CORRECT["strong-m"][i] / N_FAKE
    # nothing else changed, nothing dropped or reordered
    for before, after in zip(_rows(), out, strict=True):
        del after["extra_info"]["weak_pass_rate"], after["extra_info"]["strong_pass_rate"]
        assert before == after

    sampling = Sampling(n=N_FAKE, temperature=0.6, top_p=0.9, max_new_tokens=128, seed=7)
    assert [c["model"] for c in fake.calls] == ["weak-m", "strong-m"]  # one model at a time, weak first
    assert all(c["sampling"] == sampling and c["backend"] == "hf" and c["batch_size"] == 3 for c in fake.calls)
    assert all(c["indices"] == [10, 11, 12, 13] for c in fake.calls)

    records = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(records) == 2 * 4 * N_FAKE
    assert set(records[0]) == {"index", "role", "model", "sample", "response", "score"}
    first = [r for r in records if r["role"] == "weak" and r["index"] == 10]
    assert [r["sample"] for r in first] == [0, 1, 2, 3] and {r["model"] for r in first} == {"weak-m"}
    assert [r["score"] for r in first] == [1.0, 0.0, 0.0, 0.0]
    assert [r["response"] for r in first] == [RIGHT[10]] + [WRONG[10]] * 3

    printed = capsys.readouterr().out
    weak_mean = sum(CORRECT["weak-m"].values()) / (4 * N_FAKE)  # 7/16
    strong_mean = sum(CORRECT["strong-m"].values()) / (4 * N_FAKE)  # 10/16
    assert f"mean weak_pass_rate {weak_mean:.4f}, mean strong_pass_rate {strong_mean:.4f}" in printed
    assert "weak <= strong on 75.0%" in printed  # task 13: weak 2/4 > strong 1/4


def test_present_columns_are_copied_without_models(tmp_path, monkeypatch, capsys):
    def no_generation(*a, **k):
        raise AssertionError("no model should run")

    monkeypatch.setattr(generation, "generate", no_generation)
    rows = _rows()
    for i, row in enumerate(rows):
        row["extra_info"].update(weak_pass_rate=i / 8, strong_pass_rate=1.0 - i / 8)
    src = _write(rows, tmp_path / "guru.parquet")
    assert main(["--input", str(src), "--out", str(tmp_path / "out.parquet")]) == 0
    assert read_rows(tmp_path / "out.parquet") == rows
    assert "all 4 rows already have weak_pass_rate and strong_pass_rate: copying" in capsys.readouterr().out


def test_only_missing_values_are_computed(tmp_path, fake, capsys):
    rows = _rows()
    rows[0]["extra_info"].update(weak_pass_rate=0.125, strong_pass_rate=0.875)  # complete: kept
    rows[1]["extra_info"].update(weak_pass_rate=0.25, strong_pass_rate=None)  # null
    rows[2]["extra_info"].update(weak_pass_rate=float("nan"), strong_pass_rate=0.5)  # NaN
    rows[3]["extra_info"].update(weak_pass_rate=None, strong_pass_rate=float("nan"))
    src = _write(rows, tmp_path / "in.parquet")
    assert main(_fake_args(src, tmp_path / "out.parquet")) == 0

    assert [(c["model"], c["indices"]) for c in fake.calls] == [("weak-m", [12, 13]), ("strong-m", [11, 13])]
    got = {r["extra_info"]["index"]: (r["extra_info"]["weak_pass_rate"], r["extra_info"]["strong_pass_rate"])
           for r in read_rows(tmp_path / "out.parquet")}
    assert got == {10: (0.125, 0.875), 11: (0.25, 2 / 4), 12: (4 / 4, 0.5), 13: (2 / 4, 1 / 4)}
    printed = capsys.readouterr().out
    assert "weak_pass_rate: computing the 2 of 4 rows that lack it with weak-m, keeping the other 2" in printed
    assert "strong_pass_rate: computing the 2 of 4 rows that lack it with strong-m" in printed


def test_overwrite_recomputes_everything(tmp_path, fake):
    rows = _rows()
    for row in rows:
        row["extra_info"].update(weak_pass_rate=0.0, strong_pass_rate=0.0)
    src = _write(rows, tmp_path / "in.parquet")
    assert main(_fake_args(src, src, "--overwrite")) == 0  # in place
    assert [c["indices"] for c in fake.calls] == [[10, 11, 12, 13]] * 2
    for row in read_rows(src):
        i = row["extra_info"]["index"]
        assert row["extra_info"]["weak_pass_rate"] == CORRECT["weak-m"][i] / N_FAKE
        assert row["extra_info"]["strong_pass_rate"] == CORRECT["strong-m"][i] / N_FAKE


def test_custom_column_names(tmp_path, fake):
    src = _write(_rows(), tmp_path / "in.parquet")
    assert main(_fake_args(src, tmp_path / "out.parquet", "--weak-column", "qwen7b", "--strong-column", "qwen30b")) == 0
    info = read_rows(tmp_path / "out.parquet")[0]["extra_info"]
    assert (info["qwen7b"], info["qwen30b"]) == (1 / 4, 3 / 4) and "weak_pass_rate" not in info


def _break_index(rows):
    del rows[1]["extra_info"]["index"]


def _break_source(rows):
    rows[2]["data_source"] = "no_such_dataset"


def _break_rate(rows):
    rows[3]["extra_info"]["strong_pass_rate"] = 1.5


@pytest.mark.parametrize("breaks, where", [
    (_break_index, "row 1, field 'extra_info.index': missing"),
    (_break_source, "row 2, field 'data_source': unknown data_source 'no_such_dataset'"),
    (_break_rate, "row 3, field 'extra_info.strong_pass_rate': must be a number in [0, 1]"),
])
def test_bad_rows_fail_before_any_model_runs(breaks, where, tmp_path, fake, capsys):
    rows = _rows()
    breaks(rows)
    src = _write(rows, tmp_path / "bad.parquet")
    assert main(_fake_args(src, tmp_path / "out.parquet")) == 1
    assert f"error: {src}, {where}" in capsys.readouterr().err
    assert not fake.calls and not (tmp_path / "out.parquet").exists()


def test_missing_input_and_missing_model(tmp_path, fake, capsys):
    missing = tmp_path / "nope.parquet"
    assert main(_fake_args(missing, tmp_path / "out.parquet")) == 1
    assert f"error: {missing}, field '<file>': no such file" in capsys.readouterr().err

    src = _write(_rows(), tmp_path / "in.parquet")
    with pytest.raises(SystemExit) as exit_:
        main(["--input", str(src), "--out", str(tmp_path / "out.parquet"), "--weak-model", "weak-m"])
    assert exit_.value.code == 2
    assert "4 of 4 rows lack extra_info.strong_pass_rate: pass --strong-model" in capsys.readouterr().err
    assert not fake.calls


def test_resolve_model():
    assert generation.resolve_model("embedded:2") == embedded_model_path(2)
    assert generation.resolve_model("Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"
    with pytest.raises(ValueError, match="embedded:K"):
        generation.resolve_model("embedded:two")


# ------------------------------------------------------------------------------------------------
# Real sampling on the CPU (hf backend)
# ------------------------------------------------------------------------------------------------


def test_real_run_on_cpu(arithmetic, tmp_path, capsys):
    out, samples = tmp_path / "out.parquet", tmp_path / "samples.jsonl"
    args = ["--input", str(arithmetic), "--out", str(out), "--weak-model", TINY, "--strong-model", TINY,
            "--backend", "auto", "--samples-out", str(samples), *SMALL_RUN]
    assert main(args) == 0
    rows, before = read_rows(out), read_rows(arithmetic)
    assert [r["extra_info"]["index"] for r in rows] == [r["extra_info"]["index"] for r in before] == [0, 1, 2]
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(records) == 3 * 2 * 2
    for row in rows:
        info = row["extra_info"]
        for role in ("weak", "strong"):
            mine = [r for r in records if r["index"] == info["index"] and r["role"] == role]
            assert [r["sample"] for r in mine] == [0, 1] and all(r["response"] for r in mine)
            for r in mine:  # the recorded score is the verifier's score of the recorded response
                assert r["score"] == compute_score(row["data_source"], r["response"], row["reward_model"]["ground_truth"])["score"]
            assert info[f"{role}_pass_rate"] == sum(r["score"] >= 1.0 for r in mine) / 2
    # the same model and seed for both roles: the same samples
    assert [r["response"] for r in records if r["role"] == "weak"] == [r["response"] for r in records if r["role"] == "strong"]
    assert "3 tasks: mean weak_pass_rate" in capsys.readouterr().out


def test_hf_sampling_is_seeded_and_independent_of_batching(arithmetic):
    prompts = [r["prompt"] for r in read_rows(arithmetic)]
    sampling = Sampling(n=2, max_new_tokens=8, seed=0)
    a = generation.generate(TINY, prompts, sampling, backend="hf", batch_size=6)
    assert generation.generate(TINY, prompts, sampling, backend="hf", batch_size=6) == a
    assert generation.generate(TINY, prompts[1:], sampling, backend="hf", batch_size=1) == a[1:]
    assert all(len(texts) == 2 and texts[0] != texts[1] for texts in a)  # the n samples differ
    assert generation.generate(TINY, prompts, Sampling(n=2, max_new_tokens=8, seed=1), backend="hf") != a
    greedy = generation.generate(TINY, prompts[:1], Sampling(n=2, temperature=0.0, max_new_tokens=8), backend="hf")
    assert greedy[0][0] == greedy[0][1]


# ------------------------------------------------------------------------------------------------
# vLLM path with a fake module (vLLM cannot run here)
# ------------------------------------------------------------------------------------------------


class FakeTokenizer:
    eos_token_id = 0

    def apply_chat_template(self, messages, add_generation_prompt, tokenize, return_dict):
        assert add_generation_prompt and tokenize and not return_dict
        return [ord(c) for c in messages[-1]["content"]]


class FakeCompletion:
    def __init__(self, text):
        self.text = text
        self.token_ids = [ord(c) for c in text] + [FakeTokenizer.eos_token_id]


class FakeRequestOutput:
    def __init__(self, texts):
        self.outputs = [FakeCompletion(t) for t in texts]


def _fake_vllm(rows, log):
    index_of = {tuple(ord(c) for c in r["prompt"][-1]["content"]): r["extra_info"]["index"] for r in rows}
    alive: list[weakref.ref] = []

    class SamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    class LLM:
        def __init__(self, **kwargs):
            gc.collect()
            assert all(ref() is None for ref in alive), "the previous model is still loaded"
            alive.append(weakref.ref(self))
            self.model = kwargs["model"]
            log.append(("LLM", kwargs))

        def get_tokenizer(self):
            return FakeTokenizer()

        def generate(self, prompts, params):
            log.append(("generate", prompts, params.kwargs))
            k, n = CORRECT[self.model], params.kwargs["n"]
            out = []
            for p in prompts:
                i = index_of[tuple(p["prompt_token_ids"])]
                out.append(FakeRequestOutput([RIGHT[i]] * k[i] + [WRONG[i]] * (n - k[i])))
            return out

    module = types.ModuleType("vllm")
    module.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    module.LLM, module.SamplingParams = LLM, SamplingParams
    module.platforms = types.ModuleType("vllm.platforms")
    module.platforms.current_platform = types.SimpleNamespace(is_cpu=lambda: False)
    return module


def test_vllm_backend(tmp_path, monkeypatch):
    log = []
    fake = _fake_vllm(_rows(), log)
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setitem(sys.modules, "vllm.platforms", fake.platforms)
    src = _write(_rows(), tmp_path / "in.parquet")
    args = _fake_args(src, tmp_path / "out.parquet", "--backend", "vllm", "--temperature", "0.7", "--top-p", "0.95",
                      "--max-new-tokens", "64", "--seed", "5")
    assert main(args) == 0

    assert [entry[0] for entry in log] == ["LLM", "generate", "LLM", "generate"]
    assert log[0][1] == {"model": "weak-m", "seed": 5} and log[2][1] == {"model": "strong-m", "seed": 5}
    expected_prompts = [{"prompt_token_ids": [ord(c) for c in r["prompt"][-1]["content"]]} for r in _rows()]
    for _, prompts, params in (log[1], log[3]):
        assert prompts == expected_prompts  # all prompts in one call, in row order
        assert params == dict(n=N_FAKE, temperature=0.7, top_p=0.95, max_tokens=64, seed=5)
    for row in read_rows(tmp_path / "out.parquet"):
        i = row["extra_info"]["index"]
        assert row["extra_info"]["weak_pass_rate"] == CORRECT["weak-m"][i] / N_FAKE
        assert row["extra_info"]["strong_pass_rate"] == CORRECT["strong-m"][i] / N_FAKE


def test_auto_backend_choice(monkeypatch):
    assert generation.pick_backend("auto") == "hf"  # vLLM is not installed here
    monkeypatch.setitem(sys.modules, "vllm", _fake_vllm([], []))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert generation.pick_backend("auto") == "hf"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert generation.pick_backend("auto") == "vllm"
    assert generation.pick_backend("hf") == "hf"
    with pytest.raises(ValueError, match="unknown backend"):
        generation.pick_backend("sglang")
