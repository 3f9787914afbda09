"""Countdown verifier: the cases of Yan, "Progress-Aware Prompt Sampling", CS224R, §3.1-3.2, safe evaluation, and a
cross-check with reasoning-gym's scorer."""

import pytest

from verl_ext.rewards import countdown
from verl_ext.rewards.countdown import safe_eval, score

GT = {"target": 24, "numbers": [4, 6, 1]}


@pytest.mark.parametrize(
    "completion, expected",
    [
        ("<think>4*6=24, times 1</think><answer>4 * 6 * 1</answer>", 1.0),
        ("<answer>(4 * 6) / 1</answer>", 1.0),
        ("no tags at all: 4*6*1", 0.0),
        ("<answer></answer>", 0.1),
        ("<answer>4 * 6</answer>", 0.1),  # a number unused
        ("<answer>4 * 6 * 1 * 1</answer>", 0.1),  # a number used twice
        ("<answer>4 + 6 + 1</answer>", 0.1),  # wrong value
        ("<answer>4 * 6 * 1 = 24</answer>", 0.1),  # '=' not allowed
        ("<answer>4 ** 6 * 1</answer>", 0.1),  # power is not arithmetic here
        ("<answer>(4 * 6 * 1</answer>", 0.1),  # syntax error
        ("<answer>4 / (6 - 6) * 1</answer>", 0.1),  # wrong numbers anyway
        ("<answer>4 + 6 + 1</answer> then <answer>4 * 6 * 1</answer>", 1.0),  # the LAST answer counts
        ("<answer>4 * 6 * 1</answer> then <answer>4 + 6 + 1</answer>", 0.1),
    ],
)
def test_spec_cases(completion, expected):
    assert score(completion, GT)["score"] == expected


def test_division_by_zero_is_a_format_score():
    assert score("<answer>4 / (1 - 1) + 6</answer>", {"target": 3, "numbers": [4, 1, 1, 6]})["score"] == 0.1


def test_fractional_intermediate_within_tolerance():
    assert score("<answer>(1 + 1/3) * 3 * 6</answer>", {"target": 24, "numbers": [1, 1, 3, 3, 6]})["score"] == 1.0


def test_ground_truth_as_json_string_and_arrays():
    import numpy as np

    assert score("<answer>4*6*1</answer>", '{"target": 24, "numbers": [4, 6, 1]}')["score"] == 1.0
    assert score("<answer>4*6*1</answer>", {"target": np.int64(24), "numbers": np.array([4, 6, 1])})["score"] == 1.0


@pytest.mark.parametrize("expr", ["__import__('os').system('true')", "(lambda: 1)()", "[1][0]", "1 if 1 else 2", "2 ** 3"])
def test_safe_eval_rejects_non_arithmetic(expr):
    with pytest.raises((ValueError, SyntaxError)):
        safe_eval(expr)


def test_safe_eval_arithmetic():
    assert safe_eval("(1 + 2) * 3 - 4 / 2") == 7.0
    assert safe_eval("-3 + +4") == 1.0
    with pytest.raises(ValueError):
        safe_eval("1+" * 200 + "1")


def test_format_diagnostics():
    d = score("<think>a</think><think>b</think><answer>1</answer><answer>4*6*1</answer>", GT)
    assert (d["has_answer"], d["multiple_answers"], d["multiple_think"]) == (1, 1, 1)
    d = score("<think>a</think> nothing", GT)
    assert (d["has_answer"], d["multiple_answers"], d["multiple_think"], d["score"]) == (0, 0, 0, 0.0)
    assert score("<answer>4 ^ 6 ^ 1</answer>", GT)["parse_error"] == 1


def _mutations(expression: str) -> list[str]:
    return [
        expression.replace("+", "-", 1) if "+" in expression else expression.replace("-", "+", 1),
        expression + " + 1",
        "(" + expression + ") * 2",
    ]


def test_cross_check_with_reasoning_gym_scorer():
    """On generated tasks, our verdict 'fully correct' equals reasoning-gym's (score 1.0) for the reference
    expression and for mutated ones."""
    import reasoning_gym

    ds = reasoning_gym.create_dataset("countdown", size=60, seed=7, min_numbers=3, max_numbers=4, max_target=100, min_target=1)
    checked = 0
    for entry in ds:
        gt = {"target": entry["metadata"]["target"], "numbers": entry["metadata"]["numbers"]}
        for expr in [entry["answer"], *_mutations(entry["answer"])]:
            ours = countdown.score(f"<answer>{expr}</answer>", gt)["score"]
            theirs = ds.score_answer(expr, entry)
            assert (ours == 1.0) == (theirs == 1.0), (expr, gt, ours, theirs)
            checked += 1
        assert countdown.score(f"<answer>{entry['answer']}</answer>", gt)["score"] == 1.0
    assert checked == 240
