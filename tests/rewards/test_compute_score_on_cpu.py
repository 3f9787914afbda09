"""The single reward entry point: dispatch by data_source, fixed numeric keys, never raises."""

import pytest

from verl_ext.rewards import DIAGNOSTIC_KEYS, compute_score
from verl_ext.rewards.data_sources import DOMAINS, EXACT, domain_of

KEYS = {"score", "acc", *DIAGNOSTIC_KEYS}


@pytest.mark.parametrize(
    "data_source, solution, truth, expected",
    [
        ("countdown", "<answer>4*6*1</answer>", {"target": 24, "numbers": [4, 6, 1]}, 1.0),
        ("Jiayi-Pan/Countdown-Tasks-3to4", "<answer>4+6+1</answer>", {"target": 24, "numbers": [4, 6, 1]}, 0.1),
        ("math", "\\boxed{4}", "4", 1.0),
        ("math__deepscaler_preview", "\\boxed{5}", "4", 0.0),
        ("aime24", "\\boxed{204}", "204", 1.0),
        ("logic__ordering_puzzle_dataset", "<answer>a, b</answer>", "a,b", 1.0),
        ("code", "```python\ndef f():\n    return 1\n```", {"test": "def check(c):\n    assert c() == 1\n", "entry_point": "f"}, 1.0),
        ("codegen__leetcode2k", "```python\nprint(int(input()) * 2)\n```", '{"inputs": ["3\\n"], "outputs": ["6\\n"]}', 1.0),
    ],
)
def test_dispatch(data_source, solution, truth, expected):
    result = compute_score(data_source, solution, truth, extra_info={"index": 0})
    assert set(result) == KEYS
    assert all(isinstance(v, (int, float)) for v in result.values())
    assert result["score"] == expected
    assert result["acc"] == float(expected == 1.0)


@pytest.mark.parametrize(
    "data_source, truth",
    [("no_such_source", "1"), ("countdown", "not json"), ("countdown", {"numbers": [1]}), ("code", "{broken")],
)
def test_bad_input_scores_zero_without_raising(data_source, truth):
    result = compute_score(data_source, "<answer>1</answer> ```python\nx=1\n```", truth)
    assert set(result) == KEYS
    assert result["score"] == 0.0


def test_unknown_source_is_flagged():
    assert compute_score("no_such_source", "x", "1")["error"] == 1
    with pytest.raises(KeyError, match="data_sources.py"):
        domain_of("no_such_source")


def test_table_maps_only_to_known_domains():
    assert set(EXACT.values()) <= set(DOMAINS)
    assert domain_of("codegen__taco") == "code" and domain_of("logic__arcagi1") == "logic"


def test_readme_table_matches_the_code():
    import re
    from pathlib import Path

    from verl_ext.rewards.data_sources import PREFIXES

    readme = (Path(__file__).resolve().parents[2] / "verl_ext" / "rewards" / "README.md").read_text()
    block = readme.split("<!-- data-source-table:start -->")[1].split("<!-- data-source-table:end -->")[0]
    exact, prefixes = {}, {}
    for line in block.splitlines()[3:]:
        names, domain = line.strip("| ").rsplit("|", 1)
        for item in names.split(","):
            item = item.strip()
            target = prefixes if item.startswith("prefix") else exact
            for name in re.findall(r"`([^`]+)`", item):
                target[name] = domain.strip()
    assert exact == EXACT
    assert prefixes == dict(PREFIXES)


@pytest.mark.parametrize("data_source", ["gpqa_diamond", "mmlu_pro"])
def test_multiple_choice_benchmarks_score_the_chosen_letter(data_source):
    from verl_ext.rewards import compute_score

    assert compute_score(data_source, r"so the answer is \boxed{\textbf{(D)}}", "D")["score"] == 1.0
    assert compute_score(data_source, r"\boxed{D. 17}", "A")["score"] == 0.0
