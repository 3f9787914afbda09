"""One reward entry point for verl: ``reward.custom_reward_function.name=compute_score``.

Dispatches on ``data_source`` (see :mod:`verl_ext.rewards.data_sources`) to the countdown, math,
logic or code verifier. Always returns the same numeric keys, so verl can stack them as
``reward_extra_info``; never raises.
"""

from __future__ import annotations

import logging
from typing import Any

from verl_ext.rewards.data_sources import domain_of

logger = logging.getLogger(__name__)

DIAGNOSTIC_KEYS = ("has_answer", "multiple_answers", "multiple_think", "parse_error", "timeout", "error")


def _verifier(domain: str):
    # Imported lazily: the code verifier's sandbox and math-verify are only loaded when needed.
    if domain == "countdown":
        from verl_ext.rewards import countdown as mod
    elif domain == "math":
        from verl_ext.rewards import math as mod
    elif domain == "logic":
        from verl_ext.rewards import logic as mod
    else:
        from verl_ext.rewards import code as mod
    return mod.score


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None, **kwargs) -> dict:
    """Score one completion. Returns ``score``, ``acc`` (1.0 iff fully correct) and diagnostics."""
    result: dict[str, float | int] = {"score": 0.0, "acc": 0.0, **{k: 0 for k in DIAGNOSTIC_KEYS}}
    try:
        result.update(_verifier(domain_of(str(data_source)))(solution_str, ground_truth))
    except Exception:  # a verifier bug or malformed ground truth must not kill a training step
        logger.exception("reward failed for data_source=%r", data_source)
        result.update(score=0.0, error=1)
    result["score"] = float(result["score"])
    result["acc"] = float(result["score"] >= 1.0)
    return result


def format_valid(info: dict) -> bool | None:
    """The one rule for a well-formed completion (the selectors' format flags; Yan, "Progress-Aware Prompt
    Sampling", CS224R, §3.3 and Tables 8-9): an explicit
    ``format_valid`` key of the reward's extra info, else its diagnostics: exactly one ``<answer>`` that parses,
    at most one ``<think>``, no error; None when the reward reported neither."""
    if "format_valid" in info:
        return bool(info["format_valid"])
    if not all(k in info for k in DIAGNOSTIC_KEYS):
        return None
    return bool(info["has_answer"]) and not any(info[k] for k in DIAGNOSTIC_KEYS if k != "has_answer")
