"""Code verifier: run the completion's program in the sandbox against the ground truth's tests.

The program is the last fenced code block (```python / ```py / ``` ...```); without a fence, the
whole completion if it parses as Python. Ground truth (a dict or its JSON string; lists may be numpy
arrays, as read from parquet):

* HumanEval style ``{"test": str, "entry_point": str}`` with an optional ``"prefix"`` (imports and
  helper classes the starter code assumes, e.g. LeetCode's ``ListNode``): runs prefix + program + test +
  ``check(entry_point)``, passes iff the exit status is 0;
* stdin/stdout ``{"inputs": [str], "outputs": [str]}``: one run per case, passes iff every stdout
  matches after stripping trailing whitespace on each line and trailing newlines.

``score`` never raises: malformed ground truth (logged) and sandbox failures score 0.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from verl_ext.rewards import python_ast
from verl_ext.rewards.sandbox import run_python

logger = logging.getLogger(__name__)

FENCE_RE = re.compile(r"```(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
DEFAULT_TIMEOUT_S = 5.0


def extract_program(solution_str: str) -> str | None:
    """The last fenced code block, else the whole text if it is non-empty Python, else None."""
    blocks = FENCE_RE.findall(solution_str)
    if blocks:
        return blocks[-1]
    if not solution_str.strip():
        return None
    try:
        python_ast.parse(solution_str)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    return solution_str


def parse_ground_truth(ground_truth: Any) -> dict[str, Any]:
    """Normalise to ``{"test", "entry_point", "prefix"}`` or ``{"inputs", "outputs"}`` (lists of str); raises ValueError."""
    if isinstance(ground_truth, (str, bytes)):
        ground_truth = json.loads(ground_truth)
    if not isinstance(ground_truth, Mapping):
        raise ValueError(f"ground truth is a {type(ground_truth).__name__}, not a mapping")
    if "test" in ground_truth and "entry_point" in ground_truth:
        test, entry_point = ground_truth["test"], ground_truth["entry_point"]
        if not isinstance(test, str) or not isinstance(entry_point, str) or not entry_point.isidentifier():
            raise ValueError("'test' must be a str and 'entry_point' an identifier")
        prefix = ground_truth.get("prefix") or ""
        if not isinstance(prefix, str):
            raise ValueError("'prefix' must be a str")
        return {"test": test, "entry_point": entry_point, "prefix": prefix}
    if "inputs" in ground_truth and "outputs" in ground_truth:
        inputs, outputs = _strings(ground_truth["inputs"]), _strings(ground_truth["outputs"])
        if not inputs or len(inputs) != len(outputs):
            raise ValueError(f"{len(inputs)} inputs for {len(outputs)} outputs")
        return {"inputs": inputs, "outputs": outputs}
    raise ValueError(f"unknown ground truth keys {sorted(map(str, ground_truth))}")


def _strings(values: Any) -> list[str]:
    """A list of str from a list, tuple or numpy array of str (``numpy.str_`` is a str subclass)."""
    if isinstance(values, (str, bytes, Mapping)):
        raise ValueError("expected a list of strings")
    items = list(values)
    if not all(isinstance(v, str) for v in items):
        raise ValueError("expected a list of strings")
    return [str(v) for v in items]


def normalize_output(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.splitlines()).rstrip("\n")


def score(
    solution_str: str, ground_truth: Any, *, timeout_s: float = DEFAULT_TIMEOUT_S, memory_mb: int = 1024
) -> dict[str, float | int]:
    """``{"score": 0.0|1.0, "has_answer": 0|1, "timeout": 0|1}``; ``timeout_s`` is per run (per case)."""
    result: dict[str, float | int] = {"score": 0.0, "has_answer": 0, "timeout": 0}
    try:
        program = extract_program(solution_str)
        if program is None:
            return result
        result["has_answer"] = 1
        try:
            truth = parse_ground_truth(ground_truth)
        except (ValueError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
            logger.warning("code verifier: malformed ground truth (%s); scoring 0", exc)
            return result
        if "test" in truth:
            source = f"{truth['prefix']}\n{program}\n{truth['test']}\ncheck({truth['entry_point']})\n"
            cases = [(source, "", None)]
        else:
            cases = [(program, stdin, expected) for stdin, expected in zip(truth["inputs"], truth["outputs"])]
        for source, stdin, expected in cases:
            run = run_python(source, stdin, timeout_s=timeout_s, memory_mb=memory_mb)
            if run.timed_out:
                result["timeout"] = 1
            if run.returncode != 0:
                return result
            if expected is not None and normalize_output(run.stdout) != normalize_output(expected):
                return result
        result["score"] = 1.0
    except Exception:  # the reward must never take down training; a sandbox/IO failure scores 0
        logger.exception("code verifier failed; scoring 0")
    return result
