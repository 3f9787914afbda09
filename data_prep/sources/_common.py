"""Shared pieces of the hub-dataset converters: reading a source, field access, prompts, reports.

A source is read either from the Hugging Face hub (``datasets.load_dataset``) or from a local copy
in its own published format (a file, or a folder of files for sources published in several files).
Every record carries its file and row, so a bad value stops with a :class:`DataError` naming both.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from data_prep.schema import DataError, ground_truth_json, iter_records, record_count, validate_rows

log = logging.getLogger("data_prep.sources")

Converter = Callable[..., list[dict]]

PROGRAM_INSTRUCTION = "Reply with your complete solution in a single ```python code block."
CHOICE_INSTRUCTION = (
    "Let's think step by step and output the final answer (the letter of the correct option) within \\boxed{}."
)
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# Imports LeetCode-style starter code uses without importing them (``List``, ``deque``, ...).
LEETCODE_IMPORTS = (
    "from typing import *\nfrom collections import *\nfrom functools import *\nfrom itertools import *\n"
    "from heapq import *\nfrom bisect import *\nfrom math import *\nimport math\nimport string\nimport re\n"
)


@dataclass(frozen=True)
class Hub:
    """Where a source lives on the Hugging Face hub, and which local files stand in for it."""

    repo: str
    config: str | None = None
    split: str | None = None  # the hub split; None: the split asked for
    files: tuple[str, ...] = ()  # repo files loaded one by one (their schemas differ)
    globs: tuple[str, ...] = ()  # multi-file sources: patterns of the files taken from a local folder
    note: str = ""  # extra download advice (gated access, file names)

    def advice(self, split: str, err: Exception) -> str:
        config, split = self.config or "default", self.split or split
        what = ", ".join(self.files) or f"the data file of config '{config}', split '{split}'"
        note = f" ({self.note})" if self.note else ""
        where = "the folder holding them (or one of them)" if self.globs else "the file"
        return (
            f"could not load {self.repo} from the Hugging Face hub ({type(err).__name__}: {err}). "
            f"Download {what} from https://huggingface.co/datasets/{self.repo}{note} and pass {where} "
            f"with --input PATH."
        )


@dataclass(frozen=True)
class Record:
    """One source row with its origin, for error messages."""

    source: str
    row: int
    data: dict

    def fail(self, field: str, problem: str) -> DataError:
        return DataError(self.source, self.row, field, problem)

    def get(self, *path: str) -> Any:
        """Value at a (nested) field; ``None`` when absent or null (pandas reads null as NaN)."""
        value: Any = self.data
        for key in path:
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return None if isinstance(value, float) and math.isnan(value) else value

    def require(self, *path: str) -> Any:
        value = self.get(*path)
        if value is None:
            raise self.fail(".".join(path), "missing (no such column, or a null / NaN value)")
        return value

    def text(self, *path: str) -> str:
        """A non-empty string field."""
        value = self.require(*path)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(".".join(path), f"empty or not text: {value!r}")
        return value.strip()

    def chat(self, field: str = "prompt") -> tuple[str | None, str]:
        """(system message or None, last user message) of a chat-message list field."""
        messages = self.require(field)
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise self.fail(field, "not a list of chat messages")
        users = [m.get("content") for m in messages if m.get("role") == "user"]
        systems = [m.get("content") for m in messages if m.get("role") == "system"]
        if not users or not isinstance(users[-1], str) or not users[-1].strip():
            raise self.fail(field, "no non-empty user message")
        return (systems[0] if systems else None), users[-1].strip()


def read_source(input_path: str | None, hub: Hub, split: str, desc: str) -> Iterator[Record]:
    """Records of the hub dataset, or of the local file / folder ``input_path``, with progress."""
    tables = _hub_tables(hub, split) if input_path is None else _local_tables(Path(input_path), hub.globs)
    for source, rows, total in tables:
        for row, data in enumerate(tqdm(rows, total=total, desc=f"{desc}: {Path(source).name}", unit="row")):
            yield Record(source, row, dict(data))


def _local_tables(path: Path, globs: tuple[str, ...]) -> Iterator[tuple[str, Iterable[dict], int | None]]:
    if path.is_dir() and not globs:
        raise DataError(path, None, "<file>", "expected a file in the source's own format, got a folder")
    files = sorted({p for g in globs for p in path.glob(g) if p.is_file()}) if path.is_dir() else [path]
    if not files:
        raise DataError(path, None, "<file>", f"no files matching {' or '.join(globs)} in this folder")
    for file in files:
        yield str(file), iter_records(file), record_count(file)


def _hub_tables(hub: Hub, split: str) -> Iterator[tuple[str, Iterable[dict], int]]:
    try:
        import datasets
    except ImportError as e:
        raise RuntimeError(hub.advice(split, e)) from e
    for file in hub.files or (None,):
        label = f"hf://datasets/{hub.repo}/{file}" if file else f"hf://datasets/{hub.repo}/{hub.split or split}"
        try:
            table = datasets.load_dataset(hub.repo, hub.config, split=hub.split or split, data_files=file)
        except Exception as e:  # offline, gated, renamed: all end in the same download advice
            raise RuntimeError(hub.advice(split, e)) from e
        yield label, table, len(table)


def finish(rows: list[dict], input_path: str | None, hub: Hub) -> list[dict]:
    """Validate the converted rows (schema contract) and return them."""
    validate_rows(rows, input_path or hub.repo)
    return rows


def report_counts(name: str, counts: dict[str, int], report: dict | None) -> None:
    """Log what a converter kept and removed (per filter); copy the counts into ``report`` if given."""
    for key, n in counts.items():
        log.info("%s: %s = %d", name, key, n)
    if report is not None:
        report.update(counts)


def claim_id(seen: dict, rec: Record, field: str) -> Any:
    """The record's source id; a repeated id is bad input."""
    value = rec.require(field)
    if value in seen:
        raise rec.fail(field, f"duplicate id {value!r} (first at row {seen[value]})")
    seen[value] = rec.row
    return value


