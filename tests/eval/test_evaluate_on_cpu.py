"""python -m eval.evaluate: real CPU evaluation with the embedded model cut to 2 layers (files, schema,
summary against the samples, resuming regenerates only what is missing and reproduces it exactly), exact
numbers with a scripted generator, a run directory with an HF and an FSDP checkpoint (merged by verl's
model merger) over steps, presets, and input errors."""

import importlib.machinery
import json
import math
import shutil
import sys
import types
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from data_prep import embedded_datasets, generation
from data_prep.generation import Completion, Sampling
from data_prep.schema import ground_truth_json, make_row, read_rows, write_rows
from eval.evaluate import PRESETS, REPEAT_STRIDE, load_benchmarks, main, parse_args, settings_of
from verl_ext.models.embedded import embedded_model_path
from verl_ext.rewards import compute_score

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")

TINY = "embedded:2"
RECORD_KEYS = {"benchmark", "index", "sample", "repeat", "score", "success", "response", "has_answer",
               "multiple_answers", "multiple_think", "parse_error", "too_long"}
BENCH_KEYS = {"n_problems", "k", "repeats", "mean_score", "accuracy", "accuracy_std_over_repeats", "pass@k",
              "zero_success_rate", "all_success_rate"}
CURVE_KEYS = {"step", "benchmark", "mean_score", "accuracy", "accuracy_std_over_repeats", "pass@k", "n_problems", "k"}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    return {name: embedded_datasets.build(name, root, train_size=1, test_size=4)["test"]
            for name in ("arithmetic", "countdown")}


