"""Hub dataset converters on hand-written fixtures in each source's own format (no network).

Fixtures: ``tests/fixtures/hub/`` (parquet ones written by ``build_fixtures.py`` there).
"""

import json
from pathlib import Path

import pytest

from data_prep.embedded_datasets import LOGIC_INSTRUCTION, MATH_INSTRUCTION
from data_prep.schema import DataError
from data_prep.sources import REGISTRY, openr1
from data_prep.sources._common import CHOICE_INSTRUCTION, PROGRAM_INSTRUCTION
from verl_ext.rewards import compute_score
from verl_ext.rewards.code import score as code_score
from verl_ext.rewards.data_sources import domain_of

HUB = Path(__file__).resolve().parents[1] / "fixtures" / "hub"

# name: (fixture, hub id, domain, report, {row: (prompt, ground truth)} checked by hand)
CASES = {
    "guru_math": ("guru", "LLM360/guru-RL-92k", "math", {"kept": 3}, {
        2: ("Compute $\\frac{1}{2}+\\frac{1}{4}$.\n\n" + MATH_INSTRUCTION, "\\frac{3}{4}"),
    }),
    "guru_code": ("guru", "LLM360/guru-RL-92k", "code", {"kept": 4}, {}),
    "guru_logic": ("guru", "LLM360/guru-RL-92k", "logic", {"kept": 3, "zebra_puzzle": 1}, {
        0: ("Example 1\nInput: [[0, 1]]\nOutput: [[1, 0]]\n\nTest input: [[2, 3], [4, 5]]\nWhat is the output grid? "
            "Please put your answer within <answer> and </answer> tags.", "[[3, 2], [5, 4]]"),
        1: ("Every bird is a flyer; Tweety is a bird. Which name is a flyer?\n\n" + LOGIC_INSTRUCTION, "Tweety"),
        2: (None, '["pigeon", "sparrow", "quail"]'),
    }),
    "dapo_math": ("dapo-math-17k.parquet", "BytedTsinghua-SIA/DAPO-Math-17k", "math",
                  {"kept": 3, "duplicate_prompt": 1}, {
        2: ("What is the sum of the first $10$ positive integers?\n\n" + MATH_INSTRUCTION, "55"),
    }),
    "math_lvl3to5": ("math_lighteval_train.parquet", "DigitalLearningGmbH/MATH-lighteval", "math",
                     {"kept": 3, "level_1_2": 1, "level_unknown": 1}, {
        0: ("Simplify $\\frac{2}{4}$.\n\n" + MATH_INSTRUCTION, "\\frac{1}{2}"),
        2: (None, "x^2+1"),
    }),
    "openr1_math": ("openr1_math_default.parquet", "open-r1/OpenR1-Math-220k", "math",
                    {"kept": 2, "no_verified_generation": 2, "too_long": 0, "no_solution": 0,
                     "not_sampled": 0}, {
        1: ("What is $4\\cdot 3$?\n\n" + MATH_INSTRUCTION, "12"),
    }),
    "countdown_tasks_3to4": ("countdown_tasks_3to4.parquet", "Jiayi-Pan/Countdown-Tasks-3to4", "countdown",
                             {"kept": 3}, {2: (None, {"target": 28, "numbers": [95, 11, 56, 40]})}),
    "asingh15_countdown_tasks_3to4": ("asingh15_countdown_tasks_3to4_train.parquet", "asingh15/countdown_tasks_3to4",
                                      "countdown", {"kept": 5}, {2: (None, {"target": 19, "numbers": [7, 9, 4]})}),
    "aime24": ("aime_2024.parquet", "HuggingFaceH4/aime_2024", "math", {"kept": 3}, {1: (None, "801")}),
    "aime25": ("aime25_test.jsonl", "math-ai/aime25", "math", {"kept": 3}, {
        0: ("Find the sum of all integer bases $b>9$ for which $17_b$ is a divisor of $97_b$.\n\n" + MATH_INSTRUCTION,
            "70"),
    }),
    "amc23": ("amc23.parquet", "math-ai/amc23", "math", {"kept": 3}, {0: (None, "27"), 1: (None, "0.75")}),
    "math500": ("math500_test.jsonl", "HuggingFaceH4/MATH-500", "math", {"kept": 3}, {
        0: (None, "\\left( 3, \\frac{\\pi}{2} \\right)"),
    }),
    "minerva": ("minerva_test.jsonl", "math-ai/minervamath", "math", {"kept": 3}, {0: (None, "3.25")}),
    "olympiadbench": ("olympiadbench_OE_TO_maths_en_COMP.parquet", "Hothan/OlympiadBench", "math", {"kept": 3}, {
        1: (None, "2, -2"),
        2: ("A train travels 90 km at 60 km/h.\n\nHow long does the train take?\n\n" + MATH_INSTRUCTION,
            "\\frac{3}{2}"),
    }),
    "gpqa_diamond": ("gpqa_diamond.csv", "Idavidrein/gpqa", "math", {"kept": 3}, {}),
    "mmlu_pro": ("mmlu_pro_test.parquet", "TIGER-Lab/MMLU-Pro", "math", {"kept": 3}, {
        2: ("Which organelle makes ATP?\n\nA. Ribosome\nB. Mitochondrion\n\n" + CHOICE_INSTRUCTION, "B"),
    }),
    "mbpp": ("mbpp_full_test.parquet", "google-research-datasets/mbpp", "code", {"kept": 3}, {}),
    "livecodebench": ("livecodebench_test.jsonl", "livecodebench/code_generation_lite", "code",
                      {"kept": 2, "stdin": 1, "functional": 1}, {}),
    "guru_livecodebench": ("guru", "LLM360/guru-RL-92k", "code", {"kept": 2, "duplicate_prompt": 0}, {}),
    "guru_ordering_puzzles": ("guru", "LLM360/guru-RL-92k", "logic", {"kept": 2, "duplicate_prompt": 0}, {
        1: (None, '["Ann", "Bo", "Cy"]'),
    }),
    "guru_arc_agi": ("guru", "LLM360/guru-RL-92k", "logic", {"kept": 2, "duplicate_prompt": 1}, {
        0: (None, "[[0, 2], [3, 0]]"),  # in both published file names: kept once
        1: (None, "[[4, 4]]"),
    }),
}