def answer_text(rec: Record, field: str) -> str:
    """A reference answer as a string (numbers as published, integral floats without '.0')."""
    value = rec.require(field)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise rec.fail(field, f"not an answer string or number: {value!r}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    if not text:
        raise rec.fail(field, "empty answer")
    return text


def with_instruction(text: str, marker: str, instruction: str) -> str:
    """``text`` unchanged if it already asks for ``marker``, else with ``instruction`` appended."""
    return text if marker in text else f"{text}\n\n{instruction}"


def choice_question(question: str, options: list[str]) -> str:
    """A lettered multiple-choice prompt asking for the letter in ``\\boxed{}``."""
    lines = "\n".join(f"{LETTERS[i]}. {option}" for i, option in enumerate(options))
    return f"{question}\n\n{lines}\n\n{CHOICE_INSTRUCTION}"


def humaneval_truth(test: str, entry_point: str, prefix: str = "") -> str:
    """HumanEval-style code ground truth: ``prefix + solution + test`` then ``check(entry_point)``.

    ``entry_point`` is an identifier the solution defines; ``prefix`` (imports / helper classes that
    the problem's starter code uses unimported) is only set when needed.
    """
    truth = {"test": test, "entry_point": entry_point} | ({"prefix": prefix} if prefix else {})
    return ground_truth_json(truth)


def stdio_truth(rec: Record, inputs: Any, outputs: Any) -> str:
    """stdin/stdout code ground truth; the two lists must be non-empty, equally long and textual."""
    ok = isinstance(inputs, list) and isinstance(outputs, list) and inputs and len(inputs) == len(outputs)
    if not ok or not all(isinstance(t, str) for t in inputs + outputs):
        raise rec.fail("reward_model.ground_truth", "stdin/stdout tests need equally long non-empty lists of strings")
    return ground_truth_json({"inputs": inputs, "outputs": outputs})
