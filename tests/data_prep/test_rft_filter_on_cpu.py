"""``python -m data_prep.rft_filter``: verifier-filtered self-training data (naive: 2 correct per prompt, 30 % SFT;
clean: the shortest format-clean correct one, 50 % SFT) from eval.evaluate-style samples of embedded Countdown."""

import json

import pandas as pd
import pytest

from data_prep import embedded_datasets, sft_messages
from data_prep.rft_filter import main, sft_mix_size
from data_prep.schema import read_rows

CLEAN = {"has_answer": True, "multiple_answers": False, "multiple_think": False, "parse_error": False,
         "too_long": False}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("rft")
    train = embedded_datasets.build("countdown", root, train_size=4, test_size=2)["train"]
    sft_train = sft_messages.build("countdown", root, train_size=12, test_size=2, seed=1)["train"]
    index = [r["extra_info"]["index"] for r in read_rows(train)]
    a, b, c, d = index
    samples = [  # (index, sample, score, response, flags)
        (a, 0, 1.0, "<think>x</think> <answer>long correct</answer>", CLEAN),
        (a, 1, 0.1, "<answer>wrong</answer>", CLEAN),
        (a, 2, 1.0, "<answer>ok</answer><answer>ok</answer>", {**CLEAN, "multiple_answers": True}),
        (a, 3, 1.0, "<answer>mid</answer>", CLEAN),
        (b, 5, 1.0, "<think>a</think><think>b</think><answer>t</answer>", {**CLEAN, "multiple_think": True}),
        (b, 1, 1.0, "<answer>cut</answer>", {**CLEAN, "too_long": True}),
        (c, 0, 0.0, "no answer", {**CLEAN, "has_answer": False}),
        (d, 7, 1.0, "<answer>d7</answer>", CLEAN),
    ]
    path = root / "samples.jsonl"
    path.write_text("".join(json.dumps({"benchmark": "train", "index": i, "sample": s, "repeat": 0, "score": sc,
                                        "success": sc >= 1, "response": resp, **flags}) + "\n"
                            for i, s, sc, resp, flags in samples))
    return root, train, sft_train, path, index


def _run(data, name):
    root, train, sft_train, samples, _ = data
    out = root / name / "train.parquet"
    assert main(["--samples", str(samples), "--train", str(train), "--sft", str(sft_train), "--filter", name,
                 "--out", str(out)]) == 0
    return pd.read_parquet(out).to_dict("records"), json.loads(out.with_suffix(".json").read_text())


def test_naive_keeps_two_correct_per_prompt_and_30_percent_sft(data):
    rows, summary = _run(data, "naive")
    a, b, c, d = data[4]
    answers = [(r["index"], r["messages"][-1]["content"]) for r in rows[:summary["rft_rows"]]]
    assert answers == [(a, "<think>x</think> <answer>long correct</answer>"),
                       (a, "<answer>ok</answer><answer>ok</answer>"),  # samples 0 and 2: the lowest numbers
                       (b, "<answer>cut</answer>"), (b, "<think>a</think><think>b</think><answer>t</answer>"),
                       (d, "<answer>d7</answer>")]
    assert summary["sft_rows"] == round(0.3 / 0.7 * 5) == 2 and len(rows) == 7
    prompts = {r["extra_info"]["index"]: r["prompt"] for r in read_rows(data[1])}
    assert [m["content"] for m in rows[0]["messages"][:-1]] == [m["content"] for m in prompts[a]]  # the RL prompt
    assert all(r["messages"][-1]["role"] == "assistant" for r in rows)


def test_clean_keeps_the_shortest_clean_correct_one_and_50_percent_sft(data):
    rows, summary = _run(data, "clean")
    a, b, c, d = data[4]
    answers = [(r["index"], r["messages"][-1]["content"]) for r in rows[:summary["rft_rows"]]]
    assert answers == [(a, "<answer>mid</answer>"), (d, "<answer>d7</answer>")]  # b: none clean; c: none correct
    assert summary["sft_rows"] == 2 and summary["rft_prompts"] == 2 and summary["correct"] == 6


def test_mix_sizes_and_bad_samples(data, tmp_path, capsys):
    assert sft_mix_size(7, 0.3, 100) == 3 and sft_mix_size(10, 0.5, 4) == 4 and sft_mix_size(0, 0.5, 9) == 0
    root, train, sft_train, _, _ = data
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"index": 10**9, "sample": 0, "score": 1.0, "response": "x"}) + "\n")
    args = ["--samples", str(bad), "--train", str(train), "--sft", str(sft_train), "--filter", "naive", "--out",
            str(tmp_path / "o.parquet")]
    err = main(args), capsys.readouterr().err
    assert err[0] == 2 and str(bad) in err[1] and "index" in err[1] and "not in" in err[1]
    bad.write_text(json.dumps({"index": 1, "sample": 0, "score": 1.0}) + "\n")
    assert main(args) == 2 and "response" in capsys.readouterr().err


def test_the_chain_refuses_another_chain_in_its_folder_and_a_sample_set_without_a_correct_one(data, tmp_path):
    """``python -m verl_ext.apps.rft``'s checks before and after sampling (its whole path: tests/trainer/
    test_progress_chain_on_cpu.py)."""
    from verl_ext.apps import rft

    _, train, sft_train, _, index = data
    (tmp_path / "samples" / "model" / "train").mkdir(parents=True)  # a finished sampling stage: nothing correct
    (tmp_path / "samples" / "model" / "train" / "samples.jsonl").write_text("".join(
        json.dumps({"benchmark": "train", "index": i, "sample": 0, "repeat": 0, "score": 0.1, "success": False,
                    "response": "<answer>1</answer>", **CLEAN}) + "\n"
        for i in index))
    argv = ["--model", "embedded:2", "--train", str(train), "--sft", str(sft_train), "--test", str(train),
            "--out", str(tmp_path), "--k", "1"]
    with pytest.raises(SystemExit, match="no verifier-correct completion in 4 samples"):
        rft.main([*argv, "--filter", "naive", "--", "--version"])  # sampling finds the samples there: none missing
    assert json.loads((tmp_path / "rft.json").read_text())["sft_overrides"] == ["--version"]
    with pytest.raises(SystemExit, match=r"holds another chain \(filter: 'naive' -> 'clean', sft_overrides"):
        rft.main([*argv, "--filter", "clean"])