TRAINING = {"guru_math", "guru_code", "guru_logic", "dapo_math", "math_lvl3to5", "openr1_math", "countdown_tasks_3to4",
            "asingh15_countdown_tasks_3to4"}
# No imports: `List` comes from the ground truth's "prefix", which the code verifier prepends.
TWO_SUM = "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
PAIR_SUM = "class Solution:\n    def maxPairSum(self, nums: List[int]) -> int:\n"
COUNT_PAIRS = "class Solution:\n    def countPairs(self, nums: List[int], k: int) -> int:\n"
SUM_STDIN = "a, b = map(int, input().split())\nprint(a + b)\n"
APPLES = "input()\na = list(map(int, input().split()))\nprint(sum(a) - max(a))\n"
# name: [(row, correct solution, wrong solution)]
SOLUTIONS = {
    "guru_code": [
        (0, TWO_SUM + "        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n"
                      "                return [seen[target - x], i]\n            seen[x] = i\n",
         TWO_SUM + "        return [0, 1]\n"),
        (1, PAIR_SUM + "        return sum(sorted(nums)[-2:])\n", PAIR_SUM + "        return 2 * max(nums)\n"),
        (2, "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"),
        (3, SUM_STDIN, "a, b = map(int, input().split())\nprint(a * b)\n"),
    ],
    "guru_livecodebench": [
        (0, COUNT_PAIRS + "        return sum(nums[i] + nums[j] == k for i in range(len(nums)) "
                          "for j in range(i + 1, len(nums)))\n", COUNT_PAIRS + "        return 1\n"),
        (1, APPLES, "input()\nprint(sum(map(int, input().split())))\n"),
    ],
    "mbpp": [
        (0, "def square(n):\r\n  return n * n", "def square(n):\n    return n + n\n"),
        (1, "def reverse_string(s):\n    return s[::-1]\n", "def reverse_string(s):\n    return s\n"),
        (2, "import math\ndef total(xs):\n    return math.fsum(xs)", "def total(xs):\n    return 6.0\n"),
    ],
    "livecodebench": [
        (0, SUM_STDIN, "print(3)\n"),
        (1, PAIR_SUM + "        return sum(sorted(nums)[-2:])\n", PAIR_SUM + "        return 2 * max(nums)\n"),
    ],
}


def convert(name: str, **kwargs) -> tuple[list[dict], dict]:
    report: dict = {}
    return REGISTRY[name](str(HUB / CASES[name][0]), report=report, **kwargs), report


def passes(row: dict, solution: str) -> bool:
    """The project's code verifier accepts ``solution`` for this row."""
    return code_score(f"```python\n{solution}\n```", row["reward_model"]["ground_truth"])["score"] == 1.0


