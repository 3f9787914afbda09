"""The text ADS feeds its models per row: ``Question:\\n{question}\\n\\nAnswer:\\n{solution}`` ([authors' code]
Richard-zrx/ADS src/compute_difficulty.py and src/data_utils.py, ``question_plus_cot``), and the input checks."""

from __future__ import annotations

import math
from pathlib import Path

from data_prep.ads.settings import Settings
from data_prep.schema import DataError, read_rows, validate_rows
from data_prep.sft_messages import worked_solution

PREFIX_TEMPLATE = "Question:\n{question}\n\nAnswer:\n"  # [authors' code] src/compute_difficulty.py
COLUMNS = ("cluster_id", "rank_in_cluster", "cluster_size", "difficulty")
WORKED = "worked"


def question_of(row: dict) -> str:
    """The prompt's user messages, each stripped, empty ones left out, joined by a blank line (``""`` when there
    is none) ([authors' code] Richard-zrx/ADS @ a4717d3 src/data_utils.py:55-65, 76-79: ``user_only``). The
    authors fall back to every message's text when no user message has any (:80-81); here such a row is
    refused by :func:`load_samples` [decision]: it holds no question to embed or to train on."""
    users = (str(m.get("content") or "").strip() for m in row["prompt"] if m.get("role") == "user")
    return "\n\n".join(text for text in users if text)


def solution_of(row: dict, field: str) -> str | None:
    """The reference solution at dotted path ``field`` (or the worked answer), None when absent or empty."""
    if field == WORKED:
        return worked_solution(row)
    value = row
    for key in field.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    text = str(value).strip()
    return text or None


def load_samples(settings: Settings) -> tuple[list[dict], list[str], list[str]]:
    """Rows, questions and solutions of the input; every problem raises :class:`DataError` first."""
    path = Path(settings.input)
    if not path.is_file():
        raise DataError(path, None, "<file>", "no such file")
    rows = read_rows(path)
    validate_rows(rows, path)
    questions, solutions = [], []
    for r, row in enumerate(rows):
        question = question_of(row)
        if not question:
            raise DataError(path, r, "prompt", "empty prompt: no user message text")
        try:
            solution = solution_of(row, settings.solution_field)
        except (KeyError, ValueError) as e:
            raise DataError(path, r, settings.solution_field, f"no worked solution: {e}") from None
        if solution is None:
            worked = settings.solution_field == WORKED
            hint = "" if worked else " (embedded arithmetic / countdown rows: --solution-field worked)"
            raise DataError(path, r, settings.solution_field, f"missing or empty reference solution{hint}")
        for column in COLUMNS:
            name = settings.prefix + column
            if name in row["extra_info"] and not settings.overwrite:
                raise DataError(path, r, f"extra_info.{name}", "already present (--overwrite, or another --prefix)")
        questions.append(question)
        solutions.append(solution)
    if len(rows) < settings.clusters:
        raise DataError(path, None, "<rows>", f"{len(rows)} samples, fewer than the {settings.clusters} clusters "
                        f"requested (--clusters)")
    return rows, questions, solutions
