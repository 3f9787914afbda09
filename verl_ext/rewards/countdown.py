"""Countdown verifier (Yan, "Progress-Aware Prompt Sampling", CS224R, §3.1-3.2): 0.0 no answer, 0.1 malformed or
wrong, 1.0 correct.

The expression is evaluated by walking its AST (numbers, + - * /, unary +/-, parentheses only);
nothing is ever passed to ``eval``.
"""

from __future__ import annotations

import ast
import json
import operator
import re
from typing import Any

from verl_ext.rewards import python_ast

ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
THINK_RE = re.compile(r"<think>")
ALLOWED_RE = re.compile(r"^[\d+\-*/().\s]+$")
INT_RE = re.compile(r"\d+")
MAX_EXPRESSION_CHARS = 200

FORMAT_SCORE = 0.1
CORRECT_SCORE = 1.0

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_UNOPS = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def parse_ground_truth(ground_truth: Any) -> tuple[int, list[int]]:
    """``{"target": int, "numbers": [int, ...]}`` (or its JSON string) -> (target, numbers)."""
    if isinstance(ground_truth, (str, bytes)):
        ground_truth = json.loads(ground_truth)
    target = ground_truth["target"]
    numbers = [int(n) for n in list(ground_truth["numbers"])]
    return int(target), numbers


def safe_eval(expression: str) -> float:
    """Value of an arithmetic expression over numbers with + - * / and parentheses.

    Raises ``ValueError`` on anything else (names, calls, powers, ...) and ``ZeroDivisionError``.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError("expression too long")
    tree = python_ast.parse(expression.strip(), mode="eval")

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNOPS:
            return _UNOPS[type(node.op)](walk(node.operand))
        raise ValueError(f"disallowed syntax: {type(node).__name__}")

    return float(walk(tree))


def format_diagnostics(solution_str: str) -> dict[str, int]:
    """Counts used by the evaluation's format diagnostics."""
    answers = ANSWER_RE.findall(solution_str)
    return {
        "has_answer": int(bool(answers)),
        "multiple_answers": int(len(answers) > 1),
        "multiple_think": int(len(THINK_RE.findall(solution_str)) > 1),
    }


def score(solution_str: str, ground_truth: Any) -> dict[str, float | int]:
    """Score one completion; returns ``score`` and diagnostics (``parse_error``)."""
    diag = format_diagnostics(solution_str)
    result: dict[str, float | int] = {"score": 0.0, "parse_error": 0, **diag}
    answers = ANSWER_RE.findall(solution_str)
    if not answers:
        return result
    target, numbers = parse_ground_truth(ground_truth)
    expression = answers[-1].strip()
    result["score"] = FORMAT_SCORE
    if not ALLOWED_RE.match(expression):
        result["parse_error"] = 1
        return result
    if sorted(int(n) for n in INT_RE.findall(expression)) != sorted(numbers):
        return result
    try:
        value = safe_eval(expression)
    except (ValueError, SyntaxError, ZeroDivisionError, OverflowError, RecursionError, TypeError):
        result["parse_error"] = 1
        return result
    if abs(value - target) < 1e-5:
        result["score"] = CORRECT_SCORE
    return result