def test_registry_names():
    assert set(REGISTRY) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_converts_to_contract_rows(name):
    _, _, domain, expected_report, checked = CASES[name]
    rows, report = convert(name)
    assert report == expected_report
    assert len(rows) == expected_report["kept"]
    assert [r["extra_info"]["index"] for r in rows] == list(range(len(rows)))
    assert convert(name)[0] == rows  # stable across runs
    default_split = "train" if name in TRAINING else "test"
    for r in rows:
        assert domain_of(r["data_source"]) == domain
        assert r["extra_info"]["split"] == default_split
        prompt, truth = r["prompt"][-1]["content"], r["reward_model"]["ground_truth"]
        if domain == "math":
            assert isinstance(truth, str) and truth.strip()
            assert prompt.endswith(CHOICE_INSTRUCTION if name in {"gpqa_diamond", "mmlu_pro"} else MATH_INSTRUCTION)
        elif domain == "logic":
            assert isinstance(truth, str) and "<answer>" in prompt
        elif domain == "countdown":
            assert isinstance(truth["target"], int) and all(isinstance(n, int) for n in truth["numbers"])
        else:
            tests = json.loads(truth)
            assert set(tests) in ({"test", "entry_point"}, {"test", "entry_point", "prefix"}, {"inputs", "outputs"})
            assert tests.get("entry_point", "x").isidentifier()
            assert "```python" in prompt
    for row, (prompt, truth) in checked.items():
        if prompt is not None:
            assert rows[row]["prompt"] == [{"role": "user", "content": prompt}]
        assert rows[row]["reward_model"]["ground_truth"] == truth


@pytest.mark.parametrize("name", sorted(n for n, case in CASES.items() if case[2] in ("math", "logic")))
def test_reference_answers_score_one_with_the_project_verifiers(name):
    for r in convert(name)[0]:
        truth = r["reward_model"]["ground_truth"]
        completion = f"<answer>{truth}</answer>" if CASES[name][2] == "logic" else f"So it is \\boxed{{{truth}}}."
        assert compute_score(r["data_source"], completion, truth)["score"] == 1.0, (name, truth)


def test_guru_keeps_reference_pass_rates_and_metadata():
    rows, _ = convert("guru_math")
    assert [(r["extra_info"]["weak_pass_rate"], r["extra_info"]["strong_pass_rate"]) for r in rows] == [
        (0.875, 1.0), (0.25, 0.5), (0.0, 0.125)]
    assert rows[0]["extra_info"]["dataset"] == "math__merged_deduped_dapo_or1_dataset"
    assert rows[0]["prompt"][0]["content"] == "What is $1+1$?\n\n" + MATH_INSTRUCTION  # GURU's own suffix replaced
    code, _ = convert("guru_code")
    assert code[0]["extra_info"]["difficulty"] == "Easy"
    truth = json.loads(code[0]["reward_model"]["ground_truth"])
    assert truth["entry_point"] == "Solution" and truth["prefix"].startswith("from typing import *")
    lcb = json.loads(code[1]["reward_model"]["ground_truth"])  # LiveCodeBench: no prefix shipped, imports added
    assert lcb["entry_point"] == "Solution" and lcb["prefix"].startswith("from typing import *")
    assert json.loads(code[2]["reward_model"]["ground_truth"])["entry_point"] == "add"
    assert code[2]["prompt"][0]["content"].endswith(PROGRAM_INSTRUCTION)  # PrimeIntellect asked for no code block
    logic, _ = convert("guru_logic")
    assert "logic__zebra_puzzle_dataset" not in {r["data_source"] for r in logic}


def test_guru_folder_gives_training_files_to_training_and_validation_files_to_validation():
    """A whole GURU download holds train/ and online_eval/: neither converter reads the other's files."""
    train, _ = convert("guru_code")
    assert {r["extra_info"]["source_file"] for r in train} == {
        "codegen__leetcode2k_1.parquet", "codegen__livecodebench_1.parquet", "codegen__primeintellect_1.parquet",
        "codegen__taco_1.parquet"}
    for name, benchmark, gurus in [("guru_livecodebench", "livecodebench", {"codegen__livecodebench"}),
                                   ("guru_ordering_puzzles", "ordering_puzzles", {"logic__ordering_puzzle_dataset"}),
                                   ("guru_arc_agi", "arc_agi", {"logic__arcagi1"})]:
        rows, _ = convert(name)
        assert {r["data_source"] for r in rows} == {benchmark}  # the name validation metrics and eval.tables use
        assert {r["extra_info"]["dataset"] for r in rows} == gurus
        assert all(r["extra_info"]["split"] == "test" and "weak_pass_rate" not in r["extra_info"] for r in rows)
    arc, _ = convert("guru_arc_agi")  # the renamed file's copy of task A is the duplicate
    assert [r["extra_info"]["source_file"] for r in arc] == ["logic__arcagi1_2.parquet"] * 2


