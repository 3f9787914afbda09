"""``asingh15_countdown_tasks_3to4``: the paper's Countdown data (train + the official 50-prompt test split) on
fixtures in its published format, and the held-out split that leaves the official test tasks out."""

from pathlib import Path

import pandas as pd
import pytest

from data_prep import countdown_split as split
from data_prep.schema import DataError, read_rows
from data_prep.sources import REGISTRY
from verl_ext.rewards import compute_score

HUB = Path(__file__).resolve().parents[1] / "fixtures" / "hub"
TRAIN, TEST = (HUB / f"asingh15_countdown_tasks_3to4_{s}.parquet" for s in ("train", "test"))
convert = REGISTRY["asingh15_countdown_tasks_3to4"]


def chatml(messages: list[dict]) -> str:
    """Qwen2.5's chat template (ChatML) with the generation prompt, for messages that start with a system turn."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + "<|im_start|>assistant\n"


@pytest.mark.parametrize("path, split, data_source", [(TRAIN, "train", "countdown_tasks_3to4"),
                                                      (TEST, "test", "countdown_tasks_3to4_test")])
def test_converts_both_splits_with_the_published_prompt(path, split, data_source):
    source = pd.read_parquet(path)
    report: dict = {}
    rows = convert(str(path), split=split, report=report)
    assert report == {"kept": len(source)} and convert(str(path), split=split) == rows  # stable
    for i, (row, hub) in enumerate(zip(rows, source.itertuples())):
        assert row["data_source"] == data_source
        assert chatml(row["prompt"]) == hub.prompt  # verl's chat template gives back the checkpoint's prompt
        assert row["prompt"][0] == {"role": "system", "content": "You are a helpful assistant."}
        truth = row["reward_model"]["ground_truth"]
        assert truth == {"target": int(hub.target), "numbers": [int(n) for n in hub.nums]}
        info = row["extra_info"]
        assert (info["index"], info["split"], info["dataset"]) == (i, split, "asingh15/countdown_tasks_3to4")
        assert info["bucket"] == (len(truth["numbers"]) - 3) * 4 + sum(truth["target"] >= b for b in (25, 50, 75))
    solved, answer = (2, "<answer>4*7 - 9</answer>") if split == "train" else (0, "<answer>44 + 19 + 35</answer>")
    assert compute_score(data_source, answer, rows[solved]["reward_model"]["ground_truth"])["score"] == 1.0


def test_cli_writes_the_test_split(tmp_path):
    from data_prep.__main__ import main

    assert main(["asingh15_countdown_tasks_3to4", "--input", str(TEST), "--split", "test", "--out", str(tmp_path)]) == 0
    rows = read_rows(tmp_path / "asingh15_countdown_tasks_3to4" / "test.parquet")
    assert [r["extra_info"]["split"] for r in rows] == ["test", "test"]


def _bad(tmp_path, **change) -> str:
    frame = pd.read_parquet(TRAIN)
    for column, (row, value) in change.items():
        frame.at[row, column] = value
    frame.to_parquet(tmp_path / "bad.parquet")
    return str(tmp_path / "bad.parquet")


@pytest.mark.parametrize("change, field, message", [
    ({"prompt": (1, "Using the numbers [3 8 2], create an equation that equals 80.")}, "prompt", "chat-templated"),
    ({"target": (2, 20)}, "ground_truth", "disagrees"),
    ({"nums": (3, [25, 5])}, "target/nums", "3 or 4 integers"),
])
def test_bad_rows_name_row_and_field(tmp_path, change, field, message):
    with pytest.raises(DataError, match=message) as err:
        convert(_bad(tmp_path, **change))
    assert (err.value.field, err.value.row) == (field, next(iter(change.values()))[0])


def test_prompt_for_another_task_is_refused(tmp_path):
    frame = pd.read_parquet(TRAIN)
    frame.at[0, "prompt"] = frame.at[1, "prompt"]
    frame.to_parquet(tmp_path / "shifted.parquet")
    with pytest.raises(DataError, match="target 28"):
        convert(str(tmp_path / "shifted.parquet"))


def test_unknown_split_and_offline_hub(monkeypatch):
    with pytest.raises(ValueError, match="'validation'"):
        convert(str(TRAIN), split="validation")
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("offline")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(RuntimeError, match="split 'test' from https://huggingface.co/datasets/asingh15/countdown_tas"):
        convert(None, split="test")


def test_held_out_split_leaves_out_the_official_test_tasks(tmp_path):
    from data_prep.__main__ import main

    for s, path in (("train", TRAIN), ("test", TEST)):
        main(["asingh15_countdown_tasks_3to4", "--input", str(path), "--split", s, "--out", str(tmp_path)])
    data = tmp_path / "asingh15_countdown_tasks_3to4"
    assert split.main(["--input", str(data / "train.parquet"), "--out", str(tmp_path), "--test-size", "1",
                       "--sft-size", "1", "--sft-test-size", "1", "--exclude", str(data / "test.parquet")]) == 0
    official = {split.task_key(r, "", 0) for r in read_rows(data / "test.parquet")}
    kept = [split.task_key(r, "", 0) for _, folder, name in split.OUTPUTS
            for r in read_rows(tmp_path / folder / f"{name}.parquet")]
    assert len(kept) == 4 and not official & set(kept)  # 5 training rows, one of them an official test task
    report = (tmp_path / "countdown" / "split.json").read_text()
    assert '"excluded_rows": 1' in report and '"repeated_tasks_dropped": 0' in report