def samples(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


class CountingGenerator:
    """Wraps the real :func:`generation.iter_samples`, recording what it was asked for."""

    def __init__(self, real):
        self.real, self.calls = real, []

    def __call__(self, model, prompts, sampling, **kwargs):
        self.calls.append(dict(model=model, n_samples=sum(len(ids) for ids in kwargs["sample_ids"]), **kwargs))
        return self.real(model, prompts, sampling, **kwargs)


def exact_pass_at_k(n, c, k):
    return 1 - math.comb(n - c, k) / math.comb(n, k)


def check_summary_against_samples(bench, records, k):
    """Every summary number recomputed by hand from the sample records (one repeat)."""
    by_index = {}
    for r in records:
        by_index.setdefault(r["index"], []).append(r)
    assert all(len(v) == k for v in by_index.values())
    correct = [sum(r["success"] for r in v) for v in by_index.values()]
    assert bench["n_problems"] == len(by_index) and bench["k"] == k and bench["repeats"] == 1
    assert bench["mean_score"] == pytest.approx(sum(r["score"] for r in records) / len(records))
    assert bench["accuracy"] == pytest.approx(sum(r["success"] for r in records) / len(records))
    assert bench["accuracy_std_over_repeats"] is None
    assert set(bench["pass@k"]) == {str(kk) for kk in (1, 2, 4, 8, 16) if kk < k} | {str(k)}
    for kk, value in bench["pass@k"].items():
        assert value == pytest.approx(sum(exact_pass_at_k(k, c, int(kk)) for c in correct) / len(correct))
    assert bench["zero_success_rate"] == pytest.approx(sum(c == 0 for c in correct) / len(correct))
    assert bench["all_success_rate"] == pytest.approx(sum(c == k for c in correct) / len(correct))


# ------------------------------------------------------------------------------------------------
# real generation with the embedded model
# ------------------------------------------------------------------------------------------------


def test_embedded_model_end_to_end_and_resume(tmp_path, data, monkeypatch):
    gen = CountingGenerator(generation.iter_samples)
    monkeypatch.setattr(generation, "iter_samples", gen)
    out = tmp_path / "out"
    args = ["--model", TINY, "--benchmarks", str(data["arithmetic"]), f"cd={data['countdown']}", "--k", "2",
            "--max-new-tokens", "16", "--limit", "3", "--backend", "hf", "--batch-size", "4", "--out", str(out)]
    assert main(args) == 0
    assert len(gen.calls) == 1 and gen.calls[0]["n_samples"] == 2 * 3 * 2  # one model load for both benchmarks

    summary = json.loads((out / "model" / "summary.json").read_text())
    assert summary["model"] == TINY and summary["step"] is None
    assert summary["sampling"] == {"preset": None, "temperature": 1.0, "top_p": 1.0, "top_k": -1,
                                   "max_new_tokens": 16, "seed": 0, "backend": "hf"}
    assert set(summary["benchmarks"]) == {"arithmetic", "cd"}
    files = {}
    for name, path in (("arithmetic", data["arithmetic"]), ("cd", data["countdown"])):
        files[name] = out / "model" / name / "samples.jsonl"
        records = samples(files[name])
        rows = {row["extra_info"]["index"]: row for row in read_rows(path)[:3]}
        assert [(r["index"], r["repeat"], r["sample"]) for r in records] == \
               [(i, 0, j) for i in sorted(rows) for j in range(2)]
        for r in records:
            assert set(r) == RECORD_KEYS and r["benchmark"] == name and r["response"]
            row = rows[r["index"]]
            scored = compute_score(row["data_source"], r["response"], row["reward_model"]["ground_truth"])
            assert r["score"] == scored["score"] and r["success"] == (scored["score"] >= 1)
            assert r["has_answer"] == bool(scored["has_answer"]) and isinstance(r["too_long"], bool)
        assert records[0]["response"] != records[1]["response"]  # the k samples of a problem differ
        assert set(summary["benchmarks"][name]) == BENCH_KEYS
        check_summary_against_samples(summary["benchmarks"][name], records, k=2)
    complete = {name: f.read_text() for name, f in files.items()}

    # interrupted: arithmetic lost 3 samples and its last line was cut mid-write, cd lost 4 samples
    lines = complete["arithmetic"].splitlines(keepends=True)
    files["arithmetic"].write_text("".join(lines[:3]) + lines[3][:20])
    files["cd"].write_text("".join(complete["cd"].splitlines(keepends=True)[:2]))
    (out / "model" / "summary.json").write_text(json.dumps({**summary, "benchmarks": {}}))
    gen.calls.clear()
    assert main(args) == 0
    assert len(gen.calls) == 1 and gen.calls[0]["n_samples"] == 3 + 4  # only the missing samples
    assert {name: f.read_text() for name, f in files.items()} == complete  # per-sample seeds: the same samples
    assert json.loads((out / "model" / "summary.json").read_text()) == summary

    def no_generation(*a, **k):
        raise AssertionError("nothing is missing: no model should be loaded")

    monkeypatch.setattr(generation, "iter_samples", no_generation)
    assert main(args) == 0
    assert json.loads((out / "model" / "summary.json").read_text()) == summary


def fsdp_checkpoint(actor, model_dir):
    """A world-size-1 FSDP checkpoint of ``model_dir`` as verl's checkpoint manager lays it out."""
    (actor / "huggingface").mkdir(parents=True)
    for f in model_dir.iterdir():
        if f.suffix != ".safetensors":
            shutil.copy(f, actor / "huggingface")
    torch.save(load_file(model_dir / "model.safetensors"), actor / "model_world_size_1_rank_0.pt")
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 1}))