@pytest.mark.parametrize("name", sorted(SOLUTIONS))
def test_code_ground_truths_accept_right_and_reject_wrong_solutions(name):
    rows, _ = convert(name)
    for row, right, wrong in SOLUTIONS[name]:
        assert passes(rows[row], right), (name, row)
        assert not passes(rows[row], wrong), (name, row)
    if name == "livecodebench":  # public + decoded private tests
        assert json.loads(rows[0]["reward_model"]["ground_truth"])["inputs"] == ["1 2\n", "10 20\n", "0 0\n"]


def test_gpqa_options_are_shuffled_reproducibly_and_the_letter_points_at_the_answer():
    rows, _ = convert("gpqa_diamond")
    correct = ["Photon", "7", "DNA"]
    for row, answer in zip(rows, correct, strict=True):
        options = dict(line.split(". ", 1) for line in row["prompt"][0]["content"].split("\n\n")[1].splitlines())
        assert sorted(options) == ["A", "B", "C", "D"]
        assert options[row["reward_model"]["ground_truth"]] == answer
    assert len({r["reward_model"]["ground_truth"] for r in rows}) > 1  # not always the same letter


def test_openr1_length_filter_and_sampling():
    calls: list[str] = []

    def count_words(text: str) -> int:
        calls.append(text)
        return len(text.split())

    rows, report = convert("openr1_math", max_tokens=50, count_tokens=count_words)
    assert report == {"kept": 1, "no_verified_generation": 2, "too_long": 1, "no_solution": 0, "not_sampled": 0}
    assert rows[0]["extra_info"]["source_id"] == "4b1a4c4e-0001"
    assert calls and all(len(t.encode()) > 50 for t in calls)  # short texts never reach the tokenizer
    sampled, report = convert("openr1_math", sample_size=1)
    assert report["kept"] == 1 and report["not_sampled"] == 1
    assert [r["extra_info"]["index"] for r in sampled] == [0]
    assert sampled == convert("openr1_math", sample_size=1)[0]  # seeded
    assert openr1.MAX_TOKENS == 8192


def test_openr1_keeps_the_reference_solution(tmp_path):
    """ADS preprocessing reads each row's reference solution (data_prep.ads_clusters' default
    --solution-field extra_info.solution); the CLI writes the paper's seeded 11.5k sample of the pool."""
    from data_prep.ads.texts import solution_of
    from data_prep.schema import read_rows

    rows, report = convert("openr1_math")
    assert [r["extra_info"]["solution"] for r in rows] == ["The answer is 2.", "The answer is 12."]
    assert openr1.main(["--input", str(HUB / "openr1_math_default.parquet"), "--out", str(tmp_path),
                        "--sample-size", "1"]) == 0
    (row,) = read_rows(tmp_path / "openr1_math_11k" / "train.parquet")
    assert row == convert("openr1_math", sample_size=1)[0][0]
    assert solution_of(row, "extra_info.solution") == row["extra_info"]["solution"]
    assert openr1.PAPER_SAMPLE_SIZE == 11500
    bare = HUB / "openr1_math_default.parquet"
    import pandas as pd

    frame = pd.read_parquet(bare)
    frame["solution"] = ""
    frame.to_parquet(tmp_path / "no_solution.parquet")
    report = {}
    assert openr1.convert(str(tmp_path / "no_solution.parquet"), report=report) == []
    assert report["no_solution"] == 2 and report["kept"] == 0


