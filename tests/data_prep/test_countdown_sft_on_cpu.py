"""Countdown SFT data from any RL file: the exact solver (``data_prep.countdown_solver``) and
``python -m data_prep.sft_messages --from-rl`` on Countdown-Tasks-3to4-format rows."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from data_prep import embedded_datasets
from data_prep.countdown_solver import solve
from data_prep.schema import DataError, make_row, write_rows
from data_prep.sft_messages import main, worked_solution
from verl_ext.rewards import compute_score


def _score(expression: str, numbers: list[int], target: int) -> float:
    return compute_score("countdown", f"<answer>{expression}</answer>", {"target": target, "numbers": numbers})["score"]


@pytest.mark.parametrize("numbers, target", [([1, 3, 4, 6], 24), ([2, 2, 82], 39), ([7, 6, 27], 27),
                                             ([25, 50, 75, 100], 100), ([3, 8], 24), ([5], 5)])
def test_solver_finds_expressions_the_verifier_scores_1(numbers, target):
    expression = solve(numbers, target)
    assert expression is not None and _score(expression, numbers, target) == 1.0
    assert solve(list(numbers), target) == expression  # deterministic


def test_solver_needs_fractions_and_knows_when_there_is_no_solution():
    assert solve([1, 3, 4, 6], 24) == "6/(1 - 3/4)"  # only through the intermediate 1/4
    assert solve([1, 1, 1], 100) is None
    assert solve([2, 3], 7) is None
    assert solve([], 0) is None


def test_solver_solves_every_embedded_countdown_task():
    rows = embedded_datasets.countdown(train_size=200, test_size=8, seed=1)["train"]
    for row in rows:
        numbers, target = row["reward_model"]["ground_truth"]["numbers"], row["reward_model"]["ground_truth"]["target"]
        expression = solve(numbers, target)
        assert expression is not None and _score(expression, numbers, target) == 1.0, (numbers, target, expression)
        unsolved = {**row, "extra_info": {k: v for k, v in row["extra_info"].items() if k != "solution"}}
        assert worked_solution(unsolved) == f"<think>{expression} = {target}</think> <answer>{expression}</answer>"


def _tasks_3to4(cases: list[tuple[list[int], int]], data_source: str = "countdown_tasks_3to4") -> list[dict]:
    """Rows as ``data_prep.sources.countdown`` makes them."""
    template = embedded_datasets.COUNTDOWN_TEMPLATE
    return [make_row(data_source=data_source, question=template.format(numbers=nums, target=target),
                     ability="math", ground_truth={"target": target, "numbers": nums}, index=100 + i, split="train",
                     num_count=len(nums), target=target, bucket=embedded_datasets.countdown_bucket(len(nums), target))
            for i, (nums, target) in enumerate(cases)]


def test_from_rl_writes_solved_rows_and_reports_unsolvable_ones(tmp_path, capsys):
    cases = [([1, 3, 4, 6], 24), ([1, 1, 1], 100), ([19, 36, 55, 7], 65), ([44, 19, 35], 98), ([2, 2, 82], 39)]
    source = write_rows(_tasks_3to4(cases), tmp_path / "rl.parquet")
    out = tmp_path / "sft" / "countdown_sft.parquet"
    assert main(["--from-rl", str(source), "--out", str(out)]) == 0
    summary = json.loads(out.with_suffix(".json").read_text())
    assert summary["rows"] == 5 and summary["written"] == 4 and summary["unsolvable"] == 1
    assert summary["unsolvable_rows"] == [1] and summary["unsolvable_indices"] == [101]
    assert "4 of 5 rows written; 1 unsolvable" in capsys.readouterr().out
    written = pd.read_parquet(out)
    assert list(written.columns) == ["messages", "data_source", "index"]
    assert list(written["index"]) == [100, 102, 103, 104]
    for (nums, target), messages in zip([c for i, c in enumerate(cases) if i != 1], written["messages"], strict=True):
        assert messages[0]["role"] == "user" and str(target) in messages[0]["content"]
        answer = messages[-1]
        assert answer["role"] == "assistant" and answer["content"].startswith("<think>")
        truth = {"target": target, "numbers": nums}
        assert compute_score("countdown_tasks_3to4", answer["content"], truth)["score"] == 1.0

    assert main(["--from-rl", str(source), "--out", str(tmp_path / "first2.parquet"), "--limit", "2"]) == 0
    assert json.loads((tmp_path / "first2.json").read_text())["rows"] == 2
    assert len(pd.read_parquet(tmp_path / "first2.parquet")) == 1


def test_from_rl_stops_on_a_data_source_without_worked_solutions(tmp_path):
    rows = _tasks_3to4([([1, 3, 4, 6], 24), ([2, 2, 82], 39)])
    rows[1] = {**rows[1], "data_source": "gsm8k", "reward_model": {"style": "rule", "ground_truth": "7"}}
    rows[0]["reward_model"]["ground_truth"] = json.dumps(rows[0]["reward_model"]["ground_truth"])  # one column type
    source = write_rows(rows, tmp_path / "mixed.parquet")
    with pytest.raises(DataError, match="gsm8k") as err:
        main(["--from-rl", str(source), "--out", str(tmp_path / "out.parquet")])
    assert err.value.source == str(source) and err.value.row == 1 and err.value.field == "data_source"
    assert not (tmp_path / "out.parquet").exists()


def test_cli_keeps_the_embedded_form_and_rejects_mixed_ones(tmp_path):
    assert main(["countdown", "--out", str(tmp_path), "--train-size", "4", "--test-size", "2"]) == 0
    assert len(pd.read_parquet(tmp_path / "countdown_sft" / "train.parquet")) == 4
    for argv in (["countdown", "--from-rl", "x.parquet"], [], ["--from-rl", "x.parquet", "--out", "dir"],
                 ["countdown", "--limit", "3"]):
        with pytest.raises(SystemExit):
            main(argv)