@pytest.mark.e2e  # verl's model merger in a fresh interpreter: `make test` runs it beside the trainer runs
@pytest.mark.beside
def test_run_directory_over_steps(tmp_path, data):
    model_dir = Path(embedded_model_path(2))
    run = tmp_path / "run"
    (run / "global_step_1" / "actor").mkdir(parents=True)
    (run / "global_step_1" / "actor" / "huggingface").symlink_to(model_dir)  # saved with hf_model
    fsdp_checkpoint(run / "global_step_2" / "actor", model_dir)  # shards only: merged first
    args = ["--run", str(run), "--base-model", TINY, "--benchmarks", f"arith={data['arithmetic']}", "--k", "2",
            "--max-new-tokens", "8", "--limit", "2", "--backend", "hf"]
    assert main(args) == 0

    out = run / "eval"
    curve = samples(out / "curve.jsonl")
    assert [(c["step"], c["benchmark"]) for c in curve] == [(0, "arith"), (1, "arith"), (2, "arith")]
    models = {}
    for c in curve:
        assert set(c) == CURVE_KEYS
        summary = json.loads((out / f"step_{c['step']}" / "summary.json").read_text())
        assert summary["step"] == c["step"]
        assert {key: c[key] for key in CURVE_KEYS - {"step", "benchmark"}} == \
               {key: summary["benchmarks"]["arith"][key] for key in CURVE_KEYS - {"step", "benchmark"}}
        models[c["step"]] = summary["model"]
    assert models == {0: TINY, 1: str(run / "global_step_1" / "actor" / "huggingface"),
                      2: str(run / "global_step_2" / "actor")}
    # step 0 and step 1 are the same weights, so the same samples
    responses = {s: [r["response"] for r in samples(out / f"step_{s}" / "arith" / "samples.jsonl")] for s in (0, 1, 2)}
    assert responses[0] == responses[1] and len(responses[2]) == 4
    merged = load_file(out / "merged" / "step_2" / "model.safetensors")  # verl's merger writes bfloat16
    original = load_file(model_dir / "model.safetensors")
    assert all(torch.equal(merged[key], original[key].to(merged[key].dtype)) for key in original)

    # one step again, with a new benchmark: the curve keeps every evaluated (step, benchmark)
    assert main(args[:2] + ["--steps", "2"] + args[4:6] + [f"cd={data['countdown']}"] + args[6:]) == 0
    assert [(c["step"], c["benchmark"]) for c in samples(out / "curve.jsonl")] == \
           [(0, "arith"), (1, "arith"), (2, "arith"), (2, "cd")]


# ------------------------------------------------------------------------------------------------
# exact numbers with a scripted generator
# ------------------------------------------------------------------------------------------------

RIGHT, WRONG = "<answer>1 + 2 + 3</answer>", "<answer>1 + 2 * 3</answer>"  # scores 1.0 and 0.1
CORRECT = {10: [4, 2, 0], 11: [0, 1, 4], 12: [1, 3, 2]}  # correct samples (the first ones) per task and repeat


class ScriptedGenerator:
    def __init__(self, rows):
        self.index_of = {r["prompt"][-1]["content"]: r["extra_info"]["index"] for r in rows}
        self.calls = []

    def __call__(self, model, prompts, sampling, *, sample_ids, backend, batch_size):
        self.calls.append(dict(model=model, sampling=sampling, sample_ids=sample_ids, backend=backend))
        for i, (prompt, ids) in enumerate(zip(prompts, sample_ids, strict=True)):
            index = self.index_of[prompt[-1]["content"]]
            for number in ids:
                repeat, sample = divmod(number, REPEAT_STRIDE)
                yield i, number, Completion(RIGHT if sample < CORRECT[index][repeat] else WRONG, sample == 3)


@pytest.fixture
def countdown_file(tmp_path):
    rows = [make_row(data_source="countdown", ability="math", question=f"Make 6 from [1, 2, 3] (task {i}).",
                     ground_truth=ground_truth_json({"target": 6, "numbers": [1, 2, 3]}), index=i, split="test")
            for i in CORRECT]
    return write_rows(rows, tmp_path / "countdown" / "test.parquet"), rows