@pytest.mark.parametrize("name, fixture, field, row", [
    ("math500", "bad/math500_missing_answer.jsonl", "answer", 1),
    ("aime25", "bad/aime25_empty_problem.jsonl", "problem", 1),
    ("guru_math", "bad/math__nan_pass_rate.parquet", "qwen3_30b_pass_rate", 1),
    ("math500", "bad/math500_duplicate_id.jsonl", "unique_id", 2),
    ("math500", "bad", "<file>", None),  # a folder where the source publishes one file
])
def test_bad_input_names_file_row_and_field(name, fixture, field, row):
    with pytest.raises(DataError) as err:
        REGISTRY[name](str(HUB / fixture))
    message = str(err.value)
    assert (err.value.field, err.value.row) == (field, row)
    assert Path(fixture).name in message and f"'{field}'" in message
    assert row is None or f"row {row}," in message


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No hub access and an empty cache, whether or not ``datasets`` was imported already."""
    import datasets
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_offline_hub_load_says_what_to_download(name, offline):
    with pytest.raises(RuntimeError) as err:
        REGISTRY[name](None)
    message = str(err.value)
    assert f"https://huggingface.co/datasets/{CASES[name][1]}" in message
    assert "--input PATH" in message


def test_cli_converts_a_local_copy_and_keeps_the_converters_split(tmp_path):
    import subprocess
    import sys

    from data_prep.schema import read_rows

    proc = subprocess.run([sys.executable, "-m", "data_prep", "math500", "--input", str(HUB / "math500_test.jsonl"),
                           "--out", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rows = read_rows(tmp_path / "math500" / "test.parquet")  # evaluation sets default to "test"
    assert rows and all(r["extra_info"]["split"] == "test" for r in rows)

    bad = subprocess.run([sys.executable, "-m", "data_prep", "math500", "--input",
                          str(HUB / "bad" / "math500_missing_answer.jsonl"), "--out", str(tmp_path / "bad")],
                         capture_output=True, text=True)
    assert bad.returncode != 0
    assert "math500_missing_answer.jsonl, row" in bad.stderr and "field" in bad.stderr


COG_BEHAV = HUB / "cog_behav_all_strategies_train.jsonl"  # the generator's {"query", "completion"} lines


def test_cog_behav_sft_keeps_the_course_rows_and_counts_the_verifiers_outcomes(tmp_path):
    """Asap7772/cog_behav_all_strategies (the paper's SFT data) -> verl SFT rows: Qwen2.5's default system message,
    the query and the completion verbatim, every row kept; the hub's parquet copy gives the same rows."""
    import pandas as pd

    from data_prep import cog_behav_sft

    source = [json.loads(line) for line in COG_BEHAV.read_text().splitlines()]
    out = tmp_path / "cog_behav" / "train.parquet"
    assert cog_behav_sft.main(["--input", str(COG_BEHAV), "--out", str(out)]) == 0
    rows = pd.read_parquet(out).to_dict("records")
    assert [int(r["index"]) for r in rows] == list(range(len(source))) == [0, 1, 2, 3]
    for row, src in zip(rows, source):
        assert [dict(m) for m in row["messages"]] == [
            {"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": src["query"]},
            {"role": "assistant", "content": src["completion"]}]
        assert row["data_source"] == "cog_behav_all_strategies"
    summary = json.loads(out.with_suffix(".json").read_text())
    # rows 0-1 solve their task, row 2 answers 15 - 6 + 4 = 13 for 14, row 3 stops before an answer
    assert {k: summary[k] for k in ("rows", "correct", "formatted_wrong", "no_answer")} == {
        "rows": 4, "correct": 2, "formatted_wrong": 1, "no_answer": 1}
    assert summary["numbers_per_task"] == {"3": 2, "4": 2}
    assert (summary["target_min"], summary["target_max"]) == (14, 23)

    pd.DataFrame(source).to_parquet(tmp_path / "train.parquet")
    hub_rows, counts = cog_behav_sft.convert(str(tmp_path / "train.parquet"), "train")
    assert [r["messages"] for r in hub_rows] == [[dict(m) for m in r["messages"]] for r in rows]
    assert counts == {k: v for k, v in summary.items() if k not in ("input", "output")}
    test_rows, _ = cog_behav_sft.convert(str(HUB / "cog_behav_all_strategies_test.jsonl"), "test")
    assert len(test_rows) == 1 and "equals 15." in test_rows[0]["messages"][1]["content"]
    with pytest.raises(ValueError, match="splits"):
        cog_behav_sft.convert(str(COG_BEHAV), "validation")


@pytest.mark.parametrize("change, field", [
    ({"query": "Make 24 from 3, 8 and 1."}, "query"),  # not the Countdown question
    ({"completion": "  "}, "completion"),
    ({"completion": None}, "completion"),
])
def test_cog_behav_sft_bad_input_names_file_row_and_field(tmp_path, change, field):
    from data_prep import cog_behav_sft

    lines = [json.loads(line) for line in COG_BEHAV.read_text().splitlines()]
    lines[1].update(change)
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(DataError) as err:
        cog_behav_sft.convert(str(path), "train")
    assert (err.value.field, err.value.row) == (field, 1) and "bad.jsonl" in str(err.value)


def test_cog_behav_sft_offline_says_what_to_download(offline):
    from data_prep import cog_behav_sft

    with pytest.raises(RuntimeError) as err:
        cog_behav_sft.convert(None, "train")
    assert "https://huggingface.co/datasets/Asap7772/cog_behav_all_strategies" in str(err.value)
    assert "--input PATH" in str(err.value)