def test_exact_numbers_with_a_scripted_generator(tmp_path, countdown_file, monkeypatch):
    path, rows = countdown_file
    fake = ScriptedGenerator(rows)
    monkeypatch.setattr(generation, "iter_samples", fake)
    out = tmp_path / "out"
    assert main(["--model", "some/model", "--benchmarks", str(path), "--preset", "progress", "--k", "4",
                 "--repeats", "2", "--out", str(out)]) == 0

    (call,) = fake.calls
    assert call["sampling"] == Sampling(n=1, temperature=0.6, top_p=0.95, top_k=20, max_new_tokens=1024, seed=0)
    assert call["sample_ids"] == [[0, 1, 2, 3, REPEAT_STRIDE, REPEAT_STRIDE + 1, REPEAT_STRIDE + 2, REPEAT_STRIDE + 3]] * 3
    summary = json.loads((out / "model" / "summary.json").read_text())
    assert summary["sampling"]["preset"] == "progress"
    bench = summary["benchmarks"]["countdown"]
    assert bench["n_problems"] == 3 and bench["k"] == 4 and bench["repeats"] == 2
    assert bench["accuracy"] == pytest.approx(11 / 24)  # 11 correct of 24
    assert bench["mean_score"] == pytest.approx((11 + 13 * 0.1) / 24)  # the others score 0.1
    assert bench["accuracy_std_over_repeats"] == pytest.approx((6 / 12 - 5 / 12) / math.sqrt(2))  # 5/12 and 6/12
    # per repeat: pass@2 of c = 4, 0, 1 is 1, 0, 1/2 and of c = 2, 1, 3 is 5/6, 1/2, 1
    assert bench["pass@k"] == pytest.approx({"1": 11 / 24, "2": (1.5 / 3 + (5 / 6 + 0.5 + 1) / 3) / 2,
                                             "4": (2 / 3 + 3 / 3) / 2})
    assert bench["zero_success_rate"] == pytest.approx((1 / 3 + 0) / 2)
    assert bench["all_success_rate"] == pytest.approx((1 / 3 + 0) / 2)
    records = samples(out / "model" / "countdown" / "samples.jsonl")
    assert len(records) == 24 and sum(r["too_long"] for r in records) == 6

    # more repeats later: only the new repeat is generated; the first two are kept
    fake.calls.clear()
    assert main(["--model", "some/model", "--benchmarks", str(path), "--preset", "progress", "--k", "4",
                 "--repeats", "3", "--out", str(out)]) == 0
    assert fake.calls[0]["sample_ids"] == [[2 * REPEAT_STRIDE + j for j in range(4)]] * 3
    assert samples(out / "model" / "countdown" / "samples.jsonl")[:8] == records[:8]


def test_another_sampling_configuration_in_the_same_folder_fails(tmp_path, countdown_file, monkeypatch):
    path, rows = countdown_file
    monkeypatch.setattr(generation, "iter_samples", ScriptedGenerator(rows))
    base = ["--model", "m", "--benchmarks", str(path), "--k", "2", "--out", str(tmp_path / "out")]
    assert main(base) == 0
    with pytest.raises(SystemExit, match=r"temperature 1.0 -> 0.5.*another --out"):
        main(base + ["--temperature", "0.5"])
    with pytest.raises(SystemExit, match="another model"):
        main(["--model", "other"] + base[2:])


def fake_vllm(log):
    """A ``vllm`` module whose completions name their prompt and seed; vLLM seeds sample c of a
    request ``seed + c`` (its child requests); ``c == 0`` stops at the length limit."""

    class Tokenizer:
        eos_token_id = 0

        def apply_chat_template(self, messages, add_generation_prompt, tokenize, return_dict):
            return [int(messages[-1]["content"])]

    class SamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    class LLM:
        def __init__(self, **kwargs):
            pass

        def get_tokenizer(self):
            return Tokenizer()

        def generate(self, prompts, params):
            params = params if isinstance(params, list) else [params] * len(prompts)
            log.append([(p["prompt_token_ids"][0], q.kwargs) for p, q in zip(prompts, params, strict=True)])
            return [types.SimpleNamespace(outputs=[
                types.SimpleNamespace(text=f"{p['prompt_token_ids'][0]}:{q.kwargs['seed'] + c}",
                                      finish_reason="length" if c == 0 else "stop",
                                      token_ids=[5] * (c + 1) + ([] if c == 0 else [Tokenizer.eos_token_id]))
                for c in range(q.kwargs["n"])]) for p, q in zip(prompts, params)]

    module = types.ModuleType("vllm")
    module.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    module.LLM, module.SamplingParams = LLM, SamplingParams
    module.platforms = types.ModuleType("vllm.platforms")
    module.platforms.current_platform = types.SimpleNamespace(is_cpu=lambda: False)
    return module


def test_vllm_generates_any_subset_of_sample_numbers(monkeypatch):
    log = []
    fake = fake_vllm(log)
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setitem(sys.modules, "vllm.platforms", fake.platforms)
    monkeypatch.setattr(generation, "VLLM_CHUNK_SAMPLES", 4)
    prompts = [[{"role": "user", "content": str(p)}] for p in (7, 8)]
    sampling = Sampling(temperature=0.6, top_p=0.95, top_k=20, max_new_tokens=64, seed=5)
    wanted = [[0, 1, 2, REPEAT_STRIDE + 1], [3]]
    got = list(generation.iter_samples("m", prompts, sampling, sample_ids=wanted, backend="vllm"))
    # sample number s of a prompt is always seeded seed + s
    assert sorted((i, s, c.text) for i, s, c in got) == sorted((i, s, f"{7 + i}:{5 + s}") for i, ids in enumerate(wanted)
                                                               for s in ids)
    # one request per contiguous run of sample numbers, at most 4 samples per generate call
    assert [[(p, q["n"], q["seed"]) for p, q in call] for call in log] == \
           [[(7, 3, 5), (7, 1, 5 + REPEAT_STRIDE + 1)], [(8, 1, 8)]]
    assert all(q["top_k"] == 20 and q["top_p"] == 0.95 and q["max_tokens"] == 64 for call in log for _, q in call)
    assert {(i, s) for i, s, c in got if c.too_long} == {(0, 0), (0, REPEAT_STRIDE + 1), (1, 3)}
    # tokens generated, EOS not counted (sample c of a request has c + 1)
    assert {(i, s): c.num_tokens for i, s, c in got} == {(0, 0): 1, (0, 1): 2, (0, 2): 3, (0, REPEAT_STRIDE + 1): 1,
                                                          (1, 3): 1}


# ------------------------------------------------------------------------------------------------
# presets and input errors
# ------------------------------------------------------------------------------------------------


def test_presets_and_explicit_flags(tmp_path, countdown_file):
    path, _ = countdown_file
    for name in ("aime24", "math500"):
        (tmp_path / "data" / name).mkdir(parents=True)
        shutil.copy(path, tmp_path / "data" / name / "test.parquet")
    common = ["--model", "m", "--out", "o", "--data-dir", str(tmp_path / "data"), "--benchmarks", "aime24", "math500"]

    def resolved(*flags):
        args = parse_args(common + list(flags))
        settings = settings_of(args)
        return settings, {b.name: b.k for b in load_benchmarks(args.benchmarks, args.data_dir, settings, args.k, None)}

    settings, ks = resolved("--preset", "cbs")
    assert ks == {"aime24": 32, "math500": 4} and settings["temperature"] == 1.0 and settings["max_new_tokens"] == 4096
    assert resolved("--preset", "cbs", "--k", "8")[1] == {"aime24": 8, "math500": 8}
    settings, ks = resolved("--preset", "coba", "--top-p", "0.8")
    assert ks == {"aime24": 16, "math500": 16} and settings["top_p"] == 0.8 and settings["temperature"] == 1.0
    settings, _ = resolved("--preset", "ads")
    assert settings["repeats"] == 3 and settings["temperature"] == 0.7 and settings["max_new_tokens"] == 16384
    assert settings["top_p"] == 0.8  # the authors' validation top-p
    settings, _ = resolved("--preset", "progress")
    assert (settings["temperature"], settings["top_k"], settings["top_p"], settings["max_new_tokens"]) == (0.6, 20, 0.95, 1024)
    assert resolved("--preset", "bots")[0]["temperature"] == 0.0
    assert set(PRESETS) == {"bots", "cbs", "coba", "ads", "progress"}


def test_bad_inputs_fail_clearly(tmp_path, countdown_file):
    path, _ = countdown_file
    model = ["--model", "m", "--out", str(tmp_path / "out")]
    run = tmp_path / "run"
    (run / "global_step_3" / "actor" / "huggingface").mkdir(parents=True)
    (run / "global_step_4" / "actor").mkdir(parents=True)
    cases = [
        (model + ["--benchmarks", f"x={tmp_path / 'missing.parquet'}"], r"benchmark 'x': no such file .*missing.parquet"),
        (model + ["--benchmarks", "nope", "--data-dir", str(tmp_path)], r"unknown benchmark 'nope'.*python -m data_prep nope"),
        (model + ["--benchmarks", str(path), f"countdown={path}"], "given twice"),
        (model + ["--benchmarks", str(path), "--k", "0"], r"--k must be in \[1, "),
        (model + ["--benchmarks", str(path), "--top-p", "0"], r"--top-p must be in \(0, 1\]"),
        (model + ["--benchmarks", str(path), "--limit", "0"], "--limit must be >= 1"),
        (["--model", "m", "--benchmarks", str(path)], "--out is required with --model"),
        (model + ["--benchmarks", str(path), "--base-model", "b"], "go with --run"),
        (["--run", str(tmp_path / "nowhere"), "--benchmarks", str(path)], "not a directory"),
        (["--run", str(run), "--benchmarks", str(path), "--steps", "5"], r"no checkpoint global_step_5 \(saved: \[3, 4\]\)"),
        (["--run", str(run), "--benchmarks", str(path), "--steps", "0"], "pass it as --base-model"),
        (["--run", str(run), "--benchmarks", str(path), "--steps", "3"], "neither a Hugging Face model"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit, match=message):
            main(argv)
    bad = tmp_path / "bad.parquet"
    rows = read_rows(path)
    rows[1]["data_source"] = "no_such_source"
    pd.DataFrame(rows).to_parquet(bad, index=False)
    with pytest.raises(SystemExit, match=r"benchmark 'bad': .*row 1, field 'data_source'"):
        main(model + ["--benchmarks", f"bad={bad}"])


def test_run_checkpoints_of_rl_and_sft_runs(tmp_path):
    from eval.evaluate import run_checkpoints

    for kind, layout in (("rl", "actor/huggingface"), ("sft", "huggingface")):  # verl's RL / SFT trainer layouts
        (tmp_path / kind / "global_step_2" / layout).mkdir(parents=True)
        (tmp_path / kind / "global_step_2" / layout / "model.safetensors").touch()
        (step,) = run_checkpoints(tmp_path / kind, "all", None)
        assert (step.label, step.step, step.model, step.fsdp) == (
            "step_2", 2, str(tmp_path / kind / "global_step_2" / layout), False)
    (tmp_path / "sft" / "global_step_4").mkdir()
    (tmp_path / "sft" / "global_step_4" / "fsdp_config.json").touch()  # shards only: merged before loading
    assert run_checkpoints(tmp_path / "sft", "4", None)[0].fsdp


def test_the_typed_config_refuses_what_the_command_line_refuses():
    from eval.evaluate import EvalConfig, EvalError

    with pytest.raises(EvalError, match="one of --model and --run"):
        EvalConfig(benchmarks=("b",))
    with pytest.raises(EvalError, match="--out is required with --model"):
        EvalConfig(benchmarks=("b",), model="m")
    with pytest.raises(EvalError, match="--steps and --base-model go with --run"):
        EvalConfig(benchmarks=("b",), model="m", out=Path("o"), steps="0,2")
    assert EvalConfig(benchmarks=("b",), run=Path("r")).steps == "all"
